import CCurlShim
import Dispatch
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the event loop hands back for a transfer that got a response. The `HTTPURLResponse` is
/// made from it by the caller, off the loop thread (Foundation's header canonicalisation is the
/// most expensive step of a small request).
struct CurlResponse: Sendable {
    let status: Int
    let url: URL
    let httpVersion: String
    let headers: [(name: String, value: String)]
    let data: Data
    /// The downloaded body's temporary file, for downloads.
    let downloadPath: String?
    /// Whether a redirect was followed to get it.
    let redirected: Bool
    /// The method of the last request sent (a redirect may have turned it into `GET`).
    let method: String
    /// Whether a redirect went to another origin (``TransportResponse/credentialsLeftBehind``).
    var credentialsLeftBehind = false
    /// For a proxy's `407` to a tunnel's `CONNECT`, its target (``TransportResponse/tunnelTarget``).
    var tunnelTarget: String?
    /// The `Cookie` the jar added to the last request sent (``TransportResponse/jarCookie``).
    var jarCookie: String?
    /// How the exchange went (``TransportResponse/metrics``).
    var metrics: TransferMetrics?

    /// The fields as a dictionary, repeated names joined with ", " (the first spelling kept).
    static func fold(_ headers: [(name: String, value: String)]) -> [String: String] {
        var fields: [String: String] = [:]
        var canonical: [String: String] = [:]
        for (name, value) in headers {
            let key = name.lowercased()
            if let existing = canonical[key] {
                fields[existing] = fields[existing]! + ", " + value
            } else {
                canonical[key] = name
                fields[name] = value
            }
        }
        return fields
    }

    /// The transport's response: the `HTTPURLResponse`, and a download moved into place.
    func transportResponse(for request: TransportRequest) throws(TransportFailure) -> TransportResponse {
        guard var made = TransportResponse.made(url: url, statusCode: status, httpVersion: httpVersion, fields: Self.fold(headers), data: data)
        else {
            if let downloadPath { unlink(downloadPath) }
            throw TransportFailure(kind: .badResponse, message: "status \(status) is not an HTTP response", metrics: metrics)
        }
        var fileURL: URL?
        // A challenge's body is no download: the chain answers it, and the download comes then
        // (placed first, it took the destination, or replaced the file there, before the answer).
        if let downloadPath, let challenge = InterceptorChain.challengeFields(status: status)?.challenge,
            headers.contains(where: { HTTPHeader.namesEqual($0.name, challenge) })
        {
            unlink(downloadPath)
        } else if let downloadPath, let destination = request.download {
            do {
                fileURL = try destination.place(URL(fileURLWithPath: downloadPath), response: made.response)
            } catch {
                unlink(downloadPath)
                throw TransportFailure(kind: .other, message: "cannot save the download: \(error.localizedDescription)", metrics: metrics)
            }
        }
        made.fileURL = fileURL
        made.httpVersion = httpVersion
        made.redirected = redirected
        made.finalMethod = redirected ? method : nil
        made.credentialsLeftBehind = credentialsLeftBehind
        made.tunnelTarget = tunnelTarget
        made.jarCookie = jarCookie
        made.metrics = metrics
        return made
    }
}

/// One request on a ``CurlTransport``: its options, the bytes it collects, its single completion.
///
/// Safe as `@unchecked Sendable`: the transfer state is touched only on the event-loop thread
/// (libcurl's callbacks run there); what other threads touch (continuation, cancelled flag)
/// is behind `shared`'s lock.
final class CurlCall: @unchecked Sendable {
    enum Outcome {
        case finished(Result<CurlResponse, TransportFailure>)
        case redirect
    }

    private struct Shared {
        var continuation: CheckedContinuation<Result<CurlResponse, TransportFailure>, Never>?
        var cancelled = false
        var submitted = false
        var done = false
    }

    let request: TransportRequest
    private let loop: CurlEventLoop
    private let shared = Locked(Shared())

    // Event-loop thread only.
    /// The easy handle while the transfer runs.
    private(set) var easy: UnsafeMutableRawPointer?
    private var url: URL
    private var method: String
    private var headers: [(name: String, value: String)]
    private var body: Data?
    private var bodyFile: URL?
    /// The body read from the request's stream, sent like a file.
    private var spooledBody: SpooledBody?
    private var redirectCount = 0
    /// How many redirects the call follows (the request's policy, else the transport's).
    private var redirectLimit = 0
    /// Where this hop's response redirects the call, when it is a redirect the call follows
    /// (decided once its header is in): its body is left behind, and no progress is told of it
    /// (the next hop's body is the response's).
    private var followedHop: (url: URL, becomesGET: Bool)?
    private var leavingBody: Bool { followedHop != nil }
    /// How many bytes of the body left behind were read (and dropped): they count against no
    /// limit of the response's, and past ``leftBodyAllowance`` the hop's connection is closed.
    private var leftBytes: Int64 = 0
    /// Whether the body left behind was cut (past ``leftBodyAllowance``): the transfer's write
    /// error means the redirect is followed, not a failure.
    private var cutLeftBody = false
    /// The most bytes of a followed redirect's body read to keep its connection for the next hop;
    /// a longer one (or one that never ends) is cut, closing the connection, and the redirect
    /// followed.
    static let leftBodyAllowance: Int64 = 64 << 10
    /// When the first hop and the current one were configured (uptime nanoseconds): the metrics' `redirectTime`.
    private var firstHopStart: UInt64 = 0
    private var hopStart: UInt64 = 0
    /// Whether a redirect followed went to another origin (its credentials were left behind).
    private var credentialsLeftBehind = false
    /// The `Cookie` field the jar added to this hop's request (it had none of its own).
    private var jarCookie: String?
    private var headerList: OpaquePointer?
    /// The fields only a proxy gets (`Proxy-Authorization`), never the origin.
    private var proxyHeaderList: OpaquePointer?
    private var responseHeaders: [(name: String, value: String)] = []
    private var data = Data()
    private var expected: Int64 = -1
    private var received: Int64 = 0
    private var lastUpload: Int64 = -1
    /// The file a download's body goes to while it arrives.
    private var download: PartialDownload?
    private var uploadFD: Int32 = -1
    /// The upload's declared length (its file's size when the transfer was set up), and how many
    /// of its bytes were read: the body is that many bytes whatever the file holds by then.
    private var uploadSize: Int64 = 0
    private var uploadRead: Int64 = 0
    private var idleTimeout: UInt64 = 0
    private var lastActivity: UInt64 = 0
    private var errorBuffer: UnsafeMutablePointer<CChar>?
    /// The peer this call's hop opened its sockets to (the shim's record; none when they went to
    /// two), for the metrics of a connection libcurl never completed and so names nowhere.
    private var peer: UnsafeMutablePointer<ph_curl_peer>?
    /// The content codings this transfer asked for and decodes (empty: the caller asked for
    /// its own, and gets the body as it came).
    private var decoding: Set<String> = []
    /// Undoes the response's content codings as the body arrives (``makeDecoder(status:)``); nil
    /// when the body goes as it came.
    private var decoder: ContentDecoder?
    /// Body bytes as they came over the connection (before decoding), for the decompression ratio.
    private var encodedReceived: Int64 = 0
    /// Set when a limit (or a download that cannot be written) stopped the transfer: the failure reported instead of libcurl's.
    private var limitFailure: TransportFailure?
    /// Whether any byte of an answer (a status line: the origin's, or a proxy's) came this hop.
    private var answered = false
    /// Header bytes and fields of the response being read.
    private var headerBytes = 0
    private var headerFields = 0
    /// The exchange's deadline (uptime nanoseconds), or 0 for none.
    private var absoluteDeadline: UInt64 = 0
    /// Whether the final response's headers are still being read.
    private var inHeaders = true
    /// The status of the response whose headers ended (0 before): after a `417`, libcurl may
    /// send the request again in the same transfer, and another response begins.
    private var finalStatus = 0
    /// Whether the response being read says `Transfer-Encoding: chunked`.
    private var chunked = false
    /// Whether the request carries `Expect: 100-continue` (its own: the transport sends none).
    private var expectsContinue = false
    /// Whether the next header line begins a block (the first of the hop, or one after a blank
    /// line): only such a line may be a status line.
    private var atBlockStart = true

    init(request: TransportRequest, loop: CurlEventLoop, spooledBody: SpooledBody? = nil) {
        self.request = request
        self.spooledBody = spooledBody
        self.loop = loop
        // The parts, not `urlRequest`: a request hooks changed is not built as a URLRequest.
        url = request.url ?? URL(fileURLWithPath: "/")
        method = request.method.uppercased()
        headers = request.headerFields
        switch request.body {
        case .inline, .upload: body = request.httpBody
        case .file(let file): bodyFile = file
        }
    }

    deinit {
        errorBuffer?.deallocate()
        peer?.deallocate()
    }

    // MARK: - Any thread

    /// Starts the call, unless it was cancelled already.
    func begin(_ continuation: CheckedContinuation<Result<CurlResponse, TransportFailure>, Never>) {
        let cancelled = shared.withLock { shared -> Bool in
            shared.continuation = continuation
            shared.submitted = !shared.cancelled
            return shared.cancelled
        }
        if cancelled {
            finish(.failure(TransportFailure(kind: .cancelled, message: "cancelled before it started")))
        } else {
            loop.submit(self)
        }
    }

    /// Cancels the call: the loop stops its transfer, and the caller gets `cancelled` once.
    func cancel() {
        let notify = shared.withLock { shared -> Bool in
            guard !shared.cancelled, !shared.done else { return false }
            shared.cancelled = true
            return shared.submitted
        }
        if notify { loop.cancel(self) }
    }

    var isCancelled: Bool { shared.withLock { $0.cancelled } }

    /// Resumes the caller with `result`, the first time only.
    func finish(_ result: Result<CurlResponse, TransportFailure>) {
        let (continuation, submitted) = shared.withLock { shared -> (CheckedContinuation<Result<CurlResponse, TransportFailure>, Never>?, Bool) in
            guard !shared.done else { return (nil, false) }
            shared.done = true
            defer { shared.continuation = nil }
            return (shared.continuation, shared.submitted)
        }
        if submitted { loop.callEnded() }
        continuation?.resume(returning: result)
    }

    // MARK: - Event-loop thread

    /// When the transfer times out: idle for too long, or past the exchange's deadline; nil
    /// without either.
    var idleDeadline: UInt64? {
        let idle = idleTimeout > 0 ? lastActivity &+ idleTimeout : UInt64.max
        let deadline = min(idle, absoluteDeadline > 0 ? absoluteDeadline : UInt64.max)
        return deadline == UInt64.max ? nil : deadline
    }

    var idleTimeoutFailure: TransportFailure {
        if absoluteDeadline > 0, DispatchTime.now().uptimeNanoseconds >= absoluteDeadline, let deadline = request.deadline {
            return LimitFailure.deadline(deadline.seconds)
        }
        return TransportFailure(
            kind: .timedOut,
            message: String(
                format: "no byte sent or received for %.1f s (the request's timeout)", Double(idleTimeout) / 1e9))
    }

    /// The most body bytes this transfer may deliver.
    private var bodyLimit: Int64 { download != nil ? (request.limits.maxDownloadBytes ?? .max) : request.limits.maxResponseBytes }

    /// Stops the transfer with `failure` (libcurl is told by the callback's return value).
    private func stop(_ failure: TransportFailure) -> Int {
        limitFailure = failure
        return 0
    }

    /// Sets every option of the transfer on `easy` (a fresh or reset handle).
    func configure(_ easy: UnsafeMutableRawPointer, settings: CurlSettings) throws(TransportFailure) {
        self.easy = easy
        let me = Unmanaged.passUnretained(self).toOpaque()
        redirectLimit = (request.redirects ?? settings.configuration.redirects).maxRedirects
        followedHop = nil
        leftBytes = 0
        cutLeftBody = false
        responseHeaders.removeAll(keepingCapacity: true)
        data = Data()
        expected = -1
        received = 0
        encodedReceived = 0
        decoder = nil
        lastUpload = -1
        limitFailure = nil
        inHeaders = true
        finalStatus = 0
        chunked = false
        atBlockStart = true
        headerBytes = 0
        headerFields = 0
        answered = false
        absoluteDeadline = request.deadline?.instant.uptimeNanoseconds ?? 0
        hopStart = 0
        url = try Self.withHostAsRead(url)
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = url.host, !host.isEmpty else {
            throw TransportFailure(kind: .other, message: "cannot send \(url.absoluteString): only http and https URLs with a host are supported")
        }
        if errorBuffer == nil { errorBuffer = .allocate(capacity: Int(PH_CURL_ERROR_SIZE)) }
        errorBuffer?[0] = 0

        ph_curl_easy_setopt_long(easy, PH_CURLOPT_NOSIGNAL, 1)
        ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_ERRORBUFFER, errorBuffer)
        if peer == nil { peer = .allocate(capacity: 1) }
        if let peer {
            peer.initialize(to: ph_curl_peer())
            ph_curl_easy_record_peer(easy, peer)
        }
        url.absoluteString.withCString { _ = ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_URL, $0) }
        ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_PROTOCOLS_STR, "http,https")
        ph_curl_easy_setopt_data_callback(easy, PH_CURLOPT_WRITEFUNCTION, curlWriteCallback)
        ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_WRITEDATA, me)
        ph_curl_easy_setopt_data_callback(easy, PH_CURLOPT_HEADERFUNCTION, curlHeaderCallback)
        ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_HEADERDATA, me)

        let hasBody = try configureMethodAndBody(easy, me: me)
        try configureHeaders(easy, settings: settings, hasBody: hasBody)

        let timeout = request.timeoutInterval
        // A timeout that is no positive finite number (0, negative, NaN, infinite: what an app's
        // URLRequest may carry) is none; a finite one of centuries is none in effect.
        idleTimeout = timeout > 0 && timeout.isFinite ? max(1, timeout.saturatingNanoseconds) : 0
        let connect = min(settings.configuration.connectTimeout, timeout > 0 ? timeout : .infinity)
        if connect.isFinite, connect > 0 {
            // At most a billion seconds: milliseconds as a `long` without overflow.
            ph_curl_easy_setopt_long(easy, PH_CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(min(connect, 1e9) * 1000)))
        }
        // Whenever a body goes, progress or none: an inline body is handed over whole (no read
        // callback), and only this callback tells the idle clock that bytes still leave.
        if hasBody {
            ph_curl_easy_setopt_long(easy, PH_CURLOPT_NOPROGRESS, 0)
            ph_curl_easy_setopt_xferinfo_callback(easy, PH_CURLOPT_XFERINFOFUNCTION, curlProgressCallback)
            ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_XFERINFODATA, me)
        }
        let configuration = settings.configuration
        if configuration.http2 {
            ph_curl_easy_setopt_long(easy, PH_CURLOPT_HTTP_VERSION, Int(PH_CURL_HTTP_VERSION_2TLS))
            if scheme == "https" { ph_curl_easy_setopt_long(easy, PH_CURLOPT_PIPEWAIT, 1) }
        } else {
            ph_curl_easy_setopt_long(easy, PH_CURLOPT_HTTP_VERSION, Int(PH_CURL_HTTP_VERSION_1_1))
        }
        switch configuration.proxy {
        case .environment:
            break
        case .none:
            ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_PROXY, "")
        case .url(let proxy, let noProxy):
            proxy.withCString { _ = ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_PROXY, $0) }
            // Set even when empty: unset, libcurl reads `no_proxy` from the environment, and
            // hosts listed there would bypass a proxy the configuration made the only way out.
            noProxy.joined(separator: ",").withCString { _ = ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_NOPROXY, $0) }
        }
        if scheme == "https" { try Self.apply(settings.tls(for: host), to: easy) }
        // An HTTPS proxy's connection: its host's TLS configuration, else the system's trust.
        if let proxyTLS = settings.proxyTLS { try Self.apply(proxyTLS, to: easy, options: .proxy) }
        if request.download != nil { try openDownloadFile() }
        lastActivity = DispatchTime.now().uptimeNanoseconds
        hopStart = lastActivity
        if redirectCount == 0 { firstHopStart = hopStart }
    }

    /// What libcurl measured of the transfer that just ended on `easy` (the last hop), with the
    /// redirects before it; `failed`: it ended before its response did.
    private func metrics(_ easy: UnsafeMutableRawPointer, failed: Bool = false) -> TransferMetrics {
        func seconds(_ info: Int32) -> TimeInterval {
            var microseconds: ph_curl_off_t = 0
            ph_curl_easy_getinfo_off(easy, info, &microseconds)
            return TimeInterval(max(0, microseconds)) / 1e6
        }
        func bytes(_ info: Int32) -> Int64 {
            var count: ph_curl_off_t = 0
            ph_curl_easy_getinfo_off(easy, info, &count)
            return Int64(max(0, count))
        }
        var connects = 0
        ph_curl_easy_getinfo_long(easy, PH_CURLINFO_NUM_CONNECTS, &connects)
        var port = 0
        ph_curl_easy_getinfo_long(easy, PH_CURLINFO_PRIMARY_PORT, &port)
        var primary: UnsafePointer<CChar>?
        ph_curl_easy_getinfo_string(easy, PH_CURLINFO_PRIMARY_IP, &primary)
        var address = primary.map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        // A connection libcurl did not complete (a failed TLS handshake or proxy tunnel: some
        // libcurl 8 releases then name none) went where this hop's sockets went, if it was made
        // (a refused one names nothing, as libcurl does not) and they all went to one peer.
        if port <= 0 || address == nil, let peer, peer.pointee.port > 0, seconds(PH_CURLINFO_CONNECT_TIME_T) > 0 {
            port = peer.pointee.port
            address = withUnsafeBytes(of: peer.pointee.address) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        // A failed transfer: libcurl 8 sets the request's start and first byte to the time it
        // gave up when it never got that far, so they count only if a byte of the request went
        // out and one of an answer came.
        var sent = true
        if failed {
            var requestBytes = 0
            ph_curl_easy_getinfo_long(easy, PH_CURLINFO_REQUEST_SIZE, &requestBytes)
            sent = requestBytes > 0
        }
        let firstByte = !failed || answered ? seconds(PH_CURLINFO_STARTTRANSFER_TIME_T) : 0
        // Over a connection kept alive nothing was looked up or connected (libcurl still counts
        // the time it took to find the connection as a name lookup). A transfer that failed
        // without a connection of its own reused one only if it got as far as sending.
        let reused = connects == 0 && sent
        let handshake = reused ? 0 : seconds(PH_CURLINFO_APPCONNECT_TIME_T)
        return TransferMetrics(
            nameLookup: reused ? 0 : seconds(PH_CURLINFO_NAMELOOKUP_TIME_T), connect: reused ? 0 : seconds(PH_CURLINFO_CONNECT_TIME_T),
            tlsHandshake: handshake > 0 ? handshake : nil, requestStart: sent ? seconds(PH_CURLINFO_PRETRANSFER_TIME_T) : 0,
            firstByte: firstByte, total: seconds(PH_CURLINFO_TOTAL_TIME_T), redirectCount: redirectCount,
            redirectTime: TimeInterval(hopStart &- min(hopStart, firstHopStart)) / 1e9, reusedConnection: reused,
            remoteAddress: address, remotePort: port > 0 ? port : nil,
            requestBodyBytes: bytes(PH_CURLINFO_SIZE_UPLOAD_T), responseBodyBytes: bytes(PH_CURLINFO_SIZE_DOWNLOAD_T))
    }

    /// `url` with a host written percent-encoded (`b%C3%BCcher.example`, `api%2Eexample.com`)
    /// rewritten in the form this transport reads it in (`xn--bcher-kva.example`,
    /// `api.example.com`), the form its ``CurlTransport/Configuration/tlsOverrides`` entry is
    /// looked up by: libcurl decodes such a host and converts it with its own IDNA library, which
    /// may read a name otherwise (`local%E2%80%8Dhost` is `localhost` to it, a name Foundation's
    /// IDNA refuses), and the request went to a pinned host with the default TLS. A host that
    /// does not decode to a host name (letters, digits, `-`, `.`, `_`, `~` once in IDNA's form)
    /// is refused. Any other URL is returned as it is.
    static func withHostAsRead(_ url: URL) throws(TransportFailure) -> URL {
        // Most URLs have neither a `%` nor a byte past ASCII in their authority: they are not parsed again.
        let text = url.absoluteString.utf8
        guard let slashes = text.firstRange(of: "://".utf8),
            text[slashes.upperBound...].prefix(while: { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
                .contains(where: { $0 == UInt8(ascii: "%") || $0 >= 0x80 }),
            var parts = URLComponents(url: url, resolvingAgainstBaseURL: true), let written = parts.encodedHost,
            !written.hasPrefix("["), written.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 >= 0x80 })
        else { return url }
        let decoded = parts.host ?? written
        // Only a host name: `URLComponents` traps on a host holding a character it does not allow
        // (`a%3Cb.example` is `a<b.example`), and a redirect's `Location` is the server's to write.
        guard let name = URLParts.hostName(decoded) else {
            throw TransportFailure(
                kind: .other,
                message:
                    "cannot send \(url.withoutUserInfo.absoluteString): its host \(decoded.debugDescription) (written percent-encoded) does not decode to a host name"
            )
        }
        parts.encodedHost = name
        guard let rewritten = parts.url else {
            throw TransportFailure(kind: .other, message: "cannot send \(url.withoutUserInfo.absoluteString): its host does not read back as \(name)")
        }
        return rewritten
    }

    /// Methods whose requests carry content (RFC 9110 §9.3): sent with a `Content-Length`,
    /// `0` when there is no body, as servers may answer `411 Length Required` without one.
    private static func declaresLength(_ method: String) -> Bool {
        method == "POST" || method == "PUT" || method == "PATCH"
    }

    /// The method and the body; returns whether a body is sent.
    private func configureMethodAndBody(_ easy: UnsafeMutableRawPointer, me: UnsafeMutableRawPointer) throws(TransportFailure) -> Bool {
        // libcurl writes the method into the request line as it is: a space, CR or LF in it
        // would make another request line or header fields. A method is a token (RFC 9110 §9.1), as a field name is.
        guard HeaderValidation.isValidName(method) else {
            throw TransportFailure(kind: .other, message: "refused to send a request with an invalid method \(method.debugDescription)")
        }
        if method == "HEAD" {
            ph_curl_easy_setopt_long(easy, PH_CURLOPT_NOBODY, 1)
            return false
        }
        if bodyFile != nil || spooledBody != nil {
            // An upload file opens without blocking (a FIFO opens at once, and is refused below:
            // its size says nothing of what it holds, and the open waited for a writer).
            let fd = spooledBody?.descriptor() ?? open(bodyFile!.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            let what = bodyFile.map { "the upload file \($0.path)" } ?? "the request's body stream"
            guard fd >= 0 else {
                throw TransportFailure(kind: .other, message: "cannot read \(what): \(String(cString: strerror(errno)))")
            }
            var info = stat()
            guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                close(fd)
                throw TransportFailure(kind: .other, message: "cannot read \(what): not a regular file")
            }
            uploadFD = fd
            let size = Int64(info.st_size)
            uploadSize = size
            uploadRead = 0
            ph_curl_easy_setopt_long(easy, PH_CURLOPT_POST, 1)
            ph_curl_easy_setopt_off(easy, PH_CURLOPT_POSTFIELDSIZE_LARGE, size)
            ph_curl_easy_setopt_data_callback(easy, PH_CURLOPT_READFUNCTION, curlReadCallback)
            ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_READDATA, me)
            ph_curl_easy_setopt_seek_callback(easy, PH_CURLOPT_SEEKFUNCTION, curlSeekCallback)
            ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_SEEKDATA, me)
            if method != "POST" { method.withCString { _ = ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_CUSTOMREQUEST, $0) } }
            return true
        }
        if let body, !body.isEmpty || Self.declaresLength(method) {
            ph_curl_easy_setopt_off(easy, PH_CURLOPT_POSTFIELDSIZE_LARGE, Int64(body.count))
            body.withUnsafeBytes { bytes in
                _ = ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_COPYPOSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
            }
            if method != "POST" { method.withCString { _ = ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_CUSTOMREQUEST, $0) } }
            return true
        }
        if Self.declaresLength(method) {
            ph_curl_easy_setopt_off(easy, PH_CURLOPT_POSTFIELDSIZE_LARGE, 0)
            ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_COPYPOSTFIELDS, "")
            if method != "POST" { method.withCString { _ = ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_CUSTOMREQUEST, $0) } }
            return false
        }
        if method != "GET" { method.withCString { _ = ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_CUSTOMREQUEST, $0) } }
        return false
    }

    /// The header lists (the origin's, and the proxy's: `Proxy-Authorization`); `Accept-Encoding` and cookies.
    private func configureHeaders(_ easy: UnsafeMutableRawPointer, settings: CurlSettings, hasBody: Bool) throws(TransportFailure) {
        // Every field checked before any list is made: a refusal leaves nothing to free.
        for (name, value) in headers {
            guard HeaderValidation.isValidName(name) else {
                throw TransportFailure(kind: .other, message: "refused to send a header with an invalid name \"\(name)\"")
            }
            guard HeaderValidation.isValidValue(value) else {
                throw TransportFailure(kind: .other, message: "refused to send header \(name): its value contains CR, LF or NUL")
            }
        }
        var list: OpaquePointer?
        var proxyList: OpaquePointer?
        var hasAcceptEncoding = false
        var hasTransportsAcceptEncoding = false
        // Known before the fields are listed: the transport's own list is not sent with a range.
        let hasRange = headers.contains { HTTPHeader.namesEqual($0.name, "Range") }
        var hasExpect = false
        expectsContinue = false
        var hasCookie = false
        var hasContentType = false
        for (name, value) in headers {
            switch name.lowercased() {
            case "content-length", "transfer-encoding", "connection":
                continue  // libcurl writes these itself
            case "accept-encoding":
                // The transport's own list (a provider's default) is decoded; any other is the caller's.
                // Not with a range, which is not decoded: a server that ignores the range would
                // send the whole body coded, to a caller who did not ask for it.
                if value != settings.encodings {
                    hasAcceptEncoding = true
                } else {
                    hasTransportsAcceptEncoding = true
                    if hasRange { continue }
                }
            case "expect":
                hasExpect = true
                // libcurl waits for a `100` (and sends again after a `417`) only with a body to send.
                expectsContinue = hasBody && value.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue"
            case "cookie": hasCookie = true
            case "content-type": hasContentType = true
            case "proxy-authorization":
                // For the proxy only (its CONNECT, or a plain request through it): in the origin's
                // list it would go through a tunnel to the origin.
                let line = "\(name): \(value)"
                proxyList = line.withCString { ph_curl_slist_append(proxyList, $0) }
                continue
            default: break
            }
            // An empty value (spaces and tabs around a value are not part of it, RFC 9110 §5.5) is
            // written `Name;`: libcurl leaves out a field with nothing after its colon (and for
            // `Accept`, its own `*/*` too).
            let line = value.utf8.allSatisfy { $0 == 0x20 || $0 == 0x09 } ? "\(name);" : "\(name): \(value)"
            list = line.withCString { ph_curl_slist_append(list, $0) }
        }
        if !hasExpect, hasBody { list = ph_curl_slist_append(list, "Expect:") }
        // The transport's codings, decoded here (libcurl is not asked to: from 8.5 on it would
        // fail a body in a coding it does not know, before this transport sees the field). Not
        // for a range: a part of a coded body does not decode alone.
        decoding = []
        if !hasAcceptEncoding, !hasRange, !settings.encodings.isEmpty {
            if !hasTransportsAcceptEncoding {
                list = "Accept-Encoding: \(settings.encodings)".withCString { ph_curl_slist_append(list, $0) }
            }
            decoding = settings.decodable
        } else if !hasAcceptEncoding {
            // A request without the field accepts any coding (RFC 9110 §12.5.3); what is not
            // decoded here is asked for as it is.
            list = ph_curl_slist_append(list, "Accept-Encoding: identity")
        }
        // A body goes with the Content-Type it was given, or as URL loading sends it: a POST's
        // body in memory labelled a form (libcurl's own label, the one the provider gives it before
        // the chain; here too for a body a hook set), any other none: libcurl would label every
        // body a form, an empty POST's, a PUT's, a file's and a stream's too.
        let labelled = method == "POST" && hasBody && bodyFile == nil && spooledBody == nil
        if !hasContentType, !labelled, hasBody || (method != "HEAD" && Self.declaresLength(method)) {
            list = ph_curl_slist_append(list, "Content-Type:")
        }
        jarCookie = hasCookie || !request.handlesCookies ? nil : settings.cookieJar?.header(for: url)
        if let jarCookie {
            list = "Cookie: \(jarCookie)".withCString { ph_curl_slist_append(list, $0) }
        }
        headerList = list
        if let list { ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_HTTPHEADER, UnsafeRawPointer(list)) }
        proxyHeaderList = proxyList
        ph_curl_easy_setopt_long(easy, PH_CURLOPT_HEADEROPT, Int(PH_CURLHEADER_SEPARATE))
        if let proxyList { ph_curl_easy_setopt_ptr(easy, PH_CURLOPT_PROXYHEADER, UnsafeRawPointer(proxyList)) }
    }

    /// The libcurl options that set one connection's TLS: the origin's, or an HTTPS proxy's
    /// (`CURLOPT_PROXY_…`, the same settings for the connection to the proxy).
    struct TLSOptions {
        let prefix: String
        let sslVersion: Int32
        let caInfo: Int32
        let caPath: Int32
        let caInfoBlob: Int32
        let pinnedPublicKey: Int32
        let certBlob: Int32
        let keyBlob: Int32
        let certType: Int32
        let keyType: Int32
        let keyPassword: Int32

        static let origin = TLSOptions(
            prefix: "CURLOPT_", sslVersion: PH_CURLOPT_SSLVERSION, caInfo: PH_CURLOPT_CAINFO, caPath: PH_CURLOPT_CAPATH,
            caInfoBlob: PH_CURLOPT_CAINFO_BLOB, pinnedPublicKey: PH_CURLOPT_PINNEDPUBLICKEY, certBlob: PH_CURLOPT_SSLCERT_BLOB,
            keyBlob: PH_CURLOPT_SSLKEY_BLOB, certType: PH_CURLOPT_SSLCERTTYPE, keyType: PH_CURLOPT_SSLKEYTYPE, keyPassword: PH_CURLOPT_KEYPASSWD)
        static let proxy = TLSOptions(
            prefix: "CURLOPT_PROXY_", sslVersion: PH_CURLOPT_PROXY_SSLVERSION, caInfo: PH_CURLOPT_PROXY_CAINFO,
            caPath: PH_CURLOPT_PROXY_CAPATH, caInfoBlob: PH_CURLOPT_PROXY_CAINFO_BLOB, pinnedPublicKey: PH_CURLOPT_PROXY_PINNEDPUBLICKEY,
            certBlob: PH_CURLOPT_PROXY_SSLCERT_BLOB, keyBlob: PH_CURLOPT_PROXY_SSLKEY_BLOB, certType: PH_CURLOPT_PROXY_SSLCERTTYPE,
            keyType: PH_CURLOPT_PROXY_SSLKEYTYPE, keyPassword: PH_CURLOPT_PROXY_KEYPASSWD)
    }

    /// Sets the TLS options of the origin's connection, or (`options` ``TLSOptions/proxy``) of
    /// an HTTPS proxy's. Each one that decides whom the transfer trusts, or what it presents,
    /// must take: libcurl refuses an option its TLS backend lacks (a CA bundle in memory, or key
    /// pinning, on some builds), and a transfer without it would trust more than the
    /// configuration says (fails closed, naming the option).
    private static func apply(
        _ tls: PreparedTLS, to easy: UnsafeMutableRawPointer, options: TLSOptions = .origin
    ) throws(TransportFailure) {
        func require(_ code: Int32, _ option: String) throws(TransportFailure) {
            guard code == 0 else {
                let reason = ph_curl_easy_strerror(code).map { String(cString: $0) } ?? "error \(code)"
                throw TransportFailure(
                    kind: .tlsHandshakeFailed,
                    message: "this libcurl cannot apply the TLS configuration: \(options.prefix)\(option): \(reason) (curl error \(code))")
            }
        }
        try require(
            ph_curl_easy_setopt_long(
                easy, options.sslVersion, Int(tls.minimumVersion == .tls13 ? PH_CURL_SSLVERSION_TLSv1_3 : PH_CURL_SSLVERSION_TLSv1_2)),
            "SSLVERSION")
        if let file = tls.systemFile {
            try require(file.withCString { ph_curl_easy_setopt_ptr(easy, options.caInfo, $0) }, "CAINFO")
        }
        if let bundle = tls.caBundle {
            let set = bundle.withUnsafeBytes { ph_curl_easy_setopt_blob(easy, options.caInfoBlob, $0.baseAddress, $0.count) }
            try require(set, "CAINFO_BLOB")
            if tls.excludeSystemStore {
                ph_curl_easy_setopt_ptr(easy, options.caInfo, nil)
                ph_curl_easy_setopt_ptr(easy, options.caPath, nil)
            }
        }
        if let pins = tls.pins {
            try require(pins.withCString { ph_curl_easy_setopt_ptr(easy, options.pinnedPublicKey, $0) }, "PINNEDPUBLICKEY")
        }
        if let certificate = tls.clientCertificate, let key = tls.clientKey {
            let setCertificate = certificate.withUnsafeBytes { ph_curl_easy_setopt_blob(easy, options.certBlob, $0.baseAddress, $0.count) }
            try require(setCertificate, "SSLCERT_BLOB")
            let setKey = key.withUnsafeBytes { ph_curl_easy_setopt_blob(easy, options.keyBlob, $0.baseAddress, $0.count) }
            try require(setKey, "SSLKEY_BLOB")
            ph_curl_easy_setopt_ptr(easy, options.certType, "PEM")
            ph_curl_easy_setopt_ptr(easy, options.keyType, "PEM")
            if let passphrase = tls.passphrase {
                try require(passphrase.withCString { ph_curl_easy_setopt_ptr(easy, options.keyPassword, $0) }, "KEYPASSWD")
            }
        }
    }

    private func openDownloadFile() throws(TransportFailure) {
        if let download {
            // A redirect: the body of the 3xx is not the download.
            download.restart()
            return
        }
        download = try PartialDownload()
    }

    /// Frees what one transfer on a handle used (header list, upload file).
    func releaseTransfer() {
        if let headerList { ph_curl_slist_free_all(headerList) }
        headerList = nil
        if let proxyHeaderList { ph_curl_slist_free_all(proxyHeaderList) }
        proxyHeaderList = nil
        if uploadFD >= 0 { close(uploadFD) }
        uploadFD = -1
        easy = nil
    }

    /// Frees everything, removing a partial download.
    func abandonTransfer() {
        releaseTransfer()
        removeDownload()
    }

    private func removeDownload() {
        download?.remove()
        download = nil
    }

    /// Whether `total` decoded bytes (the body's, or what one stage of stacked codings passed
    /// on to the next) are within the body's limit and, decoding, its ratio to the bytes
    /// received; when not, stops the transfer with the limit's failure.
    private func withinDecodedLimits(_ total: Int64) -> Bool {
        let limit = bodyLimit
        if total > limit {
            _ = stop(LimitFailure.body(total, limit: limit, download: download != nil))
            return false
        }
        if decoder != nil, total > RequestLimits.decompressionAllowance {
            // Checked per decoded piece (16 KiB at most), against every byte taken from the
            // connection so far: no read inflates unchecked.
            // A ratio too large to multiply (`Int64.max` for no limit) lets everything through.
            let (allowed, overflow) = encodedReceived.multipliedReportingOverflow(by: request.limits.maxDecompressionRatio)
            if !overflow, total > allowed {
                _ = stop(LimitFailure.ratio(decoded: total, encoded: encodedReceived, limits: request.limits))
                return false
            }
        }
        return true
    }

    // MARK: libcurl callbacks (event-loop thread)

    func receiveBody(_ bytes: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        lastActivity = DispatchTime.now().uptimeNanoseconds
        // A redirect's body that is followed is not the response's: read to keep the connection,
        // dropped, and cut once it is long.
        if leavingBody {
            leftBytes += Int64(count)
            guard leftBytes <= Self.leftBodyAllowance else {
                cutLeftBody = true
                return 0
            }
            return count
        }
        let raw = UnsafeRawBufferPointer(start: bytes, count: count)
        guard let decoder else { return deliver(raw) ? count : 0 }
        encodedReceived += Int64(count)
        // The coded bytes count against the body's limit too: a coding that gives out little or
        // nothing (a gzip header's comment, zstd's skippable frames) would read on unbounded.
        let limit = bodyLimit
        if encodedReceived > limit { return stop(LimitFailure.body(encodedReceived, limit: limit, download: download != nil, beforeDecoding: true)) }
        do {
            guard try decoder.decode(raw, into: deliver, bound: withinDecodedLimits) else { return 0 }
        } catch {
            return stop(error)
        }
        // The bytes as they came, against `Content-Length`, which counts them: decoded bytes
        // (more of them) would reach that length early, and `completed` hold too soon.
        request.progress?(TransferProgress(direction: .download, completedBytes: encodedReceived, totalBytes: expected))
        return count
    }

    /// Keeps a piece of the (decoded) body, within the limits; false when a limit, or a download
    /// that cannot be written, stopped the transfer.
    private func deliver(_ piece: UnsafeRawBufferPointer) -> Bool {
        let total = received + Int64(piece.count)
        guard withinDecodedLimits(total) else { return false }
        if download != nil {
            guard download!.write(piece) else {
                _ = stop(TransportFailure(kind: .other, message: download!.writeFailure))
                return false
            }
        } else {
            data.append(piece.baseAddress!.assumingMemoryBound(to: UInt8.self), count: piece.count)
        }
        received = total
        // A decoded body's progress is told in coded bytes, once per read (`receiveBody`); a
        // redirect's that is followed never comes here.
        if decoder == nil {
            request.progress?(TransferProgress(direction: .download, completedBytes: received, totalBytes: expected))
        }
        return true
    }

    func receiveHeader(_ bytes: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        lastActivity = DispatchTime.now().uptimeNanoseconds
        answered = true
        let line = UnsafeRawBufferPointer(start: bytes, count: count)
        var end = count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        let startsBlock = atBlockStart
        atBlockStart = end == 0
        // The lines of every block of the hop count together: a proxy's CONNECT answer, interim
        // (1xx) responses, the final response and its trailer fields. Counted anew per block,
        // endless 103s or an endless trailer section ran within every limit.
        headerBytes += end
        if headerBytes > request.limits.maxHeaderBytes {
            return stop(LimitFailure.headerBytes(headerBytes, limit: request.limits.maxHeaderBytes))
        }
        // A status line: the first line of a block while the final response's fields are not in
        // (after 1xx, or a proxy's CONNECT answer), a new response. Not a line inside a block,
        // which libcurl passes on as a field, nor a trailer field after a chunked body.
        let statusLike =
            startsBlock && end >= 5 && line[0] == UInt8(ascii: "H") && line[1] == UInt8(ascii: "T") && line[2] == UInt8(ascii: "T")
            && line[3] == UInt8(ascii: "P") && line[4] == UInt8(ascii: "/")
        if statusLike, !inHeaders, finalStatus == 417, expectsContinue, received == 0, encodedReceived == 0 {
            // libcurl sends the request again, in the same transfer, after a `417` to the request's
            // `Expect: 100-continue` (RFC 9110 §10.1.1), and ignores the `417`'s body: this is
            // the new answer's status line. The `417`'s fields and coding are not the response's
            // (they were kept, and the final answer's fields dropped as trailer fields); its
            // cookies are kept, as a followed redirect's are. (A final `417`, whose body came, or
            // that answered no such request, keeps a trailer line like a status line a trailer.)
            storeCookies(in: loop.settings)
            finalStatus = 0
            inHeaders = true
            followedHop = nil
            leftBytes = 0
            data.removeAll(keepingCapacity: true)
            received = 0
            encodedReceived = 0
        }
        if statusLike, inHeaders {
            responseHeaders.removeAll(keepingCapacity: true)
            expected = -1
            chunked = false
            decoder = nil
            return count
        }
        // Trailer fields (after a chunked body) come through this callback too: they are not
        // the response's header fields (no `Set-Cookie` or `Location` from them), and are
        // counted and dropped.
        guard inHeaders else {
            if end > 0, line[0..<end].contains(UInt8(ascii: ":")) {
                headerFields += 1
                if headerFields > request.limits.maxHeaderFields {
                    return stop(LimitFailure.headerFields(headerFields, limit: request.limits.maxHeaderFields))
                }
            }
            return count
        }
        guard end > 0 else { return endOfHeaders(count) }
        if line[0] == 0x20 || line[0] == 0x09, !responseHeaders.isEmpty {
            let more = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<end]), as: UTF8.self).trimmingCharacters(in: .whitespaces)
            responseHeaders[responseHeaders.count - 1].value += " " + more
            return count
        }
        guard let colon = line[0..<end].firstIndex(of: UInt8(ascii: ":")) else { return count }
        headerFields += 1
        if headerFields > request.limits.maxHeaderFields {
            return stop(LimitFailure.headerFields(headerFields, limit: request.limits.maxHeaderFields))
        }
        var start = colon + 1
        while start < end, line[start] == 0x20 || line[start] == 0x09 { start += 1 }
        var valueEnd = end
        while valueEnd > start, line[valueEnd - 1] == 0x20 || line[valueEnd - 1] == 0x09 { valueEnd -= 1 }
        let name = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<colon]), as: UTF8.self)
        let value = String(decoding: UnsafeRawBufferPointer(rebasing: line[start..<valueEnd]), as: UTF8.self)
        if name.count == 14, name.lowercased() == "content-length", let length = Int64(value) { expected = length }
        if name.count == 17, name.lowercased() == "transfer-encoding", value.lowercased().contains("chunked") { chunked = true }
        responseHeaders.append((name: name, value: value))
        return count
    }

    /// Keeps the `Set-Cookie` fields of the response read (a followed redirect's, a `417` libcurl
    /// answered by sending again, the final one's) in the transport's jar, when it has one and
    /// the request handles cookies.
    private func storeCookies(in settings: CurlSettings) {
        guard let jar = settings.cookieJar, request.handlesCookies else { return }
        jar.store(setCookie: responseHeaders.filter { HTTPHeader.namesEqual($0.name, "Set-Cookie") }.map(\.value), for: url)
    }

    /// The blank line after a response's headers: a declared body above the limit fails here,
    /// before any of it is read (not for `HEAD`, `1xx` or a redirect, whose body is not kept).
    private func endOfHeaders(_ count: Int) -> Int {
        guard let easy else { return count }
        var status = 0
        ph_curl_easy_getinfo_long(easy, PH_CURLINFO_RESPONSE_CODE, &status)
        // A chunked body's length is its chunks', whatever a `Content-Length` beside it says
        // (RFC 9112 §6.3, as libcurl reads it): it failed a small body as declared past the limit.
        if chunked { expected = -1 }
        if status >= 200 {
            inHeaders = false
            finalStatus = status
            do {
                try makeDecoder(status: status)
            } catch {
                return stop(error)
            }
            followedHop = followedRedirect(status: status).map { ($0.url, $0.becomesGET) }
        }
        guard expected >= 0, method != "HEAD" else { return count }
        // No body to count: a 304 may declare the length a 200 would have had (RFC 9110 §8.6).
        if status < 200 || status == 204 || (300..<400).contains(status) { return count }
        let limit = bodyLimit
        if expected > limit { return stop(LimitFailure.declared(expected, limit: limit, download: download != nil)) }
        return count
    }

    /// The decoder of the final response's content codings, all its `Content-Encoding` fields
    /// read once they are in (folded lines too). None where the transport did not ask for
    /// codings, where one is a coding it did not ask for, for a `206` (a range of a coded body
    /// does not decode alone) and a `3xx` (a redirect's body is left behind, or delivered as it
    /// came): those bodies go as they came, `Content-Encoding` included. None where no body
    /// comes (`HEAD`, `204`, `304`).
    ///
    /// - Throws: `badResponse` past ``ContentDecoder/maxCodings`` codings, or with one of
    /// ``ContentDecoder/windowed`` listed twice.
    private func makeDecoder(status: Int) throws(TransportFailure) {
        decoder = nil
        guard !decoding.isEmpty, status != 206, status != 204, !(300..<400).contains(status), method != "HEAD" else { return }
        var codings: [String] = []
        for field in responseHeaders where HTTPHeader.namesEqual(field.name, "Content-Encoding") {
            codings += field.value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
        }
        guard !codings.isEmpty, codings.allSatisfy(decoding.contains) else { return }
        let applied = codings.count { $0 != "identity" }
        guard applied <= ContentDecoder.maxCodings else {
            throw TransportFailure(
                kind: .badResponse,
                message: "cannot decode the response body: it lists \(applied) content codings, and at most \(ContentDecoder.maxCodings) are undone")
        }
        // A `br` or `zstd` stage holds a window of its own (up to 16 and 8 MiB), which the server
        // sizes: stacked, a few bytes of body would cost the window that many times over.
        for coding in ContentDecoder.windowed {
            let times = codings.count { $0 == coding }
            guard times <= 1 else {
                throw TransportFailure(
                    kind: .badResponse,
                    message: "cannot decode the response body: it lists \(coding) \(times) times, and \(coding) is undone once per body")
            }
        }
        if applied > 0 { decoder = try ContentDecoder(codings: codings) }
    }

    /// The upload's next bytes, never past its declared length: libcurl before 8.7 sent what a
    /// file that grew held past it, after the length it declared (a server reads that as the
    /// next request's start). A file that ends sooner fails the transfer at once, saying so
    /// (libcurl waited for bytes that never came, to the idle timeout).
    func readBody(_ buffer: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        lastActivity = DispatchTime.now().uptimeNanoseconds
        let left = uploadSize - uploadRead
        guard left > 0 else { return 0 }
        while true {
            let got = read(uploadFD, buffer, Int(min(Int64(count), left)))
            if got > 0 {
                uploadRead += Int64(got)
                return got
            }
            if got == 0 {
                limitFailure = TransportFailure(
                    kind: .other,
                    message: "the upload file ended after \(uploadRead) of the \(uploadSize) bytes it held when the request started: "
                        + "it changed while it was sent")
                return Int(PH_CURL_READFUNC_ABORT)
            }
            if errno != EINTR { return Int(PH_CURL_READFUNC_ABORT) }
        }
    }

    func seekBody(offset: Int64, origin: Int32) -> Int32 {
        let at = lseek(uploadFD, off_t(offset), origin)
        guard at >= 0 else { return PH_CURL_SEEKFUNC_FAIL }
        uploadRead = Int64(at)
        return PH_CURL_SEEKFUNC_OK
    }

    func progress(uploaded: Int64, total: Int64) -> Int32 {
        if uploaded != lastUpload {
            lastUpload = uploaded
            lastActivity = DispatchTime.now().uptimeNanoseconds
            request.progress?(TransferProgress(direction: .upload, completedBytes: uploaded, totalBytes: total > 0 ? total : -1))
        }
        return 0
    }

    // MARK: Completion (event-loop thread)

    /// What the finished transfer means: a result, or a redirect to follow. A failure carries
    /// the transfer's metrics.
    func outcome(code: Int32, settings: CurlSettings) -> Outcome {
        let outcome = transferOutcome(code: code, settings: settings)
        guard case .finished(.failure(let failure)) = outcome, let easy else { return outcome }
        return .finished(.failure(measured(failure, on: easy)))
    }

    /// `failure` with the metrics of the transfer it ended on `easy` (libcurl keeps the times of
    /// the stages reached; the total, which libcurl updates as it goes, is at least the time since
    /// the hop started), when that transfer had started: a request refused before it is sent, as
    /// it was.
    func measured(_ failure: TransportFailure, on easy: UnsafeMutableRawPointer) -> TransportFailure {
        guard hopStart != 0, failure.metrics == nil else { return failure }
        var measured = failure
        var metrics = metrics(easy, failed: true)
        let now = DispatchTime.now().uptimeNanoseconds
        metrics.total = max(metrics.total, TimeInterval(now &- min(hopStart, now)) / 1e9)
        measured.metrics = metrics
        return measured
    }

    /// Where this hop's response, of `status`, redirects the call, when the call follows it
    /// (within its redirect limit, to an `http` or `https` URL).
    private func followedRedirect(status: Int) -> (url: URL, method: String, becomesGET: Bool)? {
        guard redirectCount < redirectLimit else { return nil }
        return SessionRouter.redirect(
            status: status, location: responseHeaders.first(where: { HTTPHeader.namesEqual($0.name, "Location") })?.value, from: url, method: method)
    }

    private func transferOutcome(code: Int32, settings: CurlSettings) -> Outcome {
        guard let easy else { return .finished(.failure(TransportFailure(kind: .other, message: "no transfer"))) }
        // A followed redirect's body that ended early (its connection closed or reset before
        // the length it declared) is left behind as one cut is: its fields are whole.
        let leftEarly = followedHop != nil && limitFailure == nil && (code == PH_CURLE_PARTIAL_FILE || code == PH_CURLE_RECV_ERROR)
        if code != PH_CURLE_OK, !cutLeftBody, !leftEarly {
            removeDownload()
            if let limitFailure { return .finished(.failure(limitFailure)) }
            if let challenged = proxyChallenge(easy) { return .finished(.success(challenged)) }
            if let refused = tunnelRefusal(easy) { return .finished(.failure(refused)) }
            let detail = errorBuffer.map { String(cString: $0) } ?? ""
            // libcurl (from 8.3, and fixes carried back) refuses response headers over 300 KiB in
            // all, and later versions more than 5,000 fields, as a receive error or as too large:
            // no lost connection, which is retried, but the response's fault.
            if code == PH_CURLE_RECV_ERROR || code == PH_CURLE_TOO_LARGE, inHeaders,
                detail.hasPrefix("Too large response headers") || detail.hasPrefix("Too many response headers")
            {
                return .finished(.failure(LimitFailure.headerTotal("\(detail) (curl error \(code))", limits: request.limits)))
            }
            // libcurl before 8.6 refuses an over-long header line as out of memory, 8.6 and later as too large.
            if code == PH_CURLE_OUT_OF_MEMORY || code == PH_CURLE_TOO_LARGE, inHeaders {
                let reason = code == PH_CURLE_TOO_LARGE ? "too large" : "out of memory"
                return .finished(.failure(LimitFailure.headerLine("\(reason) (curl error \(code))", limits: request.limits)))
            }
            return .finished(.failure(Self.failure(code: code, detail: detail)))
        }
        var status = 0
        ph_curl_easy_getinfo_long(easy, PH_CURLINFO_RESPONSE_CODE, &status)
        var version = 0
        ph_curl_easy_getinfo_long(easy, PH_CURLINFO_HTTP_VERSION, &version)
        storeCookies(in: settings)
        if let (next, becomesGET) = followedHop {
            redirectCount += 1
            if becomesGET {
                method = "GET"
                body = nil
                bodyFile = nil
                spooledBody = nil
                headers.removeAll { SessionRouter.isContentField($0.name) }
            }
            if !SessionRouter.sameOrigin(url, next) {
                let sameProxy = Self.keepsProxy(from: url, to: next, proxy: settings.configuration.proxy)
                headers.removeAll { header in
                    SessionRouter.fieldsOfTheFirstOrigin.contains { HTTPHeader.namesEqual($0, header.name) }
                        || (!sameProxy && HTTPHeader.namesEqual(header.name, "Proxy-Authorization"))
                }
                credentialsLeftBehind = true
            }
            url = next
            return .redirect
        }
        if encodedReceived > 0, let unfinished = decoder?.unfinishedCoding {
            // The connection's body ended whole, its coding's did not: a body delivered so would
            // be short without a sign of it.
            removeDownload()
            return .finished(
                .failure(
                    TransportFailure(
                        kind: .badResponse,
                        message: "cannot decode the response body: the \(unfinished) body ends before its coded stream does (cut short, or corrupt)"))
            )
        }
        let httpVersion: String
        switch Int32(version) {
        case PH_CURL_HTTP_VERSION_1_0: httpVersion = "HTTP/1.0"
        case PH_CURL_HTTP_VERSION_2_0: httpVersion = "HTTP/2"
        case PH_CURL_HTTP_VERSION_3: httpVersion = "HTTP/3"
        default: httpVersion = "HTTP/1.1"
        }
        let downloaded = download?.finish()
        download = nil
        var response = CurlResponse(
            status: status, url: url, httpVersion: httpVersion, headers: responseHeaders, data: data,
            downloadPath: downloaded, redirected: redirectCount > 0, method: method)
        response.credentialsLeftBehind = credentialsLeftBehind
        response.jarCookie = jarCookie
        response.metrics = metrics(easy)
        responseHeaders = []
        data = Data()
        return .finished(.success(response))
    }

    /// A proxy's refusal of the tunnel (a `CONNECT` answered with another status than `2xx` or
    /// an answered `407`), which libcurl reports as a failure to receive: `cannotConnect` for a
    /// `5xx` (the proxy could not reach the origin: retried as a refused connection is), `other`
    /// for the rest (a `403`: the proxy's policy, which sending again does not change), naming
    /// the status. Nil when the tunnel was made, or no proxy answered.
    private func tunnelRefusal(_ easy: UnsafeMutableRawPointer) -> TransportFailure? {
        var connectCode = 0
        ph_curl_easy_getinfo_long(easy, PH_CURLINFO_HTTP_CONNECTCODE, &connectCode)
        guard connectCode >= 300 else { return nil }
        return TransportFailure(
            kind: connectCode >= 500 ? .cannotConnect : .other,
            message: "the proxy refused the tunnel to \(tunnelTarget ?? "?"): its answer to CONNECT was \(connectCode)")
    }

    /// What libcurl sent the proxy for this hop: `CONNECT host:port` (an IPv6 host in brackets, a
    /// name past ASCII in IDNA's form, as the URL holds it: `percentEncodedHost` reads it back as
    /// percent-encoded UTF-8).
    private var tunnelTarget: String? {
        URLComponents(url: url, resolvingAgainstBaseURL: false)?.encodedHost.map {
            "\($0):\(url.port ?? URLParts.defaultPort(forScheme: url.scheme))"
        }
    }

    /// The proxy's `407` to the tunnel's `CONNECT` (an https URL through a proxy), with its
    /// challenge, as the response: the chain answers it in `Proxy-Authorization` as it answers a
    /// plain request's `407`, and the answer goes to the proxy (`CURLOPT_PROXYHEADER`). libcurl
    /// itself ends such a transfer with an error; nil for any other failure.
    private func proxyChallenge(_ easy: UnsafeMutableRawPointer) -> CurlResponse? {
        var connectCode = 0
        ph_curl_easy_getinfo_long(easy, PH_CURLINFO_HTTP_CONNECTCODE, &connectCode)
        guard connectCode == 407, responseHeaders.contains(where: { HTTPHeader.namesEqual($0.name, "Proxy-Authenticate") }) else { return nil }
        defer { responseHeaders = [] }
        var response = CurlResponse(
            status: 407, url: url, httpVersion: "HTTP/1.1", headers: responseHeaders, data: Data(), downloadPath: nil,
            redirected: redirectCount > 0, method: method)
        response.credentialsLeftBehind = credentialsLeftBehind
        response.metrics = metrics(easy)
        response.tunnelTarget = tunnelTarget
        return response
    }

    /// Whether a redirect from `from` to `to` goes through the same proxy, so that
    /// `Proxy-Authorization` (sent to the proxy alone) stays: always with one proxy URL
    /// configured; with the environment's proxies only for the same scheme (`http_proxy`,
    /// `https_proxy`: another scheme may go through another proxy, which must not get this
    /// one's credentials); without a proxy the field goes nowhere, and is dropped.
    static func keepsProxy(from: URL, to: URL, proxy: CurlTransport.Configuration.Proxy) -> Bool {
        switch proxy {
        case .url: return true
        case .environment: return from.scheme?.lowercased() == to.scheme?.lowercased()
        case .none: return false
        }
    }

    /// Maps libcurl's result code onto a ``TransportFailure``.
    static func failure(code: Int32, detail: String) -> TransportFailure {
        let message = detail.isEmpty ? (ph_curl_easy_strerror(code).map { String(cString: $0) } ?? "error") : detail
        let text = "\(message) (curl error \(code))"
        switch code {
        case PH_CURLE_OPERATION_TIMEDOUT:
            return TransportFailure(kind: .timedOut, message: text)
        case PH_CURLE_COULDNT_RESOLVE_PROXY, PH_CURLE_COULDNT_RESOLVE_HOST, PH_CURLE_COULDNT_CONNECT:
            return TransportFailure(kind: .cannotConnect, message: text)
        case PH_CURLE_PROXY:
            // A SOCKS proxy's handshake failed (it could not reach the host, say: an HTTP proxy's
            // refusal of a tunnel is read from its answer first, ``tunnelRefusal(_:)``).
            return TransportFailure(kind: .cannotConnect, message: text)
        case PH_CURLE_SEND_ERROR, PH_CURLE_RECV_ERROR, PH_CURLE_GOT_NOTHING, PH_CURLE_HTTP2_STREAM:
            // A TLS 1.3 server that refuses the client's certificate says so in an alert that
            // arrives after the handshake, as a read error.
            if message.contains("alert") {
                return TransportFailure(kind: .tlsHandshakeFailed, message: text)
            }
            return TransportFailure(kind: .connectionLost, message: text)
        case PH_CURLE_PARTIAL_FILE, PH_CURLE_WEIRD_SERVER_REPLY, PH_CURLE_BAD_CONTENT_ENCODING, PH_CURLE_HTTP2,
            PH_CURLE_TOO_MANY_REDIRECTS:
            return TransportFailure(kind: .badResponse, message: text)
        case PH_CURLE_PEER_FAILED_VERIFICATION, PH_CURLE_SSL_ISSUER_ERROR, PH_CURLE_SSL_INVALIDCERTSTATUS:
            return TransportFailure(kind: .serverCertificateUntrusted, message: text)
        case PH_CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return TransportFailure(kind: .publicKeyPinMismatch, message: text)
        case PH_CURLE_SSL_CONNECT_ERROR, PH_CURLE_SSL_CERTPROBLEM, PH_CURLE_SSL_CIPHER, PH_CURLE_SSL_CACERT_BADFILE,
            PH_CURLE_SSL_CLIENTCERT, PH_CURLE_SSL_ENGINE_NOTFOUND, PH_CURLE_SSL_CRL_BADFILE:
            return TransportFailure(kind: .tlsHandshakeFailed, message: text)
        case PH_CURLE_URL_MALFORMAT, PH_CURLE_UNSUPPORTED_PROTOCOL:
            return TransportFailure(kind: .other, message: "libcurl refused the URL: \(text)")
        case PH_CURLE_BAD_FUNCTION_ARGUMENT where message.contains("private key") || message.contains("certificate"):
            // libcurl 8.13 and later: a client key it cannot load from memory (a wrong passphrase)
            // ("unable to set private key file"); before, `SSL_CERTPROBLEM`.
            return TransportFailure(kind: .tlsHandshakeFailed, message: text)
        default:
            return TransportFailure(kind: .other, message: text)
        }
    }
}

// libcurl's callbacks: C function pointers, the call passed as user data.

private let curlWriteCallback: ph_curl_data_callback = { buffer, size, count, userdata in
    guard let buffer, let userdata else { return 0 }
    return Unmanaged<CurlCall>.fromOpaque(userdata).takeUnretainedValue().receiveBody(buffer, count: size * count)
}

private let curlHeaderCallback: ph_curl_data_callback = { buffer, size, count, userdata in
    guard let buffer, let userdata else { return 0 }
    return Unmanaged<CurlCall>.fromOpaque(userdata).takeUnretainedValue().receiveHeader(buffer, count: size * count)
}

private let curlReadCallback: ph_curl_data_callback = { buffer, size, count, userdata in
    guard let buffer, let userdata else { return Int(PH_CURL_READFUNC_ABORT) }
    return Unmanaged<CurlCall>.fromOpaque(userdata).takeUnretainedValue().readBody(buffer, count: size * count)
}

private let curlSeekCallback: ph_curl_seek_callback = { userdata, offset, origin in
    guard let userdata else { return PH_CURL_SEEKFUNC_FAIL }
    return Unmanaged<CurlCall>.fromOpaque(userdata).takeUnretainedValue().seekBody(offset: offset, origin: origin)
}

private let curlProgressCallback: ph_curl_xferinfo_callback = { userdata, _, _, total, uploaded in
    guard let userdata else { return 0 }
    return Unmanaged<CurlCall>.fromOpaque(userdata).takeUnretainedValue().progress(uploaded: uploaded, total: total)
}
