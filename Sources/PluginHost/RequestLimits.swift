import Dispatch
import Foundation
import PluginSDK

/// What one request may cost: how large its response may be, how many header bytes and fields
/// it may carry, how far a compressed body may inflate, how long the whole exchange may take,
/// and how much of a request's body stream is read. Every transport enforces them
/// (``CurlTransport`` and ``URLSessionTransport``).
///
/// The defaults let ordinary JSON APIs through untouched and stop a runaway or hostile server
/// early: a body held in memory stops at 64 MiB, headers at 256 KiB or 1,000 fields.
///
/// ```swift
/// // Provider-wide:
/// let provider = Provider<API>(limits: RequestLimits(maxResponseBytes: 8 << 20, deadline: 30))
/// // Per target (replaces the provider's):
/// var limits: RequestLimits? { RequestLimits(maxDownloadBytes: 2 << 30) }
/// // Per ad-hoc call:
/// provider.get("https://example.com/big.json", limits: RequestLimits(maxResponseBytes: 256 << 20))
/// ```
public struct RequestLimits: Sendable, Equatable {
    /// The most bytes of a body held in memory (after decoding); default 64 MiB. A declared
    /// `Content-Length` above it fails before the body is read; any other body fails as soon
    /// as it passes it, decoded or as it came (``CurlTransport`` counts both: a coding that gives
    /// out little for what it takes is bounded too). Fails with ``TransportFailureKind/responseTooLarge``.
    public var maxResponseBytes: Int64
    /// The most bytes written by a download to a file (and, with ``CurlTransport``, received for
    /// it before decoding); nil (the default): no limit. Passing it fails with
    /// ``TransportFailureKind/responseTooLarge`` and removes the partial file.
    public var maxDownloadBytes: Int64?
    /// The most bytes of response header fields (names and values, of one response, with its
    /// interim `1xx` responses and its trailer fields); default 256 KiB. Passing it fails with
    /// ``TransportFailureKind/badResponse``.
    public var maxHeaderBytes: Int
    /// The most response header fields; default 1,000. Passing it fails with
    /// ``TransportFailureKind/badResponse``.
    public var maxHeaderFields: Int
    /// The most a compressed body may inflate, decoded bytes per received byte, once more than
    /// 1 MiB is decoded; default 100. Passing it fails with
    /// ``TransportFailureKind/responseTooLarge`` (a decompression bomb). Checked by
    /// ``CurlTransport``; on ``URLSessionTransport`` decoded bytes count against
    /// ``maxResponseBytes`` only.
    public var maxDecompressionRatio: Int64
    /// The most seconds the whole exchange may take (request closure, interceptors, every
    /// attempt and retry, and the retry policy's backoff); nil (the default): none. A request's
    /// `timeoutInterval` stays an idle timeout. Passing it fails with
    /// ``TransportFailureKind/timedOut``.
    public var deadline: TimeInterval?
    /// The most bytes read from a request's body stream (`URLRequest.httpBodyStream`, which a
    /// request closure may set) into the temporary file it is sent from; nil (the default): no
    /// limit. A stream that goes on past it (a runaway producer) fails the request with
    /// ``TransportFailureKind/other`` (``TransportFailure/limit`` and
    /// ``TransportFailure/observedBytes`` set) before anything is sent, and its file is removed.
    /// A multipart body the provider streams from its files (over
    /// ``MultipartFormData/encodingMemoryThreshold``) is an upload of files, not held to it.
    public var maxStreamedBodyBytes: Int64?

    /// The defaults.
    public static let `default` = RequestLimits()

    /// Decoded bytes allowed before ``maxDecompressionRatio`` is checked.
    public static let decompressionAllowance: Int64 = 1 << 20

    /// Creates limits; every argument has its documented default.
    public init(
        maxResponseBytes: Int64 = 64 << 20, maxDownloadBytes: Int64? = nil, maxHeaderBytes: Int = 256 << 10,
        maxHeaderFields: Int = 1000, maxDecompressionRatio: Int64 = 100, deadline: TimeInterval? = nil,
        maxStreamedBodyBytes: Int64? = nil
    ) {
        self.maxResponseBytes = maxResponseBytes
        self.maxDownloadBytes = maxDownloadBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaderFields = maxHeaderFields
        self.maxDecompressionRatio = maxDecompressionRatio
        self.deadline = deadline
        self.maxStreamedBodyBytes = maxStreamedBodyBytes
    }
}

/// The failures every transport reports when a limit is passed, worded alike.
enum LimitFailure {
    static func declared(_ length: Int64, limit: Int64, download: Bool) -> TransportFailure {
        let name = download ? "maxDownloadBytes" : "maxResponseBytes"
        return TransportFailure(
            kind: .responseTooLarge, message: "the response declares Content-Length \(length), more than \(name) (\(limit) bytes)",
            limit: limit, observedBytes: length)
    }

    /// The body passed the limit; `beforeDecoding`: as it came over the connection (a coding
    /// that gives out little or nothing for what it takes: a gzip header's comment).
    static func body(_ received: Int64, limit: Int64, download: Bool, beforeDecoding: Bool = false) -> TransportFailure {
        let name = download ? "maxDownloadBytes" : "maxResponseBytes"
        let how = beforeDecoding ? " as it came, before decoding" : ""
        return TransportFailure(
            kind: .responseTooLarge, message: "the response body passed \(name) (\(limit) bytes)\(how): \(received) bytes received",
            limit: limit, observedBytes: received)
    }

    static func ratio(decoded: Int64, encoded: Int64, limits: RequestLimits) -> TransportFailure {
        TransportFailure(
            kind: .responseTooLarge,
            message: "the compressed body inflates more than maxDecompressionRatio (\(limits.maxDecompressionRatio):1): "
                + "\(decoded) bytes decoded from \(encoded) received at most",
            limit: encoded.multipliedReportingOverflow(by: limits.maxDecompressionRatio).partialValue, observedBytes: decoded)
    }

    static func headerBytes(_ bytes: Int, limit: Int) -> TransportFailure {
        TransportFailure(
            kind: .badResponse, message: "the response's header fields passed maxHeaderBytes (\(limit) bytes): \(bytes) bytes",
            limit: Int64(limit), observedBytes: Int64(bytes))
    }

    static func headerFields(_ count: Int, limit: Int) -> TransportFailure {
        TransportFailure(
            kind: .badResponse, message: "the response has more than maxHeaderFields (\(limit)) header fields: \(count)", limit: Int64(limit))
    }

    /// libcurl refuses a response's header fields over 300 KiB in all (counting its own way), and
    /// later versions more than 5,000 of them, before our count passes a larger `maxHeaderBytes`
    /// or `maxHeaderFields`. The failure's `limit` is libcurl's (5,000 fields, else 300 KiB): a
    /// `RetryPolicy` does not send again what passes it again (without one, the default policy
    /// retried it as a bad response).
    static func headerTotal(_ detail: String, limits: RequestLimits) -> TransportFailure {
        TransportFailure(
            kind: .badResponse,
            message: "the response's header fields are more than libcurl accepts, within maxHeaderBytes (\(limits.maxHeaderBytes) bytes) "
                + "and maxHeaderFields (\(limits.maxHeaderFields)): \(detail)",
            limit: detail.hasPrefix("Too many") ? 5_000 : 300 << 10)
    }

    /// libcurl refuses one header line over 100 KiB (as "out of memory") before our count of
    /// all of them sees it.
    static func headerLine(_ detail: String, limits: RequestLimits) -> TransportFailure {
        TransportFailure(
            kind: .badResponse,
            message:
                "a response header field is longer than libcurl accepts (100 KiB), within maxHeaderBytes (\(limits.maxHeaderBytes) bytes): \(detail)",
            limit: 100 << 10)
    }

    static func streamedBody(_ read: Int64, limit: Int64) -> TransportFailure {
        TransportFailure(
            kind: .other, message: "the request's body stream passed maxStreamedBodyBytes (\(limit) bytes): \(read) bytes read",
            limit: limit, observedBytes: read)
    }

    static func deadline(_ seconds: TimeInterval) -> TransportFailure {
        TransportFailure(kind: .timedOut, message: String(format: "the request's deadline of %.1f s passed (RequestLimits.deadline)", seconds))
    }
}

/// The absolute deadline of the exchange that is running, set by ``ResponsePipeline`` when it
/// is consumed with a ``RequestLimits/deadline``, read when the transport request is made.
enum ExchangeDeadline {
    /// A consumption's deadline, bound to the work it runs, with the binding of the consumption
    /// it runs within (a request closure's request, say). It counts while the consumption's work
    /// runs: a `Task {}` started within it inherits the binding (task-locals pass to unstructured
    /// tasks) and may outlive it, and a request that task makes once the work has ended is not
    /// held to a deadline that is not its own. Work still running after the deadline passed (a
    /// stage deaf to cancellation, a task it awaits) keeps it: what it starts times out at once.
    final class Binding: Sendable {
        let instant: DispatchTime
        let seconds: TimeInterval
        /// The binding of the consumption this one runs within, when there was one.
        let parent: Binding?
        /// Ended when the consumption's work ends.
        let life = ConsumptionLife()

        init(_ deadline: (instant: DispatchTime, seconds: TimeInterval), parent: Binding?) {
            (instant, seconds) = deadline
            self.parent = parent
        }
    }

    @TaskLocal static var binding: Binding?

    /// The earliest deadline of the consumptions this task runs within, of those whose work
    /// still runs; else nil.
    static var current: (instant: DispatchTime, seconds: TimeInterval)? {
        var earliest: Binding?
        var next = binding
        while let node = next {
            if node.life.isLive, earliest.map({ node.instant < $0.instant }) ?? true { earliest = node }
            next = node.parent
        }
        return earliest.map { ($0.instant, $0.seconds) }
    }

    /// Whether waiting `delay` seconds from now reaches the deadline of the consumption that is
    /// running (a retry's wait: its attempt would only time out, and the caller is better served
    /// by the answer it has).
    static func reached(after delay: Double) -> Bool {
        guard let deadline = current else { return false }
        return DispatchTime.now() + max(0, delay) >= deadline.instant
    }

    /// The deadline `seconds` from now (a negative one is now), or nil for none (`seconds` nil or
    /// not finite).
    static func starting(_ seconds: TimeInterval?) -> (instant: DispatchTime, seconds: TimeInterval)? {
        guard let seconds, seconds.isFinite else { return nil }
        let clamped = max(0, seconds)
        return (DispatchTime.now() + clamped, clamped)
    }
}
