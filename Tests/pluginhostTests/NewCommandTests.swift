import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `pluginhost new`: what it writes, and what it refuses. (Building, bundling and loading the
/// generated projects is `Tests/new-plugins`, run by `Tests/test`.)
@Suite("pluginhost new")
struct NewCommandTests {
    /// A fresh empty directory.
    func scratch() throws -> String {
        let path = NSTemporaryDirectory() + "pluginhost-new-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func writesASwiftPackageAndACProject() async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let swift = try await CLI.run(["new", "my-stamp", "--out", dir + "/swift", "--sdk", CLI.root])
        #expect(swift.status == 0)
        #expect(swift.stdout == "wrote \(dir)/swift (Swift plugin \"my-stamp\"); next: see \(dir)/swift/README.md\n")
        let files = try FileManager.default.subpathsOfDirectory(atPath: dir + "/swift").sorted()
        #expect(
            files == [
                ".gitignore", "Package.swift", "README.md", "Sources", "Sources/MyStampPlugin", "Sources/MyStampPlugin/MyStampPlugin.swift",
                "manifest.json",
            ])
        let package = try String(contentsOfFile: dir + "/swift/Package.swift", encoding: .utf8)
        #expect(package.contains(".package(path: \(CLI.root.debugDescription))"))
        #expect(package.contains(#".library(name: "MyStampPlugin", type: .dynamic, targets: ["MyStampPlugin"])"#))
        let source = try String(contentsOfFile: dir + "/swift/Sources/MyStampPlugin/MyStampPlugin.swift", encoding: .utf8)
        for hook in ["func prepare(", "func willSend(", "func didReceive(", "func process(", "func credential(", "@_cdecl(\"pluginhost_plugin_v1\")"]
        {
            #expect(source.contains(hook), "the Swift template lacks \(hook)")
        }
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/swift/manifest.json"))) as? [String: Any]
        #expect((manifest?["plugins"] as? [[String: Any]])?.first?["name"] as? String == "my-stamp")

        let c = try await CLI.run(["new", "my-stamp", "--lang", "c", "--out", dir + "/c", "--sdk", CLI.root])
        #expect(c.status == 0)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: dir + "/c").sorted() == [
                ".gitignore", "README.md", "manifest.json", "my_stamp.c", "pluginhost.h",
            ])
        let header = try String(contentsOfFile: dir + "/c/pluginhost.h", encoding: .utf8)
        #expect(header == (try String(contentsOfFile: CLI.root + "/Sources/CPluginABI/include/pluginhost.h", encoding: .utf8)))
        let readme = try String(contentsOfFile: dir + "/c/README.md", encoding: .utf8)
        #expect(readme.contains("cc -std=c11 -O2 -shared -fPIC -I. -o libmy_stamp.\(CLI.librarySuffix) my_stamp.c\n"))
    }

    @Test(arguments: [
        ("My_Plugin", "\"My_Plugin\" is not a plugin name: use a lower-case letter, then lower-case letters, digits and '-' (e.g. my-plugin)"),
        ("9lives", "\"9lives\" is not a plugin name: use a lower-case letter, then lower-case letters, digits and '-' (e.g. my-plugin)"),
        ("has space", "\"has space\" is not a plugin name: use a lower-case letter, then lower-case letters, digits and '-' (e.g. my-plugin)"),
        ("", "\"\" is not a plugin name: use a lower-case letter, then lower-case letters, digits and '-' (e.g. my-plugin)"),
    ])
    func refusesABadName(name: String, message: String) async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let output = try await CLI.run(["new", name, "--out", dir + "/p", "--sdk", CLI.root])
        #expect(output.status == 1)
        #expect(output.stderr == "pluginhost: \(message)\n")
        #expect(!FileManager.default.fileExists(atPath: dir + "/p"))
    }

    /// Without --sdk, from a directory outside any checkout: the checkout the CLI was built in.
    @Test func defaultSDKIsTheCheckoutTheCLIWasBuiltIn() async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let output = try await CLI.run(["new", "stamp"], in: dir)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout == "wrote \(dir)/stamp (Swift plugin \"stamp\"); next: see \(dir)/stamp/README.md\n")
        let package = try String(contentsOfFile: dir + "/stamp/Package.swift", encoding: .utf8)
        #expect(package.contains(".package(path: \(CLI.root.debugDescription))"))
    }

    @Test func refusesANonEmptyOutputDirectoryAndLeavesItAlone() async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "keep me".write(toFile: dir + "/notes.txt", atomically: true, encoding: .utf8)
        let output = try await CLI.run(["new", "stamp", "--out", dir, "--sdk", CLI.root])
        #expect(output.status == 6)
        #expect(output.stderr == "pluginhost: \(dir) is not empty (1 entry); choose another --out or remove it\n")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["notes.txt"])
        #expect(try String(contentsOfFile: dir + "/notes.txt", encoding: .utf8) == "keep me")
        // An empty directory is fine.
        try FileManager.default.createDirectory(atPath: dir + "/empty", withIntermediateDirectories: false)
        #expect(try await CLI.run(["new", "stamp", "--out", dir + "/empty", "--sdk", CLI.root]).status == 0)
    }

    /// A name whose module (`<Type>Plugin`) the SDK's package has already (a contrib plugin's, a
    /// test fixture's) or that is a type of PluginSDK: the generated package did not build
    /// (SwiftPM refuses two modules of one name; `ExportablePlugin: ExportablePlugin`).
    @Test(arguments: [
        ("logger", "LoggerPlugin", "a contrib plugin's module"), ("noop-test", "NoopTestPlugin", "a module of its Package.swift"),
        ("alpha-test", "AlphaTestPlugin", "a test plugin's module"),
        ("exportable", "ExportablePlugin", "a type of PluginSDK"),
    ])
    func refusesANameTheSDKHasTaken(name: String, module: String, place: String) async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for language in ["swift", "c"] {
            let output = try await CLI.run(["new", name, "--lang", language, "--out", dir + "/p", "--sdk", CLI.root])
            #expect(output.status == 1)
            #expect(
                output.stderr
                    == "pluginhost: \(name.debugDescription) would make the module \(module), which the SDK already has (\(place)); choose another name\n"
            )
            #expect(!FileManager.default.fileExists(atPath: dir + "/p"))
        }
    }

    /// The project's directories and files get modes the loader accepts whatever the umask (002,
    /// common for users, made a manifest `pluginhost test` refused); a C plugin needs the SDK's header (its absence failed as a write error, exit 6).
    @Test func modesAreSetAndAHeaderlessSDKIsRefusedForC() async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The folders above the output that `new` makes get the same modes (they kept the umask's,
        // and the loader refused the manifest below them); an empty output folder that exists
        // keeps its own (a private 0700 one was opened to everyone).
        try FileManager.default.createDirectory(atPath: dir + "/own", withIntermediateDirectories: false)
        chmod(dir + "/own", 0o700)
        // One group may write loses that (the loader refused the manifest in it).
        try FileManager.default.createDirectory(atPath: dir + "/shared", withIntermediateDirectories: false)
        chmod(dir + "/shared", 0o775)
        for output in ["/p", "/x/y/p", "/own", "/shared"] {
            let made = try await CLI.run(["new", "stamp", "--out", dir + output, "--sdk", CLI.root], umask: "002")
            #expect(made.status == 0)
            let modes = [
                ("", output == "/own" ? 0o700 : 0o755), ("/Sources", 0o755), ("/Sources/StampPlugin", 0o755), ("/manifest.json", 0o644),
                ("/Package.swift", 0o644),
            ]
            for (path, mode) in modes + (output == "/x/y/p" ? [("/..", 0o755), ("/../..", 0o755)] : []) {
                var info = stat()
                #expect(stat(dir + output + path, &info) == 0)
                #expect(info.st_mode & 0o777 == mode, "\(output)\(path): \(String(info.st_mode & 0o777, radix: 8))")
            }
        }
        let sdk = dir + "/sdk"
        try FileManager.default.createDirectory(atPath: sdk + "/Sources/PluginSDK", withIntermediateDirectories: true)
        try "// swift-tools-version:6.0\n".write(toFile: sdk + "/Package.swift", atomically: true, encoding: .utf8)
        let headerless = try await CLI.run(["new", "stamp", "--lang", "c", "--out", dir + "/c", "--sdk", sdk])
        #expect(headerless.status == 1)
        #expect(headerless.stderr == "pluginhost: the SDK at \(sdk) has no readable Sources/CPluginABI/include/pluginhost.h (a C plugin copies it)\n")
    }

    @Test func refusesAnSDKPathWithoutPluginSDKAndAnUnknownLanguage() async throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let noSDK = try await CLI.run(["new", "stamp", "--out", dir + "/p", "--sdk", dir])
        #expect(noSDK.status == 1)
        #expect(
            noSDK.stderr == "pluginhost: --sdk \(dir) holds no PluginSDK (expected Package.swift and Sources/PluginSDK/, a PluginHost checkout)\n")
        let rust = try await CLI.run(["new", "stamp", "--lang", "rust", "--out", dir + "/p", "--sdk", CLI.root])
        #expect(rust.status == 1)
        #expect(rust.stderr == "pluginhost: --lang must be swift or c, not \"rust\"\n")
        #expect(!FileManager.default.fileExists(atPath: dir + "/p"))
    }
}
