import Foundation
import PluginHost
import Testing

/// A server's error body, as the seeds' APIs send it.
struct APIError: Decodable, Error, Sendable, Equatable {
    let code: Int
    let message: String
}

@Suite("mapServerError: the server's error body as a typed error")
struct ServerErrorTests {
    let provider = Provider<Bin>()

    func respond(_ status: Int, _ body: String, validation: ValidationType = .none) throws -> Bin {
        try Bin(
            "fixture/respond", task: .requestParameters(parameters: ["status": status, "body": body], encoding: URLEncoding.queryString),
            validation: validation)
    }

    /// The error a pipeline fails with.
    func failure(_ pipeline: ResponsePipeline<Response>) async -> NetworkError? {
        if case .failure(let error) = await pipeline.result { return error }
        return nil
    }

    @Test(arguments: [ValidationType.none, .successCodes])
    func aDecodableErrorBodyBecomesTheTypedError(validation: ValidationType) async throws {
        let target = try respond(422, #"{"code": 1042, "message": "quota exceeded"}"#, validation: validation)
        do {
            _ = try await provider.request(target).mapServerError(APIError.self).value
            Issue.record("a 422 with an error body must fail")
        } catch NetworkError.server(let error as APIError, let response) {
            #expect(error == APIError(code: 1042, message: "quota exceeded"))
            #expect(response.statusCode == 422)
        }
        // After a filter step too: its .statusCode error is the one mapped.
        let error = await failure(
            provider.request(try respond(409, #"{"code": 7, "message": "conflict"}"#)).filterSuccessfulStatusCodes().mapServerError(APIError.self))
        guard case .server(let decoded as APIError, let response) = error else {
            Issue.record("expected .server, got \(String(describing: error))")
            return
        }
        #expect(decoded.code == 7)
        #expect(response.statusCode == 409)
        #expect(error?.errorCode == 16)
        #expect(error?.description == "the server answered GET \(response.request?.url?.absoluteString ?? "") with an error (status 409): \(decoded)")
    }

    @Test func atAKeyPath() async throws {
        let target = try respond(400, #"{"error": {"code": 3, "message": "missing field"}}"#)
        let error = await failure(provider.request(target).mapServerError(APIError.self, atKeyPath: "error"))
        guard case .server(let decoded as APIError, _) = error else {
            Issue.record("expected .server, got \(String(describing: error))")
            return
        }
        #expect(decoded == APIError(code: 3, message: "missing field"))
    }

    /// Bodies that do not decode keep the `.statusCode` error, which says why.
    @Test func undecodableBodiesKeepTheStatusErrorAndSayWhy() async throws {
        let bin = try TestServer.url().absoluteString
        let cases: [(Bin, String?, String)] = [
            (try Bin("status/500"), nil, "status code 500 is not accepted (GET \(bin)/status/500); the body is not a APIError: it is empty"),
            (
                try Bin("status/418"), nil,
                "status code 418 is not accepted (GET \(bin)/status/418); the body is not a APIError: it is not JSON (135 bytes)"
            ),
            (
                try respond(404, #"{"message": "no such user"}"#), nil,
                "status code 404 is not accepted (GET \(bin)/fixture/respond?body=%7B%22message%22%3A%20%22no%20such%20user%22%7D&status=404); "
                    + #"the body is not a APIError: key "code" is missing at the top level"#
            ),
            (
                try respond(400, #"{"code": 1, "message": "m"}"#), "error",
                "status code 400 is not accepted (GET \(bin)/fixture/respond?body=%7B%22code%22%3A%201%2C%20%22message%22%3A%20%22m%22%7D&status=400); "
                    + #"the body is not a APIError: key path "error" is not in it"#
            ),
            (
                try respond(400, #"{"code": "one", "message": "m"}"#), nil,
                "status code 400 is not accepted (GET \(bin)/fixture/respond?body=%7B%22code%22%3A%20%22one%22%2C%20%22message%22%3A%20%22m%22%7D&status=400); "
                    + "the body is not a APIError: expected Int at code"
            ),
        ]
        for (target, keyPath, message) in cases {
            let error = await failure(provider.request(target).mapServerError(APIError.self, atKeyPath: keyPath))
            guard case .statusCode(let response) = error else {
                Issue.record("expected .statusCode, got \(String(describing: error))")
                continue
            }
            #expect(message.hasPrefix("status code \(response.statusCode) is not accepted (GET \(response.request?.url?.absoluteString ?? "")); "))
            #expect(error?.description == message)
        }
    }

    /// `200 {"code": 401}`: the seeds' "token expired" envelope, mapped only when the caller says so.
    @Test func errorEnvelopesInA200WhenAsked() async throws {
        func anything(_ json: String) throws -> Bin {
            try Bin("anything", method: .post, task: .requestData(Data(json.utf8)), headers: ["Content-Type": "application/json"])
        }
        let expired = try anything(#"{"code": 401, "message": "token expired"}"#)
        let error = await failure(provider.request(expired).mapServerError(APIError.self, atKeyPath: "json", envelope: { $0.code != 0 }))
        guard case .server(let decoded as APIError, let response) = error else {
            Issue.record("expected .server, got \(String(describing: error))")
            return
        }
        #expect(decoded == APIError(code: 401, message: "token expired"))
        #expect(response.statusCode == 200)
        // Not asked: the same body passes.
        #expect(try await provider.request(expired).mapServerError(APIError.self, atKeyPath: "json").value.statusCode == 200)
        // An envelope that says success, or a body of another shape, passes.
        let fine = try anything(#"{"code": 0, "message": "ok"}"#)
        #expect(try await provider.request(fine).mapServerError(APIError.self, atKeyPath: "json", envelope: { $0.code != 0 }).value.statusCode == 200)
        let html = try await provider.request(try Bin("html")).mapServerError(APIError.self, envelope: { _ in true }).value
        #expect(html.statusCode == 200)
    }

    /// `retry` after `mapServerError` still retries a retryable status whose body decoded.
    @Test func retryAfterMapServerErrorStillRetries() async throws {
        let retries = LockedCounter()
        let policy = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.001) { _ in retries.increment() }
        let error = await failure(
            provider.request(try respond(503, #"{"code": 9, "message": "busy"}"#)).mapServerError(APIError.self).retry(policy))
        guard case .server(let decoded as APIError, let response) = error else {
            Issue.record("expected .server, got \(String(describing: error))")
            return
        }
        #expect(decoded.code == 9)
        #expect(response.statusCode == 503)
        #expect(retries.value == 2)
    }

    @Test func otherFailuresPassThrough() async throws {
        let closed = try Bin("x", base: closedPortURL())
        let error = await failure(provider.request(closed).mapServerError(APIError.self))
        guard case .underlying(let transport, _) = error else {
            Issue.record("expected .underlying, got \(String(describing: error))")
            return
        }
        #expect(transport.kind == .cannotConnect)
        // A custom `when`: 404 counts as "not found", not as an error to decode.
        let missing = try respond(404, "{}")
        let kept = try await provider.request(missing).mapServerError(APIError.self, when: { $0.statusCode >= 500 }).value
        #expect(kept.statusCode == 404)
    }
}
