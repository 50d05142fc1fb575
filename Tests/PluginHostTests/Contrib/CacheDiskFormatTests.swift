import Foundation
import PluginSDK
import Testing

@testable import CachePlugin

/// The disk store's file format: `PHC2` · SHA-256 of the rest · metadata length · binary metadata · body.
@Suite("Cache disk format")
struct CacheDiskFormatTests {
    let directory = NSTemporaryDirectory() + "pluginhost-cache-format-" + UUID().uuidString

    func write(_ bytes: [UInt8]) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/" + UUID().uuidString + ".entry"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    let sample = CacheEntry(
        key: "p0123 GET https://api.example.test/items?q=ü", status: 203,
        headerNames: ["Cache-Control", "ETag", "Content-Type", "X-Empty"],
        headerValues: ["max-age=60, stale-while-revalidate=30", "W/\"v1\"", "application/json; charset=utf-8", ""],
        body: Array("{\"items\": [1, 2, 3]}".utf8), requestTime: 1_795_331_982.25, responseTime: 1_795_331_982.75,
        vary: ["accept-language": "de, en;q=0.5", "accept": "*/*"], ttl: 12.5, hasQuery: true)

    @Test func anEntryComesBackFieldForField() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let encoded = try #require(CacheStore.encode(sample))
        let read = try #require(CacheStore.read(try write(encoded)))
        #expect(read.key == sample.key && read.status == sample.status && read.body == sample.body)
        #expect(read.headerNames == sample.headerNames && read.headerValues == sample.headerValues)
        #expect(read.requestTime == sample.requestTime && read.responseTime == sample.responseTime)
        #expect(read.vary == sample.vary && read.ttl == 12.5 && read.hasQuery)
        var plain = sample
        plain.ttl = nil
        plain.hasQuery = false
        plain.body = []
        let plainEncoded = try #require(CacheStore.encode(plain))
        let second = try #require(CacheStore.read(try write(plainEncoded)))
        #expect(second.ttl == nil && !second.hasQuery && second.body.isEmpty)
    }

    /// Every way a file can be wrong is a miss (nil), never a crash or a wrong entry.
    @Test func malformedFilesAreRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let good = try #require(CacheStore.encode(sample))
        // The previous format's tag, a bad digest, a short file, an empty one.
        var oldTag = good
        oldTag[3] = UInt8(ascii: "1")
        var badDigest = good
        badDigest[10] ^= 0x80
        for bytes in [oldTag, badDigest, Array(good.prefix(39)), []] {
            #expect(CacheStore.read(try write(bytes)) == nil)
        }
        // A metadata length beyond the file, with a digest that matches (so only the parser refuses it).
        var payload = Array(good[36...])
        payload[0] = 0x7f
        #expect(CacheStore.read(try write(Array("PHC2".utf8) + SHA256.hash(payload) + payload)) == nil)
        // Metadata with a trailing byte, digest matching: refused (the parser must use it all).
        let metadata = EntryCoding.metadata(sample) + [0]
        let padded = EntryCoding.bigEndian(UInt64(metadata.count), width: 4) + metadata
        #expect(CacheStore.read(try write(Array("PHC2".utf8) + SHA256.hash(padded) + padded)) == nil)
        // A symbolic link to a good file is not followed.
        let target = try write(good)
        let link = directory + "/link.entry"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(CacheStore.read(target) != nil)
        #expect(CacheStore.read(link) == nil)
    }

    /// A string that is not UTF-8, in a file whose digest matches: refused, not repaired.
    @Test func aStoredStringThatIsNotUTF8IsRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var entry = sample
        entry.headerValues[3] = "\u{E9}"  // é: C3 A9, made C3 28 below (a lead byte and no continuation)
        var metadata = EntryCoding.metadata(entry)
        let at = try #require(metadata.indices.dropLast().first { metadata[$0] == 0xC3 && metadata[$0 + 1] == 0xA9 })
        metadata[at + 1] = 0x28
        let payload = EntryCoding.bigEndian(UInt64(metadata.count), width: 4) + metadata
        #expect(CacheStore.read(try write(Array("PHC2".utf8) + SHA256.hash(payload) + payload)) == nil)
        // The same file with the valid bytes is read.
        metadata[at + 1] = 0xA9
        let valid = EntryCoding.bigEndian(UInt64(metadata.count), width: 4) + metadata
        #expect(CacheStore.read(try write(Array("PHC2".utf8) + SHA256.hash(valid) + valid))?.headerValues[3] == "\u{E9}")
    }

    /// Entry file names stay what they were (entries written by earlier versions stay reachable):
    /// the key's partition, `-`, the hex SHA-256 of the key, `.entry` (digests from Python's hashlib).
    @Test func entryFileNamesAreThePartitionAndTheKeysDigest() {
        #expect(CacheStore.fileName("GET http://a.test/x") == "shared-3b29113216b8f90273520285c6739998350de82bd4c3ae74af215827015f5b98.entry")
        #expect(
            CacheStore.fileName("p0123 GET https://api.example.test/items?q=\u{FC}")
                == "p0123-98efb93f8e20bad07a347c41a9c28ebc8887f0a0400fff587d88c95a43927adf.entry")
    }
}
