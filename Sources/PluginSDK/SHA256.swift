import CDigest

/// SHA-256 (FIPS 180-4), for bundle digests and request signing. No dependencies: blocks are
/// compressed with the CPU's SHA extensions where it has them (x86-64, checked at run time),
/// else in portable Swift.
///
/// ```swift
/// var hasher = SHA256()
/// hasher.update(Array("abc".utf8))
/// let hex = SHA256.hex(hasher.finalize())   // "ba7816bf…"
/// ```
public struct SHA256: Sendable {
    /// The 64 round constants (FIPS 180-4 §4.2.2), from CDigest (one copy for both block functions).
    private static var k: UnsafePointer<UInt32> { ph_sha256_round_constants()! }

    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
    /// The bytes of an unfinished block, inline (no heap buffer: a hasher is copied freely, e.g.
    /// HMAC's prepared pads, and copying it allocates nothing).
    private var block: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    /// How many bytes of `block` are used (0–63).
    private var used = 0
    private var length: UInt64 = 0
    /// Whether blocks are compressed with the CPU's SHA extensions: ``usesCPUExtensions``, read
    /// once per hasher (a hasher copied from HMAC's prepared pads reads nothing; the static was a
    /// lazily made global, checked for every block), unless tests asked for the portable code to
    /// compare the two ways.
    private var accelerated: Bool

    /// A fresh hasher.
    public init() { accelerated = Self.usesCPUExtensions }

    /// A fresh hasher that never uses the CPU's SHA extensions (`portableOnly`).
    package init(portableOnly: Bool) { accelerated = !portableOnly && Self.usesCPUExtensions }

    /// Whether this CPU's SHA extensions compress the blocks (x86-64 with SHA, SSSE3, SSE4.1).
    package static let usesCPUExtensions = ph_sha256_accelerated() != 0

    /// The digest of `bytes` in one call.
    public static func hash<Bytes: Sequence>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// Lower-case hexadecimal of `bytes`.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { hex($0) }
    }

    /// Lower-case hexadecimal of the bytes in `bytes` (a digest or nonce on the stack).
    public static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = hexDigit(byte >> 4)
                out[2 * index + 1] = hexDigit(byte & 0x0f)
            }
            return bytes.count * 2
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }

    /// Adds bytes.
    public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        if let done: Void = bytes.withContiguousStorageIfAvailable({ update(UnsafeRawBufferPointer($0)) }) {
            return done
        }
        Array(bytes).withUnsafeBytes { update($0) }
    }

    /// Adds bytes from a raw buffer, compressing whole blocks without copying them.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        var index = 0
        if used > 0 {
            let take = min(64 - used, bytes.count)
            let offset = used
            withUnsafeMutableBytes(of: &block) { $0.baseAddress!.advanced(by: offset).copyMemory(from: base, byteCount: take) }
            used += take
            index = take
            if used == 64 {
                let full = block
                withUnsafeBytes(of: full) { compress($0) }
                used = 0
            }
        }
        let whole = (bytes.count - index) / 64
        if whole > 0 {
            compress(UnsafeRawBufferPointer(rebasing: bytes[index..<index + whole * 64]))
            index += whole * 64
        }
        if index < bytes.count {
            let rest = bytes.count - index
            withUnsafeMutableBytes(of: &block) { $0.baseAddress!.copyMemory(from: base + index, byteCount: rest) }
            used = rest
        }
        length &+= UInt64(bytes.count)
    }

    /// The 32-byte digest.
    public mutating func finalize() -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: 32) { digest, count in
            finalize(into: UnsafeMutableRawBufferPointer(digest))
            count = 32
        }
    }

    /// Finishes the hash and writes the 32-byte digest to `digest` (at least 32 bytes): no array
    /// made, for a digest hashed again at once (HMAC's inner hash).
    package mutating func finalize(into digest: UnsafeMutableRawBufferPointer) {
        precondition(digest.count >= 32, "a SHA-256 digest needs 32 bytes")
        let bitLength = length &* 8
        // 0x80, zeros up to 56 mod 64, the length in bits: at most two blocks, on the stack.
        let padding = (56 - Int((length + 1) % 64) + 64) % 64
        let tailCount = 1 + padding + 8
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 128) { tail in
            tail.initialize(repeating: 0)
            tail[0] = 0x80
            for index in 0..<8 {
                tail[1 + padding + index] = UInt8(truncatingIfNeeded: bitLength >> UInt64(56 - 8 * index))
            }
            let savedLength = length
            update(UnsafeRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(tail)[0..<tailCount]))
            length = savedLength
        }
        withUnsafeBytes(of: state) { raw in
            for index in 0..<8 {
                digest.storeBytes(
                    of: raw.loadUnaligned(fromByteOffset: 4 * index, as: UInt32.self).bigEndian, toByteOffset: 4 * index, as: UInt32.self)
            }
        }
    }

    /// Compresses whole 64-byte blocks.
    private mutating func compress(_ blocks: UnsafeRawBufferPointer) {
        if accelerated, let base = blocks.baseAddress {
            let count = blocks.count / 64
            withUnsafeMutableBytes(of: &state) { words in
                ph_sha256_compress(words.baseAddress!.assumingMemoryBound(to: UInt32.self), base.assumingMemoryBound(to: UInt8.self), count)
            }
            return
        }
        var (h0, h1, h2, h3, h4, h5, h6, h7) = state
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            let k = Self.k
            var offset = 0
            while offset + 64 <= blocks.count {
                for i in 0..<16 {
                    w[i] = UInt32(bigEndian: blocks.loadUnaligned(fromByteOffset: offset + 4 * i, as: UInt32.self))
                }
                for i in 16..<64 {
                    let a = w[i - 15]
                    let b = w[i - 2]
                    let s0 = a.rotatedRight(7) ^ a.rotatedRight(18) ^ (a >> 3)
                    let s1 = b.rotatedRight(17) ^ b.rotatedRight(19) ^ (b >> 10)
                    w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
                }
                var a = h0
                var b = h1
                var c = h2
                var d = h3
                var e = h4
                var f = h5
                var g = h6
                var h = h7
                for i in 0..<64 {
                    let s1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
                    let ch = (e & f) ^ (~e & g)
                    let t1 = h &+ s1 &+ ch &+ k[i] &+ w[i]
                    let s0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
                    let maj = (a & b) ^ (a & c) ^ (b & c)
                    let t2 = s0 &+ maj
                    h = g
                    g = f
                    f = e
                    e = d &+ t1
                    d = c
                    c = b
                    b = a
                    a = t1 &+ t2
                }
                h0 = h0 &+ a
                h1 = h1 &+ b
                h2 = h2 &+ c
                h3 = h3 &+ d
                h4 = h4 &+ e
                h5 = h5 &+ f
                h6 = h6 &+ g
                h7 = h7 &+ h
                offset += 64
            }
        }
        state = (h0, h1, h2, h3, h4, h5, h6, h7)
    }
}

extension UInt32 {
    @inline(__always)
    fileprivate func rotatedRight(_ count: UInt32) -> UInt32 {
        (self >> count) | (self << (32 - count))
    }
}
