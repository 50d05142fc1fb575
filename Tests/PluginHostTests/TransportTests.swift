import Foundation
@testable import PluginHost
import PluginSDK
import Testing

@Suite("URLSession transport")
struct TransportTests {
    @Test func aChallenged401KeepsItsBody() async throws {
        let response = try await Provider<Bin>().request(try Bin("fixture/token")).value
        #expect(response.statusCode == 401)
        #expect(response.value(forHTTPHeaderField: "WWW-Authenticate") == "Bearer realm=\"fixture\"")
        #expect(try response.mapJSON()["error"]?.stringValue == "bad token")
    }

    @Test func everyCallLeavesTheTransportsTable() async throws {
        let transport = URLSessionTransport()
        let provider = Provider<Bin>(transport: transport)
        let targets = [try Bin("get"), try Bin("status/404"), try Bin("status/401"), try Bin("bytes/2048"), try Bin("get", base: closedPortURL())]
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<50 { group.addTask { _ = await provider.request(targets[index % targets.count]).result } }
        }
        let progress = LockedCounter()
        _ = try await provider.request(try Bin("bytes/4096")).run { progress.append("\($0.completedBytes)") }
        #expect(progress.log.last == "4096")
        #expect(transport.router.registeredCount == 0)
    }
}
