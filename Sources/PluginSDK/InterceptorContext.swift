/// What an interceptor knows about the target a request was made for.
///
/// A plugin loaded at run time cannot know the app's target enum, so targets pass
/// string-keyed ``pluginOptions`` (e.g. `auth: bearer`, `cache: 60`, `activity: show`).
public struct TargetInfo: Sendable, Equatable {
    /// The HTTP method, e.g. `GET`.
    public var method: String
    /// The base URL as a string.
    public var baseURL: String
    /// The path appended to the base URL.
    public var path: String
    /// Options for interceptors, set per target.
    public var pluginOptions: [String: String]

    /// Creates target information.
    public init(method: String, baseURL: String, path: String, pluginOptions: [String: String] = [:]) {
        self.method = method
        self.baseURL = baseURL
        self.path = path
        self.pluginOptions = pluginOptions
    }

    /// Whether `a` and `b` are the same bytes, field by field and option by option (`==` holds
    /// canonically equivalent strings equal, `é` and `e` + U+0301: not the same target to send).
    package static func sameBytes(_ a: TargetInfo, _ b: TargetInfo) -> Bool {
        UTF8Bytes.equal(a.method, b.method) && UTF8Bytes.equal(a.path, b.path) && UTF8Bytes.equal(a.baseURL, b.baseURL)
            && UTF8Bytes.equal(a.pluginOptions, b.pluginOptions)
    }
}

/// Per-call information given to every hook.
///
/// A context is the request's number and attempt, and one reference to the target and services
/// (which the requests of one target share): hooks receive, copy and keep it for the cost of
/// one retain (two when the host attached its per-attempt data). Setting ``target`` or
/// ``services`` gives this value new shared storage; other copies keep theirs.
public struct InterceptorContext: Sendable {
    /// The target and services, shared by every copy until one of them is changed.
    @usableFromInline
    final class Shared: Sendable {
        @usableFromInline let target: TargetInfo
        @usableFromInline let services: any HostServices

        init(target: TargetInfo, services: any HostServices) {
            self.target = target
            self.services = services
        }
    }

    @usableFromInline var shared: Shared

    /// The target the request was made for.
    public var target: TargetInfo {
        // Inlined where it is read: `context.target.pluginOptions["cache"]` then reads the shared
        // target in place, where a call returned a copy of it all (a retain per string).
        @inlinable get { shared.target }
        set {
            shared = Shared(target: newValue, services: shared.services)
            // The host's C view was of the target before: a plugin handed this context reads one
            // made for it.
            hostAttachment = nil
        }
    }
    /// A number unique to this request within the process (the same for all its attempts).
    public var requestID: UInt64 {
        // The host's C view was of the number before (as for `target`).
        didSet { hostAttachment = nil }
    }
    /// 1 for the first attempt, 2 for the first retry, and so on.
    public var attempt: Int {
        didSet { hostAttachment = nil }
    }
    /// Services of the host: key/value store, events, log, clock, random bytes.
    public var services: any HostServices {
        // Inlined, as `target` is: `context.services.now()` copies no existential.
        @inlinable get { shared.services }
        set { shared = Shared(target: shared.target, services: newValue) }
    }
    /// Per-attempt data the host keeps for plugins loaded from libraries; interceptors ignore it.
    package var hostAttachment: (any AnyObject & Sendable)?

    /// Creates a context.
    public init(target: TargetInfo, requestID: UInt64, attempt: Int, services: any HostServices) {
        self.init(target: target, requestID: requestID, attempt: attempt, services: services, hostAttachment: nil)
    }

    /// Creates a context carrying the host's per-attempt data.
    package init(
        target: TargetInfo, requestID: UInt64, attempt: Int, services: any HostServices, hostAttachment: (any AnyObject & Sendable)?
    ) {
        shared = Shared(target: target, services: services)
        self.requestID = requestID
        self.attempt = attempt
        self.hostAttachment = hostAttachment
    }

    /// Whether `other` shares this context's target and services (the same storage, not merely
    /// equal values): true for copies of one another with only ``requestID``, ``attempt`` or the
    /// host's attachment changed.
    package func sharesTarget(with other: InterceptorContext) -> Bool { shared === other.shared }
}

/// Severity of a log line sent through ``HostServices/log(_:_:)``.
public enum LogLevel: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    /// Fine detail.
    case debug = 0
    /// Normal operation.
    case info = 1
    /// Something unexpected that did not fail the request.
    case warning = 2
    /// A failure.
    case error = 3

    /// Orders by severity.
    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `debug`, `info`, `warning` or `error`.
    public var description: String {
        switch self {
        case .debug: return "debug"
        case .info: return "info"
        case .warning: return "warning"
        case .error: return "error"
        }
    }
}

/// Services the host offers every interceptor. All methods are thread-safe.
///
/// A plugin may keep them past its instance (a task it started): once the instance is destroyed
/// they reach no host, and say so by what they give (no values, events and log lines dropped,
/// clocks and random bytes from the system).
public protocol HostServices: Sendable {
    /// A value from the host's key/value store (tokens, secrets), if set.
    func value(forKey key: String) -> String?
    /// Stores (or with `nil` removes) a value in the host's key/value store.
    func setValue(_ value: String?, forKey key: String)
    /// Sends an event to the app's subscribers; the host adds the emitting interceptor's name.
    func emit(_ name: String, fields: [String: String])
    /// Writes a line to the host's log sink.
    func log(_ level: LogLevel, _ message: String)
    /// Wall-clock time, in seconds since 1970.
    func now() -> Double
    /// A monotonic clock in nanoseconds, for durations.
    func monotonicNanoseconds() -> UInt64
    /// `count` cryptographically random bytes.
    func randomBytes(_ count: Int) -> [UInt8]
    /// Fills `buffer` with cryptographically random bytes (no array made: a nonce on the stack).
    func randomBytes(into buffer: UnsafeMutableRawBufferPointer)
    /// Whether anyone listens for events: build an event only when true (it is cheap to ask).
    var hasSubscribers: Bool { get }
    /// Whether responses tell the request they answer (``InterceptorResponse/requestHeaders``
    /// is not nil): true in process and on a host of ABI 1.3 or later.
    var responsesCarryRequestHeaders: Bool { get }
}

extension HostServices {
    /// Default: true (services that cannot tell get every event).
    public var hasSubscribers: Bool { true }
    /// Default: false (services that cannot tell promise nothing).
    public var responsesCarryRequestHeaders: Bool { false }
    /// Default: the bytes of ``randomBytes(_:)``, copied.
    public func randomBytes(into buffer: UnsafeMutableRawBufferPointer) {
        guard !buffer.isEmpty else { return }
        randomBytes(buffer.count).withUnsafeBytes { buffer.copyMemory(from: $0) }
    }
}
