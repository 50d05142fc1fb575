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

    /// Fills `buffer` with random bytes: on Linux from `getrandom(2)` (small requests from a
    /// per-thread pool it refills, so a nonce costs no system call; a forked child never reuses
    /// the parent's pool), on Darwin with `arc4random_buf`, elsewhere eight bytes at a time from
    /// the system generator.
    public static func fill(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        #if os(Linux)
        if buffer.count <= RandomPool.size / 4, let pool = RandomPool.current, pool.take(into: base, count: buffer.count) { return }
        if getrandomAll(base, buffer.count) { return }
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

    #if os(Linux)
    /// `count` bytes from `getrandom(2)`; false when it is missing or fails.
    static func getrandomAll(_ base: UnsafeMutablePointer<UInt8>, _ count: Int) -> Bool {
        var filled = 0
        while let getrandom = systemGetrandom, filled < count {
            let got = getrandom(base + filled, count - filled, 0)
            if got > 0 {
                filled += got
            } else if got < 0, errno != EINTR {
                break
            }
        }
        return filled == count
    }
    #endif
}

#if os(Linux)
/// A thread's unused bytes from `getrandom(2)`. Bytes are handed out once and wiped; the pool
/// is refilled when short, and emptied in a forked child (which would otherwise hand out the
/// same bytes as its parent).
final class RandomPool {
    /// One system call per 256 nonces of 16 bytes (with 256 bytes, the call came every 16 and
    /// cost more than the nonces it served).
    static let size = 4096
    private let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: RandomPool.size)
    private var left = 0
    private var generation = 0

    deinit {
        bytes.update(repeating: 0, count: Self.size)
        bytes.deallocate()
    }

    /// Copies `count` unused bytes to `target`; false when the pool cannot be refilled.
    func take(into target: UnsafeMutablePointer<UInt8>, count: Int) -> Bool {
        Self.forkHandler
        let current = Self.forks
        if generation != current {
            bytes.update(repeating: 0, count: Self.size)
            left = 0
            generation = current
        }
        if left < count {
            guard RandomBytes.getrandomAll(bytes, Self.size) else { return false }
            left = Self.size
        }
        let start = bytes + (Self.size - left)
        target.update(from: start, count: count)
        start.update(repeating: 0, count: count)
        left -= count
        return true
    }

    /// Registers the fork handler once: a child counts its fork, so pools made before it are emptied.
    private static let forkHandler: Void = {
        pthread_atfork(nil, nil) { RandomPool.forks &+= 1 }
    }()

    // Written only by the atfork child handler, while the child has a single thread.
    nonisolated(unsafe) private static var forks = 0

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<RandomPool>.fromOpaque(pointer).release()
        }
        return key
    }()

    /// This thread's pool.
    static var current: RandomPool? {
        if let existing = pthread_getspecific(key) { return Unmanaged<RandomPool>.fromOpaque(existing).takeUnretainedValue() }
        let pool = RandomPool()
        guard pthread_setspecific(key, Unmanaged.passRetained(pool).toOpaque()) == 0 else { return nil }
        return pool
    }
}
#endif
