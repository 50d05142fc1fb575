import Foundation
import PluginHost
import PluginSDK
import Testing

@testable import CachePlugin

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Answers each path with the status and header fields it was given, counting the calls.
final class ScriptedTransport: Transport, Sendable {
    let answers: [String: (status: Int, headers: [String: String])]
    let calls = LockedCounter()

    init(_ answers: [String: (status: Int, headers: [String: String])]) { self.answers = answers }

    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        let url = request.urlRequest.url!
        let method = request.urlRequest.httpMethod ?? "GET"
        calls.append("\(method) \(url.path)")
        let answer = answers["\(method) \(url.path)"] ?? answers[url.path] ?? (200, [:])
        return Self.response(url, answer.status, answer.headers)
    }

    /// `status` with `headers` (and a `Date` of now unless they have one), body `body`.
    static func response(_ url: URL, _ status: Int, _ headers: [String: String]) -> TransportResponse {
        var headers = headers
        if headers["Date"] == nil { headers["Date"] = HTTPDate.format(Date().timeIntervalSince1970) }
        return TransportResponse(
            response: HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!, data: Data("body".utf8))
    }
}

/// Answers each call with what `answer` makes of its number (1 for the first) and request: a
/// status, header fields (and a `Date` of now unless they have one) and a body.
final class NumberedTransport: Transport, Sendable {
    typealias Answer = (status: Int, headers: [String: String], body: String)
    let calls = LockedCounter()
    let answer: @Sendable (Int, TransportRequest) async -> Answer

    init(_ answer: @escaping @Sendable (Int, TransportRequest) async -> Answer) { self.answer = answer }

    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        let (status, answered, body) = await answer(calls.increment(), request)
        var headers = answered
        if headers["Date"] == nil { headers["Date"] = HTTPDate.format(Date().timeIntervalSince1970) }
        let response = HTTPURLResponse(url: request.urlRequest.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
        return TransportResponse(response: response, data: Data(body.utf8))
    }
}

/// The cache against RFC 9111 (and RFC 9110 for dates and conditions), section by section.
@Suite("cache plugin: RFC 9111")
struct CacheRFC9111Tests {
    static let origin = URL(string: "http://cache.test")!

    func provider(_ transport: ScriptedTransport) throws -> Provider<Bin> {
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        return Provider<Bin>(transport: transport, interceptors: [cache], services: services)
    }

    /// A provider over `transport` with a cache of configuration `values` in its chain, and the cache.
    func cached(_ transport: any Transport, _ values: [String: JSONValue] = [:]) throws -> (provider: Provider<Bin>, cache: CachePlugin) {
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: values), host: services.hostServices(for: "cache"))
        return (Provider<Bin>(transport: transport, interceptors: [cache], services: services), cache)
    }

    func get(_ provider: Provider<Bin>, _ path: String, method: HTTPMethod = .get, headers: [String: String]? = nil) async throws -> Response {
        try await provider.request(try Bin(path, method: method, headers: headers, base: Self.origin)).value
    }

    // MARK: RFC 9110 §5.6.7 HTTP-date

    @Test func httpDatesInAllThreeFormsAndNothingLooser() {
        let instant: Double = 784_111_777
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == instant)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == instant)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == instant)
        for invalid in [
            "Sun, 06 Nov 1994  08:49:37 GMT", "Sun 06 Nov 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 UTC", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "0", "", "Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            #expect(HTTPDate.parse(invalid) == nil, "\(invalid)")
        }
        // A day the month does not have is no date (it was read as one in the next month); 29
        // February is one in a leap year only (2000 is one, 2100 is not).
        for invalid in [
            "Mon, 31 Feb 2031 00:00:00 GMT", "Sat, 29 Feb 2031 00:00:00 GMT", "Thu, 31 Apr 2031 00:00:00 GMT", "Mon, 29 Feb 2100 00:00:00 GMT",
            "Monday, 31-Jun-31 00:00:00 GMT", "Mon Sep 31 00:00:00 2031", "Sun, 00 Nov 1994 08:49:37 GMT",
        ] {
            #expect(HTTPDate.parse(invalid) == nil, "\(invalid)")
        }
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 00:00:00 GMT") == HTTPDate.parse("Thu, 01 Mar 2024 00:00:00 GMT")! - 86_400)
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 00:00:00 GMT") == HTTPDate.parse("Wed, 01 Mar 2000 00:00:00 GMT")! - 86_400)
        #expect(HTTPDate.parse("Wed, 31 Dec 2031 23:59:59 GMT") != nil)
        // rfc850's two-digit year: more than 50 years ahead is the last century's.
        let now = HTTPDate.parse("Mon, 23 Nov 2026 00:00:00 GMT")!
        #expect(HTTPDate.parse("Monday, 23-Nov-76 00:00:00 GMT", now: now) == HTTPDate.parse("Mon, 23 Nov 2076 00:00:00 GMT"))
        #expect(HTTPDate.parse("Tuesday, 23-Nov-77 00:00:00 GMT", now: now) == HTTPDate.parse("Wed, 23 Nov 1977 00:00:00 GMT"))
    }

    // MARK: §5.1 Age, §1.2.2 delta-seconds

    @Test func ageIsDeltaSecondsAndAListKeepsItsFirstMember() {
        #expect(DeltaSeconds.age(["7200, 0"]) == 7200)
        #expect(DeltaSeconds.age(["7200.0"]) == nil)
        #expect(DeltaSeconds.age(["-1"]) == nil)
        #expect(DeltaSeconds.age(["abc"]) == nil)
        #expect(DeltaSeconds.age(["99999999999"]) == 2_147_483_648)
    }

    // MARK: §5.2 Cache-Control, §4.2.1 freshness

    @Test func cacheControlArgumentsAreStrictAndTheFirstOfARepeatWins() {
        #expect(CacheDirectives(["max-age=100a"]).delta("max-age") == .invalid)
        #expect(CacheDirectives(["max-age=a100"]).delta("max-age") == .invalid)
        #expect(CacheDirectives(["max-age = 100"]).delta("max-age") == .invalid)
        #expect(CacheDirectives(["max-age=\"60\""]).delta("max-age") == .valid(60))
        #expect(CacheDirectives(["max-age=1, max-age=1800"]).delta("max-age") == .valid(1))
        #expect(CacheDirectives(["max-age=1", "max-age=1800"]).delta("max-age") == .valid(1))
        let qualified = CacheDirectives(["no-cache=\"Set-Cookie, X-A\", private=\"X-B\""])
        #expect(!qualified.hasUnqualified("no-cache"))
        #expect(qualified.listedFields("no-cache") == ["set-cookie", "x-a"])
        #expect(qualified.listedFields("private") == ["x-b"])
        #expect(CacheDirectives(["no-cache"]).hasUnqualified("no-cache"))
    }

    @Test func cacheControlNamesAreCaseInsensitiveAndListsSplitOutsideQuotes() {
        let written = CacheDirectives(["Max-Age=60, NO-STORE", " Public ,,s-MAXAGE=5"])
        #expect(written.delta("max-age") == .valid(60))
        #expect(written.has("no-store") && written.has("public"))
        #expect(written.seconds("s-maxage") == 5)
        #expect(!written.has("Max-Age"))
        let quoted = CacheDirectives(["private=\"A, B\", max-age=3"])
        #expect(quoted.listedFields("private") == ["a", "b"])
        #expect(quoted.seconds("max-age") == 3)
        #expect(CacheDirectives([""]).delta("max-age") == .absent)
        #expect(CacheDirectives([" , "]).delta("max-age") == .absent)
    }

    func entry(status: Int = 200, _ headers: [String: String], now: Double = Date().timeIntervalSince1970) -> CacheEntry {
        var fields = headers
        fields["Date"] = HTTPDate.format(now)
        return CacheEntry(
            key: "GET http://cache.test/x", status: status, headerNames: Array(fields.keys), headerValues: Array(fields.values), body: [],
            requestTime: now, responseTime: now, vary: [:], ttl: nil, hasQuery: false)
    }

    @Test func invalidFreshnessInformationIsStale() {
        let future = HTTPDate.format(Date().timeIntervalSince1970 + 3600)
        #expect(entry(["Cache-Control": "max-age=100a", "Expires": future]).freshnessLifetime == 0)
        #expect(entry(["Expires": "soon"]).freshnessLifetime == 0)
        #expect(entry(["Expires": future]).freshnessLifetime > 3500)
        #expect(entry(["Cache-Control": "max-age=1, max-age=1800"]).freshnessLifetime == 1)
    }

    // MARK: §4.2.2 heuristic freshness

    @Test func heuristicFreshnessCoversPublicResponsesOfAnyStatus() {
        let modified = HTTPDate.format(Date().timeIntervalSince1970 - 10 * 86_400)
        #expect(entry(status: 599, ["Cache-Control": "public", "Last-Modified": modified]).freshnessLifetime > 80_000)
        #expect(entry(status: 599, ["Last-Modified": modified]).freshnessLifetime == 0)
        #expect(entry(status: 200, ["Last-Modified": modified]).freshnessLifetime > 80_000)
    }

    // MARK: §3.1 stored header fields, §5.2.2.4 / §5.2.2.7 qualified forms

    @Test func hopByHopConnectionListedAndQualifiedFieldsAreNeverStored() async throws {
        let transport = ScriptedTransport([
            "/x": (
                200,
                [
                    "Cache-Control": "max-age=60, no-cache=\"X-Secret\", private=\"X-Private\"", "Connection": "X-Hop", "X-Hop": "1",
                    "Keep-Alive": "timeout=5", "X-Secret": "s", "X-Private": "p", "X-Kept": "k",
                ]
            )
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "x")
        let hit = try await get(provider, "x")
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(transport.calls.log.count == 1)
        #expect(hit.value(forHTTPHeaderField: "X-Kept") == "k")
        for name in ["X-Hop", "Keep-Alive", "Connection", "X-Secret", "X-Private"] {
            #expect(hit.value(forHTTPHeaderField: name) == nil, "\(name)")
        }
    }

    /// A `304` updates the stored response under the same rules as a stored response (§3.2):
    /// not with hop-by-hop fields, those its Connection lists, or those a qualified no-cache
    /// names; and a `304` that says `no-store` takes the entry away.
    @Test func a304UpdatesOnlyWithFieldsThatMayBeStoredAndItsNoStoreRemovesTheEntry() async throws {
        final class Revalidating: Transport, Sendable {
            let calls = LockedCounter()
            let notModified: [String: String]
            init(_ notModified: [String: String]) { self.notModified = notModified }
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let first = calls.increment() == 1
                var headers = first ? ["Cache-Control": "max-age=0", "ETag": "\"v\"", "X-Kept": "k"] : notModified
                headers["Date"] = HTTPDate.format(Date().timeIntervalSince1970)
                let response = HTTPURLResponse(
                    url: request.urlRequest.url!, statusCode: first ? 200 : 304, httpVersion: "HTTP/1.1", headerFields: headers)!
                return TransportResponse(response: response, data: first ? Data("body".utf8) : Data())
            }
        }
        let origin = Revalidating([
            "Cache-Control": "max-age=60, no-cache=\"X-Secret\"", "ETag": "\"v\"", "Connection": "X-Hop", "X-Hop": "1",
            "Keep-Alive": "timeout=5", "X-Secret": "s", "X-Fresh": "f",
        ])
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        let provider = Provider<Bin>(transport: origin, interceptors: [cache], services: services)
        _ = try await get(provider, "x")
        #expect(try await get(provider, "x").value(forHTTPHeaderField: "X-Cache") == "revalidated")
        let hit = try await get(provider, "x")
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(hit.value(forHTTPHeaderField: "X-Fresh") == "f" && hit.value(forHTTPHeaderField: "X-Kept") == "k")
        for name in ["X-Hop", "Keep-Alive", "Connection", "X-Secret"] {
            #expect(hit.value(forHTTPHeaderField: name) == nil, "\(name)")
        }
        #expect(origin.calls.value == 2)

        let forbidding = Revalidating(["Cache-Control": "no-store", "ETag": "\"v\""])
        let strict = Provider<Bin>(
            transport: forbidding,
            interceptors: [
                try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
            ], services: services)
        _ = try await get(strict, "y")
        _ = try await get(strict, "y")
        #expect(try await get(strict, "y").value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(forbidding.calls.value == 3)
    }

    /// A user's `304` that makes the response `private` (with the user's `Set-Cookie`) leaves the
    /// shared entry as it was: it was merged into it, and the next anonymous request got the
    /// user's cookie as a hit (§3.5, §5.2.2.7). So does a user's `HEAD`.
    @Test func aUsersAnswerNeverUpdatesTheSharedEntryForOthers() async throws {
        let origin = NumberedTransport { call, request in
            if call == 1 { return (200, ["Cache-Control": "public, max-age=0", "ETag": "\"v\""], "v1") }
            if request.urlRequest.value(forHTTPHeaderField: "Authorization") != nil {
                return (
                    request.urlRequest.httpMethod == "HEAD" ? 200 : 304,
                    ["Cache-Control": "private, max-age=600", "ETag": "\"v\"", "Set-Cookie": "sid=alice"], ""
                )
            }
            return (304, ["Cache-Control": "public, max-age=0", "ETag": "\"v\""], "")
        }
        let provider = try cached(origin).provider
        _ = try await get(provider, "a")
        let alice = try await get(provider, "a", headers: ["Authorization": "Bearer alice"])
        #expect(alice.value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(alice.value(forHTTPHeaderField: "Set-Cookie") == "sid=alice")
        _ = try await get(provider, "a", method: .head, headers: ["Authorization": "Bearer alice"])
        let anonymous = try await get(provider, "a")
        #expect(anonymous.value(forHTTPHeaderField: "Set-Cookie") == nil)
        #expect(anonymous.value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(String(decoding: anonymous.data, as: UTF8.self) == "v1")
        #expect(origin.calls.value == 4)
    }

    /// A `304` to a request whose credentials were added after the cache's lookup (an
    /// interceptor inside it) is that user's answer: it updates no shared entry, though `public`.
    /// A user's `304` that says `no-store` removes the shared entry as anyone's does.
    @Test func credentialsAddedAfterTheLookupUpdateNoSharedEntryAndNoStoreRemovesIt() async throws {
        struct AddsAuthorization: Interceptor {
            var name: String { "adds-authorization" }
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                if context.target.pluginOptions["late"] == "1" { try request.setHeader("Authorization", "Bearer late") }
                return .proceed
            }
        }
        let seen = Locked(Set<String>())
        let origin = NumberedTransport { call, request in
            let path = request.urlRequest.url!.path
            if seen.withLock({ $0.insert(path).inserted }) { return (200, ["Cache-Control": "public, max-age=0", "ETag": "\"v\""], "v1") }
            switch request.urlRequest.value(forHTTPHeaderField: "Authorization") {
            case "Bearer late"?: return (304, ["Cache-Control": "public, max-age=600", "ETag": "\"v\"", "Set-Cookie": "sid=late"], "")
            case "Bearer alice"?: return (304, ["Cache-Control": "no-store", "ETag": "\"v\""], "")
            default: return (304, ["Cache-Control": "public, max-age=0", "ETag": "\"v\""], "")
            }
        }
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        let provider = Provider<Bin>(transport: origin, interceptors: [cache, AddsAuthorization()], services: services)
        _ = try await get(provider, "l")
        let late = try await provider.request(try Bin("l", options: ["late": "1"], base: Self.origin)).value
        #expect(late.value(forHTTPHeaderField: "Set-Cookie") == "sid=late")
        let anonymous = try await get(provider, "l")
        #expect(anonymous.value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(anonymous.value(forHTTPHeaderField: "Set-Cookie") == nil)
        #expect(origin.calls.value == 3)
        // Alice's `no-store`: the shared entry goes (it was left, and served stale to others).
        _ = try await get(provider, "n")
        _ = try await get(provider, "n", headers: ["Authorization": "Bearer alice"])
        let next = try await get(provider, "n", headers: ["Cache-Control": "max-stale=600"])
        #expect(next.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(origin.calls.value == 6)
    }

    /// The fields a `304`'s qualified no-cache="…" names reach the client of that revalidation
    /// (it is the validation they need), and are not stored: a rotated `Set-Cookie` was dropped.
    @Test func fieldsA304NamesInNoCacheReachItsClientButAreNotStored() async throws {
        let origin = NumberedTransport { call, _ in
            call == 1
                ? (200, ["Cache-Control": "max-age=0", "ETag": "\"v\""], "v1")
                : (304, ["Cache-Control": "max-age=60, no-cache=\"Set-Cookie\"", "ETag": "\"v\"", "Set-Cookie": "sid=rotated"], "")
        }
        let provider = try cached(origin).provider
        _ = try await get(provider, "c")
        let revalidated = try await get(provider, "c")
        #expect(revalidated.value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(revalidated.value(forHTTPHeaderField: "Set-Cookie") == "sid=rotated")
        let hit = try await get(provider, "c")
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(hit.value(forHTTPHeaderField: "Set-Cookie") == nil)
        #expect(origin.calls.value == 2)
    }

    /// A background revalidation's new response keeps the target's time to live: its option is
    /// "revalidate", and the `200` was stored by its headers (here lifetime 0, revalidated again
    /// on every request).
    @Test func aBackgroundRevalidationKeepsTheTargetsTimeToLive() async throws {
        let origin = NumberedTransport { call, _ in
            let old = HTTPDate.format(Date().timeIntervalSince1970 - 100)
            return (
                200,
                [
                    "Cache-Control": "max-age=0, stale-while-revalidate=300", "ETag": "\"v\(call)\"",
                    "Date": call == 1 ? old : HTTPDate.format(Date().timeIntervalSince1970),
                ],
                "v\(call)"
            )
        }
        let provider = try cached(origin).provider
        func get() async throws -> Response {
            try await provider.request(try Bin("ttl", options: ["cache": "60"], base: Self.origin)).value
        }
        _ = try await get()
        #expect(try await get().value(forHTTPHeaderField: "X-Cache") == "stale")
        #expect(await eventually(10) { origin.calls.value == 2 })
        var last: String?
        for _ in 0..<100 {
            let next = try await get()
            last = next.value(forHTTPHeaderField: "X-Cache")
            if last == "hit" {
                #expect(String(decoding: next.data, as: UTF8.self) == "v2")
                break
            }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        #expect(last == "hit")
        #expect(origin.calls.value == 2)
    }

    /// only-if-cached asks the origin nothing, in the background either: a stale entry within
    /// stale-while-revalidate is served as it is (it started a background exchange).
    @Test func onlyIfCachedStartsNoBackgroundRevalidation() async throws {
        let origin = NumberedTransport { call, _ in (200, ["Cache-Control": "max-age=0, stale-while-revalidate=300", "ETag": "\"v\""], "v\(call)") }
        let provider = try cached(origin).provider
        _ = try await get(provider, "o")
        let option = try await provider.request(try Bin("o", options: ["cache": "only-if-cached"], base: Self.origin)).value
        let header = try await get(provider, "o", headers: ["Cache-Control": "only-if-cached"])
        for answer in [option, header] {
            #expect(answer.statusCode == 200 && answer.value(forHTTPHeaderField: "X-Cache") == "stale")
            #expect(String(decoding: answer.data, as: UTF8.self) == "v1")
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(origin.calls.value == 1)
    }

    /// A `Location` with a fragment invalidates the entry of the URL without it (§4.4).
    @Test func aLocationWithAFragmentInvalidatesItsURL() async throws {
        let origin = NumberedTransport { call, request in
            request.urlRequest.httpMethod == "POST"
                ? (201, ["Location": "/items/5#top"], "")
                : (200, ["Cache-Control": "max-age=600"], "v\(call)")
        }
        let provider = try cached(origin).provider
        _ = try await get(provider, "items/5")
        #expect(try await get(provider, "items/5").value(forHTTPHeaderField: "X-Cache") == "hit")
        _ = try await get(provider, "items", method: .post)
        #expect(try await get(provider, "items/5").value(forHTTPHeaderField: "X-Cache") == "miss")
    }

    /// A requester's own answer, not stored for being its own (`authorized: refuse`), says nothing
    /// of the shared entry others use: it stays (the removal of an entry a full response replaced
    /// must not reach it).
    @Test(arguments: [false, true]) func aRequestersOwnAnswerLeavesTheSharedEntry(varying: Bool) async throws {
        // (A shared variant too: its key is the URL's with the selection after it.)
        let origin = NumberedTransport { call, _ in
            let control = ["Cache-Control": call == 1 ? "public, max-age=600" : "max-age=600"]
            return (200, varying ? control.merging(["Vary": "X-Variant"]) { $1 } : control, "v\(call)")
        }
        let provider = try cached(origin, ["authorized": "refuse"]).provider
        _ = try await get(provider, "shared")
        let own = try await get(provider, "shared", headers: ["Authorization": "Bearer a", "Cache-Control": "no-cache"])
        #expect(String(decoding: own.data, as: UTF8.self) == "v2")
        let other = try await get(provider, "shared")
        #expect(other.value(forHTTPHeaderField: "X-Cache") == "hit" && String(decoding: other.data, as: UTF8.self) == "v1")
        #expect(origin.calls.value == 2)
    }

    /// A client's own `304` without validators updates the stored response it validates, never
    /// a variant index stored under the key meanwhile (an index has no validators either): it was
    /// written over with the plain entry, and the variants lost their index.
    @Test func aClients304NeverWritesOverAVariantIndexStoredMeanwhile() async throws {
        let released = Locked(false)
        let origin = NumberedTransport { call, request in
            if request.urlRequest.value(forHTTPHeaderField: "If-Modified-Since") != nil {
                // Held until the plain request stored its varying response.
                for _ in 0..<500 where !released.withLock({ $0 }) { try? await Task.sleep(nanoseconds: 10_000_000) }
                return (304, [:], "")
            }
            return (200, call == 1 ? ["Cache-Control": "max-age=0"] : ["Cache-Control": "max-age=600", "Vary": "X-Variant"], "v\(call)")
        }
        let (provider, cache) = try cached(origin)
        _ = try await get(provider, "ix")
        let conditional = Task { try await get(provider, "ix", headers: ["If-Modified-Since": HTTPDate.format(Date().timeIntervalSince1970)]) }
        #expect(await eventually { origin.calls.value == 2 })
        let varying = try await get(provider, "ix", headers: ["X-Variant": "a"])
        #expect(String(decoding: varying.data, as: UTF8.self) == "v3")
        released.withLock { $0 = true }
        #expect(try await conditional.value.statusCode == 304)
        #expect(cache.store.get(CachePlugin.getKey("http://cache.test/ix")).map(CachePlugin.isVariantIndex) == true)
        let hit = try await get(provider, "ix", headers: ["X-Variant": "a"])
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit" && String(decoding: hit.data, as: UTF8.self) == "v3")
        #expect(try await get(provider, "ix", headers: ["X-Variant": "b"]).value(forHTTPHeaderField: "X-Cache") == "miss")
    }

    /// A full response to a request the stored one could not answer (the client's `no-cache`,
    /// or a stale entry the cache revalidated) says the stored one is no longer suitable
    /// (§4.3.3): when it is not stored itself (`no-store`, `Vary: *`), the old entry goes too.
    /// It stayed, and the next request was a hit with the body the origin had just replaced.
    @Test(arguments: [["Cache-Control": "no-store"], ["Cache-Control": "max-age=600", "Vary": "*"]])
    func aFullResponseNotStoredTakesTheEntryItReplacedAway(_ replacement: [String: String]) async throws {
        for reload in [["Cache-Control": "no-cache"], ["Cache-Control": "max-age=0"]] {
            let origin = NumberedTransport { call, _ in
                (200, call == 1 ? ["Cache-Control": "max-age=600", "ETag": "\"v1\""] : replacement, "v\(call)")
            }
            let cached = try cached(origin).provider
            #expect(String(decoding: try await get(cached, "r").data, as: UTF8.self) == "v1")
            #expect(try await get(cached, "r").value(forHTTPHeaderField: "X-Cache") == "hit")
            let replaced = try await get(cached, "r", headers: reload)
            #expect(String(decoding: replaced.data, as: UTF8.self) == "v2" && replaced.value(forHTTPHeaderField: "X-Cache") == "miss")
            let next = try await get(cached, "r", headers: ["Cache-Control": "max-stale=3600"])
            #expect(next.value(forHTTPHeaderField: "X-Cache") == "miss", "\(reload)")
            #expect(String(decoding: next.data, as: UTF8.self) == "v3")
            #expect(origin.calls.value == 3)
        }
    }

    /// A `304` validates the stored response whose validator it answers (§4.3.4): when another
    /// response (`"v2"`) was stored under the key while the revalidation of `"v1"` was under
    /// way, the `304` does not put `"v1"` back over it.
    @Test func a304NeverBringsBackAnEntryReplacedMeanwhile() async throws {
        final class Racing: Transport, Sendable {
            let calls = LockedCounter()
            let store: CacheStore
            init(_ store: CacheStore) { self.store = store }
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let now = Date().timeIntervalSince1970
                let date = HTTPDate.format(now)
                let first = calls.increment() == 1
                if !first {
                    // Another request's 200 stored meanwhile.
                    store.put(
                        CacheEntry(
                            key: "GET http://cache.test/r", status: 200, headerNames: ["Cache-Control", "ETag", "Date"],
                            headerValues: ["max-age=60", "\"v2\"", date], body: Array("v2".utf8), requestTime: now, responseTime: now, vary: [:],
                            ttl: nil, hasQuery: false))
                }
                let headers = ["Cache-Control": first ? "max-age=0" : "max-age=60", "ETag": "\"v1\"", "Date": date]
                let response = HTTPURLResponse(
                    url: request.urlRequest.url!, statusCode: first ? 200 : 304, httpVersion: "HTTP/1.1", headerFields: headers)!
                return TransportResponse(response: response, data: first ? Data("v1".utf8) : Data())
            }
        }
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        let origin = Racing(cache.store)
        let provider = Provider<Bin>(transport: origin, interceptors: [cache], services: services)
        #expect(String(decoding: try await get(provider, "r").data, as: UTF8.self) == "v1")
        let revalidated = try await get(provider, "r")
        #expect(revalidated.value(forHTTPHeaderField: "X-Cache") == "revalidated")
        let hit = try await get(provider, "r")
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(String(decoding: hit.data, as: UTF8.self) == "v2")
        #expect(origin.calls.value == 2)
    }

    /// The cache's own revalidation gets a `304` for another entity tag (§4.3.4: it selects no
    /// stored response): the stale body is not relabelled `"v2"` and served, the entry goes and
    /// the request is asked again without a condition. A `304` answering a revalidation after
    /// the URL was invalidated meanwhile (§4.4) does not bring the entry back.
    @Test func a304ForAnotherTagOrAGoneEntryUpdatesNothing() async throws {
        final class Scripted: Transport, Sendable {
            let calls = LockedCounter()
            let answers: [(Int, [String: String], String)]
            let meanwhile: @Sendable () -> Void
            init(_ answers: [(Int, [String: String], String)], meanwhile: @escaping @Sendable () -> Void = {}) {
                self.answers = answers
                self.meanwhile = meanwhile
            }
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let call = calls.increment()
                calls.append(request.urlRequest.value(forHTTPHeaderField: "If-None-Match") ?? "-")
                if call == 2 { meanwhile() }
                var (status, headers, body) = answers[min(call, answers.count) - 1]
                headers["Date"] = HTTPDate.format(Date().timeIntervalSince1970)
                let response = HTTPURLResponse(url: request.urlRequest.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
                return TransportResponse(response: response, data: Data(body.utf8))
            }
        }
        let services = PluginServices()
        func cache() throws -> CachePlugin {
            try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        }
        let relabelling = Scripted([
            (200, ["Cache-Control": "max-age=0", "ETag": "\"v1\""], "one"), (304, ["Cache-Control": "max-age=60", "ETag": "\"v2\""], ""),
            (200, ["Cache-Control": "max-age=60", "ETag": "\"v2\""], "two"),
        ])
        let provider = Provider<Bin>(transport: relabelling, interceptors: [try cache()], services: services)
        #expect(String(decoding: try await get(provider, "r").data, as: UTF8.self) == "one")
        let second = try await get(provider, "r")
        #expect(String(decoding: second.data, as: UTF8.self) == "two")
        #expect(second.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(relabelling.calls.log == ["-", "\"v1\"", "-"])
        let hit = try await get(provider, "r")
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(String(decoding: hit.data, as: UTF8.self) == "two")

        let invalidated = try cache()
        let store = invalidated.store
        let racing = Scripted(
            [(200, ["Cache-Control": "max-age=0", "ETag": "\"v1\""], "one"), (304, ["Cache-Control": "max-age=60", "ETag": "\"v1\""], "")],
            meanwhile: { store.remove("GET http://cache.test/r") })
        let other = Provider<Bin>(transport: racing, interceptors: [invalidated], services: services)
        _ = try await get(other, "r")
        #expect(try await get(other, "r").value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(store.get("GET http://cache.test/r") == nil)
    }

    /// The client's own conditional request for a stale entry: the origin's `304` goes to the
    /// client, and freshens the stored response it validates (§4.3.4), so the next request is a
    /// hit. A `304` for another entity tag (or a weak one) leaves the entry as it was.
    @Test func aClientsOwn304FreshensTheEntryItValidates() async throws {
        /// Answers in turn: the entry (stale at once), the `304` to the client's condition, then a new one.
        final class InTurn: Transport, Sendable {
            let calls = LockedCounter()
            let stored: String
            let tag: String
            init(stored: String, tag: String) {
                self.stored = stored
                self.tag = tag
            }
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let (status, headers): (Int, [String: String])
                switch calls.increment() {
                case 1: (status, headers) = (200, ["Cache-Control": "max-age=0", "ETag": stored])
                case 2: (status, headers) = (304, ["Cache-Control": "max-age=60", "ETag": tag])
                default: (status, headers) = (200, ["Cache-Control": "max-age=60", "ETag": "\"v2\""])
                }
                let dated = headers.merging(["Date": HTTPDate.format(Date().timeIntervalSince1970)]) { $1 }
                return TransportResponse(
                    response: HTTPURLResponse(url: request.urlRequest.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: dated)!,
                    data: Data(status == 304 ? [] : Array("body".utf8)))
            }
        }
        // A weak tag validates the same weak tag (§4.3.4's second case: no strong validator,
        // weak ones that match); it used to validate nothing.
        for (stored, tag, freshened) in [
            ("\"v\"", "\"v\"", true), ("\"v\"", "\"other\"", false), ("\"v\"", "W/\"v\"", false), ("W/\"v\"", "W/\"v\"", true),
            ("W/\"v\"", "W/\"other\"", false),
        ] {
            let transport = InTurn(stored: stored, tag: tag)
            let services = PluginServices()
            let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
            let provider = Provider<Bin>(transport: transport, interceptors: [cache], services: services)
            #expect(try await get(provider, "c").statusCode == 200)
            #expect(try await get(provider, "c", headers: ["If-None-Match": stored]).statusCode == 304)
            let next = try await get(provider, "c")
            #expect(next.value(forHTTPHeaderField: "X-Cache") == (freshened ? "hit" : "miss"), "\(tag)")
            #expect(transport.calls.value == (freshened ? 2 : 3), "\(tag)")
        }
    }

    /// The most recent response is the one used (§4): a `public` answer, stored shared, replaces
    /// the requester's own older entry for the URL, which the lookup would find first. It used to
    /// stay: after a reload the user's next request was a hit with the older content.
    @Test func aPublicAnswerReplacesTheRequestersOwnOlderEntry() async throws {
        /// Answers `private` (tag a) first, then `public` (tag b), counting the calls.
        final class PrivateThenPublic: Transport, Sendable {
            let calls = LockedCounter()
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let first = calls.increment() == 1
                let headers = [
                    "Cache-Control": first ? "private, max-age=60" : "public, max-age=60", "ETag": first ? "\"a\"" : "\"b\"",
                    "Date": HTTPDate.format(Date().timeIntervalSince1970),
                ]
                return TransportResponse(
                    response: HTTPURLResponse(url: request.urlRequest.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: headers)!,
                    data: Data((first ? "old" : "new").utf8))
            }
        }
        let transport = PrivateThenPublic()
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        let provider = Provider<Bin>(transport: transport, interceptors: [cache], services: services)
        let user = ["Authorization": "Bearer alice"]
        #expect(try await get(provider, "u", headers: user).data == Data("old".utf8))
        #expect(try await get(provider, "u", headers: user).value(forHTTPHeaderField: "X-Cache") == "hit")
        let reload = try await get(provider, "u", headers: user.merging(["Cache-Control": "no-cache"]) { $1 })
        #expect(reload.data == Data("new".utf8))
        let next = try await get(provider, "u", headers: user)
        #expect(next.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(next.data == Data("new".utf8))
        #expect(next.value(forHTTPHeaderField: "ETag") == "\"b\"")
        #expect(transport.calls.value == 2)
    }

    /// `max-stale` (§5.2.1.2): bare, any staleness; with delta-seconds, that much; with an
    /// argument that is no delta-seconds, none (it was read as no limit).
    @Test func maxStaleWithAnInvalidArgumentAcceptsNoStaleness() async throws {
        let transport = ScriptedTransport(["/s": (200, ["Cache-Control": "max-age=0", "ETag": "\"s\""])])
        let provider = try provider(transport)
        _ = try await get(provider, "s")
        #expect(try await get(provider, "s", headers: ["Cache-Control": "max-stale"]).value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(try await get(provider, "s", headers: ["Cache-Control": "max-stale=600"]).value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(transport.calls.log == ["GET /s"])
        for invalid in ["max-stale=abc", "max-stale=10s", "max-stale=nan"] {
            #expect(try await get(provider, "s", headers: ["Cache-Control": invalid]).value(forHTTPHeaderField: "X-Cache") != "hit", "\(invalid)")
        }
        #expect(transport.calls.log.count == 4)
    }

    /// Invalidation (§4.4) by a `Location` on a port that is not the scheme's default: relative or
    /// absolute, it names the stored URL with its port. The port used to be dropped from every
    /// `Location`, so the key looked for was another origin's and the stale entry stayed a hit.
    @Test(arguments: ["/p", "http://cache.test:8080/p"])
    func aLocationOnAnotherPortKeepsItsPort(_ location: String) async throws {
        let transport = ScriptedTransport(["GET /p": (200, ["Cache-Control": "max-age=60"]), "POST /q": (201, ["Location": location])])
        let provider = try provider(transport)
        let origin = URL(string: "http://cache.test:8080")!
        let page = try Bin("p", base: origin)
        let unported = try Bin("p", base: Self.origin)
        for target in [page, unported] { _ = try await provider.request(target).value }
        #expect(try await provider.request(page).value.value(forHTTPHeaderField: "X-Cache") == "hit")
        _ = try await provider.request(try Bin("q", method: .post, base: origin)).value
        #expect(try await provider.request(page).value.value(forHTTPHeaderField: "X-Cache") == "miss")
        // The same path on the default port is another origin's, and stays.
        #expect(try await provider.request(unported).value.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(CachePlugin.sameOrigin(location, as: "http://cache.test:8080/q") == ["http://cache.test:8080/p"])
    }

    /// Stores `GET /p` of `origin`, then sends `POST /q`, answered `201` with `location`, and
    /// expects `/p` to be asked for again (invalidated); returns the transport.
    func expectInvalidation(of origin: URL, byLocation location: String) async throws -> ScriptedTransport {
        let transport = ScriptedTransport(["GET /p": (200, ["Cache-Control": "max-age=60"]), "POST /q": (201, ["Location": location])])
        let provider = try provider(transport)
        let page = try Bin("p", base: origin)
        _ = try await provider.request(page).value
        #expect(try await provider.request(page).value.value(forHTTPHeaderField: "X-Cache") == "hit")
        _ = try await provider.request(try Bin("q", method: .post, base: origin)).value
        #expect(try await provider.request(page).value.value(forHTTPHeaderField: "X-Cache") == "miss", "\(location)")
        return transport
    }

    /// Invalidation (§4.4) by a `Location` of the same origin, its default port written out.
    @Test func aLocationWithTheDefaultPortWrittenOutIsTheSameOrigin() async throws {
        let transport = try await expectInvalidation(of: URL(string: "https://cache.test")!, byLocation: "https://cache.test:443/p")
        #expect(transport.calls.log == ["GET /p", "POST /q", "GET /p"])
    }

    /// Invalidation (§4.4) by a `Location` that names the origin's host in another form (case,
    /// percent-encoded, past ASCII): the same host, whose cached URL (as requests spell it, in
    /// IDNA's form) goes. It was taken for another origin, or kept its own spelling, and the stored
    /// response stayed.
    @Test(arguments: ["https://B%C3%9CCHER.example/p", "https://bücher.example:443/p", "https://XN--BCHER-KVA.example/p"])
    func aLocationNamingTheHostInAnotherFormIsTheSameOrigin(_ location: String) async throws {
        _ = try await expectInvalidation(of: URL(string: "https://bücher.example")!, byLocation: location)
        #expect(CachePlugin.sameOrigin(location, as: "https://xn--bcher-kva.example/q").last == "https://xn--bcher-kva.example/p")
        #expect(CachePlugin.sameOrigin(location, as: "https://bucher.example/q").isEmpty)
        #expect(CachePlugin.sameOrigin("https://a%3Cb.example/p", as: "https://a%3Cb.example/q") == ["https://a%3Cb.example/p"])
    }

    // MARK: §4.3.2 the client's own conditional requests

    @Test func aFreshEntryAnswersTheClientsConditionalRequestWith304() async throws {
        let modified = HTTPDate.format(Date().timeIntervalSince1970 - 86_400)
        let later = HTTPDate.format(Date().timeIntervalSince1970 - 3600)
        let transport = ScriptedTransport(["/x": (200, ["Cache-Control": "max-age=60", "ETag": "\"v1\"", "Last-Modified": modified])])
        let provider = try provider(transport)
        _ = try await get(provider, "x")
        let weak = try await get(provider, "x", headers: ["If-None-Match": "\"v0\", W/\"v1\""])
        #expect(weak.statusCode == 304)
        #expect(weak.value(forHTTPHeaderField: "ETag") == "\"v1\"")
        #expect(weak.data.isEmpty)
        #expect(try await get(provider, "x", headers: ["If-None-Match": "*"]).statusCode == 304)
        #expect(try await get(provider, "x", headers: ["If-None-Match": "\"v2\""]).statusCode == 200)
        #expect(try await get(provider, "x", headers: ["If-Modified-Since": later]).statusCode == 304)
        // If-None-Match wins over If-Modified-Since.
        #expect(try await get(provider, "x", headers: ["If-None-Match": "\"v2\"", "If-Modified-Since": later]).statusCode == 200)
        #expect(transport.calls.log == ["GET /x"])
    }

    /// An entity tag with a comma in it (`"a,b"` is one tag) matches itself; `*` matches any
    /// stored response, one without a tag too (RFC 9110 §13.1.2); `If-Modified-Since` against a
    /// response without `Last-Modified` is read against its `Date` (RFC 9111 §4.3.2). Each was
    /// answered with the whole 200.
    @Test func theClientsConditionsReadTagsAndDatesAsTheRFCsDo() async throws {
        let date = HTTPDate.format(Date().timeIntervalSince1970 - 600)
        let later = HTTPDate.format(Date().timeIntervalSince1970 - 60)
        let earlier = HTTPDate.format(Date().timeIntervalSince1970 - 3600)
        let transport = ScriptedTransport([
            "/comma": (200, ["Cache-Control": "max-age=60", "ETag": "\"a,b\""]),
            "/plain": (200, ["Cache-Control": "max-age=3600", "Date": date]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "comma")
        _ = try await get(provider, "plain")
        #expect(try await get(provider, "comma", headers: ["If-None-Match": "\"x\", \"a,b\""]).statusCode == 304)
        #expect(try await get(provider, "comma", headers: ["If-None-Match": "\"a\", \"b\""]).statusCode == 200)
        #expect(try await get(provider, "plain", headers: ["If-None-Match": "*"]).statusCode == 304)
        #expect(try await get(provider, "plain", headers: ["If-Modified-Since": later]).statusCode == 304)
        #expect(try await get(provider, "plain", headers: ["If-Modified-Since": earlier]).statusCode == 200)
        #expect(transport.calls.log == ["GET /comma", "GET /plain"])
    }

    // MARK: §2 the response to the request's URL

    /// A transport of the app's own that followed a redirect says so (`redirected`): the cache,
    /// compiled in, stores nothing for the URL asked.
    @Test func aResponseATransportSaysWasRedirectedIsNotStored() async throws {
        final class Redirecting: Transport, Sendable {
            let calls = LockedCounter()
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                calls.append(request.urlRequest.url!.path)
                let headers = ["Cache-Control": "max-age=60", "Date": HTTPDate.format(Date().timeIntervalSince1970)]
                let final = URL(string: "http://cache.test/elsewhere")!
                return TransportResponse(
                    response: HTTPURLResponse(url: final, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: headers)!, data: Data("x".utf8),
                    redirected: request.urlRequest.url!.path == "/moved")
            }
        }
        let origin = Redirecting()
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        let provider = Provider<Bin>(transport: origin, interceptors: [cache], services: services)
        for path in ["moved", "moved", "stays", "stays"] { _ = try await get(provider, path) }
        #expect(origin.calls.log == ["/moved", "/moved", "/stays"])
    }

    /// The cache's own condition can follow a redirect: the place redirected to may then answer
    /// `304` to a client that asked for no condition. The request is sent again without it (the
    /// stored response is another URL's). That `304` used to reach the client, empty.
    @Test func aRedirected304ToTheCachesOwnConditionIsAskedAgainWithoutIt() async throws {
        /// `/old` answers stale with tag v, then redirects (as the transport follows it) to a
        /// place that answers `304` to that tag, and the body without a condition.
        final class Moved: Transport, Sendable {
            let calls = LockedCounter()
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let condition = request.urlRequest.value(forHTTPHeaderField: "If-None-Match")
                let first = calls.log.isEmpty
                calls.append("\(request.urlRequest.url!.path) \(condition ?? "-")")
                let date = HTTPDate.format(Date().timeIntervalSince1970)
                if first {
                    let headers = ["Cache-Control": "max-age=0", "ETag": "\"v\"", "Date": date]
                    return TransportResponse(
                        response: HTTPURLResponse(url: request.urlRequest.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: headers)!,
                        data: Data("first".utf8))
                }
                let moved = URL(string: "http://cache.test/new")!
                let status = condition == "\"v\"" ? 304 : 200
                let headers = ["Cache-Control": "max-age=60", "ETag": "\"v\"", "Date": date]
                return TransportResponse(
                    response: HTTPURLResponse(url: moved, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!,
                    data: Data(status == 304 ? [] : Array("second".utf8)), redirected: true)
            }
        }
        let origin = Moved()
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        let provider = Provider<Bin>(transport: origin, interceptors: [cache], services: services)
        #expect(try await get(provider, "old").data == Data("first".utf8))
        let second = try await get(provider, "old")
        #expect(second.statusCode == 200)
        #expect(second.data == Data("second".utf8))
        #expect(origin.calls.log == ["/old -", "/old \"v\"", "/old -"])
        // A client's own condition is the client's: its 304 reaches it, asked once.
        let own = try await get(provider, "old", headers: ["If-None-Match": "\"v\""])
        #expect(own.statusCode == 304)
        #expect(origin.calls.log.count == 4)
    }

    // MARK: §4.3.5 HEAD

    @Test func aHeadResponseFreshensTheStoredGetAndA410InvalidatesIt() async throws {
        let transport = ScriptedTransport([
            "GET /h": (200, ["Cache-Control": "max-age=0", "ETag": "\"e1\""]),
            "HEAD /h": (200, ["Cache-Control": "max-age=60", "ETag": "\"e1\""]),
            "GET /g": (200, ["Cache-Control": "max-age=60", "ETag": "\"e1\""]),
            "HEAD /g": (410, [:]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "h")
        _ = try await get(provider, "h", method: .head)
        #expect(try await get(provider, "h").value(forHTTPHeaderField: "X-Cache") == "hit")
        _ = try await get(provider, "g")
        #expect(try await get(provider, "g").value(forHTTPHeaderField: "X-Cache") == "hit")
        _ = try await get(provider, "g", method: .head, headers: ["Cache-Control": "no-cache"])
        #expect(try await get(provider, "g").value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(transport.calls.log == ["GET /h", "HEAD /h", "GET /g", "HEAD /g", "GET /g"])
    }

    /// Only a `200` to a `HEAD` freshens the stored `GET` (§4.3.5): another 2xx (a `203` from a
    /// transforming proxy, a `204`) said nothing of the representation, and made it fresh again.
    @Test(arguments: [203, 204])
    func aHeadAnsweredWithAnother2xxFreshensNothing(_ status: Int) async throws {
        let transport = ScriptedTransport([
            "GET /h2": (200, ["Cache-Control": "max-age=0", "ETag": "\"e1\""]),
            "HEAD /h2": (status, ["Cache-Control": "max-age=60", "ETag": "\"e1\""]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "h2")
        _ = try await get(provider, "h2", method: .head)
        #expect(try await get(provider, "h2").value(forHTTPHeaderField: "X-Cache") != "hit")
    }

    @Test func aHeadWithOtherValidatorsMakesTheStoredGetStale() async throws {
        let transport = ScriptedTransport([
            "GET /hv": (200, ["Cache-Control": "max-age=60", "ETag": "\"a\""]),
            "HEAD /hv": (200, ["Cache-Control": "max-age=60", "ETag": "\"b\""]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "hv")
        #expect(try await get(provider, "hv").value(forHTTPHeaderField: "X-Cache") == "hit")
        _ = try await get(provider, "hv", method: .head, headers: ["Cache-Control": "no-cache"])
        #expect(try await get(provider, "hv").value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(transport.calls.log == ["GET /hv", "HEAD /hv", "GET /hv"])
    }

    /// A `HEAD` freshens the stored `GET` only when every validator it carries, and its
    /// `Content-Length`, match the stored response's (§4.3.5): a matching entity tag with another
    /// `Last-Modified` or length freshened a body of another representation.
    @Test(arguments: [["Last-Modified": "Tue, 01 Sep 2026 00:00:00 GMT"], ["Content-Length": "999"]])
    func aHeadWithAMatchingTagButAnotherDateOrLengthMakesTheStoredGetStale(other: [String: String]) async throws {
        let stored = ["Cache-Control": "max-age=0", "ETag": "\"e1\"", "Last-Modified": "Mon, 31 Aug 2026 00:00:00 GMT"]
        let head = stored.merging(other) { _, new in new }.merging(["Cache-Control": "max-age=60"]) { _, new in new }
        let transport = ScriptedTransport(["GET /hl": (200, stored), "HEAD /hl": (200, head)])
        let stale = try provider(transport)
        _ = try await get(stale, "hl")
        _ = try await get(stale, "hl", method: .head)
        #expect(try await get(stale, "hl").value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(transport.calls.log == ["GET /hl", "HEAD /hl", "GET /hl"])
        // The same validators and length (the body's, 4 bytes) freshen it.
        let same = ScriptedTransport([
            "GET /hl": (200, stored), "HEAD /hl": (200, stored.merging(["Cache-Control": "max-age=60", "Content-Length": "4"]) { _, new in new }),
        ])
        let fresh = try provider(same)
        _ = try await get(fresh, "hl")
        _ = try await get(fresh, "hl", method: .head)
        #expect(try await get(fresh, "hl").value(forHTTPHeaderField: "X-Cache") == "hit")
    }

    /// A `HEAD` touches only the stored `GET` it would have selected (§4.3.5): with `Vary`, one
    /// whose varying fields select no variant leaves every variant as it is, whatever its
    /// validators. It used to read the URL's variant list as the entry, find no validator there,
    /// and drop every variant of the URL.
    @Test func aHeadThatSelectsNoVariantLeavesTheVariantsAlone() async throws {
        let transport = ScriptedTransport([
            "GET /hx": (200, ["Cache-Control": "max-age=60", "ETag": "\"e\"", "Vary": "Accept"]),
            "HEAD /hx": (200, ["Cache-Control": "max-age=60", "ETag": "\"other\"", "Vary": "Accept"]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "hx", headers: ["Accept": "text/a"])
        _ = try await get(provider, "hx", method: .head, headers: ["Accept": "text/b"])
        #expect(try await get(provider, "hx", headers: ["Accept": "text/a"]).value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(transport.calls.log == ["GET /hx", "HEAD /hx"])
    }

    // MARK: RFC 9110 §13.2.1 preconditions

    /// A condition is evaluated only where the answer without it would be a 2xx: a fresh stored
    /// 404 with an ETag answers `If-None-Match` of that tag with the 404, not a 304.
    @Test func aStored404AnswersAConditionalRequestWithThe404() async throws {
        let transport = ScriptedTransport(["/gone": (404, ["Cache-Control": "max-age=60", "ETag": "\"e\""])])
        let provider = try provider(transport)
        #expect(try await get(provider, "gone").statusCode == 404)
        for condition in [["If-None-Match": "\"e\""], ["If-None-Match": "*"]] {
            let answer = try await get(provider, "gone", headers: condition)
            #expect(answer.statusCode == 404, "\(condition)")
            #expect(answer.value(forHTTPHeaderField: "X-Cache") == "hit")
        }
        #expect(transport.calls.log == ["GET /gone"])
    }

    // MARK: RFC 8246 immutable, §5.2.2.3 must-understand

    /// The target's `revalidate` option asks the origin every time, for an immutable entry too.
    @Test func theRevalidateOptionOverridesImmutable() async throws {
        let transport = ScriptedTransport(["/i": (200, ["Cache-Control": "max-age=60, immutable"])])
        let provider = try provider(transport)
        _ = try await get(provider, "i")
        #expect(try await get(provider, "i").value(forHTTPHeaderField: "X-Cache") == "hit")
        let revalidated = try await provider.request(try Bin("i", options: ["cache": "revalidate"], base: Self.origin)).value
        #expect(revalidated.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(transport.calls.log == ["GET /i", "GET /i"])
    }

    /// `stale-if-error` never serves an entry whose response said `no-cache` (§4.2.4), nor one a
    /// request's own directives refuse: the origin's 503 goes to the caller.
    @Test func staleIfErrorNeverServesANoCacheEntry() async throws {
        final class Failing: Transport, Sendable {
            let failing = Locked(false)
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let url = request.urlRequest.url!
                let headers = [
                    "Cache-Control": url.path == "/nc" ? "no-cache" : "max-age=0", "ETag": "\"v\"",
                    "Date": HTTPDate.format(Date().timeIntervalSince1970),
                ]
                let status = failing.withLock { $0 } ? 503 : 200
                return TransportResponse(
                    response: HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!, data: Data("v".utf8))
            }
        }
        let origin = Failing()
        let services = PluginServices()
        let cache = try CachePlugin(
            configuration: PluginConfiguration(plugin: "cache", values: ["staleIfError": 600]), host: services.hostServices(for: "cache"))
        let provider = Provider<Bin>(transport: origin, interceptors: [cache], services: services)
        _ = try await get(provider, "nc")
        _ = try await get(provider, "ma")
        origin.failing.withLock { $0 = true }
        let noCache = try await get(provider, "nc")
        #expect(noCache.statusCode == 503)
        #expect(noCache.value(forHTTPHeaderField: "X-Cache") == "miss")
        let maxAge = try await get(provider, "ma")
        #expect(maxAge.statusCode == 200)
        #expect(maxAge.value(forHTTPHeaderField: "X-Cache") == "stale")
        // Nor to a request that asked for a validated or a fresher answer (`no-cache`, `Pragma:
        // no-cache`, `max-age`, `min-fresh`): the error goes to it. One that accepts staleness
        // (`max-stale`, `stale-if-error`) is served the stale entry. (The first 503 that goes
        // through is stored: it has a max-age of its own.)
        for accepting in [["Cache-Control": "max-age=0, stale-if-error=600"], ["Cache-Control": "no-cache, max-stale"]] {
            #expect(try await get(provider, "ma", headers: accepting).value(forHTTPHeaderField: "X-Cache") == "stale", "\(accepting)")
        }
        for refusing in [["Cache-Control": "no-cache"], ["Pragma": "no-cache"], ["Cache-Control": "max-age=0"], ["Cache-Control": "min-fresh=5"]] {
            let answer = try await get(provider, "ma", headers: refusing)
            #expect(answer.statusCode == 503, "\(refusing)")
            #expect(answer.value(forHTTPHeaderField: "X-Cache") == "miss", "\(refusing)")
        }
    }

    /// A request's `max-stale=N` bounds the staleness of the entry `stale-if-error` answers it
    /// with (§5.2.1.2, §4.2.4): one 300 s stale does not answer `max-stale=5`; the origin's 503
    /// goes to it. It was served, the directive read only as "accepts staleness".
    @Test func staleIfErrorKeepsToTheRequestsMaxStale() async throws {
        let origin = NumberedTransport { call, _ in
            // Sent 360 s ago with a lifetime of 60 s: 300 s stale.
            call == 1
                ? (200, ["Cache-Control": "max-age=60", "ETag": "\"v\"", "Date": HTTPDate.format(Date().timeIntervalSince1970 - 360)], "v")
                : (503, ["Cache-Control": "no-store"], "down")
        }
        let provider = try cached(origin, ["staleIfError": 600]).provider
        _ = try await get(provider, "s")
        for (directives, served) in [
            ("max-stale=5", false), ("max-age=10, max-stale=5", false), ("max-stale=x", false), ("max-stale=400", true), ("max-stale", true),
        ] {
            let answer = try await get(provider, "s", headers: ["Cache-Control": directives])
            #expect(answer.statusCode == (served ? 200 : 503), "\(directives)")
            // (Within it, the stale entry answers without asking the origin.)
            #expect(answer.value(forHTTPHeaderField: "X-Cache") == (served ? "hit" : "miss"), "\(directives)")
        }
        #expect(origin.calls.value == 4)
        // Sent to the origin (`no-cache`), the 503 is answered with the stale entry within the
        // request's `max-stale` only.
        for (directives, served) in [("no-cache, max-stale=5", false), ("no-cache, max-stale=400", true)] {
            let answer = try await get(provider, "s", headers: ["Cache-Control": directives])
            #expect(answer.statusCode == (served ? 200 : 503), "\(directives)")
            #expect(answer.value(forHTTPHeaderField: "X-Cache") == (served ? "stale" : "miss"), "\(directives)")
        }
        #expect(origin.calls.value == 6)
        // Without directives of its own, the configured 600 s decide.
        #expect(try await get(provider, "s").value(forHTTPHeaderField: "X-Cache") == "stale")
    }

    @Test func anImmutableFreshEntryIgnoresAReload() async throws {
        let transport = ScriptedTransport(["/i": (200, ["Cache-Control": "max-age=60, immutable"]), "/m": (200, ["Cache-Control": "max-age=60"])])
        let provider = try provider(transport)
        _ = try await get(provider, "i")
        _ = try await get(provider, "m")
        #expect(try await get(provider, "i", headers: ["Cache-Control": "no-cache"]).value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(try await get(provider, "m", headers: ["Cache-Control": "no-cache"]).value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(transport.calls.log == ["GET /i", "GET /m", "GET /m"])
    }

    @Test func mustUnderstandStoresOnlyUnderstoodStatusCodesDespiteNoStore() async throws {
        let transport = ScriptedTransport([
            "/u": (200, ["Cache-Control": "no-store, must-understand, max-age=60"]),
            "/v": (299, ["Cache-Control": "no-store, must-understand, max-age=60"]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "u")
        _ = try await get(provider, "v")
        #expect(try await get(provider, "u").value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(try await get(provider, "v").value(forHTTPHeaderField: "X-Cache") == "miss")
    }

    // MARK: §4.1 Vary

    @Test func severalVariantsPerURLSelectedByNormalisedValuesAndInvalidatedTogether() async throws {
        let transport = ScriptedTransport([
            "GET /v": (200, ["Cache-Control": "max-age=60", "Vary": "Accept-Language, X-Mode"]), "POST /v": (204, [:]),
        ])
        let provider = try provider(transport)
        func cache(_ language: String, mode: String = "a b") async throws -> String? {
            try await get(provider, "v", headers: ["Accept-Language": language, "X-Mode": mode]).value(forHTTPHeaderField: "X-Cache")
        }
        #expect(try await cache("en") == "miss")
        #expect(try await cache("de") == "miss")
        #expect(try await cache("en") == "hit")
        #expect(try await cache("de") == "hit")
        #expect(try await cache("EN") == "hit")  // Accept-Language: case does not select
        #expect(try await cache("en", mode: "a   b") == "hit")  // whitespace does not select
        #expect(try await cache("en", mode: "A b") == "miss")  // but case does, for other fields
        #expect(try await cache("en, de") == "miss")
        #expect(try await cache("de,en") == "hit")  // nor the order of an Accept-Language list
        _ = try await get(provider, "v", method: .post)
        #expect(try await cache("en") == "miss")
        #expect(try await cache("de") == "miss")
    }

    /// A header a request lacks matches only a request that lacks it too (§4.1): an empty
    /// `Accept-Encoding` asks for no coding, an absent one for any, and both were the same.
    @Test func anAbsentHeaderSelectsNoVariantOfAnEmptyOne() async throws {
        let transport = ScriptedTransport(["GET /v": (200, ["Cache-Control": "max-age=60", "Vary": "X-Mode"])])
        let provider = try provider(transport)
        func xCache(_ headers: [String: String]) async throws -> String? {
            try await get(provider, "v", headers: headers).value(forHTTPHeaderField: "X-Cache")
        }
        #expect(try await xCache([:]) == "miss")
        #expect(try await xCache([:]) == "hit")
        #expect(try await xCache(["X-Mode": ""]) == "miss")
        #expect(try await xCache(["X-Mode": ""]) == "hit")
        #expect(try await xCache(["X-Mode": " "]) == "hit")
        #expect(try await xCache([:]) == "hit")
        #expect(transport.calls.log.count == 2)
    }

    /// A variant its URL's index no longer lists (the index evicted before it, or written over by
    /// a concurrent store) is not served: an invalidation finds variants through the index, and
    /// one left behind was served after the URL was invalidated.
    @Test func aVariantTheIndexNoLongerListsIsNotServed() async throws {
        let transport = ScriptedTransport(["GET /v": (200, ["Cache-Control": "max-age=60", "Vary": "Accept-Language"]), "POST /v": (204, [:])])
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        let provider = Provider<Bin>(transport: transport, interceptors: [cache], services: services)
        func xCache(_ language: String) async throws -> String? {
            try await get(provider, "v", headers: ["Accept-Language": language]).value(forHTTPHeaderField: "X-Cache")
        }
        #expect(try await xCache("en") == "miss")
        #expect(try await xCache("en") == "hit")
        // The index goes (as eviction takes the least recently used first); the variant stays.
        cache.store.remove("GET http://cache.test/v")
        _ = try await get(provider, "v", method: .post)
        #expect(try await xCache("de") == "miss")
        #expect(try await xCache("en") == "miss")
        #expect(try await xCache("en") == "hit")
        #expect(transport.calls.log.filter { $0 == "GET /v" }.count == 3)
    }

    // MARK: §3.4 ranges from a stored response

    @Test func aRangeRequestIsAnsweredFromTheStoredCompleteResponse() async throws {
        let transport = ScriptedTransport(["/r": (200, ["Cache-Control": "max-age=60", "ETag": "\"r1\""])])
        let provider = try provider(transport)
        _ = try await get(provider, "r")  // the body is "body"
        let middle = try await get(provider, "r", headers: ["Range": "bytes=1-2"])
        #expect(middle.statusCode == 206)
        #expect(middle.data == Data("od".utf8))
        #expect(middle.value(forHTTPHeaderField: "Content-Range") == "bytes 1-2/4")
        let tail = try await get(provider, "r", headers: ["Range": "bytes=-3"])
        #expect(tail.data == Data("ody".utf8))
        #expect(try await get(provider, "r", headers: ["Range": "bytes=2-"]).data == Data("dy".utf8))
        let beyond = try await get(provider, "r", headers: ["Range": "bytes=9-"])
        #expect(beyond.statusCode == 416)
        #expect(beyond.value(forHTTPHeaderField: "Content-Range") == "bytes */4")
        // Several ranges, or an If-Range that does not match: the whole response.
        #expect(try await get(provider, "r", headers: ["Range": "bytes=0-0,2-3"]).statusCode == 200)
        #expect(try await get(provider, "r", headers: ["Range": "bytes=0-0", "If-Range": "\"other\""]).statusCode == 200)
        #expect(try await get(provider, "r", headers: ["Range": "bytes=0-0", "If-Range": "\"r1\""]).statusCode == 206)
        #expect(transport.calls.log == ["GET /r"])
    }

    /// An `If-Range` date matches only a strong `Last-Modified`: one second or more before the
    /// stored response's `Date` (RFC 9110 §13.1.5). A date equal to `Date` matched, and a resumed
    /// download could mix two versions made within that second.
    @Test func anIfRangeDateMatchesOnlyAStrongLastModified() async throws {
        let modified = HTTPDate.format(Date().timeIntervalSince1970 - 100)
        let transport = ScriptedTransport([
            "/weak": (200, ["Cache-Control": "max-age=600", "Last-Modified": modified, "Date": modified]),
            "/strong": (
                200, ["Cache-Control": "max-age=600", "Last-Modified": modified, "Date": HTTPDate.format(Date().timeIntervalSince1970 - 90)]
            ),
        ])
        let provider = try provider(transport)
        for path in ["weak", "strong"] { _ = try await get(provider, path) }
        let weak = try await get(provider, "weak", headers: ["Range": "bytes=1-", "If-Range": modified])
        #expect(weak.statusCode == 200 && weak.data == Data("body".utf8))
        let strong = try await get(provider, "strong", headers: ["Range": "bytes=1-", "If-Range": modified])
        #expect(strong.statusCode == 206 && strong.data == Data("ody".utf8))
        #expect(transport.calls.log == ["GET /weak", "GET /strong"])
    }

    // MARK: §4.2.3 Age

    @Test func everyResponseTheCacheHandsOnCarriesItsAge() async throws {
        let lagging = HTTPDate.format(Date().timeIntervalSince1970 - 30)
        let transport = ScriptedTransport([
            "/old": (200, ["Cache-Control": "max-age=600", "Date": lagging]), "/aged": (200, ["Cache-Control": "max-age=600", "Age": "100"]),
            "/new": (200, ["Cache-Control": "max-age=600"]),
        ])
        let provider = try provider(transport)
        let miss = try await get(provider, "old")
        #expect(miss.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect((Int(miss.value(forHTTPHeaderField: "Age") ?? "") ?? 0) >= 29)
        #expect((Int(try await get(provider, "old").value(forHTTPHeaderField: "Age") ?? "") ?? 0) >= 29)
        #expect((Int(try await get(provider, "aged").value(forHTTPHeaderField: "Age") ?? "") ?? 0) >= 100)
        #expect(try await get(provider, "new").value(forHTTPHeaderField: "Age") == nil)
        #expect(try await get(provider, "new").value(forHTTPHeaderField: "Age") == "0")
    }

    // MARK: §4.4 invalidation

    @Test func anyUnsafeMethodInvalidatesTheURLAndItsSameOriginLocations() async throws {
        let transport = ScriptedTransport([
            "/a": (200, ["Cache-Control": "max-age=60"]), "/b": (200, ["Cache-Control": "max-age=60"]),
            "/c": (200, ["Cache-Control": "max-age=60"]),
            "/act": (201, ["Location": "/b", "Content-Location": "http://elsewhere.test/c"]),
        ])
        let provider = try provider(transport)
        for path in ["a", "b", "c"] { _ = try await get(provider, path) }
        _ = try await get(provider, "a", method: HTTPMethod(rawValue: "FROB"))
        #expect(try await get(provider, "a").value(forHTTPHeaderField: "X-Cache") == "miss")
        _ = try await get(provider, "act", method: .post)
        #expect(try await get(provider, "b").value(forHTTPHeaderField: "X-Cache") == "miss")
        // Another origin's URL is not this cache's to drop on the word of this one.
        #expect(try await get(provider, "c").value(forHTTPHeaderField: "X-Cache") == "hit")
    }
}

/// Answers the requests in turn with the given status and fields (the last answer again once
/// they run out), recording each request's validators.
final class SequencedTransport: Transport, Sendable {
    let answers: [(status: Int, headers: [String: String])]
    let sent = Locked([String]())

    init(_ answers: [(status: Int, headers: [String: String])]) { self.answers = answers }

    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        let url = request.urlRequest.url!
        let fields = request.urlRequest.allHTTPHeaderFields ?? [:]
        let validators = ["If-None-Match", "If-Modified-Since"].compactMap { name in fields[name].map { "\(name): \($0)" } }
        let index = sent.withLock { sent in
            sent.append(validators.isEmpty ? "unconditional" : validators.joined(separator: "; "))
            return sent.count - 1
        }
        let answer = answers[min(index, answers.count - 1)]
        return ScriptedTransport.response(url, answer.status, answer.headers)
    }
}

/// What reviews of the cache against RFC 9111 and RFC 5861 found, each seen failing before.
@Suite("cache plugin: RFC 9111, reviewed")
struct CacheRFC9111ReviewedTests {
    func provider(_ transport: any Transport, _ values: [String: JSONValue] = [:]) throws -> Provider<Bin> {
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: values), host: services.hostServices(for: "cache"))
        return Provider<Bin>(transport: transport, interceptors: [cache], services: services)
    }

    func get(_ provider: Provider<Bin>, _ path: String) async throws -> Response {
        try await provider.request(try Bin(path, base: CacheRFC9111Tests.origin)).value
    }

    /// A response without `Date` is stored with one, the time it came (RFC 9110 §6.6.1: a cache
    /// with a clock MUST add it): its hits went out without a `Date`, and whoever got them could not
    /// tell their age.
    @Test func aResponseWithoutDateIsStoredWithOne() async throws {
        final class Undated: Transport, Sendable {
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let url = request.urlRequest.url!
                return TransportResponse(
                    response: HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=60"])!,
                    data: Data("u".utf8))
            }
        }
        let provider = try provider(Undated())
        let before = Date().timeIntervalSince1970.rounded(.down)
        let miss = try await get(provider, "undated")
        #expect(miss.value(forHTTPHeaderField: "X-Cache") == "miss")
        let hit = try await get(provider, "undated")
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit")
        let date = try #require(hit.value(forHTTPHeaderField: "Date").flatMap { HTTPDate.parse($0) })
        #expect(date >= before && date <= Date().timeIntervalSince1970)
        #expect(hit.value(forHTTPHeaderField: "Age") == "0")
    }

    /// A proxy's authentication fields are never stored (§3.1 MUST NOT): a hit replayed them.
    @Test func aProxysAuthenticationFieldsAreNeverStored() async throws {
        let transport = ScriptedTransport([
            "/p": (
                200,
                [
                    "Cache-Control": "max-age=60", "Proxy-Authentication-Info": #"nextnonce="n1""#, "Proxy-Authenticate": #"Basic realm="p""#,
                    "X-Kept": "1",
                ]
            )
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "p")
        let hit = try await get(provider, "p")
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(hit.value(forHTTPHeaderField: "X-Kept") == "1")
        #expect(hit.value(forHTTPHeaderField: "Proxy-Authentication-Info") == nil)
        #expect(hit.value(forHTTPHeaderField: "Proxy-Authenticate") == nil)
    }

    /// An unqualified `no-cache` counts wherever it is written, after a qualified one too (it was
    /// dropped as a repeat, and the response served fresh without validation); the lists of
    /// repeated qualified ones add up.
    @Test func anUnqualifiedNoCacheCountsAfterAQualifiedOne() async throws {
        #expect(CacheDirectives([#"max-age=60, no-cache="X-A", no-cache"#]).hasUnqualified("no-cache"))
        #expect(CacheDirectives([#"no-cache="X-A""#, "no-cache"]).hasUnqualified("no-cache"))
        #expect(CacheDirectives(["no-cache", #"no-cache="X-A""#]).hasUnqualified("no-cache"))
        #expect(CacheDirectives([#"no-cache="X-A", no-cache="X-B""#]).listedFields("no-cache") == ["x-a", "x-b"])
        #expect(CacheDirectives([#"private="X-A""#, #"private="X-B""#]).listedFields("private") == ["x-a", "x-b"])
        #expect(CacheDirectives(["max-age=10, max-age=20"]).seconds("max-age") == 10)
        let transport = ScriptedTransport(["/n": (200, ["Cache-Control": #"max-age=60, no-cache="X-A", no-cache"#, "ETag": #""v""#])])
        let provider = try provider(transport)
        _ = try await get(provider, "n")
        #expect(try await get(provider, "n").value(forHTTPHeaderField: "X-Cache") != "hit")
        #expect(transport.calls.log == ["GET /n", "GET /n"])
    }

    /// A field a `304` names in its own qualified `no-cache` goes from the stored response: a hit
    /// after it sent the field without validation.
    @Test func aFieldAnUpdateNamesInNoCacheIsNoLongerServed() async throws {
        let transport = SequencedTransport([
            (200, ["Cache-Control": "max-age=0", "ETag": #""v""#, "X-A": "secret", "X-B": "kept"]),
            (304, ["Cache-Control": #"max-age=60, no-cache="X-A""#, "ETag": #""v""#]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "u")
        #expect(try await get(provider, "u").value(forHTTPHeaderField: "X-Cache") == "revalidated")
        let hit = try await get(provider, "u")
        #expect(hit.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(hit.value(forHTTPHeaderField: "X-A") == nil)
        #expect(hit.value(forHTTPHeaderField: "X-B") == "kept")
    }

    /// An entry stored under `must-understand` (in spite of its `no-store`) stays when a `304`
    /// freshens it: the update removed it for its `no-store`, and the next request was a miss
    /// without a validator.
    @Test func aMustUnderstandEntryStaysWhenFreshened() async throws {
        let transport = SequencedTransport([
            (200, ["Cache-Control": "max-age=0, no-store, must-understand", "ETag": #""v""#]),
            (304, ["ETag": #""v""#]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "m")
        #expect(try await get(provider, "m").value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(try await get(provider, "m").value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(transport.sent.withLock { $0 } == ["unconditional", #"If-None-Match: "v""#, #"If-None-Match: "v""#])
    }

    /// `stale-if-error` answers for 500, 502, 503 and 504 only (RFC 5861 §4), and a transport
    /// failure: a `501` or `505` is the origin's answer (a stale entry was served for any 5xx).
    @Test(arguments: [501, 505, 511, 500, 502, 503, 504])
    func staleIfErrorCoversTheErrorsRFC5861Names(_ status: Int) async throws {
        let transport = SequencedTransport([(200, ["Cache-Control": "max-age=0", "ETag": #""v""#]), (status, [:])])
        let provider = try provider(transport, ["staleIfError": 600])
        _ = try await get(provider, "e")
        let answer = try await get(provider, "e")
        let covered = [500, 502, 503, 504].contains(status)
        #expect(answer.statusCode == (covered ? 200 : status))
        #expect(answer.value(forHTTPHeaderField: "X-Cache") == (covered ? "stale" : "miss"))
    }

    /// A revalidation sends both validators the stored response has (§4.3.1): `If-Modified-Since`
    /// was left out beside an `If-None-Match`.
    @Test func aRevalidationSendsBothValidators() async throws {
        let modified = "Sun, 06 Nov 1994 08:49:37 GMT"
        let transport = SequencedTransport([
            (200, ["Cache-Control": "max-age=0", "ETag": #""v""#, "Last-Modified": modified]), (304, ["ETag": #""v""#]),
        ])
        let provider = try provider(transport)
        _ = try await get(provider, "v")
        #expect(try await get(provider, "v").value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(transport.sent.withLock { $0 } == ["unconditional", #"If-None-Match: "v"; If-Modified-Since: \#(modified)"#])
    }
}
