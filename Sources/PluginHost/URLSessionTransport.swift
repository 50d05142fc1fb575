import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The URL-loading ``Transport`` (the default on Darwin; ``CurlTransport`` is the default on Linux):
/// one `URLSession` with a delegate that routes callbacks to each call.
///
/// On a redirect to another scheme, host or port the `Authorization` and `Cookie` headers are
/// dropped, so credentials never follow a request to a server they were not meant for. A
/// request's ``TransportRequest/redirects`` policy is honoured up to 20 redirects (on Linux, URL loading
/// fails the 21st it follows itself, "more than 20 redirects", before the delegate is asked: a
/// policy allowing more needs ``CurlTransport``); without one, URLSession's own limit applies (20
/// for the redirects that keep a body, which the transport follows itself).
// Safe as @unchecked Sendable: both properties are set once; URLSession is thread-safe (though not
// marked Sendable in swift-corelibs-foundation).
public final class URLSessionTransport: Transport, @unchecked Sendable {
    private let session: URLSession
    let router: SessionRouter
    /// Whether a plain-http request goes through a proxy (``SessionProxy``), read at init.
    let proxy: SessionProxy

    /// The configuration's `timeoutIntervalForRequest`, which a provider gives each request that
    /// has no timeout of its own: URL loading uses it only for a request whose timeout was never
    /// set, and a request's timeout is set on the way (the chain takes the time its hooks spent
    /// off it), so the provider makes it the request's own from the start.
    public let requestTimeout: TimeInterval?

    /// Creates a transport with its own session built from `configuration`.
    ///
    /// On Linux the proxy URL loading uses for plain http (libcurl's `http_proxy`, `all_proxy` and
    /// `no_proxy`: see ``SessionProxy``) is read here from the environment: a request that goes to
    /// the origin directly is sent without `Proxy-Authorization`.
    public init(configuration: URLSessionConfiguration = .default) {
        requestTimeout = configuration.timeoutIntervalForRequest
        proxy = SessionProxy(environment: ProcessInfo.processInfo.environment)
        let router = SessionRouter(proxy: proxy)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "PluginHost.URLSessionTransport"
        self.router = router
        self.session = URLSession(configuration: configuration, delegate: router, delegateQueue: queue)
    }

    deinit {
        session.finishTasksAndInvalidate()
    }

    /// `gzip, deflate`: URLSession decodes both on every platform.
    public var acceptEncoding: String? { "gzip, deflate" }

    /// Sends `request` through the session.
    ///
    /// Every task reports through delegate callbacks, so the request's ``RequestLimits`` are
    /// checked as bytes arrive (a declared `Content-Length`, the body, the download, the header
    /// fields) and its deadline cancels it in time.
    public func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        // A body stream is read once per call into a file (as `CurlTransport` does), which each
        // send of the call (an answer to a challenge, a retry) uploads: the stream itself, read
        // already, sent an empty body, and URL loading sends a stream chunked.
        let spooled = try await SpooledBody.reading(request, named: true)
        if let spooled, spooled.path == nil {
            // Kept by an earlier send of the call through another transport (`CurlTransport`).
            throw TransportFailure(
                kind: .other,
                message: "the request's body stream was read into a file without a name by another transport "
                    + "(URLSessionTransport maps the file by its name): send every try of a call through one transport")
        }
        // The file goes to URL loading as data mapped from it: uploaded like any data body, its
        // size known (`expectContinueForALargeBody`). (URL loading on Linux copies a data body
        // into memory when it makes the task.)
        #if canImport(FoundationNetworking)
        var spooledData = try spooled.map { spooled throws(TransportFailure) in try Self.mapped(spooled.path!) }
        if case .file(let file) = request.body, let contents = try Self.inMemoryUpload(file) {
            spooledData = contents
        }
        #else
        let spooledData = try spooled.map { spooled throws(TransportFailure) in try Self.mapped(spooled.path!) }
        #endif
        var current = request
        var redirects = 0
        var credentialsLeftBehind = false
        while true {
            let call = SessionCall(request: current, spooledData: spooledData, redirects: redirects)
            var response = try await run(call, makeTask: makeTask(for: call)).get()
            // A redirect that keeps the body is followed here (`SessionRouter`'s redirection).
            guard let next = call.redirectToFollow else {
                response.credentialsLeftBehind = response.credentialsLeftBehind || credentialsLeftBehind
                return response
            }
            // Counted already, against the policy or the transport's limit (``SessionCall/mayRedirect()``).
            redirects = call.redirectCount
            if let from = current.url, !SessionRouter.sameOrigin(from, next.url) { credentialsLeftBehind = true }
            current = Self.following(current, to: next.url, method: next.method)
        }
    }

    /// `request` as sent again to where a redirect that kept its body leads
    /// (``TransportRequest/redirected(to:method:)``), without `Proxy-Authorization` when the
    /// scheme changes: URL loading takes its proxies from the environment, one per scheme, and
    /// another may go through another proxy, which must not get this one's credentials (as
    /// ``CurlTransport`` leaves them with the environment's proxies).
    static func following(_ request: TransportRequest, to url: URL, method: String) -> TransportRequest {
        var next = request.redirected(to: url, method: method)
        if url.scheme?.lowercased() != request.url?.scheme?.lowercased() {
            next.urlRequest.setValue(nil, forHTTPHeaderField: "Proxy-Authorization")
        }
        return next
    }

    /// Bodies from this size on wait for the server's `100 Continue` (on Linux).
    static let expectingBodyBytes = 16 << 10

    /// Sends a request whose body is at least ``expectingBodyBytes`` with `Expect: 100-continue`,
    /// unless it names its own `Expect`: the body goes once the server asks for it, and a server
    /// that answers at once (a `401`, a `307`) gets no body. URL loading on Linux
    /// (swift-corelibs-foundation 6.3, over libcurl) answered early while sending the body stopped
    /// sending it, then sent the next request on the same connection, where the server read it as
    /// the rest of that body: that request waited for its timeout (1 in 10 from 140 KB on
    /// loopback). Asking to close the connection instead made the early answer a broken pipe when
    /// the server closed first. A server that ignores `Expect` costs libcurl's wait of 1 s before
    /// it sends the body anyway. Darwin's URL loading is left alone.
    static func expectContinueForALargeBody(_ request: inout URLRequest, body: TransportRequest.Body, spooled: Data?) {
        #if canImport(FoundationNetworking)
        guard request.value(forHTTPHeaderField: "Expect") == nil else { return }
        let size: Int
        switch body {
        case .file(let url):
            size = spooled?.count ?? ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.intValue ?? Int.max
        case .upload, .inline:
            size = spooled?.count ?? request.httpBody?.count ?? 0
        }
        if size >= expectingBodyBytes { request.setValue("100-continue", forHTTPHeaderField: "Expect") }
        #endif
    }

    /// The most bytes of an upload file that go to URL loading on Linux as data read into memory
    /// (``inMemoryUpload(_:)``); a larger file goes as a file.
    public static let inMemoryUploadFileBytes = 64 << 20

    /// The contents of an upload file of at most ``inMemoryUploadFileBytes``, read whole (the file
    /// is read up to the size it had when opened); nil for a larger one, which URL loading is
    /// given as a file. Given a file, URL loading on Linux (swift-corelibs-foundation 6.3) reads
    /// it ahead on a queue of its own, and a read that ends after the exchange did (a server
    /// that answered before taking the body: a `401`, a `413`) resumes a transfer libcurl has let
    /// go: with libcurl 8 that stops the process (a `try!` on curl error 43). Read, not mapped:
    /// a mapped file someone else shortens while it is sent would stop the process (`SIGBUS`).
    ///
    /// - Throws: `other`, naming the file, when it cannot be read or is not a regular file.
    static func inMemoryUpload(_ file: URL) throws(TransportFailure) -> Data? {
        func failure(_ reason: String) -> TransportFailure {
            TransportFailure(kind: .other, message: "cannot read the upload file \(file.path): \(reason)")
        }
        // Without blocking: a FIFO opens at once, and is refused below.
        let fd = open(file.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { throw failure("not a regular file") }
        let size = Int(status.st_size)
        guard size <= inMemoryUploadFileBytes else { return nil }
        var contents = Data(count: size)
        var filled = 0
        while filled < size {
            let got = contents.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, size - filled) }
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else { throw failure(String(cString: strerror(errno))) }
            // Shortened since it was opened: what is there goes.
            if got == 0 { break }
            filled += got
        }
        return filled == size ? contents : contents.prefix(filled)
    }

    /// The file at `path`, mapped into memory.
    static func mapped(_ path: String) throws(TransportFailure) -> Data {
        do {
            return try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        } catch {
            throw TransportFailure(kind: .other, message: "cannot read \(path): \(error.localizedDescription)")
        }
    }

    /// The most redirects followed without a ``TransportRequest/redirects`` policy, by URL loading and
    /// by the transport together (URL loading's own limit, which counts one task's).
    static let redirectLimit = 20

    /// Makes `call`'s task. A download is a data task whose body the call writes to a file of
    /// its own: URL loading's download task on Linux writes to a temporary file of its own, goes
    /// on writing long after a limit cancelled it (gigabytes on loopback) and never removes it.
    private func makeTask(for call: SessionCall) -> @Sendable () -> URLSessionTask {
        { [session, router, proxy] in
            let request = call.request
            var urlRequest = Self.sessionRequest(request, proxy: proxy)
            Self.expectContinueForALargeBody(&urlRequest, body: request.body, spooled: call.spooledData)
            let task: URLSessionTask
            switch request.body {
            case _ where call.spooledData != nil:
                var bare = urlRequest
                bare.httpBodyStream = nil
                task = session.uploadTask(with: bare, from: call.spooledData!)
            case .file(let url):
                task = session.uploadTask(with: urlRequest, fromFile: url)
            case .upload:
                var bare = urlRequest
                let body = bare.httpBody ?? Data()
                bare.httpBody = nil
                task = session.uploadTask(with: bare, from: body)
            case .inline:
                task = session.dataTask(with: urlRequest)
            }
            router.register(call, for: task)
            return task
        }
    }

    /// The `URLRequest` to hand to the session. On Linux its timeout is made whole seconds,
    /// rounded up (0.25 s is 1 s), and a timeout that is no positive finite number of seconds
    /// (0, negative, NaN, infinite), or more than a billion (31 years), becomes a billion: none in
    /// effect, as ``CurlTransport`` reads it. (swift-corelibs-foundation takes `Int(seconds) * 1000`
    /// milliseconds: that traps for NaN, infinity or more than about 9×10¹⁵ seconds, and times out
    /// at once below one second.) `Proxy-Authorization` goes only where a proxy gets it
    /// (``dropProxyCredentials(_:proxy:)``).
    static func sessionRequest(_ request: TransportRequest, proxy: SessionProxy) -> URLRequest {
        var urlRequest = request.urlRequest
        #if canImport(FoundationNetworking)
        let timeout = request.timeoutInterval
        let taken = timeout > 0 ? min(timeout.rounded(.up), 1e9) : 1e9
        if taken != timeout { urlRequest.timeoutInterval = taken }
        #endif
        dropProxyCredentials(&urlRequest, proxy: proxy)
        return urlRequest
    }

    /// Leaves `Proxy-Authorization` out of a request that would carry it to the origin: an https
    /// one (URL loading sends the request's own fields to the origin, inside a proxy's tunnel too:
    /// libcurl under swift-corelibs-foundation keeps them from the `CONNECT`; Apple's reserves the
    /// field), and on Linux a plain-http one that goes to the origin directly (no HTTP proxy in
    /// the environment, a SOCKS one, or one `no_proxy` exempts it from: ``SessionProxy``). Over plain http through a proxy it goes to the proxy, which
    /// takes the whole request. (``CurlTransport`` sends the field to the proxy only, on both.)
    static func dropProxyCredentials(_ request: inout URLRequest, proxy: SessionProxy) {
        guard let url = request.url else { return }
        switch url.scheme?.lowercased() {
        case "https": break
        #if canImport(FoundationNetworking)
        case "http" where !proxy.proxies(url): break
        #endif
        default: return
        }
        request.setValue(nil, forHTTPHeaderField: "Proxy-Authorization")
    }

    /// Starts `call`'s task and waits for it, cancelling it with the request or the calling task.
    private func run(
        _ call: SessionCall, makeTask: @escaping @Sendable () -> URLSessionTask
    ) async -> Result<TransportResponse, TransportFailure> {
        let request = call.request
        let registration = request.cancellation?.onCancel { call.cancel() }
        defer { request.cancellation?.removeHandler(registration) }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                call.start(continuation: continuation, makeTask: makeTask)
            }
        } onCancel: {
            call.cancel()
        }
    }
}

/// State of one call: collects the body, reports progress, resumes its continuation once.
final class SessionCall: Sendable {
    let request: TransportRequest
    /// The file a body stream was read into, mapped: what the task uploads.
    let spooledData: Data?
    private struct State {
        var continuation: CheckedContinuation<Result<TransportResponse, TransportFailure>, Never>?
        var task: URLSessionTask?
        var cancelled = false
        var data = Data()
        /// Where a download's body goes while it arrives.
        var download: PartialDownload?
        var received: Int64 = 0
        var challenged: HTTPURLResponse?
        /// Redirects followed (by earlier calls of the send too).
        var redirects = 0
        /// A redirect that keeps the body, left to the transport to follow (``follow(_:)``).
        var follow: (url: URL, method: String)?
        /// Whether a redirect URL loading followed went to another origin (``leaveCredentials()``).
        var credentialsLeftBehind = false
        /// Set when a limit, the deadline or a download that cannot be written stopped the task.
        var limitFailure: TransportFailure?
    }
    private let state = Locked(State())

    init(request: TransportRequest, spooledData: Data? = nil, redirects: Int = 0) {
        self.request = request
        self.spooledData = spooledData
        state.withLock { $0.redirects = redirects }
    }

    /// Stops the task because of `failure` (a limit, the deadline, a download that cannot be
    /// written); the first reason wins. The call ends at once, with the partial download removed:
    /// URL loading on Linux honours a cancellation only when its work queue gets to it, seconds
    /// later under a fast transfer, and whatever arrives meanwhile is dropped.
    func stop(_ failure: TransportFailure) {
        end(failure, cancelled: false)
    }

    /// Ends the call with `failure` where URL loading asks whether to follow a redirect: the
    /// task is not cancelled (the delegate's answer, no redirect, ends it; a cancellation that
    /// reached URL loading's work queue before that answer stopped the process there).
    func refuseRedirect(_ failure: TransportFailure) {
        end(failure, cancelled: false, cancellingTask: false)
    }

    /// Ends the call with `failure` (marked a cancellation, or a limit's), unless it ended
    /// already: removes the partial download, resumes the caller, then cancels the task. Before
    /// `start` took the continuation, it finds the call ended and says so itself; before the
    /// task is made, `start` does not resume it.
    private func end(_ failure: TransportFailure, cancelled: Bool, cancellingTask: Bool = true) {
        let task = state.withLock { state -> URLSessionTask?? in
            guard state.limitFailure == nil, !state.cancelled else { return nil }
            if cancelled { state.cancelled = true } else { state.limitFailure = failure }
            state.download?.remove()
            state.download = nil
            return .some(state.task)
        }
        guard let task else { return }
        finish(.failure(failure))
        if let task, cancellingTask { Self.cancel(task) }
    }

    /// Cancels `task` from a thread of its own. URL loading on Linux (swift-corelibs-foundation
    /// 6.3) cancels on its work queue synchronously, and a fast transfer holds that queue for
    /// seconds, up to a minute: the caller (the delegate queue, a thread of the concurrency pool)
    /// would wait that long, and with it every other call's callbacks, or the pool.
    static func cancel(_ task: URLSessionTask) {
        let held = HeldTask(task: task)
        DispatchQueue.global().async { held.task.cancel() }
    }

    /// A task handed to the thread that cancels it.
    private struct HeldTask: @unchecked Sendable {
        let task: URLSessionTask
    }

    /// Checks a response's header fields and declared length; false when the task must stop.
    func accept(_ response: HTTPURLResponse) -> Bool {
        let limits = request.limits
        var bytes = 0
        var fields = 0
        for (name, value) in response.allHeaderFields {
            fields += 1
            bytes += "\(name)".utf8.count + "\(value)".utf8.count + 2
        }
        if fields > limits.maxHeaderFields {
            stop(LimitFailure.headerFields(fields, limit: limits.maxHeaderFields))
            return false
        }
        if bytes > limits.maxHeaderBytes {
            stop(LimitFailure.headerBytes(bytes, limit: limits.maxHeaderBytes))
            return false
        }
        // A 1xx, 204, 304 or other 3xx has no body to count: a 304 may declare the length a 200
        // would have had (RFC 9110 §8.6), as CurlTransport reads it.
        let status = response.statusCode
        let bodiless = status < 200 || status == 204 || (300..<400).contains(status)
        return checkLength(received: 0, expected: bodiless ? -1 : response.expectedContentLength)
    }

    /// Checks a declared length and the bytes received against the body's limit (or the
    /// download's); false when the task must stop.
    @discardableResult
    func checkLength(received: Int64, expected: Int64) -> Bool {
        let download = request.download != nil
        guard let limit = bodyLimit else { return true }
        if expected > limit, request.urlRequest.httpMethod?.uppercased() != "HEAD" {
            stop(LimitFailure.declared(expected, limit: limit, download: download))
            return false
        }
        if received > limit {
            stop(LimitFailure.body(received, limit: limit, download: download))
            return false
        }
        return true
    }

    /// The most body bytes the call takes: the download's limit for a download (nil: none).
    private var bodyLimit: Int64? { request.download != nil ? request.limits.maxDownloadBytes : request.limits.maxResponseBytes }

    /// Creates the task with `makeTask` and resumes it, unless the call was already cancelled.
    ///
    /// URL loading on Linux (swift-corelibs-foundation 6.3) makes and resumes a task synchronously
    /// on the session's work queue, which a fast transfer holds for seconds: that is done on a
    /// Dispatch thread, never on the concurrency pool, whose few threads would wait with it.
    func start(
        continuation: CheckedContinuation<Result<TransportResponse, TransportFailure>, Never>,
        makeTask: @escaping @Sendable () -> URLSessionTask
    ) {
        let cancelledEarly = state.withLock { state -> Bool in
            state.continuation = continuation
            return state.cancelled
        }
        if cancelledEarly {
            finish(.failure(TransportFailure(kind: .cancelled, message: "cancelled before it started")))
            return
        }
        if request.download != nil {
            do {
                var download = try PartialDownload()
                // Stopped or cancelled meanwhile: nothing will remove it later.
                let kept = state.withLock { state -> Bool in
                    guard !state.cancelled, state.limitFailure == nil else { return false }
                    state.download = download
                    return true
                }
                if !kept { download.remove() }
            } catch {
                finish(.failure(error))
                return
            }
        }
        if let deadline = request.deadline {
            DispatchQueue.global().asyncAfter(deadline: deadline.instant) { [weak self] in
                self?.stop(LimitFailure.deadline(deadline.seconds))
            }
        }
        DispatchQueue.global().async { [self] in
            let task = makeTask()
            let stopped = state.withLock { state -> Bool in
                state.task = task
                return state.cancelled || state.limitFailure != nil
            }
            guard !stopped else {
                // Cancelled, or out of time, while the task was being made (which ended the call
                // already): never resumed.
                task.cancel()
                return
            }
            task.resume()
        }
    }

    /// Cancels the task; the call ends at once (see ``stop(_:)``), unless it already ended.
    func cancel() {
        end(TransportFailure(kind: .cancelled, message: "cancelled"), cancelled: true)
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Whether the redirected request `next` sends a body, which the transport then sends itself:
    /// URL loading on Linux sends such a redirect (a `307` or `308` of a `POST`, say) with an
    /// empty body, whatever the body was (on Darwin too, so both behave alike).
    func keepsBody(_ next: URLRequest) -> Bool {
        let method = next.httpMethod?.uppercased() ?? "GET"
        guard method != "GET", method != "HEAD" else { return false }
        switch request.body {
        case .file, .upload: return true
        case .inline: return spooledData != nil || request.urlRequest.httpBody?.isEmpty == false
        }
    }

    /// Leaves `next` to the transport to send (with the body again) once this task delivers its `3xx`.
    func follow(_ next: URLRequest) {
        guard let url = next.url else { return }
        state.withLock { $0.follow = (url, next.httpMethod?.uppercased() ?? "GET") }
    }

    /// Notes that a redirect went to another origin, and the request's credentials were left
    /// behind (``TransportResponse/credentialsLeftBehind``).
    func leaveCredentials() {
        state.withLock { $0.credentialsLeftBehind = true }
    }

    /// The redirect the transport follows itself (``follow(_:)``), once the call has ended.
    var redirectToFollow: (url: URL, method: String)? { state.withLock { $0.follow } }

    /// Redirects followed so far.
    var redirectCount: Int { state.withLock { $0.redirects } }

    /// Counts a redirect; false when the request's policy allows no more (the `3xx` is then
    /// delivered), or, without a policy, when more than ``URLSessionTransport/redirectLimit``
    /// would be followed in all, by URL loading and by the transport together (the call then
    /// fails: URL loading's own limit counts one task's redirects only).
    func mayRedirect() -> Bool {
        let counted = state.withLock { state -> Bool? in
            if let policy = request.redirects {
                guard state.redirects < policy.maxRedirects else { return false }
            } else if state.redirects >= URLSessionTransport.redirectLimit {
                return nil
            }
            state.redirects += 1
            return true
        }
        guard let counted else {
            refuseRedirect(Self.tooManyRedirects)
            return false
        }
        return counted
    }

    /// Takes a chunk of the body: kept in memory, or written to the download's file.
    func append(_ data: Data, expected: Int64) {
        let limit = bodyLimit
        enum Outcome {
            case kept(Int64)
            case tooLarge(Int64, limit: Int64)
            case unwritten(String)
        }
        let outcome = state.withLock { state -> Outcome? in
            guard state.limitFailure == nil, !state.cancelled else { return nil }
            let total = state.received + Int64(data.count)
            if let limit, total > limit { return .tooLarge(total, limit: limit) }
            if state.download != nil {
                guard state.download!.write(data) else { return .unwritten(state.download!.writeFailure) }
            } else {
                state.data.append(data)
            }
            state.received = total
            return .kept(total)
        }
        switch outcome {
        case nil:
            return
        case .kept(let received):
            request.progress?(TransferProgress(direction: .download, completedBytes: received, totalBytes: expected))
        case .tooLarge(let received, let limit):
            stop(LimitFailure.body(received, limit: limit, download: request.download != nil))
        case .unwritten(let message):
            stop(TransportFailure(kind: .other, message: message))
        }
    }

    /// Marks the call as answered by `response`: the cancellation that follows delivers it.
    func deliverChallenged(_ response: HTTPURLResponse) {
        state.withLock { $0.challenged = response }
    }

    func complete(task: URLSessionTask, error: Error?) {
        // The continuation is taken first, unless a cancellation or a limit came first (which
        // ends the call itself, right after setting its flag): one from here on finds the call
        // ended, and cannot report a failure while the download is being moved into place. The
        // download's file is closed: this function places or removes it.
        let (continuation, challenged, cancelled, limitFailure, downloaded, data, redirects, follow, left) = state.withLock { state in
            let ending = state.cancelled || state.limitFailure != nil
            defer {
                if !ending { state.continuation = nil }
                state.download = nil
            }
            return (
                ending ? nil : state.continuation, state.challenged, state.cancelled, state.limitFailure, state.download?.finish(),
                state.data, state.redirects, state.follow != nil, state.credentialsLeftBehind
            )
        }
        let result = outcome(task: task, error: error, challenged: challenged, cancelled: cancelled, limitFailure: limitFailure)
        guard let continuation else {
            // Ended (or ending) by a limit or a cancellation.
            if let downloaded { unlink(downloaded) }
            return
        }
        // A `3xx` the transport follows itself is not the download.
        guard case .success(var made) = result, !follow else {
            if let downloaded { unlink(downloaded) }
            continuation.resume(returning: result)
            return
        }
        // A challenge after redirects is answered where they led (the chain reads these).
        if redirects > 0 {
            made.redirected = true
            made.finalMethod = task.currentRequest?.httpMethod?.uppercased()
        }
        made.credentialsLeftBehind = left
        if let downloaded {
            // Nor is the answer to a challenge (the chain answers it, and the download comes then).
            guard challenged == nil, let destination = request.download else {
                unlink(downloaded)
                continuation.resume(returning: .success(made))
                return
            }
            do {
                made.fileURL = try destination.place(URL(fileURLWithPath: downloaded), response: made.response)
            } catch {
                unlink(downloaded)
                continuation.resume(
                    returning: .failure(TransportFailure(kind: .other, message: "cannot save the download: \(error.localizedDescription)")))
                return
            }
        } else {
            made.data = data
        }
        continuation.resume(returning: .success(made))
    }

    /// What the finished task means, before its body is attached.
    private func outcome(
        task: URLSessionTask, error: Error?, challenged: HTTPURLResponse?, cancelled: Bool, limitFailure: TransportFailure?
    ) -> Result<TransportResponse, TransportFailure> {
        if let limitFailure { return .failure(limitFailure) }
        if let challenged, !cancelled { return .success(TransportResponse(response: challenged, data: Data())) }
        if let error {
            let description = (error as NSError).localizedDescription
            if task.response == nil, description == "Out of memory" || description == "A value or data field grew larger than allowed" {
                // libcurl (under URL loading) refuses one header line over 100 KiB so: as out of
                // memory before 8.6, as too large from 8.6 on (curl error 100).
                let detail = description == "Out of memory" ? "out of memory" : "too large (curl error 100)"
                return .failure(LimitFailure.headerLine(detail, limits: request.limits))
            }
            return .failure(Self.failure(for: error, cancelled: cancelled))
        }
        guard let response = task.response as? HTTPURLResponse else {
            return .failure(TransportFailure(kind: .badResponse, message: "the server's answer is not an HTTP response"))
        }
        return .success(TransportResponse(response: response, data: Data()))
    }

    private func finish(_ result: Result<TransportResponse, TransportFailure>) {
        let continuation = state.withLock { state -> CheckedContinuation<Result<TransportResponse, TransportFailure>, Never>? in
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: result)
    }

    /// More redirects than ``URLSessionTransport/redirectLimit``, followed by URL loading and the
    /// transport together, or by URL loading in one task (its own limit).
    static let tooManyRedirects = TransportFailure(kind: .other, message: "more than \(URLSessionTransport.redirectLimit) redirects")

    /// Maps a URL loading error onto a ``TransportFailure``.
    static func failure(for error: Error, cancelled: Bool) -> TransportFailure {
        let nsError = error as NSError
        let message = nsError.localizedDescription
        if cancelled { return TransportFailure(kind: .cancelled, message: "cancelled") }
        guard nsError.domain == NSURLErrorDomain else { return TransportFailure(kind: .other, message: message) }
        switch nsError.code {
        case NSURLErrorCancelled:
            return TransportFailure(kind: .cancelled, message: message)
        case NSURLErrorTimedOut:
            return TransportFailure(kind: .timedOut, message: message)
        case NSURLErrorCannotConnectToHost, NSURLErrorCannotFindHost, NSURLErrorDNSLookupFailed,
            NSURLErrorNotConnectedToInternet:
            return TransportFailure(kind: .cannotConnect, message: message)
        case NSURLErrorNetworkConnectionLost:
            return TransportFailure(kind: .connectionLost, message: message)
        case NSURLErrorHTTPTooManyRedirects:
            return tooManyRedirects
        case NSURLErrorBadServerResponse, NSURLErrorCannotParseResponse, NSURLErrorZeroByteResource,
            NSURLErrorCannotDecodeContentData, NSURLErrorCannotDecodeRawData:
            return TransportFailure(kind: .badResponse, message: message)
        case NSURLErrorServerCertificateUntrusted, NSURLErrorServerCertificateHasBadDate, NSURLErrorServerCertificateHasUnknownRoot,
            NSURLErrorServerCertificateNotYetValid:
            return TransportFailure(kind: .serverCertificateUntrusted, message: message)
        case NSURLErrorSecureConnectionFailed, NSURLErrorClientCertificateRejected, NSURLErrorClientCertificateRequired:
            return TransportFailure(kind: .tlsHandshakeFailed, message: message)
        default:
            if nsError.code == NSURLErrorUnknown, let kind = curlKind(message) {
                return TransportFailure(kind: kind, message: "\(message) (URL error \(nsError.code))")
            }
            // swift-corelibs-foundation reports a body shorter than its Content-Length as an
            // unknown error with curl's message: "transfer closed with N bytes remaining to read"
            // (libcurl 7), "end of response with N bytes missing" (libcurl 8).
            if message.contains("transfer closed with") || message.contains("bytes remaining")
                || (message.hasPrefix("end of response with") && message.hasSuffix("bytes missing"))
            {
                return TransportFailure(kind: .badResponse, message: message)
            }
            return TransportFailure(kind: .other, message: "\(message) (URL error \(nsError.code))")
        }
    }

    /// The kind of a failure swift-corelibs-foundation reports as an unknown error with libcurl's
    /// message (it maps few of libcurl's codes): a certificate libcurl did not trust (code 60:
    /// "SSL certificate problem: …", "SSL: no alternative certificate subject name matches …"), a
    /// handshake that failed (35: "OpenSSL SSL_connect: …", "TLS connect error: …"; 77, a trust
    /// store it cannot read), a connection
    /// nothing accepted for another reason than a refusal (7: "Failed to connect to …", an
    /// unreachable host), or one that broke (55, 56: "Send failure: …", "Recv failure: …",
    /// "OpenSSL SSL_read: …", "OpenSSL SSL_write: …"); nil for
    /// another message.
    static func curlKind(_ message: String) -> TransportFailureKind? {
        if message.hasPrefix("SSL certificate problem") || message.hasPrefix("SSL: no alternative certificate subject name")
            || message.hasPrefix("SSL: certificate subject name") || message.hasPrefix("SSL peer certificate")
        {
            return .serverCertificateUntrusted
        }
        // A trust store libcurl cannot read (code 77: "error setting certificate verify locations",
        // "error adding trust anchors from file: …", libcurl 8.12's "error setting certificate
        // file: …") is a TLS setup failure, as ``CurlTransport`` counts it.
        if message.hasPrefix("OpenSSL SSL_connect") || message.hasPrefix("TLS connect error") || message.hasPrefix("SSL connect error")
            || message.hasPrefix("error setting certificate verify locations") || message.hasPrefix("error adding trust anchors")
            || message.hasPrefix("error setting certificate file")
        {
            return .tlsHandshakeFailed
        }
        if message.hasPrefix("Failed to connect to") || message.hasPrefix("Couldn't connect to server") { return .cannotConnect }
        if message.hasPrefix("Send failure") || message.hasPrefix("Recv failure") || message.hasPrefix("OpenSSL SSL_read")
            || message.hasPrefix("OpenSSL SSL_write") || message.hasPrefix("Failure when receiving data from the peer")
            || message.hasPrefix("Failed sending data to the peer")
        {
            return .connectionLost
        }
        return nil
    }
}

/// The session delegate: finds the ``SessionCall`` of each task.
// Safe as @unchecked Sendable: an NSObject subclass (not checkable) whose state, `calls`, is
// locked, beside a constant.
final class SessionRouter: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let calls = Locked([Int: SessionCall]())
    /// The transport's proxy, for the requests URL loading makes when it follows a redirect.
    let proxy: SessionProxy

    init(proxy: SessionProxy) {
        self.proxy = proxy
    }

    func register(_ call: SessionCall, for task: URLSessionTask) {
        calls.withLock { $0[task.taskIdentifier] = call }
    }

    func unregister(_ identifier: Int) {
        _ = calls.withLock { $0.removeValue(forKey: identifier) }
    }

    /// Calls still registered (for tests of leaks).
    var registeredCount: Int { calls.withLock { $0.count } }

    private func call(for task: URLSessionTask) -> SessionCall? {
        calls.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        if let http = response as? HTTPURLResponse, let call = call(for: dataTask), !call.accept(http) {
            completionHandler(.cancel)
            return
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        call(for: dataTask)?.append(data, expected: Self.decodedTotal(of: dataTask.response))
    }

    /// The body's length for download progress, or -1 when unknown: a body in a content coding is
    /// handed over decoded, and its `Content-Length` counts the coded bytes, which URL loading does
    /// not count for us (decoded bytes against it would say `completed` too early).
    static func decodedTotal(of response: URLResponse?) -> Int64 {
        guard let response else { return -1 }
        if let http = response as? HTTPURLResponse, let coding = http.value(forHTTPHeaderField: "Content-Encoding"),
            !coding.allSatisfy({ $0 == " " || $0 == "\t" }), coding.lowercased() != "identity"
        {
            return -1
        }
        return response.expectedContentLength
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64, totalBytesExpectedToSend: Int64
    ) {
        call(for: task)?.request.progress?(
            TransferProgress(direction: .upload, completedBytes: totalBytesSent, totalBytes: totalBytesExpectedToSend))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let call = calls.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        call?.complete(task: task, error: error)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let call = call(for: task)
        guard let hop = Self.hop(response, proposed: request, from: task.currentRequest) else {
            completionHandler(nil)
            return
        }
        if let call, !call.mayRedirect() {
            completionHandler(nil)
            return
        }
        // The transport sends it, body and all, once this task delivers the `3xx`.
        if let call, call.keepsBody(hop) {
            call.follow(hop)
            completionHandler(nil)
            return
        }
        var next = hop
        if let from = task.originalRequest?.url, let to = hop.url, !Self.sameOrigin(from, to) {
            for name in Self.fieldsOfTheFirstOrigin { next.setValue(nil, forHTTPHeaderField: name) }
            call?.leaveCredentials()
            // URL loading keeps the user of the URL redirected from when `Location` names
            // another host only (`//host/path`).
            next.url = to.withoutUserInfo
        }
        // A body left behind (a `POST` turned into a `GET`) leaves its fields (RFC 9110
        // §15.4); URL loading drops the body alone.
        let before = task.currentRequest?.httpMethod?.uppercased() ?? "GET"
        if ["GET", "HEAD"].contains(next.httpMethod?.uppercased() ?? "GET"), !["GET", "HEAD"].contains(before) {
            for name in (next.allHTTPHeaderFields ?? [:]).keys where Self.isContentField(name) { next.setValue(nil, forHTTPHeaderField: name) }
        }
        URLSessionTransport.dropProxyCredentials(&next, proxy: proxy)
        completionHandler(next)
    }

    /// HTTP authentication is answered by the interceptor chain, not by URL loading: a
    /// challenged response is delivered as it is (e.g. a `401`), so behaviour is the same on
    /// every platform. (swift-corelibs-foundation also hangs under default handling of a
    /// `401` with `WWW-Authenticate`.) Server trust keeps the system's default handling.
    func urlSession(
        _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
        let method = challenge.protectionSpace.authenticationMethod
        guard
            method == NSURLAuthenticationMethodHTTPBasic || method == NSURLAuthenticationMethodHTTPDigest
                || method == NSURLAuthenticationMethodDefault,
            let response = (challenge.failureResponse ?? task.response) as? HTTPURLResponse,
            let call = call(for: task)
        else {
            completionHandler(.performDefaultHandling, nil)
            return
        }
        call.deliverChallenged(response)
        completionHandler(.cancelAuthenticationChallenge, nil)
    }

    /// The request a redirect leads to, made as ``CurlTransport`` makes it from URL loading's
    /// `proposed` one; nil when the `3xx` is delivered instead. URL loading on Linux
    /// (swift-corelibs-foundation 6.3) puts a relative `Location` at the root of the origin,
    /// percent-decoded (`next` from `/a/b` went to `/next`, `?page=2` to `/?page=2`), follows `305`
    /// and `306` too, turns a `HEAD` answered with a `303` into a `GET`, and leads to any scheme
    /// it has a protocol for (a body kept by a `307` went to `ftp://` as an upload). Here only
    /// `301`, `302`, `303`, `307` and `308` are followed, to `http` or `https`, with `Location`
    /// resolved against the URL redirected from (RFC 3986); a `HEAD` stays a `HEAD`, and a `POST`
    /// becomes a `GET` after a `301`, `302` or `303`.
    static func hop(_ response: HTTPURLResponse, proposed: URLRequest, from current: URLRequest?) -> URLRequest? {
        let location = response.allHeaderFields.first(where: { ($0.key as? String)?.lowercased() == "location" })?.value as? String
        let before = current?.httpMethod?.uppercased() ?? "GET"
        guard let next = redirect(status: response.statusCode, location: location, from: response.url ?? current?.url, method: before) else {
            return nil
        }
        var request = proposed
        request.url = next.url
        if request.httpMethod?.uppercased() ?? "GET" != next.method { request.httpMethod = next.method }
        return request
    }

    /// Where a redirect leads, as both transports follow one: only a `301`, `302`, `303`, `307`
    /// or `308` with a `location`, resolved against `url` (RFC 3986), to `http` or `https`; nil
    /// when the `3xx` is delivered instead. `becomesGET`: a `303` turns any method but `HEAD`
    /// into `GET`, a `301` or `302` a `POST` (the body and its fields are left behind).
    static func redirect(status: Int, location: String?, from url: URL?, method: String) -> (url: URL, method: String, becomesGET: Bool)? {
        guard [301, 302, 303, 307, 308].contains(status), let location,
            let next = URL(string: location, relativeTo: url)?.absoluteURL,
            let scheme = next.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else { return nil }
        let becomesGET = (status == 303 && method != "HEAD") || ((status == 301 || status == 302) && method == "POST")
        return (next, becomesGET ? "GET" : method, becomesGET)
    }

    /// The fields about a request's body, which a redirect that turns the request into a `GET`
    /// or `HEAD` leaves behind with the body (RFC 9110 §15.4), lower-cased.
    static let contentFields: Set<String> = [
        "content-type", "content-length", "content-encoding", "content-language", "content-location", "content-digest", "repr-digest",
        "digest", "content-md5", "last-modified",
    ]

    /// Whether `name` is one of ``contentFields``.
    static func isContentField(_ name: String) -> Bool { contentFields.contains(name.lowercased()) }

    /// The request's fields a redirect to another origin leaves behind (the credentials and
    /// cookies set for the first); the chain tells hooks the last hop went without them.
    static let fieldsLeftOnAnotherOrigin = ["Authorization", "Cookie"]
    /// The fields a hop to another origin goes without: the credentials and cookies
    /// (``fieldsLeftOnAnotherOrigin``), and a `Host` the caller set, which names the first origin
    /// (libcurl, following a redirect itself, sends a custom `Host` to the first host only).
    static let fieldsOfTheFirstOrigin = fieldsLeftOnAnotherOrigin + ["Host"]

    /// Whether `a` and `b` have one scheme, host and port. A host is compared as
    /// ``URLParts/lookupHost(_:)`` reads it (without case, a name past ASCII in IDNA's form,
    /// however the URL wrote it: `b%C3%BCcher.example` is `xn--bcher-kva.example`, the host the
    /// libcurl transport sends it to); addresses and trailing dots as written.
    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func port(_ url: URL) -> Int { url.port ?? URLParts.defaultPort(forScheme: url.scheme) }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host.map(URLParts.lookupHost) == b.host.map(URLParts.lookupHost)
            && port(a) == port(b)
    }
}

/// Whether URL loading on Linux sends a plain-http request through an HTTP proxy, read from the
/// environment as libcurl (under URL loading) reads it: swift-corelibs-foundation does not apply
/// a configuration's `connectionProxyDictionary`, so only the environment counts.
///
/// The proxy is `http_proxy` (lower-case only: libcurl refuses `HTTP_PROXY`, which a CGI request's
/// `Proxy:` header could set), else `all_proxy`, else `ALL_PROXY`; a variable set to nothing is
/// not set. A `socks4://`, `socks4a://`, `socks5://` or `socks5h://` proxy is a tunnel: the
/// request's fields reach the origin through it, so it counts as none here. `no_proxy` (else
/// `NO_PROXY`) exempts a host as libcurl 7.88's `Curl_check_noproxy` does: `*` alone exempts
/// every host; otherwise entries separated by commas or blanks, each compared with the host
/// (percent-decoded) without case, one leading and one trailing dot ignored, as the name itself
/// or a domain it is in (`example.com` covers `api.example.com`, not `nonexample.com`), and with
/// an IPv4 address (in any form a URL may write one: `127.1`) as an address or a network in CIDR
/// notation (`10.0.0.0/8`). Where libcurl's reading depends on its version or build, the host
/// counts as exempt, so the field is not sent (see ``exempts(_:host:)``).
struct SessionProxy: Sendable, Equatable {
    /// Whether the environment names an HTTP proxy for plain http.
    var httpProxy: Bool
    /// `no_proxy`, else `NO_PROXY`; nil when neither is set to something.
    var noProxy: String?

    /// The proxy settings `environment` gives libcurl.
    init(environment: [String: String]) {
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let proxy = variable("http_proxy") ?? variable("all_proxy") ?? variable("ALL_PROXY")
        // A proxy without a scheme is an HTTP one, as libcurl reads it.
        let scheme = proxy?.components(separatedBy: "://").dropLast().first?.lowercased()
        httpProxy = proxy != nil && !(scheme?.hasPrefix("socks") ?? false)
        noProxy = variable("no_proxy") ?? variable("NO_PROXY")
    }

    /// Whether a plain-http request to `url` goes through the proxy.
    func proxies(_ url: URL) -> Bool {
        guard httpProxy else { return false }
        // The host as libcurl compares it: percent-decoded.
        guard let noProxy, let host = url.host(percentEncoded: false) ?? url.host(percentEncoded: true), !host.isEmpty else { return true }
        return !Self.exempts(noProxy, host: host)
    }

    /// Whether the `no_proxy` value `list` exempts `host` (a name, an IPv4 address in any form a
    /// URL may write one, or an IPv6 address with or without its brackets). Where libcurl's
    /// reading cannot be known here, the host counts as exempt (the field is then not sent; a
    /// proxy that wants it asks with a `407`, which the chain answers): an IPv6 host matches an
    /// entry as a name (libcurl 7.88) or as an address (later versions), and a host of other than
    /// ASCII characters (sent as punycode) is exempt from a list that names anything.
    static func exempts(_ list: String, host: String) -> Bool {
        if list == "*" { return true }
        let tokens = list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
        var name = Substring(host)
        if name.hasPrefix("["), name.hasSuffix("]") { name = name.dropFirst().dropLast() }
        guard name.utf8.allSatisfy({ $0 < 0x80 }) else { return !tokens.isEmpty }
        if let quad = normalizedIPv4(name), let address = IPAddress(quad) {
            return tokens.contains { address.isIn(String($0)) }
        }
        let address = name.contains(":") ? IPAddress(String(name)) : nil
        if name.hasSuffix(".") { name = name.dropLast() }
        return tokens.contains { token in
            if let address, address.isIn(String(token)) { return true }
            var entry = token
            if entry.hasSuffix(".") { entry = entry.dropLast() }
            if entry.hasPrefix(".") { entry = entry.dropFirst() }
            guard !entry.isEmpty, entry.count <= name.count, name.suffix(entry.count).lowercased() == entry.lowercased() else { return false }
            return entry.count == name.count || name.dropLast(entry.count).hasSuffix(".")
        }
    }

    /// The dotted quad of an IPv4 address written as URL parsers (libcurl's too) read one: one to
    /// four parts, each decimal, octal (a leading `0`) or hexadecimal (`0x`), the last filling the
    /// bytes left (`127.1` and `0x7f000001` are 127.0.0.1); nil for anything else.
    static func normalizedIPv4(_ text: Substring) -> String? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count) else { return nil }
        var values: [UInt64] = []
        for part in parts {
            let value: UInt64?
            if part.count > 2, part.lowercased().hasPrefix("0x"), part.dropFirst(2).allSatisfy(\.isHexDigit) {
                value = UInt64(part.dropFirst(2), radix: 16)
            } else if part.count > 1, part.hasPrefix("0"), part.allSatisfy({ ("0"..."7").contains($0) }) {
                value = UInt64(part.dropFirst(), radix: 8)
            } else if part == "0" || (!part.hasPrefix("0") && !part.isEmpty && part.allSatisfy({ $0.isASCII && $0.isNumber })) {
                value = UInt64(part, radix: 10)
            } else {
                return nil
            }
            guard let value, value <= UInt64(UInt32.max) else { return nil }
            values.append(value)
        }
        let last = values.removeLast()
        guard values.allSatisfy({ $0 <= 0xff }), last >> (8 * (4 - values.count)) == 0 else { return nil }
        for shift in stride(from: 8 * (3 - values.count), through: 0, by: -8) { values.append((last >> UInt64(shift)) & 0xff) }
        return values.map(String.init).joined(separator: ".")
    }

    /// An IP address's bytes, for the comparison of `no_proxy` entries with it.
    struct IPAddress {
        let bytes: [UInt8]

        /// The address `text` spells (dotted IPv4, or IPv6); nil for anything else.
        init?(_ text: String) {
            guard let bytes = Self.parse(text) else { return nil }
            self.bytes = bytes
        }

        static func parse(_ text: String) -> [UInt8]? {
            var storage = [UInt8](repeating: 0, count: 16)
            let family = text.contains(":") ? AF_INET6 : AF_INET
            guard storage.withUnsafeMutableBytes({ inet_pton(family, text, $0.baseAddress) }) == 1 else { return nil }
            return family == AF_INET ? Array(storage.prefix(4)) : storage
        }

        /// Whether this address is the address `entry` names, or in the network it names as
        /// `address/bits` (bits 0, or all of them: the address alone).
        func isIn(_ entry: String) -> Bool {
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let network = Self.parse(String(parts[0])), network.count == bytes.count else { return false }
            var bits = parts.count > 1 ? Int(parts[1].prefix(while: \.isNumber)) ?? 0 : 0
            if bits == 0 { bits = bytes.count * 8 }
            guard bits <= bytes.count * 8 else { return false }
            let whole = bits / 8
            if bytes[..<whole] != network[..<whole] { return false }
            let rest = bits % 8
            guard rest > 0 else { return true }
            let mask = UInt8(truncatingIfNeeded: 0xff << (8 - rest))
            return bytes[whole] & mask == network[whole] & mask
        }
    }
}
