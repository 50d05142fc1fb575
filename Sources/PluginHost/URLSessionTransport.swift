import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The default ``Transport``: one `URLSession` with a delegate that routes callbacks to each call.
///
/// On a redirect to another scheme, host or port the `Authorization` header is dropped,
/// so credentials never follow a request to a server they were not meant for. A request's
/// ``TransportRequest/redirects`` policy is honoured; without one, URLSession's own limit applies.
// Safe as @unchecked Sendable: both properties are set once; URLSession is thread-safe (though not
// marked Sendable in swift-corelibs-foundation).
public final class URLSessionTransport: Transport, @unchecked Sendable {
    private let session: URLSession
    let router: SessionRouter

    /// Creates a transport with its own session built from `configuration`.
    public init(configuration: URLSessionConfiguration = .default) {
        let router = SessionRouter()
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
    /// A plain data request without a progress handler uses a completion-handler task (one
    /// callback in all); the others use delegate callbacks (progress, uploads, downloads). A
    /// completion-handler task that meets an authentication challenge is sent again with
    /// delegate callbacks, so the challenged response arrives with its body.
    public func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        if request.progress == nil, request.download == nil, case .inline = request.body {
            let call = SessionCall(request: request, completionHandler: true)
            let result = await run(call) { [session, router] in
                let identifier = Locked<Int?>(nil)
                let task = session.dataTask(with: request.urlRequest) { data, response, error in
                    if let id = identifier.withLock({ $0 }) { router.unregister(id) }
                    call.complete(data: data, response: response, error: error)
                }
                identifier.withLock { $0 = task.taskIdentifier }
                router.register(call, for: task)
                return task
            }
            if !call.wasChallenged { return try result.get() }
        }
        let call = SessionCall(request: request, completionHandler: false)
        return try await run(call) { [session, router] in
            let task: URLSessionTask
            switch (request.body, request.download) {
            case (_, .some):
                task = session.downloadTask(with: request.urlRequest)
            case (.file(let url), nil):
                task = session.uploadTask(with: request.urlRequest, fromFile: url)
            case (.upload, nil):
                var bare = request.urlRequest
                let body = bare.httpBody ?? Data()
                bare.httpBody = nil
                task = session.uploadTask(with: bare, from: body)
            case (.inline, nil):
                task = session.dataTask(with: request.urlRequest)
            }
            router.register(call, for: task)
            return task
        }.get()
    }

    /// Starts `call`'s task and waits for it, cancelling it with the request or the calling task.
    private func run(_ call: SessionCall, makeTask: @escaping () -> URLSessionTask) async -> Result<TransportResponse, TransportFailure> {
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
    /// Whether the task reports through a completion handler rather than delegate callbacks.
    let completionHandler: Bool
    private struct State {
        var continuation: CheckedContinuation<Result<TransportResponse, TransportFailure>, Never>?
        var task: URLSessionTask?
        var cancelled = false
        var data = Data()
        var fileURL: URL?
        var fileError: String?
        var received: Int64 = 0
        var challenged: HTTPURLResponse?
        var redirects = 0
    }
    private let state = Locked(State())

    init(request: TransportRequest, completionHandler: Bool) {
        self.request = request
        self.completionHandler = completionHandler
    }

    /// Whether an authentication challenge was met (the response is then delivered by a
    /// delegate-callback task, which keeps the body).
    var wasChallenged: Bool { state.withLock { $0.challenged != nil } }

    /// The completion handler of a completion-handler task.
    func complete(data: Data?, response: URLResponse?, error: Error?) {
        if wasChallenged {
            finish(.failure(TransportFailure(kind: .other, message: "challenged: sent again with delegate callbacks")))
            return
        }
        if let error {
            finish(.failure(Self.failure(for: error, cancelled: isCancelled)))
            return
        }
        guard let response = response as? HTTPURLResponse else {
            finish(.failure(TransportFailure(kind: .badResponse, message: "the server's answer is not an HTTP response")))
            return
        }
        finish(.success(TransportResponse(response: response, data: data ?? Data())))
    }

    /// Creates the task with `makeTask` and resumes it, unless the call was already cancelled.
    func start(
        continuation: CheckedContinuation<Result<TransportResponse, TransportFailure>, Never>,
        makeTask: () -> URLSessionTask
    ) {
        let cancelledEarly = state.withLock { state -> Bool in
            state.continuation = continuation
            return state.cancelled
        }
        if cancelledEarly {
            finish(.failure(TransportFailure(kind: .cancelled, message: "cancelled before it started")))
            return
        }
        let task = makeTask()
        let cancelledMeanwhile = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelledMeanwhile { task.cancel() }
        task.resume()
    }

    func cancel() {
        let task = state.withLock { state -> URLSessionTask? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Counts a redirect; false when the request's policy allows no more (the `3xx` is then delivered).
    func mayRedirect() -> Bool {
        guard let policy = request.redirects else { return true }
        return state.withLock { state in
            state.redirects += 1
            return state.redirects <= policy.maxRedirects
        }
    }

    func append(_ data: Data, expected: Int64) {
        let received = state.withLock { state -> Int64 in
            state.data.append(data)
            state.received += Int64(data.count)
            return state.received
        }
        request.progress?(TransferProgress(direction: .download, completedBytes: received, totalBytes: expected))
    }

    func downloaded(to location: URL, response: HTTPURLResponse) {
        guard let destination = request.download else { return }
        do {
            let placed = try destination.place(location, response: response)
            state.withLock { $0.fileURL = placed }
        } catch {
            state.withLock { $0.fileError = "cannot save the download: \(error.localizedDescription)" }
        }
    }

    /// Marks the call as answered by `response`: the cancellation that follows delivers it.
    func deliverChallenged(_ response: HTTPURLResponse) {
        state.withLock { $0.challenged = response }
    }

    func complete(task: URLSessionTask, error: Error?) {
        if completionHandler { return }
        let (challenged, cancelled) = state.withLock { ($0.challenged, $0.cancelled) }
        if let challenged, !cancelled {
            let data = state.withLock { $0.data }
            finish(.success(TransportResponse(response: challenged, data: data)))
            return
        }
        if let error {
            finish(.failure(Self.failure(for: error, cancelled: isCancelled)))
            return
        }
        guard let response = task.response as? HTTPURLResponse else {
            finish(.failure(TransportFailure(kind: .badResponse, message: "the server's answer is not an HTTP response")))
            return
        }
        let (data, fileURL, fileError) = state.withLock { ($0.data, $0.fileURL, $0.fileError) }
        if let fileError {
            finish(.failure(TransportFailure(kind: .other, message: fileError)))
        } else {
            finish(.success(TransportResponse(response: response, data: data, fileURL: fileURL)))
        }
    }

    private func finish(_ result: Result<TransportResponse, TransportFailure>) {
        let continuation = state.withLock { state -> CheckedContinuation<Result<TransportResponse, TransportFailure>, Never>? in
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: result)
    }

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
        case NSURLErrorBadServerResponse, NSURLErrorCannotParseResponse, NSURLErrorZeroByteResource,
            NSURLErrorCannotDecodeContentData, NSURLErrorCannotDecodeRawData:
            return TransportFailure(kind: .badResponse, message: message)
        default:
            // swift-corelibs-foundation reports a body shorter than its Content-Length as an
            // unknown error with curl's message ("transfer closed with N bytes remaining to read").
            if message.contains("transfer closed with") || message.contains("bytes remaining") {
                return TransportFailure(kind: .badResponse, message: message)
            }
            return TransportFailure(kind: .other, message: "\(message) (URL error \(nsError.code))")
        }
    }
}

/// The session delegate: finds the ``SessionCall`` of each task.
// Safe as @unchecked Sendable: an NSObject subclass (not checkable) whose only state, `calls`, is locked.
final class SessionRouter: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    private let calls = Locked([Int: SessionCall]())

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

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        call(for: dataTask)?.append(data, expected: dataTask.response?.expectedContentLength ?? -1)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64, totalBytesExpectedToSend: Int64
    ) {
        call(for: task)?.request.progress?(
            TransferProgress(direction: .upload, completedBytes: totalBytesSent, totalBytes: totalBytesExpectedToSend))
    }

    func urlSession(
        _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
        call(for: downloadTask)?.request.progress?(
            TransferProgress(direction: .download, completedBytes: totalBytesWritten, totalBytes: totalBytesExpectedToWrite))
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        guard let response = downloadTask.response as? HTTPURLResponse else { return }
        call(for: downloadTask)?.downloaded(to: location, response: response)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let call = calls.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        call?.complete(task: task, error: error)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        if let call = call(for: task), !call.mayRedirect() {
            completionHandler(nil)
            return
        }
        var next = request
        if let from = task.originalRequest?.url, let to = request.url, !Self.sameOrigin(from, to) {
            next.setValue(nil, forHTTPHeaderField: "Authorization")
        }
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

    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func port(_ url: URL) -> Int { url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80) }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased()
            && port(a) == port(b)
    }
}
