import AccessTokenPlugin
import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The access-token plugin's count of refreshes within `refreshWindow` against a wall clock that
/// is set back.
@Suite("access-token plugin: refresh window clock")
struct AccessTokenClockTests {
    /// Services whose wall clock is `offset` seconds off the real one (the monotonic clock runs on).
    struct ShiftedClock: HostServices {
        let base: any HostServices
        let offset: Locked<Double>
        func value(forKey key: String) -> String? { base.value(forKey: key) }
        func setValue(_ value: String?, forKey key: String) { base.setValue(value, forKey: key) }
        func emit(_ name: String, fields: [String: String]) { base.emit(name, fields: fields) }
        func log(_ level: LogLevel, _ message: String) { base.log(level, message) }
        func now() -> Double { base.now() + offset.withLock { $0 } }
        func monotonicNanoseconds() -> UInt64 { base.monotonicNanoseconds() }
        func randomBytes(_ count: Int) -> [UInt8] { base.randomBytes(count) }
    }

    /// A refresh counts within `refreshWindow` of monotonic time: after the wall clock was set
    /// back an hour, the refreshes before it stayed "recent" for that hour, and every `401`
    /// failed as an excessive refresh.
    @Test func aWallClockSetBackKeepsNoRefreshRecent() async throws {
        let services = PluginServices()
        let host = ShiftedClock(base: services.hostServices(for: "access-token"), offset: Locked(0))
        let plugin = try AccessTokenPlugin(
            configuration: PluginConfiguration(plugin: "access-token", values: ["maxRefreshes": 1, "refreshWindow": 0.5]), host: host)
        let target = TargetInfo(method: "GET", baseURL: "https://api.test", path: "/me")
        func refused(_ id: UInt64, token: String) throws -> ProcessAction {
            services.setValue(token, forKey: "access_token")
            let context = InterceptorContext(target: target, requestID: id, attempt: 1, services: host)
            let request = RequestState(URLRequest(url: URL(string: "https://api.test/me")!))
            #expect(try plugin.prepare(InterceptorRequest(backend: request), context: context) == .proceed)
            let response = ResponseState(SyntheticResponse(statusCode: 401, headers: [], body: []), url: URL(string: "https://api.test/me")!)
            return try plugin.process(.response(InterceptorResponse(backend: response)), context: context)
        }
        #expect(try refused(1, token: "t1") == .retry(refresh: CredentialRefresh(key: "access_token", staleValue: "t1")))
        try await Task.sleep(nanoseconds: 700_000_000)
        host.offset.withLock { $0 = -3600 }
        #expect(try refused(2, token: "t2") == .retry(refresh: CredentialRefresh(key: "access_token", staleValue: "t2")))
        // Within the window, the limit holds.
        do {
            _ = try refused(3, token: "t3")
            Issue.record("a second refresh within the window was allowed")
        } catch {
            #expect("\(error)" == "access-token: excessive refresh: 1 refreshes within 0.5 s (maxRefreshes 1)")
        }
    }
}
