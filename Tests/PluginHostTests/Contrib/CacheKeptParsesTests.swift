import PluginHost
import PluginSDK
import Testing

@testable import CachePlugin

/// What the cache keeps from one request to the next (the last shared and partitioned keys, the
/// last `Cache-Control` parsed, an entry's parsed `Cache-Control`, `Date` and `Age`): each kept
/// answer is the one a fresh computation gives.
@Suite("cache plugin: kept keys, directives and entry fields")
struct CacheKeptParsesTests {
    func cache() throws -> CachePlugin {
        try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: PluginServices().hostServices(for: "cache"))
    }

    @Test func theSharedKeyIsTheURLsOwnEveryTime() throws {
        let cache = try cache()
        let urls = ["http://a.test/x", "http://a.test/x", "http://a.test/y", "http://a.test/x", "http://a.test/x?q=1"]
        #expect(urls.map(cache.sharedKey) == urls.map { "GET " + $0 })
    }

    @Test func thePartitionedKeyIsMadeAnewForAnotherKeyOrPartition() throws {
        let cache = try cache()
        let pairs = [
            ("GET http://a.test/x", "p1"), ("GET http://a.test/x", "p1"), ("GET http://a.test/y", "p1"), ("GET http://a.test/y", "p2"),
            ("GET http://a.test/x", "p1"),
        ]
        #expect(pairs.map { cache.partitionedKey($0.0, in: $0.1) } == pairs.map { CachePlugin.key($0.0, in: $0.1) })
        #expect(pairs.map { cache.partitionedKey($0.0, in: $0.1) } == pairs.map { $0.1 + " " + $0.0 })
    }

    @Test func theKeptCredentialsAreTheFieldsOwnEveryTime() throws {
        let cache = try cache()
        let auth = HTTPHeader(name: "Authorization", value: "Bearer one")
        let lists: [[HTTPHeader]] = [
            [], [auth], [auth], [HTTPHeader(name: "authorization", value: "Bearer one")], [HTTPHeader(name: "Authorization", value: "Bearer two")],
            [HTTPHeader(name: "Authorization", value: "Bearer on")], [HTTPHeader(name: "Authorization", value: "Bearer one!")],
            [auth, HTTPHeader(name: "Cookie", value: "a=1")], [auth, HTTPHeader(name: "Cookie", value: "a=1")],
            [HTTPHeader(name: "Cookie", value: "a=1"), auth],
            [auth, HTTPHeader(name: "Cookie", value: "a=1"), HTTPHeader(name: "Cookie", value: "b=2")],
            [auth, HTTPHeader(name: "Proxy-Authorization", value: "Basic eA==")], [HTTPHeader(name: "Accept", value: "*/*")], [auth],
            [HTTPHeader(name: "Authorization", value: "")], [],
        ]
        // Each list, then each list twice in a row (the second from the kept message).
        for headers in lists + lists.flatMap({ [$0, $0] }) {
            #expect(cache.keptCredentials(of: headers) == CachePlugin.credentials(of: headers), "\(headers)")
        }
        #expect(CachePlugin.credentials(of: [auth, HTTPHeader(name: "Cookie", value: "a=1")]) == "authorization\u{0}Bearer one\ncookie\u{0}a=1\n")
        #expect(CachePlugin.credentials(of: [HTTPHeader(name: "Accept", value: "*/*")]).isEmpty)
    }

    @Test func keysOfOtherBytesAreMadeAnewThoughEqualAsStrings() throws {
        // A URL path with "é" precomposed, then decomposed: `==` holds them equal, the keys differ.
        let cache = try cache()
        let precomposed = "GET http://a.test/caf\u{E9}"
        let decomposed = "GET http://a.test/cafe\u{301}"
        for key in [precomposed, decomposed, decomposed, precomposed] {
            #expect(Array(cache.partitionedKey(key, in: "p").utf8) == Array(("p " + key).utf8))
        }
        #expect(CachePlugin.PartitionedKey(key: precomposed, partition: "p") != CachePlugin.PartitionedKey(key: decomposed, partition: "p"))
    }

    @Test func directivesAreParsedAnewWhenTheFieldChanges() throws {
        let cache = try cache()
        func directives(_ values: [String]) -> CacheDirectives {
            cache.responseDirectives(values.map { HTTPHeader(name: "Cache-Control", value: $0) } + [HTTPHeader(name: "ETag", value: "\"1\"")])
        }
        // The same value twice (the second is the kept parse), then another, then the first again.
        for _ in 0..<2 {
            let noStore = directives(["no-store"])
            #expect(noStore.has("no-store") && !noStore.has("max-age"))
        }
        let fresh = directives(["max-age=60, public"])
        #expect(fresh.seconds("max-age") == 60 && fresh.has("public") && !fresh.has("no-store"))
        #expect(directives(["no-store"]).has("no-store"))
        // Two fields: both read, none kept in place of the single one.
        let two = directives(["max-age=5", "no-cache"])
        #expect(two.seconds("max-age") == 5 && two.hasUnqualified("no-cache"))
        #expect(directives(["no-store"]).has("no-store") && !directives(["no-store"]).has("no-cache"))
        // No field, and a field named in another case.
        #expect(!cache.responseDirectives([HTTPHeader(name: "ETag", value: "\"1\"")]).has("no-store"))
        #expect(cache.responseDirectives([HTTPHeader(name: "cache-control", value: "private")]).has("private"))
    }

    /// A `304` without `Age` or `Date` validates the stored response now: the stored `Age` (an
    /// upstream cache's, when it was first received) no longer counts, and its `Date` becomes the
    /// time the `304` came (RFC 9110 §6.6.1: a cache adds one). Kept, the old `Age` was counted
    /// again on top of the new response times (an entry with `Age: 100` and `max-age=60` was stale
    /// right after every revalidation), and the old `Date` made the apparent age the time since
    /// the first response.
    @Test func aNotModifiedWithoutAgeOrDateValidatesTheEntryNow() throws {
        let stored = 1_000_000.0
        let now = stored + 3600
        var entry = CacheEntry(
            key: "GET http://cache.test/x", status: 200, headerNames: ["Cache-Control", "Date", "Age", "ETag"],
            headerValues: ["max-age=60", HTTPDate.format(stored), "100", "\"e\""], body: [], requestTime: stored, responseTime: stored,
            vary: [:], ttl: nil, hasQuery: false)
        entry.update(from: [HTTPHeader(name: "ETag", value: "\"e\"")], receivedAt: now)
        entry.requestTime = now
        entry.responseTime = now
        #expect(entry.header("Age") == nil)
        #expect(entry.header("Date") == HTTPDate.format(now))
        #expect(entry.age(at: now + 1) == 1)
        #expect(entry.freshnessLifetime == 60)
        // A 304 that carries them: its own are kept.
        entry.update(from: [HTTPHeader(name: "Age", value: "7"), HTTPHeader(name: "Date", value: HTTPDate.format(now - 2))], receivedAt: now)
        #expect(entry.header("Age") == "7" && entry.header("Date") == HTTPDate.format(now - 2))
    }

    @Test func anEntrysDateAgeAndMaxAgeAreParsedAnewWhenItsFieldsChange() throws {
        let stored = 1_000_000.0
        var entry = CacheEntry(
            key: "GET http://cache.test/x", status: 200, headerNames: ["Cache-Control", "Date", "Age"],
            headerValues: ["max-age=60", HTTPDate.format(stored - 10), "5"], body: [], requestTime: stored, responseTime: stored, vary: [:],
            ttl: nil, hasQuery: false)
        // Read twice: the second read is the kept parse (the same slot), and says the same.
        let slot = entry.parsed
        for _ in 0..<2 {
            #expect(entry.freshnessLifetime == 60)
            // Apparent age 10 (Date 10 s before the response), corrected age 5: 10, then 20 s later 30.
            #expect(entry.age(at: stored + 20) == 30)
            #expect(entry.facts.date == stored - 10 && entry.facts.age == 5 && entry.facts.maxAge == .valid(60))
            #expect(entry.parsed === slot)
        }
        // A 304 replaces Cache-Control, Date and Age: what the entry says follows the new fields.
        entry.update(
            from: [
                HTTPHeader(name: "Cache-Control", value: "max-age=300"), HTTPHeader(name: "Date", value: HTTPDate.format(stored - 100)),
                HTTPHeader(name: "Age", value: "7"),
            ], receivedAt: stored)
        #expect(entry.freshnessLifetime == 300)
        #expect(entry.age(at: stored) == 100)
        #expect(entry.facts.date == stored - 100 && entry.facts.age == 7)
        // An invalid max-age: stale, whatever Expires says (§4.2.1).
        entry.headerNames = ["Cache-Control", "Expires"]
        entry.headerValues = ["max-age=bad", HTTPDate.format(stored + 1000)]
        #expect(entry.freshnessLifetime == 0)
        #expect(entry.facts.date == nil && entry.facts.age == nil && entry.facts.maxAge == .invalid)
        // A field renamed (names alone changed): parsed anew, and Expires counts. Without a Date it
        // counts from the response time, which a 304 sets: read where it is, not kept with the parse.
        entry.headerNames = ["Cache-Control-Old", "Expires"]
        #expect(entry.facts.maxAge == .absent)
        #expect(entry.freshnessLifetime == 1000)
        entry.responseTime = stored + 50
        #expect(entry.freshnessLifetime == 950)
        // A copy shares the parse until its names, or its values, change; the entry keeps its own.
        var copy = entry
        #expect(copy.parsed === entry.parsed)
        copy.headerNames = ["Cache-Control", "Expires"]
        #expect(copy.parsed !== entry.parsed)
        #expect(copy.freshnessLifetime == 0 && entry.freshnessLifetime == 950)
        copy.headerValues = ["max-age=9", HTTPDate.format(stored + 1000)]
        #expect(copy.freshnessLifetime == 9 && entry.freshnessLifetime == 950)
    }

    /// An entry's copies share one storage of its parts: a change to any part of one leaves the
    /// other as it was, either way round.
    @Test func anEntryIsAValueEvenThoughItsCopiesShareTheirParts() throws {
        let entry = CacheEntry(
            key: "GET http://cache.test/x", status: 200, headerNames: ["Cache-Control"], headerValues: ["max-age=60"], body: [1, 2],
            requestTime: 10, responseTime: 11, vary: ["accept": "a"], ttl: nil, hasQuery: false)
        var copy = entry
        copy.key = "GET http://cache.test/y"
        copy.status = 206
        copy.headerNames.append("ETag")
        copy.headerValues.append("\"1\"")
        copy.body.append(3)
        copy.requestTime = 20
        copy.responseTime = 21
        copy.vary["accept"] = "b"
        copy.ttl = 5
        copy.hasQuery = true
        #expect(entry.key == "GET http://cache.test/x" && entry.status == 200 && entry.headerNames == ["Cache-Control"])
        #expect(entry.headerValues == ["max-age=60"] && entry.body == [1, 2] && entry.requestTime == 10 && entry.responseTime == 11)
        #expect(entry.vary == ["accept": "a"] && entry.ttl == nil && !entry.hasQuery && entry.freshnessLifetime == 60)
        #expect(copy.key == "GET http://cache.test/y" && copy.status == 206 && copy.headerNames == ["Cache-Control", "ETag"])
        #expect(copy.headerValues == ["max-age=60", "\"1\""] && copy.body == [1, 2, 3] && copy.requestTime == 20 && copy.responseTime == 21)
        #expect(copy.vary == ["accept": "b"] && copy.ttl == 5 && copy.hasQuery && copy.freshnessLifetime == 5)
        // The other way round: the original changed, a copy made before keeps its parts.
        var original = copy
        let before = copy
        original.body = []
        original.headerValues = ["no-store", "\"2\""]
        #expect(before.body == [1, 2, 3] && before.headerValues == ["max-age=60", "\"1\""] && before.header("ETag") == "\"1\"")
        #expect(original.header("ETag") == "\"2\"" && original.directives.has("no-store") && !before.directives.has("no-store"))
    }
}
