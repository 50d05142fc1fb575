import Foundation
import PluginSDK
import Testing

@testable import PluginHost

@Suite("Transports")
struct TransportTests {
    @Test(arguments: TransportKind.allCases) func aChallenged401KeepsItsBody(_ transport: TransportKind) async throws {
        let response = try await transport.provider().request(try Bin("fixture/token")).value
        #expect(response.statusCode == 401)
        #expect(response.value(forHTTPHeaderField: "WWW-Authenticate") == "Bearer realm=\"fixture\"")
        #expect(try response.mapJSON()["error"]?.stringValue == "bad token")
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
