/// Storage behind an ``InterceptorResponse``; implemented by the host and by the C ABI bridge.
public protocol ResponseBackend: AnyObject {
    /// The HTTP status code.
    var statusCode: Int { get }
    /// Replaces the status code; throws ``InterceptorError/invalidStatus(_:)`` unless
    /// ``HeaderValidation/isValidStatus(_:)`` holds, changing nothing.
    func setStatusCode(_ code: Int) throws
    /// Every header field in order.
    var headers: [HTTPHeader] { get }
    /// The `index`-th value of header `name` (case-insensitive).
    func header(named name: String, index: Int) -> String?
    /// Every value of the field `name`, in order (default: ``header(named:index:)`` until nil).
    func headerValues(named name: String) -> [String]
    /// Replaces or removes (`nil`) every field named `name`.
    func setHeader(named name: String, value: String?) throws
    /// Adds a field.
    func addHeader(named name: String, value: String) throws
    /// The body bytes (empty for a download, whose body is in a file).
    var body: [UInt8] { get }
    /// Replaces the body.
    func setBody(_ body: [UInt8])
    /// At most `maxBytes` bytes from the start of the body, and the body's whole length,
    /// without copying the rest.
    func bodyPrefix(_ maxBytes: Int) -> (bytes: [UInt8], count: Int)
    /// The header fields of the request this response answers, as sent; nil when unknown
    /// (default: nil).
    var requestHeaders: [HTTPHeader]? { get }
    /// Whether a redirect led to this response (``InterceptorResponse/isRedirected``; default: false).
    var isRedirected: Bool { get }
}

extension ResponseBackend {
    /// Asks ``header(named:index:)`` for index 0, 1, … until it answers nil.
    public func headerValues(named name: String) -> [String] { HeaderReading.values(named: name, header(named:index:)) }

    /// Default: unknown.
    public var requestHeaders: [HTTPHeader]? { nil }

    /// Default: false (not known to be redirected).
    public var isRedirected: Bool { false }

    /// Reads the whole body; backends that can do better implement their own.
    public func bodyPrefix(_ maxBytes: Int) -> (bytes: [UInt8], count: Int) {
        let body = self.body
        return (Array(body.prefix(max(0, maxBytes))), body.count)
    }
}

/// The response an interceptor sees in its response-side hooks.
public struct InterceptorResponse {
    /// The storage this view reads and writes.
    package private(set) var backend: any ResponseBackend

    /// Wraps a backend.
    public init(backend: any ResponseBackend) {
        self.backend = backend
    }

    /// Whether nothing but this value holds its backend (checked in place: no reference counted).
    package mutating func holdsBackendAlone() -> Bool { isKnownUniquelyReferenced(&backend) }

    /// The HTTP status code.
    public var statusCode: Int { backend.statusCode }

    /// Replaces the status code; throws ``InterceptorError/invalidStatus(_:)`` for a code
    /// outside 100...999, and changes nothing then.
    public func setStatusCode(_ code: Int) throws {
        // Checked here, whatever the backend (a test double's too).
        try HeaderValidation.checkStatus(code)
        try backend.setStatusCode(code)
    }

    /// Every header field in order.
    public var headers: [HTTPHeader] { backend.headers }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? { backend.header(named: name, index: 0) }

    /// The header fields of the request this response answers, as the request phase left them
    /// (after every `willSend`), in one read; nil when the host cannot tell (a loaded plugin on
    /// a host before ABI 1.3: ``HostServices/responsesCarryRequestHeaders`` says so up front).
    /// A plugin that needs the request as sent only once the response comes (a cache's `Vary`)
    /// reads it here and can leave `willSend` out of its active hooks. After a redirect to
    /// another origin (on the way, even if later ones came back) they are the last hop's: without `Authorization` and `Cookie`, which the
    /// transports left behind.
    public var requestHeaders: [HTTPHeader]? { backend.requestHeaders }

    /// Whether the transport followed at least one redirect to get this response, or the host
    /// sent the request where redirects had led (to answer a challenge that came after them): it
    /// then answers another URL than the request's (what a cache must not store under the
    /// request's URL). False for a response a hook made, and on a host before ABI 1.6, which does not say.
    public var isRedirected: Bool { backend.isRedirected }

    /// Every value of header `name`, in order.
    public func headerValues(_ name: String) -> [String] { backend.headerValues(named: name) }

    /// Sets `name` to `value`, replacing earlier values; `nil` removes it.
    public func setHeader(_ name: String, _ value: String?) throws {
        try backend.setHeader(named: name, value: value)
    }

    /// Adds a value for `name`.
    public func addHeader(_ name: String, _ value: String) throws {
        try backend.addHeader(named: name, value: value)
    }

    /// The body bytes.
    public var body: [UInt8] { backend.body }

    /// Replaces the body.
    public func setBody(_ body: [UInt8]) { backend.setBody(body) }

    /// At most `maxBytes` bytes from the start of the body, and the body's whole length; the
    /// rest is not copied (for logging a large body).
    public func bodyPrefix(maxBytes: Int) -> (bytes: [UInt8], count: Int) { backend.bodyPrefix(maxBytes) }
}

/// Why a transport attempt produced no response.
public enum TransportFailureKind: String, Sendable, Hashable, CaseIterable {
    /// The request ran past its timeout.
    case timedOut
    /// The request was cancelled.
    case cancelled
    /// Nothing accepted the connection (refused, unreachable, DNS failure).
    case cannotConnect
    /// The connection broke while the request or response was in flight.
    case connectionLost
    /// The response was malformed (e.g. shorter than its `Content-Length`).
    case badResponse
    /// An interceptor failed before the network was reached.
    case interceptorFailed
    /// The TLS handshake failed: no common protocol or cipher, the server refused the client
    /// certificate, or the client certificate could not be used (ABI 1.1; a plugin built against
    /// 1.0 sees `other`).
    case tlsHandshakeFailed
    /// The server's certificate is not trusted: unknown issuer, expired, or for another host (ABI 1.1).
    case serverCertificateUntrusted
    /// The server's public key matches none of the pinned keys (ABI 1.1).
    case publicKeyPinMismatch
    /// The response body, the download, or the decoded body passed its limit
    /// (``TransportFailure/limit``; ABI 1.1). The connection was closed, not drained.
    case responseTooLarge
    /// Anything else.
    case other
}

/// A failed attempt as interceptors see it.
public struct TransportFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The category.
    public var kind: TransportFailureKind
    /// The transport's own message.
    public var message: String
    /// The limit that was passed, when a limit stopped the transfer: in bytes for
    /// ``TransportFailureKind/responseTooLarge`` and the header bytes, in fields for the header
    /// count (both ``TransportFailureKind/badResponse``), in bytes for a body stream (`other`).
    /// Nil for any other failure. A failure with a limit is not retried by a `RetryPolicy`:
    /// sent again, it passes the limit again. Nil across the plugin ABI (which carries a
    /// failure's kind and message): a loaded plugin tells a limit by the kind
    /// (``TransportFailureKind/responseTooLarge``) and the message.
    public var limit: Int64?
    /// With ``limit``, in bytes: the bytes received (or declared by `Content-Length`, or read
    /// from a body stream) when the transfer was stopped. Nil across the plugin ABI.
    public var observedBytes: Int64?
    /// How far the attempt got before it failed (``TransferMetrics``: a stage it never reached is
    /// 0), when the transport measured it: the host's `CurlTransport` does for an attempt it had
    /// started (not for a request it refused to send). Nil across the plugin ABI, and left out
    /// of `==`: two failures are the same failure however long they took.
    public var metrics: TransferMetrics? {
        get { measured?.metrics }
        set { measured = newValue.map(Measured.init) }
    }
    /// The method the host's chain sent the failed request with (after its interceptors): what a
    /// retry would send again. Set by the chain that reports the failure; not compared by `==`.
    package var attemptMethod: String?
    /// The metrics, boxed: a failure is part of every attempt's outcome, which the chain copies
    /// from hook to hook, and metrics held inline made each copy a hundred bytes longer.
    private var measured: Measured?

    /// Metrics in a box of their own (immutable: copies share it).
    private final class Measured: Sendable {
        let metrics: TransferMetrics
        init(_ metrics: TransferMetrics) { self.metrics = metrics }
    }

    /// Creates a failure.
    public init(
        kind: TransportFailureKind, message: String, limit: Int64? = nil, observedBytes: Int64? = nil, metrics: TransferMetrics? = nil
    ) {
        self.kind = kind
        self.message = message
        self.limit = limit
        self.observedBytes = observedBytes
        self.measured = metrics.map(Measured.init)
    }

    /// Whether two failures are the same: kind, message, limit and bytes (not ``metrics``, nor the
    /// method the request was sent with).
    public static func == (lhs: TransportFailure, rhs: TransportFailure) -> Bool {
        lhs.kind == rhs.kind && lhs.message == rhs.message && lhs.limit == rhs.limit && lhs.observedBytes == rhs.observedBytes
    }

    /// `kind: message`.
    public var description: String { "\(kind.rawValue): \(message)" }
}

/// The outcome of one attempt, as response-side hooks see it.
public enum InterceptorResult {
    /// A response arrived (any status code).
    case response(InterceptorResponse)
    /// No response arrived.
    case failure(TransportFailure)

    /// The response, when there is one.
    public var response: InterceptorResponse? {
        if case .response(let response) = self { return response }
        return nil
    }

    /// The failure, when there is one.
    public var failure: TransportFailure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
