import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A misbehaving server (Tests/Fixtures/faultserver.py): exactly one completion per request,
/// with the right error case, and no hang.
@Suite("Fault injection")
struct FaultInjectionTests {
    static func fault(_ path: String, query: Parameters = [:]) throws -> Bin {
        guard let value = ProcessInfo.processInfo.environment["FAULT_URL"], let url = URL(string: value) else {
            throw TestServer.Missing(variable: "FAULT_URL")
        }
        return try Bin(path, task: query.isEmpty ? .requestPlain : .requestParameters(parameters: query, encoding: URLEncoding.default), base: url)
    }

    /// Runs `target` through the callback API and checks the completion comes exactly once.
    func once(_ provider: Provider<Bin>, _ target: Bin) async throws -> Result<Response, NetworkError> {
        let calls = LockedCounter()
        let result: Result<Response, NetworkError> = await withCheckedContinuation { continuation in
            provider.request(target).start { result in
                if calls.increment() == 1 { continuation.resume(returning: result) }
            }
        }
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(calls.value == 1)
        return result
    }

    /// A redirect the transport follows is not the response: its body counts against no limit of
    /// the response's (a `302` with 200 KB of body, under a 10 KB `maxResponseBytes`, lands), and
    /// one that never ends is cut, its connection closed, and the redirect followed. A redirect
    /// that is not followed is the response, and its body is held to the limit. (`CurlTransport`:
    /// URL loading on Linux reads a redirect's body whole, out of a delegate's sight, see README.)
    @Test func aFollowedRedirectsBodyCountsAgainstNoLimit() async throws {
        let transport = TransportKind.curl.make()
        let fault = try Self.fault("").baseURL
        let landing = try TestServer.url().appendingPathComponent("get")
        func send(_ path: String, _ query: [URLQueryItem] = [], redirects: RedirectPolicy? = nil) async throws -> TransportResponse {
            var parts = URLComponents(url: fault.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
            parts.queryItems = query + [URLQueryItem(name: "status", value: "302"), URLQueryItem(name: "location", value: landing.absoluteString)]
            var request = URLRequest(url: parts.url!)
            request.timeoutInterval = 20
            return try await transport.send(
                TransportRequest(urlRequest: request, redirects: redirects, limits: RequestLimits(maxResponseBytes: 10_000)))
        }
        for (path, query) in [("sized", [URLQueryItem(name: "n", value: "200000")]), ("endless", []), ("endless-chunked", [])] {
            let landed = try await send(path, query)
            #expect(landed.response.statusCode == 200 && landed.redirected, "\(path)")
            #expect(landed.response.url?.path == "/get", "\(path)")
        }
        do {
            let kept = try await send("sized", [URLQueryItem(name: "n", value: "200000")], redirects: .doNotFollow)
            Issue.record("a 302 with 200000 bytes of body, not followed, passed a limit of 10000: \(kept.response.statusCode)")
        } catch let failure as TransportFailure {
            #expect(failure.limit == 10_000, "\(failure)")
        }
    }

    func timeout(_ seconds: Double, _ transport: TransportKind = .curl) -> Provider<Bin> {
        transport.provider(requestClosure: { _, request in
            var request = request
            request.timeoutInterval = seconds
            return request
        })
    }

    func kind(_ result: Result<Response, NetworkError>) -> TransportFailureKind? {
        if case .failure(.underlying(let failure, _)) = result { return failure.kind }
        Issue.record("expected a transport failure, got \(result)")
        return nil
    }

    /// A `304` may declare the length a `200` would have had, and sends no body (RFC 9110 §8.6):
    /// its `Content-Length` counts against no limit. (URL loading refused it, so a cache's
    /// revalidation of a resource larger than `maxResponseBytes` failed; `CurlTransport` did not.)
    /// So may a `204` (which has no body either), read alike by both transports.
    @Test(arguments: TransportKind.allCases) func aNotModifiedDeclaringALargeLengthPassesTheLimit(_ kind: TransportKind) async throws {
        for status in [304, 204] {
            var parts = URLComponents(url: try Self.fault("").baseURL.appendingPathComponent("endless"), resolvingAgainstBaseURL: false)!
            parts.queryItems = [URLQueryItem(name: "status", value: "\(status)"), URLQueryItem(name: "declare", value: "104857600")]
            var request = URLRequest(url: parts.url!)
            request.setValue(#""x""#, forHTTPHeaderField: "If-None-Match")
            request.timeoutInterval = 20
            let received = try await kind.make().send(TransportRequest(urlRequest: request, limits: RequestLimits(maxResponseBytes: 1 << 20)))
            #expect(received.response.statusCode == status)
            #expect(received.data.isEmpty)
        }
    }

    @Test(arguments: TransportKind.allCases) func resetBeforeHeaders(_ transport: TransportKind) async throws {
        #expect(kind(try await once(timeout(10, transport), try Self.fault("reset-before-headers"))) == .connectionLost)
    }

    @Test(arguments: TransportKind.allCases) func resetMidBody(_ transport: TransportKind) async throws {
        #expect(kind(try await once(timeout(10, transport), try Self.fault("reset-mid-body"))) == .connectionLost)
    }

    @Test(arguments: TransportKind.allCases) func bodyShorterThanContentLength(_ transport: TransportKind) async throws {
        #expect(kind(try await once(timeout(10, transport), try Self.fault("short-body"))) == .badResponse)
    }

    @Test(arguments: TransportKind.allCases) func headersThenSilencePastTheTimeout(_ transport: TransportKind) async throws {
        #expect(kind(try await once(timeout(1, transport), try Self.fault("silence"))) == .timedOut)
    }

    /// A session configuration's `timeoutIntervalForRequest` (as Moya apps set it) holds for a
    /// request that has no timeout of its own, with hooks that take time: the chain took their
    /// time off the request's own 60 s, which set it, and URL loading then waited 60 s, not 1.
    @Test func aSessionConfigurationsTimeoutHoldsThroughSlowHooks() async throws {
        struct Slow: Interceptor {
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                usleep(5_000)
                return .proceed
            }
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 1
        let transport = URLSessionTransport(configuration: configuration)
        #expect(transport.requestTimeout == 1)
        let provider = Provider<Bin>(transport: transport, interceptors: [Slow()])
        #expect(kind(try await once(provider, try Self.fault("silence"))) == .timedOut)
    }

    @Test(arguments: TransportKind.allCases) func slowDripCompletes(_ transport: TransportKind) async throws {
        let seen = LockedCounter()
        let response = try await timeout(10, transport).request(try Self.fault("drip", query: ["n": 8, "gap": 0.1])).run {
            seen.append("\($0.completedBytes)")
        }
        #expect(response.data == Data(String(repeating: "z", count: 8).utf8))
        #expect(seen.log.last == "8")
    }

    /// An inline body that the server reads slowly is still leaving: the idle timeout (1.5 s)
    /// does not end a 16 MiB upload the server takes about 4 s to read, with or without a
    /// progress closure (the libcurl transport hands such a body over whole). (Fast enough that
    /// the half of the sender's socket buffer the kernel drains before the transport may write
    /// again, up to 2 MiB on loopback, takes well under the timeout.)
    @Test(arguments: TransportKind.allCases) func aSlowlyReadUploadIsNotIdle(_ transport: TransportKind) async throws {
        let size = 16 << 20
        var target = try Self.fault("slow-upload")
        target.method = .post
        target.task = .requestCompositeData(bodyData: Data(count: size), urlParameters: ["rate": 4_000_000])
        let response = try await timeout(1.5, transport).request(target).value
        #expect(response.statusCode == 200)
        #expect(try response.mapJSON()["received"]?.intValue == size)
    }

    /// An upload file that changes while it is sent: the body is the length declared when the
    /// request started, whatever the file holds by then (libcurl before 8.7 sent what grew past
    /// it after the declared length, which a server reads as the next request's start), and a
    /// file that ends sooner fails at once, saying so (it waited for the idle timeout).
    @Test func anUploadFileThatChangesWhileSentIsSentAsDeclared() async throws {
        // Not a multiple of libcurl's reads: a read that ends past the declared length.
        let size = (8 << 20) + 1000
        for change in ["grow", "shrink"] {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("changing-\(UUID().uuidString).bin")
            try Data(count: size).write(to: file)
            defer { try? FileManager.default.removeItem(at: file) }
            var parts = URLComponents(url: try Self.fault("").baseURL.appendingPathComponent("slow-upload"), resolvingAgainstBaseURL: false)!
            parts.queryItems = [URLQueryItem(name: "rate", value: "4000000"), URLQueryItem(name: "extra", value: "1")]
            var request = URLRequest(url: parts.url!)
            request.httpMethod = "PUT"
            request.timeoutInterval = 20
            let changed = Locked(false)
            let progress: @Sendable (TransferProgress) -> Void = { step in
                guard step.direction == .upload, step.completedBytes > 0 else { return }
                let first = changed.withLock { done in
                    defer { done = true }
                    return !done
                }
                guard first else { return }
                if change == "grow", let handle = try? FileHandle(forWritingTo: file) {
                    _ = try? handle.seekToEnd()
                    try? handle.write(contentsOf: Data(repeating: 0x78, count: 1 << 20))
                    try? handle.close()
                } else {
                    _ = truncate(file.path, off_t(1 << 20))
                }
            }
            let transport = TransportKind.curl.make()
            let sending = { try await transport.send(TransportRequest(urlRequest: request, body: .file(file), progress: progress)) }
            if change == "grow" {
                let received = try await sending()
                #expect(received.response.statusCode == 200)
                let answer = try JSONSerialization.jsonObject(with: received.data) as? [String: Int]
                #expect(answer == ["received": size, "extra": 0])
            } else {
                do {
                    let received = try await sending()
                    Issue.record("a file cut to 1 MiB while 8 MiB were declared was sent: \(received.response.statusCode)")
                } catch let failure as TransportFailure {
                    #expect(failure.message.hasPrefix("the upload file ended after "), "\(failure)")
                    #expect(
                        failure.message.hasSuffix(" of the \(size) bytes it held when the request started: it changed while it was sent"),
                        "\(failure)")
                }
            }
            #expect(changed.withLock { $0 })
        }
    }

    /// A server that answers a large upload before reading it (a 413, as a body limit does) and
    /// then reads the rest away, as nginx does: the answer is the result, not a failure to send;
    /// the body inline or streamed from a file. (A server that closes at once instead, `mode=close`,
    /// may make it a broken pipe: README, "a server may answer before it reads".)
    @Test(arguments: TransportKind.allCases) func anEarlyAnswerToAnUploadIsTheResult(_ transport: TransportKind) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("early-\(UUID().uuidString).bin")
        try Data(count: 8 << 20).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        for mode in ["inline", "file"] {
            var target = try Self.fault("early-answer")
            target.method = .post
            target.task = mode == "file" ? .uploadFile(file) : .requestData(Data(count: 8 << 20))
            let result = await timeout(10, transport).request(target).result
            guard case .success(let response) = result else {
                Issue.record("\(mode): got \(result)")
                continue
            }
            #expect(response.statusCode == 413, "\(mode)")
            #expect(response.data == Data(#"{"error":"too large"}"#.utf8), "\(mode)")
        }
    }

    @Test func a503BurstThenSuccessHonoursTheRetryPolicy() async throws {
        let attempts = LockedCounter()
        let policy = RetryPolicy(retryLimit: 3, exponentialBackoffScale: 0.05) { attempts.append("\($0.retry) \($0.delay) \($0.reason)") }
        let response = try await timeout(10).request(try Self.fault("burst", query: ["key": UUID().uuidString, "fail": 2])).retry(policy).value
        #expect(response.statusCode == 200)
        #expect(try response.mapJSON()["attempt"]?.intValue == 3)
        #expect(attempts.log == ["1 0.05 status 503", "2 0.1 status 503"])
        let exhausted = await timeout(10).request(try Self.fault("burst", query: ["key": UUID().uuidString, "fail": 9]))
            .filterSuccessfulStatusCodes().retry(RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.01)).result
        guard case .failure(.statusCode(let last)) = exhausted else {
            Issue.record("got \(exhausted)")
            return
        }
        #expect(try last.mapJSON()["attempt"]?.intValue == 3)
    }

    @Test func a401StormDuringATokenRefreshSharesOneRefresh() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        let refreshes = LockedCounter()
        provider.services.setValue("bad-storm", forKey: "access_token")
        provider.services.registerRefresher(forKey: "access_token") { _ in
            refreshes.increment()
            try await Task.sleep(nanoseconds: 500_000_000)
            return "good-after-storm"
        }
        let target = try Bin("fixture/token")
        let codes = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<50 { group.addTask { (try? await provider.request(target).value.statusCode) ?? -1 } }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(codes == Array(repeating: 200, count: 50))
        #expect(refreshes.value == 1)
    }
}
