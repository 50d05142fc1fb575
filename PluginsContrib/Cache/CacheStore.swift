import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Memory LRU in front of an optional disk store. Thread-safe.
///
/// Disk: one file per entry named by its partition and the SHA-256 of its key, mode 0600 in a
/// 0700 directory, written to a temporary file and renamed into place. A file that is
/// truncated, corrupted (checked by a SHA-256 of its contents) or unreadable is a miss and is
/// removed. Memory and disk are bounded; eviction takes the least recently used *partition*
/// first (a partition nobody has used since a logout or a token change goes before anything a
/// current user still reads), and within it the least recently used entry. Stores of processes
/// sharing the directory read each other's entries and, listing it every ``rescanInterval``
/// seconds, hold it to its bound together.
///
/// A key is `GET <url>` (shared) or `<partition> GET <url>`, where the partition is a keyed
/// hash of the request's credentials (``CachePlugin``): never the credentials themselves.
final class CacheStore: Sendable {
    /// An entry held in memory. A reference: marking it used changes it where it is, and reading
    /// when it was used (for every entry, at each eviction) copies no entry.
    // Safe as @unchecked Sendable: only read and changed under the store's lock.
    final class Resident: @unchecked Sendable {
        let entry: CacheEntry
        let size: Int
        var used: UInt64
        /// Read from memory since its file's last use was set (``syncMemoryUse(_:)``).
        var hitSinceDiskUse = false
        /// The partition of its key (``CacheStore/partition(ofKey:)``); nil for the shared one.
        let partition: String?

        init(_ entry: CacheEntry, size: Int, used: UInt64) {
            self.entry = entry
            self.size = size
            self.used = used
            partition = PartitionUse.partition(ofKey: entry.key)
        }
    }

    /// Everything that changes, behind one lock.
    private struct State {
        var memory: [String: Resident] = [:]
        var memoryBytes = 0
        var clock: UInt64 = 0
        /// Entry files by name: their size, and when last used (``wallNanoseconds()``: a file
        /// another process wrote, when it was modified), so that stores sharing the directory
        /// evict in one order.
        var disk: [String: (size: Int, used: UInt64)] = [:]
        var diskBytes = 0
        /// When each partition was last used.
        var partitionUse = PartitionUse()
        /// File names of keys looked up lately (a name is a digest of its key: worked out once);
        /// emptied when it reaches ``maxRememberedNames``.
        var names: [String: String] = [:]
        /// Entry files kept open after a read, by name (at most ``maxOpenFiles``).
        var openFiles: [String: OpenFile] = [:]
        /// The metadata of the entry file read last and its entry, without a body (``decode(_:last:)``).
        var lastDecoded: (metadata: [UInt8], entry: CacheEntry)?
        /// When the directory was last listed (monotonic nanoseconds): ``rescanInterval``.
        var lastScan: UInt64 = 0
        /// While a listing of the directory runs (outside the lock): the entry files this store
        /// wrote, read or removed since it began, which the listing may show as they were before.
        var touchedDuringScan: Set<String>?
        /// The last ``diskTime()`` given.
        var lastDiskTime: UInt64 = 0

        /// Now, for an entry file's last use: ``wallNanoseconds()``, later than any given before
        /// (two uses are never at one time, and a clock set back does not reorder them).
        mutating func diskTime() -> UInt64 {
            lastDiskTime = max(lastDiskTime &+ 1, CacheStore.wallNanoseconds())
            return lastDiskTime
        }

        /// The file name of `key`.
        mutating func name(of key: String) -> String {
            if let known = names[key] { return known }
            if names.count >= CacheStore.maxRememberedNames { names.removeAll(keepingCapacity: true) }
            let name = CacheStore.fileName(key)
            names[key] = name
            return name
        }
    }

    /// How many file names ``State/name(of:)`` keeps.
    static let maxRememberedNames = 4096

    /// An entry file kept open after a read (an open-file cache, as web servers keep one), read
    /// again with `pread`, which saves the `open`, `fstat` and `close` of a disk hit. Before each
    /// such read the store checks that the file is still the entry, unchanged (a regular file, the
    /// same device and inode, size and modification time): by its name (`lstat`) at least every
    /// ``nameCheckInterval`` seconds, and in between through the descriptor (`fstat`, a third of
    /// the cost: a file removed or replaced by rename, by this store or another, has no link
    /// left). A file moved away under another name is therefore read until its name is checked
    /// again. The digest inside the file is checked on every read, as for a file just opened.
    struct OpenFile {
        let fd: Int32
        let device: UInt64
        let inode: UInt64
        let size: Int
        let modified: timespec
        var used: UInt64
        /// When the name was last checked to refer to this file (monotonic nanoseconds).
        var checkedByName: UInt64 = 0

        init(fd: Int32, _ status: stat, used: UInt64) {
            self.fd = fd
            device = UInt64(truncatingIfNeeded: status.st_dev)
            inode = UInt64(truncatingIfNeeded: status.st_ino)
            size = Int(status.st_size)
            #if canImport(Darwin)
            modified = status.st_mtimespec
            #else
            modified = status.st_mtim
            #endif
            self.used = used
        }

        /// Whether `status` (of the entry's path, not following a link, or of the kept descriptor)
        /// is still this file, unchanged.
        func matches(_ status: stat) -> Bool {
            let other = OpenFile(fd: fd, status, used: used)
            return (status.st_mode & S_IFMT) == S_IFREG && other.device == device && other.inode == inode && other.size == size
                && other.modified.tv_sec == modified.tv_sec && other.modified.tv_nsec == modified.tv_nsec
        }
    }

    /// How many entry files a store keeps open (each a file descriptor).
    static let maxOpenFiles = 32

    /// Seconds between checks by name of a kept entry file (``OpenFile``); 0: every read.
    let nameCheckInterval: Double
    /// Seconds between listings of the directory by a store that writes to it (0: at every
    /// write): the files other processes sharing it wrote or removed since are counted in or out
    /// of `maxDiskBytes`, and the least recently used evicted, whoever wrote them.
    let rescanInterval: Double

    private let state = Locked(State())
    private let maxMemoryEntries: Int
    private let maxMemoryBytes: Int
    private let directory: String?
    private let maxDiskBytes: Int

    /// The disk format's tag (2: binary metadata, one digest over metadata and body).
    static let magic: [UInt8] = Array("PHC2".utf8)

    /// Why a cache directory was refused.
    struct DirectoryError: Error, CustomStringConvertible {
        let description: String
    }

    /// Creates the directory (mode 0700) or checks the existing one: a directory of the current
    /// user that group and others cannot enter. An existing directory is never `chmod`ed: one
    /// that others could read or write may already hold what they put there.
    static func prepareDirectory(_ directory: String) throws {
        var info = stat()
        if lstat(directory, &info) != 0 {
            // Made 0700 by mkdir itself: FileManager makes it 0777 (less the umask) and then
            // changes its mode, and another user may enter it in between.
            let parent = (directory as NSString).deletingLastPathComponent
            if !parent.isEmpty, lstat(parent, &info) != 0 {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            }
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
                throw DirectoryError(description: "it cannot be created: " + String(cString: strerror(errno)))
            }
            guard lstat(directory, &info) == 0 else { throw DirectoryError(description: "it cannot be examined after creating it") }
        }
        if let problem = FileDescriptor.privacyProblem(info, .directory) { throw DirectoryError(description: "it " + problem) }
    }

    deinit {
        state.withLock { state in
            for file in state.openFiles.values { close(file.fd) }
            state.openFiles.removeAll()
        }
    }

    init(
        maxMemoryEntries: Int, maxMemoryBytes: Int, directory: String?, maxDiskBytes: Int, nameCheckInterval: Double = 1,
        rescanInterval: Double = 10
    ) throws {
        self.nameCheckInterval = nameCheckInterval
        self.rescanInterval = rescanInterval
        self.maxMemoryEntries = maxMemoryEntries
        self.maxMemoryBytes = maxMemoryBytes
        self.directory = directory
        self.maxDiskBytes = maxDiskBytes
        guard let directory else { return }
        try Self.prepareDirectory(directory)
        let files = Self.entryFiles(in: directory) ?? []
        state.withLock { state in
            state.lastScan = DispatchTime.now().uptimeNanoseconds
            reconcile(files, &state)
            evictDisk(&state)
        }
    }

    /// The entry files in `directory` (name, size, modification time), the least recently
    /// modified first; nil when the directory cannot be listed. Removes the temporary files of
    /// writers that stopped (``abandonedAfter``).
    static func entryFiles(in directory: String) -> [(name: String, size: Int, modified: UInt64)]? {
        guard let files = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        let now = wallNanoseconds()
        var found: [(name: String, size: Int, modified: UInt64)] = []
        for name in files {
            let path = directory + "/" + name
            var status = stat()
            guard lstat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { continue }
            #if canImport(Darwin)
            let time = status.st_mtimespec
            #else
            let time = status.st_mtim
            #endif
            let modified = UInt64(max(0, time.tv_sec)) &* 1_000_000_000 &+ UInt64(max(0, time.tv_nsec))
            if name.contains(".tmp-") {
                // Left by a writer that stopped (a crash): one still writing, another process
                // sharing the directory, renames or links its file within moments.
                if Double(now &- min(now, modified)) / 1e9 > abandonedAfter { unlink(path) }
                continue
            }
            guard name.hasSuffix(".entry"), name.contains("-") else { continue }
            found.append((name, Int(status.st_size), modified))
        }
        return found.sorted { $0.modified < $1.modified }
    }

    /// The time of day in nanoseconds since 1970, as file modification times are read.
    static func wallNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(max(0, now.tv_sec)) &* 1_000_000_000 &+ UInt64(max(0, now.tv_nsec))
    }

    /// Brings the table of entry files to what a listing of the directory found (`files`, the
    /// least recently modified first), but for the files this store touched while it ran: a file
    /// another process wrote (or one this store found when it opened the directory) is counted,
    /// as last used when it was modified, and its partition, unless this store used it, as used
    /// in the same order (a partition ranks by its newest file); a file another process rewrote
    /// is counted at its size and ranks by the later of this store's use and the rewrite; one
    /// another process removed is forgotten.
    private func reconcile(_ files: [(name: String, size: Int, modified: UInt64)], _ state: inout State) {
        let touched = state.touchedDuringScan ?? []
        var present = Set<String>()
        var ranked = Set<String>()
        for (name, size, modified) in files where !touched.contains(name) {
            present.insert(name)
            if let known = state.disk[name] {
                state.diskBytes += size - known.size
                state.disk[name] = (size, max(known.used, modified))
            } else {
                state.disk[name] = (size, modified)
                state.diskBytes += size
                let partition = Self.partition(ofFile: name)
                if ranked.contains(partition) || state.partitionUse[partition] == 0 {
                    ranked.insert(partition)
                    state.clock += 1
                    state.partitionUse.set(partition, state.clock)
                }
            }
        }
        var gone: [String] = []
        for name in state.disk.keys where !present.contains(name) && !touched.contains(name) { gone.append(name) }
        for name in gone {
            closeFile(name, &state)
            if let old = state.disk.removeValue(forKey: name) { state.diskBytes -= old.size }
        }
    }

    /// Lists the directory (outside the lock: a large one takes a while) and reconciles the
    /// table with it, when no other listing runs; called by a write every ``rescanInterval``.
    private func rescan(_ directory: String) {
        let due = state.withLock { state -> Bool in
            let now = DispatchTime.now().uptimeNanoseconds
            guard state.touchedDuringScan == nil, Double(now &- state.lastScan) >= rescanInterval * 1e9 else { return false }
            state.lastScan = now
            syncMemoryUse(&state)
            state.touchedDuringScan = []
            return true
        }
        guard due else { return }
        let files = Self.entryFiles(in: directory)
        state.withLock { state in
            // A directory that cannot be listed now (out of descriptors, say) changes nothing.
            if let files { reconcile(files, &state) }
            state.touchedDuringScan = nil
            evictDisk(&state)
        }
    }

    /// Seconds after which a temporary file in the directory is taken for one its writer abandoned.
    static let abandonedAfter: Double = 600

    /// The entry for `key`, from memory or disk.
    func get(_ key: String) -> CacheEntry? {
        state.withLock { state in
            state.clock += 1
            mark(key, &state)
            // One hash of the key for a hit: found, marked used and read through its index.
            if let index = state.memory.index(forKey: key) {
                let resident = state.memory.values[index]
                resident.used = state.clock
                resident.hitSinceDiskUse = true
                return resident.entry
            }
            guard let directory else { return nil }
            let name = state.name(of: key)
            guard let index = state.disk.index(forKey: name) else { return adopt(name, key: key, in: directory, &state) }
            guard let bytes = bytes(ofFile: name, in: directory, &state), let entry = Self.decode(bytes, last: &state.lastDecoded), entry.key == key
            else {
                removeDisk(name, &state)
                return nil
            }
            // Reading the file changes only the kept descriptors, not this table: the index found
            // above is still the file's (one hash of the name per hit). Another process may have
            // replaced it at another size.
            state.disk.values[index].used = state.diskTime()
            state.touchedDuringScan?.insert(name)
            if bytes.count != state.disk.values[index].size {
                state.diskBytes += bytes.count - state.disk.values[index].size
                state.disk.values[index].size = bytes.count
            }
            putMemory(entry, &state)
            return entry
        }
    }

    /// The entry for `key` from its file `name`, which this store does not know: another process
    /// sharing the directory wrote it since this store listed the directory. Counted from now on;
    /// nil when there is no such file (one failed `open`) or it is larger than the disk may hold.
    /// A file that is not the key's entry (corrupt, or of another format) is removed, as a known
    /// one is.
    private func adopt(_ name: String, key: String, in directory: String, _ state: inout State) -> CacheEntry? {
        guard let bytes = bytes(ofFile: name, in: directory, limit: maxDiskBytes, &state) else { return nil }
        guard let entry = Self.decode(bytes, last: &state.lastDecoded), entry.key == key else {
            removeDisk(name, &state)
            return nil
        }
        state.touchedDuringScan?.insert(name)
        state.disk[name] = (bytes.count, state.diskTime())
        state.diskBytes += bytes.count
        putMemory(entry, &state)
        evictDisk(&state)
        return entry
    }

    /// Stores `entry` in memory and on disk.
    func put(_ entry: CacheEntry) {
        state.withLock { state in
            state.clock += 1
            mark(entry.key, &state)
            putMemory(entry, &state)
            guard let directory else { return }
            let name = state.name(of: entry.key)
            // The entry this one replaces goes from the disk whenever this one cannot be written
            // there (too large, or a failed write): it is older than what the origin last said,
            // and would come back from the disk once the memory's copy is evicted.
            guard let data = Self.encode(entry), data.count <= maxDiskBytes else {
                removeDisk(name, &state)
                return
            }
            let temporary = directory + "/" + name + ".tmp-" + SHA256.hex(Array(UUID().uuidString.utf8)).prefix(12)
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                removeDisk(name, &state)
                return
            }
            let written = data.withUnsafeBytes { FileDescriptor.writeAll(fd, $0) }
            close(fd)
            closeFile(name, &state)
            guard written, rename(temporary, directory + "/" + name) == 0 else {
                unlink(temporary)
                removeDisk(name, &state)
                return
            }
            if let old = state.disk[name] { state.diskBytes -= old.size }
            state.disk[name] = (data.count, state.diskTime())
            state.diskBytes += data.count
            state.touchedDuringScan?.insert(name)
            evictDisk(&state)
        }
        if let directory { rescan(directory) }
    }

    /// Removes the entry for `key` everywhere.
    func remove(_ key: String) {
        state.withLock { state in
            if let old = state.memory.removeValue(forKey: key) { state.memoryBytes -= old.size }
            if directory != nil { removeDisk(state.name(of: key), &state) }
        }
    }

    /// Removes every entry of `partition` (nil: the shared entries), in memory and on disk.
    /// On disk that is every file of the partition in the directory, other processes' too (read
    /// by this one, they would bring the partition back); copies in other processes' memory stay.
    func removePartition(_ partition: String?) {
        let name = partition ?? Self.shared
        let listed = directory.flatMap(Self.entryFiles(in:))?.filter { PartitionUse.file($0.name, isIn: name) } ?? []
        state.withLock { state in
            for key in state.memory.keys where Self.partition(ofKey: key) == name {
                if let old = state.memory.removeValue(forKey: key) { state.memoryBytes -= old.size }
            }
            for file in state.disk.keys where Self.partition(ofFile: file) == name { removeDisk(file, &state) }
            for file in listed { removeDisk(file.name, &state) }
            state.partitionUse.set(name, nil)
        }
    }

    /// Entry counts, for tests and tools.
    var counts: (memory: Int, disk: Int, diskBytes: Int) {
        state.withLock { ($0.memory.count, $0.disk.count, $0.diskBytes) }
    }

    /// Partitions whose last use is remembered (for tests: bounded by the entries kept).
    var rememberedPartitions: Int { state.withLock { $0.partitionUse.count } }

    // MARK: Internals (called inside state.withLock)

    /// Marks the partition of `key` used now. Every lookup marks one, a miss too, and a
    /// partition per credentials seen (a Digest answer's changes with each request) made the
    /// table grow for good: past twice the entries kept (and 64), the partitions that hold no
    /// entry are forgotten, a pass over the entries each time the table doubles.
    private func mark(_ key: String, _ state: inout State) {
        state.partitionUse.mark(key: key, state.clock)
        guard state.partitionUse.count > 2 * (state.memory.count + state.disk.count) + 64 else { return }
        var live = Set<String>()
        for resident in state.memory.values { live.insert(resident.partition ?? Self.shared) }
        for name in state.disk.keys { live.insert(Self.partition(ofFile: name)) }
        state.partitionUse.keep(only: live)
    }

    private func putMemory(_ entry: CacheEntry, _ state: inout State) {
        // No memory tier (`maxMemoryEntries` 0): entries live on disk only.
        guard maxMemoryEntries > 0 else { return }
        let size = entry.body.count + entry.headerValues.reduce(0) { $0 + $1.utf8.count } + 256
        if let old = state.memory[entry.key] { state.memoryBytes -= old.size }
        // An entry over the whole budget is kept on disk only (or not at all): kept in memory, it
        // evicted every other entry and still passed the bound (and each disk hit did so again).
        guard size <= maxMemoryBytes else {
            state.memory[entry.key] = nil
            return
        }
        state.memory[entry.key] = Resident(entry, size: size, used: state.clock)
        state.memoryBytes += size
        while state.memory.count > maxMemoryEntries || (state.memoryBytes > maxMemoryBytes && state.memory.count > 1) {
            let oldest = Self.evictionIndex(state.memory, state.partitionUse) { use, memory, index in
                let resident = memory.values[index]
                return (use.used(ofPartition: resident.partition), resident.used)
            }
            guard let oldest else { break }
            state.memoryBytes -= state.memory.values[oldest].size
            state.memory.remove(at: oldest)
        }
    }

    private func evictDisk(_ state: inout State) {
        if state.diskBytes > maxDiskBytes { syncMemoryUse(&state) }
        while state.diskBytes > maxDiskBytes,
            let oldest = Self.evictionIndex(
                state.disk, state.partitionUse, rank: { use, disk, index in (use.used(ofFile: disk.keys[index]), disk.values[index].used) })
        {
            removeDisk(state.disk.keys[oldest], &state)
        }
    }

    /// Where in `table` (memory entries by key, or files by name) the entry to evict first is: of
    /// the least recently used partition, the least recently used entry (the first such in the
    /// table's order), by `rank`: when its partition was last used (of `use`), and when it was. One
    /// pass that reads each entry's rank once and copies no entry: a full store evicts on every
    /// store, and a comparison that worked out both partitions (a string each) and copied both
    /// entries made that a few hundred allocations in a full memory, and tens of thousands on a
    /// full disk. (`use` and the table are passed to `rank`, not captured: a closure that captured
    /// `use` copied its table at every call.)
    static func evictionIndex<Value>(
        _ table: [String: Value], _ use: PartitionUse,
        rank: (PartitionUse, [String: Value], Dictionary<String, Value>.Index) -> (UInt64, UInt64)
    ) -> Dictionary<String, Value>.Index? {
        var oldest: (index: Dictionary<String, Value>.Index, rank: (UInt64, UInt64))?
        var index = table.startIndex
        while index != table.endIndex {
            let rank = rank(use, table, index)
            if oldest == nil || rank < oldest!.rank { oldest = (index, rank) }
            table.formIndex(after: &index)
        }
        return oldest?.index
    }

    /// Gives the files of entries read from memory since (in the order they were read) their
    /// last use: a hit from memory reads no file, and a full disk evicted the hottest entry's file
    /// before the files read lately; a restart, or a store of another process, then missed it.
    /// Done before an eviction and a listing (not on each hit: a memory hit stays one hash of its
    /// key). The file's modification time is set to that use, which the listings of other
    /// processes (and this one's after a restart) rank by.
    private func syncMemoryUse(_ state: inout State) {
        guard let directory else { return }
        var hits: [Resident] = []
        for resident in state.memory.values where resident.hitSinceDiskUse {
            resident.hitSinceDiskUse = false
            hits.append(resident)
        }
        hits.sort { $0.used < $1.used }
        for resident in hits {
            let name = state.name(of: resident.entry.key)
            guard let index = state.disk.index(forKey: name) else { continue }
            let time = state.diskTime()
            state.disk.values[index].used = time
            state.touchedDuringScan?.insert(name)
            let stamp = timespec(tv_sec: Int(time / 1_000_000_000), tv_nsec: Int(time % 1_000_000_000))
            let times = [stamp, stamp]
            // A changed modification time is a changed file to a kept descriptor's check.
            closeFile(name, &state)
            _ = utimensat(AT_FDCWD, directory + "/" + name, times, AT_SYMLINK_NOFOLLOW)
        }
    }

    private func removeDisk(_ name: String, _ state: inout State) {
        guard let directory else { return }
        state.touchedDuringScan?.insert(name)
        closeFile(name, &state)
        unlink(directory + "/" + name)
        if let old = state.disk.removeValue(forKey: name) { state.diskBytes -= old.size }
    }

    /// The bytes of the entry file `name` in `directory`: through its open descriptor while that file is
    /// still the entry, unchanged (checked as ``OpenFile`` says), else opened anew and kept open (the
    /// least recently read one closed beyond ``maxOpenFiles``).
    private func bytes(ofFile name: String, in directory: String, limit: Int = Int(Int32.max), _ state: inout State) -> [UInt8]? {
        let now = DispatchTime.now().uptimeNanoseconds
        // The path is made only to check the name or to open the file (not for a read through a
        // kept descriptor), and the kept file is found by one hash of its name.
        if let index = state.openFiles.index(forKey: name) {
            let file = state.openFiles.values[index]
            var status = stat()
            let byName = Double(now &- file.checkedByName) >= nameCheckInterval * 1e9
            let current = byName ? lstat(directory + "/" + name, &status) == 0 : fstat(file.fd, &status) == 0 && status.st_nlink > 0
            if current, file.matches(status), FileDescriptor.privacyProblem(status, .file) == nil,
                let bytes = FileDescriptor.read(file.fd, size: file.size)
            {
                state.openFiles.values[index].used = state.clock
                if byName { state.openFiles.values[index].checkedByName = now }
                return bytes
            }
            closeFile(name, &state)
        }
        guard let (fd, status) = FileDescriptor.openRegularFile(directory + "/" + name, limit: limit) else { return nil }
        // Only a file of the current user that group and others cannot write (the store writes
        // 0600): another's, planted while the directory was open to others, is not an entry, and
        // goes (a miss, as a file that is no entry is).
        if FileDescriptor.privacyProblem(status, .file) != nil {
            close(fd)
            unlink(directory + "/" + name)
            return nil
        }
        guard let bytes = FileDescriptor.read(fd, size: Int(status.st_size)) else {
            close(fd)
            return nil
        }
        if state.openFiles.count >= Self.maxOpenFiles, let oldest = state.openFiles.min(by: { $0.value.used < $1.value.used }) {
            closeFile(oldest.key, &state)
        }
        var opened = OpenFile(fd: fd, status, used: state.clock)
        opened.checkedByName = now
        state.openFiles[name] = opened
        return bytes
    }

    /// Closes the kept descriptor of entry file `name`, if there is one (the store replaces or
    /// removes the file, or it changed).
    private func closeFile(_ name: String, _ state: inout State) {
        if let file = state.openFiles.removeValue(forKey: name) { close(file.fd) }
    }

    /// Entry files kept open, for tests.
    var openFileCount: Int { state.withLock { $0.openFiles.count } }

    /// `<partition>-<hex SHA-256 of the key>.entry` (a store works each out once: ``State/name(of:)``).
    static func fileName(_ key: String) -> String { partition(ofKey: key) + "-" + SHA256.hex(SHA256.hash(key.utf8)) + ".entry" }

    /// The partition name of entries stored without credentials.
    static let shared = "shared"

    /// `GET <url>` → `shared`; `<partition> GET <url>` → the partition.
    static func partition(ofKey key: String) -> String {
        // Bytes, not Characters: keys are ASCII up to the first space, and a Character search
        // segments graphemes all the way along the URL.
        guard let space = key.utf8.firstIndex(of: UInt8(ascii: " ")), !key.utf8[..<space].elementsEqual("GET".utf8) else {
            return shared
        }
        return String(key[..<space])
    }

    static func partition(ofFile name: String) -> String {
        name.utf8.firstIndex(of: UInt8(ascii: "-")).map { String(name[..<$0]) } ?? shared
    }

    /// The secret that keys partition names: 32 random bytes, kept in `directory/partition.key`
    /// (mode 0600) so disk entries stay reachable across restarts, or only in memory without a
    /// directory. A key file that is not a regular 32-byte file of the current user, closed to
    /// group and others, is refused.
    static func partitionSecret(directory: String?, random: () -> [UInt8]) throws -> [UInt8] {
        guard let directory else { return random() }
        let path = directory + "/partition.key"
        if access(path, F_OK) != 0 {
            let fresh = random()
            let temporary = path + ".tmp-" + SHA256.hex(random()).prefix(12)
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw DirectoryError(description: "partition.key cannot be created: \(String(cString: strerror(errno)))") }
            // On disk before its name is: a crash after the link leaves a whole key, never an
            // empty file the next start refuses.
            let written = fresh.withUnsafeBytes { FileDescriptor.writeAll(fd, $0) } && fsync(fd) == 0
            close(fd)
            // link() fails when another instance made the key first: then its key is used.
            let linked = written && link(temporary, path) == 0
            unlink(temporary)
            if linked {
                let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                if directoryFD >= 0 {
                    _ = fsync(directoryFD)
                    close(directoryFD)
                }
                return fresh
            }
        }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw DirectoryError(description: "partition.key cannot be opened: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw DirectoryError(description: "partition.key cannot be examined: \(String(cString: strerror(errno)))")
        }
        if let problem = FileDescriptor.privacyProblem(info, .file) { throw DirectoryError(description: "partition.key " + problem) }
        guard info.st_size == 32 else {
            throw DirectoryError(description: "partition.key has \(info.st_size) bytes; a partition key has 32 (remove the file to make a new one)")
        }
        let secret = [UInt8](FileHandle(fileDescriptor: fd, closeOnDealloc: false).readData(ofLength: 32))
        guard secret.count == 32 else { throw DirectoryError(description: "partition.key cannot be read") }
        return secret
    }

    /// `PHC2` · SHA-256 (32 bytes) of everything after it · metadata length (4 bytes, big-endian) ·
    /// metadata · body. The metadata is binary (``EntryCoding``): no JSON coder on a disk hit.
    static func encode(_ entry: CacheEntry) -> [UInt8]? {
        let metadata = EntryCoding.metadata(entry)
        let payload = EntryCoding.bigEndian(UInt64(metadata.count), width: 4) + metadata + entry.body
        return magic + SHA256.hash(payload) + payload
    }

    /// The entry in the file at `path`; nil when it cannot be read, or as ``decode(_:last:)`` says.
    static func read(_ path: String) -> CacheEntry? {
        var none: (metadata: [UInt8], entry: CacheEntry)?
        return FileDescriptor.readFile(path, limit: Int(Int32.max)).flatMap { decode($0, last: &none) }
    }

    /// Whether `a` and `b` are the same bytes (`memcmp`).
    static func sameBytes(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return a.isEmpty || a.withUnsafeBytes { x in b.withUnsafeBytes { memcmp(x.baseAddress!, $0.baseAddress!, a.count) == 0 } }
    }

    /// Whether the 32 bytes of `bytes` at `offset` are the SHA-256 of its bytes from `payload` on:
    /// the digest made on the stack and compared with `memcmp` (an array per read, compared
    /// element by element, before).
    static func digestMatches(_ bytes: [UInt8], at offset: Int, of payload: Int) -> Bool {
        bytes.withUnsafeBytes { all in
            var hasher = SHA256()
            hasher.update(UnsafeRawBufferPointer(rebasing: all[payload...]))
            return withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { digest in
                hasher.finalize(into: digest)
                return memcmp(digest.baseAddress!, all.baseAddress! + offset, 32) == 0
            }
        }
    }

    /// The entry these file bytes hold; nil when they are not this format or their digest does not
    /// match (a truncated or corrupted file, metadata or body).
    ///
    /// `last` is the metadata the store decoded last and its entry (without a body): metadata of the
    /// same bytes (checked, as all of the file, by its digest first) is that entry again, with its
    /// fields' strings and what they say (``CacheEntry/facts``) as parsed then. Every hit of a store
    /// without a memory tier decodes its file, mostly the same file again.
    static func decode(_ bytes: [UInt8], last: inout (metadata: [UInt8], entry: CacheEntry)?) -> CacheEntry? {
        let start = magic.count + 32
        guard bytes.count >= start + 4, bytes[0..<magic.count].elementsEqual(magic) else { return nil }
        guard Self.digestMatches(bytes, at: magic.count, of: start) else { return nil }
        let length = bytes[start..<start + 4].reduce(0) { $0 << 8 | Int($1) }
        guard bytes.count >= start + 4 + length else { return nil }
        let metadata = bytes[(start + 4)..<(start + 4 + length)]
        var entry: CacheEntry
        if let last, Self.sameBytes(last.metadata, metadata) {
            entry = last.entry
        } else {
            guard let decoded = EntryCoding.entry(metadata) else { return nil }
            entry = decoded
            last = (Array(metadata), decoded)
        }
        entry.body = Array(bytes[(start + 4 + length)...])
        return entry
    }
}

/// The binary metadata of a stored entry: big-endian integers, strings as a 4-byte length and
/// UTF-8, doubles as their bit patterns.
enum EntryCoding {
    /// `value`'s low `width` bytes, most significant first.
    static func bigEndian(_ value: UInt64, width: Int) -> [UInt8] {
        stride(from: (width - 1) * 8, through: 0, by: -8).map { UInt8(truncatingIfNeeded: value >> UInt64($0)) }
    }

    static func metadata(_ entry: CacheEntry) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        func integer(_ value: UInt64, _ width: Int) { out += bigEndian(value, width: width) }
        func string(_ text: String) {
            integer(UInt64(text.utf8.count), 4)
            out += text.utf8
        }
        string(entry.key)
        integer(UInt64(bitPattern: Int64(entry.status)), 8)
        integer(UInt64(entry.headerNames.count), 4)
        for (name, value) in zip(entry.headerNames, entry.headerValues) {
            string(name)
            string(value)
        }
        integer(entry.requestTime.bitPattern, 8)
        integer(entry.responseTime.bitPattern, 8)
        let vary = entry.vary.sorted { $0.key < $1.key }
        integer(UInt64(vary.count), 4)
        for (name, value) in vary {
            string(name)
            string(value)
        }
        integer(entry.ttl == nil ? 0 : 1, 1)
        integer((entry.ttl ?? 0).bitPattern, 8)
        integer(entry.hasQuery ? 1 : 0, 1)
        return out
    }

    /// The entry (without its body) from `bytes`; nil for anything malformed.
    static func entry(_ bytes: ArraySlice<UInt8>) -> CacheEntry? {
        var position = bytes.startIndex
        func integer(_ width: Int) -> UInt64? {
            guard bytes.endIndex - position >= width else { return nil }
            var value: UInt64 = 0
            for byte in bytes[position..<position + width] { value = value << 8 | UInt64(byte) }
            position += width
            return value
        }
        func string() -> String? {
            guard let length = integer(4).map(Int.init), bytes.endIndex - position >= length else { return nil }
            defer { position += length }
            // Valid UTF-8 only: decoding repairs what is not, and a repaired string differs from the
            // bytes (compared with `memcmp`: element by element, it took as long as the decoding).
            let raw = bytes[position..<position + length]
            let text = String(decoding: raw, as: UTF8.self)
            return raw.withUnsafeBytes { UTF8Bytes.equal(text, $0) } ? text : nil
        }
        func pairs() -> [(String, String)]? {
            guard let count = integer(4), count <= UInt64(bytes.count) else { return nil }
            var result: [(String, String)] = []
            result.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let name = string(), let value = string() else { return nil }
                result.append((name, value))
            }
            return result
        }
        guard let key = string(), let status = integer(8).map({ Int(Int64(bitPattern: $0)) }), let headers = pairs(),
            let requestTime = integer(8).map(Double.init(bitPattern:)), let responseTime = integer(8).map(Double.init(bitPattern:)),
            let vary = pairs(), let hasTTL = integer(1), let ttl = integer(8).map(Double.init(bitPattern:)), let hasQuery = integer(1),
            position == bytes.endIndex, hasTTL <= 1, hasQuery <= 1
        else { return nil }
        return CacheEntry(
            key: key, status: status, headerNames: headers.map(\.0), headerValues: headers.map(\.1), body: [],
            requestTime: requestTime, responseTime: responseTime, vary: Dictionary(vary, uniquingKeysWith: { first, _ in first }),
            ttl: hasTTL == 1 ? ttl : nil, hasQuery: hasQuery == 1)
    }
}

/// When each partition of a store was last used (its clock then; 0: never or removed). Every
/// lookup and store marks its key's partition: the shared one, and the one of the credentials
/// seen last, are kept apart from the table, so marking them hashes nothing and makes no string.
struct PartitionUse {
    private var shared: UInt64 = 0
    /// The partition (not `shared`) marked last, and when.
    private var current: (name: String, used: UInt64)?
    /// The others.
    private var table: [String: UInt64] = [:]

    /// When `partition` was last used.
    subscript(partition: String) -> UInt64 {
        if partition == CacheStore.shared { return shared }
        if let current, current.name == partition { return current.used }
        return table[partition] ?? 0
    }

    /// The partition of `key` as ``used(ofPartition:)`` takes it: nil for a shared key (`GET …`,
    /// no string made), else ``CacheStore/partition(ofKey:)``.
    static func partition(ofKey key: String) -> String? { isShared(key) ? nil : CacheStore.partition(ofKey: key) }

    /// When `partition` (nil: the shared one) was last used, as the subscript reads it.
    func used(ofPartition partition: String?) -> UInt64 {
        guard let partition else { return shared }
        if let current, UTF8Bytes.equal(current.name, partition) { return current.used }
        return self[partition]
    }

    /// When the partition of the entry file `name` (`<partition>-<digest>.entry`) was last used,
    /// as ``used(ofPartition:)`` reads it.
    func used(ofFile name: String) -> UInt64 {
        if Self.file(name, isIn: CacheStore.shared) { return shared }
        if let current, Self.file(name, isIn: current.name) { return current.used }
        return self[CacheStore.partition(ofFile: name)]
    }

    /// Whether the file `name` is `<partition>-…`, compared as bytes.
    static func file(_ name: String, isIn partition: String) -> Bool {
        let length = partition.utf8.count
        guard name.utf8.count > length else { return false }
        var bytes = name.utf8.makeIterator()
        for byte in partition.utf8 where bytes.next() != byte { return false }
        return bytes.next() == UInt8(ascii: "-")
    }

    /// Marks the partition of `key` (see ``CacheStore/partition(ofKey:)``) used at `clock`.
    mutating func mark(key: String, _ clock: UInt64) {
        if Self.isShared(key) {
            shared = clock
        } else if let current, Self.key(key, isIn: current.name) {
            self.current = (current.name, clock)
        } else {
            set(CacheStore.partition(ofKey: key), clock)
        }
    }

    /// How many partitions (besides the shared one) have a last use remembered.
    var count: Int { table.count + (current == nil ? 0 : 1) }

    /// Forgets the partitions not in `live` (the one marked last is kept: it is in use).
    mutating func keep(only live: Set<String>) {
        table = table.filter { live.contains($0.key) }
    }

    /// Sets (nil: forgets) when `partition` was last used.
    mutating func set(_ partition: String, _ clock: UInt64?) {
        if partition == CacheStore.shared {
            shared = clock ?? 0
            return
        }
        if let current {
            if current.name == partition {
                self.current = clock.map { (partition, $0) }
                return
            }
            table[current.name] = current.used
        }
        table[partition] = nil
        current = clock.map { (partition, $0) }
    }

    /// `GET <url>`: a shared key (its first four bytes).
    static func isShared(_ key: String) -> Bool {
        var bytes = key.utf8.makeIterator()
        return bytes.next() == UInt8(ascii: "G") && bytes.next() == UInt8(ascii: "E") && bytes.next() == UInt8(ascii: "T")
            && bytes.next() == UInt8(ascii: " ")
    }

    /// Whether `key` is `<partition> …`, compared as bytes.
    static func key(_ key: String, isIn partition: String) -> Bool {
        let length = partition.utf8.count
        guard key.utf8.count > length else { return false }
        let same = key.utf8.withContiguousStorageIfAvailable { keyBytes in
            partition.utf8.withContiguousStorageIfAvailable { partitionBytes in
                keyBytes[length] == UInt8(ascii: " ") && memcmp(keyBytes.baseAddress!, partitionBytes.baseAddress!, length) == 0
            }
        }
        if let same, let same { return same }
        return CacheStore.partition(ofKey: key) == partition
    }
}
