import CPluginABI
import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a plugin library's static descriptor says about it.
public struct PluginInfo: Sendable, Equatable, Codable {
    /// The name, e.g. `logger`.
    public var name: String
    /// The plugin's version.
    public var version: String
    /// One line saying what it does.
    public var summary: String
    /// SPDX license identifier.
    public var license: String
    /// Compiler and target the plugin was built with.
    public var buildSignature: String
    /// The ABI major version the plugin speaks.
    public var abiMajor: Int
    /// The ABI minor version the plugin speaks.
    public var abiMinor: Int
    /// The hooks it implements, in chain order.
    public var hooks: [InterceptorHook]
}

/// A plugin shared library, opened with `dlopen` and never closed.
///
/// The loader reads the file once, checks its SHA-256 against every expectation, and loads
/// exactly the bytes it verified (from a private copy), so the file cannot be swapped between
/// the check and the load. A library already loaded with the same SHA-256 is reused; another
/// file at the same path (an upgrade) is loaded beside it, from its own copy.
// Safe as @unchecked Sendable: the dlopen handle and descriptor pointer are set once and never freed.
public final class PluginLibrary: @unchecked Sendable {
    /// The path it was loaded from.
    public let path: String
    /// The descriptor's contents.
    public let info: PluginInfo
    /// Lower-case hex SHA-256 of the file.
    public let sha256: String
    /// The file's size in bytes.
    public let size: Int
    let descriptor: UnsafePointer<ph_plugin_descriptor>

    /// The ABI version of this host.
    public static let hostABI = (major: Int(PH_ABI_MAJOR), minor: Int(PH_ABI_MINOR))
    /// The exported symbol every plugin library defines.
    public static let entrySymbol = "pluginhost_plugin_v1"
    /// The smallest descriptor ABI 1.0 accepts.
    static let minimumDescriptorSize =
        MemoryLayout<ph_plugin_descriptor>.offset(of: \ph_plugin_descriptor.credential)!
        + MemoryLayout<UnsafeRawPointer>.size

    private init(path: String, info: PluginInfo, sha256: String, size: Int, descriptor: UnsafePointer<ph_plugin_descriptor>) {
        self.path = path
        self.info = info
        self.sha256 = sha256
        self.size = size
        self.descriptor = descriptor
    }

    /// A file's identity: device and inode, plus the digest and path, because an inode number
    /// is reused once its file is deleted (and a library reports the path it was opened from).
    private struct FileID: Hashable {
        let device: UInt64
        let inode: UInt64
        let sha256: String
        let path: String
    }

    private static let loaded = Locked([FileID: PluginLibrary]())

    /// Libraries opened and then refused (no entry symbol, a descriptor of another ABI …), by
    /// SHA-256: their image stays mapped (Swift code is never unloaded) and their constructors
    /// ran, so the same bytes asked for again are refused again unopened: a reload retried on a
    /// bad bundle mapped another copy, and kept another descriptor, each time.
    private static let refused = Locked([String: PluginLoadError]())

    /// Whether both are the same loaded image (the same verified bytes, opened once).
    public func hasSameImage(as other: PluginLibrary) -> Bool { descriptor == other.descriptor }

    /// Opens the library at `path` and reads its descriptor; creates no plugin.
    ///
    /// - Parameter expectedDigests: SHA-256 values the file must have, each with the place
    ///   that states it (e.g. `plugin.json`), checked before anything is loaded.
    public static func open(
        path: String, expectedDigests: [(source: String, sha256: String)] = [],
        checkPermissions: Bool = true
    ) throws(PluginLoadError) -> PluginLibrary {
        var memo = FileSecurity.CheckMemo()
        return try open(path: path, expectedDigests: expectedDigests, checkPermissions: checkPermissions, memo: &memo)
    }

    /// ``open(path:expectedDigests:checkPermissions:)``, sharing with the other libraries of one
    /// load what the checks found to pass (their dependencies are mostly the same libraries).
    static func open(
        path: String, expectedDigests: [(source: String, sha256: String)] = [],
        checkPermissions: Bool = true, memo: inout FileSecurity.CheckMemo
    ) throws(PluginLoadError) -> PluginLibrary {
        let (bytes, digest, info) = try verified(path: path, expectedDigests: expectedDigests, checkPermissions: checkPermissions, memo: &memo)
        return try open(path: path, bytes: bytes, digest: digest, info: info)
    }

    /// Opens the library at `path` without judging its permissions, and returns the bytes it was
    /// opened from: ``PluginBundle/create(fromLibrary:in:defaultConfig:)`` copies these, so the
    /// bundle holds what was read and described, never a second read of a file being rewritten.
    static func openKeepingBytes(path: String) throws(PluginLoadError) -> (library: PluginLibrary, bytes: Data) {
        var memo = FileSecurity.CheckMemo()
        let (bytes, digest, info) = try verified(path: path, expectedDigests: [], checkPermissions: false, memo: &memo)
        return (try open(path: path, bytes: bytes, digest: digest, info: info), bytes)
    }

    /// Every check ``open(path:expectedDigests:checkPermissions:)`` makes before it loads the
    /// library (regular file, permissions, digests, dependencies), without loading it: no code
    /// of the library runs (`pluginhost test` leaves that to its child probes).
    /// Returns the SHA-256 and size of the bytes verified (a report shows these, not a second read).
    @discardableResult
    package static func verify(path: String, expectedDigests: [(source: String, sha256: String)]) throws(PluginLoadError) -> (
        sha256: String, size: Int
    ) {
        var memo = FileSecurity.CheckMemo()
        let (bytes, digest, _) = try verified(path: path, expectedDigests: expectedDigests, checkPermissions: true, memo: &memo)
        return (digest, bytes.count)
    }

    /// The library's bytes, their SHA-256 and the file's status, once every check before loading passed.
    private static func verified(
        path: String, expectedDigests: [(source: String, sha256: String)], checkPermissions: Bool, memo: inout FileSecurity.CheckMemo
    ) throws(PluginLoadError) -> (bytes: Data, digest: String, info: stat) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw PluginLoadError(.libraryMissing, file: path, reason: "no such file")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw PluginLoadError(.notSharedObject, file: path, reason: "not a regular file")
        }
        if checkPermissions { try FileSecurity.check(path: path, role: "the library", memo: &memo) }
        guard let bytes = FileManager.default.contents(atPath: path) else {
            throw PluginLoadError(.unreadable, file: path, reason: "cannot read the library")
        }
        let digest = bytes.withUnsafeBytes { raw -> String in
            var hasher = SHA256()
            hasher.update(raw)
            return SHA256.hex(hasher.finalize())
        }
        for expectation in expectedDigests where expectation.sha256.lowercased() != digest {
            throw PluginLoadError(
                .digestMismatch, file: path,
                reason: "sha256 mismatch: the file is \(digest), \(expectation.source) says \(expectation.sha256.lowercased())")
        }
        if checkPermissions { try FileSecurity.checkDependencies(of: bytes, path: path, memo: &memo) }
        return (bytes, digest, info)
    }

    /// Loads verified bytes (or finds them loaded already) and reads their descriptor. One at a
    /// time in the process: two loads of new bytes at once (two providers made in parallel, a
    /// reload beside a start) each mapped them and ran their constructors, and a library refused
    /// after opening was opened by each.
    private static func open(path: String, bytes: Data, digest: String, info: stat) throws(PluginLoadError) -> PluginLibrary {
        opening.lock()
        defer { opening.unlock() }
        return try openOneAtATime(path: path, bytes: bytes, digest: digest, info: info)
    }

    /// Serializes ``open(path:bytes:digest:info:)``.
    private static let opening = NSLock()

    private static func openOneAtATime(path: String, bytes: Data, digest: String, info: stat) throws(PluginLoadError) -> PluginLibrary {
        let id = FileID(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), sha256: digest, path: path)
        // The same bytes already loaded (this file, or a copy of it elsewhere, as a reload finds
        // them): that image is used again, reported under this path.
        let reused = loaded.withLock { table -> PluginLibrary? in
            if let existing = table[id] { return existing }
            guard let twin = table.values.first(where: { $0.sha256 == digest }) else { return nil }
            let library = PluginLibrary(path: path, info: twin.info, sha256: digest, size: bytes.count, descriptor: twin.descriptor)
            table[id] = library
            return library
        }
        if let reused { return reused }
        if let refusal = refused.withLock({ $0[digest] }) {
            throw PluginLoadError(refusal.kind, file: path, jsonPath: refusal.jsonPath, plugin: refusal.plugin, reason: refusal.reason)
        }

        let (handle, opened) = try openVerified(bytes, of: path)
        let descriptor: UnsafePointer<ph_plugin_descriptor>
        let pluginInfo: PluginInfo
        do throws(PluginLoadError) {
            (descriptor, pluginInfo) = try describe(handle, opened: opened, path: path)
        } catch {
            refused.withLock { $0[digest] = error }
            throw error
        }
        let library = PluginLibrary(path: path, info: pluginInfo, sha256: digest, size: bytes.count, descriptor: descriptor)
        return loaded.withLock { table in
            if let raced = table[id] { return raced }
            table[id] = library
            return library
        }
    }

    /// The descriptor of the library opened as `handle` (under the name `opened`), checked.
    private static func describe(
        _ handle: UnsafeMutableRawPointer, opened: String, path: String
    ) throws(PluginLoadError) -> (UnsafePointer<ph_plugin_descriptor>, PluginInfo) {
        _ = dlerror()
        guard let symbol = dlsym(handle, entrySymbol) else {
            throw PluginLoadError(
                .missingEntrySymbol, file: path,
                reason: "no \(entrySymbol) symbol: \(dlerrorText(stripping: opened))")
        }
        let entry = unsafeBitCast(symbol, to: ph_entry_fn.self)
        guard let descriptor = entry() else {
            throw PluginLoadError(.descriptorInvalid, file: path, reason: "\(entrySymbol) returned NULL")
        }
        return (descriptor, try validate(descriptor, path: path))
    }

    private static func validate(_ descriptor: UnsafePointer<ph_plugin_descriptor>, path: String) throws(PluginLoadError) -> PluginInfo {
        // The size first, read alone: a descriptor smaller than the struct may end where the
        // library's memory ends, and is refused before any other field is read. Then the
        // version, the one part every major shares (its first 8 bytes): a plugin of another
        // major is told as such, whatever the size of its descriptor.
        let raw = UnsafeRawPointer(descriptor)
        let size = raw.load(as: UInt32.self)
        let versionEnd = MemoryLayout<ph_plugin_descriptor>.offset(of: \ph_plugin_descriptor.abi_minor)! + MemoryLayout<UInt16>.size
        guard Int(size) >= versionEnd else {
            throw PluginLoadError(
                .descriptorInvalid, file: path, reason: "descriptor is \(size) bytes; the smallest (ABI 1.0) is \(minimumDescriptorSize)")
        }
        let major = raw.load(fromByteOffset: MemoryLayout<ph_plugin_descriptor>.offset(of: \ph_plugin_descriptor.abi_major)!, as: UInt16.self)
        let minor = raw.load(fromByteOffset: MemoryLayout<ph_plugin_descriptor>.offset(of: \ph_plugin_descriptor.abi_minor)!, as: UInt16.self)
        let host = "\(hostABI.major).\(hostABI.minor)"
        guard Int(major) == hostABI.major else {
            throw PluginLoadError(
                .abiMismatch, file: path, reason: "the plugin speaks ABI \(major).\(minor), the host speaks \(host) (majors differ)")
        }
        guard Int(size) >= minimumDescriptorSize else {
            throw PluginLoadError(
                .descriptorInvalid, file: path,
                reason: "descriptor is \(size) bytes; the smallest (ABI 1.0) is \(minimumDescriptorSize)")
        }
        let d = descriptor.pointee
        guard Int(d.abi_minor) <= hostABI.minor else {
            throw PluginLoadError(
                .abiMismatch, file: path,
                reason: "the plugin needs ABI \(d.abi_major).\(d.abi_minor), newer than the host's \(host)")
        }
        guard let name = d.name.map({ String(cString: $0) }), !name.isEmpty else {
            throw PluginLoadError(.descriptorInvalid, file: path, reason: "the descriptor has no name")
        }
        // A bundle is made as `<name>.plugin`, and a manifest names it so.
        guard PluginManifest.isPluginName(name) else {
            throw PluginLoadError(
                .descriptorInvalid, file: path,
                reason:
                    "the descriptor's name \(name.debugDescription) is not a plugin name (one path component, without \"/\" and not starting with \".\")"
            )
        }
        guard d.create != nil, d.destroy != nil else {
            throw PluginLoadError(.descriptorInvalid, file: path, plugin: name, reason: "the descriptor lacks create or destroy")
        }
        // `plugin.json` needs a version: a bundle made without one would be refused at every load.
        guard let version = d.version.map({ String(cString: $0) }), !version.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw PluginLoadError(.descriptorInvalid, file: path, plugin: name, reason: "the descriptor has no version")
        }
        var hooks: [InterceptorHook] = []
        if d.prepare != nil { hooks.append(.prepare) }
        if d.will_send != nil { hooks.append(.willSend) }
        if d.did_receive != nil { hooks.append(.didReceive) }
        if d.process != nil { hooks.append(.process) }
        if d.credential != nil { hooks.append(.credential) }
        func text(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }
        return PluginInfo(
            name: name, version: version, summary: text(d.summary), license: text(d.license),
            buildSignature: text(d.build_signature), abiMajor: Int(d.abi_major), abiMinor: Int(d.abi_minor),
            hooks: hooks)
    }

    /// `dlopen`s exactly the verified bytes; returns the handle and the name it was opened under.
    ///
    /// On Linux, from an anonymous memory file (`memfd_create`), sealed against any change before
    /// it is opened: no directory holds it, so no temporary directory is trusted, and a `noexec`
    /// `/tmp` does not matter. Elsewhere, where `/proc` is not mounted or memory files may not be
    /// executed, or when `PLUGINHOST_VERIFIED_COPY=tmpdir` asks for it: from a private copy in
    /// the temporary directory (``writePrivateCopy(_:of:)``).
    private static func openVerified(_ bytes: Data, of path: String) throws(PluginLoadError) -> (UnsafeMutableRawPointer, String) {
        var failed: String?
        if ProcessInfo.processInfo.environment["PLUGINHOST_VERIFIED_COPY"] != "tmpdir", let memory = MemoryFile.sealed(bytes, name: path) {
            // The descriptor stays open for good, as the library stays loaded: the loader knows a
            // library by its name, and a number used again would name the first one.
            if let handle = dlopen(memory.name, RTLD_NOW | RTLD_LOCAL) { return (handle, memory.name) }
            failed = dlerrorText(stripping: memory.name)
            close(memory.fd)
        }
        let copy: (file: String, directory: String)
        do {
            copy = try writePrivateCopy(bytes, of: path)
        } catch {
            // The library itself did not load from memory: that is the reason to give.
            if let failed { throw PluginLoadError(.notSharedObject, file: path, reason: failed) }
            throw error
        }
        // The mapping outlives the file: copy and directory go once dlopen is done with them.
        let handle = dlopen(copy.file, RTLD_NOW | RTLD_LOCAL)
        unlink(copy.file)
        rmdir(copy.directory)
        guard let handle else { throw PluginLoadError(.notSharedObject, file: path, reason: dlerrorText(stripping: copy.file)) }
        return (handle, copy.file)
    }

    /// Writes the verified bytes to a fresh file in a fresh private (0700) directory of its own
    /// (the caller removes both once the library is opened).
    ///
    /// The temporary directory is checked as the library is: whoever may rename or replace what
    /// is in it (a group- or world-writable `TMPDIR` without the sticky bit, or one of another
    /// user) could put other bytes where `dlopen` reads the copy.
    private static func writePrivateCopy(_ bytes: Data, of path: String) throws(PluginLoadError) -> (file: String, directory: String) {
        let base = FileSecurity.lexicallyNormalized(NSTemporaryDirectory())
        try FileSecurity.check(
            path: base, role: "the temporary directory that verified copies of libraries are loaded from", sharedDirectory: true)
        var template = Array((base + "/pluginhost-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw PluginLoadError(.unreadable, file: path, reason: "cannot create a private directory for verified copies")
        }
        let directory = String(cString: made)
        let copy = "\(directory)/\(UUID().uuidString)-\((path as NSString).lastPathComponent)"
        // Qualified: `open` alone would name this type's own `open(path:…)`.
        #if canImport(Glibc)
        let fd = Glibc.open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o500)
        #else
        let fd = Darwin.open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o500)
        #endif
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            rmdir(directory)
            throw PluginLoadError(.unreadable, file: path, reason: "cannot write a verified copy: \(reason)")
        }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { FileDescriptor.writeAll(fd, $0) }
        guard written else {
            unlink(copy)
            rmdir(directory)
            throw PluginLoadError(.unreadable, file: path, reason: "cannot write a verified copy")
        }
        return (copy, directory)
    }

    /// The `dlerror` text without the private copy's path (the error already names the file).
    private static func dlerrorText(stripping copy: String) -> String {
        let text = dlerror().map { String(cString: $0) } ?? "unknown dlopen error"
        return text.replacingOccurrences(of: copy + ": ", with: "").replacingOccurrences(of: copy, with: "the library")
    }
}

/// An anonymous memory file holding a library's verified bytes, sealed: nobody (not even a process
/// of the same user through `/proc`) can change, grow or shrink it once written.
enum MemoryFile {
    /// `memfd_create`, found at run time (the C library's headers hide it from Swift).
    private typealias Create = @convention(c) (UnsafePointer<CChar>?, UInt32) -> Int32
    #if os(Linux)
    private static let create: Create? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "memfd_create").map {  // RTLD_DEFAULT
        unsafeBitCast($0, to: Create.self)
    }
    #else
    private static let create: Create? = nil
    #endif
    // From <linux/memfd.h> and <fcntl.h>.
    private static let closeOnExec: UInt32 = 1, allowSealing: UInt32 = 2
    static let addSeals: Int32 = 1033, getSeals: Int32 = 1034
    /// F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE.
    static let allSeals: Int32 = 0x1 | 0x2 | 0x4 | 0x8

    /// The sealed file holding `bytes` and the name `dlopen` opens it by; nil where memory files,
    /// seals or `/proc` are not to be had.
    static func sealed(_ bytes: Data, name: String) -> (fd: Int32, name: String)? {
        guard let create else { return nil }
        // A label of at most 249 bytes, or the call fails.
        let label = "pluginhost:" + String(decoding: Array((name as NSString).lastPathComponent.utf8.prefix(200)), as: UTF8.self)
        var fd = create(label, closeOnExec | allowSealing)
        guard fd >= 0 else { return nil }
        // A name no other code opens a library by (`/proc/self/fd/N` is the usual spelling): the
        // loader returns the library already loaded under a name asked for again, and the number
        // may have named another's memory file once. A number whose name is loaded already (its
        // memory file closed by code of the app's, "close every descriptor above 2") is left for
        // the next free one that names nothing: `dlopen` gave the first library for the second.
        for _ in 0..<64 {
            guard let loaded = dlopen("/proc/self/./fd/\(fd)", RTLD_LAZY | RTLD_NOLOAD) else { break }
            dlclose(loaded)
            let moved = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1)
            close(fd)
            guard moved >= 0 else { return nil }
            fd = moved
        }
        let path = "/proc/self/./fd/\(fd)"
        guard bytes.withUnsafeBytes({ FileDescriptor.writeAll(fd, $0) }), fcntl(fd, addSeals, allSeals) == 0, access(path, R_OK) == 0 else {
            close(fd)
            return nil
        }
        return (fd, path)
    }
}

/// Ownership and permission checks for everything that decides which code runs, or how: the
/// rule OpenSSH's `StrictModes` applies to `authorized_keys`.
///
/// A checked file or directory, and every directory above it up to `/` (above the path as
/// written and above the path with symlinks resolved), and every directory holding a symbolic
/// link on the way (and the link itself, by its owner), must be owned by root or the current
/// user and must not be writable by group or others. An ancestor that is owned by root and has
/// the sticky bit (like `/tmp`) may be writable by others: nobody can replace what is in it.
enum FileSecurity {
    /// Checks `path`, which is `role` (e.g. `the manifest`), and every directory above it.
    ///
    /// - Parameter sharedDirectory: `path` is a directory that others may write to if it is
    ///   root's and sticky (as `/tmp`), as an ancestor may be: what is made in it is kept private.
    static func check(path: String, role: String, sharedDirectory: Bool = false) throws(PluginLoadError) {
        var memo = CheckMemo()
        try check(path: path, role: role, sharedDirectory: sharedDirectory, memo: &memo)
    }

    /// What one run of checks found to pass already, by path (a check's outcome depends on the
    /// path alone; its role only words a refusal): the dependency walk checks the same
    /// directories for every library it finds.
    struct CheckMemo {
        /// Paths that passed as ancestors (or as directories holding a symbolic link).
        var ancestors: Set<String> = []
        /// Paths that passed as what was checked (the stricter rule).
        var targets: Set<String> = []
        /// The hardware-specific subdirectories found below each searched directory.
        var subdirectories: [String: [String]] = [:]
        /// Whether each file found is a library the loader would take.
        var loadable: [String: Bool] = [:]
        /// What each lookup of a name in a searched directory found (`directory`, NUL, name).
        var lookups: [String: [String]] = [:]
        /// The libraries whose entries were checked: each real path, with the directory it was
        /// found in and the `RPATH` directories it inherited (NUL between them).
        var walked: Set<String> = []
        /// The loader's cache read from each path (nil inside: none the loader would read).
        var caches: [String: LoaderCache?] = [:]

        /// Whether the loader would take the file at `path` (see ``LibraryImage``).
        mutating func isLoadable(_ path: String) -> Bool {
            if let known = loadable[path] { return known }
            let answer = LibraryImage.map(path) != nil
            loadable[path] = answer
            return answer
        }
    }

    /// ``check(path:role:sharedDirectory:)``, skipping what `memo` says passed in this run.
    static func check(path: String, role: String, sharedDirectory: Bool = false, memo: inout CheckMemo) throws(PluginLoadError) {
        if !sharedDirectory, memo.targets.contains(path) { return }
        let absolute = lexicallyNormalized(path)
        // The file itself, and the chain with symlinks resolved, are what the kernel finds for
        // the path as written: a `..` after a symlink leaves the symlink's target, which folding
        // it away first (`a/link/..` as `a`) would not, and another directory would be judged.
        let asWritten = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var info = stat()
        guard stat(asWritten, &info) == 0 else {
            throw PluginLoadError(.unreadable, file: path, reason: "no such file or directory")
        }
        let real = realPath(asWritten) ?? absolute
        if let problem = problem(info, asAncestor: sharedDirectory) {
            // Through a symlink, the rule applies to what it points at, and the refusal names it.
            let linked = real != absolute
            throw PluginLoadError(
                .insecurePermissions, file: linked ? real : path,
                reason: "\(describe(info))\(problem), is \(linked ? "the target of \(role) \(path) (a symbolic link)" : role); \(remedy(info))")
        }
        // The path with its `..` folded away is no path the kernel walks when a `..` follows a
        // symlink: its directories are judged only for a path without `..` (the hops of the path
        // as written, and the resolved chain, cover what the kernel visits).
        let hasDotDot = asWritten.split(separator: "/").contains("..")
        for chain in hasDotDot ? [real] : [absolute, real] {
            var directory = parent(of: chain)
            while let current = directory {
                // Kept as passed once it has (a memo reused after a refusal holds no failed one).
                if !memo.ancestors.contains(current) {
                    try checkAncestor(current, of: "\(role) \(path)")
                    memo.ancestors.insert(current)
                }
                directory = parent(of: current)
            }
        }
        try checkHops(asWritten, checked: &memo.ancestors, of: "\(role) \(path)")
        if !sharedDirectory { memo.targets.insert(path) }
    }

    /// Checks where the library's dependencies come from, as glibc's loader looks for them, and
    /// what it would find there, as `check(path:role:)` checks the library: for each name the
    /// library needs (`NEEDED`, and a filter's `FILTER` and `AUXILIARY`), every directory of its
    /// `RPATH` and of the `RPATH`s of what leads to it (the caller of `dlopen` and the program,
    /// each unless it has a `RUNPATH`; the library's own only when it has no `RUNPATH`), of
    /// `LD_LIBRARY_PATH` (in `environment`) and of its `RUNPATH`; a directory that does not exist by
    /// the nearest directory above it that does, which must keep others from making it; below each,
    /// the hardware-specific subdirectories the loader looks in first; each file of the name found
    /// there (a symbolic link to nothing is refused); then, for a name none of them holds a
    /// library of this machine for, the path the loader's cache gives, else the default
    /// directories. Every library needed by path too. Then the same for each library found so
    /// (the loader follows their entries too), to the end of the chain.
    ///
    /// `$ORIGIN` (a token only when alone or followed by `/`, as the loader reads it) is, for the
    /// plugin library, the directory the verified bytes are opened from: a private one, or
    /// `/proc/self/fd` for a memory file, which holds every file the app has open. So for the
    /// plugin a search entry or a needed name below `$ORIGIN` whose first component is a
    /// descriptor number (or `..`) is refused, and so is a needed name of digits searched there;
    /// other names below it name nothing. For a library found on the way, `$ORIGIN` is the directory it was
    /// found in (checked already), and the entry is checked as the directory it names, `..` and
    /// all. An absolute entry with `..`, an entry relative to the working directory, another `$`
    /// token (in a search path or a needed name: `$LIB` and `$PLATFORM` name what this check cannot
    /// know) are refused; an empty `LD_LIBRARY_PATH` entry is the working directory, refused as
    /// a relative one (an empty value, and an empty `RPATH` or `RUNPATH`, name no directory). The
    /// environment is the process's as it started (``LoaderEnvironment/atStart``): the loader
    /// read `LD_LIBRARY_PATH` then, and never again.
    ///
    /// - Parameters:
    ///   - callers: the caller of `dlopen` (the image holding this code) and the program, whose
    ///     `RPATH`s the loader searches for libraries without a `RUNPATH`.
    static func checkDependencies(
        of bytes: Data, path: String, environment: [String: String] = LoaderEnvironment.atStart,
        loaderCache: String = LoaderCache.path, defaultDirectories: [String] = LoaderCache.defaultDirectories,
        callers: [String] = DependencyWalk.callers
    ) throws(PluginLoadError) {
        var memo = CheckMemo()
        try checkDependencies(
            of: bytes, path: path, environment: environment, loaderCache: loaderCache, defaultDirectories: defaultDirectories,
            callers: callers, memo: &memo)
    }

    /// ``checkDependencies(of:path:environment:loaderCache:defaultDirectories:callers:)``, going
    /// on from what `memo` says passed already in this load (a library walked with the same
    /// `RPATH`s inherited is not walked again).
    static func checkDependencies(
        of bytes: Data, path: String, environment: [String: String] = LoaderEnvironment.atStart,
        loaderCache: String = LoaderCache.path, defaultDirectories: [String] = LoaderCache.defaultDirectories,
        callers: [String] = DependencyWalk.callers, memo: inout CheckMemo
    ) throws(PluginLoadError) {
        guard let found = try dependencies(in: bytes, path: path, role: nil) else { return }
        // The walk works on a copy: what it found to pass is kept only when all of it passes.
        var walk = DependencyWalk(
            libraryPath: environment["LD_LIBRARY_PATH"], cachePath: loaderCache, defaultDirectories: defaultDirectories, memo: memo)
        let inherited = try walk.callerRPATHs(callers)
        try walk.check(found, path: path, origin: nil, neededBy: nil, inherited: inherited)
        while !walk.pending.isEmpty {
            let next = walk.pending.removeFirst()
            // Each library once, by what it is (names and links may lead to it many ways), for
            // each directory it was found in (its `$ORIGIN`) and set of `RPATH` directories it
            // inherits (what its needs are looked up in).
            let origin = parent(of: next.path) ?? "/"
            guard let real = realPath(next.path), walk.memo.walked.insert([real, origin, next.inheritedKey].joined(separator: "\0")).inserted
            else { continue }
            // Mapped, not read: only the headers and the dynamic section are touched.
            guard let mapped = LibraryImage.map(next.path),
                let found = try dependencies(in: mapped, path: next.path, role: "a library that the library \(next.neededBy) needs")
            else { continue }  // no library the loader would take: it passes over it too
            try walk.check(found, path: next.path, origin: origin, neededBy: next.neededBy, inherited: next.inherited)
        }
        memo = walk.memo
    }

    /// The dependencies of `bytes`, the library at `path` (what `role` says it is, unless it is
    /// the plugin library itself); a malformed dynamic section is refused.
    private static func dependencies(in bytes: Data, path: String, role: @autoclosure () -> String?) throws(PluginLoadError) -> ELFDependencies? {
        do {
            return try ELFDependencies.read(bytes)
        } catch {
            throw PluginLoadError(
                .notSharedObject, file: path, reason: "malformed ELF dynamic section: \(error.reason)\(role().map { " (\($0))" } ?? "")")
        }
    }

    /// The libraries found while checking a plugin library's dependencies, still to be checked
    /// themselves, and those checked.
    struct DependencyWalk {
        /// A directory searched for a library's needs, with the words that name where it comes from.
        struct Searched {
            let directory: String
            let named: String
        }

        /// A library the loader would load, found for `neededBy`, with the `RPATH` directories
        /// of the libraries that led to it (searched for its needs when it has no `RUNPATH`).
        struct Pending {
            let path: String
            let neededBy: String
            let inherited: [Searched]
            /// `inherited`'s directories, sorted, NUL between them: what sets them apart.
            let inheritedKey: String
        }

        /// The image holding this code (the caller of `dlopen`) and the program, when they differ:
        /// found once (neither moves while the process runs; their `RPATH`s are read at each check).
        static let callers: [String] = {
            let program = realPath("/proc/self/exe")
            return [image(holding: UInt(bitPattern: #dsohandle)), program].compactMap { $0 }.reduce(into: []) {
                if !$0.contains($1) { $0.append($1) }
            }
        }()

        /// The file mapped at `address` in this process, from `/proc/self/maps`.
        static func image(holding address: UInt) -> String? {
            // Read to its end: Foundation's readers gave its first page only, where a library
            // mapped after the program's first few dozen mappings is not.
            guard let bytes = FileDescriptor.readToEnd("/proc/self/maps", limit: 64 << 20) else { return nil }
            let maps = String(decoding: bytes, as: UTF8.self)
            for line in maps.split(separator: "\n") {
                // start-end perms offset device inode path
                let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
                // The path is padded with spaces after the inode.
                let path = fields.count == 6 ? String(fields[5].drop { $0 == " " }) : ""
                guard path.hasPrefix("/") else { continue }
                let range = fields[0].split(separator: "-")
                guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16) else { continue }
                if start <= address, address < end { return realPath(path) }
            }
            return nil
        }

        let libraryPath: String?
        /// The loader's cache, and the directories it searches last.
        let cachePath: String
        let defaultDirectories: [String]
        /// What passed already in this walk (and the load it is part of).
        var memo: FileSecurity.CheckMemo
        var pending: [Pending] = []
        /// The libraries queued: each path found, with the `RPATH` directories it inherits.
        var queued: Set<String> = []

        /// The loader's cache, read and checked (as a library is) the first time it is asked for.
        mutating func loaderCache() throws(PluginLoadError) -> LoaderCache? {
            if let known = memo.caches[cachePath] { return known }
            var info = stat()
            guard stat(cachePath, &info) == 0 else {
                // None now: whoever may make it decides what the loader takes from it later.
                try FileSecurity.checkWhoMayMake(cachePath, described: "the loader's cache \(cachePath)", memo: &memo)
                memo.caches[cachePath] = .some(nil)
                return nil
            }
            try FileSecurity.check(path: cachePath, role: "the loader's cache of library paths", memo: &memo)
            let read = (try? Data(contentsOf: URL(fileURLWithPath: cachePath))).flatMap { LoaderCache.read($0) }
            memo.caches[cachePath] = .some(read)
            return read
        }

        /// The `RPATH` directories of `callers` that the loader searches for every library
        /// without a `RUNPATH` (each caller's unless it has a `RUNPATH`), checked alike.
        mutating func callerRPATHs(_ callers: [String]) throws(PluginLoadError) -> [Searched] {
            var found: [Searched] = []
            for caller in callers {
                guard let image = LibraryImage.map(caller) ?? (try? Data(contentsOf: URL(fileURLWithPath: caller), options: .alwaysMapped))
                else { continue }
                // A caller whose search paths cannot be read is refused, not passed over: its
                // `RPATH` would go unchecked, every entry of it.
                guard let entries = try FileSecurity.dependencies(in: image, path: caller, role: "of \(caller), which loads plugins") else {
                    continue
                }
                found += try searchPaths(
                    entries, path: caller, library: "\(caller) (which loads plugins)", origin: parent(of: caller)
                ).rpath
            }
            return found
        }

        /// The directories of a library's `RPATH` the loader searches (none when it has a
        /// `RUNPATH`) and of its `RUNPATH`, each checked to be one (a token other than `$ORIGIN`,
        /// `..` outside a known `$ORIGIN` and a relative entry are refused); `$ORIGIN` entries of
        /// the plugin library (`origin` nil) are left out: nobody else can put a library there.
        func searchPaths(
            _ found: ELFDependencies, path: String, library: String, origin: String?
        ) throws(PluginLoadError) -> (rpath: [Searched], runpath: [Searched]) {
            var rpath: [Searched] = []
            var runpath: [Searched] = []
            // An empty `RPATH` or `RUNPATH` string names no directory (glibc ignores it; an empty
            // `RUNPATH` still makes the loader ignore the `RPATH`).
            for entry in found.searchPaths where (entry.tag == "RUNPATH" || !found.hasRunpath) && !entry.value.isEmpty {
                for directory in entry.value.split(separator: ":", omittingEmptySubsequences: false).map(String.init) {
                    let named = "the \(entry.tag) entry \(directory.debugDescription) of the library \(library)"
                    func refuse(_ why: String) -> PluginLoadError { PluginLoadError(.insecurePermissions, file: path, reason: "\(named) \(why)") }
                    let token = ["${ORIGIN}", "$ORIGIN"].first { directory == $0 || directory.hasPrefix($0 + "/") }
                    if directory.split(separator: "/").contains(".."), token == nil || origin == nil {
                        throw refuse("climbs with ..; name the directory itself")
                    }
                    var searched = directory
                    if let token {
                        guard let origin else {
                            // The plugin's `$ORIGIN` is where its bytes are opened from. Below it,
                            // a descriptor number names a file the app holds open (a directory of
                            // anyone's would be searched); other names are nothing there.
                            if Self.leavesOrigin(directory.dropFirst(token.count)) { throw refuse("is below $ORIGIN: \(Self.originOfAPlugin)") }
                            continue
                        }
                        searched = origin + directory.dropFirst(token.count)
                    }
                    guard !directory.dropFirst(token?.count ?? 0).contains("$") else { throw refuse("holds a token other than $ORIGIN; remove it") }
                    guard searched.hasPrefix("/") else {
                        throw refuse("is relative: it would be searched in whatever directory the app runs in; make it absolute or $ORIGIN")
                    }
                    if entry.tag == "RUNPATH" {
                        runpath.append(Searched(directory: searched, named: named))
                    } else {
                        rpath.append(Searched(directory: searched, named: named))
                    }
                }
            }
            return (rpath, runpath)
        }

        /// The directories of `LD_LIBRARY_PATH`, each checked to be one.
        func libraryPathDirectories(path: String, needs: String) throws(PluginLoadError) -> [Searched] {
            // The loader takes no directory from an empty value (glibc: `*llp != '\0'`).
            guard let libraryPath, !libraryPath.isEmpty else { return [] }
            var found: [Searched] = []
            for directory in libraryPath.split(omittingEmptySubsequences: false, whereSeparator: { $0 == ":" || $0 == ";" }).map(String.init) {
                let named = "the LD_LIBRARY_PATH entry \(directory.debugDescription), searched for \(needs),"
                func refuse(_ why: String) -> PluginLoadError { PluginLoadError(.insecurePermissions, file: path, reason: "\(named) \(why)") }
                guard !directory.contains("$") else { throw refuse("holds a token; name the directory itself") }
                // Bytes that are not UTF-8 were read as U+FFFD (``LoaderEnvironment``): the string
                // names another directory than the bytes the loader searches.
                guard !directory.unicodeScalars.contains("\u{FFFD}") else {
                    throw refuse("is not UTF-8 text (or names U+FFFD), so the directory the loader would search cannot be checked; name it in UTF-8")
                }
                guard directory.hasPrefix("/") else {
                    throw refuse(
                        "is relative (empty: the working directory): it would be searched in whatever directory the app runs in; make it absolute")
                }
                if directory.split(separator: "/").contains("..") { throw refuse("climbs with ..; name the directory itself") }
                found.append(Searched(directory: directory, named: named))
            }
            return found
        }

        /// Whether `rest` (what follows `$ORIGIN`) reaches out of a plugin's `$ORIGIN` when that is
        /// `/proc/self/fd`: its first component (past `.`) a descriptor number, or `..`.
        static func leavesOrigin(_ rest: Substring) -> Bool {
            guard let first = rest.split(separator: "/").first(where: { $0 != "." }) else { return false }
            return first == ".." || isDescriptorNumber(first)
        }

        /// Whether `name` is all digits: in `/proc/self/fd` (a memory file's `$ORIGIN`), a file
        /// the app holds open.
        static func isDescriptorNumber(_ name: Substring) -> Bool {
            !name.isEmpty && name.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        }

        /// Why a plugin's `$ORIGIN` names nothing below it.
        static let originOfAPlugin =
            "for a plugin, $ORIGIN is where its verified bytes are opened from (/proc/self/fd for a memory file: every file the app "
            + "holds open is there); use $ORIGIN alone, or name the library or directory itself"

        /// Checks the entries of one library (`origin`: the directory it was found in; nil for
        /// the plugin library, whose `$ORIGIN` is private) and queues the libraries they lead to.
        mutating func check(
            _ found: ELFDependencies, path: String, origin: String?, neededBy: String?, inherited: [Searched]
        ) throws(PluginLoadError) {
            let library = neededBy.map { "\(path) (needed by the library \($0))" } ?? path
            let needs = "the libraries \(path) needs" + (neededBy.map { " (itself needed by the library \($0))" } ?? "")
            var names: [String] = []
            var paths: [String] = []
            for entry in found.needed {
                let value = entry.value
                func refuse(_ why: String) -> PluginLoadError {
                    PluginLoadError(.insecurePermissions, file: path, reason: "the library \(library) needs \(value.debugDescription), \(why)")
                }
                if value.contains("$") {
                    let token = ["${ORIGIN}/", "$ORIGIN/"].first { value.hasPrefix($0) }
                    guard let token, !value.dropFirst(token.count).contains("$") else {
                        throw refuse(
                            "a name with a token other than $ORIGIN ($LIB, $PLATFORM: the loader expands them to what this check cannot know); name the library plainly"
                        )
                    }
                    // The plugin's `$ORIGIN` is where its bytes are opened from: `/proc/self/fd`
                    // for a memory file, where a number is any file the app holds open.
                    guard let origin else {
                        if Self.leavesOrigin(value.dropFirst(token.count)) { throw refuse("a name under $ORIGIN: \(Self.originOfAPlugin)") }
                        continue
                    }
                    paths.append(origin + "/" + value.dropFirst(token.count))
                } else if value.contains("/") {
                    guard value.hasPrefix("/") else { throw refuse("a path relative to whatever directory the app runs in") }
                    paths.append(value)
                } else if !names.contains(value) {
                    // Searched in the plugin's bare `$ORIGIN` (`/proc/self/fd`), a name of digits
                    // is a descriptor the app holds open.
                    if origin == nil, Self.isDescriptorNumber(value[...]) {
                        throw refuse("a name of digits: in the plugin's $ORIGIN (/proc/self/fd for a memory file) it names a file the app holds open")
                    }
                    names.append(value)
                }
            }
            let own = try searchPaths(found, path: path, library: library, origin: origin)
            // The loader's order: the RPATHs (without a RUNPATH, `own.rpath` is empty and the
            // inherited ones are not searched), LD_LIBRARY_PATH, the RUNPATH.
            let inheritedNamed = inherited.map { Searched(directory: $0.directory, named: "\($0.named), searched for \(needs)") }
            let rpaths = found.hasRunpath ? [] : own.rpath + inheritedNamed
            let directories = names.isEmpty ? [] : rpaths + (try libraryPathDirectories(path: path, needs: needs)) + own.runpath
            var located: [String] = []
            var resolved: Set<String> = []
            for searched in directories {
                for candidate in try FileSecurity.checkSearched(searched.directory, named: searched.named, libraries: names, memo: &memo)
                where memo.isLoadable(candidate) {
                    located.append(candidate)
                    // One in a hardware-specific subdirectory may be for another processor than
                    // this one (the loader would go on searching): only the directory's own ends it.
                    let name = (candidate as NSString).lastPathComponent
                    if candidate == searched.directory + "/" + name { resolved.insert(name) }
                }
            }
            // What no search path holds a library of this machine for, the loader takes from
            // its cache, else from its default directories.
            for name in names where !resolved.contains(name) {
                let listed = try loaderCache()?.paths(for: name) ?? []
                var cached: [String] = []
                for library in listed {
                    let place = "where the loader's cache \(cachePath) says \(name.debugDescription) is (for \(needs))"
                    var info = stat()
                    guard stat(library, &info) == 0 else {
                        if lstat(library, &info) == 0 { throw danglingLink(library, place) }
                        // Not there: whoever may make it decides, so its directory (or the nearest above) is checked.
                        _ = try FileSecurity.checkSearched(parent(of: library) ?? "/", named: "the directory \(place)", libraries: [], memo: &memo)
                        continue
                    }
                    try FileSecurity.check(
                        path: library, role: "a library the loader's cache \(cachePath) gives for \(name.debugDescription) (for \(needs))",
                        memo: &memo)
                    if memo.isLoadable(library) { cached.append(library) }
                }
                located += cached
                // Which entry the loader takes depends on the processor; when it cannot use it,
                // it goes on to its default directories: they are checked unless every entry is usable.
                guard cached.isEmpty || cached.count < listed.count else { continue }
                for directory in defaultDirectories {
                    located += try FileSecurity.checkSearched(
                        directory, named: "a default directory of the loader, searched for \(needs)", libraries: [name], memo: &memo
                    ).filter { memo.isLoadable($0) }
                }
            }
            for needed in paths {
                try FileSecurity.check(path: needed, role: "a library that the library \(library) needs", memo: &memo)
                if memo.isLoadable(needed) { located.append(needed) }
            }
            // Each directory once (a chain that comes back to a library does not grow the list).
            var passedOn: [Searched] = []
            for searched in own.rpath + inherited where !passedOn.contains(where: { $0.directory == searched.directory }) {
                passedOn.append(searched)
            }
            // Each library once for each set of `RPATH` directories it inherits (what its needs
            // are looked up in); the walk then goes by what it is (its real path).
            let inheritedKey = passedOn.map(\.directory).sorted().joined(separator: "\0")
            for library in located where queued.insert(library + "\0" + inheritedKey).inserted {
                pending.append(Pending(path: library, neededBy: path, inherited: passedOn, inheritedKey: inheritedKey))
            }
        }
    }

    /// The refusal of a symbolic link to nothing at `path`, which is `place` (e.g. `where the loader
    /// looks for "libz.so.1"`): whoever may make its target decides what is loaded.
    static func danglingLink(_ path: String, _ place: String) -> PluginLoadError {
        PluginLoadError(
            .insecurePermissions, file: path,
            reason: "a symbolic link to nothing \(place); whoever may make its target decides what is loaded: remove it or make its target")
    }

    /// `directory` if it exists, else the nearest directory above it that does; a symbolic link
    /// to nothing on the way is refused (`place` says where it was met): whoever may make its
    /// target decides what is found there.
    static func nearestExisting(_ directory: String, place: String) throws(PluginLoadError) -> String {
        var existing = directory
        var info = stat()
        while stat(existing, &info) != 0 {
            if lstat(existing, &info) == 0 { throw danglingLink(existing, place) }
            guard let up = parent(of: existing) else { break }
            existing = up
        }
        return existing
    }

    /// Checks a plugin directory a manifest names as ``check(path:role:sharedDirectory:)``
    /// does; one that does not exist (yet) by the nearest directory above it that does, which
    /// must keep others from making it: a plugin directory someone else made would refuse every
    /// load from then on (or, were it not checked, decide what code runs).
    static func checkPluginDirectory(_ directory: String, memo: inout CheckMemo) throws(PluginLoadError) {
        var info = stat()
        if stat(directory, &info) == 0 {
            try check(path: directory, role: "the plugin directory", memo: &memo)
        } else {
            try checkWhoMayMake(directory, described: "the plugin directory \(directory)", memo: &memo)
        }
    }

    /// Checks what decides who may make `path`, which does not exist: the nearest directory above
    /// it that does, as ``check(path:role:sharedDirectory:)`` checks a file (a symbolic link to
    /// nothing on the way is refused). `described` says what `path` is (`the plugin directory /x`).
    static func checkWhoMayMake(_ path: String, described: String, memo: inout CheckMemo) throws(PluginLoadError) {
        let existing = try nearestExisting(path, place: "on the path of \(described)")
        try check(
            path: existing, role: "the nearest directory above \(described) (which does not exist: who may write here may make it)", memo: &memo)
    }

    /// Checks a directory the loader searches, or the nearest one above it that exists, and each
    /// of `libraries` the loader would find in it; returns the paths of those found.
    fileprivate static func checkSearched(
        _ directory: String, named: String, libraries: [String], memo: inout CheckMemo
    ) throws(PluginLoadError) -> [String] {
        // Names looked up here already in this walk (the directory was checked then too).
        var known: [String] = []
        var libraries = libraries
        if !libraries.isEmpty {
            libraries.removeAll { name in memo.lookups[directory + "\0" + name].map { known += $0 } != nil }
            if libraries.isEmpty { return known }
        }
        var info = stat()
        let existing = try nearestExisting(directory, place: "on the path of a directory the loader searches for libraries (\(named))")
        guard existing == directory else {
            try check(
                path: existing, role: "the nearest directory above \(directory) (\(named), which does not exist: who may write here may make it)",
                memo: &memo)
            for library in libraries { memo.lookups[directory + "\0" + library] = [] }
            return known
        }
        try check(path: directory, role: "a directory the loader searches for libraries (\(named))", memo: &memo)
        // The loader looks in the hardware-specific subdirectories first; made only by whoever
        // may write to the directory.
        let subdirectories = memo.subdirectories[directory] ?? hardwareSubdirectories(of: directory)
        memo.subdirectories[directory] = subdirectories
        var found: [String: [String]] = [:]
        for subdirectory in subdirectories + [directory] {
            let role = subdirectory == directory ? named : "\(named); a hardware-specific subdirectory of \(directory)"
            if subdirectory != directory {
                guard stat(subdirectory, &info) == 0 else {
                    throw danglingLink(subdirectory, "on the path of a directory the loader searches for libraries (\(role))")
                }
                try check(path: subdirectory, role: "a directory the loader searches for libraries (\(role))", memo: &memo)
            }
            for library in libraries where lstat(subdirectory + "/" + library, &info) == 0 {
                let path = subdirectory + "/" + library
                guard stat(path, &info) == 0 else {
                    throw danglingLink(path, "where the loader looks for \(library.debugDescription) (\(role))")
                }
                try check(path: path, role: "a library the loader would load from \(subdirectory) (\(role))", memo: &memo)
                found[library, default: []].append(path)
            }
        }
        for library in libraries {
            memo.lookups[directory + "\0" + library] = found[library] ?? []
            known += found[library] ?? []
        }
        return known
    }

    /// The names of the older hardware-specific subdirectories glibc's loader searches below
    /// each directory (`tls`, the platform's and its capabilities'), nested up to four deep (as
    /// `tls/haswell/avx512_1/x86_64`), and of the hardware levels below `glibc-hwcaps`.
    #if arch(x86_64)
    private static let hardwareNames = ["tls", "x86_64", "haswell", "xeon_phi", "avx512_1"]
    private static let hardwareLevels = ["x86-64-v4", "x86-64-v3", "x86-64-v2"]
    #elseif arch(arm64)
    private static let hardwareNames = ["tls", "aarch64", "atomics"]
    private static let hardwareLevels: [String] = []
    #else
    private static let hardwareNames = ["tls"]
    private static let hardwareLevels: [String] = []
    #endif

    /// The subdirectories of `directory` that glibc's loader may search before it, for this
    /// machine's hardware, and that exist (or are symbolic links): each one below
    /// `glibc-hwcaps` (a hardware level, as `x86-64-v3`), and the older ones named by
    /// ``hardwareNames`` (as `tls/x86_64/x86_64`). Which of them the loader searches depends on
    /// the processor and the C library; all are checked.
    static func hardwareSubdirectories(of directory: String) -> [String] {
        var info = stat()
        var found: [String] = []
        let levels = directory + "/glibc-hwcaps"
        if lstat(levels, &info) == 0 {
            found.append(levels)
            // Those listed, and the known ones by name (a directory that cannot be listed may
            // still be searched).
            let listed = (try? FileManager.default.contentsOfDirectory(atPath: levels)) ?? []
            for level in Set(listed).union(hardwareLevels.filter { lstat(levels + "/" + $0, &info) == 0 }).sorted() {
                found.append(levels + "/" + level)
            }
        }
        var layer = [directory]
        for _ in 0..<4 {
            var next: [String] = []
            for parent in layer {
                for name in hardwareNames where lstat(parent + "/" + name, &info) == 0 {
                    found.append(parent + "/" + name)
                    if stat(parent + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { next.append(parent + "/" + name) }
                }
            }
            layer = next
        }
        return found
    }

    /// Follows `path` component by component, as the kernel does, and checks what neither chain
    /// above covers: every directory a symbolic link on the way is found in (`/deploy` for
    /// `/opt/app -> /deploy/current -> /srv/releases/7`: whoever may write there may point
    /// `current` elsewhere), every directory passed through on the way to such a link (`/srv` and
    /// `/srv/shared` for `/etc/app.json -> /srv/shared/cfg/current`: whoever may write there may
    /// put another `cfg` in its place), and the owner of each link (in a sticky directory,
    /// another user's link would decide where the path goes).
    private static func checkHops(_ path: String, checked: inout Set<String>, of protected: String) throws(PluginLoadError) {
        var pending = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var current = "/"
        var links = 0
        // The last link followed: the directories passed through after it are on its way.
        var followed: String?
        while !pending.isEmpty {
            let component = pending.removeFirst()
            if component == "." { continue }
            if component == ".." {
                current = parent(of: current) ?? "/"
                continue
            }
            let next = current == "/" ? "/" + component : current + "/" + component
            var info = stat()
            guard lstat(next, &info) == 0 else { return }  // what does not exist was refused above
            guard (info.st_mode & S_IFMT) == S_IFLNK else {
                if let followed, !checked.contains(current) {
                    try checkAncestor(current, of: protected, passedBy: followed)
                    checked.insert(current)
                }
                current = next
                continue
            }
            links += 1
            guard links <= 40 else { return }  // a loop: stat above would have failed
            if !checked.contains(current) {
                try checkAncestor(current, of: protected, holdsLink: next)
                checked.insert(current)
            }
            if info.st_uid != 0 && info.st_uid != geteuid() {
                throw PluginLoadError(
                    .insecurePermissions, file: next,
                    reason: "a symbolic link of uid \(info.st_uid) (neither root nor the current user, uid \(geteuid())) "
                        + "on the path of \(protected); give it to root or the current user (chown -h)")
            }
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: next) else { return }
            followed = next
            if target.hasPrefix("/") { current = "/" }
            pending = target.split(separator: "/", omittingEmptySubsequences: true).map(String.init) + pending
        }
    }

    private static func checkAncestor(
        _ directory: String, of protected: String, holdsLink link: String? = nil, passedBy followed: String? = nil
    ) throws(PluginLoadError) {
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw PluginLoadError(.unreadable, file: directory, reason: "cannot stat this ancestor of \(protected)")
        }
        if let problem = problem(info, asAncestor: true) {
            let what =
                link.map { "holds the symbolic link \($0) on the path of" }
                ?? followed.map { "is passed through on the way the symbolic link \($0) leads, on the path of" } ?? "is an ancestor of"
            throw PluginLoadError(
                .insecurePermissions, file: directory,
                reason: "\(describe(info))\(problem), \(what) \(protected); \(remedy(info))")
        }
    }

    /// What is wrong with a file or directory, or nil.
    private static func problem(_ info: stat, asAncestor: Bool) -> String? {
        let me = geteuid()
        if info.st_uid != 0 && info.st_uid != me {
            return " (neither root nor the current user, uid \(me))"
        }
        let mode = info.st_mode & 0o7777
        guard mode & 0o022 != 0 else { return nil }
        if asAncestor, info.st_uid == 0, mode & S_ISVTX != 0, (info.st_mode & S_IFMT) == S_IFDIR { return nil }
        return ""
    }

    /// `mode 0777 (writable by group and others), owner root`.
    private static func describe(_ info: stat) -> String {
        let mode = info.st_mode & 0o7777
        var writers: [String] = []
        if mode & 0o020 != 0 { writers.append("group") }
        if mode & 0o002 != 0 { writers.append("others") }
        let octal = String(mode, radix: 8)
        let padded = String(repeating: "0", count: max(0, 4 - octal.count)) + octal
        let writable = writers.isEmpty ? "" : " (writable by \(writers.joined(separator: " and ")))"
        let owner = info.st_uid == 0 ? "root" : "uid \(info.st_uid)"
        return "mode \(padded)\(writable), owner \(owner)"
    }

    private static func remedy(_ info: stat) -> String {
        if info.st_uid != 0 && info.st_uid != geteuid() { return "give it to root or the current user (chown)" }
        return "remove group and other write access (chmod go-w)"
    }

    /// The path made absolute, with `.`, `..` and repeated slashes removed (symlinks kept).
    static func lexicallyNormalized(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var parts: [Substring] = []
        for part in absolute.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." {
                if !parts.isEmpty { parts.removeLast() }
                continue
            }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The directory holding `path` (absolute and normalized), or nil for `/`.
    private static func parent(of path: String) -> String? {
        guard path != "/" else { return nil }
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The canonical path (symlinks resolved), or nil.
    static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// The environment the dynamic loader read when the process started: glibc takes
/// `LD_LIBRARY_PATH` once, then (`_dl_init_paths`), and `dlopen` searches those directories
/// whatever the process later sets or unsets (an app that unsets it to harden itself still
/// has it searched).
enum LoaderEnvironment {
    /// The variables of `/proc/self/environ` (the block the process started with); where it
    /// cannot be read, the environment as it is now.
    static let atStart: [String: String] = {
        guard let data = FileManager.default.contents(atPath: "/proc/self/environ"), !data.isEmpty else {
            return ProcessInfo.processInfo.environment
        }
        return parse([UInt8](data))
    }()

    /// `NAME=value` entries separated by NUL bytes; the last of a name wins, as the loader reads
    /// its variables (glibc's `process_envvars` takes each in turn; `getenv` would find the first).
    static func parse(_ bytes: [UInt8]) -> [String: String] {
        var found: [String: String] = [:]
        for entry in bytes.split(separator: 0) {
            guard let equals = entry.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let name = String(decoding: entry[entry.startIndex..<equals], as: UTF8.self)
            found[name] = String(decoding: entry[(equals + 1)...], as: UTF8.self)
        }
        return found
    }
}
