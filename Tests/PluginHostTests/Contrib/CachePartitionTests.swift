import Foundation
import PluginHost
import PluginSDK
import Testing

/// Adds `Authorization` inside the cache: after its lookup, before the request is sent.
private struct LateAuthorization: Interceptor {
    var name: String { "late-authorization" }
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.setHeader("Authorization", "Bearer added-late")
        return .proceed
    }
}

/// The cache keeps each set of credentials' responses in its own partition.
@Suite("cache plugin: partitions by credential")
struct CachePartitionTests {
    typealias Answer = (status: Int, cache: String?, auth: String?, count: Int?)

    func get(_ provider: Provider<Bin>, _ target: Bin) async throws -> Answer {
        let response = try await provider.request(target).value
        let json = try? response.mapJSON()
        return (response.statusCode, response.value(forHTTPHeaderField: "X-Cache"), json?["auth"]?.stringValue, json?["count"]?.intValue)
    }

    func target(
        _ key: String, _ cacheControl: String, token: String?, options: [String: String] = [:], etag: String? = nil, quiet: Bool = false
    ) throws -> Bin {
        var headers = ["Cache-Control": cacheControl]
        headers["Vary"] = etag != nil ? "Accept" : "Authorization"
        var bin = try counted(key, headers: headers, options: options, requestHeaders: token.map { ["Authorization": "Bearer \($0)"] })
        if case .requestParameters(var parameters, let encoding) = bin.task {
            if let etag { parameters["etag"] = etag }
            if quiet { parameters["quiet"] = "1" }
            bin.task = .requestParameters(parameters: parameters, encoding: encoding)
        }
        return bin
    }

    @Test func theExampleOrderCachesPerToken() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.exampleManifestProvider(logger: ["level": "off"])
        provider.services.setValue("token-one", forKey: "access_token")
        provider.services.setValue("fixture-signing-secret", forKey: "signing_secret")
        let key = counterKey()
        let target = try counted(key, headers: ["Cache-Control": "max-age=60"])
        let first = try await get(provider, target)
        let second = try await get(provider, target)
        #expect(first.cache == "miss")
        #expect(second.cache == "hit")
        #expect(second.auth == "Bearer token-one")
        #expect(try await serverHits(key) == 1)
        provider.services.setValue("token-two", forKey: "access_token")
        let third = try await get(provider, target)
        #expect(third.cache == "miss")
        #expect(third.auth == "Bearer token-two")
        #expect(try await serverHits(key) == 2)
    }

    @Test func anotherTokenNeverSeesAPrivateEntryButAPublicOneIsShared() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let privateKey = counterKey()
        _ = try await get(provider, try target(privateKey, "max-age=60", token: "alice"))
        let bob = try await get(provider, try target(privateKey, "max-age=60", token: "bob"))
        #expect(bob.cache == "miss")
        #expect(bob.auth == "Bearer bob")
        let anonymous = try await get(provider, try target(privateKey, "max-age=60", token: nil))
        #expect(anonymous.cache == "miss")
        #expect(try await get(provider, try target(privateKey, "max-age=60", token: "alice")).auth == "Bearer alice")
        #expect(try await serverHits(privateKey) == 3)

        let publicKey = counterKey()
        _ = try await get(
            provider, try counted(publicKey, headers: ["Cache-Control": "public, max-age=60"], requestHeaders: ["Authorization": "Bearer alice"]))
        let shared = try await get(
            provider, try counted(publicKey, headers: ["Cache-Control": "public, max-age=60"], requestHeaders: ["Authorization": "Bearer bob"]))
        #expect(shared.cache == "hit")
        #expect(try await get(provider, try counted(publicKey, headers: ["Cache-Control": "public, max-age=60"])).cache == "hit")
        #expect(try await serverHits(publicKey) == 1)
    }

    /// `public` and `private` together: the more restrictive wins (RFC 9111 §4.2.1's rule for
    /// conflicting directives), and the answer stays in its user's partition. It was stored
    /// shared, and served to another user and to requests without credentials.
    @Test func privateWinsOverPublic() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        let both = ["Cache-Control": "public, private, max-age=60"]
        _ = try await get(provider, try counted(key, headers: both, requestHeaders: ["Authorization": "Bearer alice"]))
        let bob = try await get(provider, try counted(key, headers: both, requestHeaders: ["Authorization": "Bearer bob"]))
        #expect(bob.cache == "miss")
        #expect(try await get(provider, try counted(key, headers: both)).cache == "miss")
        #expect(try await get(provider, try counted(key, headers: both, requestHeaders: ["Authorization": "Bearer alice"])).cache == "hit")
        #expect(try await serverHits(key) == 3)
        // A qualified `private="Set-Cookie"` (those fields are not stored) leaves it shared.
        let qualified = counterKey()
        let listed = ["Cache-Control": "public, private=\"Set-Cookie\", max-age=60"]
        _ = try await get(provider, try counted(qualified, headers: listed, requestHeaders: ["Authorization": "Bearer alice"]))
        #expect(try await get(provider, try counted(qualified, headers: listed, requestHeaders: ["Authorization": "Bearer bob"])).cache == "hit")
    }

    @Test func theDiskStoreHoldsNoCredentialBytesAndKeepsPartitionsAcrossRestarts() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let directory = f.root + "/cache"
        let provider = try f.provider([("cache", ["directory": directory])])
        let key = counterKey()
        // quiet: the fixture does not echo the credentials in the body (a body is stored as it came).
        var bin = try target(key, "max-age=60", token: "disk-secret-token-9f1", quiet: true)
        bin.headers?["Cookie"] = "session=cookie-secret-77a"
        _ = try await get(provider, bin)
        #expect(try await get(provider, bin).cache == "hit")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(files.contains("partition.key"))
        #expect(files.contains { $0.hasSuffix(".entry") && !$0.hasPrefix("shared-") })
        for name in files {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
            #expect(bytes.range(of: Data("disk-secret-token-9f1".utf8)) == nil, "\(name) holds the token")
            #expect(bytes.range(of: Data("cookie-secret-77a".utf8)) == nil, "\(name) holds the cookie")
        }
        let restarted = try f.provider([("cache", ["directory": directory])])
        #expect(try await get(restarted, bin).cache == "hit")
        var other = bin
        other.headers?["Cookie"] = "session=someone-else"
        #expect(try await get(restarted, other).cache == "miss")
        #expect(try await serverHits(key) == 2)
    }

    @Test func aRevalidationStaysInItsPartition() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        let first = try await get(provider, try target(key, "no-cache", token: "alice", etag: "v1"))
        #expect(first.cache == "miss")
        let again = try await get(provider, try target(key, "no-cache", token: "alice", etag: "v1"))
        #expect(again.cache == "revalidated")
        #expect(again.auth == "Bearer alice")
        let bob = try await get(provider, try target(key, "no-cache", token: "bob", etag: "v1"))
        #expect(bob.cache == "miss")
        #expect(bob.status == 200)
        #expect(bob.auth == "Bearer bob")
        #expect(try await serverHits(key) == 3)
    }

    /// A logout is a `GET` or, more often, a `POST`: either purges (a `POST` used to be taken for
    /// an unsafe method alone, and the partition stayed).
    @Test(arguments: [HTTPMethod.get, .post])
    func aPurgeDropsOnlyItsOwnPartition(_ method: HTTPMethod) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        _ = try await get(provider, try target(key, "max-age=60", token: "alice"))
        _ = try await get(provider, try target(key, "max-age=60", token: "bob"))
        // The logout call itself goes to the server and is not stored.
        var call = try target(counterKey(), "max-age=60", token: "alice", options: ["cache": "purge"])
        call.method = method
        let logout = try await get(provider, call)
        #expect(logout.status == 200)
        #expect(logout.cache == nil)
        #expect(try await get(provider, try target(key, "max-age=60", token: "alice")).cache == "miss")
        #expect(try await get(provider, try target(key, "max-age=60", token: "bob")).cache == "hit")
        #expect(try await serverHits(key) == 3)
    }

    /// A purge without credentials drops nothing: the shared entries are everyone's (it dropped
    /// every shared entry, as if they were its partition).
    @Test func aPurgeWithoutCredentialsKeepsTheSharedEntries() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let key = counterKey()
        _ = try await get(provider, try target(key, "max-age=60", token: nil))
        _ = try await get(provider, try target(key, "max-age=60", token: "alice"))
        let logout = try await get(provider, try target(counterKey(), "max-age=60", token: nil, options: ["cache": "purge"]))
        #expect(logout.status == 200)
        #expect(try await get(provider, try target(key, "max-age=60", token: nil)).cache == "hit")
        #expect(try await get(provider, try target(key, "max-age=60", token: "alice")).cache == "hit")
        #expect(try await serverHits(key) == 2)
    }

    /// A URL's user information (`user:password@`, which the transport sends as `Authorization`,
    /// seen by no hook) is a credential: its responses go to its user's partition, and the
    /// password is in no key, in memory or on disk (the key was the URL as given).
    @Test func aURLsUserinfoIsACredentialAndInNoKey() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let directory = f.root + "/cache"
        let provider = try f.provider([("cache", ["directory": directory])])
        let key = counterKey()
        func asUser(_ userinfo: String) throws -> Bin {
            var parts = URLComponents(url: try TestServer.url(), resolvingAgainstBaseURL: false)!
            parts.percentEncodedUser = userinfo.split(separator: ":").first.map(String.init)
            parts.percentEncodedPassword = userinfo.split(separator: ":").last.map(String.init)
            var bin = try target(key, "max-age=60", token: nil, quiet: true)
            bin.baseURL = parts.url!
            return bin
        }
        #expect(try await get(provider, try asUser("u:pw-secret-5")).cache == "miss")
        #expect(try await get(provider, try asUser("u:pw-secret-5")).cache == "hit")
        #expect(try await get(provider, try asUser("u:another-6")).cache == "miss")
        #expect(try await get(provider, try target(key, "max-age=60", token: nil, quiet: true)).cache == "miss")
        #expect(try await serverHits(key) == 3)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(files.contains { $0.hasSuffix(".entry") })
        for name in files {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
            #expect(bytes.range(of: Data("pw-secret-5".utf8)) == nil, "\(name)")
            #expect(bytes.range(of: Data("another-6".utf8)) == nil, "\(name)")
        }
    }

    @Test func credentialsAddedInsideTheCacheAreNeverStored() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])], after: [LateAuthorization()])
        let key = counterKey()
        _ = try await get(provider, try target(key, "max-age=60", token: nil))
        let second = try await get(provider, try target(key, "max-age=60", token: nil))
        #expect(second.cache == "miss")
        #expect(second.auth == "Bearer added-late")
        #expect(try await serverHits(key) == 2)
    }

    /// The transport's cookie jar adds `Cookie` after every hook: the answer to a request it
    /// carried the session's cookie on is the session's, not stored shared (it was, and served to
    /// every request after, the session gone or not).
    @Test func aCookieTheTransportsJarSentIsACredential() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        var configuration = CurlTransport.Configuration()
        configuration.cookies = true
        let provider = try f.provider([("cache", [:])], transport: try CurlTransport(configuration: configuration))
        _ = try await provider.request(try Bin("cookies/set/sid/jar-session-1")).value
        let key = counterKey()
        let first = try await get(provider, try target(key, "max-age=60", token: nil))
        let second = try await get(provider, try target(key, "max-age=60", token: nil))
        #expect(first.cache == "miss" && second.cache == "miss")
        #expect(try await serverHits(key) == 2)
    }

    @Test func concurrentRequestsUnderTwoTokensNeverCross() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("cache", [:])])
        let keys = (0..<8).map { _ in counterKey() }
        let crossed = LockedCounter()
        let hits = LockedCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<1000 {
                if index >= 32 { try await group.next() }
                let token = index % 2 == 0 ? "even-token" : "odd-token"
                let bin = try target(keys[index % keys.count], "max-age=60", token: token)
                group.addTask {
                    let answer = try await get(provider, bin)
                    if answer.auth != "Bearer \(token)" { crossed.append("\(index): \(answer.auth ?? "none") for \(token)") }
                    if answer.cache == "hit" { hits.increment() }
                }
            }
            try await group.waitForAll()
        }
        #expect(crossed.log == [])
        #expect(hits.value >= 900)
    }
}
