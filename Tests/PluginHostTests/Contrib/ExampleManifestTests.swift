import Foundation
import PluginHost
import PluginSDK
import Testing

@Suite("the example manifest")
struct ExampleManifestTests {
    @Test func allSixLoadFromBundlesAndWorkTogether() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.exampleManifestProvider(logger: ["level": "headers", "output": "file", "file": f.root + "/http.log"])
        #expect(provider.interceptors.map(\.name) == ["activity", "access-token", "credentials", "cache", "signature", "logger"])
        provider.services.setValue("demo-token", forKey: "access_token")
        provider.services.setValue("fixture-signing-secret", forKey: "signing_secret")
        let events = LockedCounter()
        let subscription = provider.services.subscribe { events.append("\($0.plugin).\($0.name)") }
        defer { subscription.cancel() }

        let verified = try await provider.request(try Bin("fixture/verify-hmac")).mapJSON().value
        #expect(verified["valid"] == .bool(true))
        let key = counterKey()
        let target = try counted(key, headers: ["Cache-Control": "public, max-age=60"])
        let first = try await provider.request(target).value
        let second = try await provider.request(target).value
        #expect(first.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(second.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(first.request?.value(forHTTPHeaderField: "Authorization") == "Bearer demo-token")
        #expect(first.request?.value(forHTTPHeaderField: "X-Signature")?.count == 64)
        #expect(try await serverHits(key) == 1)
        #expect(events.log == ["activity.began", "activity.ended", "activity.began", "activity.ended", "activity.began", "activity.ended"])
        let log = try String(contentsOfFile: f.root + "/http.log", encoding: .utf8)
        #expect(log.components(separatedBy: "\n→ ").count == 2)
        #expect(!log.contains("demo-token"))
    }
}
