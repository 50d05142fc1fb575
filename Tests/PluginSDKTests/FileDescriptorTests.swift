import Foundation
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Private files and directories")
struct FileDescriptorTests {
    /// A fresh directory of this test's own, removed by the caller.
    func scratch() throws -> String {
        let path = NSTemporaryDirectory() + "/ph-private-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    func status(_ path: String) -> stat {
        var info = stat()
        #expect(lstat(path, &info) == 0)
        return info
    }

    @Test func eachKindIsCheckedForTypeOwnerAndMode() throws {
        let root = try scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let file = root + "/file"
        #expect(FileManager.default.createFile(atPath: file, contents: nil))
        let directory = root + "/directory"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let link = root + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: directory)

        chmod(file, 0o600)
        chmod(directory, 0o700)
        #expect(FileDescriptor.privacyProblem(status(file), .file) == nil)
        #expect(FileDescriptor.privacyProblem(status(directory), .directory) == nil)
        #expect(FileDescriptor.privacyProblem(status(directory), .file) == "is not a regular file")
        #expect(FileDescriptor.privacyProblem(status(file), .directory) == "is not a directory")
        #expect(FileDescriptor.privacyProblem(status(link), .directory) == "is a symbolic link; name the directory itself")
        #expect(FileDescriptor.privacyProblem(status(link), .file) == "is not a regular file")

        chmod(file, 0o640)
        chmod(directory, 0o701)
        #expect(FileDescriptor.privacyProblem(status(file), .file) == "has mode 640: group or others may read or write it; chmod 600 it")
        #expect(FileDescriptor.privacyProblem(status(directory), .directory) == "has mode 701: group or others may enter it; chmod 700 it")
        // Narrower than 0600 / 0700 is private too.
        chmod(file, 0o400)
        chmod(directory, 0o500)
        #expect(FileDescriptor.privacyProblem(status(file), .file) == nil)
        #expect(FileDescriptor.privacyProblem(status(directory), .directory) == nil)
        chmod(directory, 0o700)
        if geteuid() == 0 {
            #expect(chown(file, 4242, 4242) == 0)
            #expect(FileDescriptor.privacyProblem(status(file), .file) == "is owned by uid 4242, not the current user (uid 0)")
        }
    }
}
