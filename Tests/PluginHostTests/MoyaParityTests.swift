import Foundation
import PluginHost
import PluginSDK
import Testing

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

    @Test func anEmptyBodyWithAKeyPathHonoursFailsOnEmptyData() throws {
        let empty = Response(statusCode: 204, data: Data())
        #expect(try empty.map(String?.self, atKeyPath: "user.name", failsOnEmptyData: false) == nil)
        #expect(try empty.map(String?.self, failsOnEmptyData: false) == nil)
        #expect(throws: NetworkError.self) { try empty.map(String?.self, atKeyPath: "user.name") }
    }

    @Test func addingNoHeadersChangesNothing() {
        let endpoint = Endpoint(
            url: "https://api.example.invalid/x", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .get, task: .requestPlain,
            httpHeaderFields: nil)
        #expect(endpoint.adding(newHTTPHeaderFields: [:]).httpHeaderFields == nil)
        #expect(endpoint.adding(newHTTPHeaderFields: ["A": "1"]).httpHeaderFields == ["A": "1"])
    }
}
