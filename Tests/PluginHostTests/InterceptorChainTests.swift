import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Adds `Authorization: Bearer <token>` from the store; on 401 asks the host to refresh.
/// A token of `bad` is sent to `/status/401`, any other to `/bearer`.
struct TokenInterceptor: Interceptor {
    var name: String { "token" }

    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        guard let token = context.services.value(forKey: "access_token") else { return .proceed }
        try request.setHeader("Authorization", "Bearer \(token)")
        if token.hasPrefix("bad") {
            try request.setURL(request.url.replacingOccurrences(of: "/bearer", with: "/status/401"))
        }
        return .proceed
    }

    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        guard result.response?.statusCode == 401 else { return .proceed }
        return .retry(refresh: CredentialRefresh(key: "access_token", staleValue: context.services.value(forKey: "access_token")))
    }
}

/// Answers every challenge with fixed credentials, counting the challenges.
struct BasicCredentials: Interceptor {
    let user: String, password: String
    let challenges: LockedCounter
    func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
        challenges.append("\(challenge.method) \(challenge.host) \(challenge.previousFailureCount)")
        return challenge.previousFailureCount == 0 ? .useCredential(user: user, password: password) : .rejectProtectionSpace
    }
}

/// Adds a request header twice and a response header twice.
struct RepeatingHeaders: Interceptor {
    var name: String { "repeat" }
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.addHeader("X-Multi", "a")
        try request.addHeader("X-Multi", "b")
        return .proceed
    }
    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        try result.response?.addHeader("X-Seen", "1")
        try result.response?.addHeader("X-Seen", "2")
        return .proceed
    }
}

@Suite("Interceptor chain")
struct InterceptorChainTests {
    @Test func repeatedHeadersAreJoinedWithCommaSpaceOnBothSides() async throws {
        let response = try await Provider<Bin>(interceptors: [RepeatingHeaders()]).request(try Bin("headers")).value
        #expect(try response.mapJSON()["headers"]?["X-Multi"]?.stringValue == "a, b")
        #expect(response.value(forHTTPHeaderField: "X-Seen") == "1, 2")
    }

    @Test func requestSideRunsInOrderResponseSideInReverse() async throws {
        let log = LockedCounter()
        let provider = Provider<Bin>(interceptors: [Recorder("A", log: log), Recorder("B", log: log), Recorder("C", log: log)])
        let response = try await provider.request(try Bin("anything")).value
        #expect(try echo(response).header("X-Order") == "A,B,C")
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "C,B,A")
        #expect(
            log.log == [
                "A.prepare", "B.prepare", "C.prepare", "A.willSend", "B.willSend", "C.willSend",
                "C.didReceive", "B.didReceive", "A.didReceive", "C.process", "B.process", "A.process",
            ])
    }

    @Test(arguments: 0..<3)
    func shortCircuitAtEachPosition(position: Int) async throws {
        let log = LockedCounter()
        let transport = CountingTransport()
        let names = ["A", "B", "C"]
        let chain = names.enumerated().map { index, name in
            Recorder(name, log: log, respond: index == position ? SyntheticResponse(statusCode: 203, body: Array("cached".utf8)) : nil)
        }
        let provider = Provider<Bin>(transport: transport, interceptors: chain)
        let response = try await provider.request(try Bin("anything")).value
        #expect(transport.count == 0)
        #expect(response.statusCode == 203)
        #expect(response.data == Data("cached".utf8))
        let outer = names[0...position]
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == outer.reversed().joined(separator: ","))
        var expected = outer.map { "\($0).prepare" }
        expected += names[0..<position].map { "\($0).willSend" }
        expected += outer.reversed().map { "\($0).didReceive" }
        expected += outer.reversed().map { "\($0).process" }
        #expect(log.log == expected)
    }

    @Test(arguments: [InterceptorHook.prepare, .willSend, .didReceive, .process])
    func throwingHookFailsOnlyThatRequestNamingInterceptorAndHook(hook: InterceptorHook) async throws {
        let log = LockedCounter()
        let provider = Provider<Bin>(interceptors: [Recorder("A", log: log), Recorder("B", log: log, throwIn: hook), Recorder("C", log: log)])
        let result = await provider.request(try Bin("get")).result
        guard case .failure(.interceptor(let name, let failedHook, let message)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(name == "B")
        #expect(failedHook == hook)
        #expect(message == "boom in \(hook)")
        // The outer interceptor always sees the end of an attempt it saw begin.
        let began = log.log.filter { $0 == "A.willSend" }.count
        let ended = log.log.filter { $0 == "A.didReceive" }.count
        #expect(began == ended)
        // Another request through a healthy provider is unaffected.
        let healthy = Provider<Bin>(interceptors: [Recorder("A", log: LockedCounter())])
        #expect(try await healthy.request(try Bin("get")).value.statusCode == 200)
    }

    @Test func contextCarriesTargetRequestIDAttemptAndServices() async throws {
        struct Inspector: Interceptor {
            let seen: LockedCounter
            var name: String { "inspector" }
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                let t = context.target
                seen.append("\(t.method) \(t.path) \(t.pluginOptions["auth"] ?? "-") id=\(context.requestID) attempt=\(context.attempt)")
                context.services.setValue("from-plugin", forKey: "written")
                context.services.emit("began", fields: ["path": t.path])
                context.services.log(.warning, "hello")
                #expect(context.services.randomBytes(16).count == 16)
                // Into a caller's buffer: every byte written (two 32-byte draws never match).
                var draws = [[UInt8]](repeating: [UInt8](repeating: 0, count: 32), count: 2)
                for index in draws.indices { draws[index].withUnsafeMutableBytes { context.services.randomBytes(into: $0) } }
                #expect(draws[0] != draws[1])
                #expect(context.services.now() > 1_700_000_000)
                return .proceed
            }
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                context.attempt == 1 ? .retry() : .proceed
            }
        }
        let seen = LockedCounter()
        let provider = Provider<Bin>(interceptors: [Inspector(seen: seen)])
        let events = LockedCounter()
        let subscription = provider.services.subscribe { events.append("\($0.plugin):\($0.name):\($0.fields["path"] ?? "")") }
        defer { subscription.cancel() }
        let logs = LockedCounter()
        provider.services.setLogHandler { level, plugin, message in logs.append("\(level) \(plugin) \(message)") }
        _ = try await provider.request(try Bin("get", method: .get, options: ["auth": "bearer"])).value
        #expect(seen.log.count == 2)
        let id = seen.log[0].split(separator: " ")[3]
        #expect(seen.log == ["GET get bearer \(id) attempt=1", "GET get bearer \(id) attempt=2"])
        #expect(provider.services.value(forKey: "written") == "from-plugin")
        #expect(events.log == ["inspector:began:get", "inspector:began:get"])
        #expect(logs.log == ["warning inspector hello", "warning inspector hello"])
    }

    @Test func interceptorsCannotInjectHeadersOrSetBadURLs() async throws {
        struct Injector: Interceptor {
            let value: String
            var name: String { "injector" }
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                try request.setHeader("X-A", value)
                return .proceed
            }
        }
        struct BadURL: Interceptor {
            var name: String { "bad-url" }
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                try request.setURL("not a url")
                return .proceed
            }
        }
        let injected = await Provider<Bin>(interceptors: [Injector(value: "x\r\nX-Evil: 1")]).request(try Bin("get")).result
        guard case .failure(.interceptor("injector", .prepare, let message)) = injected else {
            Issue.record("got \(injected)")
            return
        }
        #expect(message == "invalid value for header \"X-A\": CR, LF and NUL are not allowed")
        let bad = await Provider<Bin>(interceptors: [BadURL()]).request(try Bin("get")).result
        guard case .failure(.interceptor("bad-url", .prepare, let badMessage)) = bad else {
            Issue.record("got \(bad)")
            return
        }
        #expect(badMessage == "invalid URL \"not a url\": must be an absolute http or https URL")
    }

    @Test func concurrent401sShareOneRefreshAndRetry() async throws {
        let refreshes = LockedCounter()
        let provider = Provider<Bin>(interceptors: [TokenInterceptor()])
        provider.services.setValue("bad-1", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { stale in
            refreshes.append(stale ?? "-")
            try await Task.sleep(nanoseconds: 200_000_000)
            return "good-\(refreshes.log.count)"
        }
        let target = try Bin("bearer")
        let codes = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<6 { group.addTask { try await provider.request(target).value.statusCode } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(codes == Array(repeating: 200, count: 6))
        #expect(refreshes.log == ["bad-1"])
        #expect(provider.services.value(forKey: "access_token") == "good-1")
    }

    @Test func refreshFailureFailsTheRequest() async throws {
        struct Denied: Error, CustomStringConvertible { var description: String { "refresh denied" } }
        let provider = Provider<Bin>(interceptors: [TokenInterceptor()])
        provider.services.setValue("bad", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in throw Denied() }
        let result = await provider.request(try Bin("bearer")).result
        guard case .failure(.credentialRefresh("access_token", "refresh denied")) = result else {
            Issue.record("got \(result)")
            return
        }
    }

    /// A request waiting for a refresh ends when it is cancelled (its task, or
    /// `Provider.cancelAll()`) or its deadline passes, not when the refresher returns; the
    /// refresh goes on and stores its token for the next request.
    @Test(arguments: ["task", "cancelAll", "deadline"]) func aRequestWaitingForARefreshEndsWhenCancelledOrOutOfTime(_ end: String) async throws {
        let (started, startedEvents) = AsyncStream<Void>.makeStream()
        let released = LockedBox(false)
        let began = LockedBox(false)
        let finished = LockedBox(false)
        /// `/status/N` answers N, anything else 200, at once: the deadline is spent waiting for the
        /// refresh, not on a loaded machine's network round trip before it.
        struct StatusFromPath: Transport {
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let url = request.urlRequest.url!
                let status = url.path.hasPrefix("/status/") ? Int(url.lastPathComponent) ?? 200 : 200
                return TransportResponse(
                    response: HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!, data: Data())
            }
        }
        let provider = Provider<Bin>(
            transport: StatusFromPath(), interceptors: [TokenInterceptor()], limits: RequestLimits(deadline: end == "deadline" ? 2 : nil))
        provider.services.setValue("bad-0", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in
            began.set(true)
            startedEvents.yield()
            // Until the test lets it go (at most 30 s).
            for _ in 0..<600 where !released.get() { try? await Task.sleep(nanoseconds: 50_000_000) }
            finished.set(true)
            return "good-1"
        }
        let target = try Bin("bearer")
        let request = Task { await provider.request(target).result }
        if end != "deadline" {
            for await _ in started { break }
            if end == "task" { request.cancel() } else { provider.cancelAll() }
        }
        let result = await request.value
        #expect(began.get(), "the request ended before the refresh began")
        #expect(!finished.get(), "the request waited for the refresher")
        switch result {
        case .failure(.cancelled) where end != "deadline": break
        case .failure(.underlying(let failure, _)) where end == "deadline":
            #expect(failure == TransportFailure(kind: .timedOut, message: "the request's deadline of 2.0 s passed (RequestLimits.deadline)"))
        default: Issue.record("got \(result)")
        }
        released.set(true)
        #expect(await eventually { provider.services.value(forKey: "access_token") == "good-1" })
        #expect(try await provider.request(target).value.statusCode == 200)
    }

    @Test func excessiveRefreshIsStopped() async throws {
        let services = PluginServices(maxRefreshes: 1, refreshWindow: 60)
        let provider = Provider<Bin>(interceptors: [TokenInterceptor()], services: services, maxInterceptorRetries: 5)
        services.setValue("bad-0", forKey: "access_token")
        let count = LockedCounter()
        services.registerRefresher(forKey: "access_token") { _ in "bad-\(count.increment())" }
        let result = await provider.request(try Bin("bearer")).result
        guard case .failure(.credentialRefresh("access_token", let message)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(message == "excessive refresh: 1 refreshes within 60.0 s (limit 1)")
        #expect(count.value == 1)
    }

    /// A refresher that does not finish fails its refresh after `refreshTimeout`, for everyone
    /// waiting for it, without waiting for the refresher (this one ignores cancellation); the key
    /// is free again, and the next refresh runs the refresher anew.
    @Test func aHungRefresherFailsAfterTheRefreshTimeout() async throws {
        let services = PluginServices(maxRefreshes: 10, refreshTimeout: 1)
        let calls = LockedCounter()
        // Every refresher call hangs, deaf to cancelling, until the test lets them go (60 s at most).
        let hanging = Locked(true)
        let hungFinished = Locked(false)
        services.registerRefresher(forKey: "k") { _ in
            let hangs = hanging.withLock { $0 }
            calls.increment()
            if hangs {
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().async {
                        for _ in 0..<6000 where hanging.withLock({ $0 }) { usleep(10_000) }
                        continuation.resume()
                    }
                }
                hungFinished.withLock { $0 = true }
            }
            return "fresh"
        }
        func waiter() -> Task<NetworkError?, Never> {
            Task { () -> NetworkError? in
                do throws(NetworkError) {
                    try await services.refresh(key: "k", staleValue: nil)
                    return nil
                } catch {
                    return error
                }
            }
        }
        // Two waiters: the second joins the first one's refresh, or (late) starts one that hangs too.
        let waiters = [waiter(), waiter()]
        for waiter in waiters {
            let failure = await waiter.value
            guard case .credentialRefresh("k", let message) = failure else {
                Issue.record("got \(String(describing: failure))")
                continue
            }
            #expect(message == "the refresher did not finish within 1.0 s")
        }
        #expect(hungFinished.withLock { $0 } == false, "the waiters waited for the refresher")
        #expect(services.value(forKey: "k") == nil)
        // The key is free again: the next refresh runs the refresher anew and stores its value.
        // (Its 1 s may pass before a saturated pool runs the refresher at all, as in a CI run that
        // starts a dozen tests at once: a refresh that timed out so is asked again, a few times.)
        hanging.withLock { $0 = false }
        let before = calls.value
        var refreshes = 0
        var failure: NetworkError?
        repeat {
            refreshes += 1
            failure = nil
            do {
                try await services.refresh(key: "k", staleValue: nil)
            } catch {
                failure = error
            }
        } while refreshes < 5
            && failure.map { "\($0)" } == "\(NetworkError.credentialRefresh(key: "k", message: "the refresher did not finish within 1.0 s"))"
        #expect(failure == nil, "\(String(describing: failure))")
        #expect(services.value(forKey: "k") == "fresh")
        #expect(calls.value > before && calls.value <= before + refreshes)
    }

    @Test func credentialHookAnswersBasicChallenges() async throws {
        let challenges = LockedCounter()
        let provider = Provider<Bin>(interceptors: [BasicCredentials(user: "u", password: "p", challenges: challenges)])
        let ok = try await provider.request(try Bin("basic-auth/u/p")).value
        #expect(ok.statusCode == 200)
        #expect(try ok.mapJSON()["user"]?.stringValue == "u")
        #expect(challenges.log.first?.hasPrefix("Basic 127.0.0.1 0") == true)
        let wrongLog = LockedCounter()
        let wrongProvider = Provider<Bin>(interceptors: [BasicCredentials(user: "u", password: "p", challenges: wrongLog)])
        let wrong = try await wrongProvider.request(try Bin("basic-auth/u/other")).value
        #expect(wrong.statusCode == 401)
        #expect(wrongLog.log.map { $0.split(separator: " ").last! } == ["0", "1"])
    }

    @Test func challengeWithoutAnAnswerDeliversThe401() async throws {
        let plain = try await Provider<Bin>().request(try Bin("status/401")).value
        #expect(plain.statusCode == 401)
        #expect(plain.value(forHTTPHeaderField: "WWW-Authenticate") == "Basic realm=\"Fake Realm\"")
        let log = LockedCounter()
        let chained = try await Provider<Bin>(interceptors: [Recorder("A", log: log)]).request(try Bin("status/401")).value
        #expect(chained.statusCode == 401)
    }

    @Test func credentialHookCanCancelTheChallenge() async throws {
        struct Refuser: Interceptor {
            var name: String { "refuser" }
            func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
                challenge.realm == "Fake Realm" ? .cancel : .performDefault
            }
        }
        let result = await Provider<Bin>(interceptors: [Refuser()]).request(try Bin("basic-auth/u/p")).result
        guard case .failure(.cancelled) = result else {
            Issue.record("got \(result)")
            return
        }
    }

    @Test func processCanReplaceAFailure() async throws {
        struct Fallback: Interceptor {
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                guard let failure = result.failure else { return .proceed }
                return .replace(
                    SyntheticResponse(
                        statusCode: 200, headers: [HTTPHeader(name: "X-Cache", value: "stale")],
                        body: Array(failure.kind.rawValue.utf8)))
            }
        }
        let provider = Provider<Bin>(interceptors: [Fallback()])
        let response = try await provider.request(try Bin("get", base: closedPortURL())).value
        #expect(response.value(forHTTPHeaderField: "X-Cache") == "stale")
        #expect(String(decoding: response.data, as: UTF8.self) == "cannotConnect")
    }

    /// A `process` that replaces the cancellation's failure (as a cache serving a stale entry
    /// for any failure does) does not turn a cancelled request into a success.
    @Test func aReplacementOfTheCancellationIsStillCancelled() async throws {
        let log = LockedCounter()
        struct Fallback: Interceptor {
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                guard result.failure != nil else { return .proceed }
                return .replace(SyntheticResponse(statusCode: 200, headers: [HTTPHeader(name: "X-Cache", value: "stale")], body: []))
            }
        }
        try await expectCancelledWhileSending(Provider<Bin>(interceptors: [Fallback(), Recorder("A", log: log)]), log: log)
    }

    @Test func responseSideSeesCancellation() async throws {
        let log = LockedCounter()
        try await expectCancelledWhileSending(Provider<Bin>(interceptors: [Recorder("A", log: log)]), log: log)
        #expect(log.log == ["A.prepare", "A.willSend", "A.didReceive", "A.process"])
    }

    /// Cancels a request to httpbin's `delay/5` once the recorder `A` saw `willSend`, and expects
    /// it to end `.cancelled`.
    func expectCancelledWhileSending(_ provider: Provider<Bin>, log: LockedCounter) async throws {
        let target = try Bin("delay/5")
        let task = Task { await provider.request(target).result }
        #expect(await eventually { log.log.contains("A.willSend") })
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("not cancelled")
            return
        }
    }
}
