import Foundation
import Testing

@testable import PluginSDK

@Suite("SHA-256 against FIPS 180-2 / NIST vectors")
struct SHA256Tests {
    /// The digest of `bytes`, on the CPU's SHA extensions where it has them, or in Swift only.
    static func digest(_ bytes: [UInt8], portable: Bool) -> String {
        var hasher = SHA256(portableOnly: portable)
        hasher.update(bytes)
        return SHA256.hex(hasher.finalize())
    }

    @Test(arguments: [false, true]) func fipsVectors(portable: Bool) {
        #expect(Self.digest(Array("abc".utf8), portable: portable) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            Self.digest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8), portable: portable)
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            Self.digest(
                Array("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu".utf8),
                portable: portable) == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
        #expect(Self.digest([], portable: portable) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test(arguments: [false, true]) func oneMillionAs(portable: Bool) {
        var hasher = SHA256(portableOnly: portable)
        let chunk = [UInt8](repeating: 0x61, count: 1000)
        for _ in 0..<1000 { chunk.withUnsafeBytes { hasher.update($0) } }
        #expect(SHA256.hex(hasher.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Every length from 0 to 300 bytes (each padding case, one to six blocks) and one of 1 MiB
    /// plus 3: the CPU's extensions and the Swift code give the same digest.
    @Test func bothWaysAgreeOnEveryLengthOfSeveralBlocks() {
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for length in Array(0...300) + [1 << 20 + 3] {
            // xorshift64: varied bytes, the same on every run.
            let bytes = (0..<length).map { _ -> UInt8 in
                seed ^= seed << 13
                seed ^= seed >> 7
                seed ^= seed << 17
                return UInt8(truncatingIfNeeded: seed >> 24)
            }
            #expect(Self.digest(bytes, portable: false) == Self.digest(bytes, portable: true), "length \(length)")
        }
    }

    /// On a Linux x86-64 CPU that lists `sha_ni`, `ssse3` and `sse4_1`, the extensions are used (so the
    /// tests above compare the two ways here); elsewhere the Swift code is.
    @Test func theExtensionsAreUsedExactlyWhereTheCPUHasThem() throws {
        #if os(Linux) && arch(x86_64)
        let info = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        let flags = Set(info.split(separator: "\n").first { $0.hasPrefix("flags") }?.split(separator: " ").map(String.init) ?? [])
        #expect(SHA256.usesCPUExtensions == (flags.contains("sha_ni") && flags.contains("ssse3") && flags.contains("sse4_1")))
        #elseif canImport(Darwin) && arch(x86_64)
        var size = 0
        sysctlbyname("machdep.cpu.leaf7_features", nil, &size, nil, 0)
        var buffer = [CChar](repeating: 0, count: max(size, 1))
        sysctlbyname("machdep.cpu.leaf7_features", &buffer, &size, nil, 0)
        #expect(SHA256.usesCPUExtensions == String(cString: buffer).split(separator: " ").contains("SHA"))
        #else
        #expect(!SHA256.usesCPUExtensions)
        #endif
    }

    @Test func incrementalUpdatesMatchOneShot() {
        let data = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        var hasher = SHA256()
        for split in stride(from: 0, to: data.count, by: 37) {
            hasher.update(data[split..<min(split + 37, data.count)])
        }
        #expect(hasher.finalize() == SHA256.hash(data))
    }
}
