import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Records each hook it sees as `name.hook`, and does what it is told.
struct Scripted: Interceptor {
    let name: String
    let log: LockedCounter
    var respond = false
    var throwIn: InterceptorHook?
    var processAction: ProcessAction = .proceed

    struct Failure: Error, CustomStringConvertible { var description: String }

    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        log.append("\(name).prepare")
        if throwIn == .prepare { throw Failure(description: "no") }
        return respond ? .respond(SyntheticResponse(statusCode: 203, headers: [], body: [])) : .proceed
    }

    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        log.append("\(name).willSend")
        if throwIn == .willSend { throw Failure(description: "no") }
    }

    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        let what = result.response.map { String($0.statusCode) } ?? result.failure?.kind.rawValue ?? "?"
        log.append("\(name).didReceive(\(what))")
        if throwIn == .didReceive { throw Failure(description: "no \(name)") }
    }

    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        log.append("\(name).process")
        if throwIn == .process { throw Failure(description: "no") }
        return processAction
    }
}

/// Each phase of an attempt on its own (the whole chain is tested in InterceptorChainTests).
@Suite("Chain phases")
struct ChainPhaseTests {
    let log = LockedCounter()

    func chain(_ interceptors: [Scripted]) -> (InterceptorChain, AttemptContexts) {
        let chain = InterceptorChain(interceptors: interceptors, services: PluginServices(), maxRetries: 2)
        return (chain, chain.makeContexts(target: TargetInfo(method: "GET", baseURL: "http://a.invalid", path: "p"), requestID: 7, attempt: 1))
    }

    var request: InterceptorRequest {
        InterceptorRequest(backend: RequestState(URLRequest(url: URL(string: "http://a.invalid/p")!)))
    }

    @Test func contextsCarryTheAttemptAndTheRequestID() {
        let (_, contexts) = chain([Scripted(name: "a", log: log), Scripted(name: "b", log: log)])
        #expect(contexts.count == 2)
        #expect(contexts.allSatisfy { $0.requestID == 7 && $0.attempt == 1 && $0.target.path == "p" })
    }

    @Test func contextsOfAnEqualTargetShareOneStorageAndKeepTheirOwnNumbers() {
        let chain = InterceptorChain(
            interceptors: [Scripted(name: "a", log: log), Scripted(name: "b", log: log)], services: PluginServices(), maxRetries: 2)
        let target = { (path: String, options: [String: String]) in
            TargetInfo(method: "GET", baseURL: "http://a.invalid", path: path, pluginOptions: options)
        }
        let first = chain.makeContexts(target: target("p", ["k": "v"]), requestID: 7, attempt: 1)
        // An equal target, made anew (as a provider makes one per request): the same storage.
        let second = chain.makeContexts(target: target("p", ["k": "v"]), requestID: 8, attempt: 2)
        #expect(first.indices.allSatisfy { first[$0].sharesTarget(with: second[$0]) })
        #expect(first.map { "\($0.requestID).\($0.attempt)" } == ["7.1", "7.1"])
        #expect(second.map { "\($0.requestID).\($0.attempt)" } == ["8.2", "8.2"])
        // Each interceptor keeps services of its own.
        #expect(second.map { ($0.services as? BoundServices)?.plugin } == ["a", "b"])
        // Another option value, then the first target again: storage of their own, with their targets.
        let other = chain.makeContexts(target: target("p", ["k": "w"]), requestID: 9, attempt: 1)
        #expect(!other[0].sharesTarget(with: first[0]))
        #expect(other.map { $0.target.pluginOptions["k"] } == ["w", "w"])
        let again = chain.makeContexts(target: target("p", ["k": "v"]), requestID: 10, attempt: 1)
        #expect(!again[0].sharesTarget(with: other[0]))
        #expect(again.map { $0.target } == [target("p", ["k": "v"]), target("p", ["k": "v"])])
        #expect(again.map { ($0.services as? BoundServices)?.plugin } == ["a", "b"])
        #expect(
            InterceptorChain(interceptors: [], services: PluginServices(), maxRetries: 2).makeContexts(
                target: target("p", [:]), requestID: 1, attempt: 1
            ).isEmpty)
    }

    @Test func prepareStopsAtTheShortCircuitAndNamesTheThrower() {
        let (stopping, contexts) = chain([Scripted(name: "a", log: log), Scripted(name: "b", log: log, respond: true), Scripted(name: "c", log: log)])
        guard case .success(let answer?) = stopping.prepare(request, contexts: contexts) else {
            Issue.record("no short-circuit")
            return
        }
        #expect(answer.index == 1)
        #expect(answer.response.statusCode == 203)
        #expect(log.log == ["a.prepare", "b.prepare"])
        let (throwing, more) = chain([Scripted(name: "a", log: log, throwIn: .prepare)])
        guard case .failure(.interceptor("a", .prepare, "no")) = throwing.prepare(request, contexts: more) else {
            Issue.record("prepare's error not named")
            return
        }
    }

    @Test func aThrowingWillSendEndsTheAttemptForThoseOutsideIt() {
        let (chain, contexts) = chain([
            Scripted(name: "a", log: log), Scripted(name: "b", log: log, throwIn: .willSend), Scripted(name: "c", log: log),
        ])
        let error = chain.willSend(request, contexts: contexts, through: 3)
        guard case .interceptor("b", .willSend, "no")? = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(log.log == ["a.willSend", "b.willSend", "a.didReceive(interceptorFailed)"])
    }

    @Test func theTimeoutBudgetCountsTheHooksTime() {
        #expect(InterceptorChain.timeoutBudget(timeout: 10, spentInHooks: 0.0005) == .unchanged)
        #expect(InterceptorChain.timeoutBudget(timeout: 0, spentInHooks: 3) == .unchanged)
        #expect(InterceptorChain.timeoutBudget(timeout: 10, spentInHooks: 0.5) == .remaining(9.5))
        #expect(
            InterceptorChain.timeoutBudget(timeout: 1, spentInHooks: 2.5)
                == .exhausted(TransportFailure(kind: .timedOut, message: "the request's timeout (1.0 s) ran out in interceptor hooks (2.5 s)")))
    }

    @Test func didReceiveRunsForEveryOneAndReportsTheFirstError() {
        let (chain, contexts) = chain([
            Scripted(name: "a", log: log, throwIn: .didReceive), Scripted(name: "b", log: log, throwIn: .didReceive), Scripted(name: "c", log: log),
        ])
        let error = chain.didReceive(.failure(TransportFailure(kind: .timedOut, message: "t")), contexts: contexts, from: 2)
        guard case .interceptor("b", .didReceive, "no b")? = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(log.log == ["c.didReceive(timedOut)", "b.didReceive(timedOut)", "a.didReceive(timedOut)"])
    }

    @Test func processReplacesAndStopsAtARetry() {
        let replacement = SyntheticResponse(statusCode: 299, headers: [HTTPHeader(name: "X", value: "1")], body: Array("r".utf8))
        let (chain, contexts) = chain([
            Scripted(name: "a", log: log), Scripted(name: "b", log: log, processAction: .retry(delay: 0.25)),
            Scripted(name: "c", log: log, processAction: .replace(replacement)),
        ])
        var outcome = InterceptorChain.Outcome.failure(TransportFailure(kind: .cannotConnect, message: "x"))
        guard case .success(let retry?) = chain.process(&outcome, contexts: contexts, from: 2, url: URL(string: "http://a.invalid/p")) else {
            Issue.record("no retry")
            return
        }
        #expect(retry.delay == 0.25)
        #expect(retry.refresh == nil)
        #expect(log.log == ["c.process", "b.process"])
        guard case .response(let state) = outcome else {
            Issue.record("not replaced")
            return
        }
        #expect(state.statusCode == 299)
        let (throwing, more) = self.chain([Scripted(name: "z", log: log, throwIn: .process)])
        guard case .failure(.interceptor("z", .process, "no")) = throwing.process(&outcome, contexts: more, from: 0, url: nil) else {
            Issue.record("process's error not named")
            return
        }
    }

    /// Logs the status its `process` sees.
    struct StatusSeer: Interceptor {
        let name: String
        let log: LockedCounter
        func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
            log.append("\(name) sees \(result.response.map { String($0.statusCode) } ?? "a failure")")
            return .proceed
        }
    }

    @Test func processShowsEachInterceptorTheOutcomeAsReplacedSoFar() {
        let replacement = SyntheticResponse(statusCode: 299, headers: [], body: [])
        let interceptors: [any Interceptor] = [
            StatusSeer(name: "outer", log: log), Scripted(name: "r", log: log, processAction: .replace(replacement)),
            StatusSeer(name: "inner", log: log),
        ]
        let chain = InterceptorChain(interceptors: interceptors, services: PluginServices(), maxRetries: 2)
        let contexts = chain.makeContexts(target: TargetInfo(method: "GET", baseURL: "http://a.invalid", path: "p"), requestID: 1, attempt: 1)
        var outcome = InterceptorChain.Outcome.failure(TransportFailure(kind: .cannotConnect, message: "x"))
        guard case .success(nil) = chain.process(&outcome, contexts: contexts, from: 2, url: nil) else {
            Issue.record("not proceeded")
            return
        }
        #expect(log.log == ["inner sees a failure", "r.process", "outer sees 299"])
    }

    /// A response a `process` hook made in place of a transport failure answers the request sent:
    /// the hooks outside it read that request's fields (they read none: nil in process, and an
    /// empty list across the ABI, which a loaded cache took for a request without `Vary` fields).
    @Test func aFailureReplacedInProcessAnswersTheRequestSent() async throws {
        final class RequestFieldsSeer: Interceptor, @unchecked Sendable {
            let seen = Locked<[HTTPHeader]??>(nil)
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                seen.withLock { $0 = .some(result.response?.requestHeaders) }
                return .proceed
            }
        }
        let seer = RequestFieldsSeer()
        let replacement = SyntheticResponse(statusCode: 200, headers: [HTTPHeader(name: "Cache-Control", value: "max-age=60")], body: [])
        let provider = Provider<Bin>(
            transport: TransportKind.curl.make(),
            interceptors: [seer, Scripted(name: "fallback", log: log, processAction: .replace(replacement))])
        // Nothing listens on port 1: the transport fails to connect.
        let target = try Bin("p", headers: ["Accept-Language": "fr"], base: URL(string: "http://127.0.0.1:1")!)
        let response = try await provider.request(target).value
        #expect(response.statusCode == 200)
        let seen = seer.seen.withLock { $0 }
        #expect(seen != nil, "the outer hook's process did not run")
        let fields = seen ?? nil
        #expect(fields != nil, "the outer hook saw no request fields")
        #expect(fields?.contains { $0.name == "Accept-Language" && $0.value == "fr" } == true)
    }

    @Test func retriesStopAtTheLimitAndOnCancellation() {
        #expect(InterceptorChain.shouldRetry(attempt: 1, maxRetries: 2, cancelled: false))
        #expect(InterceptorChain.shouldRetry(attempt: 2, maxRetries: 2, cancelled: false))
        #expect(!InterceptorChain.shouldRetry(attempt: 3, maxRetries: 2, cancelled: false))
        #expect(!InterceptorChain.shouldRetry(attempt: 1, maxRetries: 2, cancelled: true))
    }

    @Test func aRetryRefreshesFirstAndACancelledWaitStopsIt() async {
        let services = PluginServices()
        services.setValue("old", forKey: "token")
        services.registerRefresher(forKey: "token") { stale in "fresh-after-\(stale ?? "-")" }
        let chain = InterceptorChain(interceptors: [], services: services, maxRetries: 2)
        let signal = CancellationSignal()
        let refreshed = await chain.prepareRetry((0, CredentialRefresh(key: "token", staleValue: "old")), cancellation: signal)
        #expect(refreshed == nil)
        #expect(services.value(forKey: "token") == "fresh-after-old")
        signal.cancel()
        guard case .cancelled? = await chain.prepareRetry((5, nil), cancellation: signal) else {
            Issue.record("the wait was not cancelled")
            return
        }
    }
}

/// A background exchange goes once per plugin and exchange, and only when the prepare phase
/// did not fail: one was sent for a request an inner plugin refused, and one more per retry.
@Suite("Background exchanges: once, and only after a prepare phase that did not fail")
struct BackgroundExchangeOnceTests {
    /// Schedules a background exchange from the foreground's `prepare`, and counts the
    /// background exchanges that reach it.
    final class Scheduler: Interceptor, Sendable {
        let name = "scheduler"
        let background = LockedCounter()
        func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
            if context.target.pluginOptions[name] == "revalidate" {
                background.increment()
            } else {
                try request.scheduleBackgroundExchange(option: "revalidate")
            }
            return .proceed
        }
    }

    /// Refuses the foreground request in `prepare`.
    struct Refuser: Interceptor {
        let name = "refuser"
        func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
            if context.target.pluginOptions["scheduler"] == nil { throw InterceptorError.failed("refused") }
            return .proceed
        }
    }

    /// Asks for one retry of the foreground request.
    struct RetryOnce: Interceptor {
        let name = "retry-once"
        func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
            context.attempt == 1 && context.target.pluginOptions["scheduler"] == nil ? .retry() : .proceed
        }
    }

    func settle(_ scheduler: Scheduler, until count: Int) async throws {
        // Bounded: a background exchange on the stub answers in microseconds.
        for _ in 0..<100 where scheduler.background.value < count { try await Task.sleep(nanoseconds: 10_000_000) }
        try await Task.sleep(nanoseconds: 300_000_000)
    }

    @Test func noneAfterAFailedPrepareAndOnePerExchangeAcrossRetries() async throws {
        let stub = StubTransport { _ in .networkResponse(200, Data()) }
        let refused = Scheduler()
        let failing = Provider<Bin>(transport: stub, interceptors: [refused, Refuser()])
        let result = await failing.request(try Bin("x", base: URL(string: "https://api.example.test")!)).result
        guard case .failure(.interceptor("refuser", .prepare, _)) = result else {
            Issue.record("got \(result)")
            return
        }
        try await settle(refused, until: 1)
        #expect(refused.background.value == 0)

        let retried = Scheduler()
        let retrying = Provider<Bin>(transport: stub, interceptors: [retried, RetryOnce()])
        #expect(try await retrying.request(try Bin("x", base: URL(string: "https://api.example.test")!)).value.statusCode == 200)
        try await settle(retried, until: 2)
        #expect(retried.background.value == 1)
    }
}

/// A background exchange is one of the provider's requests: counted by `inflightCount`, ended
/// by `cancelAll()`, with a deadline of its own (it ran outside all three, with the deadline of
/// the request that asked); none goes for a request whose body is a stream (read once).
@Suite("Background exchanges belong to their provider")
struct BackgroundExchangeOwnershipTests {
    /// Answers the foreground at once; holds a background exchange (marked by its target
    /// option) until its cancellation fires (at most 20 s), noting how it ended.
    final class Holding: Transport, Sendable {
        let log = LockedCounter()
        func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
            let url = request.urlRequest.url!
            if request.urlRequest.value(forHTTPHeaderField: "X-Background") != nil {
                log.append(request.deadline.map { "deadline \($0.seconds)" } ?? "no deadline")
                for _ in 0..<400 where request.cancellation?.isCancelled != true { try? await Task.sleep(nanoseconds: 50_000_000) }
                log.append(request.cancellation?.isCancelled == true ? "cancelled" : "not cancelled")
                throw TransportFailure(kind: .cancelled, message: "cancelled")
            }
            return TransportResponse(response: HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!, data: Data())
        }
    }

    /// Schedules a background exchange from the foreground's `prepare`; marks the background one.
    struct Marking: Interceptor {
        let name = "scheduler"
        let scheduled: LockedCounter
        func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
            if context.target.pluginOptions[name] == "revalidate" {
                try request.setHeader("X-Background", "1")
            } else {
                try request.scheduleBackgroundExchange(option: "revalidate")
                scheduled.increment()
            }
            return .proceed
        }
    }

    @Test func cancelAllEndsItAndInflightCountCountsIt() async throws {
        let transport = Holding()
        let provider = Provider<Bin>(transport: transport, interceptors: [Marking(scheduled: LockedCounter())], limits: RequestLimits(deadline: 60))
        #expect(try await provider.request(try Bin("x", base: URL(string: "https://api.example.test")!)).value.statusCode == 200)
        // Registered before the foreground returned (it was when its detached task ran).
        #expect(provider.inflightCount == 1)
        #expect(await eventually(10) { transport.log.log.count == 1 })
        provider.cancelAll()
        #expect(await eventually(10) { transport.log.log.count == 2 })
        #expect(transport.log.log == ["deadline 60.0", "cancelled"])
        #expect(await eventually(10) { provider.inflightCount == 0 })
    }

    /// Asks for a retry of the background exchange 30 s later, every time.
    struct RetryBackgroundLater: Interceptor {
        let name = "retry-later"
        func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
            context.target.pluginOptions["scheduler"] == "revalidate" ? .retry(delay: 30) : .proceed
        }
    }

    /// The background exchange's deadline ends it in any stage: here a plugin's retry delay,
    /// which outlived it (only the sends were bounded).
    @Test func itsDeadlineEndsAPluginsRetryDelay() async throws {
        let stub = StubTransport { _ in .networkResponse(200, Data()) }
        let provider = Provider<Bin>(
            transport: stub, interceptors: [Marking(scheduled: LockedCounter()), RetryBackgroundLater()], maxInterceptorRetries: 5,
            limits: RequestLimits(deadline: 3))
        #expect(try await provider.request(try Bin("x", base: URL(string: "https://api.example.test")!)).value.statusCode == 200)
        // Running (its deadline of 3 s leaves a loaded machine time to look).
        #expect(provider.inflightCount == 1)
        // The deadline is 3 s; the retry delay 30 s.
        #expect(await eventually(15) { provider.inflightCount == 0 })
    }

    @Test func noneForARequestWhoseBodyIsAStream() async throws {
        let transport = Holding()
        let scheduled = LockedCounter()
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                request.httpBodyStream = InputStream(data: Data("body".utf8))
                return request
            }, transport: transport, interceptors: [Marking(scheduled: scheduled)])
        let target = try Bin("x", method: .post, base: URL(string: "https://api.example.test")!)
        #expect(try await provider.request(target).value.statusCode == 200)
        #expect(scheduled.value == 1)
        // Bounded: a background exchange would reach the transport within microseconds.
        try await Task.sleep(nanoseconds: 500_000_000)
        #expect(transport.log.log == [])
        #expect(provider.inflightCount == 0)
    }
}
