import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A retried response's `Retry-After` (RFC 9110 §10.2.3): waited for up to the policy's
/// `retryAfterLimit`, and past it the answer is the result. The waits are read from `onRetry`
/// (and one test checks they were slept, with a lower bound on the time taken).
@Suite("Retry-After")
struct RetryAfterTests {
    /// A provider whose every answer is a 503 with `fields`; `count` tells how many were sent.
    static func unavailable(_ fields: [String: String], limits: RequestLimits = RequestLimits()) -> (Provider<Bin>, CountingTransport) {
        let counting = CountingTransport(StubTransport { _ in .networkResponseWithHeaders(503, fields, Data()) })
        return (Provider<Bin>(transport: counting, limits: limits), counting)
    }

    static func policy(_ delays: LockedCounter, limit: Double? = 60) -> RetryPolicy {
        RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.01, retryAfterLimit: limit, onRetry: { delays.append(String($0.delay)) })
    }

    /// Seconds longer than the backoff are waited, on both paths: a failure (`filterSuccessfulStatusCodes`)
    /// and a response retried as a value (`Response` pipelines' `retry`). A wait equal to the
    /// limit is within it.
    @Test func secondsLongerThanTheBackoffAreWaited() async throws {
        let delays = LockedCounter()
        let (provider, counting) = Self.unavailable(["Retry-After": "1"])
        let clock = ContinuousClock()
        let start = clock.now
        try await Self.bothPathsEndWith503(provider, Self.policy(delays, limit: 1))
        #expect(delays.log == ["1.0", "1.0"])
        #expect(counting.count == 4)
        // Slept, not only announced: two waits of a second each (a lower bound, which load cannot break).
        #expect(clock.now - start >= .milliseconds(1900), "\(clock.now - start)")
    }

    /// Retries a request (`bin`, a GET by default) as a failure and as a value with `policy`;
    /// both end with the 503.
    static func bothPathsEndWith503(_ provider: Provider<Bin>, _ policy: RetryPolicy, bin: Bin? = nil) async throws {
        let target = try bin ?? Bin("get")
        let failed = await provider.request(target).filterSuccessfulStatusCodes().retry(policy).result
        guard case .failure(.statusCode(let response)) = failed else {
            Issue.record("got \(failed)")
            return
        }
        #expect(response.statusCode == 503)
        #expect(try await provider.request(target).retry(policy).value.statusCode == 503)
    }

    /// A wait past the limit is not retried: the server's answer is the result, at once. So for
    /// seconds too many for a `Double`'s integers and for a date ten minutes ahead.
    @Test(arguments: ["120", String(repeating: "9", count: 400), "date 600 s ahead"])
    func aWaitPastTheLimitIsNotRetried(_ argument: String) async throws {
        // The date is made when the test runs (the arguments are made when the tests are listed).
        let field = argument.hasPrefix("date") ? HTTPDate.format(Date().timeIntervalSince1970 + 600) : argument
        let delays = LockedCounter()
        let (provider, counting) = Self.unavailable(["Retry-After": field])
        try await Self.bothPathsEndWith503(provider, Self.policy(delays))
        #expect(delays.log.isEmpty)
        #expect(counting.count == 2)
    }

    /// A wait within the limit that would end past the consumption's deadline is not taken: the
    /// caller gets the server's answer rather than a timeout.
    @Test func aWaitPastTheDeadlineIsNotTaken() async throws {
        let delays = LockedCounter()
        let (provider, counting) = Self.unavailable(["Retry-After": "30"], limits: RequestLimits(deadline: 5))
        try await Self.bothPathsEndWith503(provider, Self.policy(delays))
        #expect(delays.log.isEmpty)
        #expect(counting.count == 2)
        // One that ends well before the deadline is waited, on both paths.
        let (within, sent) = Self.unavailable(["Retry-After": "1"], limits: RequestLimits(deadline: 30))
        try await Self.bothPathsEndWith503(within, Self.policy(delays))
        #expect(delays.log == ["1.0", "1.0"])
        #expect(sent.count == 4)
    }

    /// A method that is not idempotent is not retried for its `Retry-After`, on either path.
    @Test func aPostIsNotRetriedForItsRetryAfter() async throws {
        let delays = LockedCounter()
        let (provider, counting) = Self.unavailable(["Retry-After": "1"])
        try await Self.bothPathsEndWith503(provider, Self.policy(delays), bin: try Bin("post", method: .post))
        #expect(delays.log.isEmpty)
        #expect(counting.count == 2)
    }

    /// Without a limit (or a limit that is not a number) the field is ignored; a field that is
    /// neither seconds nor a date, a shorter wait and a past date leave the backoff. On both paths.
    @Test func theBackoffStandsWhenTheFieldDoesNotCount() async throws {
        let rows: [(String, Double?)] = [
            ("120", nil), ("120", .nan), ("0", -1), ("soon", 60), ("0", 60), ("-5", 60), ("Sun, 06 Nov 1994 08:49:37 GMT", 60),
        ]
        for (field, limit) in rows {
            let delays = LockedCounter()
            let (provider, counting) = Self.unavailable(["Retry-After": field])
            try await Self.bothPathsEndWith503(provider, Self.policy(delays, limit: limit))
            #expect(delays.log == ["0.01", "0.01"], "\(field) \(String(describing: limit))")
            #expect(counting.count == 4, "\(field) \(String(describing: limit))")
        }
    }

    /// An HTTP date is the wait until it; the parsing reads the RFC's forms.
    @Test func anHTTPDateIsTheWaitUntilIt() {
        let now = HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")!
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now) == 30)
        #expect(RetryPolicy.retryAfter("Sunday, 06-Nov-94 08:49:47 GMT", now: now) == 10)
        #expect(RetryPolicy.retryAfter(" 42 ", now: now) == 42)
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:49:00 GMT", now: now) == 0)
        #expect(RetryPolicy.retryAfter("4.5", now: now) == nil)
        #expect(RetryPolicy.retryAfter("", now: now) == nil)
        let policy = RetryPolicy(exponentialBackoffScale: 0.5)
        #expect(policy.delay(beforeRetry: 1, answeredWith: nil) == 0.5)
    }

    /// An HTTP date is measured from the response's own `Date` (the server's clock), not this
    /// machine's: a server an hour ahead asking for a second gets a second (read against this
    /// clock: an hour, past the limit), one an hour behind asking for ten minutes is past the
    /// limit (read against this clock: a date gone by, no wait). A `Date` that is not a date
    /// leaves this machine's clock.
    @Test(arguments: [(3600.0, 1.0, ["1.0", "1.0"]), (-3600, 600, []), (.nan, 0, ["0.01", "0.01"])])
    func anHTTPDateIsReadOnTheServersClock(_ serverAhead: Double, _ asked: Double, _ waits: [String]) async throws {
        let serverNow = Date().timeIntervalSince1970 + (serverAhead.isNaN ? 0 : serverAhead)
        let date = serverAhead.isNaN ? "yesterday" : HTTPDate.format(serverNow)
        let delays = LockedCounter()
        let (provider, counting) = Self.unavailable(["Retry-After": HTTPDate.format(serverNow + asked), "Date": date])
        try await Self.bothPathsEndWith503(provider, Self.policy(delays))
        #expect(delays.log == waits)
        #expect(counting.count == 2 + waits.count)
        let now = HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")!
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now + 7200, serverDate: "Sun, 06 Nov 1994 08:49:57 GMT") == 10)
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now, serverDate: "Sun, 06 Nov 1994 09:00:00 GMT") == 0)
        #expect(RetryPolicy.retryAfter("30", now: now, serverDate: "Sun, 06 Nov 1994 09:00:00 GMT") == 30)
    }

    /// A response's `Age` (seconds it spent in caches) is taken off a date read on the server's
    /// clock: a date 2 s after a `Date` the response left with 1 s ago is a second's wait (two
    /// `Age` fields, joined, count as the first). An `Age` that is not delta-seconds is ignored,
    /// and one past the date leaves no wait (the backoff).
    @Test(arguments: [("1", ["1.0", "1.0"]), (" 1 ", ["1.0", "1.0"]), ("1, 0", ["1.0", "1.0"]), ("-1", ["2.0", "2.0"]), ("5", ["0.01", "0.01"])])
    func anAgeIsTakenOffTheServersDate(_ age: String, _ waits: [String]) async throws {
        let serverNow = Date().timeIntervalSince1970
        let delays = LockedCounter()
        let (provider, counting) = Self.unavailable(["Retry-After": HTTPDate.format(serverNow + 2), "Date": HTTPDate.format(serverNow), "Age": age])
        try await Self.bothPathsEndWith503(provider, Self.policy(delays))
        #expect(delays.log == waits)
        #expect(counting.count == 4)
        let now = HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT")!
        let date = "Sun, 06 Nov 1994 08:49:57 GMT"
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now, serverDate: date, age: "4") == 6)
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now, serverDate: date, age: "4.5") == 10)
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now, serverDate: date, age: "600") == 0)
        // Two `Age` fields, joined: the first counts (RFC 9111 §5.1).
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now, serverDate: date, age: "4, 9") == 6)
        // Without a `Date`, the date is read on this machine's clock: `Age` does not apply.
        #expect(RetryPolicy.retryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now: now, age: "4") == 30)
        #expect(RetryPolicy.retryAfter("12", now: now, serverDate: date, age: "4") == 12)
    }

    /// Against the test server: a 503 whose `Retry-After` is a date within the limit is retried
    /// after the wait until it (read from `onRetry`, then cancelled: the test waits for nothing),
    /// and one past the limit is the result. (The dates are far enough ahead that a loaded
    /// machine's slow answer does not reach them: a date 5 s ahead had passed once.)
    @Test func aServersDateIsHonoured() async throws {
        func url(_ secondsAhead: Double) throws -> String {
            var components = URLComponents(url: try TestServer.url().appendingPathComponent("fixture/counted"), resolvingAgainstBaseURL: false)!
            components.queryItems = [
                URLQueryItem(name: "key", value: "retry-after-\(UUID().uuidString)"), URLQueryItem(name: "status", value: "503"),
                URLQueryItem(name: "h_Retry-After", value: HTTPDate.format(Date().timeIntervalSince1970 + secondsAhead)),
            ]
            return components.url!.absoluteString
        }
        let delays = LockedCounter()
        let within = try url(50)
        let task = Task { await Provider<MultiTarget>().get(within).retry(Self.policy(delays)).result }
        #expect(await eventually(60) { !delays.log.isEmpty }, "no retry was announced")
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("the retry did not wait")
            return
        }
        let waited = try #require(delays.log.first.flatMap(Double.init))
        #expect(waited > 30 && waited <= 50, "waited \(waited)")
        let past = try await Provider<MultiTarget>().get(try url(600)).retry(Self.policy(delays)).value
        #expect(past.statusCode == 503)
        #expect(delays.log.count == 1)
    }
}

/// Each attempt of a retried consumption compares with the consumption's cancellation epoch, so
/// a `cancelAll()` between a backoff's end and the next attempt's start is not missed.
/// A pipeline made from a closure that names no method retries only what a chain reported the
/// method of: a failure or an answer of unknown method (the closure's own, from another
/// library, say) is not sent again, as a `POST` would not be.
@Suite("retry: an unknown method")
struct RetryUnknownMethodTests {
    @Test func aFailureOfUnknownMethodIsNotRetried() async throws {
        let attempts = LockedCounter()
        let failing = ResponsePipeline<Response> { _ async throws(NetworkError) -> Response in
            attempts.increment()
            throw .underlying(TransportFailure(kind: .timedOut, message: "sent elsewhere"), nil)
        }
        let policy = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.01)
        guard case .failure(.underlying(let failure, _)) = await failing.retry(policy).result else {
            Issue.record("not the closure's failure")
            return
        }
        #expect(failure.message == "sent elsewhere")
        #expect(attempts.value == 1)
        // Named, the method decides: a GET's failure is retried.
        let named = ResponsePipeline<Response>(method: .get) { _ async throws(NetworkError) -> Response in
            attempts.increment()
            throw .underlying(TransportFailure(kind: .timedOut, message: "sent elsewhere"), nil)
        }
        _ = await named.retry(policy).result
        #expect(attempts.value == 4)
        // An answer the closure made, of unknown method, is not retried either.
        let answers = LockedCounter()
        let answering = ResponsePipeline<Response> { _ async throws(NetworkError) -> Response in
            answers.increment()
            return Response(statusCode: 503, data: Data())
        }
        #expect(try await answering.retry(policy).value.statusCode == 503)
        #expect(answers.value == 1)

        // A request whose timeout ran out in its hooks, within such a pipeline, is the provider's
        // own and carries its method: a GET is retried (its failure carried none, and was not).
        struct Slow: Interceptor {
            let hooks: LockedCounter
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                hooks.increment()
                usleep(60_000)
                return .proceed
            }
        }
        let hooks = LockedCounter()
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                request.timeoutInterval = 0.05
                return request
            }, transport: StubTransport { _ in .networkResponse(200, Data()) }, interceptors: [Slow(hooks: hooks)])
        let target = try Bin("get")
        let timed = ResponsePipeline<Response> { _ async throws(NetworkError) -> Response in try await provider.request(target).value }
        guard case .failure(.underlying(let timeout, _)) = await timed.retry(policy).result else {
            Issue.record("not the hooks' timeout")
            return
        }
        #expect(timeout.kind == .timedOut)
        #expect(hooks.value == 3)
    }
}

@Suite("retry: cancellation epoch")
struct RetryEpochTests {
    /// A `cancelAll()` made after the backoff and before the second attempt's request starts (a
    /// pipeline whose body calls it there) cancels that attempt: nothing more is sent.
    @Test func aCancelAllBeforeTheNextAttemptCancelsIt() async throws {
        let counting = CountingTransport(StubTransport { _ in .networkResponse(503, Data()) })
        let provider = Provider<Bin>(transport: counting)
        let target = try Bin("get")
        let attempts = LockedCounter()
        let pipeline = ResponsePipeline<Response>(method: .get, callbackQueue: nil, deadline: nil, registry: provider.registry) {
            progress async throws(NetworkError) in
            if attempts.increment() == 2 { provider.cancelAll() }
            return try await provider.request(target).body(progress)
        }
        let result = await pipeline.retry(RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.01)).result
        guard case .failure(.cancelled) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(attempts.value == 2)
        #expect(counting.count == 1)
    }

    /// The binding counts for its own registry only, and only while its consumption runs (a task
    /// an attempt started keeps it after).
    @Test func anEpochCountsForItsRegistryWhileItsConsumptionRuns() async throws {
        let counting = CountingTransport(StubTransport { _ in .networkResponse(200, Data()) })
        let provider = Provider<Bin>(transport: counting)
        let other = Provider<Bin>(transport: counting)
        let target = try Bin("get")
        let binding = ConsumptionEpoch(registry: provider.registry, epoch: provider.registry.cancellations.value)
        provider.cancelAll()
        let (mine, theirs) = await RequestRegistry.$consumption.withValue(binding) {
            (await provider.request(target).result, await other.request(target).result)
        }
        guard case .failure(.cancelled) = mine else {
            Issue.record("got \(mine)")
            return
        }
        #expect(try theirs.get().statusCode == 200)
        binding.life.end()
        let later = await RequestRegistry.$consumption.withValue(binding) { await provider.request(target).result }
        #expect(try later.get().statusCode == 200)
        #expect(counting.count == 2)
    }
}
