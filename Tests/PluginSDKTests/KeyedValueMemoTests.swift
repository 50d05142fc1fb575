import CPluginABI
import Testing

@testable import PluginSDK

/// A value read from the host store through the reader's memo (`CBytes.string(_:key:memo:)`,
/// what `HostServices.value(forKey:)` of a loaded plugin uses): the kept string again only for
/// the same key and the same bytes.
@Suite("SDK: host store values read through the instance's memo")
struct KeyedValueMemoTests {
    static func read(_ bytes: [UInt8], key: String, memo: Locked<(key: String, value: String)?>) -> String {
        bytes.withUnsafeBufferPointer { CBytes.string(ph_bytes(data: $0.baseAddress, len: $0.count), key: key, memo: memo) }
    }

    /// The address of a string's storage (the same string kept, or one made anew).
    static func address(_ string: String) -> UInt {
        var copy = string
        return copy.withUTF8 { UInt(bitPattern: $0.baseAddress) }
    }

    @Test func theSameBytesForTheSameKeyAreTheKeptString() {
        let memo = Locked<(key: String, value: String)?>(nil)
        let token = Array("token-aaaaaaaaaaaaaaaaaaaaaaaa-1".utf8)
        let first = Self.read(token, key: "access_token", memo: memo)
        let second = Self.read(token, key: "access_token", memo: memo)
        #expect(first == "token-aaaaaaaaaaaaaaaaaaaaaaaa-1")
        #expect(Self.address(first) == Self.address(second))
    }

    @Test func changedBytesOfTheSameLengthAreReadAsTheyAre() {
        let memo = Locked<(key: String, value: String)?>(nil)
        #expect(Self.read(Array("token-aaaaaaaaaaaaaaaaaaaaaaaa-1".utf8), key: "access_token", memo: memo) == "token-aaaaaaaaaaaaaaaaaaaaaaaa-1")
        #expect(Self.read(Array("token-aaaaaaaaaaaaaaaaaaaaaaaa-2".utf8), key: "access_token", memo: memo) == "token-aaaaaaaaaaaaaaaaaaaaaaaa-2")
        #expect(Self.read(Array("short".utf8), key: "access_token", memo: memo) == "short")
        #expect(Self.read([], key: "access_token", memo: memo) == "")
    }

    @Test func anotherKeyWithTheSameBytesGetsItsOwnString() {
        let memo = Locked<(key: String, value: String)?>(nil)
        let bytes = Array("the same value, of two different keys".utf8)
        let first = Self.read(bytes, key: "one", memo: memo)
        let second = Self.read(bytes, key: "two", memo: memo)
        #expect(first == second)
        #expect(Self.address(first) != Self.address(second))
        #expect(memo.withLock { $0?.key } == "two")
    }

    @Test func invalidUTF8IsRepairedEveryTime() {
        let memo = Locked<(key: String, value: String)?>(nil)
        let bad: [UInt8] = [0x61, 0xFF, 0x62]
        #expect(Self.read(bad, key: "k", memo: memo) == "a\u{FFFD}b")
        #expect(Self.read(bad, key: "k", memo: memo) == "a\u{FFFD}b")
        // The repaired string's bytes are the host's only when the host sends those bytes.
        #expect(Self.read(Array("a\u{FFFD}b".utf8), key: "k", memo: memo) == "a\u{FFFD}b")
    }
}
