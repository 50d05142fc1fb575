import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Result pipelines")
struct PipelineTests {
    @Test func buildingSendsNothingAndEachConsumptionSendsOnce() async throws {
        let transport = CountingTransport()
        let provider = Provider<Bin>(transport: transport)
        let pipeline = provider.request(try Bin("get")).filterSuccessfulStatusCodes().mapJSON()
        _ = pipeline.map { $0["url"] }
        #expect(transport.count == 0)
        _ = try await pipeline.value
        #expect(transport.count == 1)
        _ = await pipeline.result
        #expect(transport.count == 2)
    }

    @Test func mapTryMapAndFilter() async throws {
        let provider = Provider<Bin>()
        let pipeline = provider.request(try Bin("anything", task: .requestParameters(parameters: ["n": 41], encoding: URLEncoding.default)))
            .mapJSON()
        let n = try await pipeline.tryMap { json -> Int in
            guard let text = json["args"]?["n"]?.stringValue, let n = Int(text) else { throw NetworkError.filtered("no n") }
            return n
        }.map { $0 + 1 }.value
        #expect(n == 42)

        struct Odd: Error {}
        let thrown = await pipeline.tryMap { _ -> Int in throw Odd() }.result
        guard case .failure(.custom(let inner)) = thrown else {
            Issue.record("got \(thrown)")
            return
        }
        #expect(inner is Odd)

        let filtered = await pipeline.map { _ in 7 }.filter { $0.isMultiple(of: 2) }.result
        guard case .failure(.filtered("7")) = filtered else {
            Issue.record("got \(filtered)")
            return
        }
        // Any other value is named by its type: its description may hold a secret, and errors
        // are logged (the whole value was printed, token and all).
        struct Session: Sendable {
            let accessToken: String
        }
        let session = await pipeline.map { _ in Session(accessToken: "eyJsecret") }.filter { _ in false }.result
        guard case .failure(let error) = session, case .filtered(let shown) = error else {
            Issue.record("got \(session)")
            return
        }
        #expect(shown == "a value of type Session")
        #expect(error.description == "a filter step rejected a value of type Session")
    }

    /// A whole number spelled with a fraction or an exponent is `.int` on every platform, as
    /// ``JSONValue`` says: on Linux `10.0` and `1e2` were `.double` (`json["n"] == 10` was false).
    @Test func aWholeNumberWithAFractionIsAnInt() throws {
        let json = try Response(statusCode: 200, data: Data(#"{"a":10.0,"b":1e2,"c":1.5,"d":-0.0,"e":1e300}"#.utf8)).mapJSON()
        #expect(json["a"] == .int(10))
        #expect(json["b"] == .int(100))
        #expect(json["c"] == .double(1.5))
        #expect(json["d"] == .int(0))
        #expect(json["e"] == .double(1e300))
    }

    @Test func mapJSONAndStrings() async throws {
        let provider = Provider<Bin>()
        let json = try await provider.request(try Bin("json")).mapJSON().value
        #expect(json["slideshow"]?["author"]?.stringValue == "Yours Truly")
        #expect(json["slideshow"]?["slides"]?[0]?["type"]?.stringValue == "all")
        let author = try await provider.request(try Bin("json")).mapString(atKeyPath: "slideshow.author").value
        #expect(author == "Yours Truly")
        let html = try await provider.request(try Bin("html")).mapString().value
        #expect(html.contains("<html>"))
        let empty = try await provider.request(try Bin("status/204")).mapJSON(failsOnEmptyData: false).value
        #expect(empty == .null)
        guard case .failure(.jsonMapping) = await provider.request(try Bin("status/204")).mapJSON().result else {
            Issue.record("empty body did not fail mapJSON")
            return
        }
    }

    @Test func decodableFragmentsAtKeyPaths() async throws {
        let body = Data(#"{"data":{"n":3,"s":"text","b":true,"u":"http://example.com/a","d":2.5,"list":[1,2]}}"#.utf8)
        let target = try Bin("anything")
        var stubbed = target
        stubbed.sample = .networkResponse(200, body)
        let provider = Provider<Bin>(stubClosure: Provider.immediatelyStub)
        let pipeline = provider.request(stubbed)
        #expect(try await pipeline.map(Int.self, atKeyPath: "data.n").value == 3)
        #expect(try await pipeline.map(String.self, atKeyPath: "data.s").value == "text")
        #expect(try await pipeline.map(Bool.self, atKeyPath: "data.b").value == true)
        #expect(try await pipeline.map(URL.self, atKeyPath: "data.u").value == URL(string: "http://example.com/a"))
        #expect(try await pipeline.map(Double.self, atKeyPath: "data.d").value == 2.5)
        #expect(try await pipeline.map([Int].self, atKeyPath: "data.list").value == [1, 2])
        #expect(try await pipeline.map(Int.self, atKeyPath: "data.list.1").value == 2)
        let json = try await pipeline.mapJSON().value
        #expect(json["data"]?["b"] == .bool(true))
        #expect(json["data"]?["n"] == .int(3))
        #expect(json["data"]?["d"] == .double(2.5))
    }

    @Test func retryRetriesRetryableStatusWithBackoff() async throws {
        let transport = CountingTransport()
        let provider = Provider<Bin>(transport: transport)
        let attempts = LockedCounter()
        let policy = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.01) { attempt in
            attempts.append("\(attempt.retry):\(attempt.delay):\(attempt.reason)")
        }
        let response = try await provider.request(try Bin("status/503")).retry(policy).value
        #expect(response.statusCode == 503)
        #expect(transport.count == 3)
        #expect(attempts.log == ["1:0.01:status 503", "2:0.02:status 503"])
        // After a filter the error is retried the same way.
        let filtered = await provider.request(try Bin("status/500")).filterSuccessfulStatusCodes().retry(policy).result
        guard case .failure(.statusCode(let r)) = filtered else {
            Issue.record("got \(filtered)")
            return
        }
        #expect(r.statusCode == 500)
        #expect(transport.count == 6)
    }

    @Test func retryLeavesNonIdempotentMethodsAndOtherCodesAlone() async throws {
        let transport = CountingTransport()
        let provider = Provider<Bin>(transport: transport)
        let policy = RetryPolicy(exponentialBackoffScale: 0.01)
        _ = await provider.request(try Bin("status/503", method: .post)).retry(policy).result
        #expect(transport.count == 1)
        _ = await provider.request(try Bin("status/404")).filterSuccessfulStatusCodes().retry(policy).result
        #expect(transport.count == 2)
    }

    /// A retry placed after a mapping step retries a retryable answer whose body the step could not
    /// decode (a proxy's HTML page for a `503`), as it retries a status a filter step refused: the
    /// answer's status decides, whichever mapping error carries it. A `404` so answered is not
    /// retried. (A `503` that failed to map was the result at once before.)
    @Test(arguments: [503, 404])
    func aRetryAfterAMappingStepLooksAtTheAnswersStatus(_ status: Int) async throws {
        struct User: Decodable { let login: String }
        let transport = CountingTransport()
        let provider = Provider<Bin>(transport: transport)
        let policy = RetryPolicy(exponentialBackoffScale: 0.001)
        func answer(_ body: String) throws -> Bin {
            try Bin(
                "fixture/respond",
                task: .requestParameters(parameters: ["status": status, "body": body, "type": "text/html"], encoding: URLEncoding.queryString))
        }
        func failure<Value>(_ result: Result<Value, NetworkError>) -> String {
            guard case .failure(let error) = result else { return "no failure" }
            switch error {
            case .objectMapping(_, let response): return "objectMapping \(response.statusCode)"
            case .keyPathNotFound(let keyPath, let response): return "keyPathNotFound \(keyPath) \(response.statusCode)"
            case .jsonMapping(let response): return "jsonMapping \(response.statusCode)"
            case .stringMapping(let response): return "stringMapping \(response.statusCode)"
            default: return "\(error)"
            }
        }
        let page = "<html>busy</html>"
        let outcomes = [
            failure(await provider.request(try answer(page)).map(User.self).retry(policy).result),
            failure(await provider.request(try answer(#"{"other": 1}"#)).map(User.self, atKeyPath: "user").retry(policy).result),
            failure(await provider.request(try answer(page)).mapJSON().retry(policy).result),
            failure(await provider.request(try answer(#"{"user": 1}"#)).mapString(atKeyPath: "user").retry(policy).result),
        ]
        #expect(
            outcomes == [
                "objectMapping \(status)", "keyPathNotFound user \(status)", "jsonMapping \(status)", "stringMapping \(status)",
            ])
        // Each sent three times (two retries) when retryable, once otherwise.
        #expect(transport.count == (status == 503 ? 12 : 4))
    }

    /// A retry decides on the method the request was sent with, not on the target's: a `GET`
    /// target that the endpoint closure, the request closure or an interceptor made a `POST` is
    /// sent once, whether it was answered with a retryable status or failed in the transport (the
    /// chain keeps the method it sent on the response, and on the failure); a `POST` target made a
    /// `GET` is retried. Each was decided on the target's method before (and an interceptor's
    /// method, for a transport failure, until the failure kept it).
    @Test(arguments: ["endpoint", "request closure", "interceptor"], [true, false])
    func retryDecidesOnTheMethodSent(_ changedIn: String, _ answered: Bool) async throws {
        for (target, sentAs, sends) in [(HTTPMethod.get, HTTPMethod.post, 1), (.post, .get, 3)] {
            let transport = CountingTransport(
                StubTransport { _ in
                    answered ? .networkResponse(503, Data()) : .networkError(TransportFailure(kind: .timedOut, message: "no answer"))
                })
            let provider = Provider<Bin>(
                endpointClosure: { target in
                    let made = Provider.defaultEndpointMapping(for: target)
                    guard changedIn == "endpoint" else { return made }
                    return Endpoint(
                        url: made.url, sampleResponseClosure: made.sampleResponseClosure, method: sentAs, task: made.task,
                        httpHeaderFields: made.httpHeaderFields)
                },
                requestClosure: { _, request in
                    var request = request
                    if changedIn == "request closure" { request.httpMethod = sentAs.rawValue }
                    return request
                },
                transport: transport,
                interceptors: changedIn == "interceptor" ? [MethodSetter(method: sentAs.rawValue)] : [])
            let result = await provider.request(try Bin("status/503", method: target)).filterSuccessfulStatusCodes()
                .retry(RetryPolicy(exponentialBackoffScale: 0.001)).result
            guard case .failure = result else {
                Issue.record("got \(result)")
                continue
            }
            #expect(transport.count == sends, "\(target.rawValue) sent as \(sentAs.rawValue), changed in the \(changedIn)")
        }
    }

    @Test func retryRetriesTransportFailures() async throws {
        let transport = CountingTransport()
        let provider = Provider<Bin>(transport: transport)
        let result = await provider.request(try Bin("get", base: closedPortURL())).retry(RetryPolicy(retryLimit: 3, exponentialBackoffScale: 0.001))
            .result
        guard case .failure(.underlying(let failure, _)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure.kind == .cannotConnect)
        #expect(transport.count == 4)
    }

    @Test func retryPolicyDefaultsAreDocumented() {
        let policy = RetryPolicy.default
        #expect(policy.retryLimit == 2)
        #expect(policy.delay(beforeRetry: 1) == 0.5)
        #expect(policy.delay(beforeRetry: 2) == 1.0)
        #expect(policy.retryableHTTPMethods == [.delete, .get, .head, .options, .put, .trace])
        #expect(policy.retryableStatusCodes == [408, 500, 502, 503, 504])
        #expect(policy.retryableFailureKinds == [.timedOut, .cannotConnect, .connectionLost, .badResponse])
    }

    /// The backoff stops growing at `maximumBackoff` (60 s by default): it grew past any wait
    /// (infinite from about the 1,025th retry of base 2, and `delay: inf` told to `onRetry`), and
    /// a scale of 0 times that was NaN.
    @Test func theBackoffIsCapped() {
        #expect(RetryPolicy.default.maximumBackoff == 60)
        #expect(RetryPolicy.default.delay(beforeRetry: 8) == 60)
        #expect(RetryPolicy.default.delay(beforeRetry: 2000) == 60)
        #expect(RetryPolicy(exponentialBackoffBase: 1e6).delay(beforeRetry: 100) == 60)
        #expect(RetryPolicy(exponentialBackoffScale: 0).delay(beforeRetry: 2000) == 0)
        #expect(RetryPolicy(maximumBackoff: 3).delay(beforeRetry: 4) == 3)
        #expect(RetryPolicy(maximumBackoff: 3).delay(beforeRetry: 3) == 2)
    }

    @Test func completionCallbackDeliversOnce() async throws {
        let provider = Provider<Bin>()
        let calls = LockedCounter()
        let target = try Bin("get")
        let result: Result<Response, NetworkError> = await withCheckedContinuation { continuation in
            provider.request(target).start { result in
                calls.increment()
                continuation.resume(returning: result)
            }
        }
        #expect(try result.get().statusCode == 200)
        try await Task.sleep(nanoseconds: 100_000_000)
        #expect(calls.value == 1)
    }
}

/// Sets the request's method in `prepare`.
private struct MethodSetter: Interceptor {
    let method: String

    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.setMethod(method)
        return .proceed
    }
}
