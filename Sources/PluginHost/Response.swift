import Foundation

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
    public let request: URLRequest?
    /// The HTTP response with its header fields.
    public let response: HTTPURLResponse?
    /// Where a download was saved.
    public let fileURL: URL?
    /// The protocol the response came over (`HTTP/1.1`, `HTTP/2`), when the transport reports it
    /// (``CurlTransport`` does; URLSession and stubs do not).
    public let httpVersion: String?
    /// Why a ``ResponsePipeline/mapServerError(_:when:atKeyPath:using:envelope:)`` step could not
    /// decode this response's body as the server's error type; set on the response of the
    /// ``NetworkError/statusCode(_:)`` error the step then keeps, and said in its description.
    public internal(set) var serverErrorDecodingFailure: String?

    /// Creates a response.
    public init(
        statusCode: Int, data: Data, request: URLRequest? = nil, response: HTTPURLResponse? = nil, fileURL: URL? = nil,
        httpVersion: String? = nil
    ) {
        self.statusCode = statusCode
        self.data = data
        self.request = request
        self.response = response
        self.fileURL = fileURL
        self.httpVersion = httpVersion
    }

    /// The value of a response header (case-insensitive).
    public func value(forHTTPHeaderField name: String) -> String? {
        response?.value(forHTTPHeaderField: name)
    }

    /// `METHOD URL` of the request, for messages.
    public var requestLine: String {
        "\(request?.httpMethod ?? "GET") \(request?.url?.absoluteString ?? "<no URL>")"
    }

    /// `Status Code: N, Data Length: N`.
    public var debugDescription: String {
        "Status Code: \(statusCode), Data Length: \(data.count)"
    }

    /// Compares status code, body, request and response.
    public static func == (lhs: Response, rhs: Response) -> Bool {
        lhs.statusCode == rhs.statusCode && lhs.data == rhs.data && lhs.request == rhs.request
            && lhs.response == rhs.response && lhs.fileURL == rhs.fileURL
    }
}
