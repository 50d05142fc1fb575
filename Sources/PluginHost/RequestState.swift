import Foundation
import PluginSDK
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The host's mutable request during one attempt; what ``InterceptorRequest`` views.
final class RequestState: RequestBackend {
    private(set) var method: String
    private(set) var urlString: String
    private(set) var headers: [HTTPHeader]
    private(set) var bodyData: Data?
    private(set) var timeout: Double
    private let original: URLRequest

    init(_ request: URLRequest) {
        original = request
        method = request.httpMethod ?? "GET"
        urlString = request.url?.absoluteString ?? ""
        headers = (request.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { HTTPHeader(name: $0.key, value: $0.value) }
        bodyData = request.httpBody
        timeout = request.timeoutInterval
    }

    func setMethod(_ method: String) throws {
        try HeaderValidation.checkMethod(method)
        self.method = method
    }

    func setURL(_ string: String) throws {
        guard URLParts.isAbsoluteHTTP(string), URL(string: string) != nil else { throw InterceptorError.invalidURL(string) }
        urlString = string
    }

    func header(named name: String, index: Int) -> String? {
        var seen = 0
        for header in headers where header.name.caseInsensitiveCompare(name) == .orderedSame {
            if seen == index { return header.value }
            seen += 1
        }
        return nil
    }

    func setHeader(named name: String, value: String?) throws {
        try HeaderValidation.check(name: name, value: value)
        headers.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
        if let value { headers.append(HTTPHeader(name: name, value: value)) }
    }

    func addHeader(named name: String, value: String) throws {
        try HeaderValidation.check(name: name, value: value)
        headers.append(HTTPHeader(name: name, value: value))
    }

    var body: [UInt8]? { bodyData.map { [UInt8]($0) } }

    func setBody(_ body: [UInt8]?) { bodyData = body.map { Data($0) } }

    func setBodyData(_ data: Data?) { bodyData = data }

    func setTimeout(_ seconds: Double) { timeout = seconds }

    /// The request to send, keeping everything the views cannot change (cache policy, …).
    func makeURLRequest() -> URLRequest {
        var request = original
        request.url = URL(string: urlString)
        request.httpMethod = method
        request.allHTTPHeaderFields = [:]
        var written = Set<String>()
        for header in headers {
            let key = header.name.lowercased()
            if written.contains(key) {
                request.addValue(header.value, forHTTPHeaderField: header.name)
            } else {
                request.setValue(header.value, forHTTPHeaderField: header.name)
                written.insert(key)
            }
        }
        request.httpBody = bodyData
        request.timeoutInterval = timeout
        return request
    }
}

/// The host's mutable response during the response side of one attempt.
final class ResponseState: ResponseBackend {
    private(set) var statusCode: Int
    private(set) var headers: [HTTPHeader]
    private(set) var data: Data
    let fileURL: URL?
    private let url: URL?
    /// The transport's response, kept as long as no hook edits status or headers.
    private var original: HTTPURLResponse?

    init(_ response: TransportResponse) {
        original = response.response
        statusCode = response.response.statusCode
        headers = response.response.allHeaderFields.compactMap { key, value in
            guard let name = key as? String else { return nil }
            return HTTPHeader(name: name, value: "\(value)")
        }.sorted { $0.name < $1.name }
        data = response.data
        fileURL = response.fileURL
        url = response.response.url
    }

    init(_ synthetic: SyntheticResponse, url: URL?) {
        original = nil
        statusCode = synthetic.statusCode
        headers = synthetic.headers
        data = Data(synthetic.body)
        fileURL = nil
        self.url = url
    }

    func setStatusCode(_ code: Int) {
        statusCode = code
        original = nil
    }

    func header(named name: String, index: Int) -> String? {
        var seen = 0
        for header in headers where header.name.caseInsensitiveCompare(name) == .orderedSame {
            if seen == index { return header.value }
            seen += 1
        }
        return nil
    }

    func setHeader(named name: String, value: String?) throws {
        try HeaderValidation.check(name: name, value: value)
        headers.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
        if let value { headers.append(HTTPHeader(name: name, value: value)) }
        original = nil
    }

    func addHeader(named name: String, value: String) throws {
        try HeaderValidation.check(name: name, value: value)
        headers.append(HTTPHeader(name: name, value: value))
        original = nil
    }

    var body: [UInt8] { [UInt8](data) }

    func setBody(_ body: [UInt8]) { data = Data(body) }

    func setData(_ data: Data) { self.data = data }

    /// The `HTTPURLResponse` to hand to the app: the transport's own unless a hook edited it.
    func makeHTTPURLResponse(fallbackURL: URL?) -> HTTPURLResponse? {
        if let original { return original }
        var fields: [String: String] = [:]
        for header in headers {
            if let existing = fields.keys.first(where: { $0.caseInsensitiveCompare(header.name) == .orderedSame }) {
                fields[existing] = fields[existing]! + ", " + header.value
            } else {
                fields[header.name] = header.value
            }
        }
        guard let url = url ?? fallbackURL else { return nil }
        return HTTPURLResponse(url: url, statusCode: statusCode, httpVersion: "HTTP/1.1", headerFields: fields)
    }
}
