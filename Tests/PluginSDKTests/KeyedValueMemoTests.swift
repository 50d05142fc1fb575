import CPluginABI
import Testing

@testable import PluginSDK

/// A value read from the host store through the reader's memo (`CBytes.string(_:key:memo:)`,
/// what `HostServices.value(forKey:)` of a loaded plugin uses): the kept string again only for
/// the same key and the same bytes.
@Suite("SDK: host store values read through the instance's memo")
struct KeyedValueMemoTests {
    /// `bytes` read as the value of `key` through `memo`.
    static func read(_ bytes: [UInt8], key: String, memo: Locked<(key: String, value: String)?>) -> String {
        bytes.withUnsafeBufferPointer { CBytes.string(ph_bytes(data: $0.baseAddress, len: $0.count), key: key, memo: memo) }
    }

    /// The address of a string's storage (the same string kept, or one made anew).
    static func address(_ string: String) -> UInt {
        var copy = string
        return copy.withUTF8 { UInt(bitPattern: $0.baseAddress) }
    }

    @Test func bytesWithoutAPointerAreTheEmptyStringTheyAreReadAs() {
        // A length without a pointer (or a negative one) is read as no bytes: equal to "" only,
        // as `CBytes.string` makes it "".
        #expect(CBytes.equal(ph_bytes(data: nil, len: 5), ""))
        #expect(!CBytes.equal(ph_bytes(data: nil, len: 5), "hello"))
        #expect(CBytes.string(ph_bytes(data: nil, len: 5)) == "")
        let hello = Array("hello".utf8)
        hello.withUnsafeBufferPointer { buffer in
            #expect(CBytes.equal(ph_bytes(data: buffer.baseAddress, len: 5), "hello"))
            #expect(!CBytes.equal(ph_bytes(data: buffer.baseAddress, len: -1), "hello"))
            #expect(CBytes.equal(ph_bytes(data: buffer.baseAddress, len: 0), ""))
        }
        // Through the memo: the kept "hello" is not the answer for a pointerless length of 5.
        let memo = Locked<(key: String, value: String)?>(nil)
        #expect(Self.read(hello, key: "k", memo: memo) == "hello")
        #expect(CBytes.string(ph_bytes(data: nil, len: 5), key: "k", memo: memo) == "")
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
