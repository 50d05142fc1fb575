#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Cryptographically random bytes from the operating system's generator.
public enum RandomBytes {
    /// `count` random bytes.
    public static func make(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(0, count))
        bytes.withUnsafeMutableBufferPointer { fill($0) }
        return bytes
    }

    #if os(Linux)
    /// glibc's `getrandom` (2.25 and later; the Glibc module does not declare it), found once.
    private static let systemGetrandom: (@convention(c) (UnsafeMutableRawPointer?, Int, UInt32) -> Int)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "getrandom") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutableRawPointer?, Int, UInt32) -> Int).self)
    }()
    #endif

    /// Fills `buffer` with random bytes: on Linux with `getrandom(2)` (one system call up to 256
    /// bytes), on Darwin with `arc4random_buf`, elsewhere eight bytes at a time from the system
    /// generator.
    public static func fill(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        #if os(Linux)
        var filled = 0
        while let getrandom = systemGetrandom, filled < buffer.count {
            let got = getrandom(base + filled, buffer.count - filled, 0)
            if got > 0 {
                filled += got
            } else if got < 0, errno != EINTR {
                break
            }
        }
        if filled == buffer.count { return }
        #elseif canImport(Darwin)
        arc4random_buf(base, buffer.count)
        return
        #endif
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
