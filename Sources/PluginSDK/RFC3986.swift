/// RFC 3986 percent-encoding, shared by the host and plugins.
public enum RFC3986 {
    /// Percent-encodes everything but the unreserved characters `A–Z a–z 0–9 - . _ ~`, as `%XX` upper-case.
    public static func escape(_ text: String) -> String {
        escape(text) { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                return true
            default:
                return false
            }
        }
    }

    /// Percent-encodes every byte `keep` refuses, as `%XX` upper-case.
    package static func escape(_ text: String, keeping keep: (UInt8) -> Bool) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if keep(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0f)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
