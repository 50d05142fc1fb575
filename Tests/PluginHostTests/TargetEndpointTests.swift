import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A minimal target states only baseURL, path and method.
enum MinimalAPI: TargetType {
    case root
    case user(Int)
    var baseURL: URL { URL(string: "http://127.0.0.1:1/api")! }
    var path: String {
        switch self {
        case .root: return ""
        case .user(let id): return "users/\(id)"
        }
    }
    var method: HTTPMethod { .get }
}

@Suite("Targets and endpoints")
struct TargetEndpointTests {
    @Test func minimalTargetHasDefaults() throws {
        let target = MinimalAPI.user(7)
        #expect(target.headers == nil)
        #expect(target.validationType == .none)
        #expect(target.pluginOptions.isEmpty)
        #expect(target.sampleData.isEmpty)
        guard case .requestPlain = target.task else {
            Issue.record("default task is not plain")
            return
        }
        guard case .networkResponse(200, let data) = target.sampleResponse else {
            Issue.record("default sample is not 200")
            return
        }
        #expect(data.isEmpty)
        #expect(target.url.absoluteString == "http://127.0.0.1:1/api/users/7")
    }

    @Test func emptyPathAddsNoTrailingSlash() async throws {
        #expect(MinimalAPI.root.url.absoluteString == "http://127.0.0.1:1/api")
        let base = try TestServer.url().appendingPathComponent("anything")
        let provider = Provider<Bin>()
        let response = try await provider.request(try Bin("", base: base)).value
        #expect(try echo(response).url.hasSuffix("/anything"))
    }

    @Test func addingHeadersNewWinsCaseInsensitively() {
        let endpoint = Endpoint(
            url: "http://127.0.0.1/x", sampleResponseClosure: { .networkResponse(200, Data()) },
            method: .get, task: .requestPlain, httpHeaderFields: ["Accept": "text/plain", "X-A": "1"])
        let added = endpoint.adding(newHTTPHeaderFields: ["accept": "application/json", "X-B": "2"])
        #expect(added.httpHeaderFields == ["accept": "application/json", "X-A": "1", "X-B": "2"])
        #expect(endpoint.httpHeaderFields == ["Accept": "text/plain", "X-A": "1"])
    }

    @Test func replacingTaskKeepsEverythingElse() throws {
        let endpoint = Endpoint(
            url: "http://127.0.0.1/x", sampleResponseClosure: { .networkResponse(200, Data()) },
            method: .post, task: .requestPlain, httpHeaderFields: ["X-A": "1"])
        let replaced = endpoint.replacing(task: .requestData(Data("hi".utf8)))
        let request = try replaced.urlRequest()
        #expect(request.httpBody == Data("hi".utf8))
        #expect(request.httpMethod == "POST")
        #expect(request.value(forHTTPHeaderField: "X-A") == "1")
        #expect(try endpoint.urlRequest().httpBody == nil)
    }

    @Test(arguments: ["http://[::1", "not a url", "ftp://127.0.0.1/file", "/relative/only", "", "http://%FF/x"])
    func badURLIsRequestMappingError(url: String) throws {
        let endpoint = Endpoint(
            url: url, sampleResponseClosure: { .networkResponse(200, Data()) }, method: .get,
            task: .requestPlain, httpHeaderFields: nil)
        do {
            _ = try endpoint.urlRequest()
            Issue.record("expected requestMapping for \(url)")
        } catch {
            guard case .requestMapping(let reported) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(reported == url)
            #expect(error.description.contains("is not an absolute http or https URL"))
        }
    }

    /// A field of the endpoint that cannot be sent is refused by name (it was dropped silently,
    /// as `setValue(_:forHTTPHeaderField:)` drops it, and a default field of the same name, the
    /// provider's `User-Agent`, went in its place).
    @Test(arguments: [
        ("User-Agent", "app/1\r\nX-Evil: 1", "has a value holding CR, LF or NUL"),
        ("X-Note", "a\nb", "has a value holding CR, LF or NUL"),
        ("X-Note", "a\u{0}b", "has a value holding CR, LF or NUL"),
        ("X Note", "a", "is not a token (RFC 9110)"),
        ("", "a", "is not a token (RFC 9110)"),
        ("X-Note:", "a", "is not a token (RFC 9110)"),
    ])
    func aFieldThatCannotBeSentIsRefusedByName(name: String, value: String, reason: String) async throws {
        let endpoint = Endpoint(
            url: "http://127.0.0.1/x", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .get,
            task: .requestPlain, httpHeaderFields: ["Accept": "text/plain", name: value])
        #expect {
            _ = try endpoint.urlRequest()
        } throws: { error in
            guard case .invalidHeader(let reported, let why) = error as? NetworkError else { return false }
            return reported == name && why == reason
                && (error as? NetworkError)?.description == "cannot make a request: header \(name.debugDescription) \(reason)"
        }
        // Through a provider: no request reaches the transport, and the error says which field.
        let counting = CountingTransport(StubTransport { _ in .networkResponse(200, Data()) })
        let result = await Provider<Bin>(transport: counting).request(try Bin("get", headers: [name: value])).result
        guard case .failure(.invalidHeader(let reported, let why)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(reported == name && why == reason)
        #expect(counting.count == 0)
    }

    /// A field given in two spellings (`X-Token` and `x-token`) is refused by its first spelling:
    /// the value sent (and the key shared requests were matched by) depended on the dictionary's
    /// order, which changes from one process to the next.
    @Test func aFieldGivenInTwoSpellingsIsRefused() async throws {
        let fields = ["Accept": "*/*", "x-token": "b", "X-Token": "a", "X-TOKEN": "c", "x-zed": "1", "X-Zed": "2"]
        let endpoint = Endpoint(
            url: "http://127.0.0.1/x", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .get, task: .requestPlain,
            httpHeaderFields: fields)
        let reason = "is given again as \"X-Token\" and \"x-token\" (field names are case-insensitive)"
        #expect {
            _ = try endpoint.urlRequest()
        } throws: { error in
            guard case .invalidHeader(let name, let why) = error as? NetworkError else { return false }
            return name == "X-TOKEN" && why == reason
        }
        let counting = CountingTransport(StubTransport { _ in .networkResponse(200, Data()) })
        let result = await Provider<Bin>(transport: counting).request(try Bin("get", headers: ["X-Token": "a", "x-token": "b"])).result
        guard case .failure(.invalidHeader(let name, let why)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(name == "X-Token" && why == "is given again as \"x-token\" (field names are case-insensitive)")
        #expect(counting.count == 0)
        // With a server layer too (its defaults merged in folded the two spellings into one,
        // whichever the dictionary gave last, and the request went with it).
        let server = ServerConfiguration(baseURL: URL(string: "http://127.0.0.1:9/")!, headers: ["x-TOKEN": "server", "X-Other": "1"])
        let served = await Provider<Bin>(transport: counting, server: server).request(try Bin("get", headers: ["X-Token": "a", "x-token": "b"]))
            .result
        guard case .failure(.invalidHeader("X-Token", "is given again as \"x-token\" (field names are case-insensitive)")) = served else {
            Issue.record("got \(served)")
            return
        }
        #expect(counting.count == 0)
    }

    /// A provider's own default field that cannot be sent fails every request with its name (it
    /// was dropped as a target's was); with two bad fields the first by name is named, whatever
    /// the dictionary's order.
    /// A provider's default field in two spellings (`h["accept"]` beside the standard `Accept`)
    /// is refused, as a target's is: both went out, in the dictionary's order.
    @Test func aDefaultFieldInTwoSpellingsFailsEveryRequest() async throws {
        let counting = CountingTransport(StubTransport { _ in .networkResponse(200, Data()) })
        var headers = DefaultHeaders.standard(for: counting)
        headers["accept"] = "application/json"
        let provider = Provider<Bin>(transport: counting, defaultHeaders: headers)
        let result = await provider.request(try Bin("get")).result
        guard case .failure(.invalidHeader(let name, let reason)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(name == "Accept" && reason == #"is given again as "accept" (field names are case-insensitive)"#)
        #expect(counting.count == 0)
    }

    @Test func aDefaultFieldThatCannotBeSentFailsEveryRequest() async throws {
        let counting = CountingTransport(StubTransport { _ in .networkResponse(200, Data()) })
        let provider = Provider<Bin>(transport: counting, defaultHeaders: ["Accept": "*/*", "X-Trace": "1\r\n2"])
        for _ in 0..<2 {
            let result = await provider.request(try Bin("get")).result
            guard case .failure(.invalidHeader(let name, let reason)) = result else {
                Issue.record("got \(result)")
                return
            }
            #expect(name == "X-Trace" && reason == "has a value holding CR, LF or NUL")
        }
        #expect(counting.count == 0)
        let fields = Dictionary(uniqueKeysWithValues: (0..<20).map { ("X-\($0 + 10)", "v\n") } + [("X Bad", "v")])
        let endpoint = Endpoint(
            url: "http://127.0.0.1/x", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .get,
            task: .requestPlain, httpHeaderFields: fields)
        #expect {
            _ = try endpoint.urlRequest()
        } throws: { error in
            guard case .invalidHeader(let name, let reason) = error as? NetworkError else { return false }
            return name == "X Bad" && reason == "is not a token (RFC 9110)"
        }
    }

    @Test func badBaseURLFailsThePipelineWithRequestMapping() async throws {
        let provider = Provider<MultiTarget>()
        let result = await provider.get("http://exa mple.com:99999/x").result
        guard case .failure(.requestMapping(let url)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(url == "http://exa mple.com:99999/x")
    }

    @Test func parametersJSONCannotEncodeNamesKeyPathAndType() throws {
        let endpoint = Endpoint(
            url: "http://127.0.0.1/x", sampleResponseClosure: { .networkResponse(200, Data()) },
            method: .post,
            task: .requestParameters(
                parameters: ["ok": 1, "nested": ["when": Date(timeIntervalSince1970: 0)] as [String: any Sendable]],
                encoding: JSONEncoding.default),
            httpHeaderFields: nil)
        do {
            _ = try endpoint.urlRequest()
            Issue.record("expected parameterEncoding")
        } catch {
            guard case .parameterEncoding(let inner) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(inner as? ParameterEncodingError == .invalidJSONValue(keyPath: "$.nested.when", type: "Date"))
        }
    }

    @Test func nonFiniteNumberCannotBeJSON() throws {
        let endpoint = Endpoint(
            url: "http://127.0.0.1/x", sampleResponseClosure: { .networkResponse(200, Data()) },
            method: .post, task: .requestParameters(parameters: ["x": Double.nan], encoding: JSONEncoding.default),
            httpHeaderFields: nil)
        #expect {
            _ = try endpoint.urlRequest()
        } throws: { error in
            guard case NetworkError.parameterEncoding(let inner) = error,
                case .invalidJSONValue(let path, _) = inner as? ParameterEncodingError
            else { return false }
            return path == "$.x"
        }
    }

    struct Unencodable: Encodable, Sendable {
        struct Refused: Error {}
        func encode(to encoder: Encoder) throws { throw Refused() }
    }

    @Test func encodableFailureIsEncodableMapping() throws {
        let endpoint = Endpoint(
            url: "http://127.0.0.1/x", sampleResponseClosure: { .networkResponse(200, Data()) },
            method: .post, task: .requestJSONEncodable(Unencodable()), httpHeaderFields: nil)
        #expect {
            _ = try endpoint.urlRequest()
        } throws: { error in
            guard case NetworkError.encodableMapping(let inner) = error else { return false }
            return inner is Unencodable.Refused
        }
    }

    @Test func urlEncodingIsSortedNestedAndEscaped() {
        let nested: [String: any Sendable] = ["y": true, "x": "a b&c=d/é"]
        let query = URLEncoding.default.query(["b": [1, 2], "a": nested, "c": NSNull()])
        #expect(query == "a%5Bx%5D=a%20b%26c%3Dd%2F%C3%A9&a%5By%5D=1&b%5B%5D=1&b%5B%5D=2&c=")
        let literal = URLEncoding(arrayEncoding: .noBrackets, boolEncoding: .literal).query(["b": [1, 2], "t": false])
        #expect(literal == "b=1&b=2&t=false")
    }

    @Test func missingUploadFileIsFileAccessError() async throws {
        let provider = Provider<Bin>()
        let missing = URL(fileURLWithPath: "/nonexistent/pluginhost-upload.bin")
        let result = await provider.request(try Bin("post", method: .post, task: .uploadFile(missing))).result
        guard case .failure(.fileAccess(let path, let reason)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(path == "/nonexistent/pluginhost-upload.bin")
        #expect(reason.contains("does not exist"))
    }
}
