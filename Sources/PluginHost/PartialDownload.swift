import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A download's body while it arrives: a file of its own in the temporary directory
/// (`PluginHost-<UUID>.download`, created exclusively, mode 0600), written in order. Whoever
/// holds it either ``finish()``es it (the file is then theirs to move into place) or
/// ``remove()``s it; both transports keep to that, so a stopped or failed download leaves no file.
struct PartialDownload: Sendable {
    /// The file's path.
    let path: String
    private var descriptor: Int32
    /// The `errno` of the write that failed (0 while none has).
    private(set) var writeError: Int32 = 0

    /// Creates the file.
    init() throws(TransportFailure) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("PluginHost-\(UUID().uuidString).download").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw TransportFailure(kind: .other, message: "cannot create the download file \(path): \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.descriptor = descriptor
    }

    /// Appends all of `bytes`; false when the file refused them (``writeError`` says why).
    mutating func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard descriptor >= 0 else { return false }
        errno = 0
        guard FileDescriptor.writeAll(descriptor, bytes) else {
            // No error number when the disk took no byte: it is full.
            writeError = errno != 0 ? errno : ENOSPC
            return false
        }
        return true
    }

    /// Appends `data`; false when the file refused it.
    mutating func write(_ data: Data) -> Bool {
        data.withUnsafeBytes { write($0) }
    }

    /// Empties the file: the body of a redirect followed is not the download.
    func restart() {
        _ = ftruncate(descriptor, 0)
        _ = lseek(descriptor, 0, SEEK_SET)
    }

    /// Why the last write failed, for a failure's message.
    var writeFailure: String {
        "cannot write the download file \(path): \(String(cString: strerror(writeError)))"
    }

    /// Closes the file and leaves it in place: the caller moves it (or removes it).
    mutating func finish() -> String {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
        return path
    }

    /// Closes and removes the file.
    mutating func remove() {
        unlink(finish())
    }
}
