extension HTTPHeader {
    /// Whether two header names are equal ignoring ASCII case (header names are ASCII tokens).
    @inlinable
    public static func namesEqual(_ a: String, _ b: String) -> Bool {
        var left = a.utf8.makeIterator(), right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil):
                return true
            case (let x?, let y?):
                if x == y { continue }
                let lx = x &- 65 < 26 ? x | 0x20 : x
                let ly = y &- 65 < 26 ? y | 0x20 : y
                if lx != ly { return false }
            default:
                return false
            }
        }
    }
}

/// Cryptographically random bytes in one system call where the platform has one.
public enum RandomBytes {
    /// `count` random bytes.
    public static func make(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(0, count))
        bytes.withUnsafeMutableBufferPointer { fill($0) }
        return bytes
    }

    /// Fills `buffer` with random bytes, eight at a time from the system generator.
    public static func fill(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        var generator = SystemRandomNumberGenerator()
        var index = 0
        while index < buffer.count {
            var word = generator.next()
            for _ in 0..<min(8, buffer.count - index) {
                buffer[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
    }
}

extension Array where Element == HTTPHeader {
    /// The `index`-th value of the field `name` (case-insensitive).
    public func value(named name: String, index: Int = 0) -> String? {
        var seen = 0
        for header in self where HTTPHeader.namesEqual(header.name, name) {
            if seen == index { return header.value }
            seen += 1
        }
        return nil
    }

    /// Every value of the field `name`, in order.
    public func values(named name: String) -> [String] {
        filter { HTTPHeader.namesEqual($0.name, name) }.map(\.value)
    }

    /// Replaces every field named `name` with one field, or removes them when `value` is nil.
    public mutating func set(named name: String, value: String?) {
        removeAll { HTTPHeader.namesEqual($0.name, name) }
        if let value { append(HTTPHeader(name: name, value: value)) }
    }
}

/// RFC 3986 percent-encoding, shared by the host and plugins.
public enum RFC3986 {
    /// Percent-encodes everything but the unreserved characters `A–Z a–z 0–9 - . _ ~`, as `%XX` upper-case.
    public static func escape(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0f)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Reads every value of a header through an indexed getter (as the views' backends offer).
enum HeaderReading {
    static func values(named name: String, _ header: (String, Int) -> String?) -> [String] {
        var values: [String] = []
        while let value = header(name, values.count) { values.append(value) }
        return values
    }
}

extension Array where Element == HTTPHeader {
    /// The fields as a dictionary, repeated names folded into one value joined by ", " as
    /// RFC 9110 §5.3 says, for requests and responses alike (the first spelling of a name is kept).
    public func folded() -> [String: String] {
        let separator = ", "
        var fields: [String: String] = [:]
        var order: [String] = []
        for header in self {
            if let existing = order.first(where: { HTTPHeader.namesEqual($0, header.name) }) {
                fields[existing] = fields[existing]! + separator + header.value
            } else {
                order.append(header.name)
                fields[header.name] = header.value
            }
        }
        return fields
    }
}
