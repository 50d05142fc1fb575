#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Small POSIX file helpers shared by the host and plugins.
public enum FileDescriptor {
    /// What a file or directory holding private data (a log, a cache, a key) must be.
    public enum PrivateKind: Sendable {
        /// A regular file: mode 0600 or narrower.
        case file
        /// A directory: mode 0700 or narrower.
        case directory
    }

    /// Why `status` (from `fstat` or `lstat`) is not a `kind` private to the current user: not that
    /// kind, owned by another user, or open to group or others; nil when it is. The words are the
    /// same for every such check, e.g. `has mode 644: group or others may read or write it; chmod 600 it`.
    public static func privacyProblem(_ status: stat, _ kind: PrivateKind) -> String? {
        let type = status.st_mode & S_IFMT
        switch kind {
        case .file where type != S_IFREG: return "is not a regular file"
        case .directory where type == S_IFLNK: return "is a symbolic link; name the directory itself"
        case .directory where type != S_IFDIR: return "is not a directory"
        default: break
        }
        guard status.st_uid == geteuid() else { return "is owned by uid \(status.st_uid), not the current user (uid \(geteuid()))" }
        guard status.st_mode & 0o077 == 0 else {
            let mode = String(status.st_mode & 0o777, radix: 8)
            return kind == .file
                ? "has mode \(mode): group or others may read or write it; chmod 600 it"
                : "has mode \(mode): group or others may enter it; chmod 700 it"
        }
        return nil
    }

    /// Writes every byte of `bytes` to `fd`, retrying short and interrupted writes; false when a
    /// write fails.
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
            if written < 0, errno == EINTR { continue }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Writes the UTF-8 bytes of `text` to `fd` as the form that takes a buffer
    /// does; false when a write fails. For log lines: one that cannot be written (standard error
    /// on a full disk or to a closed pipe) is dropped, where `FileHandle.write` traps.
    @discardableResult
    public static func writeAll(_ fd: Int32, _ text: String) -> Bool {
        var text = text
        return text.withUTF8 { writeAll(fd, UnsafeRawBufferPointer($0)) }
    }

    /// The bytes of the regular file at `path` (a symbolic link is not followed), read with one
    /// `open`, `fstat` and as few `read`s as it takes; nil when it cannot be opened, is not a
    /// regular file, is larger than `limit` bytes, or a read fails.
    public static func readFile(_ path: String, limit: Int) -> [UInt8]? {
        guard let (fd, status) = openRegularFile(path, limit: limit) else { return nil }
        defer { close(fd) }
        return read(fd, size: Int(status.st_size))
    }

    /// The bytes of the file at `path` read to its end, whatever its size says: a file of `/proc`
    /// says 0 and gives a page or so a `read` (Foundation's readers stop at the first, and
    /// `/proc/self/maps` came back cut). Nil when it cannot be opened or read, or passes `limit` bytes.
    package static func readToEnd(_ path: String, limit: Int) -> [UInt8]? {
        #if canImport(Glibc)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        #else
        let fd = Darwin.open(path, O_RDONLY | O_CLOEXEC)
        #endif
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = chunk.withUnsafeMutableBytes { buffer in
                #if canImport(Glibc)
                Glibc.read(fd, buffer.baseAddress, buffer.count)
                #else
                Darwin.read(fd, buffer.baseAddress, buffer.count)
                #endif
            }
            if got < 0, errno == EINTR { continue }
            if got < 0 || bytes.count + got > limit { return nil }
            if got == 0 { return bytes }
            bytes += chunk[0..<got]
        }
    }

    /// Opens the regular file at `path` for reading (a symbolic link is not followed), and returns
    /// its descriptor and status; nil when it cannot be opened, is not a regular file, or is
    /// larger than `limit` bytes. The caller closes the descriptor. Opened without blocking: a
    /// FIFO in its place is refused at once, not waited on for a writer.
    public static func openRegularFile(_ path: String, limit: Int) -> (fd: Int32, status: stat)? {
        #if canImport(Glibc)
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        #else
        let fd = Darwin.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        #endif
        guard fd >= 0 else { return nil }
        var status = stat()
        guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, Int(status.st_size) <= limit else {
            close(fd)
            return nil
        }
        return (fd, status)
    }

    /// The first `size` bytes of the file `fd` refers to, read from its start with as few
    /// `pread`s as it takes (the descriptor's offset is neither used nor moved); nil when a read
    /// fails or the file ends sooner.
    public static func read(_ fd: Int32, size: Int) -> [UInt8]? {
        var complete = true
        // Read into the array's own storage (not zero-filled first).
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var offset = 0
            while offset < size {
                let got = pread(fd, buffer.baseAddress! + offset, size - offset, off_t(offset))
                if got < 0, errno == EINTR { continue }
                if got <= 0 { break }
                offset += got
            }
            complete = offset == size
            count = offset
        }
        return complete ? bytes : nil
    }
}
