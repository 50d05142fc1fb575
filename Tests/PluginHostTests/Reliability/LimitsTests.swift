import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(Glibc)
import Glibc
#endif

/// Records the failure kinds the response side of the chain sees.
private struct FailureWitness: Interceptor {
    let seen: LockedCounter
    var name: String { "failure-witness" }
    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        if let failure = result.failure { seen.append("didReceive \(failure.kind.rawValue)") }
    }
    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        if let failure = result.failure { seen.append("process \(failure.kind.rawValue)") }
        return .proceed
    }
}

/// Samples this process's resident memory while a request runs.
private final class ResidentMemory: @unchecked Sendable {
    private let lock = NSLock()
    private var peak: Int64 = 0
    private var running = true
    let baseline: Int64

    static func current() -> Int64 {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int64(fields[1]) else { return 0 }
        return pages * Int64(sysconf(Int32(_SC_PAGESIZE)))
    }

    init() {
        baseline = Self.current()
        peak = baseline
        Thread.detachNewThread { [self] in
            while lock.withLock({ running }) {
                let now = Self.current()
                lock.withLock { peak = max(peak, now) }
                usleep(2000)
            }
        }
    }

    /// Stops sampling; the growth over the baseline.
    func stop() -> Int64 {
        let now = Self.current()
        return lock.withLock {
            running = false
            peak = max(peak, now)
            return peak - baseline
        }
    }
}

/// Bounded memory against hostile servers (Tests/Fixtures/faultserver.py): every limit of
/// ``RequestLimits`` on both transports, each with its exact error, exactly one completion,
/// the failure seen by the chain, and resident memory growing by less than the limit + 16 MiB.
///
/// Run on their own (`Tests/test` does), so other tests do not move the memory measured.
@Suite("Limits", .serialized)
struct LimitsTests {
    static let limit: Int64 = 8 << 20
    static let slack: Int64 = 16 << 20

    struct Outcome {
        let result: Result<Response, NetworkError>
        let chain: [String]
        let growth: Int64
        let seconds: Double
    }

    func run(_ kind: TransportKind, _ target: Bin, limits: RequestLimits, retry: RetryPolicy? = nil) async throws -> Outcome {
        let seen = LockedCounter()
        let transport = kind.make()
        let provider = Provider<Bin>(transport: transport, interceptors: [FailureWitness(seen: seen)], limits: limits)
        // Warm up: the first request of a transport sets up threads and libraries, which is not
        // what is measured.
        _ = try await provider.request(try FaultInjectionTests.fault("ok")).value
        let memory = ResidentMemory()
        let started = Date()
        let calls = LockedCounter()
        var pipeline = provider.request(target)
        if let retry { pipeline = pipeline.retry(retry) }
        let consumed = pipeline
        let result: Result<Response, NetworkError> = await withCheckedContinuation { continuation in
            consumed.start { result in
                if calls.increment() == 1 { continuation.resume(returning: result) }
            }
        }
        let seconds = Date().timeIntervalSince(started)
        let growth = memory.stop()
        try await Task.sleep(nanoseconds: 200_000_000)
        #expect(calls.value == 1, "completions")
        // URL loading may go on with a task whose call ended (it honours a cancellation late, up to
        // the fault server's 60 s): the next test's memory and time are measured without it.
        if let session = transport as? URLSessionTransport { _ = await eventually(70) { session.router.registeredCount == 0 } }
        return Outcome(result: result, chain: seen.log, growth: growth, seconds: seconds)
    }

    func failure(_ outcome: Outcome, sourceLocation: SourceLocation = #_sourceLocation) -> TransportFailure? {
        guard case .failure(.underlying(let failure, _)) = outcome.result else {
            Issue.record("expected a transport failure, got \(outcome.result)", sourceLocation: sourceLocation)
            return nil
        }
        return failure
    }

    /// Resident memory grew by less than the limit + 16 MiB. Checked for ``CurlTransport`` (the
    /// Linux default), which stops reading the moment a limit is passed. URL loading on Linux
    /// (swift-corelibs-foundation) has no backpressure: it queues every received chunk for the
    /// delegate and takes a while to honour a cancellation, so there the transfer stops with the
    /// same error but memory can pass the bound by what arrived meanwhile (README, Limits).
    func expectBounded(
        _ outcome: Outcome, _ kind: TransportKind, limit: Int64 = limit, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #if os(Linux)
        guard kind == .curl else { return }
        #endif
        #expect(outcome.growth < limit + Self.slack, "resident memory grew by \(outcome.growth) bytes", sourceLocation: sourceLocation)
    }

    @Test(arguments: TransportKind.allCases)
    func aHugeDeclaredLengthFailsBeforeTheBodyWithTheDefaults(_ kind: TransportKind) async throws {
        let outcome = try await run(kind, try FaultInjectionTests.fault("endless", query: ["declare": 4_294_967_296]), limits: .default)
        let failure = failure(outcome)
        #expect(failure?.kind == .responseTooLarge)
        #expect(failure?.message == "the response declares Content-Length 4294967296, more than maxResponseBytes (67108864 bytes)")
        #expect(failure?.limit == 64 << 20)
        #expect(failure?.observedBytes == 4_294_967_296)
        #expect(outcome.chain == ["didReceive responseTooLarge", "process responseTooLarge"])
        expectBounded(outcome, kind)
    }

    @Test(arguments: TransportKind.allCases)
    func anEndlessBodyStopsAtTheLimit(_ kind: TransportKind) async throws {
        for path in ["endless", "endless-chunked"] {
            let outcome = try await run(kind, try FaultInjectionTests.fault(path), limits: RequestLimits(maxResponseBytes: Self.limit))
            let failure = failure(outcome)
            #expect(failure?.kind == .responseTooLarge, "\(path)")
            #expect(failure?.message.hasPrefix("the response body passed maxResponseBytes (8388608 bytes): ") == true, "\(path)")
            #expect(failure?.limit == Self.limit)
            #expect((failure?.observedBytes ?? 0) > Self.limit)
            #expect(outcome.chain == ["didReceive responseTooLarge", "process responseTooLarge"])
            expectBounded(outcome, kind)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aBodyExactlyAtTheLimitPassesAndOneByteMoreFails(_ kind: TransportKind) async throws {
        let limits = RequestLimits(maxResponseBytes: Self.limit)
        let exact = try await run(kind, try FaultInjectionTests.fault("sized", query: ["n": Self.limit]), limits: limits)
        #expect((try? exact.result.get())?.data.count == Int(Self.limit))
        let over = try await run(kind, try FaultInjectionTests.fault("sized", query: ["n": Self.limit + 1]), limits: limits)
        #expect(failure(over)?.message == "the response declares Content-Length 8388609, more than maxResponseBytes (8388608 bytes)")
        expectBounded(over, kind)
    }

    @Test(arguments: TransportKind.allCases)
    func aGzipBombStops(_ kind: TransportKind) async throws {
        let outcome = try await run(kind, try FaultInjectionTests.fault("gzip-bomb"), limits: RequestLimits(maxResponseBytes: Self.limit))
        let failure = failure(outcome)
        #expect(failure?.kind == .responseTooLarge)
        switch kind {
        case .curl:
            // The ratio stops it after the first MiB decoded.
            #expect(failure?.message.hasPrefix("the compressed body inflates more than maxDecompressionRatio (100:1): ") == true)
        case .urlSession:
            #expect(failure?.message.hasPrefix("the response body passed maxResponseBytes (8388608 bytes): ") == true)
        }
        expectBounded(outcome, kind)
    }

    /// Stacked codings whose inner one turns much into nothing (20 MB of empty deflate blocks,
    /// gzipped to 30 KB): what the gzip stage passes on counts against the ratio too. Only the
    /// last stage's output was checked, and the body, all of it decoded on the loop thread,
    /// came out empty and a success.
    @Test func aStageOfStackedCodingsIsBoundedToo() async throws {
        let outcome = try await run(.curl, try FaultInjectionTests.fault("nested-bomb"), limits: RequestLimits(maxResponseBytes: Self.limit))
        let failure = failure(outcome)
        #expect(failure?.kind == .responseTooLarge)
        #expect(failure?.message.hasPrefix("the compressed body inflates more than maxDecompressionRatio (100:1): ") == true)
        expectBounded(outcome, .curl)
    }

    /// A ratio of `Int64.max` (no ratio) lets the bomb inflate until the body limit stops it:
    /// the ratio's product overflowed, and trapped, once a mebibyte was decoded.
    @Test func aRatioTooLargeToMultiplyIsNoRatio() async throws {
        let limits = RequestLimits(maxResponseBytes: Self.limit, maxDecompressionRatio: .max)
        let outcome = try await run(.curl, try FaultInjectionTests.fault("gzip-bomb"), limits: limits)
        let failure = failure(outcome)
        #expect(failure?.kind == .responseTooLarge)
        #expect(failure?.message.hasPrefix("the response body passed maxResponseBytes (8388608 bytes): ") == true)
        expectBounded(outcome, .curl)
    }

    @Test(arguments: TransportKind.allCases)
    func tooManyHeaderFieldsAreABadResponse(_ kind: TransportKind) async throws {
        let outcome = try await run(kind, try FaultInjectionTests.fault("many-headers", query: ["n": 2000]), limits: .default)
        let failure = failure(outcome)
        #expect(failure?.kind == .badResponse)
        #expect(failure?.message.hasPrefix("the response has more than maxHeaderFields (1000) header fields: ") == true)
        expectBounded(outcome, kind)
    }

    @Test(arguments: TransportKind.allCases)
    func aOneMebibyteHeaderIsABadResponse(_ kind: TransportKind) async throws {
        let outcome = try await run(kind, try FaultInjectionTests.fault("big-header", query: ["kb": 1024]), limits: .default)
        let failure = failure(outcome)
        #expect(failure?.kind == .badResponse)
        #expect(failure?.message.contains("maxHeaderBytes (262144 bytes)") == true, "\(failure?.message ?? "")")
        expectBounded(outcome, kind)
    }

    /// A header limit passed is not retried by the default policy's `badResponse`: the same
    /// request passes it again (it was sent three times, each read up to the limit).
    @Test(arguments: TransportKind.allCases)
    func aHeaderLimitPassedIsNotRetried(_ kind: TransportKind) async throws {
        let retries = LockedCounter()
        let policy = RetryPolicy(exponentialBackoffScale: 0.01, onRetry: { _ in retries.increment() })
        let many = try await run(kind, try FaultInjectionTests.fault("many-headers", query: ["n": 2000]), limits: .default, retry: policy)
        let fields = failure(many)
        #expect(fields?.kind == .badResponse)
        #expect(fields?.limit == 1000)
        #expect(many.chain == ["didReceive badResponse", "process badResponse"])
        let big = try await run(kind, try FaultInjectionTests.fault("big-header", query: ["kb": 1024]), limits: .default, retry: policy)
        let bytes = failure(big)
        #expect(bytes?.kind == .badResponse)
        #expect(bytes?.limit == 262_144 || bytes?.limit == 100 << 10, "\(bytes.map(String.init(describing:)) ?? "")")
        #expect(big.chain == ["didReceive badResponse", "process badResponse"])
        #expect(retries.value == 0)
    }

    @Test(arguments: TransportKind.allCases)
    func aDripStopsAtTheDeadline(_ kind: TransportKind) async throws {
        let outcome = try await run(
            kind, try FaultInjectionTests.fault("drip", query: ["n": 100, "gap": 1]), limits: RequestLimits(deadline: 2))
        let failure = failure(outcome)
        #expect(failure?.kind == .timedOut)
        #expect(failure?.message == "the request's deadline of 2.0 s passed (RequestLimits.deadline)")
        #expect(outcome.seconds < 3.5)
    }

    /// The deadline covers retries and their backoff: a retry whose backoff would end past the
    /// deadline is not waited for, and the last answer is the result, before the deadline (it
    /// was a `timedOut` at the deadline, after a wait that could lead nowhere). Backoffs of 0.5,
    /// 1 and 2 s under a deadline of 3 s: two retries, and the third wait, which would end at
    /// about 3.5 s, is not taken; the answer of the last attempt is the result at about 1.5 s
    /// (a loaded machine's slow answers leave 1.5 s of room).
    @Test func theDeadlineCoversRetriesAndTheirBackoff() async throws {
        let retries = LockedCounter()
        let policy = RetryPolicy(retryLimit: 10, exponentialBackoffScale: 0.5, onRetry: { _ in retries.increment() })
        let outcome = try await run(
            .curl, try FaultInjectionTests.fault("burst", query: ["key": UUID().uuidString, "fail": 100]), limits: RequestLimits(deadline: 3),
            retry: policy)
        let response = try outcome.result.get()
        #expect(response.statusCode == 503)
        #expect(try response.mapJSON()["attempt"]?.intValue == retries.value + 1)
        #expect(outcome.seconds < 3)
        #expect(retries.value >= 1 && retries.value <= 2)
    }

    /// Cancelling a download mid-body ends the call at once and removes what was written (URL
    /// loading on Linux went on writing its own file for seconds after the cancellation, to
    /// gigabytes on loopback, answered only then, and left the file).
    @Test(arguments: TransportKind.allCases)
    func aDownloadCancelledMidBodyEndsAtOnceAndLeavesNoFile(_ kind: TransportKind) async throws {
        let directory = NSTemporaryDirectory() + "pluginhost-limits-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let destination = URL(fileURLWithPath: directory + "/endless.bin")
        var target = try FaultInjectionTests.fault("endless")
        target.task = .downloadDestination(.file(destination))
        let before = Self.partialFiles()
        let provider = Provider<Bin>(transport: kind.make())
        let received = LockedBox<Int64>(0)
        let task = Task { try await provider.request(target).run { received.set($0.completedBytes) } }
        #expect(await eventually(10) { received.get() > 1 << 20 })
        let started = Date()
        task.cancel()
        let result = await task.result
        #expect(Date().timeIntervalSince(started) < 2)
        guard case .failure(let error) = result, case .cancelled = error as? NetworkError else {
            Issue.record("got \(result)")
            return
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(Self.partialFiles().subtracting(before).isEmpty, "left in the temporary directory: \(Self.partialFiles().subtracting(before))")
    }

    /// The transports' partial files (`.download`) in the temporary directory, and URL loading's
    /// own on Linux (`.tmp`).
    static func partialFiles() -> Set<String> {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory())) ?? []
        return Set(names.filter { $0.hasSuffix(".download") || $0.hasSuffix(".tmp") })
    }

    /// A multipart upload of a 96 MiB file is streamed from it: resident memory grows by far less
    /// than the file (built in memory, it grew by the body and the file read into it), and the
    /// server gets every byte (its length and SHA-256 of the body as sent).
    @Test(arguments: TransportKind.allCases)
    func aLargeMultipartUploadIsNotHeldInMemory(_ kind: TransportKind) async throws {
        let size = 96 << 20
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-limits-\(UUID().uuidString).bin")
        let pattern = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 12) })
        FileManager.default.createFile(atPath: file.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: file) }
        let handle = try FileHandle(forWritingTo: file)
        for _ in 0..<(size >> 20) { handle.write(pattern) }
        try handle.close()
        let target = try Bin("fixture/length", method: .post, task: .uploadMultipart([.text("Ann", name: "user"), .file(file, name: "f")]))
        let outcome = try await run(kind, target, limits: RequestLimits())
        let response = try outcome.result.get()
        struct Received: Decodable {
            var length: Int
            var sha256: String
        }
        let received = try JSONDecoder().decode(Received.self, from: response.data)
        let type = try #require(response.request?.value(forHTTPHeaderField: "Content-Type"))
        let boundary = String(type.dropFirst("multipart/form-data; boundary=".count))
        var hasher = SHA256()
        var length = 0
        for piece in try MultipartFormData.pieces([.text("Ann", name: "user"), .file(file, name: "f")], boundary: boundary) {
            switch piece {
            case .bytes(let data):
                data.withUnsafeBytes { hasher.update($0) }
                length += data.count
            case .file(let url):
                let bytes = try Data(contentsOf: url)
                bytes.withUnsafeBytes { hasher.update($0) }
                length += bytes.count
            }
        }
        #expect(received.length == length)
        #expect(received.sha256 == SHA256.hex(hasher.finalize()))
        expectBounded(outcome, kind, limit: 0)
    }

    @Test(arguments: TransportKind.allCases)
    func aDownloadOverItsLimitStopsAndLeavesNoFile(_ kind: TransportKind) async throws {
        let directory = NSTemporaryDirectory() + "pluginhost-limits-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let destination = URL(fileURLWithPath: directory + "/big.bin")
        var target = try FaultInjectionTests.fault("endless")
        target.task = .downloadDestination(.file(destination))
        let before = Self.partialFiles()
        let outcome = try await run(kind, target, limits: RequestLimits(maxDownloadBytes: Self.limit))
        let failure = failure(outcome)
        #expect(failure?.kind == .responseTooLarge)
        #expect(failure?.message.hasPrefix("the response body passed maxDownloadBytes (8388608 bytes): ") == true)
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        #expect(Self.partialFiles().subtracting(before).isEmpty, "left in the temporary directory: \(Self.partialFiles().subtracting(before))")
        // The call ends when the limit is passed, not when URL loading gets to the cancellation.
        #expect(outcome.seconds < 5)
        expectBounded(outcome, kind)
    }
}
