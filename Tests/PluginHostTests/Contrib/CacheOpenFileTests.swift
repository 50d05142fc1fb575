import Foundation
import PluginSDK
import Testing

@testable import CachePlugin

/// The disk store keeps entry files open after a read (at most `CacheStore.maxOpenFiles`) and
/// reads them again through the kept descriptor only while their path still names the same,
/// unchanged file.
@Suite("Cache disk store: entry files kept open")
struct CacheOpenFileTests {
    let directory = NSTemporaryDirectory() + "pluginhost-cache-open-" + UUID().uuidString

    /// A store that keeps one entry in memory, so every other read comes from disk; its kept files
    /// checked by name every `nameCheckInterval` seconds (0: every read), else through their descriptors.
    func store(nameCheckInterval: Double = 1) throws -> CacheStore {
        try CacheStore(
            maxMemoryEntries: 1, maxMemoryBytes: 1 << 20, directory: directory, maxDiskBytes: 1 << 24, nameCheckInterval: nameCheckInterval)
    }

    /// Kept files checked by name on every read, and only through their descriptors.
    static let checks: [Double] = [0, 3600]

    func entry(_ key: String, _ body: String) -> CacheEntry {
        CacheEntry(
            key: key, status: 200, headerNames: ["Cache-Control"], headerValues: ["max-age=60"], body: Array(body.utf8),
            requestTime: 1_795_331_982, responseTime: 1_795_331_983, vary: [:], ttl: nil, hasQuery: false)
    }

    func path(_ key: String) -> String { directory + "/" + CacheStore.fileName(key) }

    /// How many of this process's descriptors are open on files of this test's directory.
    func descriptorsOnDirectory() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter { fd in
            ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd)) ?? "").hasPrefix(directory + "/")
        }.count
    }

    /// Reads `key` from disk: another key is read first, so `key` is not the one in memory.
    func fromDisk(_ store: CacheStore, _ key: String, other: String) -> String? {
        _ = store.get(other)
        return store.get(key).map { String(decoding: $0.body, as: UTF8.self) }
    }

    static let one = "GET http://a.test/1"
    static let two = "GET http://a.test/2"

    /// `one` as a disk hit reads it now (its file kept open after the first such read).
    func readOne(_ store: CacheStore) -> String? { fromDisk(store, Self.one, other: Self.two) }

    /// A store holding `one` ("one") and `two`, `one` read once from disk (so its file is kept open).
    func storeWithOneReadFromDisk(nameCheckInterval: Double = 1) throws -> CacheStore {
        let store = try store(nameCheckInterval: nameCheckInterval)
        store.put(entry(Self.one, "one"))
        store.put(entry(Self.two, "two"))
        #expect(readOne(store) == "one")
        #expect(store.openFileCount >= 1)
        return store
    }

    @Test(arguments: checks) func aFileReplacedByAnotherWriterIsReadAnew(nameCheckInterval: Double) throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reader = try storeWithOneReadFromDisk(nameCheckInterval: nameCheckInterval)
        // Another store on the directory (another process, say) replaces the file by rename.
        let writer = try store()
        writer.put(entry(Self.one, "one, newer"))
        #expect(readOne(reader) == "one, newer")
    }

    @Test(arguments: checks) func aRemovedFileIsAMissNotReadThroughTheKeptDescriptor(nameCheckInterval: Double) throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reader = try storeWithOneReadFromDisk(nameCheckInterval: nameCheckInterval)
        try FileManager.default.removeItem(atPath: path(Self.one))
        #expect(readOne(reader) == nil)
        // A symbolic link put in its place (to a good entry file) is not followed either.
        reader.put(entry(Self.one, "one again"))
        #expect(readOne(reader) == "one again")
        let copy = directory + "/elsewhere"
        try FileManager.default.copyItem(atPath: path(Self.one), toPath: copy)
        try FileManager.default.removeItem(atPath: path(Self.one))
        try FileManager.default.createSymbolicLink(atPath: path(Self.one), withDestinationPath: copy)
        #expect(readOne(reader) == nil)
    }

    @Test(arguments: checks) func aFileChangedInPlaceIsCheckedAgain(nameCheckInterval: Double) throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let reader = try storeWithOneReadFromDisk(nameCheckInterval: nameCheckInterval)
        // One byte of the body flipped in place: same file, same size; its digest no longer matches.
        let handle = try #require(FileHandle(forUpdatingAtPath: path(Self.one)))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size - 1)
        try handle.write(contentsOf: Data([UInt8(ascii: "X")]))
        try handle.close()
        #expect(readOne(reader) == nil)
        // A miss removes the file (as before).
        #expect(!FileManager.default.fileExists(atPath: path(Self.one)))
    }

    /// A file moved away under another name still has its link: it is read through its
    /// descriptor until the store checks its name again (at most a second later by default).
    @Test func aFileMovedAwayIsAMissOnceItsNameIsChecked() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let everyRead = try storeWithOneReadFromDisk(nameCheckInterval: 0)
        let between = try storeWithOneReadFromDisk(nameCheckInterval: 3600)
        #expect(readOne(between) == "one")
        try FileManager.default.moveItem(atPath: path(Self.one), toPath: directory + "/moved-away")
        #expect(readOne(everyRead) == nil)
        #expect(readOne(between) == "one")
    }

    @Test func keptFilesAreBoundedAndClosedWithTheStore() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            let reader = try store()
            let keys = (0..<(CacheStore.maxOpenFiles + 8)).map { "GET http://a.test/\($0)" }
            for key in keys { reader.put(entry(key, key)) }
            for key in keys { #expect(fromDisk(reader, key, other: key == keys[0] ? keys[1] : keys[0]) == key) }
            #expect(reader.openFileCount == CacheStore.maxOpenFiles)
            #expect(try descriptorsOnDirectory() == CacheStore.maxOpenFiles)
            // The files still read through their descriptors are the latest (the oldest went first).
            #expect(fromDisk(reader, keys.last!, other: keys[keys.count - 2]) == keys.last!)
        }
        #expect(try descriptorsOnDirectory() == 0)
    }

    /// A store opening its directory removes the temporary files writers abandoned, not one
    /// another writer sharing the directory is still writing (its rename failed, the entry lost).
    @Test func aTemporaryFileStillBeingWrittenIsLeft() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try store()
        let writing = directory + "/shared-x.entry.tmp-writing"
        let abandoned = directory + "/shared-y.entry.tmp-abandoned"
        for path in [writing, abandoned] { #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8))) }
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -CacheStore.abandonedAfter - 60)], ofItemAtPath: abandoned)
        _ = try store()
        #expect(FileManager.default.fileExists(atPath: writing))
        #expect(!FileManager.default.fileExists(atPath: abandoned))
    }

    /// Without a memory tier (`maxMemoryEntries` 0) every hit is read from the entry's file:
    /// nothing is kept in memory, and a file another writer replaced is what the next hit serves.
    @Test func withoutAMemoryTierEveryHitIsReadFromItsFile() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let diskOnly = try CacheStore(maxMemoryEntries: 0, maxMemoryBytes: 1 << 20, directory: directory, maxDiskBytes: 1 << 24, nameCheckInterval: 0)
        diskOnly.put(entry(Self.one, "one"))
        #expect(diskOnly.counts.memory == 0 && diskOnly.counts.disk == 1)
        #expect(diskOnly.get(Self.one).map { String(decoding: $0.body, as: UTF8.self) } == "one")
        #expect(diskOnly.get(Self.one).map { String(decoding: $0.body, as: UTF8.self) } == "one")
        #expect(diskOnly.counts.memory == 0)
        // Another store on the same directory replaces the file: the next hit reads the new one.
        let other = try store()
        other.put(entry(Self.one, "uno"))
        #expect(diskOnly.get(Self.one).map { String(decoding: $0.body, as: UTF8.self) } == "uno")
        #expect(diskOnly.counts.memory == 0)
    }

    /// An entry too large for the disk, stored in place of a smaller one, takes the smaller one
    /// off the disk too: the older answer never comes back from its file.
    @Test func anEntryTheDiskCannotHoldRemovesTheOneItReplaces() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let diskOnly = try CacheStore(maxMemoryEntries: 0, maxMemoryBytes: 1 << 20, directory: directory, maxDiskBytes: 4096, nameCheckInterval: 0)
        diskOnly.put(entry(Self.one, "v1"))
        #expect(diskOnly.get(Self.one).map { String(decoding: $0.body, as: UTF8.self) } == "v1")
        diskOnly.put(entry(Self.one, String(repeating: "2", count: 8192)))
        #expect(diskOnly.get(Self.one) == nil)
        #expect(diskOnly.counts.disk == 0)
        #expect(!FileManager.default.fileExists(atPath: path(Self.one)))
    }

    /// A disk hit whose metadata is the bytes of the last one decoded takes that entry's fields and
    /// what they say; other metadata is decoded and parsed anew.
    @Test func aHitOfTheSameMetadataKeepsItsParseAndOtherMetadataIsParsedAnew() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let diskOnly = try CacheStore(maxMemoryEntries: 0, maxMemoryBytes: 1 << 20, directory: directory, maxDiskBytes: 1 << 24, nameCheckInterval: 0)
        diskOnly.put(entry(Self.one, "one"))
        let first = try #require(diskOnly.get(Self.one))
        let second = try #require(diskOnly.get(Self.one))
        #expect(first.freshnessLifetime == 60 && second.freshnessLifetime == 60)
        #expect(first.parsed === second.parsed)
        // Another writer stores the entry with another max-age: read, decoded and parsed anew.
        var changed = entry(Self.one, "one")
        changed.headerValues = ["max-age=5"]
        try store().put(changed)
        let third = try #require(diskOnly.get(Self.one))
        #expect(third.freshnessLifetime == 5)
        #expect(third.parsed !== second.parsed)
        #expect(String(decoding: third.body, as: UTF8.self) == "one")
    }
}
