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

    /// Calls `body` with parallel arrays of borrowed byte strings for `pairs`, all copied into
    /// one buffer.
    static func withPairs<R>(_ pairs: [(String, String)], _ body: (UnsafePointer<ph_bytes>?, UnsafePointer<ph_bytes>?, Int) -> R) -> R {
        let total = pairs.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, total)) { buffer in
            withUnsafeTemporaryAllocation(of: ph_bytes.self, capacity: max(1, pairs.count * 2)) { slots in
                var offset = 0
                func place(_ text: String) -> ph_bytes {
                    let start = offset
                    for byte in text.utf8 {
                        buffer[offset] = byte
                        offset += 1
                    }
                    return ph_bytes(data: UnsafePointer(buffer.baseAddress! + start), len: offset - start)
                }
                for (index, pair) in pairs.enumerated() {
                    slots[index] = place(pair.0)
                    slots[pairs.count + index] = place(pair.1)
                }
                return body(UnsafePointer(slots.baseAddress!), UnsafePointer(slots.baseAddress! + pairs.count), pairs.count)
            }
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
}
