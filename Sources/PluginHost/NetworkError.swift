import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Every way a request or a pipeline step can fail.
public enum NetworkError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// The endpoint's URL is not an absolute http(s) URL.
    case requestMapping(String)
    /// Parameters could not be encoded (see ``ParameterEncodingError``).
    case parameterEncoding(any Error)
    /// An `Encodable` body could not be encoded.
    case encodableMapping(any Error)
    /// A file to upload (or a multipart part's) could not be read, found before the request was
    /// sent. A download that cannot be saved where its destination says is found by the
    /// transport once the body is in: ``underlying(_:_:)`` with a failure of kind `other`,
    /// "cannot save the download: …".
    case fileAccess(path: String, reason: String)
    /// The status code was not accepted by validation or a filter step.
    case statusCode(Response)
    /// The body is not JSON.
    case jsonMapping(Response)
    /// The body (or the value at a key path) is not a string.
    case stringMapping(Response)
    /// The body could not be decoded into the requested type.
    case objectMapping(any Error, Response)
    /// The key path is not in the JSON body.
    case keyPathNotFound(keyPath: String, Response)
    /// The transport failed: timeout, refused connection, broken connection, …
    case underlying(TransportFailure, Response?)
    /// The request was cancelled (by the caller, its task, or ``Provider/cancelAll()``).
    case cancelled
    /// An interceptor's hook threw.
    case interceptor(name: String, hook: InterceptorHook, message: String)
    /// A credential refresh asked for by an interceptor failed.
    case credentialRefresh(key: String, message: String)
    /// A pipeline ``ResponsePipeline/filter(_:)`` step rejected the value: a number or a
    /// Boolean as it is (`7`), anything else by its type (`a value of type Session`).
    case filtered(String)
    /// A ``ResponsePipeline/tryMap(_:)`` step threw an error of its own.
    case custom(any Error)
    /// The server's own error, decoded from the body by a
    /// ``ResponsePipeline/mapServerError(_:when:atKeyPath:using:envelope:)`` step, with the response.
    ///
    /// ```swift
    /// catch NetworkError.server(let error as APIError, let response) { … }
    /// ```
    case server(any Error, Response)
    /// A header field of the endpoint (a target's `headers`, a server configuration's defaults,
    /// ``Endpoint/adding(newHTTPHeaderFields:)``) cannot be sent: its name is not an RFC 9110
    /// token, or its value holds CR, LF or NUL (which would add fields of its own to the request).
    case invalidHeader(name: String, reason: String)

    /// The response the error carries, if any.
    public var response: Response? {
        switch self {
        case .statusCode(let response), .jsonMapping(let response), .stringMapping(let response),
            .objectMapping(_, let response), .keyPathNotFound(_, let response), .server(_, let response):
            return response
        case .underlying(_, let response):
            return response
        default:
            return nil
        }
    }

    /// The transport's failure of ``underlying(_:_:)``, else nil.
    var underlyingFailure: TransportFailure? {
        if case .underlying(let failure, _) = self { return failure }
        return nil
    }

    /// How the exchange went as far as it went (``TransferMetrics``), when the transport measured
    /// it: a transport failure's (``TransportFailure/metrics``: which stage a timeout reached),
    /// else the response's the error carries (a status code validation refused). Nil for an
    /// error no exchange took part in, from transports that measure nothing, for
    /// ``cancelled``, and for a ``RequestLimits/deadline`` the pipeline's own timer reported
    /// before the transport did.
    ///
    /// ```swift
    /// } catch let error as NetworkError where error.isTimeout {
    ///     // "total 5000.12 ms (name lookup 0.80, connect 1.02, tls 9.31, first byte 0.00), reused no,
    ///     // 10.0.0.7:443": connected and sent, no answer came
    ///     print(error.metrics.map(String.init(describing:)) ?? "not measured")
    /// }
    /// ```
    public var metrics: TransferMetrics? {
        if case .underlying(let failure, let response) = self { return failure.metrics ?? response?.metrics }
        return response?.metrics
    }

    /// Whether this is a timeout.
    public var isTimeout: Bool {
        if case .underlying(let failure, _) = self { return failure.kind == .timedOut }
        return false
    }

    /// Whether this is a cancellation.
    public var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }

    /// A sentence saying what failed.
    public var description: String {
        switch self {
        case .requestMapping(let url):
            return "cannot make a request: \(MessageURL.text(url).debugDescription) is not an absolute http or https URL"
        case .parameterEncoding(let error):
            return "cannot encode parameters: \(error)"
        case .encodableMapping(let error):
            return "cannot encode the Encodable body: \(error)"
        case .fileAccess(let path, let reason):
            return "cannot use file \(path): \(reason)"
        case .statusCode(let response):
            let reason = response.serverErrorDecodingFailure.map { "; \($0)" } ?? ""
            return "status code \(response.statusCode) is not accepted (\(response.requestLine))\(reason)"
        case .jsonMapping(let response):
            return "the body of \(response.requestLine) is not JSON (\(response.data.count) bytes)"
        case .stringMapping(let response):
            return "the body of \(response.requestLine) is not a string"
        case .objectMapping(let error, let response):
            return "cannot decode the body of \(response.requestLine): \(error)"
        case .keyPathNotFound(let keyPath, let response):
            return "key path \(keyPath.debugDescription) is not in the body of \(response.requestLine)"
        case .underlying(let failure, _):
            return "transport failed (\(failure.kind.rawValue)): \(failure.message)"
        case .cancelled:
            return "the request was cancelled"
        case .interceptor(let name, let hook, let message):
            return "interceptor \(name.debugDescription) failed in \(hook): \(message)"
        case .credentialRefresh(let key, let message):
            return "refreshing credential \(key.debugDescription) failed: \(message)"
        case .filtered(let value):
            return "a filter step rejected \(value)"
        case .custom(let error):
            return "a pipeline step failed: \(error)"
        case .server(let error, let response):
            return "the server answered \(response.requestLine) with an error (status \(response.statusCode)): \(error)"
        case .invalidHeader(let name, let reason):
            return "cannot make a request: header \(name.debugDescription) \(reason)"
        }
    }

    /// Same as ``description``.
    public var errorDescription: String? { description }
}

extension NetworkError: CustomNSError {
    /// `PluginHost.NetworkError`.
    public static var errorDomain: String { "PluginHost.NetworkError" }

    /// A stable code per case (1…17, in declaration order), for logging and Objective-C callers.
    public var errorCode: Int {
        switch self {
        case .requestMapping: return 1
        case .parameterEncoding: return 2
        case .encodableMapping: return 3
        case .fileAccess: return 4
        case .statusCode: return 5
        case .jsonMapping: return 6
        case .stringMapping: return 7
        case .objectMapping: return 8
        case .keyPathNotFound: return 9
        case .underlying: return 10
        case .cancelled: return 11
        case .interceptor: return 12
        case .credentialRefresh: return 13
        case .filtered: return 14
        case .custom: return 15
        case .server: return 16
        case .invalidHeader: return 17
        }
    }

    /// The description, the underlying error (`NSUnderlyingErrorKey`) and the response's status
    /// code (`statusCode`) when there are any.
    public var errorUserInfo: [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: description]
        let cause: (any Error)?
        switch self {
        case .parameterEncoding(let error), .encodableMapping(let error), .objectMapping(let error, _), .custom(let error),
            .server(let error, _):
            cause = error
        case .underlying(let failure, _):
            cause = failure
        default:
            cause = nil
        }
        if let cause { info[NSUnderlyingErrorKey] = cause as NSError }
        if let response { info["statusCode"] = response.statusCode }
        return info
    }
}

/// A URL as messages show it: errors are printed, logged and sent to crash reporters, so a
/// password in the URL and a secret in its query stay out of them.
enum MessageURL {
    /// Query parameter names whose values are secrets, compared without case, `_` or `-`.
    static let secretNames: Set<String> = [
        "token", "accesstoken", "refreshtoken", "idtoken", "clientsecret", "apikey", "key", "secret", "password", "passwd", "pwd",
        "sign", "sig", "signature", "xsignature", "auth", "authorization", "session", "sessionid", "sid", "code",
    ]

    /// Whether a parameter of this name holds a secret: one of ``secretNames`` as the logger
    /// matches its redacted names (``SecretNames/matches(_:_:)``: the whole name, its last words
    /// as in `X-Amz-Signature` or `secret_key`, the last bracketed part of `user[password]`,
    /// `password2`), or a name ending in `token`, `secret`, `password`, `signature` or `apikey`
    /// (`usertoken`). A name that merely ends in a word of the list (`country_code`) is hidden
    /// too: a message loses a value rather than show a secret.
    static func isSecret(_ name: String) -> Bool {
        if SecretNames.matches(name, secretNames) { return true }
        let folded = SecretNames.normalized(name)
        return ["token", "secret", "password", "signature", "apikey"].contains { folded.hasSuffix($0) }
    }

    /// `url` without user, password and fragment, its secret parameters' values `<redacted>`;
    /// a string that is no URL as it is (the message is about it).
    static func text(_ url: String) -> String {
        guard url.contains("@") || url.contains("?") || url.contains("#"), var parts = URLComponents(string: url) else { return url }
        parts.user = nil
        parts.password = nil
        parts.fragment = nil
        // The query is joined after the rest: `<redacted>` is no valid percent-encoded query
        // (URLComponents would refuse it, on Darwin with an exception).
        let query = parts.percentEncodedQuery
        parts.percentEncodedQuery = nil
        guard let rest = parts.string else { return url }
        guard let query else { return rest }
        return rest + "?"
            + query.split(separator: "&", omittingEmptySubsequences: false).map { item -> String in
                guard let equals = item.firstIndex(of: "=") else { return String(item) }
                let name = String(item[..<equals])
                return isSecret(name.removingPercentEncoding ?? name) ? name + "=<redacted>" : String(item)
            }.joined(separator: "&")
    }
}
