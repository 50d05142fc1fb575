import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Slide: Decodable, Sendable {
    let title: String
    let type: String
}

@Suite("Errors")
struct ErrorTests {
    let provider = Provider<Bin>()

    /// An error's text (printed, logged, sent to a crash reporter through `NSError`) shows the
    /// request's URL without its password, fragment or secret query values: it showed them all.
    @Test func anErrorsTextKeepsTheURLsSecretsOut() throws {
        let url = try #require(URL(string: "https://svc:s3cret@h.example/p?page=2&api_key=K123&X-Amz-Signature=S456&userToken=T789#access_token=F0"))
        let response = Response(statusCode: 401, data: Data(), request: URLRequest(url: url))
        #expect(response.requestLine == "GET https://h.example/p?page=2&api_key=<redacted>&X-Amz-Signature=<redacted>&userToken=<redacted>")
        for error in [NetworkError.statusCode(response), .jsonMapping(response), .requestMapping(url.absoluteString)] {
            let texts = [error.description, (error as NSError).userInfo[NSLocalizedDescriptionKey] as? String ?? ""]
            for text in texts {
                for secret in ["s3cret", "K123", "S456", "T789", "F0"] { #expect(!text.contains(secret), "\(text)") }
            }
        }
        // A URL without anything to hide is shown as it is.
        let plain = Response(statusCode: 500, data: Data(), request: URLRequest(url: try #require(URL(string: "http://127.0.0.1:8080/views?id=7"))))
        #expect(plain.requestLine == "GET http://127.0.0.1:8080/views?id=7")
    }

    /// An error's text hides a secret query value whose name the logger would hide: a form's
    /// nested name, a numbered repeat, a name whose last words are a secret's. The two matched
    /// names apart, and an error showed `user[password]`, `password2` and `secret_key`.
    @Test func anErrorsTextHidesTheNamesTheLoggerHides() throws {
        let url = try #require(
            URL(string: "https://h.example/p?user%5Bpassword%5D=P1&password2=P2&secret_key=K3&AuthenticationResult.IdToken=T4&page=2"))
        let response = Response(statusCode: 403, data: Data(), request: URLRequest(url: url))
        #expect(
            response.requestLine
                == "GET https://h.example/p?user%5Bpassword%5D=<redacted>&password2=<redacted>&secret_key=<redacted>&AuthenticationResult.IdToken=<redacted>&page=2"
        )
    }

    /// Two responses are equal when they say the same: their header fields count (URL loading's
    /// own `==` compared none on Linux, and identity on Darwin).
    @Test func responsesCompareTheirHeaderFields() throws {
        let url = try #require(URL(string: "http://127.0.0.1/r"))
        func response(_ fields: [String: String]) -> Response {
            Response(
                statusCode: 200, data: Data("x".utf8), request: URLRequest(url: url),
                response: HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields))
        }
        #expect(response(["ETag": "\"a\""]) == response(["ETag": "\"a\""]))
        #expect(response(["ETag": "\"a\""]) == response(["etag": "\"a\""]))
        #expect(response(["ETag": "\"a\""]) != response(["ETag": "\"b\""]))
        #expect(response(["ETag": "\"a\""]) != response([:]))
    }

    @Test func nonJSONBodyIsJSONMapping() async throws {
        let result = await provider.request(try Bin("html")).mapJSON().result
        guard case .failure(.jsonMapping(let response)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(response.statusCode == 200)
        #expect(!response.data.isEmpty)
    }

    @Test func missingKeyPathIsKeyPathNotFound() async throws {
        let result = await provider.request(try Bin("json")).mapString(atKeyPath: "slideshow.missing").result
        guard case .failure(.keyPathNotFound(let keyPath, let response)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(keyPath == "slideshow.missing")
        #expect(response.statusCode == 200)
        let decoded = await provider.request(try Bin("json")).map(Slide.self, atKeyPath: "slideshow.nope").result
        guard case .failure(.keyPathNotFound("slideshow.nope", _)) = decoded else {
            Issue.record("got \(decoded)")
            return
        }
    }

    @Test func decodableTypeMismatchIsObjectMapping() async throws {
        let result = await provider.request(try Bin("json")).map(Int.self, atKeyPath: "slideshow.title").result
        guard case .failure(.objectMapping(let inner, let response)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(inner is DecodingError)
        #expect(response.statusCode == 200)
        let slides = try await provider.request(try Bin("json")).map([Slide].self, atKeyPath: "slideshow.slides").value
        #expect(slides.first?.title == "Wake up to WonderWidgets!")
    }

    @Test(arguments: [404, 418, 500, 503])
    func errorStatusWithEachFilter(code: Int) async throws {
        let pipeline = provider.request(try Bin("status/\(code)"))
        let filters: [ResponsePipeline<Response>] = [
            pipeline.filterSuccessfulStatusCodes(),
            pipeline.filterSuccessfulStatusAndRedirectCodes(),
            pipeline.filter(statusCodes: 200...299),
            pipeline.filter(statusCode: 200),
        ]
        for filtered in filters {
            let result = await filtered.result
            guard case .failure(.statusCode(let response)) = result else {
                Issue.record("got \(result)")
                continue
            }
            #expect(response.statusCode == code)
        }
        #expect(try await pipeline.filter(statusCode: code).value.statusCode == code)
        #expect(try await pipeline.filter(statusCodes: 400..<600).value.statusCode == code)
    }

    @Test func redirectCodePassesOnlyTheRedirectFilter() async throws {
        let pipeline = provider.request(try Bin("status/304"))
        #expect(try await pipeline.filterSuccessfulStatusAndRedirectCodes().value.statusCode == 304)
        guard case .failure(.statusCode) = await pipeline.filterSuccessfulStatusCodes().result else {
            Issue.record("304 passed the success filter")
            return
        }
    }

    @Test func timeoutIsUnderlyingTimedOut() async throws {
        let provider = Provider<Bin>(requestClosure: { _, request in
            var request = request
            request.timeoutInterval = 0.5
            return request
        })
        let result = await provider.request(try Bin("delay/3")).result
        guard case .failure(.underlying(let failure, nil)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure.kind == .timedOut)
        #expect(result.isTimeout)
    }

    @Test func connectionRefusedIsUnderlyingCannotConnect() async throws {
        let result = await provider.request(try Bin("get", base: closedPortURL())).result
        guard case .failure(.underlying(let failure, nil)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure.kind == .cannotConnect)
    }

    @Test func everyCaseHasAReadableDescription() throws {
        let response = Response(statusCode: 500, data: Data("x".utf8), request: URLRequest(url: URL(string: "http://h/p")!))
        struct Inner: Error, CustomStringConvertible { var description: String { "inner" } }
        let cases: [(NetworkError, String)] = [
            (.requestMapping("bad"), "cannot make a request: \"bad\" is not an absolute http or https URL"),
            (.parameterEncoding(Inner()), "cannot encode parameters: inner"),
            (.encodableMapping(Inner()), "cannot encode the Encodable body: inner"),
            (.fileAccess(path: "/f", reason: "gone"), "cannot use file /f: gone"),
            (.statusCode(response), "status code 500 is not accepted (GET http://h/p)"),
            (.jsonMapping(response), "the body of GET http://h/p is not JSON (1 bytes)"),
            (.stringMapping(response), "the body of GET http://h/p is not a string"),
            (.objectMapping(Inner(), response), "cannot decode the body of GET http://h/p: inner"),
            (.keyPathNotFound(keyPath: "a.b", response), "key path \"a.b\" is not in the body of GET http://h/p"),
            (
                .underlying(TransportFailure(kind: .timedOut, message: "The request timed out."), nil),
                "transport failed (timedOut): The request timed out."
            ),
            (.cancelled, "the request was cancelled"),
            (.interceptor(name: "auth", hook: .willSend, message: "no token"), "interceptor \"auth\" failed in willSend: no token"),
            (.credentialRefresh(key: "access_token", message: "denied"), "refreshing credential \"access_token\" failed: denied"),
            (.filtered("42"), "a filter step rejected 42"),
            (.custom(Inner()), "a pipeline step failed: inner"),
            (.invalidHeader(name: "X-A", reason: "is not a token (RFC 9110)"), "cannot make a request: header \"X-A\" is not a token (RFC 9110)"),
        ]
        for (error, text) in cases {
            #expect(error.description == text)
            #expect(error.localizedDescription == text)
        }
        #expect(NetworkError.statusCode(response).response == response)
        #expect(NetworkError.cancelled.response == nil)
        #expect(NetworkError.invalidHeader(name: "X-A", reason: "").errorCode == 17)
    }
}

extension Result where Failure == NetworkError {
    var isTimeout: Bool {
        if case .failure(let error) = self { return error.isTimeout }
        return false
    }
}
