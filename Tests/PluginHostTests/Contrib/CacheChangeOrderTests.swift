import Foundation
import PluginHost
import PluginSDK
import Testing

@testable import CachePlugin

/// Changes of the cache made of several store calls do not interleave.
@Suite("Cache changes: one at a time")
struct CacheChangeOrderTests {
    func variant(_ base: String, accept: String) -> CacheEntry {
        CacheEntry(
            key: base, status: 200, headerNames: ["Cache-Control", "Vary"], headerValues: ["max-age=60", "Accept"], body: Array(accept.utf8),
            requestTime: 1_795_331_982, responseTime: 1_795_331_983, vary: ["accept": accept], ttl: nil, hasQuery: false)
    }

    /// Two variants of one URL stored at once are both listed by its index: each read the index,
    /// and the second write dropped the first's variant.
    @Test func twoVariantsStoredAtOnceAreBothKept() throws {
        let services = PluginServices()
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        var lost = 0
        for index in 0..<2_000 {
            let base = "GET http://variants.test/\(index)"
            // Short: two threads of the pool for a few microseconds each round.
            DispatchQueue.concurrentPerform(iterations: 2) { side in
                cache.put(variant(base, accept: side == 0 ? "text/a" : "text/b"), base: base)
            }
            if cache.store.get(base)?.headerNames.count != 2 { lost += 1 }
        }
        #expect(lost == 0, "\(lost) of 2,000 indexes lost a variant")
    }
}
