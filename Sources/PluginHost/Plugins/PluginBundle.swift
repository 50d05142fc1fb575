import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A drop-in plugin bundle: a directory `NAME.plugin/` holding the shared library and a
/// `plugin.json` that describes it.
///
/// ```json
/// {
///   "name": "logger",
///   "version": "1.0.0",
///   "abi": { "major": 1, "minor": 0 },
///   "library": "libLoggerPlugin.so",
///   "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
///   "summary": "Logs requests and responses",
///   "license": "MIT",
///   "defaultConfig": { "level": "basic" }
/// }
/// ```
public struct PluginBundle: Sendable {
    /// The bundle directory.
    public let directory: String
    /// The plugin name (the directory's name without `.plugin`).
    public let name: String
    /// The version stated in `plugin.json`.
    public let version: String
    /// The ABI stated in `plugin.json`.
    public let abi: (major: Int, minor: Int)
    /// The library file inside the bundle.
    public let libraryPath: String
    /// The SHA-256 stated in `plugin.json`.
    public let sha256: String
    /// The summary stated in `plugin.json`.
    public let summary: String
    /// The default configuration (JSON object) as data.
    public let defaultConfigJSON: Data

    /// The `plugin.json` keys.
    static let keys: Set<String> = [
        "name", "version", "abi", "library", "sha256", "summary", "license",
        "defaultConfig", "buildSignature", "comment",
    ]

    /// Reads `directory/plugin.json`, checking names, paths and permissions.
    ///
    /// - Parameter pluginDirectory: the directory the bundle must stay inside.
    public static func read(directory: String, pluginDirectory: String) throws(PluginLoadError) -> PluginBundle {
        try read(directory: directory, pluginDirectory: pluginDirectory, pluginDirectoryChecked: false)
    }

    /// ``read(directory:pluginDirectory:)``; with `pluginDirectoryChecked`, the plugin directory's
    /// own permissions are not checked again (the loader checks each directory once, before its bundles).
    static func read(directory: String, pluginDirectory: String, pluginDirectoryChecked: Bool) throws(PluginLoadError) -> PluginBundle {
        let name = ((directory as NSString).lastPathComponent as NSString).deletingPathExtension
        guard let realDirectory = FileSecurity.realPath(directory), let realRoot = FileSecurity.realPath(pluginDirectory) else {
            throw PluginLoadError(.unreadable, file: directory, plugin: name, reason: "the bundle directory cannot be resolved")
        }
        guard realDirectory.hasPrefix(realRoot.hasSuffix("/") ? realRoot : realRoot + "/") else {
            throw PluginLoadError(
                .pathEscape, file: directory, plugin: name,
                reason: "the bundle resolves to \(realDirectory), outside the plugin directory \(realRoot)")
        }
        if !pluginDirectoryChecked { try FileSecurity.check(path: pluginDirectory, role: "the plugin directory") }
        try FileSecurity.check(path: directory, role: "the bundle directory")
        let manifestPath = directory + "/plugin.json"
        if FileManager.default.fileExists(atPath: manifestPath) {
            // Before anything reads it (a FIFO would block the read, and a reload with it).
            try PluginManifest.checkRegularFile(manifestPath, plugin: name)
            try FileSecurity.check(path: manifestPath, role: "the bundle descriptor")
        }
        guard let data = FileManager.default.contents(atPath: manifestPath) else {
            throw PluginLoadError(.unreadable, file: manifestPath, plugin: name, reason: "cannot read plugin.json")
        }
        let bundle = try parse(data, file: manifestPath, directory: directory, name: name)
        if let realLibrary = FileSecurity.realPath(bundle.libraryPath), !realLibrary.hasPrefix(realDirectory + "/") {
            throw PluginLoadError(
                .pathEscape, file: bundle.libraryPath, plugin: name,
                reason: "the library resolves to \(realLibrary), outside its bundle")
        }
        return bundle
    }

    /// Validates `plugin.json` bytes of the bundle `name` in `directory`.
    static func parse(_ data: Data, file manifestPath: String, directory: String, name: String) throws(PluginLoadError) -> PluginBundle {
        let root = try JSONReader.parse(data, file: manifestPath)
        let members = try root.object(allowing: keys)
        func required(_ key: String) throws(PluginLoadError) -> JSONReader {
            guard let member = members[key] else { throw root.schemaError("missing required key \(key.debugDescription)", at: key) }
            return member
        }
        let declaredName = try required("name").nonEmptyString()
        guard declaredName == name else {
            throw PluginLoadError(
                .nameMismatch, file: manifestPath, jsonPath: "name", plugin: name,
                reason: "plugin.json names \(declaredName.debugDescription) but the bundle is \(name).plugin")
        }
        let abiMembers = try required("abi").object(allowing: ["major", "minor"])
        guard let majorReader = abiMembers["major"], let minorReader = abiMembers["minor"] else {
            throw root.schemaError("must have major and minor", at: "abi")
        }
        let library = try required("library").nonEmptyString()
        if library.contains("/") || library == ".." || library == "." {
            throw PluginLoadError(
                .pathEscape, file: manifestPath, jsonPath: "library", plugin: name,
                reason: "library must be a file name inside the bundle, not \(library.debugDescription)")
        }
        // Read by nobody here, but of the type the format says.
        for key in ["license", "buildSignature", "comment"] { _ = try members[key]?.string() }
        var defaultConfig = Data("{}".utf8)
        if let config = members["defaultConfig"] {
            let object = try config.configObject()
            defaultConfig = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? defaultConfig
        }
        return PluginBundle(
            directory: directory, name: name, version: try required("version").nonEmptyString(),
            abi: (try majorReader.int(), try minorReader.int()), libraryPath: directory + "/" + library,
            sha256: try required("sha256").sha256(), summary: try members["summary"]?.string() ?? "",
            defaultConfigJSON: defaultConfig)
    }

    /// The SHA-256 values the library must have: `plugin.json`'s, and the manifest's pin for
    /// entry `pin.index` when there is one.
    package func expectedDigests(pin: (sha256: String, index: Int)? = nil) -> [(source: String, sha256: String)] {
        var digests = [(source: "plugin.json", sha256: sha256)]
        if let pin { digests.append((source: "the manifest (plugins[\(pin.index)].sha256)", sha256: pin.sha256)) }
        return digests
    }

    /// The refusal when `library`'s descriptor names another plugin than this bundle, or nil.
    package func nameMismatch(_ library: PluginLibrary) -> PluginLoadError? {
        guard library.info.name != name else { return nil }
        return PluginLoadError(
            .nameMismatch, file: libraryPath, plugin: name,
            reason: "the library's descriptor names \(library.info.name.debugDescription), the bundle is \(name).plugin")
    }

    /// Makes `NAME.plugin/` in `outputDirectory` from a built library: reads the library once,
    /// reads its descriptor from those bytes, copies them into the bundle and writes `plugin.json`
    /// with their SHA-256 and `defaultConfig`.
    ///
    /// Refuses a library without a valid descriptor, with the reason.
    @discardableResult
    public static func create(
        fromLibrary libraryPath: String, in outputDirectory: String,
        defaultConfig: [String: Any] = [:]
    ) throws(PluginLoadError) -> String {
        let (library, bytes) = try PluginLibrary.openKeepingBytes(path: libraryPath)
        return try write(library, bytes: bytes, from: libraryPath, in: outputDirectory, defaultConfig: defaultConfig)
    }

    /// The library `pluginhost bundle` would bundle: opened from `libraryPath`, with the bytes it
    /// was read from. Refused without a valid descriptor.
    package static func open(_ libraryPath: String) throws(PluginLoadError) -> (library: PluginLibrary, bytes: Data) {
        try PluginLibrary.openKeepingBytes(path: libraryPath)
    }

    /// The configuration file `pluginhost bundle --config` stores as `defaultConfig`, read as
    /// manifests are (UTF-8, a repeated key refused, naming its path): a JSON object.
    package static func readConfig(_ data: Data, file: String) throws(PluginLoadError) -> [String: Any] {
        guard let object = try JSONReader.parse(data, file: file).value as? [String: Any] else {
            throw PluginLoadError(.schema, file: file, reason: "the configuration must be a JSON object")
        }
        return object
    }

    /// Writes `NAME.plugin/` for `library`, opened from `bytes` (read at `libraryPath`), in
    /// `outputDirectory`; its only failure is one of writing (`unreadable`, "cannot write the
    /// bundle").
    @discardableResult
    package static func write(
        _ library: PluginLibrary, bytes: Data, from libraryPath: String, in outputDirectory: String, defaultConfig: [String: Any]
    ) throws(PluginLoadError) -> String {
        let info = library.info
        let bundle = outputDirectory + "/" + info.name + ".plugin"
        let fileName = (libraryPath as NSString).lastPathComponent
        let files = FileManager.default
        do {
            try files.createDirectory(atPath: bundle, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            chmod(bundle, 0o755)
            let target = bundle + "/" + fileName
            if files.fileExists(atPath: target) { try files.removeItem(atPath: target) }
            // The bytes read, opened and hashed are the bytes written: a library being rewritten
            // meanwhile (a build still writing it) is not bundled beside another's digest.
            try bytes.write(to: URL(fileURLWithPath: target))
            chmod(target, 0o755)
            var json: [String: Any] = [
                "name": info.name, "version": info.version, "abi": ["major": info.abiMajor, "minor": info.abiMinor],
                "library": fileName, "sha256": library.sha256, "summary": info.summary, "license": info.license,
                "buildSignature": info.buildSignature,
            ]
            json["defaultConfig"] = defaultConfig
            let data = try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys])
            try data.write(to: URL(fileURLWithPath: bundle + "/plugin.json"))
            chmod(bundle + "/plugin.json", 0o644)
        } catch let error as PluginLoadError {
            throw error
        } catch {
            throw PluginLoadError(.unreadable, file: bundle, plugin: info.name, reason: "cannot write the bundle: \(error.localizedDescription)")
        }
        return bundle
    }
}
