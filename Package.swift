// swift-tools-version: 6.0
import PackageDescription

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
    ],
    targets: [
        .target(name: "PluginSDK"),
        .target(name: "PluginHost", dependencies: ["PluginSDK"]),
        .executableTarget(name: "PluginHostExample", dependencies: ["PluginHost"]),
        .testTarget(name: "PluginSDKTests", dependencies: ["PluginSDK"]),
        .testTarget(name: "PluginHostTests", dependencies: ["PluginHost", "PluginSDK"]),
    ],
    swiftLanguageModes: [.v6]
)
