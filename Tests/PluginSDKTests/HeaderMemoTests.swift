import CPluginABI
import Testing

@testable import PluginSDK

/// A plugin instance's header memo (`CBytes.snapshot(_:memo:)`): a list of the same bytes as the
/// last one is that list; a changed one is decoded as it is, whatever the memo holds.
@Suite("SDK: header lists read through the instance's memo")
struct HeaderMemoTests {
    /// Calls `snapshot` as the host's `request_headers` would answer with `fields` (raw bytes,
    /// laid out in one buffer that outlives the call).
    static func read(_ fields: [([UInt8], [UInt8])], memo: Locked<[HTTPHeader]>?) -> [HTTPHeader] {
        let all = fields.flatMap { $0.0 + $0.1 }
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, all.count))
        defer { buffer.deallocate() }
        _ = buffer.initialize(from: all)
        var pairs: [(ph_bytes, ph_bytes)] = []
        var offset = 0
        for (name, value) in fields {
            let base = buffer.baseAddress!
            pairs.append(
                (ph_bytes(data: base + offset, len: name.count), ph_bytes(data: base + offset + name.count, len: value.count)))
            offset += name.count + value.count
        }
        return CBytes.snapshot(
            { names, values, capacity in
                guard let names, let values else { return pairs.count }
                for index in 0..<min(capacity, pairs.count) { (names[index], values[index]) = pairs[index] }
                return pairs.count
            }, memo: memo)
    }

    static func bytes(_ fields: [(String, String)]) -> [([UInt8], [UInt8])] { fields.map { (Array($0.0.utf8), Array($0.1.utf8)) } }

    static func address(_ list: [HTTPHeader]) -> UnsafeRawPointer? { list.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) } }

    let fields = [("Accept-Encoding", "gzip;q=1.0, compress;q=0.5"), ("User-Agent", "PluginHost/1.0 (bench; Linux x86_64)")]

    @Test func theSameBytesGiveTheSameList() {
        let memo = Locked<[HTTPHeader]>([])
        let first = Self.read(Self.bytes(fields), memo: memo)
        let second = Self.read(Self.bytes(fields), memo: memo)
        #expect(first.map { [$0.name, $0.value] } == fields.map { [$0.0, $0.1] })
        #expect(second.map { [$0.name, $0.value] } == fields.map { [$0.0, $0.1] })
        // No list made for the second read: the memo's own.
        #expect(Self.address(first) == Self.address(second))
        #expect(Self.address(memo.withLock { $0 }) == Self.address(first))
    }

    @Test func aURLOfTheSameBytesIsTheSameStringAndAnotherIsReadAsItIs() {
        let memo = Locked<String>("")
        func read(_ bytes: [UInt8]) -> String {
            bytes.withUnsafeBufferPointer { CBytes.string(ph_bytes(data: $0.baseAddress, len: $0.count), memo: memo) }
        }
        let url = "http://127.0.0.1:9/small.json?page=2"
        let first = read(Array(url.utf8))
        let second = read(Array(url.utf8))
        #expect(first == url && second == url)
        // The memo's own string, not a new one.
        #expect(second.utf8.withContiguousStorageIfAvailable { $0.baseAddress } == first.utf8.withContiguousStorageIfAvailable { $0.baseAddress })
        #expect(read(Array("http://127.0.0.1:9/small.json?page=3".utf8)) == "http://127.0.0.1:9/small.json?page=3")
        #expect(memo.withLock { $0 } == "http://127.0.0.1:9/small.json?page=3")
        // Invalid UTF-8 is repaired on every read, and never taken for the memo's string.
        let invalid: [UInt8] = Array("http://a/".utf8) + [0xFF]
        #expect(read(invalid) == "http://a/\u{FFFD}")
        #expect(read(invalid) == "http://a/\u{FFFD}")
        #expect(read(Array("http://a/\u{FFFD}".utf8)) == "http://a/\u{FFFD}")
        #expect(read([]) == "")
    }

    @Test func aChangedValueIsReadAsItIs() {
        let memo = Locked<[HTTPHeader]>([])
        _ = Self.read(Self.bytes(fields), memo: memo)
        let changed = [fields[0], ("User-Agent", "other/2.0")]
        let read = Self.read(Self.bytes(changed), memo: memo)
        #expect(read.map { [$0.name, $0.value] } == changed.map { [$0.0, $0.1] })
        #expect(memo.withLock { $0 }.map(\.value) == ["gzip;q=1.0, compress;q=0.5", "other/2.0"])
    }

    @Test func moreFewerAndReorderedFieldsAreReadAsTheyAre() {
        let memo = Locked<[HTTPHeader]>([])
        _ = Self.read(Self.bytes(fields), memo: memo)
        let more = fields + [("X-Extra", "1")]
        #expect(Self.read(Self.bytes(more), memo: memo).map { [$0.name, $0.value] } == more.map { [$0.0, $0.1] })
        let fewer = [fields[1]]
        #expect(Self.read(Self.bytes(fewer), memo: memo).map { [$0.name, $0.value] } == fewer.map { [$0.0, $0.1] })
        let reordered = [fields[1], fields[0]]
        #expect(Self.read(Self.bytes(reordered), memo: memo).map { [$0.name, $0.value] } == reordered.map { [$0.0, $0.1] })
        #expect(Self.read([], memo: memo).isEmpty)
    }

    @Test func invalidUTF8IsRepairedEveryTime() {
        let memo = Locked<[HTTPHeader]>([])
        let bad: [([UInt8], [UInt8])] = [(Array("X-Bad".utf8), [0x61, 0xFF, 0x62])]
        let first = Self.read(bad, memo: memo)
        let second = Self.read(bad, memo: memo)
        // The repaired string's bytes are not the host's: never taken for them.
        #expect(first.map(\.value) == ["a\u{FFFD}b"])
        #expect(second.map(\.value) == ["a\u{FFFD}b"])
        #expect(Self.read(Self.bytes([("X-Bad", "a\u{FFFD}b")]), memo: memo).map(\.value) == ["a\u{FFFD}b"])
    }

    @Test func withoutAMemoEveryReadIsMadeAnew() {
        let first = Self.read(Self.bytes(fields), memo: nil)
        let second = Self.read(Self.bytes(fields), memo: nil)
        #expect(first.map { [$0.name, $0.value] } == second.map { [$0.name, $0.value] })
        #expect(Self.address(first) != Self.address(second))
    }

    @Test func moreFieldsThanTheStackHoldsAreReadWhole() {
        let memo = Locked<[HTTPHeader]>([])
        let many = (0..<40).map { ("X-Field-\($0)", "value \($0)") }
        #expect(Self.read(Self.bytes(many), memo: memo).map { [$0.name, $0.value] } == many.map { [$0.0, $0.1] })
        #expect(Self.read(Self.bytes(many), memo: memo).count == 40)
    }
}
