import PluginSDK
import Testing

func bytes(hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        out.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return out
}

@Suite("MD5 against the RFC 1321 test suite")
struct MD5Tests {
    @Test(arguments: [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
        ("12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a"),
    ])
    func rfc1321(input: String, digest: String) {
        #expect(SHA256.hex(MD5.hash(Array(input.utf8))) == digest)
    }
}

@Suite("HMAC-SHA256 against RFC 4231")
struct HMACTests {
    @Test(arguments: [
        // Test cases 1-4, 6, 7 (full output).
        (
            "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        ),
        (
            "4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        (
            String(repeating: "aa", count: 20), String(repeating: "dd", count: 50),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
        ),
        (
            "0102030405060708090a0b0c0d0e0f10111213141516171819", String(repeating: "cd", count: 50),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
        ),
        (
            String(repeating: "aa", count: 131),
            "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        ),
        (
            String(repeating: "aa", count: 131),
            "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        ),
    ])
    func rfc4231(key: String, data: String, mac: String) {
        #expect(SHA256.hex(HMACSHA256.authenticate(bytes(hex: data), key: bytes(hex: key))) == mac)
    }

    /// The MAC fed in two parts, split at every position, and in one-byte parts, is the one-shot
    /// MAC (RFC 4231 case 7: a key longer than a block, a message of several blocks).
    @Test func anAuthenticatorFedInPartsGivesTheSameMAC() {
        let key = HMACSHA256.Key(bytes(hex: String(repeating: "aa", count: 131)))
        let message =
            Array("This is a test using a larger than block-size key and a larger than block-size data. ".utf8)
            + Array("The key needs to be hashed before being used by the HMAC algorithm.".utf8)
        let expected = "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        for split in 0...message.count {
            var mac = HMACSHA256.Authenticator(key: key)
            message[..<split].withUnsafeBytes { mac.update($0) }
            mac.update(message[split...])
            #expect(mac.finalizeHex() == expected, "split at \(split)")
        }
        var bytewise = HMACSHA256.Authenticator(key: key)
        for byte in message { bytewise.update(CollectionOfOne(byte)) }
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBytes { bytewise.finalize(into: $0) }
        #expect(SHA256.hex(digest) == expected)
        #expect(HMACSHA256.authenticate(message, key: key) == digest)
    }

    @Test func rfc4231Case5Truncated() {
        let mac = HMACSHA256.authenticate(bytes(hex: "546573742057697468205472756e636174696f6e"), key: bytes(hex: String(repeating: "0c", count: 20)))
        #expect(SHA256.hex(Array(mac.prefix(16))) == "a3b6167473100ee06e0c796c2955552b")
    }
}

@Suite("SHA-512 and SHA-512/256 against the FIPS 180-4 examples")
struct SHA512Tests {
    static let twoBlock = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"

    @Test(arguments: [
        (
            "abc",
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            "53048e2681941ef99b2e29b76b4c7dabe4c2d0c634fc6d46e0e2f13107e7af23"
        ),
        (
            "",
            "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
            "c672b8d1ef56ed28ab87c3622c5114069bdd3ad7b8f9737498d0c01ecef0967a"
        ),
        (
            twoBlock,
            "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909",
            "3928e184fb8690f840da3988121d31be65cb9d3ef83ee6146feac861e19b563a"
        ),
    ])
    func fips180Examples(input: String, sha512: String, sha512Slash256: String) {
        #expect(SHA256.hex(SHA512.hash(Array(input.utf8))) == sha512)
        #expect(SHA256.hex(SHA512.hash256(Array(input.utf8))) == sha512Slash256)
    }

    @Test func oneMillionA() {
        let input = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(
            SHA256.hex(SHA512.hash(input))
                == "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973ebde0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b")
    }

    /// Padding edges: 111 bytes fit one block with the length, 112 need a second.
    @Test(arguments: [111, 112, 127, 128, 129])
    func blockBoundaries(length: Int) {
        let input = [UInt8](repeating: 0x61, count: length)
        let expected = [
            111: "fa9121c7b32b9e01733d034cfc78cbf67f926c7ed83e82200ef86818196921760b4beff48404df811b953828274461673c68d04e297b0eb7b2b4d60fc6b566a2",
            112: "c01d080efd492776a1c43bd23dd99d0a2e626d481e16782e75d54c2503b5dc32bd05f0f1ba33e568b88fd2d970929b719ecbb152f58f130a407c8830604b70ca",
            127: "828613968b501dc00a97e08c73b118aa8876c26b8aac93df128502ab360f91bab50a51e088769a5c1eff4782ace147dce3642554199876374291f5d921629502",
            128: "b73d1929aa615934e61a871596b3f3b33359f42b8175602e89f7e06e5f658a243667807ed300314b95cacdd579f3e33abdfbe351909519a846d465c59582f321",
            129: "4f681e0bd53cda4b5a2041cc8a06f2eabde44fb16c951fbd5b87702f07aeab611565b19c47fde30587177ebb852e3971bbd8d3fd30da18d71037dfbd98420429",
        ]
        #expect(SHA256.hex(SHA512.hash(input)) == expected[length])
    }
}

@Suite("random bytes into a caller's buffer")
struct RandomBytesIntoTests {
    /// Services that implement only `randomBytes(_:)`, with a known pattern.
    struct Patterned: HostServices {
        func value(forKey key: String) -> String? { nil }
        func setValue(_ value: String?, forKey key: String) {}
        func emit(_ name: String, fields: [String: String]) {}
        func log(_ level: LogLevel, _ message: String) {}
        func now() -> Double { 0 }
        func monotonicNanoseconds() -> UInt64 { 0 }
        func randomBytes(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) } }
    }

    @Test func theDefaultCopiesTheBytesOfRandomBytes() {
        var buffer = [UInt8](repeating: 0, count: 16)
        buffer.withUnsafeMutableBytes { Patterned().randomBytes(into: $0) }
        #expect(buffer == Patterned().randomBytes(16))
        // An empty buffer asks for nothing and is left alone.
        var empty: [UInt8] = []
        empty.withUnsafeMutableBytes { Patterned().randomBytes(into: $0) }
        #expect(empty.isEmpty)
    }

    @Test func hexOfARawBufferIsHexOfItsArray() {
        let bytes: [UInt8] = [0x00, 0x0f, 0x10, 0xa5, 0xff]
        #expect(bytes.withUnsafeBytes { SHA256.hex($0) } == "000f10a5ff")
        #expect(SHA256.hex(bytes) == "000f10a5ff")
    }
}

@Suite("MD5 and SHA-512 computed in parts")
struct RunningHashTests {
    /// Every split of a message (parts of 1, 63, 64, 65, 127, 128, 129 and 1,000 bytes, and none
    /// empty) gives the one-shot digest, itself checked against the published vectors above.
    @Test(arguments: [1, 63, 64, 65, 127, 128, 129, 1000])
    func partsGiveTheWholeDigest(part: Int) {
        for length in [0, 1, 55, 56, 63, 64, 111, 112, 127, 128, 129, 300, 2049] {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            var md5 = MD5.Hasher()
            var sha512 = SHA512.Hasher()
            var sha512Slash256 = SHA512.Hasher(truncatedTo256: true)
            message.withUnsafeBytes { bytes in
                for start in stride(from: 0, to: length, by: part) {
                    let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + part, length)])
                    md5.update(piece)
                    sha512.update(piece)
                    sha512Slash256.update(piece)
                }
            }
            #expect(md5.finalize() == MD5.hash(message), "MD5, \(length) bytes in parts of \(part)")
            #expect(sha512.finalize() == SHA512.hash(message), "SHA-512, \(length) bytes in parts of \(part)")
            #expect(sha512Slash256.finalize() == SHA512.hash256(message), "SHA-512/256, \(length) bytes in parts of \(part)")
        }
    }

    /// A digest taken part way leaves the hash going: the next digest is of every byte, and the
    /// same digest taken twice is the same.
    @Test func aDigestPartWayLeavesTheHashGoing() {
        let message = Array("12345678901234567890123456789012345678901234567890123456789012345678901234567890".utf8)
        var md5 = MD5.Hasher()
        var sha512 = SHA512.Hasher()
        message[..<30].withUnsafeBytes { md5.update($0) }
        message[..<30].withUnsafeBytes { sha512.update($0) }
        #expect(md5.finalize() == MD5.hash(Array(message[..<30])))
        #expect(md5.finalize() == md5.finalize())
        #expect(sha512.finalize() == SHA512.hash(Array(message[..<30])))
        message[30...].withUnsafeBytes { md5.update($0) }
        message[30...].withUnsafeBytes { sha512.update($0) }
        #expect(SHA256.hex(md5.finalize()) == "57edf4a22be3c955ac49da2e2107b67a")
        #expect(sha512.finalize() == SHA512.hash(message))
    }

    /// RFC 1321's longest vector and a million `a`s (the published MD5 of which is well known), fed in uneven parts.
    @Test func longMessagesInUnevenParts() {
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        var md5 = MD5.Hasher()
        var sha512 = SHA512.Hasher()
        million.withUnsafeBytes { bytes in
            var start = 0
            var part = 1
            while start < bytes.count {
                let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + part, bytes.count)])
                md5.update(piece)
                sha512.update(piece)
                start += part
                part = part * 3 % 1_021 + 1
            }
        }
        #expect(SHA256.hex(md5.finalize()) == "7707d6ae4e027c70eea2a935c2296f21")
        #expect(
            SHA256.hex(sha512.finalize())
                == "e718483d0ce769644e2e42c7bc15b4638e1f98b13b2044285632a803afa973ebde0ff244877ea60a4cb0432ce577c31beb009c5c2c49aa2e4eadb217ad8cc09b")
    }
}
