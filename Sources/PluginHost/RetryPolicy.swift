import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// When and how a pipeline's ``ResponsePipeline/retry(_:)`` step sends a request again.
///
/// Defaults: at most 2 retries; exponential backoff of `0.5 s × 2^(n-1)` before retry n
/// (0.5 s, then 1 s), at most ``maximumBackoff`` (60 s); only idempotent methods (`DELETE`, `GET`, `HEAD`, `OPTIONS`,
/// `PUT`, `TRACE`); status codes 408, 500, 502, 503 and 504 (refused by a filter step, or a
/// body a mapping step before the retry could not decode); transport failures that
/// are timeouts, refused or lost connections and malformed responses. Cancellation
/// is never retried, nor a failure that passed a ``RequestLimits`` limit
/// (``TransportFailure/limit``: too many or too large header fields, a body too large),
/// which the same request would pass again.
///
/// A retried response's `Retry-After` (RFC 9110 §10.2.3: seconds, or an HTTP date) is honoured
/// by default, up to ``retryAfterLimit`` (60 s): the retry waits that long when it is longer than
/// the backoff, and a response that asks for more is not retried (it is the result). Under a
/// ``RequestLimits/deadline``, a retry whose wait (backoff or `Retry-After`) would end at or past
/// it is not taken: the last answer or failure is the result, at once. A `429 Too Many Requests`
/// is retried only when its code is added to ``retryableStatusCodes``:
///
/// ```swift
/// let policy = RetryPolicy(retryableStatusCodes: RetryPolicy.default.retryableStatusCodes.union([429]), retryAfterLimit: 30)
/// let user = try await provider.request(.user("octocat")).retry(policy).map(User.self).value
/// ```
public struct RetryPolicy: Sendable {
    /// One retry about to happen, for observers.
    public struct Attempt: Sendable, Equatable {
        /// 1 for the first retry.
        public var retry: Int
        /// The seconds waited before it.
        public var delay: Double
        /// Why: the status code or failure kind.
        public var reason: String
    }

    /// The most retries.
    public var retryLimit: Int
    /// The backoff base.
    public var exponentialBackoffBase: Double
    /// The backoff scale in seconds.
    public var exponentialBackoffScale: Double
    /// The longest backoff in seconds, however many retries came before; default 60.
    public var maximumBackoff: Double
    /// Methods that may be retried.
    public var retryableHTTPMethods: Set<HTTPMethod>
    /// Status codes that are retried.
    public var retryableStatusCodes: Set<Int>
    /// Transport failure kinds that are retried.
    public var retryableFailureKinds: Set<TransportFailureKind>
    /// Called before each retry (for logs and tests).
    public var onRetry: (@Sendable (Attempt) -> Void)?
    /// The longest `Retry-After` a retry waits for, in seconds; a response asking for more is not
    /// retried. Nil (or NaN): the field is ignored, and the backoff alone decides. A negative limit
    /// is 0. Default 60: a plain `retry()` honours the field.
    public var retryAfterLimit: Double?

    /// The defaults described above.
    public static let `default` = RetryPolicy()

    /// Creates a policy.
    public init(
        retryLimit: Int = 2,
        exponentialBackoffBase: Double = 2,
        exponentialBackoffScale: Double = 0.5,
        maximumBackoff: Double = 60,
        retryableHTTPMethods: Set<HTTPMethod> = [.delete, .get, .head, .options, .put, .trace],
        retryableStatusCodes: Set<Int> = [408, 500, 502, 503, 504],
        retryableFailureKinds: Set<TransportFailureKind> = [.timedOut, .cannotConnect, .connectionLost, .badResponse],
        retryAfterLimit: Double? = 60,
        onRetry: (@Sendable (Attempt) -> Void)? = nil
    ) {
        self.retryAfterLimit = retryAfterLimit
        self.retryLimit = retryLimit
        self.exponentialBackoffBase = exponentialBackoffBase
        self.exponentialBackoffScale = exponentialBackoffScale
        self.maximumBackoff = maximumBackoff
        self.retryableHTTPMethods = retryableHTTPMethods
        self.retryableStatusCodes = retryableStatusCodes
        self.retryableFailureKinds = retryableFailureKinds
        self.onRetry = onRetry
    }

    /// The wait before retry `n` (1-based): `scale × base^(n-1)`, at most ``maximumBackoff``
    /// (a scale of 0 or less: no wait).
    public func delay(beforeRetry n: Int) -> Double {
        guard exponentialBackoffScale > 0 else { return 0 }
        let backoff = exponentialBackoffScale * pow(exponentialBackoffBase, Double(n - 1))
        let cap = max(0, maximumBackoff)
        return backoff.isNaN ? cap : min(max(0, backoff), cap)
    }

    /// The wait before retry `n` of a request answered with `response`: the backoff, or the
    /// response's `Retry-After` when it is longer; nil when the `Retry-After` is past
    /// ``retryAfterLimit`` (no retry). A field that is neither seconds nor an HTTP date is ignored.
    /// An HTTP date is read against the response's own `Date` when it has one (the server's clock,
    /// which may not be this machine's) plus its `Age` (the seconds it spent in caches on the way,
    /// RFC 9111 §5.1), else against `now`; the time the response took to come is not taken off.
    func delay(beforeRetry n: Int, answeredWith response: Response?, now: Double = Date().timeIntervalSince1970) -> Double? {
        let backoff = delay(beforeRetry: n)
        let fields = response?.response
        guard let limit = retryAfterLimit, !limit.isNaN, let field = fields?.value(forHTTPHeaderField: "Retry-After"),
            let asked = Self.retryAfter(
                field, now: now, serverDate: fields?.value(forHTTPHeaderField: "Date"), age: fields?.value(forHTTPHeaderField: "Age"))
        else { return backoff }
        return asked <= max(0, limit) ? max(backoff, asked) : nil
    }

    /// The seconds a `Retry-After` value asks to wait: `120`, or an HTTP date (a past one is 0),
    /// measured from `serverDate` (the response's `Date`) when that is an HTTP date, plus `age`
    /// (the response's `Age`: delta-seconds, the first of a list, else ignored), else from `now`.
    static func retryAfter(_ value: String, now: Double, serverDate: String? = nil, age: String? = nil) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = DeltaSeconds.parse(text) { return seconds }
        guard let until = HTTPDate.parse(text, now: now) else { return nil }
        guard let sent = serverDate.flatMap({ HTTPDate.parse($0, now: now) }) else { return max(0, until - now) }
        // Two `Age` fields arrive joined (`20, 20`): the first counts (RFC 9111 §5.1).
        return max(0, until - sent - (age.flatMap { DeltaSeconds.age([$0]) } ?? 0))
    }

    /// Why `error` should be retried for `method`, or nil. An unknown method (a failure no chain
    /// reported, in a pipeline made from a closure that names none) is not retried: what was sent,
    /// a `POST` perhaps, is not known to be idempotent.
    func retryReason(for error: NetworkError, method: HTTPMethod?) -> String? {
        guard let method, retryableHTTPMethods.contains(method) else { return nil }
        switch error {
        case .underlying(let failure, _):
            return failure.limit == nil && retryableFailureKinds.contains(failure.kind) ? failure.kind.rawValue : nil
        default:
            // A status a filter step refused, and as much a body a mapping step (`map`, `mapJSON`,
            // `mapString`, `mapServerError`) could not decode (a proxy's HTML page for a `503`):
            // the answer's status decides.
            guard let status = error.response?.statusCode, retryableStatusCodes.contains(status) else { return nil }
            return "status \(status)"
        }
    }
}
