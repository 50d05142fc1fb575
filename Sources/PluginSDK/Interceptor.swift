/// An interceptor sees every request a provider sends and every result it receives.
///
/// Interceptors form an onion. A provider's list is outermost first: request-side hooks
/// (`prepare`, then `willSend`) run first to last, response-side hooks (`didReceive`, then
/// `process`) run last to first, as in an HTTP filter chain.
///
/// Every hook has a no-op default, so an interceptor implements only what it needs.
/// Hooks are synchronous and may run concurrently for different requests: an interceptor
/// must be thread-safe. Work that must wait (refreshing a token, backing off) is asked of
/// the host through the returned action, never done by blocking inside a hook.
///
/// A hook that throws fails only the request it was called for; the provider reports the
/// interceptor's ``name`` and the ``InterceptorHook`` that threw.
public protocol Interceptor: Sendable {
    /// The name shown in errors, events and logs (for example `access-token`).
    var name: String { get }

    /// Edits the request before it is sent, or answers it without the network.
    ///
    /// Return ``PrepareAction/respond(_:)`` to short-circuit: the network and every
    /// interceptor inside this one are skipped, and the response side runs from this
    /// interceptor outwards.
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction

    /// Observes the final request just before it goes to the transport.
    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws

    /// Observes the raw result of one attempt (a response or a transport failure).
    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws

    /// Edits the result, replaces it, or asks for the request to be retried.
    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction

    /// Answers an HTTP authentication challenge (for example `401` with `WWW-Authenticate: Basic`).
    ///
    /// Interceptors are asked in chain order; the first answer other than
    /// ``CredentialAnswer/performDefault`` wins.
    func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer
}

extension Interceptor {
    /// The type's name, unless the interceptor states its own.
    public var name: String { String(describing: Self.self) }

    /// Default: leaves the request as it is.
    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        HookProbe.noteDefault(.prepare)
        return .proceed
    }

    /// Default: does nothing.
    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        HookProbe.noteDefault(.willSend)
    }

    /// Default: does nothing.
    public func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        HookProbe.noteDefault(.didReceive)
    }

    /// Default: leaves the result as it is.
    public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        HookProbe.noteDefault(.process)
        return .proceed
    }

    /// Default: lets the next interceptor, or the transport, decide.
    public func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
        HookProbe.noteDefault(.credential)
        return .performDefault
    }
}

/// The hooks of an ``Interceptor``, as named in errors and events.
public enum InterceptorHook: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// ``Interceptor/prepare(_:context:)``.
    case prepare
    /// ``Interceptor/willSend(_:context:)``.
    case willSend
    /// ``Interceptor/didReceive(_:context:)``.
    case didReceive
    /// ``Interceptor/process(_:context:)``.
    case process
    /// ``Interceptor/credential(for:context:)``.
    case credential

    /// The hook's name, e.g. `willSend`.
    public var description: String { rawValue }
}

/// What ``Interceptor/prepare(_:context:)`` decides.
public enum PrepareAction: Sendable, Equatable {
    /// Go on to the next interceptor and the network.
    case proceed
    /// Answer the request with this response (a short-circuit, e.g. a cache hit).
    case respond(SyntheticResponse)
}

/// What ``Interceptor/process(_:context:)`` decides.
public enum ProcessAction: Sendable, Equatable {
    /// Pass the (possibly edited) result outwards.
    case proceed
    /// Replace the result, failure or not, with this response (e.g. a stale cache entry).
    case replace(SyntheticResponse)
    /// Send the request again after `delay` seconds, from a fresh copy of the original request.
    ///
    /// When `refresh` is given, the host first refreshes that credential (see ``CredentialRefresh``).
    case retry(delay: Double = 0, refresh: CredentialRefresh? = nil)
}

extension ProcessAction {
    /// Throws for a retry whose delay is no finite number of seconds, 0 or more (the host
    /// refuses it: `result_retry` says `PH_INVALID`), with a message naming the delay, so that
    /// the request fails alike whether the plugin is compiled in or loaded.
    package static func checkRetryDelay(_ delay: Double) throws {
        guard delay.isFinite, delay >= 0 else {
            throw InterceptorError.failed("process asked for a retry after \(delay) s; a delay is a finite number of seconds, 0 or more")
        }
    }
}

/// Asks the host to refresh a credential kept in its key/value store before a retry.
///
/// Concurrent requests that ask for the same key share one refresh. When the store no
/// longer holds `staleValue` (another request already refreshed it), the host retries
/// at once without refreshing again.
public struct CredentialRefresh: Sendable, Equatable {
    /// The key in the host store, e.g. `access_token`.
    public var key: String
    /// The value the failed request carried, if known.
    public var staleValue: String?

    /// Creates a refresh request for `key`, naming the value that was rejected.
    public init(key: String, staleValue: String? = nil) {
        self.key = key
        self.staleValue = staleValue
    }
}

/// A response made by an interceptor instead of the network.
public struct SyntheticResponse: Sendable, Equatable {
    /// The HTTP status code.
    public var statusCode: Int
    /// Header fields, in order; a name may repeat.
    public var headers: [HTTPHeader]
    /// The body.
    public var body: [UInt8]

    /// Creates a response.
    public init(statusCode: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.statusCode = statusCode
        self.headers = headers
        self.body = body
    }
}

/// One header field.
public struct HTTPHeader: Sendable, Hashable, CustomStringConvertible {
    /// The field name as written (compared case-insensitively).
    public var name: String
    /// The field value.
    public var value: String

    /// Creates a header field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// `Name: value`.
    public var description: String { "\(name): \(value)" }
}
