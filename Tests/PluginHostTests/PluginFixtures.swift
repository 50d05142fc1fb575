import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Builds plugin directories, bundles and manifests from the fixture libraries.
struct PluginFixtures {
    /// Where SwiftPM put the fixture libraries (`Tests/test` exports it).
    static var binDirectory: String {
        if let dir = ProcessInfo.processInfo.environment["PLUGINHOST_BIN_DIR"] { return dir }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug").path
    }

    /// The platform's suffix of a shared library.
    #if canImport(Darwin)
    static let librarySuffix = "dylib"
    #else
    static let librarySuffix = "so"
    #endif

    /// The path of a fixture library, e.g. `AlphaTestPlugin` → `…/libAlphaTestPlugin.so`.
    static func library(_ product: String) throws -> String {
        let path = "\(binDirectory)/lib\(product).\(librarySuffix)"
        guard FileManager.default.fileExists(atPath: path) else {
            throw PluginLoadError(.libraryMissing, file: path, reason: "fixture not built: run `swift build` (Tests/test does) first")
        }
        return path
    }

    /// A fresh directory for this test: `root/plugins` for bundles, manifests in `root`.
    let root: String
    var plugins: String { root + "/plugins" }

    init() throws {
        root = NSTemporaryDirectory() + "pluginhost-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root + "/plugins", withIntermediateDirectories: true)
        chmod(root, 0o755)
        chmod(root + "/plugins", 0o755)
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }

    /// Bundles a fixture library with `PluginBundle.create`.
    @discardableResult
    func bundle(_ product: String, defaultConfig: [String: Any] = [:]) throws -> String {
        try PluginBundle.create(fromLibrary: try Self.library(product), in: plugins, defaultConfig: defaultConfig)
    }

    /// Writes `NAME.plugin/` by hand: the library copied from `source` (or `bytes`), and a
    /// `plugin.json` whose fields can be overridden.
    @discardableResult
    func handBundle(
        name: String, source: String? = nil, bytes: Data? = nil, libraryName: String = "libplugin.so",
        overrides: [String: Any] = [:]
    ) throws -> String {
        let directory = plugins + "/" + name + ".plugin"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        let data = try bytes ?? Data(contentsOf: URL(fileURLWithPath: try #require(source)))
        let libraryPath = directory + "/" + libraryName
        if !libraryName.contains("/") {
            try data.write(to: URL(fileURLWithPath: libraryPath))
            chmod(libraryPath, 0o755)
        }
        var json: [String: Any] = [
            "name": name, "version": "1.0.0", "abi": ["major": 1, "minor": 0], "library": libraryName,
            "sha256": SHA256.hex(SHA256.hash(data)), "summary": "hand-made", "defaultConfig": [String: Any](),
        ]
        for (key, value) in overrides { json[key] = value }
        try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys]).write(to: URL(fileURLWithPath: directory + "/plugin.json"))
        chmod(directory + "/plugin.json", 0o644)
        return directory
    }

    /// Writes a manifest naming `plugins` (name, optional config/enabled/sha256) and returns its URL.
    func manifest(_ entries: [[String: Any]], extra: [String: Any] = [:], file: String = "manifest.json") throws -> URL {
        var json: [String: Any] = ["pluginDirectories": ["plugins"], "plugins": entries]
        for (key, value) in extra { json[key] = value }
        return try manifest(raw: JSONSerialization.data(withJSONObject: json, options: [.sortedKeys]), file: file)
    }

    /// Writes manifest bytes as they are.
    func manifest(raw: Data, file: String = "manifest.json") throws -> URL {
        let url = URL(fileURLWithPath: root + "/" + file)
        try raw.write(to: url)
        chmod(url.path, 0o644)  // whatever the umask: the loader refuses a group-writable manifest
        return url
    }
}

/// Runs `body` and returns the ``PluginLoadError`` it throws (recording an issue if none).
func loadError(_ body: () throws -> Void) -> PluginLoadError? {
    do {
        try body()
        Issue.record("expected a PluginLoadError")
        return nil
    } catch let error as PluginLoadError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}
