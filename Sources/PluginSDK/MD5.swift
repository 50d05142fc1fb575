/// MD5 (RFC 1321), for legacy request signing (the `md5-sorted` scheme). Not for security.
public enum MD5 {
    private static let s: [UInt32] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
        5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
        6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ]
    /// floor(abs(sin(i + 1)) × 2^32), as RFC 1321 tabulates it.
    private static let k: [UInt32] = [
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
        0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
        0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
        0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
        0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
        0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
        0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
    ]

    /// The 16-byte digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = Hasher()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// MD5 computed as its bytes come, in parts of any size (a body read from a file): the digest
    /// of every byte given, in order, with at most one block held.
    package struct Hasher: Sendable {
        private var feed = BlockFeed(Compression())

        /// Starts an empty hash.
        package init() {}

        /// Adds bytes.
        package mutating func update(_ bytes: UnsafeRawBufferPointer) { feed.update(bytes) }

        /// The 16-byte digest of every byte added so far (the hash may go on).
        package func finalize() -> [UInt8] {
            let state = feed.padded().state
            var digest: [UInt8] = []
            digest.reserveCapacity(16)
            for word in [state.0, state.1, state.2, state.3] {
                for shift in stride(from: 0, to: 32, by: 8) { digest.append(UInt8(truncatingIfNeeded: word >> UInt32(shift))) }
            }
            return digest
        }
    }

    /// MD5's state and its compression of 64-byte blocks.
    struct Compression: BlockCompression {
        static var blockSize: Int { 64 }
        static var lengthBytes: Int { 8 }
        static var bigEndianLength: Bool { false }

        var state: (UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476)

        mutating func compress(_ block: UnsafeRawBufferPointer) {
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 16) { m in
                for i in 0..<16 { m[i] = UInt32(littleEndian: block.loadUnaligned(fromByteOffset: 4 * i, as: UInt32.self)) }
                compress(words: UnsafeBufferPointer(m))
            }
        }

        /// Compresses one block, as its sixteen words, into the state.
        private mutating func compress(words m: UnsafeBufferPointer<UInt32>) {
            var (a, b, c, d) = state
            for i in 0..<64 {
                var f: UInt32
                let g: Int
                switch i {
                case 0..<16:
                    f = (b & c) | (~b & d)
                    g = i
                case 16..<32:
                    f = (d & b) | (~d & c)
                    g = (5 * i + 1) % 16
                case 32..<48:
                    f = b ^ c ^ d
                    g = (3 * i + 5) % 16
                default:
                    f = c ^ (b | ~d)
                    g = (7 * i) % 16
                }
                f = f &+ a &+ MD5.k[i] &+ m[g]
                a = d
                d = c
                c = b
                b = b &+ ((f << MD5.s[i]) | (f >> (32 - MD5.s[i])))
            }
            state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d)
        }
    }
}

/// HMAC-SHA256 (RFC 2104, tested against RFC 4231).
public enum HMACSHA256 {
    /// A key with its inner and outer pads already hashed: two SHA-256 blocks saved per MAC.
    /// Make one per key (e.g. at `create`, or when a key read from the host store changes).
    public struct Key: Sendable {
        fileprivate let inner: SHA256
        fileprivate let outer: SHA256

        /// Prepares `key`.
        public init(_ key: [UInt8]) {
            var block = key.count > 64 ? SHA256.hash(key) : key
            block += [UInt8](repeating: 0, count: 64 - block.count)
            var inner = SHA256()
            inner.update(block.map { $0 ^ 0x36 })
            var outer = SHA256()
            outer.update(block.map { $0 ^ 0x5c })
            self.inner = inner
            self.outer = outer
        }
    }

    /// The 32-byte MAC of `message` under `key`.
    public static func authenticate(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        authenticate(message, key: Key(key))
    }

    /// The 32-byte MAC of `message` under a prepared key.
    public static func authenticate(_ message: [UInt8], key: Key) -> [UInt8] {
        var mac = Authenticator(key: key)
        mac.update(message)
        return [UInt8](unsafeUninitializedCapacity: 32) { digest, count in
            mac.finalize(into: UnsafeMutableRawBufferPointer(digest))
            count = 32
        }
    }

    /// A MAC computed as its message comes, in parts (no buffer of the whole message made):
    ///
    /// ```swift
    /// var mac = HMACSHA256.Authenticator(key: key)
    /// mac.update(Array("GET\n".utf8))
    /// mac.update(Array("/path".utf8))
    /// let signature = mac.finalizeHex()
    /// ```
    public struct Authenticator: Sendable {
        private var inner: SHA256
        private let outer: SHA256

        /// Starts a MAC under a prepared key.
        public init(key: Key) {
            inner = key.inner
            outer = key.outer
        }

        /// Adds bytes of the message.
        public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 { inner.update(bytes) }

        /// Adds bytes of the message from a raw buffer.
        public mutating func update(_ bytes: UnsafeRawBufferPointer) { inner.update(bytes) }

        /// Finishes the MAC and writes its 32 bytes to `digest` (at least 32 bytes).
        public mutating func finalize(into digest: UnsafeMutableRawBufferPointer) {
            var outer = self.outer
            // The inner digest goes straight into the outer hash, from the stack.
            withUnsafeTemporaryAllocation(byteCount: 32, alignment: 4) { innerDigest in
                inner.finalize(into: innerDigest)
                outer.update(UnsafeRawBufferPointer(innerDigest))
            }
            outer.finalize(into: digest)
        }

        /// Finishes the MAC: its lower-case hex (the digest itself never leaves the stack).
        public mutating func finalizeHex() -> String {
            withUnsafeTemporaryAllocation(byteCount: 32, alignment: 4) { digest in
                finalize(into: digest)
                return SHA256.hex(UnsafeRawBufferPointer(digest))
            }
        }
    }
}
