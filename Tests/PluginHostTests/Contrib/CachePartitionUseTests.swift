import Foundation
import Testing

@testable import CachePlugin

/// When each partition of the cache store was last used (the first key of eviction): the shared
/// partition and the one marked last are kept apart from the table, and read as if they were in it.
@Suite("Cache partition use")
struct CachePartitionUseTests {
    let alice = String(repeating: "a", count: 32)
    let bob = String(repeating: "b", count: 32)

    @Test func keysMarkTheirPartitions() {
        var use = PartitionUse()
        use.mark(key: "GET http://127.0.0.1/x", 1)
        use.mark(key: alice + " GET http://127.0.0.1/x", 2)
        use.mark(key: bob + " GET http://127.0.0.1/y", 3)
        use.mark(key: alice + " GET http://127.0.0.1/z", 4)
        use.mark(key: "GET http://127.0.0.1/y", 5)
        #expect(use[CacheStore.shared] == 5)
        #expect(use[alice] == 4)
        #expect(use[bob] == 3)
        #expect(use["c"] == 0)
        // A key without a space, or with GET before it, is shared as `partition(ofKey:)` says.
        use.mark(key: "nospace", 6)
        #expect(use[CacheStore.shared] == 6)
        // A partition whose name the last one's begins with is another partition.
        use.mark(key: alice + "x GET http://127.0.0.1/x", 7)
        #expect(use[alice + "x"] == 7)
        #expect(use[alice] == 4)
    }

    @Test func aRemovedPartitionIsNeverUsedAgainUntilMarked() {
        var use = PartitionUse()
        use.mark(key: alice + " GET http://127.0.0.1/x", 1)
        use.mark(key: bob + " GET http://127.0.0.1/x", 2)
        use.set(bob, nil)
        use.set(alice, nil)
        #expect(use[alice] == 0 && use[bob] == 0)
        use.mark(key: "GET http://127.0.0.1/x", 3)
        use.set(CacheStore.shared, nil)
        #expect(use[CacheStore.shared] == 0)
        use.set(bob, 9)
        #expect(use[bob] == 9)
        use.mark(key: bob + " GET http://127.0.0.1/x", 10)
        #expect(use[bob] == 10)
    }

    @Test func theRuleOfSharedKeys() {
        #expect(PartitionUse.isShared("GET http://127.0.0.1/"))
        #expect(!PartitionUse.isShared("GETX http://127.0.0.1/"))
        #expect(!PartitionUse.isShared("GE"))
        #expect(!PartitionUse.isShared(alice + " GET http://127.0.0.1/"))
        #expect(PartitionUse.key(alice + " GET /", isIn: alice))
        #expect(!PartitionUse.key(alice + "x GET /", isIn: alice))
        #expect(!PartitionUse.key(alice, isIn: alice))
        #expect(!PartitionUse.key(bob + " GET /", isIn: alice))
    }

    /// The readers eviction uses read what the subscript reads, from a key or an entry file name.
    @Test func keysAndFileNamesReadTheirPartitionsUse() {
        var use = PartitionUse()
        use.mark(key: alice + " GET http://127.0.0.1/x", 2)
        use.mark(key: bob + " GET http://127.0.0.1/y", 3)
        use.mark(key: "GET http://127.0.0.1/y", 5)
        for (partition, key) in [(CacheStore.shared, "GET http://127.0.0.1/z"), (alice, alice + " GET /"), (bob, bob + " GET /"), ("c", "c GET /")] {
            #expect(use.used(ofPartition: PartitionUse.partition(ofKey: key)) == use[partition], "\(key)")
            #expect(use.used(ofFile: CacheStore.fileName(key)) == use[partition], "\(key)")
            #expect(use.used(ofPartition: partition == CacheStore.shared ? nil : partition) == use[partition], "\(key)")
        }
        #expect(use.used(ofPartition: PartitionUse.partition(ofKey: alice + "x GET /")) == 0)
        #expect(use.used(ofFile: alice + "x-00.entry") == 0)
        // A name without `-` is shared, as `partition(ofFile:)` says.
        #expect(use.used(ofFile: "shared") == use[CacheStore.shared])
        #expect(PartitionUse.file(alice + "-ab.entry", isIn: alice))
        #expect(!PartitionUse.file(alice + "x-ab.entry", isIn: alice))
        #expect(!PartitionUse.file(alice, isIn: alice))
    }

    /// The entry evicted first is the one `min(by:)` over (partition use, entry use) found: the
    /// least recently used partition's least recently used entry, the first in the table's order
    /// on a tie.
    @Test func evictionTakesTheLeastRecentlyUsedPartitionsOldestEntry() {
        var use = PartitionUse()
        use.mark(key: alice + " GET /", 1)
        use.mark(key: bob + " GET /", 3)
        use.mark(key: "GET /", 2)
        let partitions = [alice + " ", bob + " ", ""]
        for round in 0..<50 {
            var table: [String: UInt64] = [:]
            for index in 0..<(1 + round % 9) {
                table[partitions[(index * 7 + round) % 3] + "GET http://127.0.0.1/\(index)"] = UInt64((index * 5 + round) % 4)
            }
            let rank = { (entry: (key: String, value: UInt64)) in (use[CacheStore.partition(ofKey: entry.key)], entry.value) }
            let expected = table.min { rank($0) < rank($1) }?.key
            let found = CacheStore.evictionIndex(table, use) { use, table, index in
                (use.used(ofPartition: PartitionUse.partition(ofKey: table.keys[index])), table.values[index])
            }.map {
                table.keys[$0]
            }
            #expect(found == expected, "round \(round)")
        }
        #expect(CacheStore.evictionIndex([String: UInt64](), use) { _, _, _ in (0, 0) } == nil)
    }

    /// An entry stored under `key`, with nothing in it.
    func entry(_ key: String) -> CacheEntry {
        CacheEntry(
            key: key, status: 200, headerNames: [], headerValues: [], body: [], requestTime: 0, responseTime: 0, vary: [:], ttl: nil,
            hasQuery: false)
    }

    /// A full store, in memory and on disk, evicts the least recently used partition's least
    /// recently used entry: here Alice's oldest, though the shared partition's oldest entry is
    /// older (a plain LRU would take that one).
    @Test func aFullStoreEvictsFromTheLeastRecentlyUsedPartition() throws {
        let (s1, a1, a2, s2) = (
            "GET http://127.0.0.1/1", alice + " GET http://127.0.0.1/1", alice + " GET http://127.0.0.1/2", "GET http://127.0.0.1/2"
        )
        let memory = try CacheStore(maxMemoryEntries: 3, maxMemoryBytes: 1 << 20, directory: nil, maxDiskBytes: 1 << 20)
        for key in [s1, a1, a2, s2] { memory.put(entry(key)) }
        #expect(memory.get(a1) == nil)
        #expect(memory.get(s1) != nil && memory.get(a2) != nil && memory.get(s2) != nil)

        let directory = NSTemporaryDirectory() + "cache-eviction-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = try #require(CacheStore.encode(entry(a1))).count
        let disk = try CacheStore(maxMemoryEntries: 1, maxMemoryBytes: 1 << 20, directory: directory, maxDiskBytes: 3 * size)
        for key in [s1, a1, a2, s2] { disk.put(entry(key)) }
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: directory))
        #expect(!files.contains(CacheStore.fileName(a1)))
        #expect(files.isSuperset(of: [s1, a2, s2].map(CacheStore.fileName)))
    }
}
