import Foundation
import PluginSDK

/// One generation of a provider's chain: what new requests start on, and what a reload needs.
struct ChainGeneration: Sendable {
    /// Where a manifest-loaded chain came from.
    struct Source: Sendable {
        var manifest: URL
        var before: [any Interceptor]
        var after: [any Interceptor]
        var loaded: [LoadedPluginSummary]
    }

    var chain: InterceptorChain
    /// 1 for the chain the provider was created with, one more for each successful reload.
    var number: Int
    /// nil: the provider was not created from a manifest.
    var source: Source?
}

/// What a reload compares: a loaded plugin without its instance (which the old chain keeps
/// alive only as long as its requests need it).
struct LoadedPluginSummary: Sendable, Equatable {
    var name: String
    var version: String
    var sha256: String
    var configuration: Data

    init(_ plugin: LoadedPlugin) {
        name = plugin.name
        version = plugin.library.info.version
        sha256 = plugin.library.sha256
        configuration = plugin.configuration
    }
}

/// Pins a provider's chain for the rest of a pipeline consumption that may send more than once
/// (``ResponsePipeline/retry(_:)``), so a reload in between does not mix generations in it.
/// A retried consumption within another takes the other's pinned chains, and keeps them should
/// it outlive it (started in a `Task {}`). A pin counts only while its consumption runs: a
/// `Task {}` started within it, which inherits it and may outlive it, takes the chain of its own
/// time once the consumption has returned.
final class ChainPin: Sendable {
    @TaskLocal static var current: ChainPin?
    /// The pin of the retried consumption this one runs within, when there was one.
    private let parent: ChainPin?
    /// Whether the consumption runs, and its chains per owner (kept alive here, so an owner's
    /// identifier cannot be reused while the pin lives): one lock, so a pin that ended takes no more.
    private let state = Locked((live: true, pinned: [ObjectIdentifier: (owner: any AnyObject & Sendable, generation: ChainGeneration)]()))

    init(parent: ChainPin?) {
        self.parent = parent
    }

    /// The consumption returned: nothing is pinned any more, and the chains pinned are let go.
    func end() {
        // Let go after the lock: the last hold on an old generation destroys its plugins, whose
        // `destroy` must not run while a child consumption waits for this pin.
        let released = state.withLock { state in
            state.live = false
            defer { state.pinned.removeAll() }
            return state.pinned
        }
        _ = consume released
    }

    /// The generation `owner` pinned in the consumptions this task runs within (the innermost
    /// that still runs), else `make()`, pinned in them.
    static func generation(for owner: any AnyObject & Sendable, _ make: () -> ChainGeneration) -> ChainGeneration {
        pinned(from: current, for: owner, make) ?? make()
    }

    /// The generation `owner` has in the first of `pin` and its parents that still runs (pinned
    /// there now when it had none); nil when none runs.
    private static func pinned(
        from pin: ChainPin?, for owner: any AnyObject & Sendable, _ make: () -> ChainGeneration
    ) -> ChainGeneration? {
        var next = pin
        while let pin = next {
            if let generation = pin.pinned(for: owner, make) { return generation }
            next = pin.parent
        }
        return nil
    }

    /// This pin's generation for `owner` (its parents', or `make()`, pinned now); nil once ended.
    private func pinned(for owner: any AnyObject & Sendable, _ make: () -> ChainGeneration) -> ChainGeneration? {
        state.withLock { state in
            guard state.live else { return nil }
            if let entry = state.pinned[ObjectIdentifier(owner)] { return entry.generation }
            let generation = Self.pinned(from: parent, for: owner, make) ?? make()
            state.pinned[ObjectIdentifier(owner)] = (owner, generation)
            return generation
        }
    }
}

/// What ``Provider/reloadPlugins()`` changed, comparing the manifest's plugins before and after.
public struct PluginReloadReport: Sendable, Equatable, CustomStringConvertible {
    /// A plugin whose library changed (another SHA-256), with its versions before and after.
    public struct Upgrade: Sendable, Equatable {
        /// The plugin's name.
        public var name: String
        /// The version that was loaded.
        public var from: String
        /// The version now loaded.
        public var to: String
        /// The SHA-256 of the library that was loaded.
        public var fromSHA256: String
        /// The SHA-256 of the library now loaded.
        public var toSHA256: String
    }

    /// The chain generation now serving new requests (the provider starts at 1).
    public var generation: Int
    /// Plugins enabled now and not before, in chain order.
    public var added: [String]
    /// Plugins enabled before and not now.
    public var removed: [String]
    /// Whether the plugins in both generations are in another order now.
    public var reordered: Bool
    /// The manifest's plugins now, in chain order.
    public var order: [String]
    /// Plugins whose library is the same and whose configuration changed.
    public var reconfigured: [String]
    /// Plugins whose library changed.
    public var upgraded: [Upgrade]

    /// Whether anything changed (every reload creates new instances all the same).
    public var changed: Bool { !added.isEmpty || !removed.isEmpty || reordered || !reconfigured.isEmpty || !upgraded.isEmpty }

    init(before: [LoadedPluginSummary], after: [LoadedPluginSummary], generation: Int) {
        self.generation = generation
        let beforeNames = before.map(\.name)
        let afterNames = after.map(\.name)
        added = afterNames.filter { !beforeNames.contains($0) }
        removed = beforeNames.filter { !afterNames.contains($0) }
        reordered = beforeNames.filter(afterNames.contains) != afterNames.filter(beforeNames.contains)
        order = afterNames
        var reconfigured: [String] = []
        var upgraded: [Upgrade] = []
        for new in after {
            guard let old = before.first(where: { $0.name == new.name }) else { continue }
            if old.sha256 != new.sha256 {
                upgraded.append(Upgrade(name: new.name, from: old.version, to: new.version, fromSHA256: old.sha256, toSHA256: new.sha256))
            } else if old.configuration != new.configuration {
                reconfigured.append(new.name)
            }
        }
        self.reconfigured = reconfigured
        self.upgraded = upgraded
    }

    /// `generation 3: added x; upgraded y 1.0.0 → 1.1.0`, or `generation 3: no change`.
    public var description: String {
        var parts: [String] = []
        if !added.isEmpty { parts.append("added \(added.joined(separator: ", "))") }
        if !removed.isEmpty { parts.append("removed \(removed.joined(separator: ", "))") }
        if reordered { parts.append("reordered (\(order.joined(separator: ", ")))") }
        if !reconfigured.isEmpty { parts.append("reconfigured \(reconfigured.joined(separator: ", "))") }
        if !upgraded.isEmpty { parts.append("upgraded " + upgraded.map { "\($0.name) \($0.from) → \($0.to)" }.joined(separator: ", ")) }
        return "generation \(generation): " + (parts.isEmpty ? "no change" : parts.joined(separator: "; "))
    }

    /// The fields of the `plugins.reloaded` event.
    var eventFields: [String: String] {
        [
            "generation": String(generation), "added": added.joined(separator: ","), "removed": removed.joined(separator: ","),
            "reordered": String(reordered), "order": order.joined(separator: ","), "reconfigured": reconfigured.joined(separator: ","),
            "upgraded": upgraded.map { "\($0.name) \($0.from)→\($0.to)" }.joined(separator: ","), "summary": description,
        ]
    }
}

extension Provider {
    /// Loads the provider's manifest anew and, when every plugin loads, makes the new chain the
    /// one new requests use — like `nginx -s reload` after `nginx -t` (`pluginhost test` checks a
    /// manifest without touching a running app).
    ///
    /// - All or nothing: on any error (manifest, bundle, digest, permissions, a refused
    ///   configuration) the running chain keeps serving and the ``PluginLoadError`` is thrown;
    ///   subscribers get a `plugins.reload-failed` event with it.
    /// - Requests in flight finish on the chain they started with, retries included (also those
    ///   of ``ResponsePipeline/retry(_:)``); a request never sees instances of two generations.
    /// - Every plugin of the new chain is a new instance (state kept in memory by the old ones,
    ///   such as the cache's memory store, starts empty); the old instances are destroyed when
    ///   the last request holding them ends.
    /// - A library already loaded with the same SHA-256 is reused; a changed one is loaded beside
    ///   it from a verified private copy (libraries are never unloaded).
    /// - The interceptors given as `before:` and `after:` stay as they are.
    ///
    /// Returns what changed; subscribers also get a `plugins.reloaded` event (plugin `pluginhost`)
    /// whose fields are `generation`, `added`, `removed`, `reordered`, `order`, `reconfigured`,
    /// `upgraded` (comma-separated) and `summary`. Reloads are serialized.
    ///
    /// ```swift
    /// let report = try provider.reloadPlugins()
    /// print(report)        // generation 2: added cache; reconfigured logger
    /// ```
    @discardableResult
    public func reloadPlugins() throws(PluginLoadError) -> PluginReloadReport {
        // Events go out, and the replaced generation is let go (its plugins destroyed when no
        // request holds them), after both locks are released: a subscriber or a plugin's destroy
        // may read the provider or reload again.
        let outcome = reloadSerialized()
        switch outcome {
        case .failure(let error):
            services.emit(PluginEvent(plugin: "pluginhost", name: "plugins.reload-failed", fields: ["error": error.description]))
            throw error
        case .success(let (report, replaced)):
            withExtendedLifetime(replaced) {
                services.emit(PluginEvent(plugin: "pluginhost", name: "plugins.reloaded", fields: report.eventFields))
            }
            return report
        }
    }

    /// One reload under `reloading`: the report and the generation it replaced.
    private func reloadSerialized() -> Result<(PluginReloadReport, ChainGeneration), PluginLoadError> {
        let me = ObjectIdentifier(self)
        if ReloadScope.runs.contains(where: { $0.provider == me && $0.isRunning && $0.isOnThisThread }) {
            return .failure(
                PluginLoadError(
                    .reloadInProgress, file: current.source?.manifest.path ?? "",
                    reason: "reloadPlugins() was called from within a reload of this provider (a plugin's create, or a log handler or "
                        + "subscriber it reached); reloads are serialized: reload after this one returns"))
        }
        reloading.lock()
        defer { reloading.unlock() }
        let old = current
        guard let source = old.source else {
            return .failure(
                PluginLoadError(
                    .notReloadable, file: "", reason: "this provider was not created from a manifest (Provider(manifest:)); it has nothing to reload")
            )
        }
        let run = ReloadScope.Run(provider: me)
        let outcome = ReloadScope.$runs.withValue(ReloadScope.runs + [run]) { () -> Result<[LoadedPlugin], PluginLoadError> in
            defer { run.end() }
            do throws(PluginLoadError) {
                return .success(try PluginLoader.load(manifest: source.manifest, services: services))
            } catch {
                return .failure(error)
            }
        }
        let loaded: [LoadedPlugin]
        switch outcome {
        case .success(let plugins): loaded = plugins
        case .failure(let error): return .failure(error)
        }
        let summaries = loaded.map(LoadedPluginSummary.init)
        let report = PluginReloadReport(before: source.loaded, after: summaries, generation: old.number + 1)
        var next = source
        next.loaded = summaries
        var generation = ChainGeneration(
            chain: InterceptorChain(interceptors: source.before + loaded + source.after, services: services, maxRetries: old.chain.maxRetries),
            number: report.generation, source: next)
        generations.withLock { swap(&$0, &generation) }
        return .success((report, generation))
    }

    /// The number of the chain generation new requests start on: 1 for the chain the provider was
    /// created with, one more per successful ``reloadPlugins()``.
    public var pluginGeneration: Int { current.number }
}

/// The reloads the current task or thread runs within: a reload asked for from within one of the
/// same provider (a plugin's `create` reaching a handler that reloads: the same thread, for the
/// reload is synchronous) is refused, not left waiting for itself. A `Task {}` started within a
/// reload inherits its runs and runs on another thread, or after the reload: it waits for the
/// reload, or reloads after it.
enum ReloadScope {
    /// One reload's load of its manifest.
    final class Run: @unchecked Sendable {
        // Safe: `thread` is never changed, and `running` is behind its lock.
        /// The provider reloading.
        let provider: ObjectIdentifier
        /// The thread the reload runs on.
        private let thread = pthread_self()
        private let running = Locked(true)

        init(provider: ObjectIdentifier) {
            self.provider = provider
        }

        /// Whether the reload still loads.
        var isRunning: Bool { running.withLock { $0 } }

        /// Whether the reload runs on the calling thread.
        var isOnThisThread: Bool { pthread_equal(thread, pthread_self()) != 0 }

        /// The load returned.
        func end() { running.withLock { $0 = false } }
    }

    @TaskLocal static var runs: [Run] = []
}
