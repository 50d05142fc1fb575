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
    /// miss until this store opened the directory again) and counted from then on. A file under
    /// the key's name that is not its entry (corrupt, or of another format) is a miss and is removed.
    @Test func anEntryAnotherProcessWroteIsRead() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reader = try store()
        let writer = try store()
        writer.put(entry("GET http://a.test/shared", bytes: 300))
        #expect(reader.counts.disk == 0)
        #expect(reader.get("GET http://a.test/shared")?.body.count == 300)
        #expect(reader.counts.disk == 1)
        #expect(reader.get("GET http://a.test/missing") == nil)
        let corrupt = CacheStore.fileName("GET http://a.test/corrupt")
        try Data(CacheStore.magic + Array("not an entry".utf8)).write(to: URL(fileURLWithPath: directory + "/" + corrupt))
        #expect(reader.get("GET http://a.test/corrupt") == nil)
        #expect(!FileManager.default.fileExists(atPath: directory + "/" + corrupt))
        let other = CacheStore.fileName("GET http://a.test/other-version")
        try Data("PHC9 another version's entry".utf8).write(to: URL(fileURLWithPath: directory + "/" + other))
        #expect(reader.get("GET http://a.test/other-version") == nil)
        #expect(!FileManager.default.fileExists(atPath: directory + "/" + other))
        #expect(reader.counts.disk == 1)
    }

    /// An entry file another user could have written (group or others may write it, or another
    /// user owns it) is not taken for the store's: a miss, and removed. (The directory is checked
    /// when the store opens it; a file planted while it was open to others, or after it was
    /// removed and made again by someone else, was served.)
    @Test func anEntryFileNotPrivateToTheUserIsAMiss() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let writer = try store()
        // Another user's file: only root can make one.
        let changes: [(String) -> Int32] = [{ chmod($0, 0o644) }, { chmod($0, 0o620) }] + (geteuid() == 0 ? [{ chown($0, 4242, 4242) }] : [])
        for (index, change) in changes.enumerated() {
            let key = "GET http://a.test/planted-\(index)"
            writer.put(entry(key, bytes: 300))
            let path = directory + "/" + CacheStore.fileName(key)
            #expect(try store().get(key)?.body.count == 300, "the file as written is read")
            #expect(change(path) == 0)
            #expect(try store().get(key) == nil, "\(index)")
            #expect(!FileManager.default.fileExists(atPath: path), "\(index)")
        }
    }

    /// Two stores that each write three entries into a directory bounded to about three: the
    /// directory stays within `maxDiskBytes` (each counted only its own files, and the directory
    /// held twice the bound). The files evicted are the least recently used: by this store's use
    /// where it used them (a file the other store wrote first, but this one read, outlives this
    /// one's own older file), else by when they were written.
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
        second.put(entry("GET http://a.test/second/1"))
        second.put(entry("GET http://a.test/second/2"))
        #expect(second.get("GET http://a.test/first/3") != nil)
        second.put(entry("GET http://a.test/second/3"))
        let disk = try filesOnDisk()
        #expect(disk.count == 3)
        #expect(disk.bytes <= bound)
        #expect(second.counts.diskBytes == disk.bytes)
        for (key, kept) in [("first/1", false), ("first/2", false), ("second/1", false), ("first/3", true), ("second/2", true), ("second/3", true)] {
            #expect(FileManager.default.fileExists(atPath: directory + "/" + CacheStore.fileName("GET http://a.test/" + key)) == kept, "\(key)")
        }
        // The first store's next write counts what the directory holds, the files removed by
        // the other counted out (it did not look them up since).
        #expect(first.counts.disk == 3)
        first.put(entry("GET http://a.test/first/4"))
        #expect(try filesOnDisk().bytes <= bound)
        #expect(first.counts.diskBytes == (try filesOnDisk().bytes))
        #expect(first.counts.disk == 3)
    }

    /// A listing counts a file another process rewrote at its new size; between listings (every
    /// `rescanInterval` seconds) a store counts only its own writes, and once the interval has
    /// passed its next write lists the directory again.
    @Test func theDirectoryIsListedOncePerInterval() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let watcher = try store(rescanInterval: 0.05)
        let other = try store(rescanInterval: 3600)
        other.put(entry("GET http://a.test/other", bytes: 100))
        watcher.put(entry("GET http://a.test/watcher", bytes: 100))
        let small = watcher.counts.diskBytes
        #expect(watcher.counts.disk == 1)
        try await Task.sleep(for: .milliseconds(200))
        watcher.put(entry("GET http://a.test/watcher/2", bytes: 100))
        #expect(watcher.counts.disk == 3)
        // Rewritten larger by the other store: counted at its size at the next listing.
        other.put(entry("GET http://a.test/other", bytes: 5000))
        try await Task.sleep(for: .milliseconds(200))
        watcher.put(entry("GET http://a.test/watcher/3", bytes: 100))
        #expect(watcher.counts.diskBytes == (try filesOnDisk().bytes))
        #expect(watcher.counts.diskBytes > 3 * small)
        // Removed by the other store: counted out.
        other.remove("GET http://a.test/other")
        try await Task.sleep(for: .milliseconds(200))
        watcher.put(entry("GET http://a.test/watcher/4", bytes: 100))
        #expect(watcher.counts.disk == 4)
        #expect(watcher.counts.diskBytes == (try filesOnDisk().bytes))
        // The other store, whose interval has not passed, counts only its own.
        #expect(other.counts.disk == 0)
    }

    /// A purge of a partition removes its files other processes wrote too: read by this store
    /// afterwards, they brought the purged responses back.
    @Test func aPurgedPartitionLeavesNoFileOfIt() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let purging = try store()
        let writer = try store()
        let partition = String(repeating: "b", count: 32)
        writer.put(entry(partition + " GET http://a.test/private"))
        writer.put(entry("GET http://a.test/public"))
        purging.removePartition(partition)
        #expect(purging.get(partition + " GET http://a.test/private") == nil)
        #expect(try filesOnDisk().count == 1)
        #expect(purging.get("GET http://a.test/public") != nil)
    }
}
