import CPluginABI
import Foundation
import Testing

@testable import PluginHost
@testable import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Timeouts and status codes a hook sets are checked (a typed error in Swift; nothing changed
/// through the C setters, which return nothing), and no timeout, deadline or delay an app or a
/// hook gives makes a transport or a pipeline trap: a timeout that is no positive finite number
/// is none, and durations of centuries are converted without overflow.
@Suite("Timeouts and status codes")
struct TimeoutAndStatusTests {
    /// What a hook's timeout must be: positive (`.infinity` for none).
    static let refusedTimeouts: [Double] = [0, -1, -.infinity, .nan]

    @Test func aHookTimeoutThatIsNoPositiveNumberIsRefusedAndChangesNothing() throws {
        let state = RequestState(URLRequest(url: URL(string: "http://127.0.0.1:9/a")!, timeoutInterval: 7))
        let view = InterceptorRequest(backend: state)
        for seconds in Self.refusedTimeouts {
            let error = #expect(throws: InterceptorError.self) { try view.setTimeout(seconds) }
            // NaN is not equal to itself: the message says what was refused.
            #expect(error?.description == "invalid timeout \(seconds): must be a positive number of seconds (.infinity for none)")
            #expect(view.timeout == 7)
        }
        #expect(throws: InterceptorError.invalidTimeout(-1)) { try view.setTimeout(-1) }
        try view.setTimeout(0.25)
        #expect(state.makeURLRequest().timeoutInterval == 0.25)
        try view.setTimeout(.infinity)
        #expect(view.timeout == .infinity)
    }

    /// A timeout that is none to the transports (0, negative, NaN) reads as `.infinity`: a hook
    /// may set what it read (`min(request.timeout, 30)`).
    @Test func aTimeoutThatIsNoneReadsAsInfinity() throws {
        for given in [0, -1, Double.nan, .infinity] {
            let view = InterceptorRequest(backend: RequestState(URLRequest(url: URL(string: "http://127.0.0.1:9/a")!, timeoutInterval: given)))
            #expect(view.timeout == .infinity, "\(given)")
            try view.setTimeout(min(view.timeout, 30))
            #expect(view.timeout == 30)
        }
    }

    /// An interceptor compiled in that answers or replaces with a status outside 100...999, or a
    /// field that is no field (a name that is no token, a value with CR or LF), fails the request,
    /// as a loaded plugin's answer is refused by the host.
    @Test func anAnswerThatIsNoValidResponseFailsTheRequest() async throws {
        struct Answers: Interceptor {
            let answer: SyntheticResponse
            let replaces: Bool
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                replaces ? .proceed : .respond(answer)
            }
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                replaces ? .replace(answer) : .proceed
            }
        }
        let fine = HTTPHeader(name: "X-Fine", value: "1")
        let cases: [(SyntheticResponse, String)] = [
            (SyntheticResponse(statusCode: 42), "invalid status code 42: must be within 100...999"),
            (SyntheticResponse(statusCode: 1000), "invalid status code 1000: must be within 100...999"),
            (
                SyntheticResponse(statusCode: 200, headers: [fine, HTTPHeader(name: "X-A", value: "a\r\nX-Evil: 1")]),
                "invalid value for header \"X-A\": CR, LF and NUL are not allowed"
            ),
            (
                SyntheticResponse(statusCode: 200, headers: [fine, HTTPHeader(name: "Bad Name", value: "1")]),
                InterceptorError.invalidHeaderName("Bad Name").description
            ),
        ]
        for (answer, why) in cases {
            for replaces in [false, true] {
                let provider = Provider<Bin>(stubClosure: Provider.immediatelyStub, interceptors: [Answers(answer: answer, replaces: replaces)])
                let result = await provider.request(try Bin("get")).result
                guard case .failure(.interceptor(_, let hook, let message)) = result else {
                    Issue.record("\(answer) was accepted: \(result)")
                    continue
                }
                #expect(hook == (replaces ? .process : .prepare))
                #expect(message == why)
            }
        }
        // A valid answer goes through.
        let provider = Provider<Bin>(
            stubClosure: Provider.immediatelyStub,
            interceptors: [Answers(answer: SyntheticResponse(statusCode: 203, headers: [fine]), replaces: true)])
        #expect(try await provider.request(try Bin("get")).value.statusCode == 203)
    }

    @Test func aHookStatusOutside100To999IsRefusedAndChangesNothing() throws {
        let state = ResponseState(SyntheticResponse(statusCode: 200, headers: [], body: []), url: nil)
        let view = InterceptorResponse(backend: state)
        for code in [99, 1000, 0, -5, Int.max] {
            #expect(throws: InterceptorError.invalidStatus(code)) { try view.setStatusCode(code) }
            #expect(view.statusCode == 200)
        }
        #expect(InterceptorError.invalidStatus(42).description == "invalid status code 42: must be within 100...999")
        try view.setStatusCode(999)
        try view.setStatusCode(203)
        #expect(state.statusCode == 203)
    }

    /// Through the host table: the 1.0 setters change nothing for such values (a plugin reads the
    /// value back), and a plugin built with the SDK gets the same errors as one compiled in.
    @Test func theCSettersChangeNothingAndTheSDKViewsThrowTheSameErrors() throws {
        var api = HostTable.template
        let request = RequestState(URLRequest(url: URL(string: "http://127.0.0.1:9/a")!, timeoutInterval: 7))
        let response = ResponseState(SyntheticResponse(statusCode: 200, headers: [], body: []), url: nil)
        let requestHandle = OpaquePointer(Unmanaged.passUnretained(request.handle).toOpaque())
        let resultHandle = OpaquePointer(Unmanaged.passUnretained(response.handle).toOpaque())
        for seconds in Self.refusedTimeouts {
            api.request_set_timeout(requestHandle, seconds)
            #expect(api.request_timeout(requestHandle) == 7)
        }
        api.request_set_timeout(requestHandle, .infinity)
        #expect(api.request_timeout(requestHandle) == .infinity)
        for status: Int32 in [99, 1000, 0, -5, .min] {
            api.result_set_status(resultHandle, status)
            #expect(api.result_status(resultHandle) == 200)
        }
        api.result_set_status(resultHandle, 418)
        #expect(response.statusCode == 418)
        // A failure has no status to set.
        let failure = ResultHandle(response: nil, failure: TransportFailure(kind: .timedOut, message: "t"), mayDecide: false)
        api.result_set_status(OpaquePointer(Unmanaged.passUnretained(failure).toOpaque()), 200)
        #expect(api.result_status(OpaquePointer(Unmanaged.passUnretained(failure).toOpaque())) == 0)

        try withUnsafePointer(to: &api) { api in
            let requestView = InterceptorRequest(backend: CRequestBackend(handle: requestHandle, api: api))
            let responseView = InterceptorResponse(backend: CResultBackend(handle: resultHandle, api: api))
            #expect(throws: InterceptorError.invalidTimeout(0)) { try requestView.setTimeout(0) }
            #expect(throws: InterceptorError.invalidStatus(1000)) { try responseView.setStatusCode(1000) }
            try requestView.setTimeout(3)
            try responseView.setStatusCode(201)
        }
        #expect(request.timeout == 3)
        #expect(response.statusCode == 201)
    }

    /// A loaded C plugin (`hostile`, mode `timeouts`) sets NaN, 0, -1 and -INFINITY, reading the
    /// timeout back after each, then INFINITY; the request then goes out with no timeout.
    @Test(arguments: TransportKind.allCases) func aLoadedPluginsRefusedTimeoutsChangeNothing(_ kind: TransportKind) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("HostileTestPlugin")
        let plugins = try PluginLoader.load(
            manifest: try f.manifest([["name": "hostile", "config": ["mode": "timeouts"]]]), services: PluginServices())
        let provider = Provider<Bin>(transport: kind.make(), interceptors: plugins)
        let response = try await provider.request(try Bin("get")).value
        #expect(response.statusCode == 200)
        #expect(try echo(response).header("X-Findings") == "given 60: 60 60 60 60, then inf")
    }

    /// Timeouts an app's `URLRequest` may carry: none of them traps a transport (`UInt64` or `Int`
    /// of NaN, infinity or centuries of nanoseconds did); each that is no positive number is none,
    /// and one under a second holds a response that comes before it (swift-corelibs-foundation
    /// timed out at once below one second: hence a path that answers late enough to tell).
    @Test(arguments: TransportKind.allCases) func everyTimeoutAnAppGivesIsSent(_ kind: TransportKind) async throws {
        let cases: [(Double, String)] = [
            (.infinity, "get"), (.nan, "get"), (1e11, "get"), (1e300, "get"), (.greatestFiniteMagnitude, "get"),
            (0, "delay/1"), (-1, "delay/1"), (0.6, "delay/0.3"),
        ]
        for (seconds, path) in cases {
            let provider = kind.provider(requestClosure: { _, request in
                var request = request
                request.timeoutInterval = seconds
                return request
            })
            let response = try await provider.request(try Bin(path)).value
            #expect(response.statusCode == 200, "timeout \(seconds)")
        }
    }

    /// A hook's `.infinity` reaches the transport (the chain takes the hooks' time from it: still
    /// infinite).
    @Test(arguments: TransportKind.allCases) func aHooksInfiniteTimeoutIsNone(_ kind: TransportKind) async throws {
        struct NoTimeout: Interceptor {
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                try request.setTimeout(.infinity)
                return .proceed
            }
        }
        let provider = Provider<Bin>(transport: kind.make(), interceptors: [NoTimeout()])
        let response = try await provider.request(try Bin("delay/1")).value
        #expect(response.statusCode == 200)
        #expect(response.request?.timeoutInterval == .infinity)
    }

    /// A deadline of centuries: the pipeline's timer sleeps `Int64.max` nanoseconds at most (it
    /// trapped past 584 years), and the request completes.
    @Test func aDeadlineOfCenturiesIsKept() async throws {
        for seconds in [1e11, 1e300] {
            let provider = Provider<Bin>(limits: RequestLimits(deadline: seconds))
            #expect(try await provider.request(try Bin("get")).value.statusCode == 200)
        }
    }

    /// A backoff of centuries: the wait before the retry begins (it trapped) and ends when the
    /// caller cancels.
    @Test func aRetryDelayOfCenturiesWaitsUntilCancelled() async throws {
        let retries = LockedCounter()
        let policy = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 1e300, onRetry: { _ in retries.increment() })
        let target = try Bin("status/503")
        let provider = Provider<Bin>()
        let task = Task { await provider.request(target).retry(policy).result }
        #expect(await eventually(30) { retries.value == 1 })
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("the retry's wait did not end with cancellation")
            return
        }
    }

    @Test func secondsBecomeNanosecondsWithoutOverflow() {
        #expect(1.5.saturatingNanoseconds == 1_500_000_000)
        #expect(0.0.saturatingNanoseconds == 0)
        #expect((-3.0).saturatingNanoseconds == 0)
        #expect(Double.nan.saturatingNanoseconds == 0)
        #expect(Double.infinity.saturatingNanoseconds == UInt64(Int64.max))
        #expect(1e300.saturatingNanoseconds == UInt64(Int64.max))
        // Just below 2^63 nanoseconds: converted.
        #expect(9.2e9.saturatingNanoseconds == 9_200_000_000_000_000_000)
    }
}
