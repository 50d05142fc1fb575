import Foundation
import PluginHost
import PluginSDK
import Testing

@testable import CachePlugin

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The cache tells URLs apart by their bytes: a URL with `é` precomposed and one with `e` +
/// U+0301 are equal as Swift strings, but go out as other bytes (other resources).
@Suite("cache plugin: keys by bytes")
struct CacheKeyBytesTests {
    static let precomposed = "http://cache.test/caf\u{E9}"
    static let decomposed = "http://cache.test/cafe\u{301}"

    @Test func keysOfNonASCIIURLsArePercentEncodedBytes() {
        #expect(Self.precomposed == Self.decomposed)
        #expect(CachePlugin.getKey(Self.precomposed) == "GET http://cache.test/caf%C3%A9")
        #expect(CachePlugin.getKey(Self.decomposed) == "GET http://cache.test/cafe%CC%81")
        #expect(CachePlugin.getKey("http://cache.test/plain?q=1") == "GET http://cache.test/plain?q=1")
    }

    /// The credentials message a partition is the HMAC of: the fields of `credentialHeaders`, in
    /// its order whatever the fields' order, names in any case, repeated fields in field order.
    @Test func theCredentialsMessageFollowsTheCredentialHeadersOrder() {
        #expect(CachePlugin.credentialHeaders == ["authorization", "cookie", "proxy-authorization"])
        let fields = [
            HTTPHeader(name: "Proxy-Authorization", value: "p"), HTTPHeader(name: "Accept", value: "x"),
            HTTPHeader(name: "Cookie", value: "c1"), HTTPHeader(name: "AUTHORIZATION", value: "a"), HTTPHeader(name: "cookie", value: "c2"),
        ]
        #expect(CachePlugin.credentials(of: fields) == "authorization\0a\ncookie\0c1\ncookie\0c2\nproxy-authorization\0p\n")
        #expect(CachePlugin.credentials(of: [HTTPHeader(name: "Accept", value: "x")]).isEmpty)
    }

    @Test func aURLOfOtherBytesIsNotServedAnotherURLsEntry() async throws {
        // The origin answers each URL with its own bytes, cacheable for a minute; an interceptor
        // before the cache points the request at one of the two URLs.
        let transport = StubTransport { request in
            .networkResponseWithHeaders(200, ["Cache-Control": "max-age=60"], Data((request.url?.absoluteString ?? "").utf8))
        }
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        let provider = Provider<KeyTarget>(transport: transport, interceptors: [URLSetter(), cache], services: services)
        var bodies: [String] = []
        var verdicts: [String?] = []
        for url in [Self.precomposed, Self.decomposed, Self.decomposed, Self.precomposed] {
            let response = try await provider.request(KeyTarget(url: url)).value
            bodies.append(String(decoding: response.data, as: UTF8.self))
            verdicts.append(response.response?.value(forHTTPHeaderField: "X-Cache"))
        }
        #expect(verdicts == ["miss", "miss", "hit", "hit"])
        #expect(bodies[0] == bodies[3] && bodies[1] == bodies[2] && bodies[0] != bodies[1])
        #expect(bodies[0].hasSuffix("caf%C3%A9") && bodies[1].hasSuffix("cafe%CC%81"))
    }
}

/// Points each request at its target's `url` option (as a plugin rewriting URLs would).
private struct URLSetter: Interceptor {
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        if let url = context.target.pluginOptions["url"] { try request.setURL(url) }
        return .proceed
    }
}

/// A GET whose URL the ``URLSetter`` sets.
private struct KeyTarget: TargetType {
    let url: String
    var baseURL: URL { URL(string: "http://cache.test")! }
    var path: String { "start" }
    var method: HTTPMethod { .get }
    var pluginOptions: [String: String] { ["url": url] }
}
