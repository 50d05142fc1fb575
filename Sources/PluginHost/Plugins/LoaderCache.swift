import Foundation

/// The dynamic loader's cache of library paths (`/etc/ld.so.cache`, written by `ldconfig`): where
/// `dlopen` takes a library that no `LD_LIBRARY_PATH`, `RUNPATH` or `RPATH` entry finds, before it
/// tries its default directories. Read in glibc's format (`glibc-ld.so.cache1.1`: a header, entries
/// of 24 bytes naming a library and its path as offsets into the file, then the strings).
struct LoaderCache: Equatable {
    /// Where glibc's loader reads its cache.
    static let path = "/etc/ld.so.cache"

    /// The paths the cache gives for each library name (several: one per architecture or
    /// hardware level the cache lists).
    var paths: [String: [String]] = [:]

    /// The cache in `bytes`; nil when they are not a cache the loader would read (glibc ignores
    /// such a file and goes on to its default directories). A file in the old format with the
    /// new one after it (older `ldconfig`s wrote both) is read from the new one.
    static func read(_ bytes: Data) -> LoaderCache? {
        let old = Array("ld.so-1.7.0".utf8)
        guard bytes.count >= 16, bytes.prefix(old.count).elementsEqual(old) else { return readNew(bytes) }
        // 16 bytes of header and 12 per old entry, then the new format at the next multiple of 8.
        let start = bytes.startIndex
        let count = (0..<4).reduce(0) { $0 | Int(bytes[start + 12 + $1]) << ($1 * 8) }
        guard count <= (bytes.count - 16) / 12 else { return nil }
        let new = (16 + count * 12 + 7) / 8 * 8
        guard new < bytes.count else { return nil }
        return readNew(Data(bytes[(start + new)...]))
    }

    /// The cache in `bytes`, in the new format only (its string offsets count from its start).
    private static func readNew(_ bytes: Data) -> LoaderCache? {
        let magic = Array("glibc-ld.so.cache1.1".utf8)
        let headerSize = 48
        let entrySize = 24
        guard bytes.count >= headerSize, bytes.prefix(magic.count).elementsEqual(magic) else { return nil }
        let start = bytes.startIndex
        func word(_ offset: Int) -> Int {
            (0..<4).reduce(0) { $0 | Int(bytes[start + offset + $1]) << ($1 * 8) }
        }
        let count = word(20)
        guard count <= (bytes.count - headerSize) / entrySize else { return nil }
        /// The string at `offset` (from the start of the file), up to its NUL.
        func string(_ offset: Int) -> String? {
            guard offset >= headerSize + count * entrySize, offset < bytes.count,
                let end = bytes[(start + offset)...].firstIndex(of: 0)
            else { return nil }
            return String(decoding: bytes[(start + offset)..<end], as: UTF8.self)
        }
        var cache = LoaderCache()
        for index in 0..<count {
            let entry = headerSize + index * entrySize
            // The low byte of the flags is the kind of library: 3 is an ELF library for glibc.
            // Every architecture's entries are kept: checking one the loader would skip is harmless.
            guard bytes[start + entry] == 3 else { continue }
            guard let name = string(word(entry + 4)), let path = string(word(entry + 8)) else { return nil }
            cache.paths[name, default: []].append(path)
        }
        return cache
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
