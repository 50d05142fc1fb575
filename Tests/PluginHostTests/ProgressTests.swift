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
