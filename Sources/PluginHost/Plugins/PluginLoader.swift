import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The former name of ``PluginLoader``.
@available(*, deprecated, renamed: "PluginLoader")
public typealias PluginRegistry = PluginLoader

/// Loads the plugins a manifest enables, all or nothing.
public enum PluginLoader {
    /// Reads `manifest`, resolves and verifies every enabled bundle, loads each library, and
    /// creates each plugin with its merged configuration, bound to `services`.
    ///
    /// Returns the plugins outermost first. On any error nothing is returned: plugins already
    /// created are destroyed, and the error names the file, JSON path and plugin. (Libraries
    /// that were opened stay mapped: Swift code is never unloaded.)
    public static func load(manifest: URL, services: PluginServices) throws(PluginLoadError) -> [LoadedPlugin] {
        try load(PluginManifest.read(manifest), services: services)
    }

    /// The refusal of each plugin directory of `manifest` that fails the checks a load makes of
    /// it (``load(_:services:)`` stops at the first), for tools that report them all
    /// (`pluginhost list`): a directory without bundles is checked too, and one that does not
    /// exist by the nearest directory above it.
    package static func directoryRefusals(of manifest: PluginManifest) -> [PluginLoadError] {
        var memo = FileSecurity.CheckMemo()
        var refusals: [PluginLoadError] = []
        for directory in manifest.pluginDirectories {
            do {
                try FileSecurity.checkPluginDirectory(directory, memo: &memo)
            } catch {
                refusals.append(error)
            }
        }
        return refusals
    }

    /// Loads an already parsed manifest.
    public static func load(_ manifest: PluginManifest, services: PluginServices) throws(PluginLoadError) -> [LoadedPlugin] {
        // What the checks found to pass, shared by the libraries of this load.
        var memo = FileSecurity.CheckMemo()
        for directory in manifest.pluginDirectories {
            try FileSecurity.checkPluginDirectory(directory, memo: &memo)
        }
        var prepared: [(entry: PluginManifest.Entry, library: PluginLibrary, config: Data)] = []
        for entry in manifest.entries where entry.enabled {
            let (library, config) = try prepare(entry, in: manifest, memo: &memo)
            prepared.append((entry, library, config))
        }
        var plugins: [LoadedPlugin] = []
        for (entry, library, config) in prepared {
            do throws(PluginLoadError) {
                plugins.append(try LoadedPlugin(library: library, configJSON: config, services: services))
            } catch {
                throw refusal(error, of: entry, in: manifest)
            }
        }
        return plugins
    }

    /// A `create` that refused its configuration, pointed at the entry to edit: the manifest and
    /// `plugins[i].config` (the configuration is the bundle's defaults with that object merged over
    /// them). The reason is the plugin's own message. Other refusals (a descriptor that declares
    /// hooks it lacks) are the library's and keep its path.
    static func refusal(_ error: PluginLoadError, of entry: PluginManifest.Entry, in manifest: PluginManifest) -> PluginLoadError {
        guard error.kind == .createFailed else { return error }
        return PluginLoadError(
            .createFailed, file: manifest.file, jsonPath: "plugins[\(entry.index)].config", plugin: entry.name,
            reason: error.reason)
    }

    /// Finds, verifies and opens one entry's library; returns it with its merged configuration.
    static func prepare(
        _ entry: PluginManifest.Entry, in manifest: PluginManifest, memo: inout FileSecurity.CheckMemo
    ) throws(PluginLoadError) -> (PluginLibrary, Data) {
        guard let (directory, root) = manifest.bundleDirectory(for: entry.name) else {
            throw PluginLoadError(
                .pluginNotFound, file: manifest.file, jsonPath: "plugins[\(entry.index)].name", plugin: entry.name,
                reason: "no \(entry.name).plugin in \(manifest.pluginDirectories.joined(separator: ", "))")
        }
        // Each refusal names the entry's plugin (the bundle's and library's checks know files only).
        do throws(PluginLoadError) {
            // `load` checked every plugin directory before the first bundle.
            let bundle = try PluginBundle.read(directory: directory, pluginDirectory: root, pluginDirectoryChecked: true)
            let library = try PluginLibrary.open(
                path: bundle.libraryPath,
                expectedDigests: bundle.expectedDigests(pin: entry.sha256.map { ($0, entry.index) }), memo: &memo)
            if let mismatch = bundle.nameMismatch(library) { throw mismatch }
            return (library, mergedConfig(defaults: bundle.defaultConfigJSON, overrides: entry.configJSON))
        } catch {
            guard error.plugin == nil else { throw error }
            throw PluginLoadError(error.kind, file: error.file, jsonPath: error.jsonPath, plugin: entry.name, reason: error.reason)
        }
    }

    /// A bundle's default configuration with a manifest entry's configuration merged over it
    /// (objects key by key, the manifest wins).
    public static func mergedConfig(defaults: Data, overrides: Data?) -> Data {
        let base = (try? JSONSerialization.jsonObject(with: defaults)) as? [String: Any] ?? [:]
        let overlay = overrides.flatMap { (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any] } ?? [:]
        return (try? JSONSerialization.data(withJSONObject: mergeJSON(base, overlay), options: [.sortedKeys])) ?? Data("{}".utf8)
    }
}

extension Provider {
    /// Creates a provider whose chain is `before` + the manifest's plugins + `after`. The other
    /// parameters are those of ``Provider/init(endpointClosure:requestClosure:stubClosure:callbackQueue:configuration:transport:interceptors:server:trackInflights:services:maxInterceptorRetries:defaultHeaders:limits:)``.
    ///
    /// Throws ``PluginLoadError`` (and loads nothing) when the manifest or any enabled
    /// plugin is refused.
    public convenience init(
        manifest: URL,
        before: [any Interceptor] = [],
        after: [any Interceptor] = [],
        endpointClosure: @escaping EndpointClosure = Provider.defaultEndpointMapping(for:),
        requestClosure: @escaping RequestClosure = Provider.defaultRequestMapping(for:request:),
        stubClosure: @escaping StubClosure = Provider.neverStub(_:),
        callbackQueue: DispatchQueue? = nil,
        configuration: URLSessionConfiguration? = nil,
        transport: (any Transport)? = nil,
        server: ServerConfiguration? = nil,
        trackInflights: Bool = false,
        services: PluginServices = PluginServices(),
        maxInterceptorRetries: Int = 2,
        defaultHeaders: [String: String]? = nil,
        limits: RequestLimits = .default
    ) throws(PluginLoadError) {
        let loaded = try PluginLoader.load(manifest: manifest, services: services)
        self.init(
            endpointClosure: endpointClosure, requestClosure: requestClosure, stubClosure: stubClosure,
            callbackQueue: callbackQueue, configuration: configuration, transport: transport,
            interceptors: before + loaded + after, server: server, trackInflights: trackInflights, services: services,
            maxInterceptorRetries: maxInterceptorRetries, defaultHeaders: defaultHeaders, limits: limits)
        generations.withLock {
            $0.source = ChainGeneration.Source(manifest: manifest, before: before, after: after, loaded: loaded.map(LoadedPluginSummary.init))
        }
    }
}
