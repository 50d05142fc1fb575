import Dispatch
import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Answers at once (401 for a path under `/status/401`, else 200), noting whether a
/// ``RequestLimits/deadline`` was in scope of the send.
private struct DeadlineWitness: Transport {
    let seen: LockedCounter
    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        seen.append(ExchangeDeadline.current == nil && request.deadline == nil ? "no deadline" : "a deadline")
        return answer(request, status: request.urlRequest.url!.path.hasPrefix("/status/401") ? 401 : 200)
    }
}

/// Where a consumption's deadline reaches, and that it ends the caller's wait whatever the
/// stage it is in.
@Suite("Deadline scope")
struct DeadlineScopeTests {
    /// A request closure that does not stop when cancelled (it waits on a Dispatch queue) kept
    /// the caller until it returned: the deadline raced it inside a task group, which waits for
    /// its children. The caller now gets the deadline's failure at the deadline.
    @Test func theDeadlineDoesNotWaitForAStageThatIgnoresCancellation() async throws {
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().asyncAfter(deadline: .now() + 30) { continuation.resume() }
                }
                return request
            }, stubClosure: { _ in .immediate }, limits: RequestLimits(deadline: 1))
        let started = DispatchTime.now()
        let result = await provider.request(try Bin("get")).result
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        guard case .failure(.underlying(let failure, _)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure == TransportFailure(kind: .timedOut, message: "the request's deadline of 1.0 s passed (RequestLimits.deadline)"))
        // Far from the closure's 30 s: a loaded machine delays the deadline's timer by seconds.
        #expect(seconds < 15, "the caller waited \(seconds) s for the request closure")
    }

    /// A consumption within another (an outer provider's request closure asks an inner provider
    /// first) keeps its own deadline when it is the earlier: it ran within the outer one's, and
    /// got the server's answer after 10 s. (The outcome tells, not the time: a loaded machine
    /// delays a deadline's timer by seconds.)
    @Test func anInnerConsumptionKeepsItsOwnEarlierDeadline() async throws {
        let inner = Provider<Bin>(limits: RequestLimits(deadline: 0.5))
        let innerResult = LockedBox<Result<Response, NetworkError>?>(nil)
        let target = try Bin("delay/10")
        let outer = Provider<Bin>(
            requestClosure: { _, request in
                innerResult.set(await inner.request(target).result)
                return request
            }, stubClosure: { _ in .immediate }, limits: RequestLimits(deadline: 60))
        _ = await outer.request(try Bin("get")).result
        guard case .failure(.underlying(let failure, _))? = innerResult.get() else {
            Issue.record("got \(String(describing: innerResult.get()))")
            return
        }
        #expect(failure == TransportFailure(kind: .timedOut, message: "the request's deadline of 0.5 s passed (RequestLimits.deadline)"))
    }

    /// A request started (`start`, `events()`) from within a consumption is a caller of its own:
    /// it does not take the deadline of the consumption it was started in (an unstructured task
    /// inherits task-locals, and it ran out when the request that started it ended).
    @Test func aRequestStartedWithinAConsumptionHasNoDeadlineOfItsOwnThere() async throws {
        let seen = LockedCounter()
        let inner = Provider<Bin>(transport: DeadlineWitness(seen: seen))
        let target = try Bin("get")
        let outer = Provider<Bin>(
            requestClosure: { _, request in
                inner.request(target).start { _ in seen.append("completed") }
                for try await event in inner.request(target).events() {
                    if case .completed = event { seen.append("completed") }
                }
                return request
            }, stubClosure: { _ in .immediate }, limits: RequestLimits(deadline: 30))
        #expect(try await outer.request(try Bin("get")).value.statusCode == 200)
        #expect(await eventually(60) { seen.log.count == 4 })
        #expect(seen.log.sorted() == ["completed", "completed", "no deadline", "no deadline"])
    }

    /// A `Task {}` started within a consumption inherits its task-locals, its deadline's binding
    /// among them: a request the task makes while the consumption runs keeps that deadline, and
    /// one it makes after the consumption returned has none of it (it kept the deadline of a
    /// request that had ended, which would have timed it out once passed).
    @Test func aTaskStartedWithinAConsumptionHasItsDeadlineOnlyWhileItRuns() async throws {
        let seen = LockedCounter()
        let inner = Provider<Bin>(transport: DeadlineWitness(seen: seen))
        let target = try Bin("get")
        let outerEnded = LockedBox(false)
        let later = LockedBox<Int?>(nil)
        let outer = Provider<Bin>(
            requestClosure: { _, request in
                // While the consumption runs (its request closure waits for this request).
                _ = await Task { await inner.request(target).result }.value
                // Once it has returned.
                Task {
                    _ = await eventually(60) { outerEnded.get() }
                    later.set((try? await inner.request(target).value)?.statusCode ?? -1)
                }
                return request
            }, stubClosure: { _ in .immediate }, limits: RequestLimits(deadline: 30))
        #expect(try await outer.request(try Bin("get")).value.statusCode == 200)
        outerEnded.set(true)
        #expect(await eventually(60) { later.get() != nil })
        #expect(later.get() == 200)
        #expect(seen.log == ["a deadline", "no deadline"])
    }

    /// A consumption with a deadline of its own, started within another whose deadline is earlier
    /// (in a `Task {}`) and outliving it, keeps its own deadline after the other ended: its sends
    /// after that had none (it ran under the other's, which ended).
    @Test func aNestedConsumptionThatOutlivesTheOtherKeepsItsOwnDeadline() async throws {
        let seen = LockedCounter()
        let outerEnded = LockedBox(false)
        /// The first send waits (at most 20 s) until the outer consumption ended, and answers 503;
        /// the next 200. Each notes whether a deadline was in its plan.
        struct Witness: Transport {
            let seen: LockedCounter
            let outerEnded: LockedBox<Bool>
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let first = seen.log.isEmpty
                seen.append(request.deadline == nil ? "no deadline" : "a deadline")
                if first { await waitFor(outerEnded) }
                return answer(request, status: first ? 503 : 200)
            }
        }
        let inner = Provider<Bin>(transport: Witness(seen: seen, outerEnded: outerEnded), limits: RequestLimits(deadline: 30))
        let target = try Bin("get")
        let innerStatus = LockedBox<Int?>(nil)
        let outer = Provider<Bin>(
            requestClosure: { _, request in
                Task {
                    let result = await inner.request(target).retry(RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.01)).result
                    innerStatus.set((try? result.get())?.statusCode ?? -1)
                }
                // Returns once the inner consumption sent its first request, within this one.
                _ = await eventually(20) { !seen.log.isEmpty }
                return request
            }, stubClosure: { _ in .immediate }, limits: RequestLimits(deadline: 10))
        #expect(try await outer.request(target).value.statusCode == 200)
        outerEnded.set(true)
        #expect(await eventually(30) { innerStatus.get() != nil })
        #expect(innerStatus.get() == 200)
        #expect(seen.log == ["a deadline", "a deadline"])
    }

    /// A task a consumption's work awaits (not a child: the deadline's cancellation does not reach
    /// it) runs on after the deadline passed, and keeps the passed deadline: a request it makes
    /// then is held to it (it had none once the caller got its `timedOut`).
    @Test func aTaskTheWorkAwaitsKeepsThePassedDeadline() async throws {
        let seen = LockedCounter()
        let inner = Provider<Bin>(transport: DeadlineWitness(seen: seen))
        let target = try Bin("get")
        let callerReturned = LockedBox(false)
        let outer = Provider<Bin>(
            requestClosure: { _, request in
                _ = await Task {
                    // Until the caller has its answer (at most 20 s).
                    _ = await eventually(20) { callerReturned.get() }
                    return await inner.request(target).result
                }.value
                return request
            }, stubClosure: { _ in .immediate }, limits: RequestLimits(deadline: 0.5))
        let result = await outer.request(target).result
        callerReturned.set(true)
        guard case .failure(.underlying(let failure, _)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure.kind == .timedOut)
        #expect(await eventually(30) { !seen.log.isEmpty })
        #expect(seen.log == ["a deadline"])
    }

    /// `ExchangeDeadline.reached(after:)`: a retry's wait that ends at or past the deadline of the
    /// consumption that runs reaches it; none does once that consumption's work ended, or with no
    /// deadline.
    @Test func aWaitReachesTheDeadlineOfTheWorkThatRuns() {
        #expect(!ExchangeDeadline.reached(after: 1e9))
        let passed = ExchangeDeadline.Binding((DispatchTime.now(), 0), parent: nil)
        let later = ExchangeDeadline.Binding(ExchangeDeadline.starting(3600)!, parent: passed)
        ExchangeDeadline.$binding.withValue(later) {
            // The earlier of the two, the enclosing one's, counts.
            #expect(ExchangeDeadline.reached(after: 0))
            passed.life.end()
            #expect(!ExchangeDeadline.reached(after: 10))
            #expect(ExchangeDeadline.reached(after: 3601))
            later.life.end()
            #expect(!ExchangeDeadline.reached(after: 1e9))
            #expect(ExchangeDeadline.current == nil)
        }
    }

    /// The exchange callers share runs without the first caller's deadline (each caller's own
    /// ends its wait): it had it in scope, task-local, and the requests made within it took it.
    @Test func aSharedExchangeRunsWithoutTheFirstCallersDeadline() async throws {
        let seen = LockedCounter()
        let provider = Provider<Bin>(transport: DeadlineWitness(seen: seen), trackInflights: true, limits: RequestLimits(deadline: 30))
        #expect(try await provider.request(try Bin("get")).value.statusCode == 200)
        #expect(seen.log == ["no deadline"])
    }

    /// A credential refresh serves every request waiting for it: it runs without the deadline of
    /// the request that started it, so a request its refresher makes has a deadline of its own.
    @Test func aRefreshRunsWithoutTheDeadlineOfTheRequestThatStartedIt() async throws {
        let seen = LockedCounter()
        let provider = Provider<Bin>(
            transport: DeadlineWitness(seen: LockedCounter()), interceptors: [TokenInterceptor()], limits: RequestLimits(deadline: 30))
        provider.services.setValue("bad-0", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in
            seen.append(ExchangeDeadline.current == nil ? "no deadline" : "a deadline")
            return "good-1"
        }
        #expect(try await provider.request(try Bin("bearer")).value.statusCode == 200)
        #expect(seen.log == ["no deadline"])
    }

    /// A consumption whose task is cancelled before it begins starts nothing: its request
    /// closure ran, in a task the cancellation reached a hop later.
    @Test func aConsumptionCancelledBeforeItBeginsStartsNothing() async throws {
        let closures = LockedCounter()
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                closures.increment()
                return request
            }, stubClosure: { _ in .immediate }, limits: RequestLimits(deadline: 10))
        let target = try Bin("get")
        let task = Task { () -> Result<Response, NetworkError> in
            // Until cancelled (at most 20 s).
            try? await Task.sleep(nanoseconds: 20_000_000_000)
            return await provider.request(target).result
        }
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("not cancelled")
            return
        }
        #expect(closures.value == 0)
    }

    /// A stage that reports a timeout after the deadline passed (it did not heed the
    /// cancellation) is not retried: the caller got the deadline's failure already, and an
    /// observer heard of a retry that was never to be.
    @Test func noRetryOnceTheDeadlinePassed() async throws {
        let retries = LockedCounter()
        let policy = RetryPolicy(retryLimit: 3, exponentialBackoffScale: 0.01, onRetry: { _ in retries.increment() })
        let pipeline = ResponsePipeline<Int>(method: .get, deadline: 1) { _ async throws(NetworkError) -> Int in
            // Deaf to cancellation (and holding no thread: a loop of cancelled sleeps would spin).
            await withCheckedContinuation { continuation in
                DispatchQueue.global().asyncAfter(deadline: .now() + 1.5) { continuation.resume() }
            }
            throw .underlying(TransportFailure(kind: .timedOut, message: "timed out"), nil)
        }.retry(policy)
        let result = await pipeline.result
        guard case .failure(.underlying(let failure, _)) = result else {
            Issue.record("got \(result)")
            return
        }
        // The deadline's failure, or (on a machine so busy the timer came late) the stage's own
        // timeout, which came after the deadline all the same.
        #expect(failure.kind == .timedOut)
        // The stage reports 0.5 s after the deadline; a retry would be heard of then.
        try await Task.sleep(nanoseconds: 2_000_000_000)
        #expect(retries.value == 0)
    }

    /// A wait on a signal that ends early (its task cancelled) leaves no handler on the signal:
    /// each kept one until the wait's end, an hour here, and a signal that outlives many waits
    /// (a call's, through its retries) grew.
    @Test func aCancelledWaitLeavesNoHandlerOnTheSignal() async {
        let signal = CancellationSignal()
        for _ in 0..<3 {
            let wait = Task { await signal.sleep(seconds: 3600) }
            // Until the wait has registered (bounded: 5 s).
            for _ in 0..<500 where signal.handlerCount == 0 { try? await Task.sleep(nanoseconds: 10_000_000) }
            wait.cancel()
            #expect(await wait.value == false)
        }
        #expect(signal.handlerCount == 0)
        #expect(await signal.sleep(seconds: 0.01) == true)
        #expect(signal.handlerCount == 0)
    }
}
