import Foundation
import PluginSDK
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The default ``Transport``: one `URLSession` with a delegate that routes callbacks to each call.
///
/// On a redirect to another scheme, host or port the `Authorization` header is dropped,
/// so credentials never follow a request to a server they were not meant for.
public final class URLSessionTransport: Transport, @unchecked Sendable {
    private let session: URLSession
    private let router: SessionRouter

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

    /// Sends `request` through the session.
    public func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        let call = SessionCall(request: request)
        let result: Result<TransportResponse, TransportFailure> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                call.start(continuation: continuation) { [session, router] in
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
                }
            }
        } onCancel: {
            call.cancel()
        }
        return try result.get()
    }
}

/// State of one call: collects the body, reports progress, resumes its continuation once.
final class SessionCall: @unchecked Sendable {
    let request: TransportRequest
    private struct State {
        var continuation: CheckedContinuation<Result<TransportResponse, TransportFailure>, Never>?
        var task: URLSessionTask?
        var cancelled = false
        var data = Data()
        var fileURL: URL?
        var fileError: String?
        var received: Int64 = 0
    }
    private let state = Locked(State())

    init(request: TransportRequest) {
        self.request = request
    }

    /// Creates the task with `makeTask` and resumes it, unless the call was already cancelled.
    func start(continuation: CheckedContinuation<Result<TransportResponse, TransportFailure>, Never>,
               makeTask: () -> URLSessionTask) {
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

    func complete(task: URLSessionTask, error: Error?) {
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
            return TransportFailure(kind: .other, message: "\(message) (URL error \(nsError.code))")
        }
    }
}

/// The session delegate: finds the ``SessionCall`` of each task.
final class SessionRouter: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    private let calls = Locked([Int: SessionCall]())

    func register(_ call: SessionCall, for task: URLSessionTask) {
        calls.withLock { $0[task.taskIdentifier] = call }
    }

    private func call(for task: URLSessionTask) -> SessionCall? {
        calls.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        call(for: dataTask)?.append(data, expected: dataTask.response?.expectedContentLength ?? -1)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
                    totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        call(for: task)?.request.progress?(
            TransferProgress(direction: .upload, completedBytes: totalBytesSent, totalBytes: totalBytesExpectedToSend))
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
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

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        var next = request
        if let from = task.originalRequest?.url, let to = request.url, !Self.sameOrigin(from, to) {
            next.setValue(nil, forHTTPHeaderField: "Authorization")
        }
        completionHandler(next)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
                    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let space = challenge.protectionSpace
        guard let ask = call(for: task)?.request.challenge else {
            completionHandler(.performDefaultHandling, nil)
            return
        }
        let method: String
        switch space.authenticationMethod {
        case NSURLAuthenticationMethodHTTPBasic: method = "Basic"
        case NSURLAuthenticationMethodHTTPDigest: method = "Digest"
        #if canImport(Darwin)
        case NSURLAuthenticationMethodServerTrust: method = "ServerTrust"
        #endif
        default: method = space.authenticationMethod
        }
        let answer = ask(AuthenticationChallenge(host: space.host, port: space.port, scheme: space.protocol ?? "http",
                                                 realm: space.realm, method: method,
                                                 previousFailureCount: challenge.previousFailureCount))
        switch answer {
        case .performDefault:
            completionHandler(.performDefaultHandling, nil)
        case .useCredential(let user, let password):
            completionHandler(.useCredential, URLCredential(user: user, password: password, persistence: .forSession))
        case .rejectProtectionSpace:
            completionHandler(.rejectProtectionSpace, nil)
        case .cancel:
            completionHandler(.cancelAuthenticationChallenge, nil)
        }
    }

    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func port(_ url: URL) -> Int { url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80) }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased()
            && port(a) == port(b)
    }
}
