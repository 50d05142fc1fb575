/// RFC 3986 percent-encoding, shared by the host and plugins.
public enum RFC3986 {
    /// Percent-encodes everything but the unreserved characters `A–Z a–z 0–9 - . _ ~`, as `%XX` upper-case.
    public static func escape(_ text: String) -> String { escape(text, keeping: isUnreserved) }

    /// Whether `byte` is an unreserved character: `A–Z a–z 0–9 - . _ ~`.
    package static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// Percent-encodes every byte `keep` refuses, as `%XX` upper-case.
    package static func escape(_ text: String, keeping keep: (UInt8) -> Bool) -> String {
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count)
        escape(text, keeping: keep, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `text` to `out`, every byte `keep` refuses percent-encoded as `%XX` upper-case (a
    /// string made of a prefix and an escaped part is made once).
    package static func escape(_ text: String, keeping keep: (UInt8) -> Bool, into out: inout [UInt8]) {
        escape(text.utf8, keeping: keep, into: &out)
    }

    /// Appends `bytes` to `out`, every byte `keep` refuses percent-encoded as `%XX` upper-case.
    package static func escape(_ bytes: some Sequence<UInt8>, keeping keep: (UInt8) -> Bool, into out: inout [UInt8]) {
        for byte in bytes {
            if keep(byte) {
                out.append(byte)
            } else {
                // Three appends, digits by arithmetic: no array made per escaped byte.
                out.append(UInt8(ascii: "%"))
                out.append(upperHexDigit(byte >> 4))
                out.append(upperHexDigit(byte & 0x0f))
            }
        }
    }

    /// The upper-case hex digit of `nibble` (0...15).
    private static func upperHexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }
}
