import Dispatch
import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Cancellation")
struct CancellationTests {
    @Test(arguments: TransportKind.allCases) func cancellingACallbackRequestDeliversCancelledOnce(_ transport: TransportKind) async throws {
        let recording = RecordingTransport(transport.make())
        let provider = Provider<Bin>(transport: recording)
        let calls = LockedCounter()
        let target = try Bin("delay/10")
        let box = LockedBox<(any Cancellable)?>(nil)
        async let delivered: Result<Response, NetworkError> = withCheckedContinuation { continuation in
            box.set(
                provider.request(target).start { result in
                    if calls.increment() == 1 { continuation.resume(returning: result) }
                })
        }
        #expect(await eventually { recording.started.value == 1 && box.get() != nil })
        try await Task.sleep(nanoseconds: 100_000_000)
        box.get()?.cancel()
        box.get()?.cancel()
        let result = await delivered
        guard case .failure(.cancelled) = result else {
            Issue.record("got \(result)")
            return
        }
        // The URL task itself was cancelled: it did not run to the server's answer.
        #expect(await eventually { recording.outcomes.log == ["cancelled"] })
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(calls.value == 1)
    }

    @Test(arguments: TransportKind.allCases) func cancellingTheAwaitingTaskCancelsTheRequest(_ transport: TransportKind) async throws {
        let recording = RecordingTransport(transport.make())
        let provider = Provider<Bin>(transport: recording)
        let target = try Bin("delay/10")
        let task = Task { await provider.request(target).result }
        #expect(await eventually { recording.started.value == 1 })
        try await Task.sleep(nanoseconds: 100_000_000)
        task.cancel()
        let result = await task.value
        guard case .failure(.cancelled) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(await eventually { recording.outcomes.log == ["cancelled"] })
        #expect(await eventually { provider.inflightCount == 0 })
    }

    @Test(arguments: TransportKind.allCases) func cancelAllCancelsEveryInflightRequest(_ transport: TransportKind) async throws {
        let provider = transport.provider()
        let target = try Bin("delay/5")
        let tasks = (0..<5).map { _ in Task { await provider.request(target).result } }
        #expect(await eventually { provider.inflightCount == 5 })
        provider.cancelAll()
        for task in tasks {
            let result = await task.value
            guard case .failure(.cancelled) = result else {
                Issue.record("got \(result)")
                continue
            }
        }
        #expect(await eventually { provider.inflightCount == 0 })
    }

    /// `cancelAll()` reaches a request between its sends too: waiting out a retry's backoff, or
    /// in its request closure (which it cannot interrupt: the request is not sent when it
    /// returns). Both used to go on: the retries were sent, and the closure's request too.
    @Test func cancelAllReachesARequestInItsBackoffOrItsRequestClosure() async throws {
        let counting = CountingTransport(TransportKind.curl.make())
        let provider = Provider<Bin>(transport: counting)
        let backoff = provider.request(try Bin("status/503")).filterSuccessfulStatusCodes()
            .retry(RetryPolicy(exponentialBackoffScale: 30) { _ in provider.cancelAll() })
        let started = DispatchTime.now()
        let retried = await backoff.result
        guard case .failure(.cancelled) = retried else {
            Issue.record("not cancelled: \(retried)")
            return
        }
        #expect(counting.count == 1)
        #expect(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds < 10_000_000_000, "the 30 s backoff was not waited out")

        let inClosure = Locked(false)
        let gate = Locked<CheckedContinuation<Void, Never>?>(nil)
        let closing = Provider<Bin>(
            requestClosure: { _, request in
                await withCheckedContinuation { continuation in
                    gate.withLock { $0 = continuation }
                    inClosure.withLock { $0 = true }
                }
                return request
            }, transport: counting)
        let target = try Bin("get")
        let task = Task { await closing.request(target).result }
        #expect(await eventually { inClosure.withLock { $0 } })
        closing.cancelAll()
        gate.withLock { $0?.resume() }
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("not cancelled")
            return
        }
        #expect(counting.count == 1, "the request the closure made was not sent")
    }

    /// A `cancelAll()` after an attempt ended and before its retry is announced: the consumption
    /// ends cancelled and `onRetry` hears of no retry (it announced one, then found the
    /// cancellation in the backoff).
    @Test func aRetryCancelledByCancelAllIsNotAnnounced() async throws {
        let counting = CountingTransport(TransportKind.curl.make())
        let provider = Provider<Bin>(transport: counting)
        let retries = LockedCounter()
        let pipeline = provider.request(try Bin("status/503"))
            .map { response in
                provider.cancelAll()
                return response
            }
            .filterSuccessfulStatusCodes()
            .retry(RetryPolicy(exponentialBackoffScale: 0.001) { _ in retries.increment() })
        guard case .failure(.cancelled) = await pipeline.result else {
            Issue.record("not cancelled")
            return
        }
        #expect(retries.value == 0)
        #expect(counting.count == 1)
    }

    /// A consumption whose task is cancelled before it starts runs neither the endpoint closure
    /// nor the request closure (with no deadline set; with one, it never did).
    @Test(arguments: [nil, 30.0]) func aCancelledCallerRunsNoClosure(_ deadline: Double?) async throws {
        let endpoints = LockedCounter()
        let closures = LockedCounter()
        let counting = CountingTransport(TransportKind.curl.make())
        let provider = Provider<Bin>(
            endpointClosure: { target in
                endpoints.increment()
                return Provider<Bin>.defaultEndpointMapping(for: target)
            },
            requestClosure: { _, request in
                closures.increment()
                return request
            }, transport: counting, limits: RequestLimits(deadline: deadline))
        let target = try Bin("get")
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await provider.request(target).result
        }
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("not cancelled")
            return
        }
        #expect(endpoints.value == 0 && closures.value == 0 && counting.count == 0)
    }

    /// A consumption waiting out a retry's backoff is in flight: it sends again when the backoff
    /// ends (`inflightCount` read 0, and a shutdown that waited for 0 went on before the retry).
    @Test func aRequestInItsBackoffIsInFlight() async throws {
        let provider = Provider<Bin>(transport: TransportKind.curl.make())
        let retried = LockedCounter()
        let pipeline = provider.request(try Bin("status/503")).filterSuccessfulStatusCodes()
            .retry(RetryPolicy(retryLimit: 1, exponentialBackoffScale: 30) { _ in retried.increment() })
        let task = Task { await pipeline.result }
        #expect(await eventually(10) { retried.value == 1 })
        // `onRetry` is told before the backoff begins.
        #expect(await eventually(5) { provider.inflightCount == 1 })
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("not cancelled")
            return
        }
        #expect(provider.inflightCount == 0)
    }

    /// A retried request is in flight between its attempts too, with no gap: after an attempt
    /// ended (a step of the retried pipeline, `onRetry`) it read 0 until its backoff was counted.
    /// So for retries within retries (the outer one's `onRetry` comes after the inner one ended),
    /// and whether the provider shares exchanges or not; 0 at the end.
    @Test(arguments: [false, true]) func aRetriedRequestIsInFlightBetweenItsAttempts(_ sharing: Bool) async throws {
        /// 503 for the first three sends, then 200.
        struct Recovering: Transport {
            let sends: LockedCounter
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                sends.increment()
                return answer(request, status: sends.value <= 3 ? 503 : 200)
            }
        }
        let sends = LockedCounter()
        let provider = Provider<Bin>(transport: Recovering(sends: sends), trackInflights: sharing)
        let counts = Locked([String]())
        @Sendable func note(_ place: String) { counts.withLock { $0.append("\(place) \(provider.inflightCount)") } }
        let inner = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.001) { _ in note("inner") }
        let outer = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.001) { _ in note("outer") }
        let response = try await provider.request(try Bin("get"))
            .map { response in
                note("step")
                return response
            }
            .filterSuccessfulStatusCodes().retry(inner).retry(outer).value
        #expect(response.statusCode == 200)
        #expect(sends.value == 4)
        #expect(
            counts.withLock { $0 } == ["step 1", "inner 1", "step 1", "outer 1", "step 1", "inner 1", "step 1"], "\(counts.withLock { $0 })")
        #expect(provider.inflightCount == 0)
    }

    /// A request a task started within an attempt makes counts on its own, beside the retried
    /// request that waits out its backoff: 2 (it took the retried request's place, and read 1). So
    /// too when the task's request is retried by a pipeline of its own, without a provider's registry.
    @Test(arguments: [false, true]) func aRequestStartedWithinAnAttemptCountsBesideTheRetriedOne(_ retriedAlone: Bool) async throws {
        let held = LockedBox(false)
        let entered = LockedCounter()
        /// `held` answers once released (at most 20 s); anything else, 503.
        struct Transport503: Transport {
            let held: LockedBox<Bool>
            let entered: LockedCounter
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                guard request.urlRequest.url?.path == "/held" else { return answer(request, status: 503) }
                entered.increment()
                await waitFor(held)
                return answer(request)
            }
        }
        let provider = Provider<Bin>(transport: Transport503(held: held, entered: entered))
        let started = LockedCounter()
        let retried = LockedCounter()
        let side = Locked<Task<Result<Response, NetworkError>, Never>?>(nil)
        let pipeline = provider.request(try Bin("get"))
            .map { response in
                if started.increment() == 1 {
                    let held = try! Bin("held")
                    let task = Task {
                        guard retriedAlone else { return await provider.request(held).result }
                        // A pipeline of the app's own (no registry), retried.
                        return await ResponsePipeline<Response> { _ async throws(NetworkError) in try await provider.request(held).value }
                            .retry(RetryPolicy(retryLimit: 1)).result
                    }
                    side.withLock { $0 = task }
                }
                return response
            }
            .filterSuccessfulStatusCodes()
            .retry(RetryPolicy(retryLimit: 1, exponentialBackoffScale: 30) { _ in retried.increment() })
        let task = Task { await pipeline.result }
        #expect(await eventually(10) { retried.value == 1 && entered.value == 1 })
        #expect(provider.inflightCount == 2)
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("not cancelled")
            return
        }
        #expect(provider.inflightCount == 1)
        held.set(true)
        let sideTask = try #require(side.withLock { $0 })
        #expect(try await sideTask.value.get().statusCode == 200)
        #expect(provider.inflightCount == 0)
    }

    /// A request whose request closure runs is in flight (`inflightCount` read 0 while the closure
    /// waited, and a shutdown that waited for 0 went on before the request was sent). Two identical
    /// ones a provider that shares exchanges makes count as two until they share one; a closure
    /// that fails leaves nothing counted.
    @Test(arguments: [false, true]) func aRequestInItsRequestClosureIsInFlight(_ sharing: Bool) async throws {
        let release = LockedBox(false)
        let finish = LockedBox(false)
        let entered = LockedCounter()
        let sends = LockedCounter()
        /// Answers once told to finish (at most 20 s): a transport the provider may share (a stub's
        /// exchanges are never shared).
        struct Held: Transport {
            let finish: LockedBox<Bool>
            let sends: LockedCounter
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                sends.increment()
                await waitFor(finish)
                return answer(request)
            }
        }
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                entered.increment()
                // Until released (at most 10 s), with no thread held.
                for _ in 0..<400 where !release.get() { try? await Task.sleep(nanoseconds: 25_000_000) }
                if request.url?.path == "/status/418" { throw NetworkError.requestMapping("refused") }
                return request
            }, transport: Held(finish: finish, sends: sends), trackInflights: sharing)
        let target = try Bin("get")
        let tasks = (0..<2).map { _ in Task { await provider.request(target).result } }
        #expect(await eventually(10) { entered.value == 2 })
        #expect(provider.inflightCount == 2)
        release.set(true)
        // Shared: one exchange for both; else two.
        let expected = sharing ? 1 : 2
        #expect(await eventually(10) { sends.value == expected && provider.inflightCount == expected }, "\(sends.value) sends")
        finish.set(true)
        for task in tasks { #expect(try await task.value.get().statusCode == 200) }
        #expect(sends.value == expected)
        #expect(provider.inflightCount == 0)

        let teapot = try Bin("status/418")
        let failing = Task { await provider.request(teapot).result }
        #expect(await eventually(10) { entered.value == 3 })
        guard case .failure(.requestMapping) = await failing.value else {
            Issue.record("the failing closure did not fail the request")
            return
        }
        #expect(provider.inflightCount == 0)
    }

    /// A caller that leaves a shared exchange hears of no progress after its call returned: a
    /// report the exchange was making as it left (its handler read from the table before) reached
    /// it after. Here the first handler a report calls holds the report (on a thread of its own,
    /// none of the task pool's) until every other caller has left and returned; each of their
    /// handlers then notes whether its caller had returned.
    @Test func aCallerThatLeftASharedExchangeHearsNoMoreProgress() async throws {
        let others = 6
        let entered = LockedCounter()
        let go = LockedBox(false)
        let finish = LockedBox(false)
        /// Reports once when told to go (from a Dispatch thread), then answers when told to finish
        /// (at most 20 s each).
        struct Reporting: Transport {
            let go: LockedBox<Bool>
            let finish: LockedBox<Bool>
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                await waitFor(go)
                let report = request.progress
                DispatchQueue.global().async { report?(TransferProgress(direction: .download, completedBytes: 1, totalBytes: 2)) }
                await waitFor(finish)
                return answer(request)
            }
        }
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                entered.increment()
                return request
            }, transport: Reporting(go: go, finish: finish), trackInflights: true)
        let target = try Bin("get")
        let holder = Locked<Int?>(nil)
        let returned = (0...others).map { _ in LockedBox(false) }
        let late = LockedCounter()
        let leftCount = LockedCounter()
        let tasks = (0...others).map { index in
            Task {
                let result: Result<Response, NetworkError>
                do throws(NetworkError) {
                    result = .success(
                        try await provider.request(target).run(progress: { _ in
                            // The first handler called holds the report until the others have returned.
                            if holder.withLock({ first in
                                if first == nil { first = index }
                                return first == index
                            }) {
                                for _ in 0..<2000 where leftCount.value < others { usleep(5000) }
                            } else if returned[index].get() {
                                late.append("\(index)")
                            }
                        }))
                } catch {
                    result = .failure(error)
                }
                returned[index].set(true)
                if holder.withLock({ $0 }) != index { leftCount.increment() }
                return result
            }
        }
        #expect(await eventually(10) { entered.value == others + 1 })
        // Every caller waits on the exchange once the closure ran and the request was shared.
        try await Task.sleep(nanoseconds: 200_000_000)
        go.set(true)
        #expect(await eventually(20) { holder.withLock { $0 } != nil })
        let kept = try #require(holder.withLock { $0 })
        for (index, task) in tasks.enumerated() where index != kept { task.cancel() }
        for (index, task) in tasks.enumerated() where index != kept {
            guard case .failure(.cancelled) = await task.value else {
                Issue.record("caller \(index) was not cancelled")
                continue
            }
        }
        finish.set(true)
        #expect(try await tasks[kept].value.get().statusCode == 200)
        #expect(late.log.isEmpty, "callers told of progress after they returned: \(late.log)")
    }

    /// `run(progress:)` reports nothing after it returned, whatever the transport does: this one
    /// reports once more from another thread after it answered (it reached the caller then).
    @Test func runReportsNoProgressAfterItReturned() async throws {
        let reportedLate = LockedBox(false)
        /// Answers at once, and reports progress 50 ms later.
        struct LateReporter: Transport {
            let done: LockedBox<Bool>
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let report = request.progress
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) {
                    report?(TransferProgress(direction: .download, completedBytes: 1, totalBytes: 1))
                    done.set(true)
                }
                return answer(request)
            }
        }
        let provider = Provider<Bin>(transport: LateReporter(done: reportedLate))
        let returned = LockedBox(false)
        let afterReturn = LockedCounter()
        let response = try await provider.request(try Bin("get")).run(progress: { _ in
            if returned.get() { afterReturn.increment() }
        })
        returned.set(true)
        #expect(response.statusCode == 200)
        #expect(await eventually(10) { reportedLate.get() })
        #expect(afterReturn.value == 0)
    }

    /// A token cancelled after the request ended, while its completion waits for the queue,
    /// delivers `.cancelled` as it promises (it delivered the value).
    @Test func aTokenCancelledBeforeItsCompletionRanDeliversCancelled() async throws {
        // Held by suspending it, not by a block that waits: that would take a thread of the
        // global queue, which timers of other tests running meanwhile need.
        let queue = DispatchQueue(label: "pluginhost.tests.held")
        queue.suspend()
        let ended = LockedBox(false)
        let pipeline = ResponsePipeline<Int> { _ in
            ended.set(true)
            return 1
        }
        let delivered = LockedBox<Result<Int, NetworkError>?>(nil)
        let token = pipeline.start(on: queue) { delivered.set($0) }
        #expect(await eventually(10) { ended.get() })
        token.cancel()
        queue.resume()
        #expect(await eventually(10) { delivered.get() != nil })
        guard case .failure(.cancelled) = delivered.get() else {
            Issue.record("got \(String(describing: delivered.get()))")
            return
        }
        #expect(token.isCancelled)
    }

    /// After `cancelAll()`, an identical request starts an exchange of its own: it joined the
    /// cancelled one, still in the table until its transport stopped, and was cancelled with it.
    @Test func aRequestAfterCancelAllDoesNotJoinTheCancelledExchange() async throws {
        let gate = LockedBox(false)
        let sends = LockedCounter()
        /// The first send waits for the gate without heeding cancellation (at most 20 s); the
        /// others go to the server.
        struct Gated: Transport {
            let inner: any Transport
            let gate: LockedBox<Bool>
            let sends: LockedCounter
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                if sends.increment() == 1 {
                    await waitFor(gate)
                    throw TransportFailure(kind: .cancelled, message: "cancelled")
                }
                return try await inner.send(request)
            }
        }
        let provider = Provider<Bin>(transport: Gated(inner: TransportKind.curl.make(), gate: gate, sends: sends), trackInflights: true)
        let target = try Bin("get")
        let first = Task { await provider.request(target).result }
        #expect(await eventually(10) { sends.value == 1 })
        provider.cancelAll()
        let second = Task { await provider.request(target).result }
        #expect(await eventually(10) { sends.value == 2 }, "the second request joined the cancelled exchange")
        let answered = await second.value
        // The cancelled exchange runs on until its transport stops: it is still counted.
        #expect(provider.inflightCount == 1)
        gate.set(true)
        guard case .failure(.cancelled) = await first.value else {
            Issue.record("the first request was not cancelled")
            return
        }
        #expect(try answered.get().statusCode == 200)
        #expect(await eventually(10) { provider.inflightCount == 0 })
    }

    @Test(arguments: TransportKind.allCases) func oneSharedWaiterCancellingLeavesTheOthers(_ transport: TransportKind) async throws {
        let counting = CountingTransport(transport.make())
        let provider = Provider<Bin>(transport: counting, trackInflights: true)
        let target = try Bin("delay/1")
        let staying = Task { await provider.request(target).result }
        let leaving = Task { await provider.request(target).result }
        try await Task.sleep(nanoseconds: 300_000_000)
        leaving.cancel()
        guard case .failure(.cancelled) = await leaving.value else {
            Issue.record("leaving waiter not cancelled")
            return
        }
        #expect(try await staying.value.get().statusCode == 200)
        #expect(counting.count == 1)
    }

    @Test(arguments: TransportKind.allCases) func releasedProviderStillCompletesItsRequests(_ transport: TransportKind) async throws {
        var provider: Provider<Bin>? = transport.provider()
        weak let weakProvider = provider
        let target = try Bin("delay/1")
        let result: Result<Response, NetworkError> = await withCheckedContinuation { continuation in
            provider!.request(target).start { continuation.resume(returning: $0) }
            provider = nil
        }
        #expect(try result.get().statusCode == 200)
        #expect(await eventually { weakProvider == nil })
    }

    @Test func cancelledStubDelayIsCancelled() async throws {
        let provider = Provider<Bin>(stubClosure: Provider.delayedStub(5))
        let target = try Bin("get")
        let task = Task { await provider.request(target).result }
        try await Task.sleep(nanoseconds: 100_000_000)
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("stub not cancelled")
            return
        }
    }
}
