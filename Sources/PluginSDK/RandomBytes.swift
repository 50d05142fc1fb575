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
