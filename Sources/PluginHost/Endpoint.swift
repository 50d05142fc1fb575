import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a stub answers with.
public enum EndpointSampleResponse: Sendable {
    /// A response with this status code and body.
    case networkResponse(Int, Data)
    /// A response with this status code, header fields and body.
    case networkResponseWithHeaders(Int, [String: String], Data)
    /// A transport failure (timeout, refused connection, …).
    case networkError(TransportFailure)
    /// The caller's own response (status, header fields and URL as given) with this body.
    case response(HTTPURLResponse, Data)
}

/// The intermediate value between a target and a `URLRequest`: immutable, so edits make copies.
///
/// A provider's endpoint closure maps each target to an endpoint; that is the place to add
/// headers to every request (``adding(newHTTPHeaderFields:)``) or swap the task
/// (``replacing(task:)``).
public struct Endpoint: Sendable {
    /// The full URL as a string.
    public let url: String
    /// Produces the stubbed answer.
    public let sampleResponseClosure: @Sendable () -> EndpointSampleResponse
    /// The HTTP method.
    public let method: HTTPMethod
    /// What the request carries.
    public let task: RequestTask
    /// Header fields.
    public let httpHeaderFields: [String: String]?
    /// Parameters appended to the query string (server defaults for tasks without parameters).
    let extraQueryParameters: Parameters
    /// The URL ``url`` was written from, when the provider made both from a target (and it has no
    /// base URL): the request takes it instead of parsing the string again.
    let madeURL: URL?

    /// Creates an endpoint.
    public init(
        url: String,
        sampleResponseClosure: @escaping @Sendable () -> EndpointSampleResponse,
        method: HTTPMethod,
        task: RequestTask,
        httpHeaderFields: [String: String]?
    ) {
        self.init(
            url: url, sampleResponseClosure: sampleResponseClosure, method: method, task: task,
            httpHeaderFields: httpHeaderFields, extraQueryParameters: [:], madeURL: nil)
    }

    init(
        url: String, sampleResponseClosure: @escaping @Sendable () -> EndpointSampleResponse, method: HTTPMethod,
        task: RequestTask, httpHeaderFields: [String: String]?, extraQueryParameters: Parameters, madeURL: URL?
    ) {
        self.url = url
        self.madeURL = madeURL
        self.sampleResponseClosure = sampleResponseClosure
        self.method = method
        self.task = task
        self.httpHeaderFields = httpHeaderFields
        self.extraQueryParameters = extraQueryParameters
    }

    /// A copy with `newHTTPHeaderFields` added; on a clash the new value wins. Adding nothing
    /// changes nothing (headers that were `nil` stay `nil`).
    public func adding(newHTTPHeaderFields: [String: String]) -> Endpoint {
        guard !newHTTPHeaderFields.isEmpty else { return self }
        var fields = httpHeaderFields ?? [:]
        for (name, value) in newHTTPHeaderFields {
            if let existing = fields.keys.first(where: { HTTPHeader.namesEqual($0, name) }) {
                fields.removeValue(forKey: existing)
            }
            fields[name] = value
        }
        return Endpoint(
            url: url, sampleResponseClosure: sampleResponseClosure, method: method, task: task,
            httpHeaderFields: fields, extraQueryParameters: extraQueryParameters, madeURL: madeURL)
    }

    /// A copy with `task` instead of the current task.
    public func replacing(task: RequestTask) -> Endpoint {
        Endpoint(
            url: url, sampleResponseClosure: sampleResponseClosure, method: method, task: task,
            httpHeaderFields: httpHeaderFields, extraQueryParameters: extraQueryParameters, madeURL: madeURL)
    }

    /// Builds the `URLRequest`: URL, method, headers, then the task's parameters or body.
    ///
    /// Throws ``NetworkError/requestMapping(_:)`` when ``url`` is not an absolute http(s) URL,
    /// ``NetworkError/invalidHeader(name:reason:)`` for a header field that cannot be sent or
    /// one given in two spellings (`X-Token` and `x-token`),
    /// ``NetworkError/parameterEncoding(_:)`` and ``NetworkError/encodableMapping(_:)`` when
    /// the task cannot be encoded, and ``NetworkError/fileAccess(path:reason:)`` for an
    /// unreadable multipart file.
    public func urlRequest() throws(NetworkError) -> URLRequest {
        try urlRequest(defaultHeaders: [:])
    }

    /// The refusal of the first field, by name, of `fields` that cannot be sent: a name that is
    /// no token, or a value holding CR, LF or NUL. Nil when every field can be.
    static func refusal(of fields: [String: String]) -> NetworkError? {
        for name in fields.keys.sorted() {
            if let refusal = refusal(name: name, value: fields[name]!) { return refusal }
        }
        return nil
    }

    /// The refusal of a name `fields` holds in two spellings or more (field names are
    /// case-insensitive), the first such by name; nil when there is none.
    static func repetition(in fields: [String: String]) -> NetworkError? {
        var spellings: [String: [String]] = [:]
        for name in fields.keys { spellings[name.lowercased(), default: []].append(name) }
        guard let repeated = spellings.filter({ $0.value.count > 1 }).min(by: { $0.key < $1.key }) else { return nil }
        let names = repeated.value.sorted()
        let others = names.dropFirst().map(\.debugDescription).joined(separator: " and ")
        return .invalidHeader(name: names[0], reason: "is given again as \(others) (field names are case-insensitive)")
    }

    /// The refusal of one field that cannot be sent; nil when it can be.
    static func refusal(name: String, value: String) -> NetworkError? {
        if !HeaderValidation.isValidName(name) { return .invalidHeader(name: name, reason: "is not a token (RFC 9110)") }
        if !HeaderValidation.isValidValue(value) { return .invalidHeader(name: name, reason: "has a value holding CR, LF or NUL") }
        return nil
    }

    /// The request, with `defaultHeaders` added where the endpoint has no field of that name.
    ///
    /// The fields are set in one assignment (setting them one by one re-validates and
    /// re-capitalises every field each time: the most expensive step of a small request). A
    /// field whose name is no token, or whose value holds CR, LF or NUL, is refused
    /// (``NetworkError/invalidHeader(name:reason:)``): `setValue(_:forHTTPHeaderField:)` would
    /// drop such a value silently, and a default field of the same name would take its place.
    func urlRequest(defaultHeaders: [String: String]) throws(NetworkError) -> URLRequest {
        // The host as written: its percent-decoded form, made anew on every read, is needed only
        // when it has an escape (one that does not decode, such as `%FF`, leaves no host). The
        // escape is looked for in the bytes: `String.contains(_:)` on a string is Foundation's
        // search, which costs more than the rest of the check.
        guard let requestURL = madeURL ?? URL(string: url), let scheme = requestURL.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = requestURL.host(percentEncoded: true), !host.isEmpty,
            !host.utf8.contains(UInt8(ascii: "%")) || requestURL.host != nil
        else {
            throw .requestMapping(url)
        }
        var request = URLRequest(url: requestURL)
        // GET is the default; setting it anyway costs a normalisation.
        if method != .get { request.httpMethod = method.rawValue }
        let own = httpHeaderFields ?? [:]
        if own.isEmpty {
            // Only the provider's fields, as the loop below would add them: no names to compare.
            if !defaultHeaders.isEmpty { request.allHTTPHeaderFields = defaultHeaders }
        } else {
            var fields: [String: String] = [:]
            var names = Set<String>()
            for (name, value) in own {
                guard HeaderValidation.isValidName(name), HeaderValidation.isValidValue(value) else {
                    // The first bad field by name, whatever the dictionary's order (`refusal(of:)`
                    // finds one whenever this check fails; this one is bad in any case).
                    throw Self.refusal(of: own) ?? Self.refusal(name: name, value: value)!
                }
                let lowered = name.lowercased()
                // One name twice, in two spellings: which value went depended on the dictionary's
                // order, which changes from one process to the next.
                if names.contains(lowered) { throw Self.refusal(of: own) ?? Self.repetition(in: own)! }
                fields[name] = value
                names.insert(lowered)
            }
            for (name, value) in defaultHeaders where !names.contains(name.lowercased()) {
                fields[name] = value
            }
            request.allHTTPHeaderFields = fields
        }
        request = try encodeTask(into: request)
        // URL loading labels a POST's body that has no Content-Type a form (on Darwin and in
        // swift-corelibs-foundation): labelled here, before the chain, the hooks see the field
        // and every transport sends it (libcurl labels only what it is told to).
        Self.labelForm(&request)
        if !extraQueryParameters.isEmpty, let current = request.url {
            do {
                request.url = URLEncoding.appendingQuery(try URLEncoding.queryString.checkedQuery(extraQueryParameters), to: current)
            } catch {
                throw .parameterEncoding(error)
            }
        }
        return request
    }

    /// Gives a `POST` whose body in memory has no `Content-Type` the form's, as URL loading does
    /// (the provider calls it again after the request closure, which may set a body). A body
    /// stream, like a file, goes as it is: both transports send it from a file.
    static func labelForm(_ request: inout URLRequest) {
        if request.httpMethod?.uppercased() == "POST", request.httpBody?.isEmpty == false,
            request.value(forHTTPHeaderField: "Content-Type") == nil
        {
            request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
        }
    }

    private func encodeTask(into request: URLRequest) throws(NetworkError) -> URLRequest {
        switch task {
        case .requestPlain, .uploadFile, .downloadDestination:
            return request
        case .requestData(let data):
            var request = request
            request.httpBody = data
            return request
        case .requestJSONEncodable(let value):
            return try Self.encodeJSON(value, encoder: JSONEncoder(), into: request)
        case .requestCustomJSONEncodable(let value, let encoder):
            return try Self.encodeJSON(value, encoder: encoder, into: request)
        case .requestParameters(let parameters, let encoding), .downloadParameters(let parameters, let encoding, _):
            return try Self.encode(parameters, with: encoding, into: request)
        case .requestCompositeData(let bodyData, let urlParameters):
            var request = try Self.encode(urlParameters, with: URLEncoding.queryString, into: request)
            request.httpBody = bodyData
            return request
        case .requestCompositeParameters(let bodyParameters, let bodyEncoding, let urlParameters):
            let method = (request.httpMethod ?? "GET").uppercased()
            if let urlEncoding = bodyEncoding as? URLEncoding, urlEncoding.encodesInQuery(method: method) {
                // The body parameters would silently land in the URL (and in every server log):
                // `URLEncoding.queryString`, or `URLEncoding.default` on a GET, HEAD or DELETE.
                throw .parameterEncoding(
                    CompositeBodyInQuery(method: method, destination: urlEncoding.destination))
            }
            let withQuery = try Self.encode(urlParameters, with: URLEncoding.queryString, into: request)
            return try Self.encode(bodyParameters, with: bodyEncoding, into: withQuery)
        case .uploadMultipart(let parts):
            return try Self.encodeMultipart(parts, into: request)
        case .uploadCompositeMultipart(let parts, let urlParameters):
            let withQuery = try Self.encode(urlParameters, with: URLEncoding.queryString, into: request)
            return try Self.encodeMultipart(parts, into: withQuery)
        }
    }

    private static func encode(_ parameters: Parameters, with encoding: any ParameterEncoding, into request: URLRequest) throws(NetworkError)
        -> URLRequest
    {
        do {
            return try encoding.encode(request, with: parameters)
        } catch {
            throw .parameterEncoding(error)
        }
    }

    private static func encodeJSON(_ value: any Encodable, encoder: JSONEncoder, into request: URLRequest) throws(NetworkError) -> URLRequest {
        var request = request
        do {
            request.httpBody = try encoder.encode(value)
        } catch {
            throw .encodableMapping(error)
        }
        if request.value(forHTTPHeaderField: "Content-Type") == nil {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return request
    }

    private static func encodeMultipart(_ parts: [MultipartFormBodyPart], into request: URLRequest) throws(NetworkError) -> URLRequest {
        var request = request
        let boundary = MultipartFormData.makeBoundary()
        switch try MultipartFormData.body(parts, boundary: boundary) {
        case .data(let data):
            request.httpBody = data
        case .stream(let stream):
            // The transport reads it into a temporary file, 64 KiB at a time, and sends that.
            request.httpBodyStream = stream
        }
        request.setValue(MultipartFormData.contentType(boundary: boundary), forHTTPHeaderField: "Content-Type")
        return request
    }
}

extension Endpoint {
    /// A copy for a stub, which reads no file (as Moya's): a multipart task's file parts go with
    /// their headers (field name, file name, type) and no content, so a fixture path need not
    /// exist where tests run, and a large one is not read for nothing.
    func readingNoFile() -> Endpoint {
        func emptied(_ parts: [MultipartFormBodyPart]) -> [MultipartFormBodyPart] {
            parts.map { part in
                guard case .file(let url) = part.source else { return part }
                var empty = part
                empty.source = .data(Data())
                empty.fileName = part.fileName ?? url.lastPathComponent
                // A file part's default type (a data part has none), as the request sent would say.
                empty.mimeType = part.mimeType ?? "application/octet-stream"
                return empty
            }
        }
        let stubbed: RequestTask
        switch task {
        case .uploadMultipart(let parts): stubbed = .uploadMultipart(emptied(parts))
        case .uploadCompositeMultipart(let parts, let urlParameters):
            stubbed = .uploadCompositeMultipart(emptied(parts), urlParameters: urlParameters)
        default: return self
        }
        return Endpoint(
            url: url, sampleResponseClosure: sampleResponseClosure, method: method, task: stubbed, httpHeaderFields: httpHeaderFields,
            extraQueryParameters: extraQueryParameters, madeURL: madeURL)
    }

    /// A copy with a server's default headers and parameters merged in; the endpoint's own win.
    func merging(defaultHeaders: [String: String], defaultParameters: Parameters) -> Endpoint {
        // A server default goes whatever the spelling of the endpoint's field; the endpoint's own
        // fields all stay, so one name given twice in two spellings is still refused by
        // `urlRequest` (one of them went, by the dictionary's order, which changes between runs).
        let own = httpHeaderFields ?? [:]
        var headers = defaultHeaders.filter { name, _ in !own.keys.contains { HTTPHeader.namesEqual($0, name) } }
        headers.merge(own) { _, mine in mine }
        var task = self.task
        var extra = extraQueryParameters
        if !defaultParameters.isEmpty {
            func merged(_ own: Parameters) -> Parameters { own.merging(defaultParameters) { mine, _ in mine } }
            switch task {
            case .requestParameters(let parameters, let encoding):
                task = .requestParameters(parameters: merged(parameters), encoding: encoding)
            case .requestCompositeData(let data, let urlParameters):
                task = .requestCompositeData(bodyData: data, urlParameters: merged(urlParameters))
            case .requestCompositeParameters(let body, let encoding, let urlParameters):
                task = .requestCompositeParameters(bodyParameters: body, bodyEncoding: encoding, urlParameters: merged(urlParameters))
            case .uploadCompositeMultipart(let parts, let urlParameters):
                task = .uploadCompositeMultipart(parts, urlParameters: merged(urlParameters))
            case .downloadParameters(let parameters, let encoding, let destination):
                task = .downloadParameters(parameters: merged(parameters), encoding: encoding, destination: destination)
            case .requestPlain:
                task = .requestParameters(parameters: defaultParameters, encoding: URLEncoding.queryString)
            default:
                extra = extra.merging(defaultParameters) { mine, _ in mine }
            }
        }
        return Endpoint(
            url: url, sampleResponseClosure: sampleResponseClosure, method: method, task: task,
            httpHeaderFields: headers.isEmpty ? nil : headers, extraQueryParameters: extra, madeURL: madeURL)
    }
}

extension Endpoint: Equatable, Hashable {
    /// Two endpoints are equal when they make the same `URLRequest` (URL, method, header fields,
    /// body) and upload the same file, as Moya compares them; a multipart body compares by its
    /// parts, a file part by its path (whatever boundary each request draws; no file is read, so
    /// one that is missing compares by its path too); endpoints whose request cannot be made
    /// compare by URL, method and their own header fields, and never equal one whose request can
    /// be made.
    public static func == (lhs: Endpoint, rhs: Endpoint) -> Bool {
        guard lhs.uploadedFile == rhs.uploadedFile else { return false }
        switch (try? lhs.comparedRequest(), try? rhs.comparedRequest()) {
        case (let (left, leftParts)?, let (right, rightParts)?):
            return left.url == right.url && left.httpMethod == right.httpMethod && left.allHTTPHeaderFields == right.allHTTPHeaderFields
                && left.httpBody == right.httpBody && leftParts == rightParts
        case (nil, nil):
            return lhs.url == rhs.url && lhs.method == rhs.method && (lhs.httpHeaderFields ?? [:]) == (rhs.httpHeaderFields ?? [:])
        default:
            return false
        }
    }

    /// The file an `uploadFile` task sends (the request made carries no body for it).
    private var uploadedFile: URL? {
        if case .uploadFile(let file) = task { return file }
        return nil
    }

    /// Hashes what ``==(_:_:)`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(uploadedFile)
        if let (request, parts) = try? comparedRequest() {
            hasher.combine(request.url)
            hasher.combine(request.httpMethod)
            hasher.combine(request.allHTTPHeaderFields)
            hasher.combine(request.httpBody)
            hasher.combine(parts)
        } else {
            hasher.combine(url)
            hasher.combine(method)
        }
    }

    /// The request as equality sees it: for a multipart body, the request without it (its query
    /// made), its `Content-Type` with one fixed boundary, and the body's stretches with that
    /// boundary, each file part by its path (as an upload file compares by its file): no file is
    /// read, and none need exist.
    private func comparedRequest() throws -> (request: URLRequest, multipart: [MultipartFormData.Piece]?) {
        let parts: [MultipartFormBodyPart]
        var bare: Endpoint
        switch task {
        case .uploadMultipart(let own):
            (parts, bare) = (own, replacing(task: .requestPlain))
        case .uploadCompositeMultipart(let own, let urlParameters):
            (parts, bare) = (own, replacing(task: .requestParameters(parameters: urlParameters, encoding: URLEncoding.queryString)))
        default:
            return (try urlRequest(), nil)
        }
        // The endpoint's own fields are checked as they are (its `Content-Type` is replaced).
        if let refusal = Self.refusal(of: httpHeaderFields ?? [:]) { throw refusal }
        bare = bare.adding(newHTTPHeaderFields: ["Content-Type": MultipartFormData.contentType(boundary: "boundary")])
        return (try bare.urlRequest(), try MultipartFormData.pieces(parts, boundary: "boundary"))
    }
}

/// Why `requestCompositeParameters` with a query-string body encoding is refused.
public struct CompositeBodyInQuery: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request's method.
    public var method: String
    /// The body encoding's destination: `queryString`, or `methodDependent` for a method whose
    /// parameters go in the query (`GET`, `HEAD`, `DELETE`).
    public var destination: URLEncoding.Destination

    /// The error for a body encoding of `destination` on a `method` request.
    public init(method: String = "POST", destination: URLEncoding.Destination = .queryString) {
        self.method = method
        self.destination = destination
    }

    /// What is wrong and what to do.
    public var description: String {
        let encoding = destination == .queryString ? "URLEncoding.queryString" : "URLEncoding.default (method-dependent) on a \(method) request"
        return "requestCompositeParameters: the body encoding \(encoding) would put the body parameters in the URL; "
            + "use URLEncoding.httpBody or JSONEncoding for the body, and urlParameters for the query"
    }
}
