import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Progress")
struct ProgressTests {
    @Test(arguments: TransportKind.allCases) func uploadReportsProgressUpToTheFileSize(_ transport: TransportKind) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("up-\(UUID().uuidString).bin")
        try Data(repeating: 0x61, count: 300_000).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let provider = transport.provider()
        var uploads: [TransferProgress] = []
        var final: Response?
        for try await event in provider.request(try Bin("anything", method: .post, task: .uploadFile(file))).events() {
            switch event {
            case .progress(let p) where p.direction == .upload: uploads.append(p)
            case .progress: break
            case .completed(let response): final = response
            }
        }
        #expect(try #require(final).statusCode == 200)
        #expect(!uploads.isEmpty)
        #expect(uploads.last?.completedBytes == 300_000)
        #expect(uploads.last?.fractionCompleted == 1)
    }

    @Test(arguments: TransportKind.allCases) func dataRequestsReportDownloadProgressWithKnownLength(_ transport: TransportKind) async throws {
        let provider = transport.provider()
        let seen = LockedCounter()
        let response = try await provider.request(try Bin("bytes/50000")).run { p in
            seen.append("\(p.completedBytes)/\(p.totalBytes)")
        }
        #expect(response.data.count == 50_000)
        #expect(seen.log.last == "50000/50000")
    }

    /// A body in a content coding: its `Content-Length` counts the coded bytes, and the caller gets
    /// more (108,500 decoded from about 20 kB). Progress never says more than it knows: the libcurl
    /// transport, which decodes itself, counts the coded bytes against that length and ends at it;
    /// URL loading, which sees only decoded bytes, says the total is unknown. Before, decoded bytes
    /// were counted against the coded length, and `completed` held a fifth of the way through.
    @Test(arguments: TransportKind.allCases) func aDecodedBodysProgressNeverRunsAheadOfIt(_ transport: TransportKind) async throws {
        let provider = transport.provider()
        let seen = Locked([TransferProgress]())
        let response = try await provider.request(try Bin("fixture/encoded/gzip")).run { p in
            if p.direction == .download { seen.withLock { $0.append(p) } }
        }
        #expect(response.data == CurlContentCodingTests.text)
        let length = try #require(response.response?.value(forHTTPHeaderField: "Content-Length"))
        let coded = try #require(Int64(length))
        #expect(coded < 108_500 / 2)
        let progress = seen.withLock { $0 }
        let last = try #require(progress.last)
        #expect(progress.map(\.completedBytes) == progress.map(\.completedBytes).sorted(), "progress went backwards")
        #expect(progress.dropLast().allSatisfy { !$0.completed }, "completed before the last event: \(progress)")
        switch transport {
        case .curl:
            #expect(progress.allSatisfy { $0.totalBytes == coded && $0.completedBytes <= coded })
            #expect(last.completedBytes == coded)
            #expect(last.completed)
        case .urlSession:
            #expect(progress.allSatisfy { $0.totalBytes == -1 && $0.fractionCompleted == nil })
            #expect(last.completedBytes == 108_500)
        }
    }

    /// The body of a redirect the transport follows is left behind with no progress told of it:
    /// progress goes one way, to the last body's length. (The curl transport told the `302`'s own
    /// body, `completed` and all, then began again from nothing for the next.)
    @Test(arguments: TransportKind.allCases) func aFollowedRedirectsBodyTellsNoProgress(_ transport: TransportKind) async throws {
        let provider = transport.provider()
        let seen = Locked([TransferProgress]())
        let response = try await provider.request(try Bin("redirect/1")).run { p in
            if p.direction == .download { seen.withLock { $0.append(p) } }
        }
        #expect(response.statusCode == 200)
        #expect(response.response?.url?.path == "/get")
        let progress = seen.withLock { $0 }
        #expect(progress.map(\.completedBytes) == progress.map(\.completedBytes).sorted(), "progress went backwards: \(progress)")
        #expect(progress.dropLast().allSatisfy { !$0.completed }, "completed before the last event: \(progress)")
        #expect(progress.last?.completedBytes == Int64(response.data.count))
    }

    /// Every caller of a shared exchange (`trackInflights`) gets its progress, and a caller that
    /// leaves (cancelled) gets none after its completion. The exchange reported to the first
    /// caller alone, after it had left too.
    @Test func eachCallerOfASharedExchangeGetsItsProgressUntilItLeaves() async throws {
        let counting = CountingTransport(TransportKind.curl.make())
        let provider = Provider<Bin>(transport: counting, trackInflights: true)
        let target = try Bin(
            "drip", task: .requestParameters(parameters: ["n": "40", "gap": "0.1"], encoding: URLEncoding.queryString),
            base: try TestServer.url("FAULT_URL"))
        let leader = LockedCounter()
        let follower = LockedCounter()
        let token = provider.request(target).start(
            progress: { leader.append("progress \($0.completedBytes)") },
            completion: { result in leader.append("completion " + ((try? result.get()) != nil ? "ok" : "failed")) })
        #expect(await eventually { leader.log.contains { $0.hasPrefix("progress") } })
        let finished = Locked<Bool?>(nil)
        provider.request(target).start(
            progress: { follower.append("progress \($0.completedBytes)") },
            completion: { result in finished.withLock { $0 = (try? result.get()) != nil } })
        // The follower joins (the drip goes on for four seconds), then the leader leaves.
        try await Task.sleep(nanoseconds: 200_000_000)
        token.cancel()
        #expect(await eventually(10) { finished.withLock { $0 } != nil })
        let done = finished.withLock { $0 } ?? false
        #expect(done)
        #expect(counting.count == 1, "one exchange, shared")
        #expect(follower.log.contains { $0.hasPrefix("progress") }, "the follower got no progress")
        #expect(follower.log.last == "progress 40")
        // Nothing for the leader after its completion, however long the exchange went on.
        let log = leader.log
        let completion = try #require(log.firstIndex { $0.hasPrefix("completion") })
        #expect(log[completion] == "completion failed")
        #expect(completion == log.count - 1, "\(log)")
    }

    /// Callbacks run one at a time, in order, on a concurrent queue too (the default global one,
    /// or one given): progress never goes backwards and the completion comes last.
    @Test(arguments: TransportKind.allCases) func callbacksOnAConcurrentQueueComeInOrder(_ transport: TransportKind) async throws {
        let provider = transport.provider()
        let target = try Bin("stream-bytes/102400", task: .requestParameters(parameters: ["chunk_size": 256], encoding: URLEncoding.queryString))
        for queue in [nil, DispatchQueue(label: "concurrent", attributes: .concurrent)] {
            for _ in 0..<5 {
                let seen = LockedCounter()
                let result: Result<Response, NetworkError> = await withCheckedContinuation { continuation in
                    provider.request(target).start(on: queue, progress: { p in seen.append("\(p.completedBytes)") }) {
                        seen.append("done")
                        continuation.resume(returning: $0)
                    }
                }
                #expect(try result.get().data.count == 102_400)
                let log = seen.log
                let bytes = log.dropLast().compactMap { Int($0) }
                #expect(log.last == "done")
                #expect(bytes.count == log.count - 1)
                #expect(bytes == bytes.sorted(), "progress went backwards: \(bytes)")
                #expect(bytes.last == 102_400)
            }
        }
    }

    @Test(arguments: TransportKind.allCases) func callbackProgressAndFinalResponse(_ transport: TransportKind) async throws {
        let provider = transport.provider()
        let seen = LockedCounter()
        let target = try Bin("bytes/20000")
        let result: Result<Response, NetworkError> = await withCheckedContinuation { continuation in
            provider.request(target).start(progress: { p in seen.append("\(p.completedBytes)") }) { continuation.resume(returning: $0) }
        }
        #expect(try result.get().data.count == 20_000)
        #expect(await eventually { seen.log.last == "20000" })
    }
}
