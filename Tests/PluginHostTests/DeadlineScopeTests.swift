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
        let url = request.urlRequest.url!
        let status = url.path.hasPrefix("/status/401") ? 401 : 200
        return TransportResponse(response: HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!, data: Data())
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
}
