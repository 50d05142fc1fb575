import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("access-token plugin (loaded from its bundle)")
struct AccessTokenPluginTests {
    func authorization(_ provider: Provider<Bin>, options: [String: String] = [:], headers: [String: String]? = nil) async throws -> [String] {
        let response = try await provider.request(try Bin("anything", headers: headers, options: options)).mapJSON().value
        let value = response["headers"]?["Authorization"]?.stringValue
        return value.map { $0.components(separatedBy: ", ") } ?? []
    }

    @Test func bearerFromTheHostStoreReplacingAnyEarlierValue() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        provider.services.setValue("t0k3n", forKey: "access_token")
        let bearer = try await provider.request(try Bin("bearer")).mapJSON().value
        #expect(bearer["token"]?.stringValue == "t0k3n")
        #expect(try await authorization(provider, headers: ["Authorization": "Bearer stale"]) == ["Bearer t0k3n"])
    }

    /// `"origins": null` is the default (https and loopback): it was an empty list, and the token
    /// went nowhere, silently.
    @Test func nullOriginsAreTheDefault() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", ["origins": NSNull(), "required": true])])
        provider.services.setValue("t0k3n", forKey: "access_token")
        let bearer = try await provider.request(try Bin("bearer")).mapJSON().value
        #expect(bearer["token"]?.stringValue == "t0k3n")
    }

    @Test func eachRequestCarriesTheStoresCurrentToken() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        // Long tokens of one length, one repeated: the plugin keeps the last value it read and
        // the field it made, and must tell a new token from the kept one by its bytes.
        for token in [
            "token-aaaaaaaaaaaaaaaaaaaa-1", "token-aaaaaaaaaaaaaaaaaaaa-1", "token-aaaaaaaaaaaaaaaaaaaa-2", "short", "token-aaaaaaaaaaaaaaaaaaaa-1",
        ] {
            provider.services.setValue(token, forKey: "access_token")
            #expect(try await authorization(provider) == ["Bearer " + token])
            #expect(try await authorization(provider, options: ["auth": "basic"]) == ["Basic " + token])
            #expect(try await authorization(provider) == ["Bearer " + token])
        }
    }

    @Test func schemesPerTarget() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        provider.services.setValue("abc", forKey: "access_token")
        #expect(try await authorization(provider, options: ["auth": "basic"]) == ["Basic abc"])
        #expect(try await authorization(provider, options: ["auth": "custom:Token"]) == ["Token abc"])
        #expect(try await authorization(provider, options: ["auth": "none"]) == [])
        let bad = await provider.request(try Bin("get", options: ["auth": "custom:Two Words"])).result
        guard case .failure(.interceptor("access-token", .prepare, let message)) = bad else {
            Issue.record("got \(bad)")
            return
        }
        #expect(message == "access-token: pluginOptions[\"auth\"] must be bearer, basic, custom:<Scheme> or none, not \"custom:Two Words\"")
    }

    @Test func tokenFromEnvironmentThenFile() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let variable = "PLUGINHOST_TEST_TOKEN_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        setenv(variable, "from-env", 1)
        defer { unsetenv(variable) }
        let file = f.root + "/token.txt"
        try "from-file\n".write(toFile: file, atomically: true, encoding: .utf8)
        let envProvider = try f.provider([("access-token", ["env": variable, "file": file])])
        #expect(try await authorization(envProvider) == ["Bearer from-env"])
        let fileProvider = try f.provider([("access-token", ["env": variable + "_UNSET", "file": file])])
        #expect(try await authorization(fileProvider) == ["Bearer from-file"])
    }

    /// A token read from a file (the store empty) that gets a `401` is refreshed like a stored
    /// one: the refresher is called with it, and its token goes into the store and is sent.
    @Test func aTokenFromAFileIsRefreshedOnA401() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let file = f.root + "/token.txt"
        try "bad-1\n".write(toFile: file, atomically: true, encoding: .utf8)
        let provider = try f.provider([("access-token", ["file": file])])
        try await expectRefreshedFromBad1(provider)
        #expect(provider.services.value(forKey: "access_token") == "good-1")
    }

    /// Registers a refresher answering `good-1`, sends a request the fixture refuses for any
    /// other token, and expects it answered after one refresh of `bad-1`.
    func expectRefreshedFromBad1(_ provider: Provider<Bin>) async throws {
        let refreshes = LockedCounter()
        provider.services.registerRefresher(forKey: "access_token") { stale in
            refreshes.append(stale ?? "-")
            return "good-1"
        }
        let response = try await provider.request(try Bin("fixture/token")).value
        #expect(response.statusCode == 200)
        #expect(try response.mapJSON()["token"]?.stringValue == "good-1")
        #expect(refreshes.log == ["bad-1"])
    }

    @Test func requiredTokenMissingFailsClearly() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", ["required": true, "env": "PLUGINHOST_NO_SUCH_VARIABLE"])])
        let result = await provider.request(try Bin("get")).result
        guard case .failure(.interceptor("access-token", .prepare, let message)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(message == "access-token: no token (looked in host store key \"access_token\", environment variable PLUGINHOST_NO_SUCH_VARIABLE)")
        let optional = try f.provider([("access-token", ["required": false])])
        #expect(try await authorization(optional) == [])
    }

    @Test func a401RefreshesOnceAndRetries() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        provider.services.setValue("bad-1", forKey: "access_token")
        try await expectRefreshedFromBad1(provider)
        // A 401 that persists after the retry is delivered, not retried again.
        let always = try await provider.request(try Bin("status/401")).value
        #expect(always.statusCode == 401)
    }

    /// A `401` to a request that went without the plugin's token (none in the store, the app's
    /// own `Authorization` sent) is delivered: the plugin refreshes only tokens it sent. Once the
    /// store has a token, a `401` to it is refreshed and retried once.
    @Test func onlyATokenThePluginSentIsRefreshed() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        let refreshes = LockedCounter()
        provider.services.registerRefresher(forKey: "access_token") { stale in
            refreshes.append(stale ?? "-")
            return "good-\(refreshes.log.count)"
        }
        let own = try await provider.request(try Bin("fixture/token", headers: ["Authorization": "Bearer app-own"])).value
        #expect(own.statusCode == 401)
        #expect(refreshes.log.isEmpty)
        // The same request, with a token in the store: the plugin's, refreshed once.
        provider.services.setValue("bad-1", forKey: "access_token")
        let response = try await provider.request(try Bin("fixture/token", headers: ["Authorization": "Bearer app-own"])).value
        #expect(response.statusCode == 200)
        #expect(try response.mapJSON()["token"]?.stringValue == "good-1")
        #expect(refreshes.log == ["bad-1"])
    }

    /// A provider on `kind` with access-token, the token `bad-1` in the store, and a refresher
    /// that answers `good-1`, `good-2`, … and keeps each stale token it was asked to replace.
    func refreshing(_ f: PluginFixtures, _ kind: TransportKind) throws -> (Provider<Bin>, LockedCounter) {
        let provider = try f.provider([("access-token", [:])], transport: kind.make())
        let refreshes = LockedCounter()
        provider.services.registerRefresher(forKey: "access_token") { stale in
            refreshes.append(stale ?? "-")
            return "good-\(refreshes.log.count)"
        }
        provider.services.setValue("bad-1", forKey: "access_token")
        return (provider, refreshes)
    }

    /// A `401` from another origin a redirect led to answers a request that no longer carried
    /// the token (the transport left it behind): nothing is refreshed. The response's request as
    /// sent used to be the first hop's, token included, and every such call cost a refresh.
    @Test(arguments: TransportKind.allCases) func a401FromAnotherOriginAfterARedirectRefreshesNothing(_ kind: TransportKind) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let (provider, refreshes) = try refreshing(f, kind)
        let elsewhere = try TestServer.second().appendingPathComponent("fixture/token").absoluteString
        let target = try Bin("redirect-to", task: .requestParameters(parameters: ["url": elsewhere], encoding: URLEncoding.queryString))
        let response = try await provider.request(target).value
        #expect(response.statusCode == 401)
        #expect(refreshes.log.isEmpty)
        // The same origin after a redirect keeps the token: its 401 is refreshed, as without one.
        let here = try TestServer.url().appendingPathComponent("fixture/token").absoluteString
        let same = try await provider.request(
            try Bin("redirect-to", task: .requestParameters(parameters: ["url": here], encoding: URLEncoding.queryString))
        ).value
        #expect(same.statusCode == 200)
        #expect(refreshes.log == ["bad-1"])
    }

    /// Redirects that leave the origin and come back to it: the transports left the token
    /// behind at the first crossing, and the last hop, back at the request's origin, went
    /// without it. Its `401` is not the token's to refresh. The chain compared only the first and
    /// the last URL, and refreshed.
    @Test(arguments: TransportKind.allCases) func a401AfterRedirectsThatLeftAndCameBackRefreshesNothing(_ kind: TransportKind) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let (provider, refreshes) = try refreshing(f, kind)
        func outAndBack(_ path: String) throws -> Bin {
            let back = try TestServer.url().appendingPathComponent(path).absoluteString
            var away = URLComponents(url: try TestServer.second().appendingPathComponent("redirect-to"), resolvingAgainstBaseURL: false)!
            away.queryItems = [URLQueryItem(name: "url", value: back)]
            return try Bin("redirect-to", task: .requestParameters(parameters: ["url": away.url!.absoluteString], encoding: URLEncoding.queryString))
        }
        let echo = try await provider.request(try outAndBack("anything")).mapJSON().value
        #expect(echo["url"]?.stringValue?.hasPrefix(try TestServer.url().absoluteString) == true)
        #expect(echo["headers"]?["Authorization"] == nil, "the transport left the token behind at the first crossing")
        let response = try await provider.request(try outAndBack("fixture/token")).value
        #expect(response.statusCode == 401)
        #expect(refreshes.log.isEmpty)
    }

    @Test func concurrent401sShareOneRefresh() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        let refreshes = LockedCounter()
        provider.services.setValue("bad-1", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in
            refreshes.increment()
            try await Task.sleep(nanoseconds: 300_000_000)
            return "good-shared"
        }
        let target = try Bin("fixture/token")
        let codes = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 { group.addTask { try await provider.request(target).value.statusCode } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(codes == Array(repeating: 200, count: 8))
        #expect(refreshes.value == 1)
    }

    @Test func aRequestCarryingAnOlderTokenRetriesWithoutRefresh() async throws {
        /// Plays "another request refreshed meanwhile": swaps the stored token after the first send.
        struct RefreshedMeanwhile: Interceptor {
            func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
                if context.attempt == 1 { context.services.setValue("good-new", forKey: "access_token") }
            }
        }
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])], after: [RefreshedMeanwhile()])
        let refreshes = LockedCounter()
        provider.services.setValue("bad-old", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in
            refreshes.increment()
            return "good-refreshed"
        }
        let response = try await provider.request(try Bin("fixture/token")).value
        #expect(response.statusCode == 200)
        #expect(try response.mapJSON()["token"]?.stringValue == "good-new")
        #expect(refreshes.value == 0)
    }

    /// A `401` to a request in flight when the app logged out (emptied the store) is delivered:
    /// it was refreshed, and the refresh put a token back into the emptied store.
    @Test func a401AfterLogoutRefreshesNothing() async throws {
        /// Plays "the app logged out": empties the store after the first send.
        struct LoggedOutMeanwhile: Interceptor {
            func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
                if context.attempt == 1 { context.services.setValue(nil, forKey: "access_token") }
            }
        }
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])], after: [LoggedOutMeanwhile()])
        let refreshes = LockedCounter()
        provider.services.setValue("t1", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in
            refreshes.increment()
            return "t2"
        }
        let response = try await provider.request(try Bin("status/401")).value
        #expect(response.statusCode == 401)
        #expect(refreshes.value == 0)
        #expect(provider.services.value(forKey: "access_token") == nil)
    }

    /// A value the app stores while a refresh runs (a logout, another user's login) stays: the
    /// refresher's token goes into the store only over the value the refresh began with. The
    /// refresh put its token over it, undoing the logout, or sending the next requests as the
    /// user who had left.
    @Test(arguments: ["good-B", nil] as [String?])
    func aValueStoredDuringARefreshIsKept(_ stored: String?) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        provider.services.setValue("bad-A", forKey: "access_token")
        let started = LockedBox(false)
        let release = LockedBox(false)
        provider.services.registerRefresher(forKey: "access_token") { _ in
            started.set(true)
            // Bounded: 20 s at most, then the refresh returns anyway.
            for _ in 0..<2000 where !release.get() { try await Task.sleep(nanoseconds: 10_000_000) }
            return "good-A"
        }
        let target = try Bin("fixture/token")
        let request = Task { await provider.request(target).result }
        #expect(await eventually(30) { started.get() })
        provider.services.setValue(stored, forKey: "access_token")
        release.set(true)
        let result = await request.value
        #expect(provider.services.value(forKey: "access_token") == stored)
        let response = try result.get()
        if let stored {
            // The retry after the refresh sent what the store holds.
            #expect(response.statusCode == 200)
            #expect(try response.mapJSON()["token"]?.stringValue == stored)
        } else {
            #expect(response.statusCode == 401)
        }
    }

    @Test func aRefreshFailureFailsEveryWaitingRequest() async throws {
        struct Denied: Error, CustomStringConvertible { var description: String { "identity provider said no" } }
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        provider.services.setValue("bad-1", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in
            try await Task.sleep(nanoseconds: 300_000_000)
            throw Denied()
        }
        let target = try Bin("fixture/token")
        let results = await withTaskGroup(of: Result<Response, NetworkError>.self) { group in
            for _ in 0..<4 { group.addTask { await provider.request(target).result } }
            return await group.reduce(into: [Result<Response, NetworkError>]()) { $0.append($1) }
        }
        for result in results {
            guard case .failure(.credentialRefresh("access_token", "identity provider said no")) = result else {
                Issue.record("got \(result)")
                continue
            }
        }
    }

    @Test func excessiveRefreshIsAnError() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", ["maxRefreshes": 1, "refreshWindow": 60])])
        let count = LockedCounter()
        provider.services.setValue("bad-0", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in "bad-\(count.increment())" }
        #expect(try await provider.request(try Bin("fixture/token")).value.statusCode == 401)
        let second = await provider.request(try Bin("fixture/token")).result
        guard case .failure(.interceptor("access-token", .process, let message)) = second else {
            Issue.record("got \(second)")
            return
        }
        #expect(message == "access-token: excessive refresh: 1 refreshes within 60.0 s (maxRefreshes 1)")
        #expect(count.value == 1)
    }

    /// A refresh that gave the same token back is over: a later `401` with that token asks for a
    /// refresh of its own, which counts against `maxRefreshes` (it shared the first for good, and
    /// only the host's limit stopped the refreshes).
    @Test func aRefreshThatGaveTheSameTokenBackIsSharedNoMore() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", ["maxRefreshes": 1, "refreshWindow": 60])], services: PluginServices(maxRefreshes: 100))
        let count = LockedCounter()
        provider.services.setValue("bad-0", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in
            count.increment()
            return "bad-0"
        }
        #expect(try await provider.request(try Bin("fixture/token")).value.statusCode == 401)
        for _ in 0..<2 {
            let again = await provider.request(try Bin("fixture/token")).result
            guard case .failure(.interceptor("access-token", .process, let message)) = again else {
                Issue.record("got \(again)")
                continue
            }
            #expect(message == "access-token: excessive refresh: 1 refreshes within 60.0 s (maxRefreshes 1)")
        }
        #expect(count.value == 1)
    }

    /// Without `origins` the token goes to https and to loopback hosts only: a request with a
    /// token over plain http to any other host fails before anything is sent (one without a
    /// token goes: it has nothing to give away). With `origins`, only they get the token (`*.`
    /// names the hosts under a domain), and a request elsewhere goes without it.
    @Test func theTokenGoesOnlyToHTTPSAndLoopbackUnlessOriginsAreListed() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let sent = LockedCounter()
        let stub = StubTransport { request in
            sent.append(request.url?.absoluteString ?? "?")
            return .networkResponse(200, Data((request.value(forHTTPHeaderField: "Authorization") ?? "none").utf8))
        }
        func authorization(_ provider: Provider<Bin>, _ base: String) async throws -> Result<String, NetworkError> {
            await provider.request(try Bin("x?q=1", base: URL(string: base)!)).result.map { String(decoding: $0.data, as: UTF8.self) }
        }
        let plain = try f.provider([("access-token", [:])], transport: stub)
        plain.services.setValue("t0k3n", forKey: "access_token")
        let admitted = [
            "https://api.example.test", "HTTPS://API.example.test:8443", "http://127.0.0.1:9", "http://127.255.0.1", "http://localhost:8080",
            "http://app.LOCALHOST", "http://[::1]:9",
        ]
        for base in admitted { #expect(try await authorization(plain, base).get() == "Bearer t0k3n", "\(base)") }
        let refused: [(String, String)] = [
            ("http://api.example.test", "http://api.example.test"), ("http://api.example.test:8080", "http://api.example.test:8080"),
            ("http://127.0.0.1.example.test", "http://127.0.0.1.example.test"), ("http://127.1", "http://127.1"),
            ("http://user:secret@localhost.example.test:80", "http://localhost.example.test:80"), ("http://[::2]", "http://[::2]"),
            // Names libcurl asks DNS for: a trailing dot, an octet with a leading zero.
            ("http://localhost.", "http://localhost."), ("http://127.0.0.09:9", "http://127.0.0.09:9"),
        ]
        for (base, named) in refused {
            let result = try await authorization(plain, base)
            guard case .failure(.interceptor("access-token", .prepare, let message)) = result else {
                Issue.record("\(base): got \(result)")
                continue
            }
            #expect(
                message
                    == "access-token: the token is not sent over http to \(named) (without origins, it goes to https and to loopback hosts only; "
                    + "list \"\(named)\" in origins to send it there)")
        }
        #expect(sent.log.count == admitted.count, "nothing was sent for the refused ones: \(sent.log)")
        // Without a token, nothing is given away: the request goes.
        let empty = try f.provider([("access-token", [:])], transport: stub)
        #expect(try await authorization(empty, "http://api.example.test").get() == "none")

        let listed = try f.provider(
            [("access-token", ["origins": ["http://api.example.test:8080", "https://*.Example.test", "https://other.test/"]])], transport: stub)
        listed.services.setValue("t0k3n", forKey: "access_token")
        for base in ["http://api.example.test:8080", "https://a.example.test", "https://a.b.EXAMPLE.test:443", "https://other.test"] {
            #expect(try await authorization(listed, base).get() == "Bearer t0k3n", "\(base)")
        }
        for base in [
            "http://api.example.test", "https://api.example.test:8080", "https://example.test", "http://a.example.test", "https://127.0.0.1",
            "http://localhost",
            // A host that does not read as a name (a percent-encoded `/`) is under no origin.
            "https://evil%2F.example.test",
        ] {
            #expect(try await authorization(listed, base).get() == "none", "\(base)")
        }
    }

    /// A host past ASCII is listed in either form (IDNA's `xn--` one, which DNS is asked for, or
    /// its own, in any case), and a request to it matches in either form, percent-encoded too;
    /// a `*.` origin so covers the hosts under it. Both forms were refused as no origin (the `xn--`
    /// one read back as percent-encoded UTF-8).
    @Test(arguments: ["https://bücher.example", "https://xn--bcher-kva.example", "https://BÜCHER.example"])
    func anInternationalHostIsListedInEitherForm(_ listed: String) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let stub = StubTransport { request in .networkResponse(200, Data((request.value(forHTTPHeaderField: "Authorization") ?? "none").utf8)) }
        let provider = try f.provider([("access-token", ["origins": [listed, "https://*.münchen.example"]])], transport: stub)
        provider.services.setValue("t0k3n", forKey: "access_token")
        func authorization(_ base: String) async throws -> String {
            let response = try await provider.request(try Bin("x", base: try #require(URL(string: base)))).value
            return String(decoding: response.data, as: UTF8.self)
        }
        for base in [
            "https://bücher.example", "https://xn--bcher-kva.example", "https://b%C3%BCcher.example", "https://a.münchen.example",
            "https://a.xn--mnchen-3ya.example",
        ] {
            #expect(try await authorization(base) == "Bearer t0k3n", "\(base)")
        }
        for base in [
            "https://bucher.example", "https://xn--bcher-kva.example.test", "https://münchen.example", "https://b%C3%BCcher.example%2F.test",
        ] {
            #expect(try await authorization(base) == "none", "\(base)")
        }
    }

    /// Against two servers: the listed origin gets the token and its `401` is refreshed; the
    /// other origin gets no token, and a `401` there to the app's own `Authorization` refreshes
    /// nothing.
    @Test func anOriginNotListedGetsNoTokenAndNoRefresh() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let other = try TestServer.second()
        let provider = try f.provider([("access-token", ["origins": [try TestServer.url().absoluteString]])])
        provider.services.setValue("t0k3n", forKey: "access_token")
        let refreshes = LockedCounter()
        provider.services.registerRefresher(forKey: "access_token") { stale in
            refreshes.append(stale ?? "-")
            return "t0k3n"
        }
        #expect(try await authorization(provider) == ["Bearer t0k3n"])
        let elsewhere = try await provider.request(try Bin("anything", base: other)).mapJSON().value
        #expect(elsewhere["headers"]?["Authorization"] == nil)
        let own = try await provider.request(try Bin("status/401", headers: ["Authorization": "Bearer app-own"], base: other)).value
        #expect(own.statusCode == 401)
        #expect(refreshes.log == [])
        let listed = try await provider.request(try Bin("status/401")).value
        #expect(listed.statusCode == 401)
        #expect(refreshes.log == ["t0k3n"])
    }
}
