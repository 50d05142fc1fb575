import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Behaviours Moya users rely on (fixed where PluginHost differed).
@Suite("Moya parity")
struct MoyaParityTests {
    @Test func compositeParametersRefuseAQueryStringBodyEncoding() throws {
        let endpoint = Endpoint(
            url: "https://api.example.invalid/things", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .post,
            task: .requestCompositeParameters(bodyParameters: ["secret": "s"], bodyEncoding: URLEncoding.queryString, urlParameters: ["page": 1]),
            httpHeaderFields: nil)
        do {
            _ = try endpoint.urlRequest()
            Issue.record("the body parameters went into the URL")
        } catch {
            #expect(
                error.description
                    == "cannot encode parameters: requestCompositeParameters: the body encoding URLEncoding.queryString would put the body "
                    + "parameters in the URL; use URLEncoding.httpBody or JSONEncoding for the body, and urlParameters for the query")
        }
        let body = try Endpoint(
            url: "https://api.example.invalid/things", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .post,
            task: .requestCompositeParameters(bodyParameters: ["secret": "s"], bodyEncoding: URLEncoding.httpBody, urlParameters: ["page": 1]),
            httpHeaderFields: nil
        ).urlRequest()
        #expect(body.url?.query == "page=1")
        #expect(body.httpBody == Data("secret=s".utf8))
    }

    /// `URLEncoding.default` is method-dependent: on a `GET`, `HEAD` or `DELETE` it too would
    /// put the body parameters in the URL (Moya refuses any body destination but the body).
    @Test(arguments: [HTTPMethod.get, .head, .delete]) func compositeParametersRefuseTheDefaultEncodingWhereItMeansTheQuery(
        _ method: HTTPMethod
    ) throws {
        let endpoint = Endpoint(
            url: "https://api.example.invalid/things", sampleResponseClosure: { .networkResponse(200, Data()) }, method: method,
            task: .requestCompositeParameters(bodyParameters: ["secret": "s"], bodyEncoding: URLEncoding.default, urlParameters: ["page": 1]),
            httpHeaderFields: nil)
        do {
            let request = try endpoint.urlRequest()
            Issue.record("the body parameters went into the URL: \(request.url?.absoluteString ?? "-")")
        } catch {
            #expect(
                error.description
                    == "cannot encode parameters: requestCompositeParameters: the body encoding URLEncoding.default (method-dependent) on a "
                    + "\(method.rawValue) request would put the body parameters in the URL; use URLEncoding.httpBody or JSONEncoding for the "
                    + "body, and urlParameters for the query")
        }
        let post = try Endpoint(
            url: "https://api.example.invalid/things", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .post,
            task: .requestCompositeParameters(bodyParameters: ["secret": "s"], bodyEncoding: URLEncoding.default, urlParameters: ["page": 1]),
            httpHeaderFields: nil
        ).urlRequest()
        #expect(post.url?.query == "page=1")
        #expect(post.httpBody == Data("secret=s".utf8))
    }

    /// A part's `mimeType` with a line break would add fields to the part: refused, naming the
    /// part. A backslash in a name is escaped (a quoted-string reader took `name="a\"` as
    /// unclosed). A file part made with the initialiser gets its file name and type, as one made
    /// with `.file(_:name:)`.
    @Test func multipartRefusesAForgedPartHeaderAndEscapesBackslashes() throws {
        let forged = MultipartFormBodyPart(
            source: .data(Data("1".utf8)), name: "avatar", fileName: "me.png",
            mimeType: "image/png\r\nContent-Disposition: form-data; name=\"is_admin\"")
        do {
            _ = try MultipartFormData.encode([.text("x", name: "first"), forged], boundary: "b")
            Issue.record("a part's header was forged")
        } catch {
            guard case .parameterEncoding(let reason) = error, let refused = reason as? InvalidMultipartContentType else {
                Issue.record("got \(error)")
                return
            }
            #expect(refused == InvalidMultipartContentType(index: 1, name: "avatar", mimeType: forged.mimeType!))
            #expect(
                error.description
                    == "cannot encode parameters: multipart part 1 (\"avatar\"): the content type "
                    + "\"image/png\\r\\nContent-Disposition: form-data; name=\\\"is_admin\\\"\" holds CR, LF or NUL")
        }
        let body = try MultipartFormData.encode(
            [MultipartFormBodyPart(source: .data(Data("v".utf8)), name: "comment\\", fileName: "report\\\"x.pdf")], boundary: "b")
        #expect(
            String(decoding: body, as: UTF8.self)
                == "--b\r\nContent-Disposition: form-data; name=\"comment%5C\"; filename=\"report%5C%22x.pdf\"\r\n\r\nv\r\n--b--\r\n")
        let nul = try MultipartFormData.encode(
            [MultipartFormBodyPart(source: .data(Data("v".utf8)), name: "a\u{0}b\r\n", fileName: "shell.php\u{0}.png")], boundary: "b")
        #expect(
            String(decoding: nul, as: UTF8.self)
                == "--b\r\nContent-Disposition: form-data; name=\"a%00b%0D%0A\"; filename=\"shell.php%00.png\"\r\n\r\nv\r\n--b--\r\n")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-part-\(UUID().uuidString).txt")
        try Data("contents".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let filePart = try MultipartFormData.encode([MultipartFormBodyPart(source: .file(file), name: "doc")], boundary: "b")
        #expect(
            String(decoding: filePart, as: UTF8.self)
                == "--b\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"\(file.lastPathComponent)\"\r\n"
                + "Content-Type: application/octet-stream\r\n\r\ncontents\r\n--b--\r\n")
    }

    /// A boundary given to the public encoder is checked against RFC 2046 (one with CR and LF
    /// wrote fields of its own into every part), and the content type quotes one that is no token.
    @Test func aMultipartBoundaryIsCheckedAndQuotedWhenItMustBe() throws {
        let cases: [(String, String)] = [
            ("b\r\nX-Evil: 1", #"holds "\r", which RFC 2046 does not allow"#),
            ("", "must be 1 to 70 characters, not 0"),
            (String(repeating: "b", count: 71), "must be 1 to 70 characters, not 71"),
            ("b ", "ends with a space"),
            ("b\"", #"holds "\"", which RFC 2046 does not allow"#),
            ("b\u{E9}", "holds \"\u{E9}\", which RFC 2046 does not allow"),
            (String(repeating: "\u{E9}", count: 70), "holds \"\u{E9}\", which RFC 2046 does not allow"),
        ]
        for (boundary, problem) in cases {
            #expect {
                _ = try MultipartFormData.encode([.text("x", name: "a")], boundary: boundary)
            } throws: { error in
                guard case .parameterEncoding(let reason) = error as? NetworkError else { return false }
                return reason as? InvalidMultipartBoundary == InvalidMultipartBoundary(boundary: boundary, problem: problem)
                    && "\(reason)" == "the multipart boundary \(boundary.debugDescription) \(problem)"
            }
        }
        let body = try MultipartFormData.encode([.text("x", name: "a")], boundary: "gc0p4Jq0M:2Yt08jU534c0p")
        #expect(String(decoding: body, as: UTF8.self).hasPrefix("--gc0p4Jq0M:2Yt08jU534c0p\r\n"))
        #expect(MultipartFormData.contentType(boundary: "gc0p4Jq0M:2Yt08jU534c0p") == #"multipart/form-data; boundary="gc0p4Jq0M:2Yt08jU534c0p""#)
        #expect(MultipartFormData.contentType(boundary: "b-1") == "multipart/form-data; boundary=b-1")
        #expect(MultipartFormData.contentType(boundary: #"a "b"\c"#) == #"multipart/form-data; boundary="a \"b\"\\c""#)
        // The provider's own boundary is always one.
        _ = try MultipartFormData.encode([.text("x", name: "a")], boundary: MultipartFormData.makeBoundary())
    }

    /// Numbers `JSONSerialization` made are numbers, 0 and 1 included (they match `as Bool`
    /// too); only Booleans are encoded as Booleans.

    /// `URLEncoding` writes the same bytes for the same parameters: a `Set`'s elements sorted by
    /// their text, keys that are not strings likewise (a set went in the order of the process's
    /// hash seed, as Swift's text of the whole set); a NaN or infinity is refused naming its key
    /// path, as JSON refuses it (it went as `nan`).
    @Test func urlEncodingIsTheSameBytesForASetAndRefusesNaN() throws {
        #expect(URLEncoding.default.query(["ids": Set([3, 1, 2])]) == "ids%5B%5D=1&ids%5B%5D=2&ids%5B%5D=3")
        #expect(URLEncoding.default.query(["m": [2: "b", 1: "a"] as [Int: String]]) == "m%5B1%5D=a&m%5B2%5D=b")
        let request = URLRequest(url: try #require(URL(string: "http://127.0.0.1/q")))
        let refusals: [(Parameters, String, String)] = [
            (["ratio": Double.nan], "ratio", "Double (nan)"), (["a": ["b": [1.0, -Double.infinity]]], "a[b][]", "Double (-inf)"),
        ]
        for (parameters, path, type) in refusals {
            #expect(throws: ParameterEncodingError.invalidQueryValue(keyPath: path, type: type)) {
                _ = try URLEncoding.default.encode(request, with: parameters)
            }
        }
    }

    /// `JSONEncoding` names the first bad value by key, whatever the dictionary's order.
    @Test func jsonEncodingNamesTheFirstBadValueByKey() throws {
        let request = URLRequest(url: try #require(URL(string: "http://127.0.0.1/q")))
        let parameters = Dictionary(uniqueKeysWithValues: (10..<30).map { ("k\($0)", Date() as any Sendable) })
        #expect(throws: ParameterEncodingError.invalidJSONValue(keyPath: "$.k10", type: "Date")) {
            _ = try JSONEncoding.default.encode(request, with: parameters)
        }
    }
    @Test func urlEncodingTellsNumbersFromBooleans() throws {
        let decoded = try JSONSerialization.jsonObject(with: Data(#"{"count":1,"ratio":1.5,"zero":0,"flag":true,"off":false}"#.utf8))
        let parameters = try #require(decoded as? [String: any Sendable])
        #expect(URLEncoding(boolEncoding: .literal).query(parameters) == "count=1&flag=true&off=false&ratio=1.5&zero=0")
        #expect(URLEncoding.default.query(parameters) == "count=1&flag=1&off=0&ratio=1.5&zero=0")
        #expect(URLEncoding(boolEncoding: .literal).query(["t": true, "n": 1, "d": 0.0]) == "d=0.0&n=1&t=true")
    }

    /// An optional among the parameters is what it holds, and nil is JSON's `null` (as Darwin's
    /// bridging writes it for Moya) and an empty query value: JSON refused the type, and a
    /// query carried `Optional("…")`.
    @Test func optionalParametersAreWhatTheyHold() throws {
        let nickname: String? = nil
        let parameters: Parameters = [
            "name": String?("ada"), "nickname": nickname, "deep": String??.some(nil),
            "nested": ["age": Int?(36), "team": String?.none] as [String: any Sendable], "list": [Int?.none, 1],
        ]
        let request = try JSONEncoding.default.encode(URLRequest(url: URL(string: "http://127.0.0.1/x")!), with: parameters)
        #expect(
            String(decoding: try #require(request.httpBody), as: UTF8.self)
                == #"{"deep":null,"list":[null,1],"name":"ada","nested":{"age":36,"team":null},"nickname":null}"#)
        #expect(
            URLEncoding.default.query(parameters)
                == "deep=&list%5B%5D=&list%5B%5D=1&name=ada&nested%5Bage%5D=36&nested%5Bteam%5D=&nickname=")
        #expect(throws: ParameterEncodingError.invalidJSONValue(keyPath: "$.nested.when", type: "Date")) {
            try JSONEncoding.default.encode(
                URLRequest(url: URL(string: "http://127.0.0.1/x")!), with: ["nested": ["when": Date?(Date())] as [String: any Sendable]])
        }
    }

    /// Empty parameters in the body are an empty form with its type, as Alamofire's `URLEncoding`
    /// (and `JSONEncoding`'s `{}`); in the query they change nothing.
    @Test func emptyParametersInTheBodyAreAnEmptyForm() throws {
        var post = URLRequest(url: URL(string: "http://127.0.0.1/x?a=1")!)
        post.httpMethod = "POST"
        let form = try URLEncoding.default.encode(post, with: [:])
        #expect(form.value(forHTTPHeaderField: "Content-Type") == "application/x-www-form-urlencoded; charset=utf-8")
        #expect(form.httpBody == Data())
        #expect(form.url?.absoluteString == "http://127.0.0.1/x?a=1")
        let json = try JSONEncoding.default.encode(post, with: [:])
        #expect(json.value(forHTTPHeaderField: "Content-Type") == "application/json" && json.httpBody == Data("{}".utf8))
        let get = try URLEncoding.default.encode(URLRequest(url: URL(string: "http://127.0.0.1/x?a=1")!), with: [:])
        #expect(get.url?.absoluteString == "http://127.0.0.1/x?a=1" && get.httpBody == nil)
        #expect(get.value(forHTTPHeaderField: "Content-Type") == nil)
        #expect(try URLEncoding.default.encode(post, with: nil).httpBody == nil)
    }

    /// An empty list of codes validates nothing, as in Moya.
    @Test func customCodesWithNoCodesAcceptEveryCode() {
        #expect(ValidationType.customCodes([]).accepts(500))
        #expect(ValidationType.customCodes([]).accepts(200))
        #expect(!ValidationType.customCodes([201]).accepts(200))
    }

    @Test func anEmptyBodyWithAKeyPathHonoursFailsOnEmptyData() throws {
        let empty = Response(statusCode: 204, data: Data())
        #expect(try empty.map(String?.self, atKeyPath: "user.name", failsOnEmptyData: false) == nil)
        #expect(try empty.map(String?.self, failsOnEmptyData: false) == nil)
        #expect(throws: NetworkError.self) { try empty.map(String?.self, atKeyPath: "user.name") }
    }

    /// A key path through an array, as Moya reads it (Foundation's key-value coding): a key
    /// that is no index is taken from every element, `null` for an element without it; an index
    /// picks one element. It was `keyPathNotFound` unless indexed.
    @Test func aKeyPathThroughAnArrayTakesTheKeyFromEachElement() throws {
        let body = #"{"items": [{"name": "a", "owner": {"id": 1}}, {"name": "b", "id": 2, "owner": null}, {"name": "c"}], "n": 3}"#
        let response = Response(statusCode: 200, data: Data(body.utf8))
        #expect(try response.map([String].self, atKeyPath: "items.name") == ["a", "b", "c"])
        #expect(try response.map([Int?].self, atKeyPath: "items.id") == [nil, 2, nil])
        #expect(try response.map([Int?].self, atKeyPath: "items.owner.id") == [1, nil, nil])
        #expect(try response.map(String.self, atKeyPath: "items.1.name") == "b")
        #expect(try response.mapString(atKeyPath: "items.2.name") == "c")
        // A value with no members on the way is no path, in an element or not.
        for path in ["items.name.first", "n.first", "items.5.name", "missing.name"] {
            do {
                _ = try response.map([String?].self, atKeyPath: path)
                Issue.record("\(path): found")
            } catch {
                guard case .keyPathNotFound(let named, _) = error else {
                    Issue.record("\(path): \(error)")
                    continue
                }
                #expect(named == path)
            }
        }
    }

    @Test func anEmptyBodyDecodesAnAllOptionalModelAndAnArray() throws {
        struct Profile: Decodable, Equatable {
            var name: String?
            var age: Int?
        }
        struct Strict: Decodable { var name: String }
        let empty = Response(statusCode: 204, data: Data())
        #expect(try empty.map(Profile.self, failsOnEmptyData: false) == Profile())
        #expect(try empty.map([Int].self, failsOnEmptyData: false) == [])
        #expect(try empty.map([Int].self, atKeyPath: "items", failsOnEmptyData: false) == [])
        #expect(throws: NetworkError.self) { try empty.map(Strict.self, failsOnEmptyData: false) }
    }

    @Test func addingNoHeadersChangesNothing() {
        let endpoint = Endpoint(
            url: "https://api.example.invalid/x", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .get, task: .requestPlain,
            httpHeaderFields: nil)
        #expect(endpoint.adding(newHTTPHeaderFields: [:]).httpHeaderFields == nil)
        #expect(endpoint.adding(newHTTPHeaderFields: ["A": "1"]).httpHeaderFields == ["A": "1"])
    }
}

@Suite("Moya parity: cancelling")
struct MoyaParityCancellingTests {
    @Test func cancellingWhileTheRequestClosureRunsIsCancelledOnce() async throws {
        let entered = LockedCounter()
        let provider = Provider<Bin>(requestClosure: { _, request in
            entered.increment()
            try await Task.sleep(nanoseconds: 10_000_000_000)
            return request
        })
        let target = try Bin("get")
        let task = Task { await provider.request(target).result }
        #expect(await eventually { entered.value == 1 })
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("not .cancelled")
            return
        }
        let calls = LockedCounter()
        let token = LockedBox<(any Cancellable)?>(nil)
        let result: Result<Response, NetworkError> = await withCheckedContinuation { continuation in
            token.set(
                provider.request(target).start { result in
                    if calls.increment() == 1 { continuation.resume(returning: result) }
                })
            Task {
                _ = await eventually { entered.value == 2 }
                token.get()?.cancel()
            }
        }
        guard case .failure(.cancelled) = result else {
            Issue.record("callback form: got \(result)")
            return
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(calls.value == 1)
    }
}

@Suite("Moya parity: NSError bridging")
struct MoyaParityNSErrorTests {
    @Test func networkErrorBridgesWithItsCauseAndStatus() {
        let failure = TransportFailure(kind: .timedOut, message: "slow")
        let bridged = NetworkError.underlying(failure, nil) as NSError
        #expect(bridged.domain == "PluginHost.NetworkError")
        #expect(bridged.code == 10)
        #expect((bridged.userInfo[NSUnderlyingErrorKey] as? NSError) != nil)
        #expect(bridged.localizedDescription == NetworkError.underlying(failure, nil).description)
        let status = NetworkError.statusCode(Response(statusCode: 503, data: Data())) as NSError
        #expect(status.code == 5)
        #expect(status.userInfo["statusCode"] as? Int == 503)
        #expect(status.userInfo[NSUnderlyingErrorKey] == nil)
        #expect((NetworkError.cancelled as NSError).code == 11)
    }
}

@Suite("Moya parity: additions")
struct MoyaParityAdditionsTests {
    static func endpoint(_ task: RequestTask, headers: [String: String]? = nil) -> Endpoint {
        Endpoint(
            url: "https://api.example.invalid/items", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .post, task: task,
            httpHeaderFields: headers)
    }

    /// An endpoint whose request cannot be made never equals one whose request can (equal values
    /// hashed apart, which breaks sets); two file uploads compare by their files, as in Moya.
    @Test func endpointsThatCannotBeMadeOrUploadOtherFilesDiffer() {
        let good = Self.endpoint(.requestPlain)
        let bad = Self.endpoint(.requestParameters(parameters: ["n": Double.nan], encoding: JSONEncoding.default))
        #expect(good != bad)
        #expect(Set([good, bad]).count == 2)
        let a = Self.endpoint(.uploadFile(URL(fileURLWithPath: "/tmp/a.bin")))
        let b = Self.endpoint(.uploadFile(URL(fileURLWithPath: "/tmp/b.bin")))
        #expect(a != b)
        #expect(a == Self.endpoint(.uploadFile(URL(fileURLWithPath: "/tmp/a.bin"))))
        #expect(a.hashValue == Self.endpoint(.uploadFile(URL(fileURLWithPath: "/tmp/a.bin"))).hashValue)
        // Two that cannot be made for a header field each: told apart by their fields.
        let badName = Self.endpoint(.requestPlain, headers: ["X Bad": "1"])
        let badValue = Self.endpoint(.requestPlain, headers: ["X-Bad": "1\r\n"])
        #expect(badName != badValue)
        #expect(badName == Self.endpoint(.requestPlain, headers: ["X Bad": "1"]))
        #expect(Set([badName, badValue, good]).count == 3)
    }

    @Test func endpointsCompareAndHashByTheirRequest() {
        let a = Self.endpoint(.requestParameters(parameters: ["q": "x"], encoding: JSONEncoding.default))
        let same = Self.endpoint(.requestParameters(parameters: ["q": "x"], encoding: JSONEncoding.default))
        let other = Self.endpoint(.requestParameters(parameters: ["q": "y"], encoding: JSONEncoding.default))
        #expect(a == same)
        #expect(a != other)
        #expect(Set([a, same, other]).count == 2)
        #expect(a != a.adding(newHTTPHeaderFields: ["X-A": "1"]))
    }

    /// A multipart endpoint equals itself and one made the same way, though every request it
    /// makes draws a new boundary; other parts or query make it another.
    @Test func multipartEndpointsCompareByTheirParts() {
        let parts: [MultipartFormBodyPart] = [
            .text("hello", name: "greeting"), MultipartFormBodyPart(source: .data(Data([0, 1, 2])), name: "blob", fileName: "b.bin"),
        ]
        let a = Self.endpoint(.uploadMultipart(parts))
        let same = Self.endpoint(.uploadMultipart(parts))
        let other = Self.endpoint(.uploadMultipart([.text("bye", name: "greeting")]))
        let composite = Self.endpoint(.uploadCompositeMultipart(parts, urlParameters: ["q": "1"]))
        #expect(a == a)
        #expect(a == same)
        #expect(a.hashValue == same.hashValue)
        #expect(a != other)
        #expect(a != composite)
        #expect(composite == Self.endpoint(.uploadCompositeMultipart(parts, urlParameters: ["q": "1"])))
        #expect(Set([a, same, other, composite]).count == 3)
    }

    @Test func aStubAnswersWithTheCallersOwnResponse() async throws {
        struct Own: TargetType {
            var baseURL: URL { URL(string: "https://api.example.invalid")! }
            var path: String { "own" }
            var method: HTTPMethod { .get }
            var sampleResponse: EndpointSampleResponse {
                .response(
                    HTTPURLResponse(
                        url: URL(string: "https://elsewhere.invalid/given")!, statusCode: 201, httpVersion: "HTTP/1.1",
                        headerFields: ["X-Given": "yes"])!, Data("body".utf8))
            }
        }
        let response = try await Provider<Own>(stubClosure: Provider<Own>.immediatelyStub(_:)).request(Own()).value
        #expect(response.statusCode == 201)
        #expect(response.value(forHTTPHeaderField: "X-Given") == "yes")
        #expect(response.data == Data("body".utf8))
    }

    @Test func progressSaysWhenItIsComplete() {
        #expect(TransferProgress(direction: .download, completedBytes: 10, totalBytes: 10).completed)
        #expect(!TransferProgress(direction: .download, completedBytes: 9, totalBytes: 10).completed)
        #expect(!TransferProgress(direction: .download, completedBytes: 10, totalBytes: -1).completed)
    }
}

/// Records the headers `willSend` sees.
struct HeaderSnapshot: Interceptor {
    let seen: LockedBox<[String: String]>
    var name: String { "header-snapshot" }

    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        var fields: [String: String] = [:]
        for header in request.headers { fields[header.name.lowercased()] = header.value }
        seen.set(fields)
    }
}

@Suite("Moya parity: what hooks see is what is sent")
struct DefaultHeadersTests {
    /// Fields the transport owns (the connection's), which no hook sets.
    static let connectionFields: Set<String> = ["host", "content-length", "transfer-encoding", "connection"]

    @Test(arguments: TransportKind.allCases)
    func willSendSeesExactlyTheFieldsOnTheWire(_ kind: TransportKind) async throws {
        let seen = LockedBox<[String: String]>([:])
        let provider = Provider<Bin>(transport: kind.make(), interceptors: [HeaderSnapshot(seen: seen)])
        let response = try await provider.request(try Bin("headers", headers: ["X-Own": "mine"])).value
        let wire = try JSONDecoder().decode([String: [String: String]].self, from: response.data)["headers"] ?? [:]
        var received: [String: String] = [:]
        for (name, value) in wire where !Self.connectionFields.contains(name.lowercased()) { received[name.lowercased()] = value }
        #expect(received == seen.get())
        #expect(seen.get()["user-agent"] == DefaultHeaders.userAgent)
        #expect(seen.get()["accept-language"] == DefaultHeaders.acceptLanguage)
        #expect(seen.get()["accept"] == "*/*")
        #expect(seen.get()["accept-encoding"] == provider.transport.acceptEncoding)
        #expect(seen.get()["x-own"] == "mine")
    }

    @Test func theDefaultUserAgentNamesTheLibraryVersionAndSystem() {
        #expect(DefaultHeaders.userAgent.hasPrefix("PluginHost/\(PluginHostVersion.current) ("))
        #if os(Linux)
        #expect(DefaultHeaders.userAgent.contains("(Linux "))
        #endif
        #expect(DefaultHeaders.acceptLanguage.contains(";q=1.0"))
    }

    @Test(arguments: TransportKind.allCases)
    func theDefaultAcceptEncodingIsDecoded(_ kind: TransportKind) async throws {
        let provider = kind.provider()
        let gzip = try await provider.request(try Bin("gzip")).value
        #expect((try JSONSerialization.jsonObject(with: gzip.data) as? [String: Any])?["gzipped"] as? Bool == true)
        let deflate = try await provider.request(try Bin("deflate")).value
        #expect((try JSONSerialization.jsonObject(with: deflate.data) as? [String: Any])?["deflated"] as? Bool == true)
    }

    @Test func aProviderAndATargetOverrideTheDefaults() async throws {
        var defaults = DefaultHeaders.standard(for: try CurlTransport())
        defaults["User-Agent"] = "Shop/3.1"
        let provider = Provider<Bin>(transport: try CurlTransport(), defaultHeaders: defaults)
        let byProvider = try echo(try await provider.request(try Bin("anything")).value)
        #expect(byProvider.header("User-Agent") == "Shop/3.1")
        #expect(byProvider.header("Accept-Language") == DefaultHeaders.acceptLanguage)
        let byTarget = try echo(try await provider.request(try Bin("anything", headers: ["User-Agent": "Checkout/1"])).value)
        #expect(byTarget.header("User-Agent") == "Checkout/1")
        let none = Provider<Bin>(transport: try CurlTransport(), defaultHeaders: [:])
        let bare = try echo(try await none.request(try Bin("anything")).value)
        #expect(bare.header("User-Agent") == nil)
        #expect(bare.header("Accept-Language") == nil)
    }

    @Test func theRequestClosureSeesTheDefaults() async throws {
        let seen = LockedBox<String?>(nil)
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                seen.set(request.value(forHTTPHeaderField: "User-Agent"))
                return request
            }, stubClosure: Provider<Bin>.immediatelyStub(_:))
        _ = try await provider.request(try Bin("get")).value
        #expect(seen.get() == DefaultHeaders.userAgent)
    }
}
