import CPluginABI
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An event an interceptor emitted through ``HostServices/emit(_:fields:)``.
public struct PluginEvent: Sendable, Equatable {
    /// The emitting interceptor's name.
    public var plugin: String
    /// The event name, e.g. `began`.
    public var name: String
    /// The event's fields.
    public var fields: [String: String]

    /// Creates an event.
    public init(plugin: String, name: String, fields: [String: String]) {
        self.plugin = plugin
        self.name = name
        self.fields = fields
    }
}

/// Keeps an event subscription alive; call ``cancel()`` to stop receiving events.
public final class EventSubscription: Sendable {
    private let onCancel: Locked<(@Sendable () -> Void)?>

    init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Locked(onCancel)
    }

    /// Stops the subscription; calling it again does nothing.
    public func cancel() {
        let action = onCancel.withLock { action -> (@Sendable () -> Void)? in
            defer { action = nil }
            return action
        }
        action?()
    }
}

/// The services a provider offers its interceptors: a key/value store for tokens and
/// secrets, an event sink the app subscribes to, a log sink, clocks, random bytes, and
/// credential refreshers. Thread-safe.
public final class PluginServices: Sendable {
    /// Receives log lines: level, interceptor name, message.
    public typealias LogHandler = @Sendable (LogLevel, String, String) -> Void
    /// Produces a fresh credential value; gets the value that was rejected, if known.
    public typealias Refresher = @Sendable (_ staleValue: String?) async throws -> String

    private struct State {
        var values: [String: String] = [:] {
            didSet { recentReads.removeAll(keepingCapacity: true) }
        }
        /// The keys loaded plugins read last, with their values: a key read again is found by
        /// comparing its bytes (no string made, no hash). Emptied by every change of `values`.
        var recentReads: [(key: String, value: String?)] = []
        var observers: [UInt64: @Sendable (PluginEvent) -> Void] = [:]
        var nextObserver: UInt64 = 0
        var logHandler: LogHandler? = PluginServices.standardErrorLog
        var refreshers: [String: Refresher] = [:]
        var refreshing: [String: Task<Result<String, NetworkError>, Never>] = [:]
        var refreshTimes: [String: [Double]] = [:]
    }

    private let state = Locked(State())
    /// The most refreshes of one key allowed within ``refreshWindow`` seconds before
    /// refreshing fails as excessive (a loop guard). Default 3.
    public let maxRefreshes: Int
    /// The window of ``maxRefreshes``, in seconds. Default 30.
    public let refreshWindow: Double
    /// How long one refresh may take, in seconds, before it fails for everyone waiting for it
    /// (the refresher's task is cancelled, and the next refresh starts anew): a refresher that
    /// hangs holds no request, nor the key, for good. Default 60; 0, less or not finite: no limit.
    public let refreshTimeout: Double

    /// Creates the services with a refresh loop guard and a time limit for each refresh.
    public init(maxRefreshes: Int = 3, refreshWindow: Double = 30, refreshTimeout: Double = 60) {
        self.maxRefreshes = maxRefreshes
        self.refreshWindow = refreshWindow
        self.refreshTimeout = refreshTimeout
    }

    /// Writes `warning` and `error` lines to standard error; the default log handler.
    public static let standardErrorLog: LogHandler = { level, plugin, message in
        guard level >= .warning else { return }
        FileDescriptor.writeAll(2, "[\(level)] \(plugin): \(message)\n")
    }

    /// The ``HostServices`` an interceptor named `plugin` sees: these services, with its events
    /// and log lines labelled with its name. Use it to create a plugin in-process
    /// (`LoggerPlugin(configuration:host:)`) instead of loading it from a bundle.
    public func hostServices(for plugin: String) -> any HostServices {
        BoundServices(services: self, plugin: plugin)
    }

    // MARK: Key/value store

    /// A stored value.
    public func value(forKey key: String) -> String? {
        state.withLock { $0.values[key] }
    }

    /// Stores or (with `nil`) removes a value.
    public func setValue(_ value: String?, forKey key: String) {
        state.withLock { $0.values[key] = value }
    }

    /// How many of the keys loaded plugins read last are kept (by a loaded plugin's `kv_get`).
    static let recentReadsKept = 8

    /// The value stored for a key a loaded plugin gives as bytes (invalid UTF-8 repaired, as
    /// ``CBytes/string(_:)`` repairs it). A key read lately is found by its bytes.
    func value(forKey key: ph_bytes) -> String? {
        state.withLock { state in
            for index in state.recentReads.indices where CBytes.equal(key, state.recentReads[index].key) {
                return state.recentReads[index].value
            }
            let name = CBytes.string(key)
            let value = state.values[name]
            if state.recentReads.count == Self.recentReadsKept { state.recentReads.removeFirst() }
            state.recentReads.append((name, value))
            return value
        }
    }

    // MARK: Events

    /// Calls `handler` for every event from now on, on the emitting thread.
    public func subscribe(_ handler: @escaping @Sendable (PluginEvent) -> Void) -> EventSubscription {
        let id = state.withLock { state -> UInt64 in
            state.nextObserver += 1
            state.observers[state.nextObserver] = handler
            return state.nextObserver
        }
        subscriberCount.add(1)
        return EventSubscription { [weak self] in
            guard let self else { return }
            let removed = state.withLock { $0.observers.removeValue(forKey: id) } != nil
            if removed { subscriberCount.add(-1) }
        }
    }

    /// How many subscribers listen (read atomically, without a lock: asked on every request by
    /// event emitters).
    private let subscriberCount = AtomicCount()

    /// Whether anyone listens for events; interceptors skip building events when not.
    public var hasSubscribers: Bool { subscriberCount.value > 0 }

    /// Events as an asynchronous sequence; it ends when the consuming task stops iterating.
    public func events(bufferingNewest limit: Int = 10_000) -> AsyncStream<PluginEvent> {
        AsyncStream(bufferingPolicy: .bufferingNewest(limit)) { continuation in
            let subscription = subscribe { continuation.yield($0) }
            continuation.onTermination = { _ in subscription.cancel() }
        }
    }

    /// Delivers an event to every subscriber.
    public func emit(_ event: PluginEvent) {
        let observers = state.withLock { Array($0.observers.values) }
        for observer in observers { observer(event) }
    }

    // MARK: Log

    /// Replaces the log handler; `nil` discards log lines.
    public func setLogHandler(_ handler: LogHandler?) {
        state.withLock { $0.logHandler = handler }
    }

    /// Writes a log line.
    public func log(_ level: LogLevel, plugin: String, _ message: String) {
        let handler = state.withLock { $0.logHandler }
        handler?(level, plugin, message)
    }

    // MARK: Credential refresh

    /// Registers the refresher for the credential stored under `key`.
    public func registerRefresher(forKey key: String, _ refresher: @escaping Refresher) {
        state.withLock { $0.refreshers[key] = refresher }
    }

    /// Refreshes the credential under `key`, sharing one refresh among concurrent callers.
    ///
    /// Returns at once when the store holds another value than `staleValue` (someone refreshed
    /// already). A store that holds none refreshes: the stale value came from elsewhere (a
    /// token from the environment or a file), and the refresher's value goes into the store, unless
    /// the app stored another value (or removed it) while the refresh ran: the app's stays. Fails with ``NetworkError/credentialRefresh(key:message:)`` when no
    /// refresher is registered, the refresher throws, or more than ``maxRefreshes``
    /// refreshes happened within ``refreshWindow`` seconds, or the refresher did not finish within
    /// ``refreshTimeout`` seconds; with ``NetworkError/cancelled`` when
    /// the calling task is cancelled while it waits (the refresh goes on for others).
    public func refresh(key: String, staleValue: String?) async throws(NetworkError) {
        try await refresh(key: key, staleValue: staleValue, cancellation: CancellationSignal())
    }

    /// Whether two stored values are the same: both absent, or of the same bytes.
    private static func same(_ a: String?, _ b: String?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return UTF8Bytes.equal(a, b)
    }

    /// ``refresh(key:staleValue:)`` for one request: its wait ends, ``NetworkError/cancelled``,
    /// when `cancellation` fires too (the request cancelled, or out of time).
    func refresh(key: String, staleValue: String?, cancellation: CancellationSignal) async throws(NetworkError) {
        let now = Date().timeIntervalSince1970
        let task: Task<Result<String, NetworkError>, Never>? = try state.withLock { state throws(NetworkError) in
            // Already refreshed when the value is not the stale one (compared as bytes: a value of
            // other bytes is a refreshed one, though equal as a string).
            if let staleValue, let current = state.values[key], !UTF8Bytes.equal(current, staleValue) { return nil }
            if let running = state.refreshing[key] { return running }
            guard let refresher = state.refreshers[key] else {
                throw NetworkError.credentialRefresh(key: key, message: "no refresher is registered for this key")
            }
            let recent = (state.refreshTimes[key] ?? []).filter { now - $0 < refreshWindow }
            guard recent.count < maxRefreshes else {
                throw NetworkError.credentialRefresh(
                    key: key, message: "excessive refresh: \(recent.count) refreshes within \(refreshWindow) s (limit \(maxRefreshes))")
            }
            state.refreshTimes[key] = recent + [now]
            // The refresher's value replaces this one only: a value stored meanwhile (a logout,
            // another user's login) is the app's word, and stays.
            let replaced = state.values[key]
            let timeout = refreshTimeout
            let task = Task { [weak self] () -> Result<String, NetworkError> in
                // Without the deadline or the pinned chains of the request that started it: the
                // refresh serves every request waiting for it, and the requests the refresher
                // makes have their own.
                let work = ConsumptionScope.leavingSynchronously {
                    Task { () -> Result<String, NetworkError> in
                        do {
                            return .success(try await refresher(staleValue))
                        } catch {
                            return .failure(.credentialRefresh(key: key, message: String(describing: error)))
                        }
                    }
                }
                // The refresher's result, or a failure once `timeout` has passed (without waiting
                // for a refresher that does not stop when cancelled).
                let expired = CancellationSignal()
                let timer = timeout > 0 && timeout.isFinite ? expired.cancel(at: .now() + timeout) : nil
                let finished = await expired.value(of: work)
                timer?.cancel()
                if finished == nil { work.cancel() }
                let result =
                    finished ?? .failure(.credentialRefresh(key: key, message: "the refresher did not finish within \(timeout) s"))
                self?.state.withLock { state in
                    if case .success(let value) = result, Self.same(state.values[key], replaced) { state.values[key] = value }
                    state.refreshing[key] = nil
                }
                return result
            }
            state.refreshing[key] = task
            return task
        }
        guard let task else { return }
        guard let result = await cancellation.value(of: task) else { throw .cancelled }
        _ = try result.get()
    }
}

/// The ``HostServices`` one interceptor sees: the provider's services, with events and
/// log lines labelled with the interceptor's name.
struct BoundServices: HostServices {
    let services: PluginServices
    let plugin: String

    func value(forKey key: String) -> String? { services.value(forKey: key) }
    /// A key a loaded plugin gives as bytes.
    func value(forKey key: ph_bytes) -> String? { services.value(forKey: key) }
    func setValue(_ value: String?, forKey key: String) { services.setValue(value, forKey: key) }
    func emit(_ name: String, fields: [String: String]) {
        services.emit(PluginEvent(plugin: plugin, name: name, fields: fields))
    }
    func log(_ level: LogLevel, _ message: String) { services.log(level, plugin: plugin, message) }
    func now() -> Double { Date().timeIntervalSince1970 }
    func monotonicNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
    func randomBytes(_ count: Int) -> [UInt8] { RandomBytes.make(count) }
    func randomBytes(into buffer: UnsafeMutableRawBufferPointer) { RandomBytes.fill(buffer.bindMemory(to: UInt8.self)) }
    var hasSubscribers: Bool { services.hasSubscribers }
    /// In process, a response always knows its request (``ResponseState/sentRequest``).
    var responsesCarryRequestHeaders: Bool { true }
}
