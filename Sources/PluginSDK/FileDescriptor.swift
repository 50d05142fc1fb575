#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Small POSIX file helpers shared by the host and plugins.
public enum FileDescriptor {
    /// Writes every byte of `bytes` to `fd`, retrying short writes; false when a write fails.
    @discardableResult
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var offset = 0
        while offset < bytes.count {
            #if canImport(Glibc)
            let written = Glibc.write(fd, base + offset, bytes.count - offset)
            #else
            let written = Darwin.write(fd, base + offset, bytes.count - offset)
            #endif
            if written <= 0 { return false }
            offset += written
        }
        return true
    }
}
