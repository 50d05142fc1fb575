import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Sends the request elsewhere after the cache has looked at it: plays a server that fails.
struct Breaker: Interceptor {
    let to: String
    let from: Int
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        if context.target.pluginOptions["break"] == "yes" { try request.setURL(to) }
        return .proceed
    }
}

@Suite("cache plugin (loaded from its bundle)")
struct CachePluginTests {
    func get(_ provider: Provider<Bin>, _ target: Bin) async throws -> (status: Int, cache: String?, body: JSONValue?) {
        let response = try await provider.request(target).value
        return (response.statusCode, response.value(forHTTPHeaderField: "X-Cache"), try? response.mapJSON())
    }

    @Test func freshHitSkipsTheNetwork() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        let target = try counted(key, headers: ["Cache-Control": "max-age=60"])
        let first = try await get(provider, target)
        let second = try await get(provider, target)
        #expect(first.cache == "miss")
        #expect(second.cache == "hit")
        #expect(second.body == first.body)
        #expect(try await serverHits(key) == 1)
    }

    @Test func httpbinCacheNSecondsIsPublicAndFresh() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let target = try Bin("cache/60", task: .requestParameters(parameters: ["k": counterKey()], encoding: URLEncoding.default))
        let first = try await get(provider, target)
        let second = try await get(provider, target)
        #expect([first.cache, second.cache] == ["miss", "hit"])
        #expect(first.body?["headers"] == second.body?["headers"])
    }

    /// A response the transport reached through a redirect answers another URL: the loaded
    /// cache (through ABI 1.6's `result_redirected`) stores nothing for the URL asked, with
    /// either transport, while the redirect's target itself is stored as usual.
    @Test(arguments: TransportKind.allCases) func aRedirectedResponseIsNotStoredUnderTheURLAsked(_ kind: TransportKind) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])], transport: kind.make())
        let key = counterKey()
        let target = try Bin(
            "redirect-to", task: .requestParameters(parameters: ["url": "/cache/60?k=\(key)", "status_code": 302], encoding: URLEncoding.default))
        let first = try await get(provider, target)
        let second = try await get(provider, target)
        #expect(first.status == 200)
        #expect([first.cache, second.cache] == ["miss", "miss"])
        let direct = try Bin("cache/60", task: .requestParameters(parameters: ["k": key], encoding: URLEncoding.default))
        #expect([try await get(provider, direct).cache, try await get(provider, direct).cache] == ["miss", "hit"])
    }

    @Test func noStoreIsNeverStored() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        let target = try counted(key, headers: ["Cache-Control": "no-store, max-age=60"])
        _ = try await get(provider, target)
        #expect(try await get(provider, target).cache == "miss")
        #expect(try await serverHits(key) == 2)
    }

    @Test func lastModifiedRevalidatesWith304() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let target = try Bin("cache", task: .requestParameters(parameters: ["k": counterKey()], encoding: URLEncoding.default))
        let first = try await get(provider, target)
        let second = try await get(provider, target)
        #expect(first.cache == "miss")
        #expect(second.cache == "revalidated")
        #expect(second.status == 200)
        #expect(second.body == first.body)
    }

    @Test func etagRevalidatesWithIfNoneMatch() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let etag = counterKey()
        let target = try Bin("etag/\(etag)")
        let first = try await provider.request(target).value
        let second = try await provider.request(target).value
        #expect(first.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(second.value(forHTTPHeaderField: "X-Cache") == "revalidated")
        #expect(second.data == first.data)
        #expect(second.value(forHTTPHeaderField: "ETag") == first.value(forHTTPHeaderField: "ETag"))
        #expect(second.request?.value(forHTTPHeaderField: "If-None-Match") == first.value(forHTTPHeaderField: "ETag"))
    }

    @Test func noCacheResponsesAreAlwaysRevalidated() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let target = try Bin(
            "response-headers",
            task: .requestParameters(
                parameters: ["Cache-Control": "no-cache, max-age=600", "ETag": "\"v1\"", "k": counterKey()], encoding: URLEncoding.default))
        _ = try await get(provider, target)
        let second = try await provider.request(target).value
        #expect(second.request?.value(forHTTPHeaderField: "If-None-Match") == "\"v1\"")
        #expect(second.value(forHTTPHeaderField: "X-Cache") == "miss")
    }

    @Test func heuristicFreshnessOnlyWithoutAQuery() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let plain = try Bin("fixture/lastmod/\(counterKey())")
        _ = try await get(provider, plain)
        #expect(try await get(provider, plain).cache == "hit")
        let key = counterKey()
        let withQuery = try Bin("fixture/lastmod/\(key)", task: .requestParameters(parameters: ["q": 1], encoding: URLEncoding.default))
        _ = try await get(provider, withQuery)
        #expect(try await get(provider, withQuery).cache == "miss")
    }

    @Test func requestDirectives() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        let stored = try counted(key, headers: ["Cache-Control": "max-age=3600"])
        _ = try await get(provider, stored)
        func with(_ directive: String) throws -> Bin {
            try counted(key, headers: ["Cache-Control": "max-age=3600"], requestHeaders: ["Cache-Control": directive])
        }
        #expect(try await get(provider, try with("max-age=3600")).cache == "hit")
        #expect(try await get(provider, try with("min-fresh=1800")).cache == "hit")
        #expect(try await get(provider, try with("min-fresh=7200")).cache == "miss")
        #expect(try await get(provider, try with("no-cache")).cache == "miss")
        #expect(try await get(provider, try with("only-if-cached")).cache == "hit")
        let pragma = try counted(key, headers: ["Cache-Control": "max-age=3600"], requestHeaders: ["Pragma": "no-cache"])
        #expect(try await get(provider, pragma).cache == "miss")
        #expect(try await serverHits(key) == 4)
    }

    @Test func maxStaleAcceptsStaleEntries() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        _ = try await get(provider, try counted(key, headers: ["Cache-Control": "max-age=0"]))
        let stale = try counted(key, headers: ["Cache-Control": "max-age=0"], requestHeaders: ["Cache-Control": "max-stale=600"])
        #expect(try await get(provider, stale).cache == "hit")
        #expect(try await serverHits(key) == 1)
        let mustKey = counterKey()
        _ = try await get(provider, try counted(mustKey, headers: ["Cache-Control": "max-age=0, must-revalidate"]))
        let refused = try counted(mustKey, headers: ["Cache-Control": "max-age=0, must-revalidate"], requestHeaders: ["Cache-Control": "max-stale"])
        #expect(try await get(provider, refused).cache == "miss")
    }

    @Test func onlyIfCachedWithNothingStoredIs504() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let transport = CountingTransport()
        let provider = try f.provider([("cache", [:])], transport: transport)
        let response = try await provider.request(try Bin("get", options: ["cache": "only-if-cached"])).value
        #expect(response.statusCode == 504)
        #expect(response.value(forHTTPHeaderField: "X-Cache") == "miss")
        #expect(transport.count == 0)
    }

    @Test func varyIsHonouredAndVaryStarIsNeverStored() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        func lang(_ value: String) throws -> Bin {
            try counted(key, headers: ["Cache-Control": "max-age=60", "Vary": "X-Lang"], requestHeaders: ["X-Lang": value])
        }
        _ = try await get(provider, try lang("en"))
        #expect(try await get(provider, try lang("en")).cache == "hit")
        #expect(try await get(provider, try lang("fr")).cache == "miss")
        let star = counterKey()
        let target = try counted(star, headers: ["Cache-Control": "max-age=60", "Vary": "*"])
        _ = try await get(provider, target)
        #expect(try await get(provider, target).cache == "miss")
    }

    @Test func unsafeMethodsInvalidate() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        let target = try counted(key, headers: ["Cache-Control": "max-age=60"])
        _ = try await get(provider, target)
        #expect(try await get(provider, target).cache == "hit")
        var post = target
        post.method = .post
        _ = try await provider.request(post).value
        #expect(try await get(provider, target).cache == "miss")
    }

    /// A target's TTL caches a 2xx whatever its headers say but `no-store`: a response's
    /// `no-cache` too (every request went to the origin).
    @Test func aTTLOverridesAResponsesNoCache() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        let ttl = try counted(key, headers: ["Cache-Control": "no-cache"], options: ["cache": "60"])
        #expect(try await get(provider, ttl).cache == "miss")
        #expect(try await get(provider, ttl).cache == "hit")
        #expect(try await serverHits(key) == 1)
        // Without a TTL, no-cache has it validated every time.
        let plain = try counted(counterKey(), headers: ["Cache-Control": "no-cache, max-age=60"])
        _ = try await get(provider, plain)
        #expect(try await get(provider, plain).cache != "hit")
    }

    @Test func perTargetTTLAndNoStoreOptions() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        let ttl = try counted(key, options: ["cache": "60"])
        _ = try await get(provider, ttl)
        #expect(try await get(provider, ttl).cache == "hit")
        #expect(try await serverHits(key) == 1)
        let skip = try counted(counterKey(), headers: ["Cache-Control": "max-age=60"], options: ["cache": "no-store"])
        _ = try await get(provider, skip)
        #expect(try await get(provider, skip).cache == nil)
    }

    @Test func staleIfErrorServesStaleOnTransportErrorAnd5xx() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let closed = closedPortURL().absoluteString + "/down"
        let provider = try f.provider([("cache", ["staleIfError": 600])], after: [Breaker(to: closed, from: 0)])
        let key = counterKey()
        let good = try counted(key, headers: ["Cache-Control": "max-age=0"])
        let first = try await get(provider, good)
        var broken = good
        broken.pluginOptions = ["break": "yes"]
        let stale = try await provider.request(broken).value
        #expect(stale.value(forHTTPHeaderField: "X-Cache") == "stale")
        #expect(stale.value(forHTTPHeaderField: "Warning") == "110 - \"Response is Stale\"")
        #expect(try stale.mapJSON() == first.body)
        let serverError = try f.provider(
            [("cache", ["staleIfError": 600])],
            after: [Breaker(to: try TestServer.url().absoluteString + "/status/503", from: 0)])
        _ = try await get(serverError, good)
        #expect(try await serverError.request(broken).value.value(forHTTPHeaderField: "X-Cache") == "stale")
        let strict = try f.provider([("cache", [:])], after: [Breaker(to: closed, from: 0)])
        _ = try await get(strict, good)
        guard case .failure(.underlying(let failure, _)) = await strict.request(broken).result else {
            Issue.record("stale served without staleIfError")
            return
        }
        #expect(failure.kind == .cannotConnect)
    }

    @Test func authorizedResponsesArePartitionedByDefaultAndRefusedOnRequest() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let authed = try counted(counterKey(), headers: ["Cache-Control": "max-age=60"], requestHeaders: ["Authorization": "Bearer x"])
        _ = try await get(provider, authed)
        #expect(try await get(provider, authed).cache == "hit")
        let refusing = try f.provider([("cache", ["authorized": "refuse"])])
        let privateKey = counterKey()
        let refused = try counted(privateKey, headers: ["Cache-Control": "max-age=60"], requestHeaders: ["Authorization": "Bearer x"])
        _ = try await get(refusing, refused)
        #expect(try await get(refusing, refused).cache == "miss")
        #expect(try await serverHits(privateKey) == 2)
        let publicTarget = try counted(counterKey(), headers: ["Cache-Control": "public, max-age=60"], requestHeaders: ["Authorization": "Bearer x"])
        _ = try await get(refusing, publicTarget)
        #expect(try await get(refusing, publicTarget).cache == "hit")
    }

    @Test func diskStoreSurvivesANewInstanceWithPrivateModes() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let directory = f.root + "/cache"
        let key = counterKey()
        let target = try counted(key, headers: ["Cache-Control": "max-age=60"])
        _ = try await get(try f.provider([("cache", ["directory": directory])]), target)
        let fresh = try f.provider([("cache", ["directory": directory])])
        #expect(try await get(fresh, target).cache == "hit")
        #expect(try await serverHits(key) == 1)
        var info = stat()
        #expect(stat(directory, &info) == 0 && info.st_mode & 0o777 == 0o700)
        // One entry (shared: no credentials) and the secret that names partitions, both 0600.
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(files.count == 2 && files[0] == "partition.key" && files[1].hasPrefix("shared-") && files[1].hasSuffix(".entry"))
        for name in files { #expect(stat(directory + "/" + name, &info) == 0 && info.st_mode & 0o777 == 0o600) }
    }

    @Test func onDiskOnlyHitsAreServedFromTheDirectory() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let directory = f.root + "/cache"
        let provider = try f.provider([("cache", ["directory": directory, "maxMemoryEntries": 0])])
        let key = counterKey()
        let target = try counted(key, headers: ["Cache-Control": "max-age=60"])
        let first = try await get(provider, target)
        let second = try await get(provider, target)
        let third = try await get(provider, target)
        #expect([first.cache, second.cache, third.cache] == ["miss", "hit", "hit"])
        #expect(third.body == first.body)
        #expect(try await serverHits(key) == 1)
        let entries = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".entry") }
        #expect(entries.count == 1)
    }

    @Test func aCorruptedOrTruncatedEntryIsAMissAndIsReplaced() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let directory = f.root + "/cache"
        // Truncated, a body byte flipped, a metadata byte flipped (the digest covers both parts).
        for damage in ["truncate", "flip", "metadata"] {
            let key = counterKey()
            let target = try counted(key, headers: ["Cache-Control": "max-age=60"])
            _ = try await get(try f.provider([("cache", ["directory": directory])]), target)
            let file = try #require(
                try FileManager.default.contentsOfDirectory(atPath: directory)
                    .map { directory + "/" + $0 }.max {
                        (try? FileManager.default.attributesOfItem(atPath: $0)[.modificationDate] as? Date ?? .distantPast) ?? .distantPast
                            < (try? FileManager.default.attributesOfItem(atPath: $1)[.modificationDate] as? Date ?? .distantPast) ?? .distantPast
                    })
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
            switch damage {
            case "truncate": bytes.removeLast(5)
            case "flip": bytes[bytes.count - 2] ^= 0xff
            default:
                // `PHC2` · digest (32) · metadata length (4) · metadata · body: a byte near the
                // metadata's end (its freshness fields), which still decodes.
                let length = bytes[36..<40].reduce(0) { $0 << 8 | Int($1) }
                bytes[40 + length - 10] ^= 0x01
            }
            try Data(bytes).write(to: URL(fileURLWithPath: file))
            let fresh = try f.provider([("cache", ["directory": directory])])
            #expect(try await get(fresh, target).cache == "miss", "\(damage)")
            #expect(try await get(fresh, target).cache == "hit", "\(damage)")
            #expect(try await serverHits(key) == 2, "\(damage)")
            try FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test func diskSizeIsBoundedLeastRecentlyUsedFirst() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let directory = f.root + "/cache"
        let provider = try f.provider([("cache", ["directory": directory, "maxDiskBytes": 1500, "maxMemoryEntries": 1])])
        for _ in 0..<5 { _ = try await get(provider, try counted(counterKey(), headers: ["Cache-Control": "max-age=60"])) }
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        let total = try files.reduce(0) {
            $0 + ((try FileManager.default.attributesOfItem(atPath: directory + "/" + $1)[.size] as? NSNumber)?.intValue ?? 0)
        }
        #expect(total <= 1500)
        #expect(files.count >= 1 && files.count < 5)
    }

    @Test func memoryIsAnLRU() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", ["maxMemoryEntries": 2])])
        let a = try counted(counterKey(), headers: ["Cache-Control": "max-age=60"])
        let b = try counted(counterKey(), headers: ["Cache-Control": "max-age=60"])
        let c = try counted(counterKey(), headers: ["Cache-Control": "max-age=60"])
        _ = try await get(provider, a)
        _ = try await get(provider, b)
        #expect(try await get(provider, a).cache == "hit")
        _ = try await get(provider, c)  // evicts b, the least recently used
        #expect(try await get(provider, a).cache == "hit")
        #expect(try await get(provider, c).cache == "hit")
        #expect(try await get(provider, b).cache == "miss")
    }

    @Test func headIsServedFromAStoredGet() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        _ = try await get(provider, try counted(key, headers: ["Cache-Control": "max-age=60"]))
        let head = try await provider.request(try counted(key, headers: ["Cache-Control": "max-age=60"], method: .head)).value
        #expect(head.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(head.data.isEmpty)
    }
}
