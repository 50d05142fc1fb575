import Dispatch
import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Runs synchronous work (a subprocess, a wait) on a Dispatch thread, so it never holds a thread
/// of Swift's cooperative pool.
///
/// The result crosses threads through a lock, not as the continuation's value: when the work ends
/// before the awaiting task has suspended, the task goes on without a synchronisation
/// ThreadSanitizer can see, and it would report the result's fields as a race.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let handoff = Locked<Result<T, any Error>?>(nil)
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            let result = Result { try body() }
            handoff.withLock { $0 = result }
            continuation.resume()
        }
    }
    return try handoff.withLock { $0 }!.get()
}

/// Runs the `pluginhost` executable as a subprocess.
struct CLI {
    /// The platform's suffix of a shared library.
    #if canImport(Darwin)
    static let librarySuffix = "dylib"
    #else
    static let librarySuffix = "so"
    #endif

    static var binDirectory: String {
        if let dir = ProcessInfo.processInfo.environment["PLUGINHOST_BIN_DIR"] { return dir }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug").path
    }

    static var root: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    struct Output {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs the CLI on a Dispatch thread, so the wait never blocks Swift's cooperative pool.
    @discardableResult
    /// - Parameter umask: the file mode creation mask of the CLI's process (through `sh`), else
    ///   the test process's (which tests running meanwhile share: it is never changed here).
    /// - Parameter redirection: a redirection `sh` applies to the CLI's process (`2>/dev/full`).
    static func run(
        _ arguments: [String], environment: [String: String] = [:], in directory: String? = nil, umask: String? = nil,
        redirection: String? = nil
    ) async throws -> Output {
        try await offThePool {
            try runBlocking(arguments, environment: environment, in: directory, umask: umask, redirection: redirection)
        }
    }

    static func runBlocking(
        _ arguments: [String], environment: [String: String] = [:], in directory: String? = nil, umask: String? = nil,
        redirection: String? = nil
    ) throws -> Output {
        let process = Process()
        if umask != nil || redirection != nil {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            let command = (umask.map { "umask \($0) && " } ?? "") + #"exec "$0" "$@""# + (redirection.map { " " + $0 } ?? "")
            process.arguments = ["-c", command, binDirectory + "/pluginhost"] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: binDirectory + "/pluginhost")
            process.arguments = arguments
        }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Output(
            status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
            stderr: withoutLoaderVersionWarnings(String(decoding: stderrData, as: UTF8.self)))
    }

    /// `text` without the dynamic loader's warnings that a library has no symbol versions: the
    /// pycurl wheels' libcurl, which the suite's libcurl 8 runs put on `LD_LIBRARY_PATH`, lacks
    /// the versions FoundationNetworking was linked against (`…/libcurl.so.4: no version
    /// information available (required by …)`), and every process the CLI tests start says so
    /// on its standard error. The program's own lines are kept as they are.
    static func withoutLoaderVersionWarnings(_ text: String) -> String {
        guard text.contains(": no version information available (required by ") else { return text }
        return text.split(separator: "\n", omittingEmptySubsequences: false).filter {
            !($0.contains("/libcurl.so.4: no version information available (required by ") && $0.hasSuffix(")"))
        }.joined(separator: "\n")
    }
}

/// A temporary directory with the six contrib plugins bundled by `pluginhost bundle`.
final class Workspace: Sendable {
    let root: String
    var plugins: String { root + "/plugins" }
    static let contrib = ["Activity", "Cache", "AccessToken", "Credentials", "Signature", "Logger"]

    init(bundling products: [String] = Workspace.contrib) throws {
        root = NSTemporaryDirectory() + "pluginhost-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root + "/plugins", withIntermediateDirectories: true)
        chmod(root, 0o755)
        chmod(root + "/plugins", 0o755)
        for product in products {
            let config = CLI.root + "/PluginsContrib/\(product)/plugin-config.json"
            var arguments = ["bundle", CLI.binDirectory + "/lib\(product)Plugin.\(CLI.librarySuffix)", "--out", plugins]
            if FileManager.default.fileExists(atPath: config) { arguments += ["--config", config] }
            let output = try CLI.runBlocking(arguments)
            guard output.status == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: output.stderr]) }
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    /// Creates a workspace on a Dispatch thread (bundling runs the CLI and waits for it).
    static func make(bundling products: [String] = Workspace.contrib) async throws -> Workspace {
        try await offThePool { try Workspace(bundling: products) }
    }

    /// Copies the example manifest next to the bundles.
    func exampleManifest() throws -> String {
        let path = root + "/manifest.json"
        try FileManager.default.copyItem(atPath: CLI.root + "/PluginsContrib/manifest.example.json", toPath: path)
        return path
    }

    func manifest(_ json: String) throws -> String {
        let path = root + "/manifest-\(UUID().uuidString).json"
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Replaces volatile parts (paths, sizes, digests, times, nonces) so output can be compared.
    func mask(_ text: String) -> String {
        var masked = text.replacingOccurrences(of: root, with: "<DIR>")
        let rules: [(String, String)] = [
            (#"\([0-9]+ bytes\)"#, "(<SIZE> bytes)"),
            (#""size" : [0-9]+"#, #""size" : "<SIZE>""#),
            (#"[0-9a-f]{64}"#, "<SHA256>"),
            (#"[0-9]+ µs"#, "<T> µs"),
            (#"X-Nonce: [0-9a-f]{32}"#, "X-Nonce: <NONCE>"),
            (#"X-Timestamp: [0-9]+"#, "X-Timestamp: <TS>"),
            (#"swift-[0-9.]+ [a-z0-9_]+-[a-z]+"#, "<BUILD>"),
            (#"\(ABI 1\.6, <BUILD>\)"#, "(ABI 1.6, <BUILD>)"),
            // The default headers depend on the machine: libcurl's codings, the locale, the OS.
            (#"Accept-Encoding: [^\n]+"#, "Accept-Encoding: <CODINGS>"),
            (#"Accept-Language: [^\n]+"#, "Accept-Language: <LANGUAGES>"),
            (#"User-Agent: PluginHost/[0-9.]+ \([^)\n]+\)"#, "User-Agent: PluginHost/<VERSION> (<SYSTEM>)"),
        ]
        for (pattern, replacement) in rules {
            masked = masked.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        return masked
    }
}

/// Compares against `Golden/NAME`; with PLUGINHOST_UPDATE_GOLDEN=1 rewrites it instead.
func expectGolden(_ actual: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden/\(name)").path
    if ProcessInfo.processInfo.environment["PLUGINHOST_UPDATE_GOLDEN"] == "1" {
        try actual.write(toFile: path, atomically: true, encoding: .utf8)
        return
    }
    let expected = try String(contentsOfFile: path, encoding: .utf8)
    #expect(actual == expected, "golden \(name) differs", sourceLocation: sourceLocation)
}

/// Validates JSON against a schema in Tests/Fixtures with Python's jsonschema.
func expectSchema(_ json: String, _ schema: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let python = ProcessInfo.processInfo.environment["PLUGINHOST_TEST_PYTHON"] ?? CLI.root + "/.build/test-venv/bin/python"
    let file = NSTemporaryDirectory() + "pluginhost-json-\(UUID().uuidString).json"
    try json.write(toFile: file, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(atPath: file) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: python)
    process.arguments = [
        "-c", "import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])))",
        file, CLI.root + "/Tests/Fixtures/\(schema)",
    ]
    let err = Pipe()
    process.standardError = err
    try process.run()
    let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "schema \(schema): \(message)", sourceLocation: sourceLocation)
}

@Suite("pluginhost CLI")
struct CLITests {
    @Test func helpAndVersion() async throws {
        let help = try await CLI.run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("exit codes: 0 ok; 1 usage; 2 manifest error; 3 plugin refused; 4 plugin crashed; 5 request failed."))
        for command in ["list", "test", "bundle", "new"] {
            let output = try await CLI.run([command, "--help"])
            #expect(output.status == 0)
            #expect(output.stdout.contains("usage: pluginhost \(command)"))
            #expect(output.stdout.contains("Exit codes:"))
        }
        let version = try await CLI.run(["--version"])
        #expect(version.status == 0)
        #expect(
            version.stdout.range(of: #"^pluginhost 0\.1\.0 \(ABI 1\.6, swift-[0-9.]+ [a-z0-9_]+-[a-z]+\)\n$"#, options: .regularExpression) != nil)
    }

    @Test func unknownCommandSuggestsTheClosest() async throws {
        let output = try await CLI.run(["lsit"])
        #expect(output.status == 1)
        #expect(output.stdout.isEmpty)
        #expect(output.stderr == "pluginhost: unknown command 'lsit'; did you mean 'list'? (commands: list, test, bundle, new)\n")
    }

    @Test func unknownFlagSuggestsTheClosest() async throws {
        let output = try await CLI.run(["list", "--manifset", "m.json"])
        #expect(output.status == 1)
        #expect(output.stderr == "pluginhost: unknown option '--manifset' for 'list'; did you mean '--manifest'?\n")
    }

    @Test func missingValueForAFlag() async throws {
        let output = try await CLI.run(["test", "--manifest"])
        #expect(output.status == 1)
        #expect(output.stderr == "pluginhost: option '--manifest' needs a value (FILE)\n")
        let header = try await CLI.run(["test", "--manifest", "m.json", "--header", "no-colon"])
        #expect(header.status == 1)
        #expect(header.stderr == "pluginhost: --header must look like 'Name: value', not 'no-colon'\n")
    }

    @Test func manifestThatDoesNotExist() async throws {
        for command in ["list", "test"] {
            let output = try await CLI.run([command, "--manifest", "/nonexistent/manifest.json"])
            #expect(output.status == 2)
            #expect(output.stderr == "pluginhost: /nonexistent/manifest.json: no such file\n")
        }
    }

    @Test func testReportsEveryManifestProblemWithItsPath() async throws {
        let workspace = try await Workspace.make(bundling: [])
        let path = try workspace.manifest(
            #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "a", "colour": 1}, {"name": ""}, {"name": "b", "config": []}], "extra": true}"#)
        let output = try await CLI.run(["test", "--manifest", path])
        #expect(output.status == 2)
        #expect(
            workspace.mask(output.stderr) == """
                pluginhost: <DIR>/\((path as NSString).lastPathComponent): extra: unknown key "extra"; expected one of comment, pluginDirectories, plugins
                pluginhost: <DIR>/\((path as NSString).lastPathComponent): plugins[0].colour: unknown key "colour"; expected one of comment, config, enabled, name, sha256
                pluginhost: <DIR>/\((path as NSString).lastPathComponent): plugins[1].name: must not be empty
                pluginhost: <DIR>/\((path as NSString).lastPathComponent): plugins[2].config: must be an object

                """)
        // The same as one JSON document, with its exit code.
        let json = try await CLI.run(["test", "--manifest", path, "--json"])
        #expect(json.status == 2)
        try expectSchema(json.stdout, "test.schema.json")
        let document = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(document?["exitCode"] as? Int == 2)
        #expect(document?["manifestOK"] as? Bool == false)
        #expect((document?["problems"] as? [String])?.count == 4)
        // `list` says the same, on standard error and, with --json, in its document (its standard
        // output was empty, and it named only the first).
        let list = try await CLI.run(["list", "--manifest", path])
        #expect(list.status == 2 && list.stderr == output.stderr)
        let listJSON = try await CLI.run(["list", "--manifest", path, "--json"])
        #expect(listJSON.status == 2)
        try expectSchema(listJSON.stdout, "list.schema.json")
        let listed = try JSONSerialization.jsonObject(with: Data(listJSON.stdout.utf8)) as? [String: Any]
        #expect(listed?["manifest"] as? String == path)
        #expect((listed?["plugins"] as? [Any])?.isEmpty == true)
        #expect(listed?["problems"] as? [String] == document?["problems"] as? [String])
        // A relative path is named as a manifest read names it: absolute.
        let relative = try await CLI.run(["list", "--manifest", (path as NSString).lastPathComponent, "--json"], in: workspace.root)
        let named = try JSONSerialization.jsonObject(with: Data(relative.stdout.utf8)) as? [String: Any]
        #expect(
            (named?["manifest"] as? String).map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }
                == URL(fileURLWithPath: path).resolvingSymlinksInPath().path)
    }

    @Test func directoryWithNoBundles() async throws {
        let workspace = try await Workspace.make(bundling: [])
        let output = try await CLI.run(["list", "--dir", workspace.plugins])
        #expect(output.status == 3)
        #expect(workspace.mask(output.stderr) == "pluginhost: no plugin bundles (NAME.plugin) in <DIR>/plugins\n")
    }

    /// A manifest's entry is looked for in the manifest's own directories, as the app's load looks:
    /// one found only in `--dir` was listed as fine (exit 0), and the app's load failed.
    @Test func aManifestEntryIsNotFoundInAnExtraDirectory() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let empty = workspace.root + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        chmod(empty, 0o755)
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["empty"], "plugins": [{"name": "activity"}]}"#)
        let output = try await CLI.run(["list", "--manifest", manifest, "--dir", workspace.plugins])
        #expect(output.status != 0)
        #expect(
            output.stdout.contains("reject: no activity.plugin in \(empty) (one is in \(workspace.plugins), where the manifest does not look)"),
            "\(output.stdout)")
        // Listed once: the bundle in the extra directory was listed again, as a bundle the
        // manifest does not enable, usable.
        let json = try await CLI.run(["list", "--manifest", manifest, "--dir", workspace.plugins, "--json"])
        let plugins = (try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["plugins"] as? [[String: Any]]
        #expect(plugins?.compactMap { $0["name"] as? String } == ["activity"])
        #expect(plugins?.first?["enabled"] as? Bool == true)
        // A disabled entry names no bundle: the one in the extra directory is listed as well.
        let disabled = try workspace.manifest(#"{"pluginDirectories": ["empty"], "plugins": [{"name": "activity", "enabled": false}]}"#)
        let both = try await CLI.run(["list", "--manifest", disabled, "--dir", workspace.plugins, "--json"])
        let rows = (try JSONSerialization.jsonObject(with: Data(both.stdout.utf8)) as? [String: Any])?["plugins"] as? [[String: Any]]
        #expect(rows?.map { "\($0["name"] ?? "") \($0["sha256Verdict"] ?? "")" } == ["activity unknown", "activity ok"])
    }

    @Test func garbageLibraryIsRejected() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let bundle = workspace.plugins + "/x.plugin"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        chmod(bundle, 0o755)
        let garbage = Data((0..<2048).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        try garbage.write(to: URL(fileURLWithPath: bundle + "/libx.so"))
        chmod(bundle + "/libx.so", 0o755)
        let digest = SHA256.hex(SHA256.hash(garbage))
        try #"{"name": "x", "version": "1.0.0", "abi": {"major": 1, "minor": 0}, "library": "libx.so", "sha256": "\#(digest)"}"#
            .write(toFile: bundle + "/plugin.json", atomically: true, encoding: .utf8)
        let output = try await CLI.run(["list", "--dir", workspace.plugins])
        #expect(output.status == 3)
        #expect(output.stdout.contains("reject: invalid ELF header"))
        #expect(output.stdout.contains("activity"))
    }

    /// A FIFO where `plugin.json` or the library should be is refused, never read: `list` used
    /// to block on it for good (and the loader, and a reload, on a FIFO `plugin.json`).
    @Test func aFIFOInPlaceOfADescriptorOrALibraryIsRefusedUnread() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        for (bundle, descriptorIsFIFO) in [("fifo-json", true), ("fifo-lib", false)] {
            let directory = workspace.plugins + "/\(bundle).plugin"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            chmod(directory, 0o755)
            if descriptorIsFIFO {
                #expect(mkfifo(directory + "/plugin.json", 0o644) == 0)
            } else {
                #expect(mkfifo(directory + "/lib\(bundle).so", 0o644) == 0)
                try
                    #"{"name": "\#(bundle)", "version": "1.0.0", "abi": {"major": 1, "minor": 0}, "library": "lib\#(bundle).so", "sha256": "\#(String(repeating: "0", count: 64))"}"#
                    .write(toFile: directory + "/plugin.json", atomically: true, encoding: .utf8)
            }
        }
        let output = try await CLI.run(["list", "--dir", workspace.plugins])
        #expect(output.status == 3)
        #expect(
            output.stdout.contains("reject: \(workspace.plugins)/fifo-json.plugin/plugin.json: plugin \"fifo-json\": not a regular file"),
            "\(output.stdout)")
        #expect(
            output.stdout.contains("library \(workspace.plugins)/fifo-lib.plugin/libfifo-lib.so (0 bytes)\n   reject: not a regular file"),
            "\(output.stdout)")
        #expect(output.stdout.contains("activity"))
    }

    /// A descriptor whose name is no plugin name (`../evil`) is refused: `bundle` made
    /// `plugins/../evil.plugin`, outside `--out`.
    @Test func bundleRefusesADescriptorNameThatIsNoPluginName() async throws {
        let workspace = try await Workspace.make(bundling: [])
        let output = try await CLI.run(["bundle", CLI.binDirectory + "/libBadNameTestPlugin.\(CLI.librarySuffix)", "--out", workspace.plugins])
        #expect(output.status == 3)
        #expect(
            output.stderr.contains(
                #"the descriptor's name "../evil" is not a plugin name (one path component, without "/" and not starting with ".")"#),
            "\(output.stderr)")
        let parent = (workspace.plugins as NSString).deletingLastPathComponent
        #expect(!FileManager.default.fileExists(atPath: parent + "/evil.plugin"))
    }

    /// A descriptor without a version is refused at bundle time: `bundle` wrote a `plugin.json`
    /// with an empty version, and said so, which every load then refused.
    @Test func bundleRefusesADescriptorWithoutAVersion() async throws {
        let workspace = try await Workspace.make(bundling: [])
        let output = try await CLI.run(["bundle", CLI.binDirectory + "/libNoVersionTestPlugin.\(CLI.librarySuffix)", "--out", workspace.plugins])
        #expect(output.status == 3)
        #expect(
            output.stderr == "pluginhost: refusing \(CLI.binDirectory)/libNoVersionTestPlugin.\(CLI.librarySuffix): the descriptor has no version\n")
        #expect(!FileManager.default.fileExists(atPath: workspace.plugins + "/noversion.plugin"))
    }

    /// A value that begins with `--` reaches the probe as a value (it was passed to the child
    /// as an argument of its own, read there as an option, and the probe reported as a crash).
    @Test func aValueBeginningWithTwoDashesReachesTheProbe() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}]}"#)
        let output = try await CLI.run(["test", "--manifest", manifest, "--store=--key=--value", "--header=X-Dashes: --yes"])
        #expect(output.status == 0, "\(output.stdout)\(output.stderr)")
        #expect(output.stdout.contains("probe  activity       ok"))
        #expect(output.stdout.contains("  X-Dashes: --yes"))
    }

    /// `list`'s positions are places in the chain: enabled entries only (a disabled entry came
    /// first as position 1, and moved the others down), and a disabled entry's bundle need not
    /// be installed, as the app's load and `test` do not look for it (`list` refused it, exit 3).
    @Test func aDisabledEntryHasNoPositionAndNeedNotBeInstalled() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity", "Logger"])
        let manifest = try workspace.manifest(
            #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity", "enabled": false}, {"name": "logger"}, "#
                + #"{"name": "ghost", "enabled": false}]}"#)
        let list = try await CLI.run(["list", "--manifest", manifest, "--json"])
        #expect(list.status == 0, "\(list.stdout)\(list.stderr)")
        try expectSchema(list.stdout, "list.schema.json")
        let document = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any]
        let plugins = try #require(document?["plugins"] as? [[String: Any]])
        #expect(plugins.map { $0["name"] as? String } == ["activity", "logger", "ghost"])
        #expect(plugins.map { $0["position"] is NSNull ? 0 : $0["position"] as? Int } == [0, 1, 0])
        #expect(plugins.map { ($0["problems"] as? [String])?.count } == [0, 0, 0])
        let test = try await CLI.run(["test", "--manifest", manifest])
        #expect(test.status == 0, "\(test.stdout)\(test.stderr)")
    }

    /// What a plugin directory holds of a bundle's name that is no bundle is passed over, as the
    /// app's load passes it: a file `logger.plugin` (it ended the search, and a bundle in the next
    /// directory was refused as having no `plugin.json`), and `.plugin` (`list` showed a plugin
    /// with an empty name, which its own schema refuses).
    @Test func whatIsNoBundleIsPassedOver() async throws {
        let workspace = try await Workspace.make(bundling: ["Logger"])
        let first = workspace.root + "/first"
        try FileManager.default.createDirectory(atPath: first + "/.plugin", withIntermediateDirectories: true)
        chmod(first, 0o755)
        chmod(first + "/.plugin", 0o755)
        #expect(FileManager.default.createFile(atPath: first + "/logger.plugin", contents: Data("not a bundle".utf8)))
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["first", "plugins"], "plugins": [{"name": "logger"}]}"#)
        let list = try await CLI.run(["list", "--manifest", manifest, "--dir", first, "--json"])
        #expect(list.status == 0, "\(list.stdout)\(list.stderr)")
        try expectSchema(list.stdout, "list.schema.json")
        let document = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any]
        let plugins = try #require(document?["plugins"] as? [[String: Any]])
        #expect(plugins.map { $0["name"] as? String } == ["logger"])
        #expect(plugins.first?["bundle"] as? String == workspace.plugins + "/logger.plugin")
        let test = try await CLI.run(["test", "--manifest", manifest])
        #expect(test.status == 0, "\(test.stdout)\(test.stderr)")
    }

    /// `list --dir` with a relative directory prints absolute paths, as README says (they were
    /// relative to the working directory).
    @Test func aRelativeDirectoryIsListedWithAbsolutePaths() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let list = try await CLI.run(["list", "--dir", "plugins", "--json"], in: workspace.root)
        #expect(list.status == 0, "\(list.stdout)\(list.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any]
        let plugins = try #require(document?["plugins"] as? [[String: Any]])
        #expect(plugins.first?["library"] as? String == workspace.plugins + "/activity.plugin/libActivityPlugin.\(CLI.librarySuffix)")
        #expect(plugins.first?["bundle"] as? String == workspace.plugins + "/activity.plugin")
    }

    /// `bundle --config` reads the file as manifests are read: a repeated key is refused, naming
    /// it (the last value was stored); and a bundle that cannot be written is said so, with its
    /// own exit code (6), not as a refused library (3).
    @Test func bundleReadsItsConfigurationAsManifestsAreReadAndSaysWhatCannotBeWritten() async throws {
        let workspace = try await Workspace.make(bundling: [])
        let library = CLI.binDirectory + "/libLoggerPlugin.\(CLI.librarySuffix)"
        let config = workspace.root + "/config.json"
        try Data(#"{"level": "basic", "level": "body"}"#.utf8).write(to: URL(fileURLWithPath: config))
        let repeated = try await CLI.run(["bundle", library, "--out", workspace.plugins, "--config", config])
        #expect(repeated.status == 1)
        #expect(repeated.stderr == "pluginhost: \(config): level: duplicate key \"level\"\n", "\(repeated.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.plugins + "/logger.plugin"))
        // Where a file stands in the way of the bundle's directory.
        #expect(FileManager.default.createFile(atPath: workspace.plugins + "/logger.plugin", contents: Data()))
        let blocked = try await CLI.run(["bundle", library, "--out", workspace.plugins])
        #expect(blocked.status == 6)
        #expect(blocked.stderr.hasPrefix("pluginhost: \(workspace.plugins)/logger.plugin: cannot write the bundle: "), "\(blocked.stderr)")
    }

    /// A plugin directory with no bundle in it is still checked, as the app's load checks it:
    /// `list` said `ok` for a manifest the app refuses.
    @Test func listChecksEveryPluginDirectoryAsTheAppDoes() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let spare = workspace.root + "/spare"
        try FileManager.default.createDirectory(atPath: spare, withIntermediateDirectories: true)
        chmod(spare, 0o777)
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["plugins", "spare"], "plugins": [{"name": "activity"}]}"#)
        let owner = geteuid() == 0 ? "root" : "uid \(geteuid())"
        let list = try await CLI.run(["list", "--manifest", manifest])
        #expect(list.status == 3)
        #expect(
            list.stderr
                == "pluginhost: \(spare): mode 0777 (writable by group and others), owner \(owner), is the plugin directory; "
                + "remove group and other write access (chmod go-w)\n")
        #expect(list.stdout.contains("activity"))
        // The JSON form says it too, not only standard error.
        let json = try await CLI.run(["list", "--manifest", manifest, "--json"])
        #expect(json.status == 3)
        try expectSchema(json.stdout, "list.schema.json")
        let document = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((document?["problems"] as? [String])?.first?.hasPrefix("\(spare): mode 0777") == true)
        // With no bundle anywhere, the JSON form is still printed, with its problems.
        let empty = try workspace.manifest(#"{"pluginDirectories": ["spare"], "plugins": []}"#)
        let emptyJSON = try await CLI.run(["list", "--manifest", empty, "--json"])
        #expect(emptyJSON.status == 3)
        try expectSchema(emptyJSON.stdout, "list.schema.json")
        let emptyDocument = try JSONSerialization.jsonObject(with: Data(emptyJSON.stdout.utf8)) as? [String: Any]
        #expect((emptyDocument?["plugins"] as? [Any])?.isEmpty == true)
        #expect((emptyDocument?["problems"] as? [String])?.first?.hasPrefix("\(spare): mode 0777") == true)
        chmod(spare, 0o755)
        #expect(try await CLI.run(["list", "--manifest", manifest]).status == 0)
    }

    @Test func wrongSHA256IsRejectedByListAndTest() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity", "Logger"])
        let pluginJSON = workspace.plugins + "/logger.plugin/plugin.json"
        var object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: pluginJSON))) as! [String: Any]
        object["sha256"] = String(repeating: "0", count: 64)
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: pluginJSON))
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}, {"name": "logger"}]}"#)
        let list = try await CLI.run(["list", "--manifest", manifest])
        #expect(list.status == 3)
        #expect(list.stdout.contains("reject: sha256 mismatch"))
        let test = try await CLI.run(["test", "--manifest", manifest])
        #expect(test.status == 3)
        #expect(test.stdout.contains("probe  activity       ok"))
        #expect(test.stdout.contains("probe  logger         reject: sha256 mismatch"))
        #expect(test.stdout.contains("  1  activity"))
    }

    @Test func insecurePermissionsAreRefusedByListAndTest() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}]}"#)
        let owner = geteuid() == 0 ? "root" : "uid \(geteuid())"
        chmod(manifest, 0o666)
        let manifestRefusal =
            "\(manifest): mode 0666 (writable by group and others), owner \(owner), is the manifest; remove group and other write access (chmod go-w)"
        let list = try await CLI.run(["list", "--manifest", manifest])
        #expect(list.status == 2)
        #expect(list.stderr == "pluginhost: \(manifestRefusal)\n")
        let test = try await CLI.run(["test", "--manifest", manifest])
        #expect(test.status == 2)
        #expect(test.stderr == "pluginhost: \(manifestRefusal)\n")
        chmod(manifest, 0o644)
        chmod(workspace.plugins, 0o777)
        let directoryRefusal =
            "\(workspace.plugins): mode 0777 (writable by group and others), owner \(owner), is the plugin directory; "
            + "remove group and other write access (chmod go-w)"
        let listed = try await CLI.run(["list", "--manifest", manifest])
        #expect(listed.status == 3)
        #expect(listed.stdout.contains("reject: \(directoryRefusal)"))
        let tested = try await CLI.run(["test", "--manifest", manifest])
        #expect(tested.status == 3)
        #expect(tested.stdout.contains("probe  activity       reject: \(directoryRefusal)"))
    }

    /// The verified copy is loaded from the temporary directory: one that others may rename or
    /// write in (mode 0777 without the sticky bit) is refused before any library is copied there.
    @Test func anInsecureTemporaryDirectoryIsRefused() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}]}"#)
        let owner = geteuid() == 0 ? "root" : "uid \(geteuid())"
        let temporary = (NSTemporaryDirectory() as NSString).appendingPathComponent("pluginhost-tmpdir-" + UUID().uuidString)
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        chmod(temporary, 0o777)
        let refusal =
            "\(temporary): mode 0777 (writable by group and others), owner \(owner), is the temporary directory that verified "
            + "copies of libraries are loaded from; remove group and other write access (chmod go-w)"
        // Copies in the temporary directory: what Linux does without memory files (and any system
        // with PLUGINHOST_VERIFIED_COPY=tmpdir).
        let copies = ["TMPDIR": temporary, "PLUGINHOST_VERIFIED_COPY": "tmpdir"]
        let tested = try await CLI.run(["test", "--manifest", manifest], environment: copies)
        #expect(tested.status == 3)
        #expect(tested.stdout.contains("probe  activity       reject: \(refusal)"), "\(tested.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary) == [])
        // On Linux the bytes are loaded from a sealed memory file: the temporary directory is
        // neither used nor needed.
        #if os(Linux)
        let memory = try await CLI.run(["test", "--manifest", manifest], environment: ["TMPDIR": temporary])
        #expect(memory.status == 0, "\(memory.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary) == [])
        #endif
        // The sticky bit on a directory of root's (as /tmp has) lets others write in it but not
        // rename or remove what they do not own: accepted, when the tests run as root.
        if geteuid() == 0 {
            chmod(temporary, 0o1777)
            let sticky = try await CLI.run(["test", "--manifest", manifest], environment: copies)
            #expect(sticky.status == 0, "\(sticky.stdout)")
        }
    }

    /// A workspace of the activity plugin's and the trap fixture's bundles (removed when it
    /// goes), and a manifest of both, the trap configured with `trapIn`.
    static func activityAndTrap(trapIn: String) async throws -> (Workspace, String) {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        try await CLI.run(["bundle", CLI.binDirectory + "/libTrapTestPlugin.\(CLI.librarySuffix)", "--out", workspace.plugins])
        return try (
            workspace,
            workspace.manifest(
                #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}, {"name": "trap", "config": {"trapIn": "\#(trapIn)"}}]}"#)
        )
    }

    @Test func aPluginThatTrapsIsReportedAsCrashedAndTheOthersAreStillTested() async throws {
        let (workspace, manifest) = try await Self.activityAndTrap(trapIn: "create")
        defer { withExtendedLifetime(workspace) {} }
        let output = try await CLI.run(["test", "--manifest", manifest])
        #expect(output.status == 4)
        #expect(output.stdout.contains("probe  activity       ok"))
        #expect(output.stdout.contains("probe  trap           crashed (signal 4)"))
        #expect(output.stdout.contains("  1  activity      events: began, ended"))
        #expect(output.stdout.contains("response  200"))
        #expect(output.stdout.contains("result failed (exit 4)"))
    }

    /// A plugin that ends the process with status 0 in `create` fails its probe (exit 4) and is
    /// not run in the command's own process: its probe was counted as passed by its status alone,
    /// and the command then created it itself, and ended with it, printing nothing.
    @Test func aPluginThatExitsInCreateFailsItsProbe() async throws {
        let (workspace, manifest) = try await Self.activityAndTrap(trapIn: "exit")
        defer { withExtendedLifetime(workspace) {} }
        let output = try await CLI.run(["test", "--manifest", manifest])
        #expect(output.status == 4)
        #expect(output.stdout.contains("probe  activity       ok"))
        #expect(
            output.stdout.contains("probe  trap           the probe ended (status 0) before its request went through: the plugin ended the process"))
        #expect(output.stdout.contains("result failed (exit 4)"))
    }

    /// The request through the whole chain is bounded by `--probe-timeout` as each probe is: a
    /// plugin that hangs on a real answer (its probe, on the stub, passed) made the command wait
    /// for it.
    @Test func theChainsRequestIsBoundedByTheProbeTimeout() async throws {
        let (workspace, manifest) = try await Self.activityAndTrap(trapIn: "hangOffStub")
        defer { withExtendedLifetime(workspace) {} }
        let url = try Self.httpbin() + "/get"
        let started = Date()
        let output = try await CLI.run(["test", "--manifest", manifest, "--url", url, "--probe-timeout", "2"])
        // Ended at the bound, not when the hook's 20 s wait did (no measure of speed: a bound).
        #expect(Date().timeIntervalSince(started) < 15)
        #expect(output.status == 5, "\(output.stdout)\(output.stderr)")
        #expect(output.stdout.contains("probe  trap           ok"))
        #expect(output.stdout.contains("timedOut") || output.stdout.contains("timed out"), "\(output.stdout)")
    }

    /// A library that aborts when loaded takes only its own probe down; one the manifest does
    /// not enable (or does not list) is never loaded. `test` used to load every bundle of the
    /// plugin directories in its own process first, and died with it.
    @Test func aLibraryThatAbortsWhenLoadedTakesOnlyItsProbeDown() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        // Made by hand: `bundle` reads the descriptor, and would load it.
        let bundle = workspace.plugins + "/abort.plugin"
        try FileManager.default.createDirectory(atPath: bundle, withIntermediateDirectories: true)
        chmod(bundle, 0o755)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: CLI.binDirectory + "/libAbortTestPlugin.\(CLI.librarySuffix)"))
        try bytes.write(to: URL(fileURLWithPath: bundle + "/libabort.so"))
        chmod(bundle + "/libabort.so", 0o755)
        try
            #"{"name": "abort", "version": "1.0.0", "abi": {"major": 1, "minor": 0}, "library": "libabort.so", "sha256": "\#(SHA256.hex(SHA256.hash(bytes)))"}"#
            .write(toFile: bundle + "/plugin.json", atomically: true, encoding: .utf8)
        chmod(bundle + "/plugin.json", 0o644)
        let enabled = try workspace.manifest(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}, {"name": "abort"}]}"#)
        let output = try await CLI.run(["test", "--manifest", enabled])
        #expect(output.status == 4, "\(output.stdout)\(output.stderr)")
        #expect(output.stdout.contains("probe  activity       ok"))
        #expect(output.stdout.contains("probe  abort          crashed (signal 6)"), "\(output.stdout)")
        #expect(output.stdout.contains("  1  activity      events: began, ended"))
        for manifest in [
            #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}, {"name": "abort", "enabled": false}]}"#,
            #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}]}"#,
        ] {
            let quiet = try await CLI.run(["test", "--manifest", try workspace.manifest(manifest)])
            #expect(quiet.status == 0, "\(manifest): \(quiet.stdout)\(quiet.stderr)")
        }
    }

    @Test func closedPortIsARequestFailure() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}]}"#)
        let output = try await CLI.run(["test", "--manifest", manifest, "--url", "http://127.0.0.1:9/nothing"])
        #expect(output.status == 5)
        #expect(output.stdout.contains("request failed: transport failed (cannotConnect)"))
        // How far it got, where the transport measures it (CurlTransport, the Linux default):
        // nothing connected, nothing sent.
        #if os(Linux)
        #expect(output.stdout.contains("\ntiming  total "), "\(output.stdout)")
        let json = try await CLI.run(["test", "--manifest", manifest, "--url", "http://127.0.0.1:9/nothing", "--json"])
        #expect(json.status == 5)
        try expectSchema(json.stdout, "test.schema.json")
        let document = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let metrics = try #require(document?["requestErrorMetrics"] as? [String: Any], "\(json.stdout)")
        #expect(metrics["connect"] as? Double == 0 && metrics["firstByte"] as? Double == 0)
        #expect(metrics["reusedConnection"] as? Bool == false)
        #expect((metrics["total"] as? Double ?? 0) > 0)
        #endif
    }

    /// httpbin's base URL, which `Tests/test` starts and exports; a missing one fails the test
    /// saying so.
    static func httpbin() throws -> String {
        guard let base = ProcessInfo.processInfo.environment["HTTPBIN_URL"] else {
            throw CocoaError(
                .featureUnsupported, userInfo: [NSLocalizedDescriptionKey: "HTTPBIN_URL is not set: run Tests/test, which starts httpbin"])
        }
        return base
    }

    /// A manifest enabling the cache plugin of `workspace`, with a disk store in it.
    static func cacheManifest(in workspace: Workspace) throws -> String {
        try workspace.manifest(
            #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "cache", "config": {"directory": ""#
                + workspace.root + #"/cache"}}]}"#)
    }

    /// The probes and `--bench` are answered by the offline stub, and send their requests to the
    /// stub's own URL, never to `--url`'s: a cache whose directory the app shares keeps no stub
    /// answer as the real URL's (the probe stored one there, and the chain's request was then a hit
    /// that never reached the closed port: exit 0 and `X-Cache: hit`).
    @Test func aStubAnswerIsNeverKeptAsTheRealURLs() async throws {
        let workspace = try await Workspace.make(bundling: ["Cache"])
        let manifest = try Self.cacheManifest(in: workspace)
        let url = "http://127.0.0.1:9/nothing"
        let first = try await CLI.run(["test", "--manifest", manifest, "--url", url, "--bench", "3"])
        #expect(first.status == 5, "\(first.stdout)\(first.stderr)")
        #expect(first.stdout.contains("request failed: transport failed (cannotConnect)"))
        #expect(first.stdout.contains("bench  3 requests on the stub transport (µs per request)"))
        let again = try await CLI.run(["test", "--manifest", manifest, "--url", url])
        #expect(again.status == 5, "\(again.stdout)\(again.stderr)")
        #expect(again.stdout.contains("request failed: transport failed (cannotConnect)"))
        #expect(!again.stdout.contains("X-Cache"))
    }

    /// The response's `X-Cache` (the cache plugin's hit or miss) is in `--json` too, as in text.
    @Test func theJSONReportTellsACacheHit() async throws {
        let base = try Self.httpbin()
        let workspace = try await Workspace.make(bundling: ["Cache"])
        let manifest = try Self.cacheManifest(in: workspace)
        let url = base + "/cache/60"
        let first = try await CLI.run(["test", "--manifest", manifest, "--url", url])
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        #expect(first.stdout.contains(", X-Cache: miss\n"), "\(first.stdout)")
        let again = try await CLI.run(["test", "--manifest", manifest, "--url", url, "--json"])
        #expect(again.status == 0, "\(again.stdout)\(again.stderr)")
        try expectSchema(again.stdout, "test.schema.json")
        let document = try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any]
        #expect((document?["response"] as? [String: Any])?["xCache"] as? String == "hit", "\(again.stdout)")
    }

    /// A password in `--url` is shown redacted, as the logger plugin shows it: in the chain's line
    /// and the request's, in text and in JSON (output that ends up in CI logs).
    @Test func aPasswordInTheURLIsShownRedacted() async throws {
        let base = try Self.httpbin()
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let manifest = try workspace.manifest(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}]}"#)
        let url = base.replacingOccurrences(of: "://", with: "://user:s3cret@") + "/anything"
        let shown = base.replacingOccurrences(of: "://", with: "://user:<redacted>@") + "/anything"
        let text = try await CLI.run(["test", "--manifest", manifest, "--url", url])
        #expect(text.status == 0, "\(text.stdout)\(text.stderr)")
        #expect(!text.stdout.contains("s3cret") && !text.stderr.contains("s3cret"), "\(text.stdout)\(text.stderr)")
        #expect(text.stdout.contains("chain  GET \(shown)\n") && text.stdout.contains("request  GET \(shown)\n"), "\(text.stdout)")
        let json = try await CLI.run(["test", "--manifest", manifest, "--url", url, "--json"])
        #expect(json.status == 0, "\(json.stdout)\(json.stderr)")
        #expect(!json.stdout.contains("s3cret"), "\(json.stdout)")
        // Nor in the refusal of a URL that is no http URL.
        let refused = try await CLI.run(["test", "--manifest", manifest, "--url", "ftp://user:s3cret@127.0.0.1/x"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("--url must be an absolute http or https URL, not 'ftp://user:<redacted>@127.0.0.1/x'"), "\(refused.stderr)")
        let document = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((document?["request"] as? [String: Any])?["url"] as? String == shown, "\(json.stdout)")
    }

    #if os(Linux)
    /// A log line that cannot be written (standard error on a full disk or a closed pipe) is
    /// dropped: the logger's default output, the host's log handler and the CLI's own messages
    /// never take the process down (`FileHandle.write` trapped on the write's error). Results
    /// that cannot be written are another matter: the command says so and exits 6. (Linux:
    /// `/dev/full`.)
    @Test func aLineThatCannotBeWrittenIsDroppedAndResultsThatCannotAreAFailure() async throws {
        let workspace = try await Workspace.make(bundling: ["Logger"])
        let manifest = try workspace.manifest(
            #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "logger", "config": {"level": "headers"}}]}"#)
        let output = try await CLI.run(["test", "--manifest", manifest], redirection: "2>/dev/full")
        #expect(output.status == 0, "\(output.stdout)")
        #expect(output.stdout.contains("probe  logger         ok") && output.stdout.hasSuffix("result ok\n"), "\(output.stdout)")
        for arguments in [["test", "--manifest", manifest, "--json"], ["list", "--manifest", manifest, "--json"]] {
            let results = try await CLI.run(arguments, redirection: ">/dev/full")
            #expect(results.status == 6, "\(arguments): \(results.stderr)")
            #expect(results.stderr.contains("pluginhost: cannot write to standard output: No space left on device"), "\(results.stderr)")
        }
    }
    #endif

    /// A token from the environment is trimmed as one from a file is: a variable made from a file
    /// (a Kubernetes secret) ends with a line break, and every request failed on the header's LF.
    @Test func aTokenFromTheEnvironmentIsTrimmed() async throws {
        let base = try Self.httpbin()
        let workspace = try await Workspace.make(bundling: ["AccessToken"])
        let manifest = try workspace.manifest(
            #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "access-token", "config": {"env": "PH_TEST_TOKEN", "required": true}}]}"#)
        let output = try await CLI.run(["test", "--manifest", manifest, "--url", base + "/bearer"], environment: ["PH_TEST_TOKEN": " t0k3n\n"])
        #expect(output.status == 0, "\(output.stdout)\(output.stderr)")
        #expect(output.stdout.contains("response  200"), "\(output.stdout)")
        #expect(output.stdout.contains("  Authorization: <redacted>"), "\(output.stdout)")
    }

    /// A probe that does not end within `--probe-timeout` is killed and reported, its plugin left
    /// out of the chain, and the command goes on (a plugin whose hook never returned hung it).
    @Test func aProbeThatNeverEndsIsKilledAndReported() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity"])
        let bundle = try await CLI.run(["bundle", CLI.binDirectory + "/libHostileTestPlugin.\(CLI.librarySuffix)", "--out", workspace.plugins])
        #expect(bundle.status == 0, "\(bundle.stderr)")
        let manifest = try workspace.manifest(
            #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}, {"name": "hostile", "config": {"mode": "hang"}}]}"#)
        let output = try await CLI.run(["test", "--manifest", manifest, "--probe-timeout", "5"])
        #expect(output.status == 4, "\(output.stdout)\(output.stderr)")
        #expect(output.stdout.contains("probe  activity       ok"))
        #expect(output.stdout.contains("probe  hostile        timed out after 5 s (killed)"), "\(output.stdout)")
        #expect(output.stdout.contains("  1  activity      events: began, ended"), "\(output.stdout)")
        #expect(!output.stdout.contains("  2  "), "\(output.stdout)")
        let json = try await CLI.run(["test", "--manifest", manifest, "--probe-timeout=0.5", "--json"])
        #expect(json.status == 4)
        try expectSchema(json.stdout, "test.schema.json")
        #expect(json.stdout.contains(#""status" : "timed out""#), "\(json.stdout)")
        for bad in ["0", "-1", "soon"] {
            let refused = try await CLI.run(["test", "--manifest", manifest, "--probe-timeout", bad])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("--probe-timeout needs a number of seconds above 0 (at most 86400), not '\(bad)'"), "\(refused.stderr)")
        }
    }

    /// An option's value may not be empty: `--out="$DIR"` with DIR unset wrote the project into
    /// the current directory (or failed there with exit 6, for a reason it did not say).
    @Test func anEmptyValueIsAUsageError() async throws {
        let workspace = try await Workspace.make(bundling: [])
        for arguments in [["new", "empty-out", "--out="], ["new", "empty-out", "--out", ""], ["list", "--manifest="]] {
            let output = try await CLI.run(arguments, in: workspace.root)
            #expect(output.status == 1, "\(arguments): \(output.stdout)\(output.stderr)")
            let flag = arguments.contains { $0.hasPrefix("--out") } ? ("out", "DIR") : ("manifest", "FILE")
            #expect(output.stderr.contains("option '--\(flag.0)' needs a value (\(flag.1)), not an empty one"), "\(output.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: workspace.root) == ["plugins"])
    }

    @Test func bundleRefusesALibraryWithoutADescriptor() async throws {
        let workspace = try await Workspace.make(bundling: [])
        let output = try await CLI.run(["bundle", CLI.binDirectory + "/libNoEntryTestPlugin.\(CLI.librarySuffix)", "--out", workspace.plugins])
        #expect(output.status == 3)
        #expect(output.stderr.hasPrefix("pluginhost: refusing \(CLI.binDirectory)/libNoEntryTestPlugin.so: no pluginhost_plugin_v1 symbol: "))
        let config = workspace.root + "/config.json"
        try "[1, 2]".write(toFile: config, atomically: true, encoding: .utf8)
        let badConfig = try await CLI.run([
            "bundle", CLI.binDirectory + "/libLoggerPlugin.\(CLI.librarySuffix)", "--out", workspace.plugins, "--config", config,
        ])
        #expect(badConfig.status == 1)
        #expect(badConfig.stderr == "pluginhost: \(config): the configuration must be a JSON object\n")
    }

    @Test func listGoldenTextAndJSON() async throws {
        let workspace = try await Workspace.make()
        try await CLI.run(["bundle", CLI.binDirectory + "/libAlphaTestPlugin.\(CLI.librarySuffix)", "--out", workspace.plugins])
        let manifest = try workspace.exampleManifest()
        let text = try await CLI.run(["list", "--manifest", manifest])
        #expect(text.status == 0)
        #expect(!text.stdout.contains("\u{1B}["))
        try expectGolden(workspace.mask(text.stdout), "list.txt")
        let json = try await CLI.run(["list", "--manifest", manifest, "--json"])
        #expect(json.status == 0)
        try expectSchema(json.stdout, "list.schema.json")
        try expectGolden(workspace.mask(json.stdout), "list.json")
    }

    @Test func testGoldenOnTheExampleManifest() async throws {
        let workspace = try await Workspace.make()
        let manifest = try workspace.exampleManifest()
        let output = try await CLI.run([
            "test", "--manifest", manifest, "--store", "access_token=demo-token", "--store", "signing_secret=demo-secret",
        ])
        #expect(output.status == 0)
        #expect(!output.stdout.contains("demo-token"))
        try expectGolden(workspace.mask(output.stdout), "test.txt")
        let json = try await CLI.run(["test", "--manifest", manifest, "--json", "--bench", "50", "--store", "signing_secret=demo-secret"])
        #expect(json.status == 0)
        try expectSchema(json.stdout, "test.schema.json")
    }

    /// The verified copy a library is opened from, and its private directory, are gone once it is
    /// loaded: a process leaves nothing behind in the temporary directory.
    @Test func loadingLeavesNoPrivateCopyBehind() async throws {
        let workspace = try await Workspace.make()
        let manifest = try workspace.exampleManifest()
        let temporary = NSTemporaryDirectory() + "pluginhost-tmpdir-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: temporary) }
        let output = try await CLI.run(
            ["test", "--manifest", manifest, "--store", "access_token=t", "--store", "signing_secret=s"], environment: ["TMPDIR": temporary])
        #expect(output.status == 0)
        #expect(output.stdout.contains("signature"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary) == [])
    }

    @Test func benchPrintsPerPluginAndChainCost() async throws {
        let workspace = try await Workspace.make()
        let manifest = try workspace.exampleManifest()
        let output = try await CLI.run(["test", "--manifest", manifest, "--bench", "200", "--store", "signing_secret=s"])
        #expect(output.status == 0)
        #expect(output.stdout.contains("bench  200 requests on the stub transport (µs per request)"))
        for name in ["activity", "cache", "access-token", "credentials", "signature", "logger", "whole chain"] {
            #expect(output.stdout.range(of: "\n  \(name) +p50 +[0-9.]+  p99 +[0-9.]+", options: .regularExpression) != nil, "\(name)")
        }
    }

    @Test func liveURLAgainstHTTPBin() async throws {
        let base = try Self.httpbin()
        let workspace = try await Workspace.make()
        let manifest = try workspace.exampleManifest()
        let output = try await CLI.run([
            "test", "--manifest", manifest, "--url", base + "/anything", "--method", "POST", "--header", "X-Demo: 1",
            "--store", "signing_secret=s", "--store", "access_token=t",
        ])
        #expect(output.status == 0)
        #expect(output.stdout.contains("chain  POST \(base)/anything\n"))
        #expect(output.stdout.contains("response  200"))
        #expect(output.stdout.contains("  X-Demo: 1"))
        // How the exchange went: one line, and in the JSON form, where the transport measures it
        // (CurlTransport, the Linux default; URLSession on Darwin does not).
        #if os(Linux)
        let port = try #require(URL(string: base)?.port)
        #expect(output.stdout.contains("\ntiming  total "), "\(output.stdout)")
        #expect(output.stdout.contains(", 127.0.0.1:\(port)\n"), "\(output.stdout)")
        let json = try await CLI.run([
            "test", "--manifest", manifest, "--url", base + "/anything", "--json", "--store", "signing_secret=s", "--store", "access_token=t",
        ])
        #expect(json.status == 0)
        try expectSchema(json.stdout, "test.schema.json")
        let document = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let metrics = try #require((document?["response"] as? [String: Any])?["metrics"] as? [String: Any])
        #expect((metrics["total"] as? Double ?? 0) > 0)
        #expect(metrics["remotePort"] as? Int == port)
        #expect(metrics["remoteAddress"] as? String == "127.0.0.1")
        #endif
    }
}
