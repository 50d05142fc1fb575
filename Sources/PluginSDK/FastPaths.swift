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
