/// Why a manifest, bundle or plugin library was refused. Loading is all or nothing: when this
/// is thrown, no plugin of the manifest is active.
public struct PluginLoadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The category of problem.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// A manifest or `plugin.json` file cannot be read.
        case unreadable
        /// The file is not JSON.
        case notJSON
        /// The JSON does not have the expected shape (unknown key, wrong type, missing value).
        case schema
        /// Two manifest entries name the same plugin.
        case duplicateName
        /// No plugin directory holds `NAME.plugin`.
        case pluginNotFound
        /// The library file does not exist.
        case libraryMissing
        /// The file is not a loadable shared object (`dlerror` text kept).
        case notSharedObject
        /// The library does not export `pluginhost_plugin_v1`.
        case missingEntrySymbol
        /// The plugin speaks another ABI major, or a newer minor, than the host.
        case abiMismatch
        /// The descriptor is malformed (too small, missing functions or strings).
        case descriptorInvalid
        /// The descriptor's name is not the bundle's name.
        case nameMismatch
        /// The plugin's `create` refused its configuration.
        case createFailed
        /// The library's SHA-256 is not the one in `plugin.json` or pinned in the manifest.
        case digestMismatch
        /// A file or directory is writable by group or others, or owned by another user.
        case insecurePermissions
        /// A path leaves its plugin directory (`..`, absolute, or a symlink pointing outside).
        case pathEscape
        /// ``Provider/reloadPlugins()`` on a provider that was not created from a manifest.
        case notReloadable
        /// ``Provider/reloadPlugins()`` called during a reload of the same provider, from within it
        /// (a plugin's `create`, or a log handler or event subscriber it reached): reloads are
        /// serialized, so waiting for the running one would wait forever.
        case reloadInProgress
    }

    /// The category.
    public let kind: Kind
    /// The file or directory the problem is in.
    public let file: String
    /// Where in the JSON, e.g. `plugins[2].config`, when the problem is in a JSON file.
    public let jsonPath: String?
    /// The plugin concerned, when known.
    public let plugin: String?
    /// What is wrong.
    public let reason: String

    /// Creates an error.
    public init(_ kind: Kind, file: String, jsonPath: String? = nil, plugin: String? = nil, reason: String) {
        self.kind = kind
        self.file = file
        self.jsonPath = jsonPath
        self.plugin = plugin
        self.reason = reason
    }

    /// `file: jsonPath: plugin "name": reason`, leaving out what is unknown.
    public var description: String {
        var parts = file.isEmpty ? [] : [file]
        if let jsonPath { parts.append(jsonPath) }
        if let plugin { parts.append("plugin \(plugin.debugDescription)") }
        parts.append(reason)
        return parts.joined(separator: ": ")
    }
}
