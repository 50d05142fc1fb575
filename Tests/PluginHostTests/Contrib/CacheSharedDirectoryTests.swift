import Foundation
import PluginSDK
import Testing

@testable import CachePlugin

/// Stores of processes that share one cache directory (two stores of this process here, each
/// opened before the other wrote): each reads what the other wrote, and together they stay within
/// `maxDiskBytes`, each evicting the least recently used files whoever wrote them.
@Suite("Cache disk store: a directory shared by processes")
struct CacheSharedDirectoryTests {
    let directory = NSTemporaryDirectory() + "pluginhost-cache-shared-" + UUID().uuidString

    func entry(_ key: String, bytes: Int = 1000) -> CacheEntry {
        CacheEntry(
            key: key, status: 200, headerNames: ["Cache-Control"], headerValues: ["max-age=60"], body: Array(repeating: 0x61, count: bytes),
            requestTime: 1_795_331_982, responseTime: 1_795_331_983, vary: [:], ttl: nil, hasQuery: false)
    }

    /// A store on the shared directory, its memory tier off so that every hit is read from disk.
    func store(maxDiskBytes: Int = 1 << 24, rescanInterval: Double = 10) throws -> CacheStore {
        try CacheStore(maxMemoryEntries: 0, maxMemoryBytes: 1 << 20, directory: directory, maxDiskBytes: maxDiskBytes, rescanInterval: rescanInterval)
    }

    /// The entry files in the directory and their total size.
    func filesOnDisk() throws -> (count: Int, bytes: Int) {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".entry") }
        let bytes = try names.reduce(0) { total, name in
            total + ((try FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size] as? NSNumber)?.intValue ?? 0)
        }
        return (names.count, bytes)
    }

    /// An entry another process wrote after this store opened the directory is read (it was a
    /// miss until this store opened the directory again) and counted from then on; a file that is
    /// not the key's entry is removed.
    @Test func anEntryAnotherProcessWroteIsRead() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reader = try store()
        let writer = try store()
        writer.put(entry("GET http://a.test/shared", bytes: 300))
        #expect(reader.counts.disk == 0)
        #expect(reader.get("GET http://a.test/shared")?.body.count == 300)
        #expect(reader.counts.disk == 1)
        #expect(reader.get("GET http://a.test/missing") == nil)
        // A file under the key's name that is no entry of it: a miss, and removed.
        let name = CacheStore.fileName("GET http://a.test/garbage")
        try Data("not an entry".utf8).write(to: URL(fileURLWithPath: directory + "/" + name))
        #expect(reader.get("GET http://a.test/garbage") == nil)
        #expect(!FileManager.default.fileExists(atPath: directory + "/" + name))
        #expect(reader.counts.disk == 1)
    }

    /// Two stores that each write three entries into a directory bounded to about three: the
    /// directory stays within `maxDiskBytes` (each counted only its own files, and the directory
    /// held twice the bound), the files evicted are the least recently used, whoever wrote them,
    /// and a file the other store removed is no longer counted.
    @Test func storesSharingADirectoryStayWithinItsBoundTogether() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = try {
            let probe = try store()
            probe.put(entry("GET http://a.test/probe"))
            defer { probe.remove("GET http://a.test/probe") }
            return probe.counts.diskBytes
        }()
        let bound = size * 3 + size / 2
        let first = try store(maxDiskBytes: bound, rescanInterval: 0)
        let second = try store(maxDiskBytes: bound, rescanInterval: 0)
        for index in 1...3 { first.put(entry("GET http://a.test/first/\(index)")) }
        for index in 1...3 { second.put(entry("GET http://a.test/second/\(index)")) }
        let disk = try filesOnDisk()
        #expect(disk.count == 3)
        #expect(disk.bytes <= bound)
        #expect(second.counts.diskBytes == disk.bytes)
        // The first store's files went first: the second store saw them as older than its own.
        for index in 1...3 {
            #expect(second.get("GET http://a.test/second/\(index)") != nil)
            #expect(first.get("GET http://a.test/first/\(index)") == nil)
        }
        // The first store's next write counts what the directory holds, its own removed files out.
        first.put(entry("GET http://a.test/first/4"))
        #expect(try filesOnDisk().bytes <= bound)
        #expect(first.counts.diskBytes == (try filesOnDisk().bytes))
        #expect(first.counts.disk == 3)
    }

    /// Between listings (every `rescanInterval` seconds), a store counts its own writes only; at
    /// the next listing it counts the others' too.
    @Test func theDirectoryIsListedAtMostOncePerInterval() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try store(rescanInterval: 3600)
        let second = try store(rescanInterval: 0)
        second.put(entry("GET http://a.test/second"))
        first.put(entry("GET http://a.test/first"))
        #expect(first.counts.disk == 1)
        let relisting = try store(rescanInterval: 3600)
        #expect(relisting.counts.disk == 2)
        second.put(entry("GET http://a.test/second/2"))
        #expect(second.counts.disk == 3)
    }
}
