import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The host app's plugin manifest (JSON): where bundles are, which plugins are enabled in
/// which order (outermost first), and each plugin's configuration.
///
/// ```json
/// {
///   "pluginDirectories": ["plugins"],
///   "plugins": [
///     { "name": "activity" },
///     { "name": "logger", "config": { "level": "headers" } },
///     { "name": "cache", "enabled": false, "sha256": "…" }
///   ]
/// }
/// ```
/// Relative directories are relative to the manifest file. An entry's `config` is merged
/// over the bundle's `defaultConfig` (objects key by key, the manifest wins); `sha256` pins
/// the library; `enabled: false` keeps the plugin listed but not loaded. A `comment` key is
/// allowed at the top level and in each entry; a `config` object is the plugin's own, and a key
/// it does not know (`comment` too, for the contrib plugins) is its refusal.
public struct PluginManifest: Sendable {
    /// One plugin entry.
    public struct Entry: Sendable {
        /// The plugin (and bundle) name.
        public let name: String
        /// Whether it is loaded.
        public let enabled: Bool
        /// Its configuration object, as JSON, or nil.
        public let configJSON: Data?
        /// A pinned SHA-256 of the library, or nil.
        public let sha256: String?
        /// Its position in `plugins`.
        public let index: Int
    }

    /// The manifest file.
    public let file: String
    /// Directories searched for `NAME.plugin`, absolute, in order.
    public let pluginDirectories: [String]
    /// The entries, outermost first.
    public let entries: [Entry]

    static let keys: Set<String> = ["pluginDirectories", "plugins", "comment"]
    static let entryKeys: Set<String> = ["name", "enabled", "config", "sha256", "comment"]

    /// Reads and validates a manifest file.
    ///
    /// The file and every directory above it must be owned by root or the current user and not
    /// writable by group or others (``PluginLoadError/Kind/insecurePermissions`` otherwise).
    /// Only tools that read a manifest without loading anything may pass
    /// `checkPermissions: false`; the loader and the provider always check.
    public static func read(_ url: URL, checkPermissions: Bool = true) throws(PluginLoadError) -> PluginManifest {
        try checkRegularFile(url.path)
        if checkPermissions { try FileSecurity.check(path: url.path, role: "the manifest") }
        return try parse(try contents(url.path), file: url.path)
    }

    /// Whether `name` can name a plugin (and its bundle, `<name>.plugin`): one path component,
    /// without `/` or NUL, not starting with `.`, not only white space.
    static func isPluginName(_ name: String) -> Bool {
        !name.trimmingCharacters(in: .whitespaces).isEmpty && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0) && !name.hasPrefix(".")
    }

    /// Refuses a path that is no regular file before anything reads it (a FIFO would block the
    /// read, a device would never end); `plugin`: the bundle it belongs to, for `plugin.json`.
    static func checkRegularFile(_ path: String, plugin: String? = nil) throws(PluginLoadError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw PluginLoadError(
                .unreadable, file: path, plugin: plugin, reason: errno == ENOENT ? "no such file" : String(cString: strerror(errno)))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw PluginLoadError(.unreadable, file: path, plugin: plugin, reason: "not a regular file")
        }
    }

    private static func contents(_ path: String) throws(PluginLoadError) -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PluginLoadError(.unreadable, file: path, reason: "cannot read the manifest")
        }
        return data
    }

    /// Every problem of the manifest file, each with its JSON path (empty when it is valid):
    /// unlike ``read(_:checkPermissions:)``, which stops at the first, this goes on checking. The
    /// file's permissions are checked as ``read(_:checkPermissions:)`` checks them.
    public static func problems(in url: URL) -> [PluginLoadError] {
        var found: [PluginLoadError] = []
        do {
            try checkRegularFile(url.path)
            do {
                try FileSecurity.check(path: url.path, role: "the manifest")
            } catch {
                found.append(error)
            }
            return found + problems(in: try contents(url.path), file: url.path)
        } catch {
            return found + [error]
        }
    }

    /// Every problem of manifest JSON.
    public static func problems(in data: Data, file: String) -> [PluginLoadError] {
        walk(data, file: file).problems
    }

    /// Validates manifest JSON; relative directories resolve against `file`'s directory.
    /// Throws the first of ``problems(in:file:)``.
    public static func parse(_ data: Data, file: String) throws(PluginLoadError) -> PluginManifest {
        let (manifest, problems) = walk(data, file: file)
        if let first = problems.first { throw first }
        return manifest
    }

    /// Checks every rule once, collecting problems in document order and building the manifest.
    private static func walk(_ data: Data, file: String) -> (manifest: PluginManifest, problems: [PluginLoadError]) {
        var found: [PluginLoadError] = []
        var directories: [String] = []
        var entries: [Entry] = []
        func check(_ body: () throws(PluginLoadError) -> Void) {
            do { try body() } catch { found.append(error) }
        }
        func result() -> (PluginManifest, [PluginLoadError]) {
            (PluginManifest(file: file, pluginDirectories: directories, entries: entries), found)
        }
        let root: JSONReader
        do { root = try JSONReader.parse(data, file: file) } catch {
            return (PluginManifest(file: file, pluginDirectories: [], entries: []), [error])
        }
        guard let object = root.value as? [String: Any] else {
            found.append(root.schemaError("must be an object"))
            return result()
        }
        for key in object.keys.sorted() where !keys.contains(key) {
            found.append(
                root.schemaError("unknown key \(key.debugDescription); expected one of \(keys.sorted().joined(separator: ", "))", at: root.child(key))
            )
        }
        // A comment is read by people only, but it is a string: another value was taken for one.
        if let value = object["comment"] {
            check { () throws(PluginLoadError) in _ = try JSONReader(file: file, value: value, path: "comment").string() }
        }
        let base = (file as NSString).deletingLastPathComponent
        if let value = object["pluginDirectories"] {
            check { () throws(PluginLoadError) in
                let readers = try JSONReader(file: file, value: value, path: "pluginDirectories").array()
                if readers.isEmpty { throw root.schemaError("must name at least one directory", at: "pluginDirectories") }
                for reader in readers {
                    check { () throws(PluginLoadError) in
                        let path = try reader.nonEmptyString()
                        directories.append(path.hasPrefix("/") ? path : ((base.isEmpty ? "." : base) as NSString).appendingPathComponent(path))
                    }
                }
            }
        } else {
            found.append(root.schemaError("missing required key \"pluginDirectories\"", at: "pluginDirectories"))
        }
        guard let plugins = object["plugins"] else {
            found.append(root.schemaError("missing required key \"plugins\"", at: "plugins"))
            return result()
        }
        let readers: [JSONReader]
        do { readers = try JSONReader(file: file, value: plugins, path: "plugins").array() } catch {
            found.append(error)
            return result()
        }
        var seen: [String: String] = [:]
        for (index, reader) in readers.enumerated() {
            guard let fields = reader.value as? [String: Any] else {
                found.append(reader.schemaError("must be an object"))
                continue
            }
            let before = found.count
            for key in fields.keys.sorted() where !entryKeys.contains(key) {
                found.append(
                    reader.schemaError(
                        "unknown key \(key.debugDescription); expected one of \(entryKeys.sorted().joined(separator: ", "))",
                        at: reader.child(key)))
            }
            func member(_ key: String) -> JSONReader? {
                fields[key].map { JSONReader(file: file, value: $0, path: reader.child(key)) }
            }
            var name = ""
            if let nameReader = member("name") {
                check { () throws(PluginLoadError) in
                    name = try nameReader.nonEmptyString()
                    // The name is one path component (`<name>.plugin` in a plugin directory): a
                    // name with a slash, or one starting with a dot, would reach another bundle
                    // under a name of its own (past `enabled: false`, or a second instance).
                    if !PluginManifest.isPluginName(name) {
                        throw nameReader.schemaError("must be a plugin name: one path component, without \"/\" and not starting with \".\"")
                    }
                    if let first = seen[name] {
                        throw PluginLoadError(
                            .duplicateName, file: file, jsonPath: nameReader.path, plugin: name,
                            reason: "duplicate plugin name (also at \(first))")
                    }
                    seen[name] = nameReader.path
                }
            } else {
                found.append(reader.schemaError("missing required key \"name\"", at: reader.child("name")))
            }
            var enabled = true
            var configJSON: Data?
            var pin: String?
            if let value = member("enabled") { check { () throws(PluginLoadError) in enabled = try value.bool() } }
            if let value = member("config") {
                check { () throws(PluginLoadError) in
                    let object = try value.configObject()
                    configJSON = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
                }
            }
            if let value = member("sha256") { check { () throws(PluginLoadError) in pin = try value.sha256() } }
            if let value = member("comment") { check { () throws(PluginLoadError) in _ = try value.string() } }
            if found.count == before {
                entries.append(Entry(name: name, enabled: enabled, configJSON: configJSON, sha256: pin, index: index))
            }
        }
        return result()
    }

    /// The same manifest with only the entries for which `isIncluded` is true.
    public func filtered(_ isIncluded: (Entry) -> Bool) -> PluginManifest {
        PluginManifest(file: file, pluginDirectories: pluginDirectories, entries: entries.filter(isIncluded))
    }

    /// The bundle directory for `name`: the first plugin directory holding `name.plugin`.
    public func bundleDirectory(for name: String) -> (bundle: String, pluginDirectory: String)? {
        Self.bundleDirectory(for: name, in: pluginDirectories)
    }

    /// The first of `directories` holding the bundle `name.plugin/`: a directory (or a symbolic
    /// link to one). A file of the name that is no directory is no bundle, and the search goes on;
    /// a symbolic link to nothing ends it (refused when read: whoever makes its target decides).
    package static func bundleDirectory(for name: String, in directories: [String]) -> (bundle: String, pluginDirectory: String)? {
        for directory in directories {
            let candidate = (directory as NSString).appendingPathComponent(name + ".plugin")
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory) {
                if isDirectory.boolValue { return (candidate, directory) }
            } else if (try? FileManager.default.destinationOfSymbolicLink(atPath: candidate)) != nil {
                return (candidate, directory)
            }
        }
        return nil
    }
}
