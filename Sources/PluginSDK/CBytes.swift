import CPluginABI

/// Conversions between Swift values and the ABI's byte strings.
enum CBytes {
    /// A Swift string from borrowed bytes (invalid UTF-8 is repaired).
    static func string(_ bytes: ph_bytes) -> String {
        guard let data = bytes.data, bytes.len > 0 else { return "" }
        return String(decoding: UnsafeBufferPointer(start: data, count: bytes.len), as: UTF8.self)
    }

    /// A byte array from borrowed bytes.
    static func array(_ bytes: ph_bytes) -> [UInt8] {
        guard let data = bytes.data, bytes.len > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: bytes.len))
    }

    /// Calls `body` with borrowed bytes of `string`.
    static func with<R>(_ string: String, _ body: (ph_bytes) throws -> R) rethrows -> R {
        var string = string
        return try string.withUTF8 { try body(ph_bytes(data: $0.baseAddress, len: $0.count)) }
    }

    /// Calls `body` with borrowed bytes of `bytes`.
    static func with<R>(_ bytes: [UInt8], _ body: (ph_bytes) throws -> R) rethrows -> R {
        try bytes.withUnsafeBufferPointer { try body(ph_bytes(data: $0.baseAddress, len: $0.count)) }
    }

    /// Calls `body` with parallel arrays of borrowed byte strings for `pairs`.
    static func withPairs<R>(_ pairs: [(String, String)], _ body: (UnsafePointer<ph_bytes>?, UnsafePointer<ph_bytes>?, Int) -> R) -> R {
        let arena = Arena()
        let names = pairs.map { arena.copy($0.0) }
        let values = pairs.map { arena.copy($0.1) }
        return names.withUnsafeBufferPointer { n in
            values.withUnsafeBufferPointer { v in body(n.baseAddress, v.baseAddress, pairs.count) }
        }
    }

    /// Writes `message` into a host error buffer, truncated at a character boundary.
    static func write(_ message: String, to buffer: UnsafeMutablePointer<ph_error_buf>?) {
        guard let buffer, let data = buffer.pointee.data else { return }
        let utf8 = Array(message.utf8)
        var count = min(utf8.count, buffer.pointee.capacity)
        if count < utf8.count {
            while count > 0 && (utf8[count] & 0xC0) == 0x80 { count -= 1 }
        }
        utf8.withUnsafeBufferPointer { source in
            if count > 0 { data.update(from: source.baseAddress!, count: count) }
        }
        buffer.pointee.len = count
    }

    /// Heap copies that live as long as the arena.
    final class Arena {
        private var blocks: [UnsafeMutablePointer<UInt8>] = []

        func copy(_ string: String) -> ph_bytes {
            let utf8 = Array(string.utf8)
            let block = UnsafeMutablePointer<UInt8>.allocate(capacity: max(1, utf8.count))
            utf8.withUnsafeBufferPointer { if !$0.isEmpty { block.update(from: $0.baseAddress!, count: $0.count) } }
            blocks.append(block)
            return ph_bytes(data: UnsafePointer(block), len: utf8.count)
        }

        deinit {
            for block in blocks { block.deallocate() }
        }
    }
}
