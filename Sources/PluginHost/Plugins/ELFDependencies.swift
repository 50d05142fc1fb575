import Foundation

/// What a 64-bit little-endian ELF shared object asks the dynamic loader to load with it: the
/// libraries it needs (`DT_NEEDED`) and the directories searched for them (`DT_RUNPATH`, or the
/// older `DT_RPATH`), read from the bytes the loader verified. `dlopen` follows them without a
/// check of its own, so a plugin library whose search path names a directory others may write
/// to would load their code beside it.
struct ELFDependencies: Equatable {
    /// One string of the dynamic section, and where its bytes are in the file.
    struct Entry: Equatable {
        /// `NEEDED`, `AUXILIARY`, `FILTER`, `RUNPATH` or `RPATH`.
        let tag: String
        let value: String
        let offset: Int
    }

    /// `DT_NEEDED` (and `DT_AUXILIARY`, `DT_FILTER`): library names, or paths when they hold a `/`.
    var needed: [Entry] = []
    /// `DT_RUNPATH` and `DT_RPATH`: each a list of directories separated by `:`.
    var searchPaths: [Entry] = []

    /// Whether the library has a `RUNPATH`: the loader then searches no `RPATH` for its needs,
    /// neither its own nor those of the libraries that led to it.
    var hasRunpath: Bool { searchPaths.contains { $0.tag == "RUNPATH" } }

    /// Why the bytes are refused; nil from ``read(_:)`` means they are no ELF file at all (and
    /// `dlopen` says so).
    struct Malformed: Error, Equatable {
        let reason: String
    }

    /// The dependencies of `bytes`; nil when they are not a 64-bit little-endian ELF file.
    static func read(_ bytes: Data) throws(Malformed) -> ELFDependencies? {
        guard bytes.count >= 64, bytes.prefix(4).elementsEqual([0x7F, 0x45, 0x4C, 0x46]) else { return nil }
        let start = bytes.startIndex
        guard bytes[start + 4] == 2, bytes[start + 5] == 1 else { return nil }  // ELFCLASS64, ELFDATA2LSB
        func integer(_ offset: Int, _ size: Int) throws(Malformed) -> UInt64 {
            guard offset >= 0, size <= 8, offset <= bytes.count - size else {
                throw Malformed(reason: "a field at offset \(offset) lies past the end of the file")
            }
            var value: UInt64 = 0
            for index in (0..<size).reversed() { value = value << 8 | UInt64(bytes[start + offset + index]) }
            return value
        }
        func count(_ value: UInt64, _ what: String) throws(Malformed) -> Int {
            guard value <= UInt64(Int.max) else { throw Malformed(reason: "\(what) \(value) is out of range") }
            return Int(value)
        }
        // Every offset and size is held within the file before any sum is made of it (a sum past
        // `Int.max` would trap).
        func within(_ offset: UInt64, _ size: UInt64, _ what: String) throws(Malformed) -> (offset: Int, size: Int) {
            guard offset <= UInt64(bytes.count), size <= UInt64(bytes.count) - offset else {
                throw Malformed(reason: "\(what) (offset \(offset), \(size) bytes) lies past the end of the file")
            }
            return (Int(offset), Int(size))
        }
        let programHeaders = try within(try integer(32, 8), 0, "the program header table").offset
        let headerSize = Int(try integer(54, 2))
        let headerCount = Int(try integer(56, 2))
        guard headerCount == 0 || headerSize >= 56 else { throw Malformed(reason: "program headers of \(headerSize) bytes") }
        // Each loaded segment: its address, file offset, bytes in the file, and bytes in memory.
        var loads: [(address: UInt64, offset: UInt64, size: UInt64, memory: UInt64)] = []
        var dynamicHeader: (address: UInt64, offset: UInt64, size: UInt64)?
        for index in 0..<headerCount {
            let header = programHeaders + index * headerSize
            switch try integer(header, 4) {
            case 1:  // PT_LOAD
                loads.append((try integer(header + 16, 8), try integer(header + 8, 8), try integer(header + 32, 8), try integer(header + 40, 8)))
            case 2:  // PT_DYNAMIC
                dynamicHeader = (try integer(header + 16, 8), try integer(header + 8, 8), try integer(header + 32, 8))
            default:
                break
            }
        }
        /// Where the loaded segment holding virtual `address` has it in the file, as the loader maps
        /// it, and how many of the segment's bytes in the file follow from there.
        func fileOffset(of address: UInt64, _ what: String) throws(Malformed) -> (offset: UInt64, remaining: UInt64) {
            guard let segment = loads.first(where: { address >= $0.address && address - $0.address < $0.size }) else {
                throw Malformed(reason: "\(what) is in no loaded segment")
            }
            let (sum, overflow) = segment.offset.addingReportingOverflow(address - segment.address)
            guard !overflow else { throw Malformed(reason: "\(what)'s offset is out of range") }
            return (sum, segment.size - (address - segment.address))
        }
        // Segments mapped over each other (whole pages) would show the loader other bytes at an
        // address than the segment this check takes them from.
        let pageSize = UInt64(max(sysconf(Int32(_SC_PAGESIZE)), 4096))
        var pages: [(start: UInt64, end: UInt64)] = []
        for load in loads where load.memory > 0 || load.size > 0 {
            let (last, overflow) = load.address.addingReportingOverflow(max(load.memory, load.size, 1) - 1)
            guard !overflow else { throw Malformed(reason: "a loaded segment ends past the address space") }
            pages.append((load.address / pageSize, last / pageSize))
        }
        for (index, page) in pages.enumerated() {
            if let other = pages[..<index].firstIndex(where: { page.start <= $0.end && $0.start <= page.end }) {
                throw Malformed(reason: "loaded segments \(other) and \(index) share a page")
            }
        }
        guard let dynamicHeader else { return ELFDependencies() }
        // The loader reads the dynamic section at its address (`p_vaddr`), not at its file offset
        // (`p_offset`): the two must name the same bytes, or this check would read other entries
        // than the loader follows.
        let mapped = try fileOffset(of: dynamicHeader.address, "the dynamic section")
        guard mapped.offset == dynamicHeader.offset else {
            throw Malformed(
                reason: "the dynamic section's file offset \(dynamicHeader.offset) is not where its address "
                    + "\(dynamicHeader.address) is loaded from (\(mapped.offset))")
        }
        // Past its segment's bytes in the file, the loader sees other bytes (zeros, or the next
        // segment) than those that follow in the file.
        guard dynamicHeader.size <= mapped.remaining else {
            throw Malformed(reason: "the dynamic section (\(dynamicHeader.size) bytes) runs past its loaded segment")
        }
        let dynamic = try within(dynamicHeader.offset, dynamicHeader.size, "the dynamic section")
        var stringTable: UInt64?
        var stringSize: UInt64?
        var named: [(tag: UInt64, value: UInt64)] = []
        var entry = dynamic.offset
        // The loader reads entries until `DT_NULL`, whatever the section's size: one past the size
        // would be followed by it and not seen here, so the end must be within the size.
        var ended = false
        while !ended, dynamic.offset + dynamic.size - entry >= 16 {
            let tag = try integer(entry, 8)
            let value = try integer(entry + 8, 8)
            entry += 16
            switch tag {
            case 0: ended = true  // DT_NULL
            case 5: stringTable = value  // DT_STRTAB
            case 10: stringSize = value  // DT_STRSZ
            // DT_NEEDED, DT_RPATH, DT_RUNPATH; DT_AUXILIARY and DT_FILTER name libraries the
            // loader loads as it does needed ones (filtees), looked up the same way.
            case 1, 15, 29, 0x7FFF_FFFD, 0x7FFF_FFFF: named.append((tag, value))
            default: continue
            }
        }
        guard ended else { throw Malformed(reason: "the dynamic section has no DT_NULL entry within its \(dynamic.size) bytes") }
        guard !named.isEmpty else { return ELFDependencies() }
        guard let table = stringTable, let stringSize else { throw Malformed(reason: "the dynamic section has no string table") }
        // The table's address is a virtual one: the loaded segment holding it says where it is in the file.
        let mappedTable = try fileOffset(of: table, "the dynamic string table")
        let tableOffset = try count(mappedTable.offset, "the dynamic string table's offset")
        var found = ELFDependencies()
        for (tag, value) in named {
            guard value < stringSize, value < mappedTable.remaining, tableOffset <= bytes.count, value < UInt64(bytes.count - tableOffset) else {
                throw Malformed(reason: "a dynamic string lies past its table")
            }
            let offset = tableOffset + Int(value)
            // Its end within the table's segment: past it, the loader would read other bytes.
            let limit = start + offset + Int(min(mappedTable.remaining - value, UInt64(bytes.count - offset)))
            guard let end = bytes[(start + offset)..<limit].firstIndex(of: 0) else {
                throw Malformed(reason: "a dynamic string has no end within its loaded segment")
            }
            let name =
                switch tag {
                case 15: "RPATH"
                case 29: "RUNPATH"
                case 0x7FFF_FFFD: "AUXILIARY"
                case 0x7FFF_FFFF: "FILTER"
                default: "NEEDED"
                }
            // Bytes that are not UTF-8 would be read with replacement characters: a path that is
            // not the one the loader searches (it takes the bytes as they are), checked in its stead.
            let raw = bytes[(start + offset)..<end]
            let value = String(decoding: raw, as: UTF8.self)
            guard value.utf8.elementsEqual(raw) else {
                throw Malformed(
                    reason: "the \(name) string at offset \(offset) is not UTF-8 text, so the path the loader would take cannot be checked")
            }
            let item = Entry(tag: name, value: value, offset: offset)
            if tag == 15 || tag == 29 { found.searchPaths.append(item) } else { found.needed.append(item) }
        }
        return found
    }
}
