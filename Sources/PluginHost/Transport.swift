import Dispatch
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Progress of one transfer.
public struct TransferProgress: Sendable, Equatable {
    /// Which direction the bytes go.
    public enum Direction: String, Sendable, Equatable {
        /// Request body bytes sent.
        case upload
        /// Response body bytes received.
        case download
    }

    /// Which direction.
    public var direction: Direction
    /// Bytes done so far. For a response body in a content coding, `CurlTransport` counts the
    /// bytes as they came (coded), which its `Content-Length` counts too.
    public var completedBytes: Int64
    /// Bytes expected in all, or -1 when unknown (with `URLSessionTransport`, for a response body
    /// in a content coding: URL loading hands over decoded bytes only).
    public var totalBytes: Int64

    /// Creates a progress value.
    public init(direction: Direction, completedBytes: Int64, totalBytes: Int64) {
        self.direction = direction
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
    }

    /// Whether every expected byte is done (false while the total is unknown), like Moya's
    /// `ProgressResponse.completed`.
    public var completed: Bool { totalBytes >= 0 && completedBytes >= totalBytes }

    /// Completed over total, between 0 and 1; nil when the total is unknown.
    public var fractionCompleted: Double? {
        totalBytes > 0 ? min(1, Double(completedBytes) / Double(totalBytes)) : nil
    }
}

/// Everything a transport needs to send one request.
public struct TransportRequest: Sendable {
    /// How the body travels.
    public enum Body: Sendable {
        /// The request's `httpBody` (or none), sent with an ordinary data task.
        case inline
        /// The request's `httpBody` sent as an upload, reporting upload progress.
        case upload
        /// The contents of a file, streamed.
        case file(URL)
    }

    /// The request to send.
    ///
    /// For a request hooks changed and the provider sends through ``CurlTransport`` or a stub,
    /// this is built from the changes on first read (those transports read the parts; building a
    /// `URLRequest` on Linux costs about as much as the rest of an empty chain).
    public var urlRequest: URLRequest {
        get { deferred?.request ?? given }
        set {
            given = newValue
            deferred = nil
        }
    }
    /// The request given, or the original one while `deferred` stands for it.
    private var given: URLRequest
    /// The changed request, when it is built only if read.
    var deferred: DeferredURLRequest?
    /// How the body travels.
    public var body: Body
    /// When set, the response body is written to a file placed by this destination.
    public var download: DownloadDestination?
    /// Receives progress; called on an arbitrary thread.
    public var progress: (@Sendable (TransferProgress) -> Void)?
    /// Fires when the request is cancelled (besides the calling task's own cancellation).
    public var cancellation: CancellationSignal?
    /// How many redirects to follow for this request; nil: the transport's own policy.
    public var redirects: RedirectPolicy?
    /// What the response may cost (sizes); enforced by the transport.
    public var limits: RequestLimits
    /// When the whole exchange must be over (``RequestLimits/deadline``), with its length in
    /// seconds for the message; nil: no deadline. The transport fails with
    /// ``TransportFailureKind/timedOut`` when it passes.
    public var deadline: (instant: DispatchTime, seconds: TimeInterval)?
    /// Where the transports keep the call's body stream once read, for the call's later sends
    /// (a re-send that answers a challenge, a retry); nil: a stream is read once, and refused
    /// if it was opened already.
    var bodySpool: BodySpool?

    /// Creates a transport request.
    public init(
        urlRequest: URLRequest, body: Body = .inline, download: DownloadDestination? = nil,
        progress: (@Sendable (TransferProgress) -> Void)? = nil, cancellation: CancellationSignal? = nil,
        redirects: RedirectPolicy? = nil, limits: RequestLimits = .default,
        deadline: (instant: DispatchTime, seconds: TimeInterval)? = nil
    ) {
        self.given = urlRequest
        self.body = body
        self.download = download
        self.progress = progress
        self.cancellation = cancellation
        self.redirects = redirects
        self.limits = limits
        self.deadline = deadline
    }
}

// The parts the package's transports read, without building a deferred request.
extension TransportRequest {
    /// The URL.
    var url: URL? { deferred?.url ?? given.url }
    /// The method as given (`GET` when none is).
    var method: String { deferred?.method ?? given.httpMethod ?? "GET" }
    /// The header fields, repeated names folded into one (RFC 9110 §5.3).
    var headerFields: [(name: String, value: String)] {
        if let deferred { return deferred.fields.map { ($0.name, $0.value) } }
        return (given.allHTTPHeaderFields ?? [:]).map { ($0.key, $0.value) }
    }
    /// The body, if it is data.
    var httpBody: Data? { deferred.map(\.body) ?? given.httpBody }
    /// Whether a transport's cookie jar adds its cookies and keeps the ones answers set
    /// (`httpShouldHandleCookies`).
    var handlesCookies: Bool { given.httpShouldHandleCookies }
    /// This request as a transport that followed redirects to `url` sent it last, with
    /// `method` when a redirect changed it: the request a challenge of the redirected response
    /// answers, or the redirect ``URLSessionTransport`` follows itself. A method turned into
    /// `GET` or `HEAD` leaves the body and its fields behind; another origin, the credentials,
    /// cookies and a `Host` field set for the first (as both transports do on the redirects they
    /// follow), but not
    /// `Proxy-Authorization`: it goes to the proxy alone (``CurlTransport`` keeps it too on the
    /// redirects it follows through one proxy; ``URLSessionTransport`` drops it on a change of
    /// scheme, which may change the environment's proxy).
    func redirected(to url: URL, method: String?) -> TransportRequest {
        var next = self
        var request = urlRequest
        let from = request.url
        request.url = url
        if let method, method != request.httpMethod?.uppercased() ?? "GET" {
            request.httpMethod = method
            if method == "GET" || method == "HEAD" {
                request.httpBody = nil
                request.httpBodyStream = nil
                for name in (request.allHTTPHeaderFields ?? [:]).keys where SessionRouter.isContentField(name) {
                    request.setValue(nil, forHTTPHeaderField: name)
                }
                next.body = .inline
            }
        }
        if let from, !SessionRouter.sameOrigin(from, url) {
            for name in SessionRouter.fieldsOfTheFirstOrigin { request.setValue(nil, forHTTPHeaderField: name) }
            request.url = url.withoutUserInfo
        }
        next.urlRequest = request
        return next
    }

    /// The timeout in seconds.
    var timeoutInterval: TimeInterval {
        get { deferred?.timeout ?? given.timeoutInterval }
        set {
            if let deferred {
                self.deferred = deferred.with(timeout: newValue)
            } else {
                given.timeoutInterval = newValue
            }
        }
    }
    /// The request as a response records it: built only if someone reads it.
    var sent: SentRequest { deferred.map { .deferred($0) } ?? .given(given) }
}

/// The request a response records: given, or made from a request's changes on first read.
enum SentRequest: Sendable {
    case given(URLRequest?)
    case deferred(DeferredURLRequest)

    var request: URLRequest? {
        switch self {
        case .given(let request): return request
        case .deferred(let deferred): return deferred.request
        }
    }
}

/// A request hooks changed, as the package's transports read it, with the `URLRequest` made
/// from it on first read (once: copies share it).
final class DeferredURLRequest: Sendable {
    let url: URL
    let method: String
    /// The header fields, repeated names folded into one.
    let fields: [HTTPHeader]
    /// Whether the request has header fields at all (a request without any has none, not an empty set).
    private let hasFields: Bool
    let body: Data?
    let timeout: TimeInterval
    /// The request before the changes, for what they leave as it was (cache policy, main document
    /// URL, service type, cellular access, cookies). It has no body stream (such requests are copied).
    private let original: URLRequest
    /// Made on first read (the same request for every read after it).
    private let built = OnceSlot<URLRequest>()

    init(url: URL, method: String, fields: [HTTPHeader], hasFields: Bool, body: Data?, timeout: TimeInterval, original: URLRequest) {
        self.url = url
        self.method = method
        self.fields = fields
        self.hasFields = hasFields
        self.body = body
        self.timeout = timeout
        self.original = original
    }

    /// The same request with another timeout.
    func with(timeout: TimeInterval) -> DeferredURLRequest {
        DeferredURLRequest(url: url, method: method, fields: fields, hasFields: hasFields, body: body, timeout: timeout, original: original)
    }

    /// The request, made anew with every property swift-corelibs-foundation's own copy carries
    /// (not the deprecated pipelining flag, which no transport of this package reads).
    deinit { built.free() }

    var request: URLRequest {
        built.value {
            var request = URLRequest(url: url, cachePolicy: original.cachePolicy, timeoutInterval: timeout)
            if method != "GET" { request.httpMethod = method }
            if hasFields { request.allHTTPHeaderFields = Dictionary(fields.lazy.map { ($0.name, $0.value) }, uniquingKeysWith: { $0 + ", " + $1 }) }
            if let body { request.httpBody = body }
            if let main = original.mainDocumentURL { request.mainDocumentURL = main }
            if original.networkServiceType != request.networkServiceType { request.networkServiceType = original.networkServiceType }
            if !original.allowsCellularAccess { request.allowsCellularAccess = false }
            if !original.httpShouldHandleCookies { request.httpShouldHandleCookies = false }
            return request
        }
    }
}

/// What a transport returns for a request that got a response.
public struct TransportResponse: Sendable {
    /// The HTTP response.
    ///
    /// A response ``CurlTransport`` or a stub received is made on first read, on Linux: the chain
    /// and its plugins read its status and fields from the parts (Foundation's `HTTPURLResponse`
    /// canonicalises every field name when it is made, the costliest step of a small request).
    public var response: HTTPURLResponse {
        get {
            switch parts {
            case .given(let response): return response
            case .deferred(let deferred):
                guard let response = deferred.response else {
                    // Only a Linux build defers (see `made`): swift-corelibs-foundation's
                    // `HTTPURLResponse.init(url:statusCode:httpVersion:headerFields:)` has no failing path.
                    preconditionFailure("HTTPURLResponse refused status \(deferred.statusCode)")
                }
                return response
            }
        }
        set { parts = .given(newValue) }
    }
    /// The body (empty for downloads).
    public var data: Data
    /// The saved file, for downloads.
    public var fileURL: URL?
    /// The protocol the response came over (`HTTP/1.1`, `HTTP/2`), when the transport knows it.
    public var httpVersion: String?
    /// Whether the transport followed at least one redirect to get this response, which then
    /// answers another URL than the request's (``InterceptorResponse/isRedirected``: a cache
    /// stores nothing for it under the request's URL). A transport of your own sets it when it
    /// follows redirects itself; the chain sets it on the response to a request it sent where
    /// redirects had led (answering a challenge that came after them).
    public var redirected: Bool
    /// The method of the last request sent when the transport followed redirects (a `303`, or a
    /// `301` or `302` after a `POST`, turns it into `GET`); nil: the request's own. With
    /// ``redirected`` and the response's URL it says which request an authentication challenge
    /// of a redirected response answers. A transport of your own sets it when it follows
    /// redirects itself.
    public var finalMethod: String?
    /// Whether a redirect on the way went to another origin, so that the transport left the
    /// request's `Authorization` and `Cookie` behind from there on: the last hop went without
    /// them, even when later redirects came back to the request's own origin. (The chain also
    /// compares the request's URL with the last one.) A transport of your own sets it when it
    /// follows redirects itself.
    public var credentialsLeftBehind = false
    /// For a proxy's `407` to the `CONNECT` of a tunnel (an https URL through a proxy), the
    /// tunnel's target (`host:port`): the challenge is the `CONNECT`'s, and a Digest answer
    /// covers that method and target, not the request's.
    var tunnelTarget: String?
    /// The `Cookie` field ``CurlTransport``'s cookie jar added to the last request sent (which had
    /// none of its own): no hook saw it, and the response's request fields include it (a cache
    /// must not take the answer to a session's request for an anonymous one; a logger scrubs it).
    var jarCookie: String?
    /// How the exchange went (``TransferMetrics``), when the transport measured it:
    /// ``CurlTransport`` does. A transport of your own may set it.
    public var metrics: TransferMetrics?

    /// Creates a transport response.
    public init(response: HTTPURLResponse, data: Data, fileURL: URL? = nil, httpVersion: String? = nil, redirected: Bool = false) {
        self.parts = .given(response)
        self.data = data
        self.fileURL = fileURL
        self.httpVersion = httpVersion
        self.redirected = redirected
    }

    private init(deferred: DeferredHTTPResponse, data: Data) {
        self.parts = .deferred(deferred)
        self.data = data
        self.redirected = false
    }

    private enum Parts: Sendable {
        case given(HTTPURLResponse)
        case deferred(DeferredHTTPResponse)
    }

    /// The response as given, or the parts it is made from on first read.
    private var parts: Parts

    /// The response as given, or the parts it is made from on first read, for the app's ``Response``.
    var source: ResponseSource {
        switch parts {
        case .given(let response): return .given(response)
        case .deferred(let deferred): return .deferred(deferred)
        }
    }

    /// The status code, read without making the response.
    var statusCode: Int {
        switch parts {
        case .given(let response): return response.statusCode
        case .deferred(let deferred): return deferred.statusCode
        }
    }

    /// The URL, read without making the response.
    var url: URL? {
        switch parts {
        case .given(let response): return response.url
        case .deferred(let deferred): return deferred.url
        }
    }

    /// A response with `fields` (as `HTTPURLResponse(url:statusCode:httpVersion:headerFields:)`
    /// makes it): made on first read on Linux, at once elsewhere (nil when Foundation refuses it);
    /// ``httpVersion`` is left for the caller to say.
    static func made(url: URL, statusCode: Int, httpVersion: String?, fields: [String: String], data: Data) -> TransportResponse? {
        #if canImport(FoundationNetworking)
        let deferred = DeferredHTTPResponse(url: url, statusCode: statusCode, httpVersion: httpVersion, fields: .received(fields))
        return TransportResponse(deferred: deferred, data: data)
        #else
        guard let response = HTTPURLResponse(url: url, statusCode: statusCode, httpVersion: httpVersion, headerFields: fields) else {
            return nil
        }
        return TransportResponse(response: response, data: data)
        #endif
    }
}

/// The names `HTTPURLResponse` gives header fields in `allHeaderFields`.
enum FoundationFieldNames {
    /// Names already worked out (`capitalized` is a Unicode operation: worth doing once per name).
    private static let known = Locked<[String: String]>([:])

    /// `fields` as swift-corelibs-foundation's `HTTPURLResponse` lists them (empty names dropped,
    /// `X-` names kept, `WWW-Authenticate` spelled so, others `capitalized`), sorted by name; nil
    /// on Darwin, for a non-ASCII name, or when two names become one (Foundation keeps either).
    static func listed(_ fields: [String: String]) -> [HTTPHeader]? {
        #if canImport(FoundationNetworking)
        var listed: [HTTPHeader] = []
        // Room for the fields a hook adds (`X-Cache`, …): see `ResponseState.editFields`.
        listed.reserveCapacity(fields.count + RequestState.roomForAddedFields)
        // Names of letters and hyphens (nearly all) are worked out from their bytes; the others
        // are looked up in the table of names seen before, or worked out by Foundation.
        var others: [(name: String, value: String)] = []
        for (name, value) in fields where !name.isEmpty {
            if let canonical = fixedName(name) ?? capitalizedWords(name) {
                listed.append(HTTPHeader(name: canonical, value: value))
            } else {
                others.append((name, value))
            }
        }
        for (name, value) in others {
            guard let canonical = capitalizedByFoundation(name) else { return nil }
            listed.append(HTTPHeader(name: canonical, value: value))
        }
        listed.sortByName()
        for index in listed.indices.dropFirst() where listed[index].name == listed[index - 1].name { return nil }
        return listed
        #else
        return nil
        #endif
    }

    /// The names Foundation does not `capitalize`: ASCII `X-` names as they are, `WWW-Authenticate`
    /// so spelled.
    private static func fixedName(_ name: String) -> String? {
        // Bytes, not `hasPrefix` (a Unicode comparison, on every field of every response).
        var bytes = name.utf8.makeIterator()
        if let first = bytes.next(), first | 0x20 == UInt8(ascii: "x"), bytes.next() == UInt8(ascii: "-") {
            return name.utf8.allSatisfy({ $0 < 0x80 }) ? name : nil
        }
        if HTTPHeader.namesEqual(name, "WWW-Authenticate") { return "WWW-Authenticate" }
        return nil
    }

    /// `name.capitalized` worked out from the bytes, for a name of ASCII letters and hyphens only:
    /// each run of letters upper-case first and lower-case after. `name` itself when it is so
    /// spelled already (no new string); nil for a name with any other byte, or an empty one.
    static func capitalizedWords(_ name: String) -> String? {
        var spelledSo = true
        let lettersAndHyphens = name.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            var wordStart = true
            for byte in bytes {
                if byte == UInt8(ascii: "-") {
                    wordStart = true
                    continue
                }
                let lower = byte | 0x20
                guard lower >= UInt8(ascii: "a"), lower <= UInt8(ascii: "z") else { return false }
                // A word's first letter is upper-case, the others lower-case.
                if (byte == lower) == wordStart { spelledSo = false }
                wordStart = false
            }
            return !bytes.isEmpty
        }
        guard lettersAndHyphens == true else { return nil }
        if spelledSo { return name }
        return String(unsafeUninitializedCapacity: name.utf8.count) { buffer in
            var wordStart = true
            for (index, byte) in name.utf8.enumerated() {
                buffer[index] = byte == UInt8(ascii: "-") ? byte : wordStart ? byte & ~0x20 : byte | 0x20
                wordStart = byte == UInt8(ascii: "-")
            }
            return name.utf8.count
        }
    }

    /// `name.capitalized` for an ASCII name (nil for another), from the table of names worked
    /// out before: for the names neither ``fixedName(_:)`` nor ``capitalizedWords(_:)`` spells.
    private static func capitalizedByFoundation(_ name: String) -> String? {
        guard name.utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
        if let canonical = known.withLock({ $0[name] }) { return canonical }
        let canonical = name.capitalized
        known.withLock { table in
            if table.count >= 512 { table.removeAll(keepingCapacity: true) }
            table[name] = canonical
        }
        return canonical
    }
}

/// Sends requests. ``CurlTransport`` is the default on Linux, ``URLSessionTransport`` on Darwin (and a
/// choice everywhere); ``StubTransport`` answers from samples.
///
/// A transport does not answer HTTP authentication challenges: it returns the `401`, and
/// the interceptor chain asks its interceptors' `credential` hooks and retries.
///
/// Cancellation: when the calling task is cancelled or the request's ``TransportRequest/cancellation``
/// signal fires, the transport stops the transfer and throws a ``TransportFailure`` of kind
/// ``TransportFailureKind/cancelled``.
/// A transport throws exactly once or returns exactly once for every call.
public protocol Transport: Sendable {
    /// Sends `request` and returns its response, or throws why there is none.
    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse

    /// The `Accept-Encoding` value this transport decodes when a request carries exactly it, and
    /// which a provider therefore sends by default (``DefaultHeaders/standard(for:)``); nil when
    /// the transport decodes no content coding.
    var acceptEncoding: String? { get }

    /// The timeout, in seconds, a provider gives a request that has none of its own (no server
    /// layer's, before its request closure and hooks, which may set another); nil: `URLRequest`'s
    /// 60 s. ``URLSessionTransport`` answers its configuration's `timeoutIntervalForRequest`.
    var requestTimeout: TimeInterval? { get }
}

extension Transport {
    /// No content coding decoded: a transport that does not say otherwise passes bodies through.
    public var acceptEncoding: String? { nil }

    /// None of its own: a request keeps `URLRequest`'s 60 s.
    public var requestTimeout: TimeInterval? { nil }
}

extension URL {
    /// This URL without a user or password: credentials too (libcurl sends them as Basic), left
    /// behind on a redirect to another origin.
    var withoutUserInfo: URL {
        guard user != nil || password != nil, var parts = URLComponents(url: self, resolvingAgainstBaseURL: false) else { return self }
        parts.user = nil
        parts.password = nil
        return parts.url ?? self
    }
}
