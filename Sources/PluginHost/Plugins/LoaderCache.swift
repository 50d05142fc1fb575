import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The dynamic loader's cache of library paths (`/etc/ld.so.cache`, written by `ldconfig`): where
/// `dlopen` takes a library that no `RPATH`, `LD_LIBRARY_PATH` or `RUNPATH` entry finds, before it
/// tries its default directories. Read as glibc reads it: the format of `glibc-ld.so.cache1.1` (a
/// header of 48 bytes, entries of 24 naming a library and its path as offsets from the header,
/// then the strings), after the old `ld.so-1.7.0` table when a file holds both, or that old table
/// alone (entries of 12 bytes, offsets from its end).
struct LoaderCache: Equatable {
    /// Where glibc's loader reads its cache.
    static let path = "/etc/ld.so.cache"

    /// The flags of an entry this machine's loader takes (a 64-bit ELF library of its
    /// architecture); nil where this check does not know them: any ELF library's entry is kept.
    #if arch(x86_64)
    static let hostFlags: UInt32? = 0x0303  // FLAG_X8664_LIB64 | FLAG_ELF_LIBC6
    #elseif arch(arm64)
    static let hostFlags: UInt32? = 0x0A03  // FLAG_AARCH64_LIB64 | FLAG_ELF_LIBC6
    #else
    static let hostFlags: UInt32? = nil
    #endif

    /// The paths the cache gives for each library name this machine's loader would take (several:
    /// one per hardware level the cache lists, or per name the loader takes as the same), by the
    /// name's ``key(_:)``.
    var paths: [String: [String]] = [:]

    /// The paths the cache gives for `name`, matched as glibc's lookup matches (`_dl_cache_libcmp`):
    /// runs of digits compare by value, so `libq.so.01` finds the entry of `libq.so.1`.
    func paths(for name: String) -> [String] { paths[Self.key(name)] ?? [] }

    /// `name` with each run of digits written without its leading zeros: the names glibc's cache
    /// lookup takes as equal have one key. (glibc adds a run's digits up in an `int`: a run past
    /// nine digits it may wrap, which this does not follow.)
    static func key(_ name: String) -> String {
        var key = ""
        var digits = ""
        func flush() {
            guard !digits.isEmpty else { return }
            let value = digits.drop { $0 == "0" }
            key += value.isEmpty ? "0" : value
            digits = ""
        }
        for character in name {
            if character.isASCII, character.isNumber {
                digits.append(character)
            } else {
                flush()
                key.append(character)
            }
        }
        flush()
        return key
    }

    /// The cache in `bytes`; nil when they are not a cache the loader would read (glibc ignores
    /// such a file and goes on to its default directories). An entry whose strings lie outside
    /// the file is left out, as the loader leaves it.
    static func read(_ bytes: Data, flags: UInt32? = hostFlags) -> LoaderCache? {
        let bytes = Array(bytes)
        func word(_ offset: Int) -> Int { Self.word(bytes, offset) }
        func starts(_ magic: String, at offset: Int) -> Bool {
            let magic = Array(magic.utf8)
            return offset + magic.count <= bytes.count && bytes[offset..<(offset + magic.count)].elementsEqual(magic)
        }
        let newMagic = "glibc-ld.so.cache1.1"
        if starts("ld.so-1.7.0", at: 0) {
            // 16 bytes of header and 12 per old entry; the new format may follow at the next multiple of 8.
            let count = word(12)
            guard count >= 0, count <= (bytes.count - 16) / 12 else { return nil }
            let new = (16 + count * 12 + 7) / 8 * 8
            if new + 48 <= bytes.count, starts(newMagic, at: new) {
                return entries(bytes, table: new + 48, count: word(new + 20), size: 24, strings: new, flags: flags, endian: bytes[new + 28])
            }
            return entries(bytes, table: 16, count: count, size: 12, strings: 16 + count * 12, flags: flags, endian: 0)
        }
        guard bytes.count > 48, starts(newMagic, at: 0) else { return nil }
        return entries(bytes, table: 48, count: word(20), size: 24, strings: 0, flags: flags, endian: bytes[28])
    }

    /// The entries of the table at `table` (`count` of `size` bytes), whose strings are offsets
    /// from `strings`; nil when the file says another byte order (`endian`: 0 unset, 2 little).
    private static func entries(
        _ bytes: [UInt8], table: Int, count: Int, size: Int, strings: Int, flags: UInt32?, endian: UInt8
    ) -> LoaderCache? {
        guard endian == 0 || endian & 3 == 2, count >= 0, count <= (bytes.count - table) / size else { return nil }
        func word(_ offset: Int) -> Int { Self.word(bytes, offset) }
        func string(_ offset: Int) -> String? {
            let start = strings + offset
            guard start < bytes.count, let end = bytes[start...].firstIndex(of: 0) else { return nil }
            return String(decoding: bytes[start..<end], as: UTF8.self)
        }
        var cache = LoaderCache()
        for index in 0..<count {
            let entry = table + index * size
            let entryFlags = UInt32(word(entry))
            if let flags { guard entryFlags == flags else { continue } } else { guard entryFlags & 0xFF == 3 || entryFlags == 1 else { continue } }
            guard let name = string(word(entry + 4)), let path = string(word(entry + 8)) else { continue }
            cache.paths[key(name), default: []].append(path)
        }
        return cache
    }

    /// The little-endian 32-bit word at `offset`; -1 when it lies outside `bytes`.
    private static func word(_ bytes: [UInt8], _ offset: Int) -> Int {
        guard offset >= 0, offset + 4 <= bytes.count else { return -1 }
        return (0..<4).reduce(0) { $0 | Int(bytes[offset + $1]) << ($1 * 8) }
    }

    /// The directories glibc's loader searches last, for a library neither its search paths
    /// nor its cache find (those of this machine's architecture first, then the generic ones).
    static let defaultDirectories: [String] = {
        #if arch(x86_64)
        let triple = "x86_64-linux-gnu"
        #elseif arch(arm64)
        let triple = "aarch64-linux-gnu"
        #else
        let triple = ""
        #endif
        let multiarch = triple.isEmpty ? [] : ["/lib/\(triple)", "/usr/lib/\(triple)"]
        return multiarch + ["/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    }()
}

/// A library file as the loader would open it: a regular file holding a 64-bit little-endian
/// ELF shared object for this machine. The loader passes over a library of another class or
/// machine and goes on searching; on any other file of the name (too short, no ELF file, a
/// directory) `dlopen` fails. The check treats both alike: it goes on searching (and checking).
enum LibraryImage {
    /// This machine's ELF `e_machine`; nil where this check does not know it (any is taken).
    #if arch(x86_64)
    static let machine: UInt16? = 62  // EM_X86_64
    #elseif arch(arm64)
    static let machine: UInt16? = 183  // EM_AARCH64
    #else
    static let machine: UInt16? = nil
    #endif

    /// The file at `path`, mapped (only what is read is paged in), when the loader would take it;
    /// nil otherwise. Opened without blocking (a FIFO never holds the check up).
    static func map(_ path: String) -> Data? {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size >= 64 else { return nil }
        var header = [UInt8](repeating: 0, count: 64)
        guard pread(fd, &header, 64, 0) == 64, header[0..<4].elementsEqual([0x7F, 0x45, 0x4C, 0x46]),
            header[4] == 2, header[5] == 1,  // ELFCLASS64, ELFDATA2LSB
            UInt16(header[16]) | UInt16(header[17]) << 8 == 3  // ET_DYN
        else { return nil }
        if let machine, UInt16(header[18]) | UInt16(header[19]) << 8 != machine { return nil }
        let size = Int(info.st_size)
        guard let address = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), address != UnsafeMutableRawPointer(bitPattern: -1) else { return nil }
        return Data(bytesNoCopy: address, count: size, deallocator: .custom { pointer, count in munmap(pointer, count) })
    }
}
