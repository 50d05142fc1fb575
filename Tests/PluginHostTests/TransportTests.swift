import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Transports")
struct TransportTests {
    @Test(arguments: TransportKind.allCases) func aChallenged401KeepsItsBody(_ transport: TransportKind) async throws {
        let response = try await transport.provider().request(try Bin("fixture/token")).value
        #expect(response.statusCode == 401)
        #expect(response.value(forHTTPHeaderField: "WWW-Authenticate") == "Bearer realm=\"fixture\"")
        #expect(try response.mapJSON()["error"]?.stringValue == "bad token")
    }

    /// The request a challenge after redirects answers: the last URL; a method a redirect turned
    /// into `GET` leaves the body and its fields behind; another origin, the credentials and cookies
    /// set for the first (not the proxy's).
    @Test func theRequestARedirectLeft() throws {
        var request = URLRequest(url: URL(string: "http://a.test/post")!)
        request.httpMethod = "POST"
        request.httpBody = Data("x=1".utf8)
        for (name, value) in [
            ("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Bearer a"), ("Cookie", "s=1"),
            ("Proxy-Authorization", "Basic cA=="), ("X-Kept", "yes"),
        ] {
            request.setValue(value, forHTTPHeaderField: name)
        }
        let sent = TransportRequest(urlRequest: request, body: .upload)
        let same = sent.redirected(to: URL(string: "http://a.test/kept")!, method: nil)
        #expect(same.urlRequest.url?.absoluteString == "http://a.test/kept")
        #expect(same.urlRequest.httpMethod == "POST")
        #expect(same.urlRequest.httpBody == Data("x=1".utf8))
        #expect(same.urlRequest.value(forHTTPHeaderField: "Authorization") == "Bearer a")
        #expect(same.urlRequest.value(forHTTPHeaderField: "Cookie") == "s=1")
        guard case .upload = same.body else {
            Issue.record("the body's kind changed: \(same.body)")
            return
        }
        let other = sent.redirected(to: URL(string: "http://b.test/seen")!, method: "GET")
        #expect(other.urlRequest.httpMethod == "GET")
        #expect(other.urlRequest.httpBody == nil)
        guard case .inline = other.body else {
            Issue.record("a GET keeps the upload: \(other.body)")
            return
        }
        for name in ["Content-Type", "Authorization", "Cookie"] {
            #expect(other.urlRequest.value(forHTTPHeaderField: name) == nil, "\(name)")
        }
        #expect(other.urlRequest.value(forHTTPHeaderField: "X-Kept") == "yes")
        // The proxy is the same: its answer stays.
        #expect(other.urlRequest.value(forHTTPHeaderField: "Proxy-Authorization") == "Basic cA==")
        // Another port is another origin.
        let port = sent.redirected(to: URL(string: "http://a.test:8080/post")!, method: "POST")
        #expect(port.urlRequest.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(port.urlRequest.httpBody == Data("x=1".utf8))
    }

    @Test(arguments: TransportKind.allCases) func everyCallLeavesTheTransportsTable(_ kind: TransportKind) async throws {
        let transport = kind.make()
        let provider = Provider<Bin>(transport: transport)
        let targets = [try Bin("get"), try Bin("status/404"), try Bin("status/401"), try Bin("bytes/2048"), try Bin("get", base: closedPortURL())]
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<50 { group.addTask { _ = await provider.request(targets[index % targets.count]).result } }
        }
        let progress = LockedCounter()
        _ = try await provider.request(try Bin("bytes/4096")).run { progress.append("\($0.completedBytes)") }
        #expect(progress.log.last == "4096")
        switch transport {
        case let session as URLSessionTransport: #expect(session.router.registeredCount == 0)
        case let curl as CurlTransport: #expect(curl.activeTransferCount == 0)
        default: Issue.record("unexpected transport \(transport)")
        }
    }

    @Test(arguments: TransportKind.allCases) func redirectsAreFollowed(_ transport: TransportKind) async throws {
        let response = try await transport.provider().request(try Bin("redirect/3")).value
        #expect(response.statusCode == 200)
        #expect(response.response?.url?.path == "/get")
    }

    @Test(arguments: TransportKind.allCases) func aCrossOriginRedirectDropsCredentials(_ transport: TransportKind) async throws {
        let target = try TestServer.second().appendingPathComponent("headers").absoluteString
        let response = try await transport.provider().request(
            try Bin(
                "redirect-to",
                task: .requestParameters(
                    parameters: ["url": target], encoding: URLEncoding.queryString), headers: ["Authorization": "Bearer secret", "X-Kept": "yes"])
        ).value
        #expect(response.statusCode == 200)
        let headers = try response.mapJSON()["headers"]
        #expect(headers?["Authorization"] == nil)
        #expect(headers?["X-Kept"]?.stringValue == "yes")
    }
}
