import Dispatch
import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Provider")
struct ProviderTests {
    @Test func adHocVerbsWithoutAnEnum() async throws {
        let base = try TestServer.url().absoluteString
        let provider = Provider<MultiTarget>()
        let get = try echo(try await provider.get("\(base)/get", parameters: ["q": "1"], headers: ["X-A": "a"]).value)
        #expect(get.args?["q"] == .string("1"))
        #expect(get.header("X-A") == "a")
        let post = try echo(try await provider.post("\(base)/post", parameters: ["name": "Ann"]).value)
        #expect(post.json == .object(["name": .string("Ann")]))
        let put = try echo(try await provider.put("\(base)/put", parameters: ["v": 2]).value)
        #expect(put.json == .object(["v": .number(2)]))
        let delete = try echo(try await provider.delete("\(base)/delete", parameters: ["id": "9"]).value)
        #expect(delete.args?["id"] == .string("9"))
    }

    @Test func adHocRelativePathsUseTheServerBaseURL() async throws {
        let server = ServerConfiguration(baseURL: try TestServer.url(), headers: ["X-Server": "1"])
        let provider = Provider<MultiTarget>(server: server)
        let e = try echo(try await provider.get("/anything/rel").value)
        let base = try TestServer.url().absoluteString
        #expect(e.url == base + "/anything/rel")
        #expect(e.header("X-Server") == "1")
    }

    /// Records the base URL each request's interceptors are told.
    struct BaseSeer: Interceptor {
        let seen = Locked<[String]>([])
        var name: String { "base-seer" }
        func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
            seen.withLock { $0.append(context.target.baseURL + " " + request.url) }
            return .proceed
        }
    }

    /// An ad-hoc pipeline resolves its relative URL when it is consumed, as it reads the server
    /// layer's headers then: one built before a switch of server and consumed after it went to
    /// the old base URL with the new server's headers (a token for one host sent to another),
    /// and its interceptors were told the old base URL.
    @Test func anAdHocPipelineResolvesItsURLWhenConsumed() async throws {
        let one = try TestServer.url()
        let two = try TestServer.second()
        let server = ServerConfiguration(baseURL: one)
        let seer = BaseSeer()
        let provider = Provider<MultiTarget>(interceptors: [seer], server: server)
        let pipeline = provider.get("/anything/late?x=1")
        server.baseURL = two
        server.setHeader("X-After", "yes")
        let first = try echo(try await pipeline.value)
        #expect(first.url == two.absoluteString + "/anything/late?x=1")
        #expect(first.header("X-After") == "yes")
        server.baseURL = one
        let second = try echo(try await pipeline.value)
        #expect(second.url == one.absoluteString + "/anything/late?x=1")
        #expect(
            seer.seen.withLock { $0 } == [
                two.absoluteString + " " + two.absoluteString + "/anything/late?x=1",
                one.absoluteString + " " + one.absoluteString + "/anything/late?x=1",
            ])
    }

    /// A relative ad-hoc URL is joined as a target's is: after the base's path, the base's query
    /// first; a `://` in its query does not make it absolute (it was sent unresolved and failed).
    @Test func adHocRelativeURLsJoinTheBaseAsTargetsDo() {
        let provider = Provider<MultiTarget>(server: ServerConfiguration(baseURL: URL(string: "https://api.example.invalid/v1?api_key=K")!))
        #expect(provider.resolve("/users") == "https://api.example.invalid/v1/users?api_key=K")
        #expect(provider.resolve("users?page=2#top") == "https://api.example.invalid/v1/users?api_key=K&page=2#top")
        #expect(
            provider.resolve("/login?next=https://app.example/cb") == "https://api.example.invalid/v1/login?api_key=K&next=https://app.example/cb")
        #expect(provider.resolve("https://other.example/x") == "https://other.example/x")
        #expect(provider.resolve("ftp://files.example/x") == "ftp://files.example/x")
        let plain = Provider<MultiTarget>(server: ServerConfiguration(baseURL: URL(string: "https://api.example.invalid/")!))
        #expect(plain.resolve("/users") == "https://api.example.invalid/users")
    }

    @Test func multiTargetServesSeveralTargetTypes() async throws {
        let provider = Provider<MultiTarget>()
        let a = try await provider.request(MultiTarget(try Bin("status/201"))).value
        let b = try await provider.request(.target(try Bin("anything", options: ["k": "v"]))).value
        #expect(a.statusCode == 201)
        #expect(b.statusCode == 200)
        #expect(MultiTarget(try Bin("x", options: ["k": "v"])).pluginOptions == ["k": "v"])
    }

    @Test func requestClosureEditsTheURLRequestAsynchronously() async throws {
        let provider = Provider<Bin>(requestClosure: { endpoint, request in
            try await Task.sleep(nanoseconds: 1_000_000)
            var request = request
            if endpoint.url.contains("/delay/") { request.timeoutInterval = 0.5 }
            request.setValue(endpoint.method.rawValue, forHTTPHeaderField: "X-From-Closure")
            return request
        })
        let e = try echo(try await provider.request(try Bin("anything")).value)
        #expect(e.header("X-From-Closure") == "GET")
        let timedOut = await provider.request(try Bin("delay/3")).result
        guard case .failure(let error) = timedOut else {
            Issue.record("expected timeout")
            return
        }
        #expect(error.isTimeout)
    }

    @Test func requestClosureErrorsReachTheCaller() async throws {
        struct Denied: Error {}
        let provider = Provider<Bin>(requestClosure: { _, _ in throw Denied() })
        let result = await provider.request(try Bin("anything")).result
        guard case .failure(.custom(let inner)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(inner is Denied)
    }

    @Test func endpointClosureAddsHeadersToEveryRequest() async throws {
        let provider = Provider<Bin>(endpointClosure: { target in
            Provider<Bin>.defaultEndpointMapping(for: target).adding(newHTTPHeaderFields: ["X-App": "demo"])
        })
        #expect(try echo(try await provider.request(try Bin("anything")).value).header("X-App") == "demo")
    }

    @Test func callbackRunsOnTheGivenQueue() async throws {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "callbacks")
        queue.setSpecific(key: key, value: "callbacks")
        let provider = Provider<Bin>()
        let target = try Bin("get")
        let label: String? = await withCheckedContinuation { continuation in
            provider.request(target).start(on: queue) { _ in
                continuation.resume(returning: DispatchQueue.getSpecific(key: key))
            }
        }
        #expect(label == "callbacks")
    }

    @Test func providerCallbackQueueIsTheDefault() async throws {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "provider-callbacks")
        queue.setSpecific(key: key, value: "provider")
        let provider = Provider<Bin>(callbackQueue: queue)
        let target = try Bin("get")
        let label: String? = await withCheckedContinuation { continuation in
            provider.request(target).filterSuccessfulStatusCodes().mapJSON().start { _ in
                continuation.resume(returning: DispatchQueue.getSpecific(key: key))
            }
        }
        #expect(label == "provider")
    }

    @Test func identicalInflightRequestsShareOneNetworkCall() async throws {
        let transport = CountingTransport()
        let provider = Provider<Bin>(transport: transport, trackInflights: true)
        let target = try Bin("delay/1")
        let responses = try await withThrowingTaskGroup(of: Response.self) { group in
            for _ in 0..<5 { group.addTask { try await provider.request(target).value } }
            return try await group.reduce(into: [Response]()) { $0.append($1) }
        }
        #expect(transport.count == 1)
        #expect(responses.count == 5)
        #expect(Set(responses.map(\.data)).count == 1)
    }

    /// Calls share only when everything that shapes the outcome is the same: targets of one URL
    /// with other options (interceptors read them), validation or limits each send; a stubbed
    /// call answers its own sample.
    @Test func inflightSharingNeedsTheSameTargetOptionsValidationAndLimits() async throws {
        let transport = CountingTransport()
        let provider = Provider<Bin>(transport: transport, trackInflights: true)
        var limited = try Bin("delay/1")
        limited.limits = RequestLimits(maxResponseBytes: 1 << 20)
        let targets = [
            try Bin("delay/1"), try Bin("delay/1"), try Bin("delay/1", options: ["auth": "bearer"]),
            try Bin("delay/1", validation: .successCodes), limited,
        ]
        let codes = try await withThrowingTaskGroup(of: Int.self) { group in
            for target in targets { group.addTask { try await provider.request(target).value.statusCode } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(codes == Array(repeating: 200, count: 5))
        // The two plain ones shared; the other three each sent.
        #expect(transport.count == 4)

        // The same target, stubbed for its first call only: the stub's sample is not the network's.
        let calls = LockedCounter()
        let stubbing = Provider<Bin>(
            stubClosure: { _ in calls.increment() == 1 ? .delayed(seconds: 0.5) : .never }, transport: transport, trackInflights: true)
        var sampled = try Bin("delay/1")
        sampled.sample = .networkResponse(201, Data("stub".utf8))
        let target = sampled
        let before = transport.count
        async let stubbed = stubbing.request(target).value
        try await Task.sleep(nanoseconds: 100_000_000)
        async let sent = stubbing.request(target).value
        #expect(try await stubbed.statusCode == 201)
        #expect(try await sent.statusCode == 200)
        #expect(transport.count == before + 1)
    }

    /// Calls whose requests differ only in what URL loading reads of them (here: one request
    /// closure turns cookie handling off for the first call) each send: the cookie-free call
    /// joined the other's exchange, and got the answer to a request that carried the session's cookies.
    @Test func inflightSharingNeedsTheSameURLLoadingProperties() async throws {
        let transport = CountingTransport()
        let calls = LockedCounter()
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                if calls.increment() == 1 { request.httpShouldHandleCookies = false }
                return request
            }, transport: transport, trackInflights: true)
        let target = try Bin("delay/1")
        let codes = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<2 { group.addTask { try await provider.request(target).value.statusCode } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(codes == [200, 200])
        #expect(transport.count == 2)
    }

    /// Each caller of a shared exchange has its own deadline: the first one's ends its wait, and
    /// the exchange goes on for a caller that joined later, within that one's. The exchange ran
    /// within the first caller's deadline, and the later caller failed with it.
    @Test func eachCallerOfASharedExchangeHasItsOwnDeadline() async throws {
        let transport = CountingTransport(TransportKind.curl.make())
        let provider = Provider<Bin>(transport: transport, trackInflights: true)
        // The answer comes 3.5 s after the first caller's start: after its deadline (3 s), within
        // the later caller's (3 s from its start, 2 s later): a second of margin each side.
        var target = try Bin("delay/3.5")
        target.limits = RequestLimits(deadline: 3)
        let first = target
        async let early = provider.request(first).result
        #expect(await eventually { provider.inflightCount == 1 })
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let late = await provider.request(target).result
        guard case .failure(.underlying(let failure, _)) = await early, failure.kind == .timedOut else {
            Issue.record("the first caller's deadline did not end it")
            return
        }
        #expect(try late.get().statusCode == 200, "its own deadline lets the answer in, 1.5 s after it joined")
        #expect(transport.count == 1)
    }

    @Test func withoutSharingEachCallerSends() async throws {
        let transport = CountingTransport()
        let provider = Provider<Bin>(transport: transport)
        let target = try Bin("get")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<5 { group.addTask { _ = try await provider.request(target).value } }
            try await group.waitForAll()
        }
        #expect(transport.count == 5)
    }

    @Test func validationTypeRejectsWithStatusCodeError() async throws {
        let provider = Provider<Bin>()
        let result = await provider.request(try Bin("status/404", validation: .successCodes)).result
        guard case .failure(.statusCode(let response)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(response.statusCode == 404)
        let custom = await provider.request(try Bin("status/404", validation: .customCodes([404]))).result
        #expect(try custom.get().statusCode == 404)
        let redirect = await provider.request(try Bin("status/304", validation: .successAndRedirectCodes)).result
        #expect(try redirect.get().statusCode == 304)
    }
}
