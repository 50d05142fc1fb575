import Foundation
import PluginHost
import PluginSDK
import Testing

@testable import CachePlugin

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An origin whose first answer is `first` and every later one `later`; it records each request
/// and can hold later answers back for a while.
final class SequencedOrigin: Transport, Sendable {
    let first: [String: String]
    let later: [String: String]
    let laterDelay: Double
    let sent = Locked([URLRequest]())

    init(first: [String: String], later: [String: String], laterDelay: Double = 0) {
        self.first = first
        self.later = later
        self.laterDelay = laterDelay
    }

    var count: Int { sent.withLock { $0.count } }

    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        let number = sent.withLock {
            $0.append(request.urlRequest)
            return $0.count
        }
        if number > 1, laterDelay > 0 { try? await Task.sleep(nanoseconds: UInt64(laterDelay * 1e9)) }
        var headers = number == 1 ? first : later
        if headers["Date"] == nil { headers["Date"] = HTTPDate.format(Date().timeIntervalSince1970) }
        let body = Data((number == 1 ? "v1" : "v2").utf8)
        return TransportResponse(
            response: HTTPURLResponse(url: request.urlRequest.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: headers)!,
            data: body)
    }
}

/// RFC 5861 §3 `stale-while-revalidate`: the stale entry now, the revalidation in the background.
@Suite("cache plugin: stale-while-revalidate (RFC 5861)")
struct CacheStaleWhileRevalidateTests {
    /// A revalidation that never reports back holds its entry for the timeout, and is then
    /// swept from the table (one stayed for good per URL whose exchange never reached `process`).
    @Test func revalidationsThatNeverReportBackAreSwept() {
        var table = CachePlugin.Revalidations()
        let timeout = CachePlugin.revalidationTimeout
        for index in 0..<1_000 { #expect(CachePlugin.claim("GET /\(index)", in: &table, now: Double(index))) }
        // Held within the timeout, claimed again after it.
        #expect(!CachePlugin.claim("GET /999", in: &table, now: 999 + timeout - 1))
        #expect(CachePlugin.claim("GET /999", in: &table, now: 999 + timeout))
        // Only the marks of the last timeout (and the sweep's slack: up to twice what a sweep left) are kept.
        #expect(table.started.count <= 2 * Int(timeout) + CachePlugin.revalidationSweep, "\(table.started.count) marks kept")
        // Many marks under way at once: swept when their count doubles, not on every mark.
        var busy = CachePlugin.Revalidations()
        for index in 0..<1_000 { #expect(CachePlugin.claim("GET /\(index)", in: &busy, now: 0)) }
        #expect(busy.started.count == 1_000 && busy.sweepAt == 1_024)
    }

    static let origin = URL(string: "http://swr.test")!

    func compiledIn(_ transport: any Transport) throws -> Provider<Bin> {
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        return Provider<Bin>(transport: transport, interceptors: [cache], services: services)
    }

    func get(_ provider: Provider<Bin>, headers: [String: String]? = nil) async throws -> Response {
        try await provider.request(try Bin("doc", headers: headers, base: Self.origin)).value
    }

    /// Polls (at most 10 s) until `condition` holds.
    func until(_ condition: @Sendable () async throws -> Bool) async throws -> Bool {
        for _ in 0..<200 {
            if try await condition() { return true }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        return false
    }

    static let stale = ["Cache-Control": "max-age=0, stale-while-revalidate=60", "ETag": "\"v1\""]
    static let fresh = ["Cache-Control": "max-age=3600", "ETag": "\"v2\""]

    func servesStaleThenStoresTheBackgroundRevalidation(_ provider: Provider<Bin>, _ origin: SequencedOrigin) async throws {
        #expect(try await get(provider).value(forHTTPHeaderField: "X-Cache") == "miss")
        let served = try await get(provider)
        #expect(served.value(forHTTPHeaderField: "X-Cache") == "stale")
        #expect(String(decoding: served.data, as: UTF8.self) == "v1")
        // The background exchange asks the origin conditionally; its answer is stored.
        #expect(try await until { origin.count == 2 })
        #expect(origin.sent.withLock { $0.last?.value(forHTTPHeaderField: "If-None-Match") } == "\"v1\"")
        #expect(
            try await until {
                let next = try await get(provider)
                return next.value(forHTTPHeaderField: "X-Cache") == "hit" && String(decoding: next.data, as: UTF8.self) == "v2"
            })
        #expect(origin.count == 2)
    }

    @Test func compiledInServesStaleAndRevalidatesInTheBackground() async throws {
        let origin = SequencedOrigin(first: Self.stale, later: Self.fresh)
        try await servesStaleThenStoresTheBackgroundRevalidation(try compiledIn(origin), origin)
    }

    @Test func loadedThroughTheABIServesStaleAndRevalidatesInTheBackground() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let origin = SequencedOrigin(first: Self.stale, later: Self.fresh)
        try await servesStaleThenStoresTheBackgroundRevalidation(try f.provider([("cache", [:])], transport: origin), origin)
    }

    /// One revalidation per entry at a time: concurrent stale hits start one background exchange.
    @Test func oneRevalidationPerEntryAtATime() async throws {
        let origin = SequencedOrigin(first: Self.stale, later: Self.fresh, laterDelay: 0.5)
        let provider = try compiledIn(origin)
        _ = try await get(provider)
        let statuses = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<10 { group.addTask { try await get(provider).value(forHTTPHeaderField: "X-Cache") } }
            return try await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: "stale", count: 10))
        #expect(try await until { try await get(provider).value(forHTTPHeaderField: "X-Cache") == "hit" })
        #expect(origin.count == 2)
    }

    /// Past the window, under must-revalidate, or when the request wants something fresh, the
    /// entry is revalidated in the foreground as before.
    @Test(
        arguments: [
            (
                [
                    "Cache-Control": "max-age=10, stale-while-revalidate=30", "ETag": "\"v1\"",
                    "Date": HTTPDate.format(Date().timeIntervalSince1970 - 100),
                ], nil
            ),
            (["Cache-Control": "max-age=0, stale-while-revalidate=60, must-revalidate", "ETag": "\"v1\""], nil),
            (CacheStaleWhileRevalidateTests.stale, ["Cache-Control": "no-cache"]),
            (CacheStaleWhileRevalidateTests.stale, ["Cache-Control": "max-age=0"]),
        ] as [([String: String], [String: String]?)])
    func foregroundRevalidationOutsideTheRule(first: [String: String], request: [String: String]?) async throws {
        let origin = SequencedOrigin(first: first, later: Self.fresh)
        let provider = try compiledIn(origin)
        _ = try await get(provider)
        let second = try await get(provider, headers: request)
        #expect(second.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(String(decoding: second.data, as: UTF8.self) == "v2")
        #expect(origin.count == 2)
    }
}

/// The host side of `scheduleBackgroundExchange` (ABI 1.2), with interceptors compiled in.
@Suite("background exchanges")
struct BackgroundExchangeTests {
    /// Asks for a background exchange in `prepare` (and, on request, again, or from `willSend`),
    /// and records what each exchange saw.
    final class Asker: Interceptor, Sendable {
        let name = "asker"
        let log = Locked([String]())
        let twice: Bool
        init(twice: Bool = false) { self.twice = twice }

        func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
            let option = context.target.pluginOptions["asker"] ?? "-"
            log.withLock { $0.append("prepare \(option) id>2^62:\(context.requestID >= 1 << 62)") }
            do {
                try request.scheduleBackgroundExchange(option: "again")
                log.withLock { $0.append("scheduled") }
                if twice { try request.scheduleBackgroundExchange(option: "twice") }
            } catch {
                log.withLock { $0.append("refused: \(error)") }
            }
            return .proceed
        }

        func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
            do {
                try request.scheduleBackgroundExchange(option: "late")
            } catch {
                log.withLock { $0.append("willSend refused: \(error)") }
            }
        }
    }

    @Test func aBackgroundExchangeRunsOnceWithTheOptionAndMayNotAskAgain() async throws {
        let origin = SequencedOrigin(first: [:], later: [:])
        let asker = Asker(twice: true)
        let provider = Provider<Bin>(transport: origin, interceptors: [asker])
        _ = try await provider.request(try Bin("x", base: URL(string: "http://bg.test")!)).value
        for _ in 0..<200 where origin.count < 2 { try await Task.sleep(nanoseconds: 50_000_000) }
        for _ in 0..<200 where asker.log.withLock({ $0.count }) < 7 { try await Task.sleep(nanoseconds: 50_000_000) }
        let refusal = "no background exchange: only from prepare, once per plugin and exchange, and never from a background exchange"
        // The two exchanges run concurrently: their lines interleave, each exchange's in order.
        let log = asker.log.withLock { $0 }
        #expect(
            log.sorted()
                == [
                    "prepare - id>2^62:false", "scheduled", "refused: \(refusal)", "willSend refused: \(refusal)",
                    "prepare again id>2^62:true", "refused: \(refusal)", "willSend refused: \(refusal)",
                ].sorted())
        #expect(log.first == "prepare - id>2^62:false")
        #expect(origin.count == 2)
    }
}

/// An origin with one 100-byte representation that honours single `Range: bytes=a-b` requests.
final class RangeOrigin: Transport, Sendable {
    let etag = Locked("\"e1\"")
    let cacheControl = Locked("max-age=3600")
    let sent = Locked([URLRequest]())
    static let bytes = (0..<100).map { UInt8($0) }
    var count: Int { sent.withLock { $0.count } }

    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        sent.withLock { $0.append(request.urlRequest) }
        var headers = [
            "Cache-Control": cacheControl.withLock { $0 }, "ETag": etag.withLock { $0 }, "Date": HTTPDate.format(Date().timeIntervalSince1970),
            "Accept-Ranges": "bytes",
        ]
        var status = 200
        var body = Self.bytes
        if let range = request.urlRequest.value(forHTTPHeaderField: "Range"), range.hasPrefix("bytes=") {
            let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            status = 206
            body = Array(Self.bytes[bounds[0]...bounds[1]])
            headers["Content-Range"] = "bytes \(bounds[0])-\(bounds[1])/100"
        }
        headers["Content-Length"] = String(body.count)
        return TransportResponse(
            response: HTTPURLResponse(url: request.urlRequest.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!,
            data: Data(body))
    }
}

/// RFC 9111 §3.3 and §3.4: `206` responses stored, combined, and used to answer ranges.
@Suite("cache plugin: partial content (RFC 9111 §3.3, §3.4)")
struct CachePartialContentTests {
    func provider(_ origin: any Transport) throws -> Provider<Bin> {
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        return Provider<Bin>(transport: origin, interceptors: [cache], services: services)
    }

    func get(_ provider: Provider<Bin>, range: String? = nil, method: HTTPMethod = .get) async throws -> Response {
        try await provider.request(try Bin("file", method: method, headers: range.map { ["Range": $0] }, base: URL(string: "http://range.test")!))
            .value
    }

    @Test func aStored206AnswersARangeWithinIt() async throws {
        let origin = RangeOrigin()
        let provider = try provider(origin)
        let first = try await get(provider, range: "bytes=0-49")
        #expect(first.statusCode == 206)
        #expect(first.value(forHTTPHeaderField: "X-Cache") == "miss")
        let inside = try await get(provider, range: "bytes=10-19")
        #expect(inside.statusCode == 206)
        #expect(inside.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(inside.value(forHTTPHeaderField: "Content-Range") == "bytes 10-19/100")
        #expect([UInt8](inside.data) == Array(10...19))
        #expect(origin.count == 1)
        // Not all stored: the origin answers.
        let beyond = try await get(provider, range: "bytes=40-59")
        #expect(beyond.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(origin.count == 2)
        // A 206 is never served for a request without Range.
        let whole = try await get(provider)
        #expect(whole.statusCode == 200)
        #expect(whole.data.count == 100)
    }

    /// A stored 206 answers only as a complete entry would: not past the request's `max-age`
    /// or `min-fresh`, and the client's own condition first (a 304 for its matching tag).
    @Test func aStored206HonoursTheRequestsDirectivesAndConditions() async throws {
        let origin = RangeOrigin()
        let provider = try provider(origin)
        _ = try await get(provider, range: "bytes=0-49")
        let target = { (headers: [String: String]) in try Bin("file", headers: headers, base: URL(string: "http://range.test")!) }
        let tooOld = try await provider.request(try target(["Range": "bytes=10-19", "Cache-Control": "max-age=0"])).value
        #expect(tooOld.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(origin.count == 2)
        let tooShort = try await provider.request(try target(["Range": "bytes=10-19", "Cache-Control": "min-fresh=7200"])).value
        #expect(tooShort.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(origin.count == 3)
        let stored = try await get(provider, range: "bytes=10-19")
        #expect(stored.value(forHTTPHeaderField: "X-Cache") == "hit")
        let etag = try #require(stored.value(forHTTPHeaderField: "ETag"))
        let unchanged = try await provider.request(try target(["Range": "bytes=10-19", "If-None-Match": etag])).value
        #expect(unchanged.statusCode == 304)
        #expect(unchanged.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(origin.count == 3)
    }

    /// A stored `immutable` 206 answers a reload (`no-cache`, `max-age=0`) within it while fresh, as
    /// a complete entry does (RFC 8246); the target's `revalidate` option still asks the origin.
    @Test func aStoredImmutable206AnswersAReload() async throws {
        let origin = RangeOrigin()
        origin.cacheControl.withLock { $0 = "max-age=3600, immutable" }
        let provider = try provider(origin)
        _ = try await get(provider, range: "bytes=0-49")
        let target = { (headers: [String: String], options: [String: String]) in
            try Bin("file", headers: headers, options: options, base: URL(string: "http://range.test")!)
        }
        for reload in ["no-cache", "max-age=0"] {
            let answered = try await provider.request(try target(["Range": "bytes=10-19", "Cache-Control": reload], [:])).value
            #expect(answered.value(forHTTPHeaderField: "X-Cache") == "hit", "\(reload)")
            #expect([UInt8](answered.data) == Array(10...19))
        }
        #expect(origin.count == 1)
        let revalidated = try await provider.request(try target(["Range": "bytes=10-19"], ["cache": "revalidate"])).value
        #expect(revalidated.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(origin.count == 2)
    }

    @Test func rangesOfOneRepresentationCombineIntoACompleteResponse() async throws {
        let origin = RangeOrigin()
        let provider = try provider(origin)
        _ = try await get(provider, range: "bytes=0-49")
        _ = try await get(provider, range: "bytes=40-99")
        #expect(origin.count == 2)
        let whole = try await get(provider)
        #expect(whole.statusCode == 200)
        #expect(whole.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(whole.value(forHTTPHeaderField: "Content-Length") == "100")
        #expect(whole.value(forHTTPHeaderField: "Content-Range") == nil)
        #expect([UInt8](whole.data) == RangeOrigin.bytes)
        let middle = try await get(provider, range: "bytes=45-54")
        #expect(middle.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect([UInt8](middle.data) == Array(45...54))
        #expect(origin.count == 2)
    }

    @Test func anotherRepresentationIsNeverCombined() async throws {
        let origin = RangeOrigin()
        let provider = try provider(origin)
        _ = try await get(provider, range: "bytes=0-49")
        origin.etag.withLock { $0 = "\"e2\"" }
        _ = try await get(provider, range: "bytes=50-99")
        // The second span replaced the first: nothing complete, and 0-49 is gone.
        #expect(try await get(provider).value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(try await get(provider, range: "bytes=60-69").value(forHTTPHeaderField: "X-Cache") == "hit")
    }

    @Test func weakTagsAndInvalidationsAreRespected() async throws {
        let origin = RangeOrigin()
        origin.etag.withLock { $0 = "W/\"weak\"" }
        let provider = try provider(origin)
        _ = try await get(provider, range: "bytes=0-9")
        #expect(try await get(provider, range: "bytes=0-9").value(forHTTPHeaderField: "X-Cache") == "miss")
        origin.etag.withLock { $0 = "\"e1\"" }
        _ = try await get(provider, range: "bytes=0-9")
        #expect(try await get(provider, range: "bytes=0-9").value(forHTTPHeaderField: "X-Cache") == "hit")
        // An unsafe method invalidates the URL's partial content too (§4.4).
        _ = try await get(provider, method: .post)
        #expect(try await get(provider, range: "bytes=0-9").value(forHTTPHeaderField: "X-Cache") == "miss")
    }
}
