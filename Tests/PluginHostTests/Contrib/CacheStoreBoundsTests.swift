import Foundation
import PluginSDK
import Testing

@testable import CachePlugin

/// The store's memory stays within its bounds whatever is put in it or looked up.
@Suite("Cache store: bounds")
struct CacheStoreBoundsTests {
    func entry(_ key: String, bytes: Int) -> CacheEntry {
        CacheEntry(
            key: key, status: 200, headerNames: ["Cache-Control"], headerValues: ["max-age=60"], body: Array(repeating: 0x61, count: bytes),
            requestTime: 1_795_331_982, responseTime: 1_795_331_983, vary: [:], ttl: nil, hasQuery: false)
    }

    /// One entry over `maxMemoryBytes` is not kept in memory: it evicted every other entry, stayed,
    /// and passed the bound by all its size. With a directory it is kept on disk, and a disk hit
    /// evicts nothing either.
    @Test(arguments: [false, true])
    func anEntryOverTheMemoryBudgetEvictsNothing(onDisk: Bool) throws {
        let directory = NSTemporaryDirectory() + "pluginhost-cache-bounds-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try CacheStore(maxMemoryEntries: 10, maxMemoryBytes: 4096, directory: onDisk ? directory : nil, maxDiskBytes: 1 << 24)
        store.put(entry("GET http://a.test/a", bytes: 100))
        store.put(entry("GET http://a.test/b", bytes: 100))
        store.put(entry("GET http://a.test/big", bytes: 100_000))
        #expect(store.counts.memory == 2)
        #expect(store.get("GET http://a.test/a")?.body.count == 100)
        #expect(store.get("GET http://a.test/b")?.body.count == 100)
        #expect(store.get("GET http://a.test/big")?.body.count == (onDisk ? 100_000 : nil))
        #expect(store.counts.memory == 2)
        #expect(store.counts.disk == (onDisk ? 3 : 0))
        // A smaller entry under the key replaces the big one's place; a big one replaces a small one's.
        store.put(entry("GET http://a.test/big", bytes: 10))
        #expect(store.counts.memory == 3)
        store.put(entry("GET http://a.test/a", bytes: 100_000))
        #expect(store.counts.memory == 2)
        #expect(store.get("GET http://a.test/a")?.body.count == (onDisk ? 100_000 : nil))
    }

    /// Every lookup marks its partition used, a miss too: a partition per credentials seen (a
    /// Digest answer's change with each request) grew the table for good. The partitions holding
    /// no entry are forgotten once the table passes twice the entries kept.
    @Test func partitionsWithoutEntriesAreForgotten() throws {
        let store = try CacheStore(maxMemoryEntries: 10, maxMemoryBytes: 1 << 20, directory: nil, maxDiskBytes: 0)
        let kept = String(repeating: "k", count: 32)
        store.put(entry(kept + " GET http://a.test/", bytes: 10))
        for index in 0..<10_000 {
            _ = store.get(SHA256.hex(Array("\(index)".utf8)) + " GET http://a.test/")
        }
        #expect(store.rememberedPartitions <= 2 * 1 + 64 + 1)
        #expect(store.get(kept + " GET http://a.test/")?.body.count == 10)
    }

    /// An entry read from memory is in use on disk too: a full disk evicts the file read least
    /// lately, not the hot entry whose file was written first (read from memory, its file was
    /// never touched, and a restart or a sibling process then missed it). The file's modification
    /// time carries the use to other processes.
    @Test func aMemoryHitKeepsItsFileOnDisk() throws {
        let directory = NSTemporaryDirectory() + "pluginhost-cache-bounds-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = try #require(CacheStore.encode(entry("GET http://a.test/a", bytes: 1000))).count
        let store = try CacheStore(maxMemoryEntries: 10, maxMemoryBytes: 1 << 20, directory: directory, maxDiskBytes: 2 * size + size / 2)
        store.put(entry("GET http://a.test/a", bytes: 1000))
        store.put(entry("GET http://a.test/b", bytes: 1000))
        #expect(store.get("GET http://a.test/a") != nil)
        store.put(entry("GET http://a.test/c", bytes: 1000))
        #expect(store.counts.disk == 2)
        let files = try #require(CacheStore.entryFiles(in: directory)).map(\.name)
        #expect(Set(files) == Set(["GET http://a.test/a", "GET http://a.test/c"].map(CacheStore.fileName)))
        let restarted = try CacheStore(maxMemoryEntries: 10, maxMemoryBytes: 1 << 20, directory: directory, maxDiskBytes: 2 * size + size / 2)
        #expect(restarted.get("GET http://a.test/a")?.body.count == 1000)
        #expect(restarted.get("GET http://a.test/b") == nil)
    }
}
