import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(Glibc)
import Glibc
#endif

/// Where a plugin library's dependencies come from is checked as the library is: `dlopen` would
/// search every directory its `RUNPATH` names and load what it finds there beside the verified
/// library. The fixture libraries are patched in place (their `RUNPATH` string overwritten), so
/// each case is a real ELF file the dynamic loader would follow.
@Suite("Library dependencies")
struct LibraryDependencyTests {
    static let chmodHint = "remove group and other write access (chmod go-w)"

    /// The C fixture library with its `RUNPATH` replaced by `runpath`, written into `f.root`.
    func patched(_ f: PluginFixtures, runpath: String) throws -> String {
        let path = f.root + "/libpatched-\(UUID().uuidString.prefix(8)).so"
        try install(try variant(runpath: runpath), at: path)
        return path
    }

    /// The refusal of `file`, of `mode` (`0777`, `0666`: writable by group and others) and the
    /// current user's, which is `role`.
    static func writable(_ file: String, mode: String, is role: String) -> PluginLoadError {
        PluginLoadError(
            .insecurePermissions, file: file,
            reason: "mode \(mode) (writable by group and others), owner \(LoadPathPermissionTests.me), is \(role); \(chmodHint)")
    }

    func refusal(_ path: String) -> PluginLoadError? {
        do {
            _ = try PluginLibrary.open(path: path)
            Issue.record("expected \(path) to be refused")
            return nil
        } catch {
            return error
        }
    }

    /// A short directory others may write to (`/tmp/ph-XXXXXX`, mode 0777): it has to fit where
    /// the toolchain's path was.
    func openDirectory() throws -> String { try ScratchDirectories(0o777)[0] }

    /// Short fresh directories (`/tmp/ph-XXXXXX`: they have to fit where the toolchain's path
    /// was), each with its mode, removed with what they hold by ``remove()``.
    struct ScratchDirectories {
        let paths: [String]

        init(_ modes: mode_t...) throws {
            paths = try modes.map { mode in
                var template = Array("/tmp/ph-XXXXXX".utf8CString)
                let made = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
                let directory = String(cString: made)
                chmod(directory, mode)
                return directory
            }
        }

        subscript(index: Int) -> String { paths[index] }

        func remove() {
            for path in paths { try? FileManager.default.removeItem(atPath: path) }
        }
    }

    @Test func theFixturesNeedOnlyTrustedDirectories() throws {
        let found = try #require(
            try ELFDependencies.read(try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library("CPluginTestPlugin")))))
        #expect(found.searchPaths.map(\.tag) == ["RUNPATH"])
        #expect(found.searchPaths.first?.value.hasSuffix(":$ORIGIN") == true)
        #expect(found.needed.map(\.value).contains("libc.so.6"))
        #expect(try ELFDependencies.read(Data("not an ELF file at all, but long enough to be read as one if it were".utf8)) == nil)
    }

    /// `LD_LIBRARY_PATH`, searched before `RUNPATH`, is checked alike for the libraries a plugin
    /// needs by name: an empty or relative entry (the working directory) and a directory others
    /// may write to are refused; trusted directories pass.
    /// The loader read `LD_LIBRARY_PATH` when the process started: what it sets or unsets later
    /// changes nothing the loader searches, so the check reads the block the process started
    /// with (`/proc/self/environ`), the last of a name winning as the loader reads it (glibc takes
    /// each `LD_LIBRARY_PATH` in turn: `LD_DEBUG=libs` shows the second of two searched). (Setting the
    /// variable here to show it would reach the child processes other tests start meanwhile.)
    @Test func theLoadersLibraryPathIsTheOneTheProcessStartedWith() throws {
        let started = LoaderEnvironment.parse([UInt8](try Data(contentsOf: URL(fileURLWithPath: "/proc/self/environ"))))
        #expect(!started.isEmpty)
        #expect(LoaderEnvironment.atStart == started)
        #expect(LoaderEnvironment.parse(Array("A=1\0LD_LIBRARY_PATH=/x:/y\0A=2\0B\0C=\0".utf8)) == ["A": "2", "LD_LIBRARY_PATH": "/x:/y", "C": ""])
    }

    @Test func ldLibraryPathIsCheckedAsRunpathIs() throws {
        let path = try PluginFixtures.library("CPluginTestPlugin")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        func check(_ value: String) -> PluginLoadError? {
            do {
                try FileSecurity.checkDependencies(of: bytes, path: path, environment: ["LD_LIBRARY_PATH": value])
                return nil
            } catch {
                return error
            }
        }
        #expect(check("/usr/lib:/lib") == nil)
        // An empty value names no directory (`LD_LIBRARY_PATH= ./app`, a common way to clear it).
        #expect(check("") == nil)
        for (value, entry) in [("/usr/lib:", ""), ("lib", "lib"), ("/usr/lib;;/lib", "")] {
            #expect(
                check(value)
                    == PluginLoadError(
                        .insecurePermissions, file: path,
                        reason: "the LD_LIBRARY_PATH entry \(entry.debugDescription), searched for the libraries \(path) needs, is relative "
                            + "(empty: the working directory): it would be searched in whatever directory the app runs in; make it absolute"),
                "\(value)")
        }
        #expect(check("/usr/$LIB")?.reason.hasSuffix("holds a token; name the directory itself") == true)
        let open = try openDirectory()
        defer { rmdir(open) }
        #expect(
            check("/usr/lib:" + open)
                == Self.writable(
                    open, mode: "0777",
                    is: "a directory the loader searches for libraries "
                        + "(the LD_LIBRARY_PATH entry \(open.debugDescription), searched for the libraries \(path) needs,)"))
    }

    /// An `LD_LIBRARY_PATH` entry whose bytes are not UTF-8 text is refused. Read with a
    /// replacement character, it named a directory that does not exist, and passed, while the
    /// loader searches the bytes as they are: here a directory others may write to.
    @Test func aLibraryPathEntryThatIsNotUTF8IsRefused() throws {
        let path = try PluginFixtures.library("CPluginTestPlugin")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let trusted = try ScratchDirectories(0o755)[0]
        defer { try? FileManager.default.removeItem(atPath: trusted) }
        let open = try Self.directoryNotUTF8(under: trusted)
        defer { Self.remove(open) }
        // The environment block as the process would have started with it.
        let environment = LoaderEnvironment.parse(Array("LD_LIBRARY_PATH=/usr/lib:".utf8) + open + [0])
        let entry = try #require(environment["LD_LIBRARY_PATH"]?.split(separator: ":").last.map(String.init))
        #expect(
            throws: PluginLoadError(
                .insecurePermissions, file: path,
                reason: "the LD_LIBRARY_PATH entry \(entry.debugDescription), searched for the libraries \(path) needs, is not UTF-8 text "
                    + "(or names U+FFFD), so the directory the loader would search cannot be checked; name it in UTF-8")
        ) {
            try FileSecurity.checkDependencies(of: bytes, path: path, environment: environment)
        }
    }

    @Test func aRunpathDirectoryOthersMayWriteToIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let open = try openDirectory()
        defer { rmdir(open) }
        let library = try patched(f, runpath: open)
        #expect(
            refusal(library)
                == Self.writable(
                    open, mode: "0777",
                    is: "a directory the loader searches for libraries "
                        + "(the RUNPATH entry \(open.debugDescription) of the library \(library))"))
    }

    /// A `RUNPATH` whose bytes are not UTF-8 text is refused. Read with a replacement character,
    /// it named a directory that does not exist, judged by the trusted one above it, and passed,
    /// while the loader searches the bytes as they are: here a directory others may write to.
    @Test func aRunpathThatIsNotUTF8IsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let trusted = try ScratchDirectories(0o755)[0]
        defer { try? FileManager.default.removeItem(atPath: trusted) }
        let open = try Self.directoryNotUTF8(under: trusted)
        defer { Self.remove(open) }
        let (library, offset) = try notUTF8(f, under: trusted, rpath: false)
        #expect(refusal(library) == PluginLoadError(.notSharedObject, file: library, reason: Self.notUTF8("RUNPATH", at: offset)))
    }

    /// A program or library that loads plugins (a caller) whose `RPATH` is not UTF-8 text is
    /// refused too: passed over, every entry of its `RPATH` went unchecked.
    @Test func aCallersRpathThatIsNotUTF8IsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let trusted = try ScratchDirectories(0o755)[0]
        defer { try? FileManager.default.removeItem(atPath: trusted) }
        let (caller, offset) = try notUTF8(f, under: trusted, rpath: true)
        let plugin = try patched(f, runpath: trusted)
        #expect(
            try refusal(of: plugin, callers: [caller])
                == PluginLoadError(.notSharedObject, file: caller, reason: Self.notUTF8("RPATH", at: offset) + " (of \(caller), which loads plugins)")
        )
    }

    /// Makes `<directory>/\xFF`, mode 0777, with the raw byte (no Swift string names it); its
    /// path's bytes.
    static func directoryNotUTF8(under directory: String) throws -> [UInt8] {
        let path = Array(directory.utf8) + [UInt8(ascii: "/"), 0xFF]
        try #require((path + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { mkdir($0.baseAddress!, 0o777) } } == 0)
        _ = (path + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { chmod($0.baseAddress!, 0o777) } }
        return path
    }

    /// Removes a directory ``directoryNotUTF8(under:)`` made.
    static func remove(_ path: [UInt8]) {
        _ = (path + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { rmdir($0.baseAddress!) } }
    }

    /// The fixture library with its search path `<directory>/\xFF` (a `RUNPATH`, or an `RPATH`),
    /// installed in `f.root`, and the string's offset.
    func notUTF8(_ f: PluginFixtures, under directory: String, rpath: Bool) throws -> (path: String, offset: Int) {
        var bytes = try variant(runpath: directory + "/X", rpath: rpath)
        let entry = try #require(try ELFDependencies.read(bytes)?.searchPaths.first)
        bytes[entry.offset + directory.utf8.count + 1] = 0xFF
        let path = f.root + "/libnotutf8-\(rpath ? "rpath" : "runpath").so"
        try install(bytes, at: path)
        return (path, entry.offset)
    }

    /// The refusal of a `tag` string at `offset` that is not UTF-8.
    static func notUTF8(_ tag: String, at offset: Int) -> String {
        "malformed ELF dynamic section: the \(tag) string at offset \(offset) is not UTF-8 text, so the path the loader would take cannot be checked"
    }

    /// A directory that does not exist is judged by the one above it: who may write there may
    /// make it. A symbolic link to nothing is refused (whoever may make its target decides).
    @Test func aMissingRunpathDirectoryIsJudgedByTheOneAboveIt() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let open = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: open) }
        let library = try patched(f, runpath: open + "/lib")
        #expect(
            refusal(library)
                == Self.writable(
                    open, mode: "0777",
                    is: "the nearest directory above "
                        + "\(open)/lib (the RUNPATH entry \((open + "/lib").debugDescription) of the library \(library), which does not exist: "
                        + "who may write here may make it)"))
        chmod(open, 0o755)
        try FileManager.default.createSymbolicLink(atPath: open + "/lib", withDestinationPath: open + "/nowhere")
        #expect(
            refusal(library)
                == PluginLoadError(
                    .insecurePermissions, file: open + "/lib",
                    reason: "a symbolic link to nothing on the path of a directory the loader searches for libraries "
                        + "(the RUNPATH entry \((open + "/lib").debugDescription) of the library \(library)); whoever may make its target "
                        + "decides what is loaded: remove it or make its target"))
    }

    /// A library the loader would find in a searched directory under a name the library needs
    /// is checked as the library is.
    @Test func aLibraryOthersMayWriteToInASearchedDirectoryIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let open = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: open) }
        chmod(open, 0o755)
        #expect(FileManager.default.createFile(atPath: open + "/libc.so.6", contents: Data()))
        chmod(open + "/libc.so.6", 0o666)
        let library = try patched(f, runpath: open)
        #expect(
            refusal(library)
                == Self.writable(
                    open + "/libc.so.6", mode: "0666",
                    is: "a library the loader would "
                        + "load from \(open) (the RUNPATH entry \(open.debugDescription) of the library \(library))"))
    }

    /// `..` is refused wherever it is: after `$ORIGIN` it leaves the directory the bytes are
    /// opened from (`/proc/self/fd/..` is `/proc/self`, whose `cwd` is the working directory),
    /// and after a symbolic link it goes where the link's target is. `$ORIGIN` followed by more
    /// name (`$ORIGINx`) is no token for the loader: refused as another token.
    @Test func dotDotAndOriginWithMoreNameAreRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for (runpath, why) in [
            ("$ORIGIN/../cwd/lib", "climbs with ..; name the directory itself"),
            ("/opt/link/../lib", "climbs with ..; name the directory itself"),
            ("$ORIGINx/lib", "holds a token other than $ORIGIN; remove it"),
        ] {
            let library = try patched(f, runpath: runpath)
            #expect(
                refusal(library)
                    == PluginLoadError(
                        .insecurePermissions, file: library, reason: "the RUNPATH entry \(runpath.debugDescription) of the library \(library) \(why)")
            )
        }
    }

    /// An empty `RUNPATH` string names no directory (glibc ignores it; `patchelf --set-rpath ''`
    /// leaves one): such a library is not refused as holding a relative entry.
    @Test func anEmptyRunpathNamesNoDirectory() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let library = try patched(f, runpath: "")
        #expect(throws: Never.self) { try FileSecurity.checkDependencies(of: try Data(contentsOf: URL(fileURLWithPath: library)), path: library) }
    }

    /// Offsets and sizes past the end of the file (up to `UInt64.max`) are refused, never a
    /// trap; and a thousand random bytes changed in the headers are read or refused, never a trap.
    @Test func malformedHeadersAreRefusedNeverATrap() throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library("CPluginTestPlugin")))
        func field(_ data: Data, _ offset: Int, _ size: Int) -> Int {
            (0..<size).reversed().reduce(0) { $0 << 8 | Int(data[offset + $1]) }
        }
        func setting(_ data: Data, _ offset: Int, _ value: UInt64) -> Data {
            var copy = data
            for index in 0..<8 { copy[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
            return copy
        }
        let table = field(bytes, 32, 8)
        let size = field(bytes, 54, 2)
        let dynamic = try #require((0..<field(bytes, 56, 2)).map { table + $0 * size }.first { field(bytes, $0, 4) == 2 })
        for (offset, value) in [(8, UInt64(Int.max)), (8, UInt64.max), (32, UInt64(Int.max)), (32, UInt64.max)] {
            #expect(throws: ELFDependencies.Malformed.self) { try ELFDependencies.read(setting(bytes, dynamic + offset, value)) }
        }
        #expect(throws: ELFDependencies.Malformed.self) { try ELFDependencies.read(setting(bytes, 32, UInt64.max)) }
        var generator = SystemRandomNumberGenerator()
        let headers = table + field(bytes, 56, 2) * size
        for _ in 0..<1000 {
            var mutated = bytes
            for _ in 0..<4 { mutated[Int.random(in: 0..<headers, using: &generator)] = UInt8.random(in: 0...255, using: &generator) }
            _ = try? ELFDependencies.read(mutated)
        }
    }

    /// The loader reads the dynamic section at its address, not at its file offset: a library
    /// whose program header points the offset at other bytes (entries the check would read in
    /// place of those the loader follows) is refused, naming both.
    @Test func aDynamicSectionOffsetThatIsNotItsAddressIsRefused() throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library("CPluginTestPlugin")))
        func field(_ offset: Int, _ size: Int) -> UInt64 {
            (0..<size).reversed().reduce(0) { $0 << 8 | UInt64(bytes[offset + $1]) }
        }
        let table = Int(field(32, 8))
        let size = Int(field(54, 2))
        let dynamic = try #require((0..<Int(field(56, 2))).map { table + $0 * size }.first { field($0, 4) == 2 })
        let (offset, address) = (field(dynamic + 8, 8), field(dynamic + 16, 8))
        var moved = bytes
        for index in 0..<8 { moved[dynamic + 8 + index] = UInt8(truncatingIfNeeded: (offset + 16) >> (8 * UInt64(index))) }
        #expect(
            throws: ELFDependencies.Malformed(
                reason: "the dynamic section's file offset \(offset + 16) is not where its address \(address) is loaded from (\(offset))")
        ) { try ELFDependencies.read(moved) }
        // An address in no loaded segment: the loader could not read it at all.
        var nowhere = bytes
        for index in 0..<8 { nowhere[dynamic + 16 + index] = UInt8(truncatingIfNeeded: UInt64(1 << 40) >> (8 * UInt64(index))) }
        #expect(throws: ELFDependencies.Malformed(reason: "the dynamic section is in no loaded segment")) { try ELFDependencies.read(nowhere) }
    }

    /// The loader reads dynamic entries until `DT_NULL`, past the section's size if need be, and
    /// maps loaded segments over each other by whole pages: a section whose end is not within
    /// its size, one that runs past its segment's bytes, and segments that share a page, are refused.
    @Test func entriesPastTheSectionOrSegmentsSharingAPageAreRefused() throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library("CPluginTestPlugin")))
        func field(_ offset: Int, _ size: Int) -> UInt64 {
            (0..<size).reversed().reduce(0) { $0 << 8 | UInt64(bytes[offset + $1]) }
        }
        func setting(_ offset: Int, _ value: UInt64) -> Data {
            var copy = bytes
            for index in 0..<8 { copy[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(index))) }
            return copy
        }
        let table = Int(field(32, 8))
        let size = Int(field(54, 2))
        let headers = (0..<Int(field(56, 2))).map { table + $0 * size }
        let dynamic = try #require(headers.first { field($0, 4) == 2 })
        #expect(throws: ELFDependencies.Malformed(reason: "the dynamic section has no DT_NULL entry within its 16 bytes")) {
            try ELFDependencies.read(setting(dynamic + 32, 16))
        }
        let loads = headers.filter { field($0, 4) == 1 }
        try #require(loads.count >= 2)
        // A section that runs past its segment's bytes in the file: the loader would see others there.
        let address = field(dynamic + 16, 8)
        let holding = try #require(loads.first { address >= field($0 + 16, 8) && address - field($0 + 16, 8) < field($0 + 32, 8) })
        let remaining = field(holding + 32, 8) - (address - field(holding + 16, 8))
        #expect(throws: ELFDependencies.Malformed(reason: "the dynamic section (\(remaining + 16) bytes) runs past its loaded segment")) {
            try ELFDependencies.read(setting(dynamic + 32, remaining + 16))
        }
        // The second loaded segment moved onto the first one's page.
        #expect(throws: ELFDependencies.Malformed(reason: "loaded segments 0 and 1 share a page")) {
            try ELFDependencies.read(setting(loads[1] + 16, field(loads[0] + 16, 8)))
        }
    }

    @Test func aRelativeRunpathOrAnotherTokenIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let relative = try patched(f, runpath: "/opt/swift/usr/lib:lib")
        #expect(
            refusal(relative)
                == PluginLoadError(
                    .insecurePermissions, file: relative,
                    reason: "the RUNPATH entry \"lib\" of the library \(relative) is relative: it would be searched in whatever "
                        + "directory the app runs in; make it absolute or $ORIGIN"))
        let token = try patched(f, runpath: "$LIB/x")
        #expect(
            refusal(token)
                == PluginLoadError(
                    .insecurePermissions, file: token,
                    reason: "the RUNPATH entry \"$LIB/x\" of the library \(token) holds a token other than $ORIGIN; remove it"))
    }

    /// A library cut short before its dynamic section ends is refused before `dlopen` reads it,
    /// with where the reading stopped.
    @Test func aTruncatedDynamicSectionIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library("CPluginTestPlugin")))
        let entry = try #require(try ELFDependencies.read(bytes)?.searchPaths.first)
        // Past the RUNPATH string's first byte: the table and the dynamic entries naming it may
        // still be there, the string's end is not.
        let path = f.root + "/libtruncated.so"
        try bytes.prefix(entry.offset + 1).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o755)
        let error = refusal(path)
        #expect(error?.kind == .notSharedObject)
        #expect(error?.file == path)
        #expect(error?.reason.hasPrefix("malformed ELF dynamic section: ") == true, "\(String(describing: error))")
    }

    /// On Linux the verified bytes are loaded from an anonymous memory file, sealed before
    /// `dlopen` reads it: nobody, not even a process of the same user writing through `/proc`,
    /// can change what was verified.
    #if os(Linux)
    @Test func theVerifiedBytesAreLoadedFromASealedMemoryFile() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        // Bytes never loaded before (a fresh RUNPATH), so they are opened now.
        let path = try patched(f, runpath: "$ORIGIN:/opt/\(UUID().uuidString.prefix(8))")
        _ = try PluginLibrary.open(path: path)
        let label = "/memfd:pluginhost:\((path as NSString).lastPathComponent) (deleted)"
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap(Int32.init)
        let fd = try #require(descriptors.first { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == label })
        #expect(fcntl(fd, MemoryFile.getSeals) == MemoryFile.allSeals)
        #expect(write(fd, "x", 1) == -1)
        #expect(errno == EPERM)
    }
    #endif

    /// The loader returns a library already loaded under a name asked for again: a memory file
    /// whose number once named another library (loaded as `/proc/self/fd/N` by other code, its
    /// descriptor closed since) must still load its own bytes.
    #if os(Linux)
    @Test func aMemoryFileNumberUsedBeforeStillLoadsItsOwnBytes() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let fd = Glibc.open(try PluginFixtures.library("CPluginTestPlugin"), O_RDONLY)
        try #require(fd >= 0)
        let other = try #require(dlopen("/proc/self/fd/\(fd)", RTLD_NOW | RTLD_LOCAL))
        close(fd)
        _ = other
        // Fresh bytes (a RUNPATH of their own), opened now; their memory file takes the lowest
        // free number, most likely the one just closed.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library("AlphaTestPlugin")))
        let entry = try #require(try ELFDependencies.read(bytes)?.searchPaths.first)
        let runpath = Array("$ORIGIN:/opt/\(UUID().uuidString.prefix(8))".utf8)
        bytes.replaceSubrange(entry.offset..<(entry.offset + runpath.count), with: runpath)
        bytes[entry.offset + runpath.count] = 0
        let path = f.root + "/libalpha-fresh.so"
        try bytes.write(to: URL(fileURLWithPath: path))
        chmod(path, 0o755)
        #expect(try PluginLibrary.open(path: path).info.name == "alpha")
    }
    #endif

    #if os(Linux)
    /// A memory file closed by code of the app's ("close every descriptor above 2") leaves its
    /// number's name loaded: the next library's memory file, given that number, loads its own
    /// bytes (`dlopen` returned the first library for the name, and its descriptor was read).
    @Test func aMemoryFileNumberWhoseNameIsLoadedIsNotUsed() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        func fresh(_ product: String, _ file: String) throws -> String {
            var bytes = try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library(product)))
            let entry = try #require(try ELFDependencies.read(bytes)?.searchPaths.first)
            let runpath = Array("$ORIGIN:/opt/\(UUID().uuidString.prefix(8))".utf8)
            bytes.replaceSubrange(entry.offset..<(entry.offset + runpath.count), with: runpath)
            bytes[entry.offset + runpath.count] = 0
            let path = f.root + "/" + file
            try bytes.write(to: URL(fileURLWithPath: path))
            chmod(path, 0o755)
            return path
        }
        let alpha = try PluginLibrary.open(path: try fresh("AlphaTestPlugin", "libalpha-closed.so"))
        #expect(alpha.info.name == "alpha")
        // Its memory file, found by its label, closed behind the loader's back.
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap(Int32.init)
        let memory = descriptors.filter { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"))?.contains("pluginhost:libalpha-closed.so") == true
        }
        try #require(memory.count == 1)
        close(memory[0])
        let beta = try PluginLibrary.open(path: try fresh("BetaTestPlugin", "libbeta-after.so"))
        #expect(beta.info.name == "beta")
    }
    #endif

    /// `$ORIGIN` alone, or below it, is the verified copy's private directory: accepted, and the
    /// library loads.
    @Test func originItselfIsAccepted() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for runpath in ["$ORIGIN", "${ORIGIN}/lib:/opt/swift"] {
            let library = try PluginLibrary.open(path: try patched(f, runpath: runpath))
            #expect(library.info.name == "cplugin")
        }
    }

    /// The fixture library's bytes with its `RUNPATH` replaced by `runpath`, its `RUNPATH` entry
    /// made an `RPATH` one when `rpath`, and a name it needs replaced when `needing` says which.
    func variant(runpath: String, rpath: Bool = false, needing rename: (old: String, new: String)? = nil) throws -> Data {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library("CPluginTestPlugin")))
        let found = try #require(try ELFDependencies.read(bytes))
        let entry = try #require(found.searchPaths.first)
        let room = entry.value.utf8.count
        try #require(runpath.utf8.count <= room, "\(runpath) does not fit in the \(room) bytes of \(entry.value)")
        bytes.replaceSubrange(entry.offset..<(entry.offset + room), with: Array(runpath.utf8) + Array(repeating: 0, count: room - runpath.utf8.count))
        if let rename {
            let needed = try #require(found.needed.first { $0.value == rename.old })
            try #require(rename.new.utf8.count == rename.old.utf8.count)
            bytes.replaceSubrange(needed.offset..<(needed.offset + rename.new.utf8.count), with: Array(rename.new.utf8))
        }
        if rpath {
            try retag(&bytes, from: 29, to: 15) { $0.searchPaths.map(\.tag) == ["RPATH"] }
        }
        let read = try #require(try ELFDependencies.read(bytes))
        #expect(read.searchPaths.map(\.value) == [runpath])
        if let rename { #expect(read.needed.map(\.value).contains(rename.new)) }
        return bytes
    }

    /// Changes the tag of one dynamic entry of `bytes` from `old` to `new`: the first 8-byte word
    /// holding `old` that, changed, makes the entries read as `changed` says.
    func retag(_ bytes: inout Data, from old: UInt64, to new: UInt64, _ changed: (ELFDependencies) -> Bool) throws {
        func word(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        for offset in stride(from: 0, to: bytes.count - 16, by: 8) where bytes[offset..<(offset + 8)].elementsEqual(word(old)) {
            bytes.replaceSubrange(offset..<(offset + 8), with: word(new))
            if let read = (try? ELFDependencies.read(bytes)) ?? nil, changed(read) { return }
            bytes.replaceSubrange(offset..<(offset + 8), with: word(old))
        }
        Issue.record("no dynamic entry tagged \(old) found to tag \(new)")
    }

    /// Writes `bytes` to `path` with mode 0755.
    func install(_ bytes: Data, at path: String) throws {
        try bytes.write(to: URL(fileURLWithPath: path))
        chmod(path, 0o755)
    }

    /// What `checkDependencies` says of the library at `path` (nil: it passes).
    func dependencyRefusal(_ path: String) throws -> PluginLoadError? {
        try refusal(of: path, callers: FileSecurity.DependencyWalk.callers)
    }

    /// What `checkDependencies` says of the library at `path` with the loader's cache read from
    /// `cache`, the default directories `defaults` and the `RPATH`s of `callers` (nil: it passes).
    func refusal(
        of path: String, cache: String = LoaderCache.path, defaults: [String] = LoaderCache.defaultDirectories, callers: [String] = []
    ) throws -> PluginLoadError? {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        do {
            try FileSecurity.checkDependencies(
                of: bytes, path: path, environment: [:], loaderCache: cache, defaultDirectories: defaults, callers: callers)
            return nil
        } catch {
            return error
        }
    }

    /// A library the loader takes from a checked directory has entries of its own, which the
    /// loader follows as it does the plugin's: they are checked alike, to the end of the chain.
    /// Here the plugin's `RUNPATH` is a trusted directory holding a `libc.so.6` whose own
    /// `RUNPATH` is a directory others may write to.
    @Test func theEntriesOfALibraryFoundThroughRunpathAreCheckedToo() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let scratch = try ScratchDirectories(0o755, 0o777)
        defer { scratch.remove() }
        let (trusted, open) = (scratch[0], scratch[1])
        let dependency = trusted + "/libc.so.6"
        try install(try variant(runpath: open), at: dependency)
        let plugin = f.root + "/libchain.so"
        try install(try variant(runpath: trusted), at: plugin)
        let expected = Self.writable(
            open, mode: "0777",
            is: "a directory the loader searches for "
                + "libraries (the RUNPATH entry \(open.debugDescription) of the library \(dependency) (needed by the library \(plugin)))")
        #expect(try dependencyRefusal(plugin) == expected)
        #expect(refusal(plugin) == expected)
        // One more link: the plugin → a trusted library → another trusted one → the open directory.
        let middle = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: middle) }
        chmod(middle, 0o755)
        try install(try variant(runpath: middle), at: dependency)
        try install(try variant(runpath: open), at: middle + "/libc.so.6")
        #expect(
            try dependencyRefusal(plugin)
                == Self.writable(
                    open, mode: "0777",
                    is: "a directory the loader searches "
                        + "for libraries (the RUNPATH entry \(open.debugDescription) of the library \(middle)/libc.so.6 (needed by the "
                        + "library \(dependency)))"))
        chmod(open, 0o755)
        #expect(try dependencyRefusal(plugin) == nil)
    }

    /// For a library the plugin needs, `$ORIGIN` is the directory it was found in: an entry
    /// below or beside it (with `..`) is checked as the directory it names.
    @Test func aDependencysOriginIsTheDirectoryItWasFoundIn() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let scratch = try ScratchDirectories(0o755, 0o777)
        defer { scratch.remove() }
        let (trusted, open) = (scratch[0], scratch[1])
        mkdir(trusted + "/x", 0o755)
        chmod(trusted + "/x", 0o777)
        let dependency = trusted + "/libc.so.6"
        let plugin = f.root + "/liborigin.so"
        try install(try variant(runpath: trusted), at: plugin)
        let beside = "$ORIGIN/../" + (open as NSString).lastPathComponent
        for (runpath, refused) in [("$ORIGIN/x", trusted + "/x"), (beside, trusted + "/../" + (open as NSString).lastPathComponent)] {
            try install(try variant(runpath: runpath), at: dependency)
            #expect(
                try dependencyRefusal(plugin)
                    == Self.writable(
                        refused, mode: "0777",
                        is: "a directory the loader searches "
                            + "for libraries (the RUNPATH entry \(runpath.debugDescription) of the library \(dependency) (needed by the library "
                            + "\(plugin)))"),
                "\(runpath)")
        }
        chmod(trusted + "/x", 0o755)
        chmod(open, 0o755)
        for runpath in ["$ORIGIN/x", beside, "$ORIGIN"] {
            try install(try variant(runpath: runpath), at: dependency)
            #expect(try dependencyRefusal(plugin) == nil, "\(runpath)")
        }
    }

    /// A library without `RUNPATH` has its needs looked up in the `RPATH` of the libraries that
    /// led to it too (the loader does): a library others may write to there is refused. With a
    /// `RUNPATH` of its own, the loader looks there only, and so does the check.
    @Test func anRpathIsSearchedForTheNeedsOfTheLibrariesThatFollow() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let scratch = try ScratchDirectories(0o755, 0o755)
        defer { scratch.remove() }
        let (trusted, empty) = (scratch[0], scratch[1])
        let plugin = f.root + "/librpath.so"
        try install(try variant(runpath: trusted, rpath: true), at: plugin)
        let dependency = trusted + "/libc.so.6"
        // Only the dependency needs this name: the plugin's own lookups do not find it.
        let inherited = trusted + "/libinherited.so"
        #expect(FileManager.default.createFile(atPath: inherited, contents: Data()))
        chmod(inherited, 0o666)
        let rename = (old: "libswiftCore.so", new: "libinherited.so")
        try install(try variant(runpath: empty, rpath: true, needing: rename), at: dependency)
        #expect(
            try dependencyRefusal(plugin)
                == Self.writable(
                    inherited, mode: "0666",
                    is: "a library the loader would load "
                        + "from \(trusted) (the RPATH entry \(trusted.debugDescription) of the library \(plugin), searched for the libraries "
                        + "\(dependency) needs (itself needed by the library \(plugin)))"))
        try install(try variant(runpath: empty, needing: rename), at: dependency)
        #expect(try dependencyRefusal(plugin) == nil)
    }

    /// A malformed library found for the plugin is refused as the plugin would be, naming it and
    /// the library that needs it.
    @Test func aMalformedDependencyIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let trusted = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: trusted) }
        chmod(trusted, 0o755)
        let bytes = try variant(runpath: "$ORIGIN")
        let entry = try #require(try ELFDependencies.read(bytes)?.searchPaths.first)
        let dependency = trusted + "/libc.so.6"
        try install(bytes.prefix(entry.offset + 1), at: dependency)
        let plugin = f.root + "/libmalformed.so"
        try install(try variant(runpath: trusted), at: plugin)
        let error = try dependencyRefusal(plugin)
        #expect(error?.kind == .notSharedObject)
        #expect(error?.file == dependency)
        #expect(error?.reason.hasPrefix("malformed ELF dynamic section: ") == true, "\(String(describing: error))")
        #expect(error?.reason.hasSuffix(" (a library that the library \(plugin) needs)") == true, "\(String(describing: error))")
    }

    /// A filter library's filtees (`DT_FILTER`, `DT_AUXILIARY`) are loaded as needed libraries
    /// are, from the same directories: checked alike.
    @Test(arguments: [(UInt64(0x7FFF_FFFF), "FILTER"), (UInt64(0x7FFF_FFFD), "AUXILIARY")])
    func filteesAreCheckedAsNeededLibrariesAre(_ tag: UInt64, _ name: String) throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let trusted = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: trusted) }
        chmod(trusted, 0o755)
        var bytes = try variant(runpath: trusted, needing: (old: "libswiftCore.so", new: "libfiltering.so"))
        try retag(&bytes, from: 1, to: tag) { $0.needed.contains { $0.tag == name && $0.value == "libfiltering.so" } }
        let plugin = f.root + "/libfilter.so"
        try install(bytes, at: plugin)
        let filtee = trusted + "/libfiltering.so"
        #expect(FileManager.default.createFile(atPath: filtee, contents: Data()))
        chmod(filtee, 0o666)
        #expect(
            try dependencyRefusal(plugin)
                == Self.writable(
                    filtee, mode: "0666",
                    is: "a library the loader would load "
                        + "from \(trusted) (the RUNPATH entry \(trusted.debugDescription) of the library \(plugin))"))
        chmod(filtee, 0o644)
        #expect(try dependencyRefusal(plugin) == nil)
    }

    /// The flags of a cache entry this machine's loader takes.
    static let hostFlags = Int(LoaderCache.hostFlags ?? 0x0303)

    /// Four little-endian bytes.
    static func word(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }

    /// A loader cache (glibc's `glibc-ld.so.cache1.1` format) naming `entries`, each a library
    /// name and its path, with `flags` on every entry (by default those this machine's loader takes).
    static func loaderCache(_ entries: [(name: String, path: String)], flags: Int = hostFlags) -> Data {
        let word = Self.word
        var strings: [UInt8] = []
        var table: [UInt8] = []
        let stringsStart = 48 + entries.count * 24
        for entry in entries {
            let name = stringsStart + strings.count
            strings += Array(entry.name.utf8) + [0]
            let path = stringsStart + strings.count
            strings += Array(entry.path.utf8) + [0]
            table += word(flags) + word(name) + word(path) + word(0) + Array(repeating: 0, count: 8)
        }
        let header = Array("glibc-ld.so.cache1.1".utf8) + word(entries.count) + word(strings.count) + Array(repeating: 0, count: 20)
        return Data(header + table + strings)
    }

    /// The cache is read as the loader reads it: names and paths, ELF entries only; a file in
    /// another format, or cut short, is no cache (the loader ignores it).
    @Test func theLoaderCacheIsReadAsTheLoaderReadsIt() throws {
        let bytes = Self.loaderCache([("libc.so.6", "/lib/a/libc.so.6"), ("libm.so.6", "/lib/a/libm.so.6"), ("libc.so.6", "/lib/b/libc.so.6")])
        #expect(LoaderCache.read(bytes)?.paths == ["libc.so.6": ["/lib/a/libc.so.6", "/lib/b/libc.so.6"], "libm.so.6": ["/lib/a/libm.so.6"]])
        #expect(LoaderCache.read(Self.loaderCache([("libc.so.6", "/x")], flags: Self.hostFlags & ~0xFF | 1))?.paths == [:])
        #expect(LoaderCache.read(bytes.prefix(100)) == nil)
        #expect(LoaderCache.read(Data("not a cache at all, but long enough to be read as one if it were".utf8)) == nil)
        // The old format, with the new one after it at the next multiple of 8, as older `ldconfig`s wrote.
        let old = Array("ld.so-1.7.0".utf8) + [0, 1, 0, 0, 0] + Array(repeating: UInt8(0), count: 12) + Array(repeating: UInt8(0), count: 4)
        #expect(LoaderCache.read(Data(old) + bytes)?.paths["libm.so.6"] == ["/lib/a/libm.so.6"])
        // The old format alone: offsets from the end of its table.
        var alone = Array("ld.so-1.7.0".utf8) + [0, 1, 0, 0, 0] + Self.word(Self.hostFlags) + Self.word(0) + Self.word(10)
        alone += Array("libz.so.1\0/lib/z.so\0".utf8)
        #expect(LoaderCache.read(Data(alone))?.paths == ["libz.so.1": ["/lib/z.so"]])
        // Another byte order is no cache for this loader; an entry whose strings lie past the
        // file is left out, the others kept.
        var big = bytes
        for flags: UInt8 in [3, 1, 4] {
            big[28] = flags
            #expect(LoaderCache.read(big) == nil, "\(flags)")
        }
        big[28] = 2
        #expect(LoaderCache.read(big) != nil)
        var stray = Self.loaderCache([("libc.so.6", "/lib/a/libc.so.6"), ("libm.so.6", "/lib/a/libm.so.6")])
        stray[48 + 24 + 8] = 0xFF
        stray[48 + 24 + 9] = 0xFF
        #expect(LoaderCache.read(stray)?.paths == ["libc.so.6": ["/lib/a/libc.so.6"]])
        // Names are matched as glibc's lookup matches them: runs of digits by value.
        let numbered = try #require(
            LoaderCache.read(Self.loaderCache([("libq.so.1", "/lib/q1"), ("libq.so.01", "/lib/q01"), ("libq.so.10", "/lib/q10")])))
        #expect(numbered.paths(for: "libq.so.1") == ["/lib/q1", "/lib/q01"])
        #expect(numbered.paths(for: "libq.so.001") == ["/lib/q1", "/lib/q01"])
        #expect(numbered.paths(for: "libq.so.010") == ["/lib/q10"])
        #expect(numbered.paths(for: "libq.so.0") == [])
        #expect(numbered.paths(for: "libq.so.1.0") == [])
        #expect(numbered.paths(for: "libq.so.") == [])
        // This machine's own cache is read.
        if let system = FileManager.default.contents(atPath: LoaderCache.path) {
            #expect(LoaderCache.read(system)?.paths["libc.so.6"]?.isEmpty == false)
        }
    }

    /// A loader's cache that does not exist is judged by the nearest directory above it, as a
    /// search directory that does not exist is: whoever may make it decides what the loader takes.
    @Test func aMissingLoaderCacheOthersMayMakeIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let plugin = f.root + "/libnocache.so"
        try install(try variant(runpath: "$ORIGIN"), at: plugin)
        let open = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: open) }
        let cache = open + "/etc/ld.so.cache"
        #expect(
            try refusal(of: plugin, cache: cache, defaults: [])
                == Self.writable(
                    open, mode: "0777",
                    is: "the nearest directory above the loader's cache \(cache) (which does not exist: who may write here may make it)"))
        chmod(open, 0o755)
        #expect(try refusal(of: plugin, cache: cache, defaults: []) == nil)
        // A symbolic link to nothing in its place is refused: whoever makes its target decides.
        #expect(symlink(open + "/elsewhere", open + "/etc") == 0)
        #expect(
            try refusal(of: plugin, cache: cache, defaults: [])
                == PluginLoadError(
                    .insecurePermissions, file: open + "/etc",
                    reason: "a symbolic link to nothing on the path of the loader's cache \(cache); whoever may make its target "
                        + "decides what is loaded: remove it or make its target"))
    }

    /// A library no search path finds is taken from the loader's cache, else from its default
    /// directories: what it would find there is checked too, and so is the cache itself.
    @Test func whatTheLoaderTakesFromItsCacheOrDefaultDirectoriesIsChecked() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let trusted = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: trusted) }
        chmod(trusted, 0o755)
        // `$ORIGIN` only: no search path finds `libc.so.6` or `libswiftCore.so`.
        let plugin = f.root + "/libcached.so"
        try install(try variant(runpath: "$ORIGIN"), at: plugin)
        let library = trusted + "/libc.so.6"
        #expect(FileManager.default.createFile(atPath: library, contents: Data()))
        chmod(library, 0o666)
        let cache = f.root + "/ld.so.cache"
        try Self.loaderCache([("libc.so.6", library)]).write(to: URL(fileURLWithPath: cache))
        chmod(cache, 0o644)
        func check(defaults: [String] = []) throws -> PluginLoadError? { try refusal(of: plugin, cache: cache, defaults: defaults) }
        let fromTheCache = Self.writable(
            library, mode: "0666", is: "a library the loader's cache \(cache) gives for \"libc.so.6\" (for the libraries \(plugin) needs)")
        #expect(try check() == fromTheCache)
        chmod(cache, 0o666)
        #expect(
            try check()
                == Self.writable(
                    cache, mode: "0666",
                    is: "the loader's cache of library "
                        + "paths"))
        // The loader takes an entry whose name differs in leading zeros only (`libc.so.06`) for it.
        try Self.loaderCache([("libc.so.06", library)]).write(to: URL(fileURLWithPath: cache))
        chmod(cache, 0o644)
        #expect(try check() == fromTheCache)
        // Not in the cache: the default directories.
        try Self.loaderCache([]).write(to: URL(fileURLWithPath: cache))
        chmod(cache, 0o644)
        #expect(try check() == nil)
        #expect(
            try check(defaults: ["/usr/lib", trusted])
                == Self.writable(
                    library, mode: "0666",
                    is: "a library the loader would load "
                        + "from \(trusted) (a default directory of the loader, searched for the libraries \(plugin) needs)"))
        chmod(library, 0o644)
        #expect(try check(defaults: ["/usr/lib", trusted]) == nil)
        // What the cache leads to is followed too: a library there with a `RUNPATH` others may write to.
        let open = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: open) }
        try install(try variant(runpath: open), at: library)
        try Self.loaderCache([("libc.so.6", library)]).write(to: URL(fileURLWithPath: cache))
        #expect(try check()?.file == open)
        // The real cache and default directories pass for the fixture as it is built.
        let built = try PluginFixtures.library("CPluginTestPlugin")
        try FileSecurity.checkDependencies(of: try Data(contentsOf: URL(fileURLWithPath: built)), path: built, environment: [:])
    }

    /// Below each directory it searches, the loader looks first in hardware-specific
    /// subdirectories (`glibc-hwcaps/x86-64-v3`, `tls/x86_64/x86_64`, …): those that exist are
    /// checked as the directory is, with the libraries the loader would find in them.
    @Test func theHardwareSpecificSubdirectoriesOfASearchedDirectoryAreChecked() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let trusted = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: trusted) }
        chmod(trusted, 0o755)
        let plugin = f.root + "/libhwcaps.so"
        try install(try variant(runpath: trusted), at: plugin)
        #expect(try dependencyRefusal(plugin) == nil)
        #if arch(x86_64)
        let legacy = "tls/x86_64"
        #else
        let legacy = "tls"
        #endif
        let named = "the RUNPATH entry \(trusted.debugDescription) of the library \(plugin); a hardware-specific subdirectory of \(trusted)"
        for subdirectory in ["glibc-hwcaps/x86-64-v3", legacy] {
            let path = trusted + "/" + subdirectory
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            // Each level made 0755 whatever the umask, the last one then opened to all.
            var level = trusted
            for component in subdirectory.split(separator: "/") {
                level += "/" + component
                chmod(level, 0o755)
            }
            chmod(path, 0o777)
            #expect(
                try dependencyRefusal(plugin)
                    == Self.writable(
                        path, mode: "0777",
                        is: "a directory the loader searches "
                            + "for libraries (\(named))"),
                "\(subdirectory)")
            chmod(path, 0o755)
            let library = path + "/libc.so.6"
            #expect(FileManager.default.createFile(atPath: library, contents: Data()))
            chmod(library, 0o666)
            #expect(
                try dependencyRefusal(plugin)
                    == Self.writable(
                        library, mode: "0666",
                        is: "a library the loader would "
                            + "load from \(path) (\(named))"),
                "\(subdirectory)")
            chmod(library, 0o644)
            #expect(try dependencyRefusal(plugin) == nil, "\(subdirectory)")
        }
        #expect(FileSecurity.hardwareSubdirectories(of: trusted).contains(trusted + "/" + legacy))
        // A symbolic link to nothing where the loader looks is refused: whoever makes its target decides.
        symlink(trusted + "/nowhere", trusted + "/tls/avx512_1")
        #if arch(x86_64)
        #expect(try dependencyRefusal(plugin)?.file == trusted + "/tls/avx512_1")
        #endif
    }

    /// A file of the name that is no library of this machine (empty here, on which `dlopen`
    /// would fail; the loader passes over one of another machine) does not end the search: the
    /// cache is asked next, and what it gives is checked. A symbolic link to nothing under a name the loader looks for is refused.
    @Test func aFileTheLoaderPassesOverDoesNotEndTheSearch() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let scratch = try ScratchDirectories(0o755, 0o755)
        defer { scratch.remove() }
        let (trusted, open) = (scratch[0], scratch[1])
        let plugin = f.root + "/libpassedover.so"
        try install(try variant(runpath: trusted), at: plugin)
        #expect(FileManager.default.createFile(atPath: trusted + "/libc.so.6", contents: Data()))
        chmod(trusted + "/libc.so.6", 0o644)
        let cached = open + "/libc.so.6"
        #expect(FileManager.default.createFile(atPath: cached, contents: Data()))
        chmod(cached, 0o666)
        let cache = f.root + "/ld.so.cache"
        try Self.loaderCache([("libc.so.6", cached)]).write(to: URL(fileURLWithPath: cache))
        chmod(cache, 0o644)
        func check() throws -> PluginLoadError? { try refusal(of: plugin, cache: cache, defaults: []) }
        #expect(
            try check()
                == Self.writable(
                    cached, mode: "0666",
                    is: "a library the loader's cache "
                        + "\(cache) gives for \"libc.so.6\" (for the libraries \(plugin) needs)"))
        // The fixture itself is a library of this machine: found in the directory, it ends the search.
        try install(try variant(runpath: "$ORIGIN"), at: trusted + "/libc.so.6")
        #expect(try check() == nil)
        try FileManager.default.removeItem(atPath: trusted + "/libc.so.6")
        symlink(open + "/nothing.so", trusted + "/libc.so.6")
        #expect(
            try check()
                == PluginLoadError(
                    .insecurePermissions, file: trusted + "/libc.so.6",
                    reason: "a symbolic link to nothing where the loader looks for \"libc.so.6\" (the RUNPATH entry \(trusted.debugDescription) "
                        + "of the library \(plugin)); whoever may make its target decides what is loaded: remove it or make its target"))
    }

    /// A needed name with a token: `$ORIGIN/…` of the plugin is its private directory; for a
    /// library found on the way, the directory it was found in; `$LIB` and `$PLATFORM`, which
    /// the loader expands to what this check cannot know, are refused.
    @Test func aNeededNameWithATokenIsFollowedOrRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let trusted = try openDirectory()
        defer { try? FileManager.default.removeItem(atPath: trusted) }
        chmod(trusted, 0o755)
        let token = try variant(runpath: "$ORIGIN", needing: (old: "libswiftCore.so", new: "lib$PLATFORM.so"))
        let plugin = f.root + "/libtoken.so"
        try install(token, at: plugin)
        #expect(
            try dependencyRefusal(plugin)
                == PluginLoadError(
                    .insecurePermissions, file: plugin,
                    reason: "the library \(plugin) needs \"lib$PLATFORM.so\", a name with a token other than $ORIGIN ($LIB, $PLATFORM: the loader "
                        + "expands them to what this check cannot know); name the library plainly"))
        // A name there is nothing (`/proc/self/fd/libx.so` cannot exist).
        try install(try variant(runpath: "$ORIGIN", needing: (old: "libswiftCore.so", new: "$ORIGIN/libx.so")), at: plugin)
        #expect(try dependencyRefusal(plugin) == nil)
        // The plugin's `$ORIGIN` is where its bytes are opened from: `/proc/self/fd` for a memory
        // file, holding every file the app has open. A descriptor number under it (as a needed
        // name, a name searched in it, a search entry below it): refused (they were taken as
        // private and not checked).
        let origin =
            "for a plugin, $ORIGIN is where its verified bytes are opened from (/proc/self/fd for a memory file: every file the app "
            + "holds open is there); use $ORIGIN alone, or name the library or directory itself"
        try install(try variant(runpath: "$ORIGIN", needing: (old: "libswiftCore.so", new: "$ORIGIN/././/77")), at: plugin)
        #expect(
            try dependencyRefusal(plugin)
                == PluginLoadError(
                    .insecurePermissions, file: plugin, reason: "the library \(plugin) needs \"$ORIGIN/././/77\", a name under $ORIGIN: \(origin)"))
        try install(try variant(runpath: "$ORIGIN", needing: (old: "libswiftCore.so", new: "777777777777777")), at: plugin)
        #expect(
            try dependencyRefusal(plugin)
                == PluginLoadError(
                    .insecurePermissions, file: plugin,
                    reason: "the library \(plugin) needs \"777777777777777\", a name of digits: in the plugin's $ORIGIN (/proc/self/fd for a "
                        + "memory file) it names a file the app holds open"))
        try install(try variant(runpath: "$ORIGIN/7"), at: plugin)
        #expect(
            try dependencyRefusal(plugin)
                == PluginLoadError(
                    .insecurePermissions, file: plugin,
                    reason: "the RUNPATH entry \"$ORIGIN/7\" of the library \(plugin) is below $ORIGIN: \(origin)"))
        // A library found on the way, needing `$ORIGIN/libx.so`: its own directory's file.
        try install(try variant(runpath: trusted), at: plugin)
        let dependency = trusted + "/libc.so.6"
        try install(try variant(runpath: "$ORIGIN", needing: (old: "libswiftCore.so", new: "$ORIGIN/libx.so")), at: dependency)
        #expect(FileManager.default.createFile(atPath: trusted + "/libx.so", contents: Data()))
        chmod(trusted + "/libx.so", 0o666)
        #expect(
            try dependencyRefusal(plugin)
                == Self.writable(
                    trusted + "/libx.so", mode: "0666",
                    is: "a library that the library "
                        + "\(dependency) (needed by the library \(plugin)) needs"))
    }

    /// The `RPATH` of what calls `dlopen` (and of the program) is searched for the plugin's needs
    /// and those of every library without a `RUNPATH`, as the loader does: checked alike.
    @Test func theRpathOfWhatLoadsPluginsIsSearchedToo() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let scratch = try ScratchDirectories(0o755, 0o755)
        defer { scratch.remove() }
        let (trusted, empty) = (scratch[0], scratch[1])
        let program = f.root + "/program"
        try install(try variant(runpath: trusted, rpath: true), at: program)
        let plugin = f.root + "/libcaller.so"
        let rename = (old: "libswiftCore.so", new: "libinherited.so")
        try install(try variant(runpath: empty, rpath: true, needing: rename), at: plugin)
        let inherited = trusted + "/libinherited.so"
        #expect(FileManager.default.createFile(atPath: inherited, contents: Data()))
        chmod(inherited, 0o666)
        func check(_ callers: [String]) throws -> PluginLoadError? { try refusal(of: plugin, callers: callers) }
        #expect(
            try check([program])
                == Self.writable(
                    inherited, mode: "0666",
                    is: "a library the loader would load "
                        + "from \(trusted) (the RPATH entry \(trusted.debugDescription) of the library \(program) (which loads plugins), searched "
                        + "for the libraries \(plugin) needs)"))
        #expect(try check([]) == nil)
        // With a RUNPATH of its own, the plugin's needs are not looked up in any RPATH.
        try install(try variant(runpath: empty, needing: rename), at: plugin)
        #expect(try check([program]) == nil)
        // This process's own callers pass.
        #expect(FileSecurity.DependencyWalk.callers.isEmpty == false)
    }

    /// The image holding a piece of code is read from the process's mappings: here the test
    /// program itself (the code is linked into it), whose `RPATH` the loader searches.
    @Test func theImageHoldingTheCodeIsFound() throws {
        let program = try #require(FileSecurity.realPath("/proc/self/exe"))
        #expect(FileSecurity.DependencyWalk.image(holding: UInt(bitPattern: #dsohandle)) == program)
        #expect(FileSecurity.DependencyWalk.callers.contains(program))
        #expect(FileSecurity.DependencyWalk.image(holding: 0) == nil)
    }

    /// So is one mapped past the first page of `/proc/self/maps` (the last library listed here,
    /// as PluginHost in a shared library an app loads would be): Foundation read that file one
    /// page deep, and such a caller's `RPATH` went unchecked.
    @Test func anImageMappedPastTheFirstPageOfTheMapsIsFound() throws {
        let maps = try #require(FileDescriptor.readToEnd("/proc/self/maps", limit: 64 << 20))
        var offset = 0
        var last: (offset: Int, start: UInt, path: String)?
        for line in maps.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            defer { offset += line.count + 1 }
            let fields = String(decoding: line, as: UTF8.self).split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1].hasPrefix("r-x"), fields[5].hasSuffix(".so") || fields[5].contains(".so."),
                let start = UInt(fields[0].split(separator: "-")[0], radix: 16)
            else { continue }
            last = (offset, start, String(fields[5]))
        }
        let library = try #require(last)
        #expect(library.offset > 8192, "the last library's line is at byte \(library.offset): this test needs one past the first page")
        #expect(FileSecurity.DependencyWalk.image(holding: library.start) == FileSecurity.realPath(library.path))
    }

    /// A library of the name found only in a hardware-specific subdirectory may be for another
    /// processor (the loader would go on searching): the cache is asked too. A path the cache
    /// gives that does not exist is judged by its directory (whoever may write there may make it).
    @Test func aLibraryOnlyInAHardwareSubdirectoryDoesNotEndTheSearch() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let scratch = try ScratchDirectories(0o755, 0o755)
        defer { scratch.remove() }
        let (trusted, open) = (scratch[0], scratch[1])
        let plugin = f.root + "/libhwonly.so"
        try install(try variant(runpath: trusted), at: plugin)
        let level = trusted + "/glibc-hwcaps/x86-64-v4"
        try FileManager.default.createDirectory(atPath: level, withIntermediateDirectories: true)
        chmod(trusted + "/glibc-hwcaps", 0o755)
        chmod(level, 0o755)
        try install(try variant(runpath: "$ORIGIN"), at: level + "/libc.so.6")
        let cached = open + "/libc.so.6"
        #expect(FileManager.default.createFile(atPath: cached, contents: Data()))
        chmod(cached, 0o666)
        let cache = f.root + "/ld.so.cache"
        try Self.loaderCache([("libc.so.6", cached)]).write(to: URL(fileURLWithPath: cache))
        chmod(cache, 0o644)
        func check() throws -> PluginLoadError? { try refusal(of: plugin, cache: cache, defaults: []) }
        #expect(try check()?.file == cached)
        // A path the cache gives that is not there: its directory decides.
        try FileManager.default.removeItem(atPath: cached)
        chmod(open, 0o777)
        #expect(
            try check()
                == Self.writable(
                    open, mode: "0777",
                    is: "a directory the loader searches "
                        + "for libraries (the directory where the loader's cache \(cache) says \"libc.so.6\" is (for the libraries \(plugin) "
                        + "needs))"))
        chmod(open, 0o755)
        #expect(try check() == nil)
    }

    /// The libraries of one load share what their checks found to pass (the toolchain's
    /// libraries are walked once, not once per plugin); what fails is still refused.
    @Test func librariesOfOneLoadShareWhatPassedNotWhatFails() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let scratch = try ScratchDirectories(0o777)
        defer { scratch.remove() }
        var memo = FileSecurity.CheckMemo()
        let first = try PluginFixtures.library("CPluginTestPlugin")
        try FileSecurity.checkDependencies(of: try Data(contentsOf: URL(fileURLWithPath: first)), path: first, memo: &memo)
        #expect(memo.walked.isEmpty == false)
        let walked = memo.walked
        // A trusted directory below one others may write to: refused for its ancestor.
        mkdir(scratch[0] + "/sub", 0o755)
        chmod(scratch[0] + "/sub", 0o755)
        let second = try patched(f, runpath: scratch[0] + "/sub")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: second))
        let before = (memo.walked, memo.targets, memo.ancestors)
        // Refused twice with the same memo: a refusal leaves nothing in it that would pass the next time.
        for _ in 0..<2 {
            do {
                try FileSecurity.checkDependencies(of: bytes, path: second, memo: &memo)
                Issue.record("expected \(second) to be refused")
            } catch {
                #expect(error.file == scratch[0])
            }
        }
        #expect(memo.walked == before.0 && memo.targets == before.1 && memo.ancestors == before.2)
        // So does a check of one path: its refused ancestor is not kept as passed.
        for _ in 0..<2 {
            #expect(throws: PluginLoadError.self) { try FileSecurity.check(path: scratch[0] + "/sub", role: "a directory", memo: &memo) }
        }
        // The same plugin again walks nothing new.
        try FileSecurity.checkDependencies(of: try Data(contentsOf: URL(fileURLWithPath: first)), path: first, memo: &memo)
        #expect(memo.walked == walked)
    }
}
