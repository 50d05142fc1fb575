import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Whether and how a provider stubs a target.
public enum StubBehavior: Sendable, Equatable {
    /// Send real requests.
    case never
    /// Answer from the sample response at once.
    case immediate
    /// Answer from the sample response after this many seconds.
    case delayed(seconds: Double)
}

/// A ``Transport`` that answers every request with a sample response, optionally after a delay.
///
/// Stubbed requests go through the same interceptor chain and validation as real ones.
public struct StubTransport: Transport {
    /// Seconds to wait before answering.
    public let delay: Double
    /// Produces the answer for a request.
    public let sample: @Sendable (URLRequest) -> EndpointSampleResponse
    /// The same answer without the request, when it does not read it (the provider's stubs): a
    /// request hooks changed is then never built as a URLRequest.
    private let answer: (@Sendable () -> EndpointSampleResponse)?

    /// Creates a stub transport.
    public init(delay: Double = 0, sample: @escaping @Sendable (URLRequest) -> EndpointSampleResponse) {
        self.delay = delay
        self.sample = sample
        self.answer = nil
    }

    /// A stub transport whose answer does not depend on the request.
    init(delay: Double = 0, answer: @escaping @Sendable () -> EndpointSampleResponse) {
        self.delay = delay
        self.sample = { _ in answer() }
        self.answer = answer
    }

    /// Answers `request` from ``sample``; cancellation during the delay throws a cancelled failure.
    public func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        if delay > 0, await !(request.cancellation ?? CancellationSignal()).sleep(seconds: delay) {
            throw TransportFailure(kind: .cancelled, message: "cancelled while the stub was waiting")
        }
        if Task.isCancelled || request.cancellation?.isCancelled == true {
            throw TransportFailure(kind: .cancelled, message: "cancelled")
        }
        let url = request.url ?? URL(string: "http://stub.invalid/")!
        let answer: TransportResponse
        switch self.answer?() ?? sample(request.urlRequest) {
        case .networkError(let failure):
            throw failure
        case .response(let given, let body):
            answer = TransportResponse(response: given, data: body)
        case .networkResponse(let status, let body):
            answer = try Self.response(url: url, status: status, headers: [:], body: body)
        case .networkResponseWithHeaders(let status, let fields, let body):
            answer = try Self.response(url: url, status: status, headers: fields, body: body)
        }
        let data = answer.data
        request.progress?(TransferProgress(direction: .download, completedBytes: Int64(data.count), totalBytes: Int64(data.count)))
        guard let destination = request.download else {
            return answer
        }
        let temporary = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-stub-\(UUID().uuidString)")
        do {
            try data.write(to: temporary)
            let placed = try destination.place(temporary, response: answer.response)
            return TransportResponse(response: answer.response, data: Data(), fileURL: placed)
        } catch {
            // Not placed (a directory there, say): the temporary file goes.
            try? FileManager.default.removeItem(at: temporary)
            throw TransportFailure(kind: .other, message: "cannot save the stub download: \(error.localizedDescription)")
        }
    }

    /// A response for a sample given as status and header fields (with a `Content-Length`).
    private static func response(url: URL, status: Int, headers: [String: String], body: Data) throws(TransportFailure) -> TransportResponse {
        var fields = headers
        if !fields.keys.contains(where: { HTTPHeader.namesEqual($0, "Content-Length") }) {
            fields["Content-Length"] = String(body.count)
        }
        guard let response = TransportResponse.made(url: url, statusCode: status, httpVersion: "HTTP/1.1", fields: fields, data: body) else {
            throw TransportFailure(kind: .badResponse, message: "cannot build a stub response for status \(status)")
        }
        return response
    }
}
