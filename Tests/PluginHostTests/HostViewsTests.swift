import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The host's own views of Foundation's requests and responses (made for speed) say what
/// Foundation says.
@Suite struct HostViewsTests {
    /// `allHeaderFields` as a list sorted by name, the way `ResponseState` read it before.
    static func parsed(_ response: HTTPURLResponse) -> [HTTPHeader] {
        response.allHeaderFields.compactMap { key, value -> HTTPHeader? in
            guard let name = key.base as? String else { return nil }
            return HTTPHeader(name: name, value: value as? String ?? "\(value)")
        }.sorted { $0.name < $1.name }
    }

    static let url = URL(string: "http://127.0.0.1/views")!

    @Test func listedFieldNamesAreFoundations() throws {
        let fields = [
            "content-type": "text/plain", "x-lower": "1", "X-Upper": "2", "www-authenticate": "Basic realm=\"a\"",
            "ETAG": "\"t\"", "content-md5": "m", "cache-control": "no-store", "a_b": "u", "x5y": "d", "Set-Cookie": "c=1",
            "last-modified": "Mon, 02 Jan 2006 15:04:05 GMT", "SERVER": "s", "": "empty name",
        ]
        let response = try #require(HTTPURLResponse(url: Self.url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields))
        #if canImport(FoundationNetworking)
        let listed = try #require(FoundationFieldNames.listed(fields))
        #expect(listed == Self.parsed(response))
        // A second time, from the table of names already worked out.
        #expect(FoundationFieldNames.listed(fields) == listed)
        #else
        #expect(FoundationFieldNames.listed(fields) == nil)
        #endif
    }

    @Test func namesThatBecomeOneOrAreNotASCIIAreLeftToFoundation() {
        #expect(FoundationFieldNames.listed(["content-type": "a", "Content-Type": "b"]) == nil)
        #expect(FoundationFieldNames.listed(["caf\u{e9}": "a"]) == nil)
    }

    @Test func responsesPluginsReadCarryFoundationsFields() async throws {
        // Through the stub transport (which says which fields it made the response from) and the
        // chain, a plugin reads what the app's `HTTPURLResponse` lists.
        let fields = ["etag": "\"v1\"", "x-request-id": "r", "www-authenticate": "Basic", "content-type": "text/plain"]
        let reader = FieldReader()
        let transport = StubTransport { _ in .networkResponseWithHeaders(200, fields, Data("ok".utf8)) }
        let provider = Provider<ViewsTarget>(transport: transport, interceptors: [reader])
        let response = try await provider.request(ViewsTarget()).value
        let seen = reader.seen
        let httpResponse = try #require(response.response)
        #expect(seen.withLock { $0 } == Self.parsed(httpResponse))
        #expect(seen.withLock { $0 }.map(\.name) == ["Content-Length", "Content-Type", "Etag", "WWW-Authenticate", "x-request-id"])
    }

    @Test func aRequestRemadeKeepsWhatTheCopyKept() throws {
        var original = URLRequest(url: URL(string: "http://127.0.0.1/a?b=c")!, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 7)
        original.httpMethod = "PUT"
        original.allHTTPHeaderFields = ["Accept": "text/plain", "X-One": "1"]
        original.httpBody = Data("body".utf8)
        original.mainDocumentURL = URL(string: "http://127.0.0.1/main")
        original.allowsCellularAccess = false
        original.httpShouldHandleCookies = false
        original.networkServiceType = .background
        let state = RequestState(original)
        try state.setHeader(named: "X-Two", value: "2")
        let copied = state.makeURLRequest()
        for made in [state.makeURLRequest(remake: true), copied] {
            #expect(made.url == original.url)
            #expect(made.httpMethod == "PUT")
            #expect(made.cachePolicy == .reloadIgnoringLocalCacheData)
            #expect(made.timeoutInterval == 7)
            #expect(made.allHTTPHeaderFields == ["Accept": "text/plain", "X-One": "1", "X-Two": "2"])
            #expect(made.httpBody == Data("body".utf8))
            #expect(made.mainDocumentURL == URL(string: "http://127.0.0.1/main"))
            #expect(made.allowsCellularAccess == false)
            #expect(made.httpShouldHandleCookies == false)
            #expect(made.networkServiceType == .background)
        }

        // A GET stays a GET; a changed URL and timeout are the new ones; a removed body is gone.
        let get = RequestState(URLRequest(url: URL(string: "http://127.0.0.1/g")!))
        try get.setURL("http://127.0.0.1/h?i=j")
        get.setTimeout(3)
        for remade in [get.makeURLRequest(remake: true), get.makeURLRequest()] {
            #expect(remade.httpMethod == "GET")
            #expect(remade.url?.absoluteString == "http://127.0.0.1/h?i=j")
            #expect(remade.timeoutInterval == 3)
        }
        state.setBodyData(nil)
        #expect(state.makeURLRequest(remake: true).httpBody == nil)

        // A URL relative to a base (set after the request was made, so it is kept so): the same URL
        // as the copy's.
        var relativeRequest = URLRequest(url: URL(string: "http://127.0.0.1/")!)
        relativeRequest.url = URL(string: "p?q=1", relativeTo: URL(string: "http://127.0.0.1/base/")!)
        let based = RequestState(relativeRequest)
        try based.setHeader(named: "X-Three", value: "3")
        #expect(based.makeURLRequest(remake: true).url == based.makeURLRequest().url)
        #expect(based.makeURLRequest(remake: true).url?.absoluteString == "http://127.0.0.1/base/p?q=1")
    }

    @Test func aRequestsOwnTimeoutStillHoldsOnURLSessionAfterAHeaderEdit() async throws {
        // URLSession (on Linux) uses its session's timeout unless the request's was set; a plugin's
        // header edit must not lose that it was (the session's here is the default 60 s).
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                request.timeoutInterval = 1
                return request
            }, transport: URLSessionTransport(), interceptors: [HeaderSetter()])
        let result = await provider.request(try Bin("delay/4")).result
        guard case .failure(.underlying(let failure, nil)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure.kind == .timedOut)
    }

    @Test func stubbedResponsesSayNoProtocol() async throws {
        // The stub transport has no protocol to report (as before the fields were remembered).
        let transport = StubTransport { _ in .networkResponseWithHeaders(200, ["etag": "\"v\""], Data()) }
        let response = try await Provider<ViewsTarget>(transport: transport, interceptors: [FieldReader()]).request(ViewsTarget()).value
        #expect(response.httpVersion == nil)
    }
}

/// A target for ``HostViewsTests``.
private struct ViewsTarget: TargetType {
    var baseURL: URL { URL(string: "http://127.0.0.1")! }
    var path: String { "views" }
    var method: HTTPMethod { .get }
}

/// Sets a request field in `prepare` (what signing or a token does).
private struct HeaderSetter: Interceptor {
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.setHeader("X-Edited", "1")
        return .proceed
    }
}

/// Keeps the response fields its `process` reads.
private struct FieldReader: Interceptor {
    let seen = Locked<[HTTPHeader]>([])

    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        seen.withLock { $0 = result.response?.headers ?? [] }
        return .proceed
    }
}
