import PluginHost
import PluginSDK
import Testing

@testable import CachePlugin

/// What the cache keeps from one request to the next (the last shared and partitioned keys, the
/// last `Cache-Control` parsed): each kept answer is the one a fresh computation gives.
@Suite("cache plugin: kept keys and directives")
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

    @Test func anEntrysDateAgeAndMaxAgeAreParsedAnewWhenItsFieldsChange() throws {
        let stored = 1_000_000.0
        var entry = CacheEntry(
            key: "GET http://cache.test/x", status: 200, headerNames: ["Cache-Control", "Date", "Age"],
            headerValues: ["max-age=60", HTTPDate.format(stored - 10), "5"], body: [], requestTime: stored, responseTime: stored, vary: [:],
            ttl: nil, hasQuery: false)
        // Read twice: the second read is the kept parse, and says the same.
        for _ in 0..<2 {
            #expect(entry.freshnessLifetime == 60)
            // Apparent age 10 (Date 10 s before the response), corrected age 5: 10, then 20 s later 30.
            #expect(entry.age(at: stored + 20) == 30)
            #expect(entry.facts.date == stored - 10 && entry.facts.age == 5 && entry.facts.maxAge == .valid(60))
        }
        // A 304 replaces Cache-Control, Date and Age: what the entry says follows the new fields.
        entry.update(from: [
            HTTPHeader(name: "Cache-Control", value: "max-age=300"), HTTPHeader(name: "Date", value: HTTPDate.format(stored - 100)),
            HTTPHeader(name: "Age", value: "7"),
        ])
        #expect(entry.freshnessLifetime == 300)
        #expect(entry.age(at: stored) == 100)
        #expect(entry.facts.date == stored - 100 && entry.facts.age == 7)
        // The response time a 304 sets is read where it is (not kept with the fields): without a
        // Date, the apparent age is none, and the age is the time since the new response time.
        entry.headerNames = ["Cache-Control"]
        entry.headerValues = ["max-age=bad"]
        entry.responseTime = stored + 50
        #expect(entry.freshnessLifetime == 0)
        #expect(entry.facts.date == nil && entry.facts.age == nil && entry.facts.maxAge == .invalid)
        #expect(entry.age(at: stored + 60) == 60)
        // A copy shares the parse until one of them changes its fields.
        var copy = entry
        copy.headerValues = ["max-age=9"]
        #expect(copy.freshnessLifetime == 9 && entry.freshnessLifetime == 0)
    }
}
