/// An HTTP authentication challenge from a server, as interceptors see it.
public struct AuthenticationChallenge: Sendable, Equatable {
    /// The server's host name.
    public var host: String
    /// The server's port.
    public var port: Int
    /// `http` or `https`.
    public var scheme: String
    /// The realm the server named, if any.
    public var realm: String?
    /// The authentication method, e.g. `Basic` or `Digest`.
    public var method: String
    /// How many answers to this challenge have already failed.
    public var previousFailureCount: Int
    /// Whether a proxy asks (`407`, `Proxy-Authenticate`): `host`, `port` and `scheme` are then
    /// still the request's, not the proxy's. An interceptor holding a server's password answers
    /// no proxy with it. False on a host before ABI 1.6, which asks only for a server's.
    public var isProxy: Bool

    /// Creates a challenge description.
    public init(
        host: String, port: Int, scheme: String, realm: String?, method: String, previousFailureCount: Int, isProxy: Bool = false
    ) {
        self.host = host
        self.port = port
        self.scheme = scheme
        self.realm = realm
        self.method = method
        self.previousFailureCount = previousFailureCount
        self.isProxy = isProxy
    }
}

/// An interceptor's answer to an ``AuthenticationChallenge``.
public enum CredentialAnswer: Sendable, Equatable {
    /// No opinion: ask the next interceptor, then let the transport decide.
    case performDefault
    /// Answer with this user and password.
    case useCredential(user: String, password: String)
    /// Do not answer; the `401` is delivered as the response.
    case rejectProtectionSpace
    /// Cancel the request.
    case cancel
}
