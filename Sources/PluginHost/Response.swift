import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response: status code, body, and the request and `HTTPURLResponse` it belongs to.
public struct Response: Sendable, Equatable, CustomDebugStringConvertible {
    /// The HTTP status code.
    public let statusCode: Int
    /// The body (empty for downloads: see ``fileURL``).
    public let data: Data
    /// The request as it was finally sent.
    ///
    /// When hooks changed it and it went through ``CurlTransport`` or a stub, this is built on
    /// first read (as ``response`` is).
    public var request: URLRequest? { sent.request }
    private let sent: SentRequest
    /// The HTTP response with its header fields.
    ///
    /// On Linux, for a response ``CurlTransport`` or a stub received, and wherever interceptors changed
    /// the transport's status or header fields, this is built on first read (building an
    /// `HTTPURLResponse` is costly on Linux and most apps never ask for it).
    public var response: HTTPURLResponse? { source.response }
    private let source: ResponseSource
    /// Where a download was saved.
    public let fileURL: URL?
    /// The protocol the response came over (`HTTP/1.1`, `HTTP/2`), when the transport reports it
    /// (``CurlTransport`` does; URLSession and stubs do not).
    public let httpVersion: String?
    /// How the exchange that produced this response went (``TransferMetrics``: when each stage
    /// ended, redirects, the connection, bytes), when the transport measured it: ``CurlTransport``
    /// does; URLSession, the stubs and a response an interceptor made or replaced (a cache hit)
    /// have none. Not compared by `==`.
    public let metrics: TransferMetrics?
    /// Why a ``ResponsePipeline/mapServerError(_:when:atKeyPath:using:envelope:)`` step could not
    /// decode this response's body as the server's error type; set on the response of the
    /// ``NetworkError/statusCode(_:)`` error the step then keeps, and said in its description.
    public internal(set) var serverErrorDecodingFailure: String?
    /// The method the chain sent the request with (after its interceptors, before a redirect or
    /// an authentication round changed it): what a retry sends again. Nil for a response no chain
    /// made. Not compared by `==`.
    var attemptMethod: String?

    /// Creates a response.
    public init(
        statusCode: Int, data: Data, request: URLRequest? = nil, response: HTTPURLResponse? = nil, fileURL: URL? = nil,
        httpVersion: String? = nil, metrics: TransferMetrics? = nil
    ) {
        self.statusCode = statusCode
        self.data = data
        self.sent = .given(request)
        self.source = .given(response)
        self.fileURL = fileURL
        self.httpVersion = httpVersion
        self.metrics = metrics
    }

    /// A response whose `HTTPURLResponse` is made from `deferred` when first read, or given.
    init(
        statusCode: Int, data: Data, sent: SentRequest, response: ResponseSource, fileURL: URL?, httpVersion: String?,
        metrics: TransferMetrics? = nil
    ) {
        self.statusCode = statusCode
        self.data = data
        self.sent = sent
        self.source = response
        self.fileURL = fileURL
        self.httpVersion = httpVersion
        self.metrics = metrics
    }

    /// The value of a response header (case-insensitive; repeated fields joined with ", ").
    public func value(forHTTPHeaderField name: String) -> String? {
        switch source {
        case .given(let response): return response?.value(forHTTPHeaderField: name)
        case .deferred(let deferred): return deferred.value(forHTTPHeaderField: name)
        }
    }

    /// `METHOD URL` of the request, for messages (``NetworkError/description``, and so logs and
    /// crash reports): the URL without its user and password, without its fragment, and with the
    /// values of query parameters named as secrets are (``MessageURL``) as `<redacted>`.
    public var requestLine: String {
        "\(request?.httpMethod ?? "GET") \(request?.url.map { MessageURL.text($0.absoluteString) } ?? "<no URL>")"
    }

    /// `Status Code: N, Data Length: N`.
    public var debugDescription: String {
        "Status Code: \(statusCode), Data Length: \(data.count)"
    }

    /// Compares status code, body, request, file, and the responses' URLs, statuses and header
    /// fields (names without case): `HTTPURLResponse`'s own `==` compares no field in
    /// swift-corelibs-foundation (two answers that differed in `ETag` were equal) and identity on Darwin.
    public static func == (lhs: Response, rhs: Response) -> Bool {
        lhs.statusCode == rhs.statusCode && lhs.data == rhs.data && lhs.request == rhs.request
            && sameAnswer(lhs.response, rhs.response) && lhs.fileURL == rhs.fileURL
    }

    /// Whether two `HTTPURLResponse`s say the same: URL, status and header fields.
    private static func sameAnswer(_ lhs: HTTPURLResponse?, _ rhs: HTTPURLResponse?) -> Bool {
        guard let lhs, let rhs else { return lhs == nil && rhs == nil }
        func fields(_ response: HTTPURLResponse) -> [String: String] {
            Dictionary(response.allHeaderFields.map { ("\($0.key)".lowercased(), "\($0.value)") }, uniquingKeysWith: { $0 + ", " + $1 })
        }
        return lhs === rhs || (lhs.url == rhs.url && lhs.statusCode == rhs.statusCode && fields(lhs) == fields(rhs))
    }
}

/// Where a ``Response``'s `HTTPURLResponse` comes from.
enum ResponseSource: Sendable {
    case given(HTTPURLResponse?)
    case deferred(DeferredHTTPResponse)

    /// The `HTTPURLResponse`: the one given, or made now from the parts (the same one after that).
    var response: HTTPURLResponse? {
        switch self {
        case .given(let response): return response
        case .deferred(let deferred): return deferred.response
        }
    }

    /// The fields a transport of this package received, when the response is made from them:
    /// the chain's plugins read them (``FoundationFieldNames/listed(_:)``) without making it.
    var receivedFields: [String: String]? {
        guard case .deferred(let deferred) = self, case .received(let fields) = deferred.fields else { return nil }
        return fields
    }
}

/// An `HTTPURLResponse` made on first read from a status, a URL and header fields: the fields a
/// transport of this package received, or the fields hooks edited.
final class DeferredHTTPResponse: Sendable {
    /// Where the fields come from.
    enum Fields: Sendable {
        /// As a transport received them (repeated names already joined), given to Foundation as they are.
        case received([String: String])
        /// As hooks left them: folded when the response is made.
        case edited([HTTPHeader])
    }

    let url: URL
    let statusCode: Int
    private let httpVersion: String?
    let fields: Fields
    /// Made on first read (the same object for every read after it).
    private let built = OnceSlot<HTTPURLResponse?>()

    init(url: URL, statusCode: Int, httpVersion: String?, fields: Fields) {
        self.url = url
        self.statusCode = statusCode
        self.httpVersion = httpVersion
        self.fields = fields
    }

    deinit { built.free() }

    var response: HTTPURLResponse? {
        built.value {
            let headerFields: [String: String]
            switch fields {
            case .received(let fields): headerFields = fields
            case .edited(let headers): headerFields = headers.folded()
            }
            return HTTPURLResponse(url: url, statusCode: statusCode, httpVersion: httpVersion, headerFields: headerFields)
        }
    }

    func value(forHTTPHeaderField name: String) -> String? {
        switch fields {
        case .received:
            // Foundation's answer for the fields as received (its own merging of names that
            // differ in case), as for a response the transport made at once.
            return response?.value(forHTTPHeaderField: name)
        case .edited(let headers):
            let values = headers.values(named: name)
            return values.isEmpty ? nil : values.joined(separator: ", ")
        }
    }
}
