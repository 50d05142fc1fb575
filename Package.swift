// swift-tools-version: 6.0
import PackageDescription

// Test fixtures: plugin libraries the tests load with dlopen. Three Swift plugins sharing a
// kit, a plugin written in C, and deliberately broken C libraries for the loader's refusals.
let swiftTestPlugins = ["Alpha", "Beta", "Gamma"]
let cTestPlugins = ["CPlugin", "Abort", "BadMajor", "BadName", "NewerMinor", "NoVersion", "SmallDescriptor", "NoEntry", "Hostile"]

// The contrib plugins: each a dynamic library (lib<Name>Plugin.so) depending on PluginSDK only.
let contribPlugins = ["AccessToken", "Credentials", "Activity", "Logger", "Signature", "Cache"]

// Each plugin module can also be linked in-process; its library's entry point is a target of its own.
var contribTargets: [Target] {
    contribPlugins.flatMap { name -> [Target] in
        [
            .target(
                name: "\(name)Plugin", dependencies: ["PluginSDK"], path: "PluginsContrib/\(name)",
                exclude: ["README.md", "plugin-config.json", "Entry"]),
            .target(
                name: "\(name)PluginEntry", dependencies: ["PluginSDK", .target(name: "\(name)Plugin")],
                path: "PluginsContrib/\(name)/Entry"),
        ]
    }
}

var contribProducts: [Product] {
    contribPlugins.map { .library(name: "\($0)Plugin", type: .dynamic, targets: ["\($0)PluginEntry"]) }
}

var testFixtureTargets: [Target] {
    [
        .target(name: "TestPluginKit", dependencies: ["PluginSDK"], path: "Tests/Fixtures/Plugins/TestPluginKit"),
        .target(name: "NoopTestPlugin", dependencies: ["PluginSDK"], path: "Tests/Fixtures/Plugins/Noop"),
        .target(name: "TrapTestPlugin", dependencies: ["PluginSDK"], path: "Tests/Fixtures/Plugins/Trap"),
        .target(name: "ForgetfulTestPlugin", dependencies: ["PluginSDK"], path: "Tests/Fixtures/Plugins/Forgetful"),
        .target(name: "GenerationTestPlugin", dependencies: ["PluginSDK"], path: "Tests/Fixtures/Plugins/Generation"),
    ]
        + swiftTestPlugins.map {
            .target(name: "\($0)TestPlugin", dependencies: ["TestPluginKit", "PluginSDK"], path: "Tests/Fixtures/Plugins/\($0)")
        }
        + cTestPlugins.map {
            .target(
                name: "\($0)TestPlugin", dependencies: ["CPluginABI"], path: "Tests/Fixtures/Plugins/\($0)", publicHeadersPath: ".",
                cSettings: [.headerSearchPath("../Shared")])
        }
}

var testFixtureProducts: [Product] {
    (swiftTestPlugins + cTestPlugins + ["Noop", "Trap", "Forgetful", "Generation"]).map {
        .library(name: "\($0)TestPlugin", type: .dynamic, targets: ["\($0)TestPlugin"])
    }
}

/// PluginHost: a Moya-style networking layer whose interceptors can be plugins.
///
/// No external packages: only the toolchain's Swift, Foundation, FoundationNetworking,
/// Dispatch and the test frameworks.
let package = Package(
    name: "PluginHost",
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .library(name: "PluginHost", targets: ["PluginHost"]),
        .library(name: "PluginSDK", targets: ["PluginSDK"]),
        .executable(name: "pluginhost-example", targets: ["PluginHostExample"]),
        .executable(name: "pluginhost-bench", targets: ["PluginHostBench"]),
        .executable(name: "pluginhost", targets: ["pluginhost"]),
    ] + contribProducts + testFixtureProducts,
    targets: [
        .target(name: "CPluginABI"),
        // libcurl, loaded at run time with dlopen: no headers, no link-time dependency.
        .target(name: "CCurlShim"),
        // SHA-256 blocks on the CPU's SHA extensions, chosen at run time (PluginSDK's SHA256).
        .target(name: "CDigest"),
        .target(name: "PluginSDK", dependencies: ["CPluginABI", "CDigest"]),
        .target(name: "PluginHost", dependencies: ["PluginSDK", "CCurlShim"]),
        .executableTarget(name: "PluginHostExample", dependencies: ["PluginHost"]),
        .executableTarget(name: "PluginHostBench", dependencies: ["PluginHost", "PluginSDK"] + contribPlugins.map { .target(name: "\($0)Plugin") }),
        .executableTarget(name: "pluginhost", dependencies: ["PluginHost", "PluginSDK"]),
        .testTarget(name: "PluginSDKTests", dependencies: ["PluginSDK"]),
        .testTarget(name: "PluginHostTests", dependencies: ["PluginHost", "PluginSDK"] + contribPlugins.map { .target(name: "\($0)Plugin") }),
        .testTarget(name: "pluginhostTests", dependencies: ["PluginHost", "PluginSDK"], exclude: ["Golden"]),
    ] + contribTargets + testFixtureTargets,
    swiftLanguageModes: [.v6]
)
