/// SHA-512 and SHA-512/256 (FIPS 180-4), for HTTP Digest authentication (RFC 7616). No dependencies.
///
/// ```swift
/// let hex = SHA256.hex(SHA512.hash(Array("abc".utf8)))          // "ddaf35a1…"
/// let short = SHA256.hex(SHA512.hash256(Array("abc".utf8)))     // "53048e26…", 32 bytes
/// ```
public enum SHA512 {
    private static let k: [UInt64] = [
        0x428a_2f98_d728_ae22, 0x7137_4491_23ef_65cd, 0xb5c0_fbcf_ec4d_3b2f, 0xe9b5_dba5_8189_dbbc,
        0x3956_c25b_f348_b538, 0x59f1_11f1_b605_d019, 0x923f_82a4_af19_4f9b, 0xab1c_5ed5_da6d_8118,
        0xd807_aa98_a303_0242, 0x1283_5b01_4570_6fbe, 0x2431_85be_4ee4_b28c, 0x550c_7dc3_d5ff_b4e2,
        0x72be_5d74_f27b_896f, 0x80de_b1fe_3b16_96b1, 0x9bdc_06a7_25c7_1235, 0xc19b_f174_cf69_2694,
        0xe49b_69c1_9ef1_4ad2, 0xefbe_4786_384f_25e3, 0x0fc1_9dc6_8b8c_d5b5, 0x240c_a1cc_77ac_9c65,
        0x2de9_2c6f_592b_0275, 0x4a74_84aa_6ea6_e483, 0x5cb0_a9dc_bd41_fbd4, 0x76f9_88da_8311_53b5,
        0x983e_5152_ee66_dfab, 0xa831_c66d_2db4_3210, 0xb003_27c8_98fb_213f, 0xbf59_7fc7_beef_0ee4,
        0xc6e0_0bf3_3da8_8fc2, 0xd5a7_9147_930a_a725, 0x06ca_6351_e003_826f, 0x1429_2967_0a0e_6e70,
        0x27b7_0a85_46d2_2ffc, 0x2e1b_2138_5c26_c926, 0x4d2c_6dfc_5ac4_2aed, 0x5338_0d13_9d95_b3df,
        0x650a_7354_8baf_63de, 0x766a_0abb_3c77_b2a8, 0x81c2_c92e_47ed_aee6, 0x9272_2c85_1482_353b,
        0xa2bf_e8a1_4cf1_0364, 0xa81a_664b_bc42_3001, 0xc24b_8b70_d0f8_9791, 0xc76c_51a3_0654_be30,
        0xd192_e819_d6ef_5218, 0xd699_0624_5565_a910, 0xf40e_3585_5771_202a, 0x106a_a070_32bb_d1b8,
        0x19a4_c116_b8d2_d0c8, 0x1e37_6c08_5141_ab53, 0x2748_774c_df8e_eb99, 0x34b0_bcb5_e19b_48a8,
        0x391c_0cb3_c5c9_5a63, 0x4ed8_aa4a_e341_8acb, 0x5b9c_ca4f_7763_e373, 0x682e_6ff3_d6b2_b8a3,
        0x748f_82ee_5def_b2fc, 0x78a5_636f_4317_2f60, 0x84c8_7814_a1f0_ab72, 0x8cc7_0208_1a64_39ec,
        0x90be_fffa_2363_1e28, 0xa450_6ceb_de82_bde9, 0xbef9_a3f7_b2c6_7915, 0xc671_78f2_e372_532b,
        0xca27_3ece_ea26_619c, 0xd186_b8c7_21c0_c207, 0xeada_7dd6_cde0_eb1e, 0xf57d_4f7f_ee6e_d178,
        0x06f0_67aa_7217_6fba, 0x0a63_7dc5_a2c8_98a6, 0x113f_9804_bef9_0dae, 0x1b71_0b35_131c_471b,
        0x28db_77f5_2304_7d84, 0x32ca_ab7b_40c7_2493, 0x3c9e_be0a_15c9_bebc, 0x431d_67c4_9c10_0d4c,
        0x4cc5_d4be_cb3e_42b6, 0x597f_299c_fc65_7e2a, 0x5fcb_6fab_3ad6_faec, 0x6c44_198c_4a47_5817,
    ]

    /// The SHA-512 initial hash value (FIPS 180-4 §5.3.5).
    private static let initial512: [UInt64] = [
        0x6a09_e667_f3bc_c908, 0xbb67_ae85_84ca_a73b, 0x3c6e_f372_fe94_f82b, 0xa54f_f53a_5f1d_36f1,
        0x510e_527f_ade6_82d1, 0x9b05_688c_2b3e_6c1f, 0x1f83_d9ab_fb41_bd6b, 0x5be0_cd19_137e_2179,
    ]

    /// The SHA-512/256 initial hash value, generated as FIPS 180-4 §5.3.6 prescribes: SHA-512 of
    /// the text `SHA-512/256` with every word of the initial value XORed with `a5a5a5a5a5a5a5a5`.
    private static let initial512Slash256: [UInt64] = {
        var feed = BlockFeed(Compression(state: initial512.map { $0 ^ 0xa5a5_a5a5_a5a5_a5a5 }))
        Array("SHA-512/256".utf8).withUnsafeBytes { feed.update($0) }
        return feed.padded().state
    }()

    /// The 64-byte SHA-512 digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = Hasher()
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// The 32-byte SHA-512/256 digest of `bytes` (RFC 7616's `SHA-512-256`).
    public static func hash256(_ bytes: [UInt8]) -> [UInt8] {
        var hasher = Hasher(truncatedTo256: true)
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// SHA-512 or SHA-512/256 computed as its bytes come, in parts of any size (a body read from a
    /// file): the digest of every byte given, in order, with at most one block held.
    package struct Hasher: Sendable {
        private var feed: BlockFeed<Compression>
        /// How many bytes of the final state the digest is (64, or 32 for SHA-512/256).
        private let digestBytes: Int

        /// Starts an empty SHA-512 hash, or SHA-512/256 when `truncatedTo256`.
        package init(truncatedTo256: Bool = false) {
            feed = BlockFeed(Compression(state: truncatedTo256 ? SHA512.initial512Slash256 : SHA512.initial512))
            digestBytes = truncatedTo256 ? 32 : 64
        }

        /// Adds bytes.
        package mutating func update(_ bytes: UnsafeRawBufferPointer) { feed.update(bytes) }

        /// The digest of every byte added so far (64 bytes, or 32 for SHA-512/256; the hash may go on).
        package func finalize() -> [UInt8] {
            var digest: [UInt8] = []
            digest.reserveCapacity(64)
            for word in feed.padded().state {
                for shift in stride(from: 56, through: 0, by: -8) { digest.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
            }
            return Array(digest.prefix(digestBytes))
        }
    }

    /// SHA-512's state and its compression of 128-byte blocks.
    struct Compression: BlockCompression {
        static var blockSize: Int { 128 }
        static var lengthBytes: Int { 16 }
        static var bigEndianLength: Bool { true }

        var state: [UInt64]
        /// The message schedule, kept between blocks (no array made per block).
        private var w = [UInt64](repeating: 0, count: 80)

        init(state: [UInt64]) {
            self.state = state
        }

        mutating func compress(_ block: UnsafeRawBufferPointer) {
            for i in 0..<16 { w[i] = UInt64(bigEndian: block.loadUnaligned(fromByteOffset: 8 * i, as: UInt64.self)) }
            for i in 16..<80 {
                let s0 = w[i - 15].rotatedRight(1) ^ w[i - 15].rotatedRight(8) ^ (w[i - 15] >> 7)
                let s1 = w[i - 2].rotatedRight(19) ^ w[i - 2].rotatedRight(61) ^ (w[i - 2] >> 6)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var (a, b, c, d, e, f, g, hh) = (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7])
            for i in 0..<80 {
                let s1 = e.rotatedRight(14) ^ e.rotatedRight(18) ^ e.rotatedRight(41)
                let ch = (e & f) ^ (~e & g)
                let t1 = hh &+ s1 &+ ch &+ SHA512.k[i] &+ w[i]
                let s0 = a.rotatedRight(28) ^ a.rotatedRight(34) ^ a.rotatedRight(39)
                let maj = (a & b) ^ (a & c) ^ (b & c)
                (hh, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ s0 &+ maj)
            }
            for (index, value) in [a, b, c, d, e, f, g, hh].enumerated() { state[index] = state[index] &+ value }
        }
    }
}

extension UInt64 {
    @inline(__always)
    fileprivate func rotatedRight(_ count: UInt64) -> UInt64 {
        (self >> count) | (self << (64 - count))
    }
}
