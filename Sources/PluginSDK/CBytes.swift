import CPluginABI
import Foundation

/// Conversions between Swift values and the ABI's byte strings, for the SDK and the host alike.
package enum CBytes {
    /// A Swift string from borrowed bytes (invalid UTF-8 is repaired).
    package static func string(_ bytes: ph_bytes) -> String {
        guard let data = bytes.data, bytes.len > 0 else { return "" }
        return String(decoding: UnsafeBufferPointer(start: data, count: bytes.len), as: UTF8.self)
    }

    /// A string of borrowed bytes; with `memo` (the string of this kind the same plugin instance
    /// read last), that string again when the bytes are its UTF-8, else a new one, kept there.
    /// Invalid UTF-8 is repaired every time (the repaired string's bytes are not the host's).
    package static func string(_ bytes: ph_bytes, memo: Locked<String>?) -> String {
        guard let memo else { return string(bytes) }
        return memo.withLock { last in
            if equal(bytes, last) { return last }
            last = string(bytes)
            return last
        }
    }

    /// A string of borrowed bytes read for `key`; with `memo` (the key and string the same reader
    /// read last), that string again when it was read for `key` and the bytes are its UTF-8, else
    /// a new one, kept there.
    package static func string(_ bytes: ph_bytes, key: String, memo: Locked<(key: String, value: String)?>) -> String {
        memo.withLock { last in
            if let kept = last, kept.key == key, equal(bytes, kept.value) { return kept.value }
            let made = string(bytes)
            last = (key, made)
            return made
        }
    }

    /// Whether `bytes`, read as ``string(_:)`` reads them (none without a pointer or a positive
    /// length), are the UTF-8 of `text`.
    package static func equal(_ bytes: ph_bytes, _ text: String) -> Bool {
        // The bytes `string(_:)` reads: none without a pointer or a positive length.
        guard let data = bytes.data, bytes.len > 0 else { return text.isEmpty }
        return UTF8Bytes.equal(text, UnsafeRawBufferPointer(start: data, count: bytes.len))
    }

    /// Whether borrowed bytes are a buffer: a length up to `Int.max` (a `size_t` above arrives
    /// negative), and data unless the length is 0. Bytes that are not are refused by the setters
    /// that store them; the readers above read them as no bytes.
    package static func isBuffer(_ bytes: ph_bytes) -> Bool {
        bytes.len >= 0 && (bytes.len == 0 || bytes.data != nil)
    }

    /// `Data` from borrowed bytes.
    package static func data(_ bytes: ph_bytes) -> Data {
        guard let data = bytes.data, bytes.len > 0 else { return Data() }
        return Data(bytes: data, count: bytes.len)
    }

    /// Header fields from parallel arrays of names and values; nil when a name is not a token,
    /// a value holds CR, LF or NUL or is no buffer, or the count is past `Int.max`.
    package static func headers(_ names: UnsafePointer<ph_bytes>?, _ values: UnsafePointer<ph_bytes>?, _ count: Int) -> [HTTPHeader]? {
        // A count past `Int.max` (`size_t` arrives as `Int`) is negative here: invalid.
        guard count >= 0 else { return nil }
        guard count > 0 else { return [] }
        guard let names, let values else { return nil }
        var headers: [HTTPHeader] = []
        // Room for what a request holds; a count the plugin got wrong (2^40) is read entry by
        // entry, refused at its first bad one, never reserved whole.
        headers.reserveCapacity(Swift.min(count, 256))
        for index in 0..<count {
            guard isBuffer(values[index]) else { return nil }
            let header = HTTPHeader(name: string(names[index]), value: string(values[index]))
            guard HeaderValidation.isValidName(header.name), HeaderValidation.isValidValue(header.value) else { return nil }
            headers.append(header)
        }
        return headers
    }

    /// Header fields through a snapshot call of the ABI (`request_headers`, `result_headers`,
    /// `result_request_headers`: it fills the names and values it has room for and returns how
    /// many there are): up to 32 fields on the stack in one call, more in a second.
    ///
    /// With `memo` (the list of this kind the same plugin instance read last), fields with the
    /// bytes of the last list's are not made anew: the same list when every byte is the same (the
    /// request fields of an app's requests mostly are), else its strings where they match.
    package static func snapshot(
        _ call: (UnsafeMutablePointer<ph_bytes>?, UnsafeMutablePointer<ph_bytes>?, Int) -> Int, memo: Locked<[HTTPHeader]>? = nil
    ) -> [HTTPHeader] {
        let first = withUnsafeTemporaryAllocation(of: ph_bytes.self, capacity: 64) { buffer -> [HTTPHeader]? in
            let names = buffer.baseAddress!
            let values = names + 32
            let count = call(names, values, 32)
            guard count <= 32 else { return nil }
            guard let memo else { return (0..<count).map { HTTPHeader(name: string(names[$0]), value: string(values[$0])) } }
            return memo.withLock { last in
                let fields = decode(names, values, count, like: last)
                last = fields
                return fields
            }
        }
        if let first { return first }
        let count = call(nil, nil, 0)
        var names = [ph_bytes](repeating: ph_bytes(), count: count)
        var values = [ph_bytes](repeating: ph_bytes(), count: count)
        let written = min(count, call(&names, &values, count))
        return (0..<written).map { HTTPHeader(name: string(names[$0]), value: string(values[$0])) }
    }

    /// The fields of `count` name and value pairs: `last` itself when they are its bytes, else
    /// new fields that take the strings of `last`'s field at the same place where the bytes match.
    static func decode(
        _ names: UnsafePointer<ph_bytes>, _ values: UnsafePointer<ph_bytes>, _ count: Int, like last: [HTTPHeader]
    ) -> [HTTPHeader] {
        if same(names, values, count, as: last) { return last }
        return (0..<count).map { index in
            guard index < last.count else { return HTTPHeader(name: string(names[index]), value: string(values[index])) }
            let known = last[index]
            return HTTPHeader(
                name: equal(names[index], known.name) ? known.name : string(names[index]),
                value: equal(values[index], known.value) ? known.value : string(values[index]))
        }
    }

    /// Whether `count` name and value pairs are the bytes of `fields`, field by field (as
    /// ``equal(_:_:)`` compares them: bytes that are no buffer, ``isBuffer(_:)``, are equal to an
    /// empty string, so a caller that takes the fields as checked must also check that).
    package static func same(_ names: UnsafePointer<ph_bytes>, _ values: UnsafePointer<ph_bytes>, _ count: Int, as fields: [HTTPHeader]) -> Bool {
        fields.count == count && (0..<count).allSatisfy { equal(names[$0], fields[$0].name) && equal(values[$0], fields[$0].value) }
    }

    /// A byte array from borrowed bytes.
    package static func array(_ bytes: ph_bytes) -> [UInt8] {
        guard let data = bytes.data, bytes.len > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: bytes.len))
    }

    /// Calls `body` with borrowed bytes of `string`.
    package static func with<R>(_ string: String, _ body: (ph_bytes) throws -> R) rethrows -> R {
        var string = string
        return try string.withUTF8 { try body(ph_bytes(data: $0.baseAddress, len: $0.count)) }
    }

    /// Calls `body` with borrowed bytes of `bytes`.
    package static func with<R>(_ bytes: [UInt8], _ body: (ph_bytes) throws -> R) rethrows -> R {
        try bytes.withUnsafeBufferPointer { try body(ph_bytes(data: $0.baseAddress, len: $0.count)) }
    }

    /// Calls `body` with parallel arrays of borrowed byte strings for `pairs`, all copied into
    /// one buffer.
    package static func withPairs<R>(_ pairs: [(String, String)], _ body: (UnsafePointer<ph_bytes>?, UnsafePointer<ph_bytes>?, Int) -> R) -> R {
        withPairs(count: pairs.count, { pairs[$0] }, body)
    }

    /// How many bytes of names and values ``withPairs(count:_:_:)`` lays out on the stack in one
    /// pass (a batch of a few fields); a batch of more is counted first.
    static let pairBytesOnStack = 1024

    /// ``withPairs(_:_:)`` for `count` pairs given by index (no array of them made), each read once
    /// (a pair of an enum's payload is one copy of it, not one per string and pass) when their bytes
    /// fit in ``pairBytesOnStack``; else each read twice: once laid out or counted, once laid out in
    /// a buffer of the size counted.
    package static func withPairs<R>(
        count: Int, _ pair: (Int) -> (name: String, value: String), _ body: (UnsafePointer<ph_bytes>?, UnsafePointer<ph_bytes>?, Int) -> R
    ) -> R {
        withUnsafeTemporaryAllocation(of: ph_bytes.self, capacity: max(1, count * 2)) { slots in
            let names = UnsafePointer(slots.baseAddress!)
            let values = names + count
            /// Lays the pairs out in `buffer`, their slots pointed at it: nil when they all fit, else
            /// the bytes all of them need (the pairs from the one that does not fit are counted).
            func layOut(_ buffer: UnsafeMutableBufferPointer<UInt8>) -> Int? {
                var offset = 0
                for index in 0..<count {
                    let (name, value) = pair(index)
                    let needed = offset + name.utf8.count + value.utf8.count
                    guard needed <= buffer.count else {
                        return (index + 1..<count).reduce(needed) { sum, later in
                            let (name, value) = pair(later)
                            return sum + name.utf8.count + value.utf8.count
                        }
                    }
                    slots[index] = place(name, at: buffer.baseAddress!, &offset)
                    slots[count + index] = place(value, at: buffer.baseAddress!, &offset)
                }
                return nil
            }
            var overflow = 0
            let inOnePass = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: pairBytesOnStack) { buffer -> Result<R, Never>? in
                if let needed = layOut(buffer) {
                    overflow = needed
                    return nil
                }
                return .success(body(names, values, count))
            }
            if case .success(let result) = inOnePass { return result }
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, overflow)) { buffer in
                // Room for all of them: laid out whole.
                _ = layOut(buffer)
                return body(names, values, count)
            }
        }
    }

    /// Copies `text` to `base + offset`, moves `offset` past it, and returns the bytes there.
    @inline(__always)
    private static func place(_ text: String, at base: UnsafeMutablePointer<UInt8>, _ offset: inout Int) -> ph_bytes {
        let start = base + offset
        let length = copyUTF8(text, to: start)
        offset += length
        return ph_bytes(data: UnsafePointer(start), len: length)
    }

    /// Copies the UTF-8 bytes of `text` to `target` (room for `text.utf8.count` bytes) and
    /// returns how many: one copy for a native string, byte by byte otherwise.
    package static func copyUTF8(_ text: String, to target: UnsafeMutablePointer<UInt8>) -> Int {
        let copied = text.utf8.withContiguousStorageIfAvailable { utf8 -> Int in
            if let base = utf8.baseAddress, !utf8.isEmpty { target.update(from: base, count: utf8.count) }
            return utf8.count
        }
        if let copied { return copied }
        var written = 0
        for byte in text.utf8 {
            target[written] = byte
            written += 1
        }
        return written
    }

    /// Writes `message` into a host error buffer, truncated at a character boundary.
    package static func write(_ message: String, to buffer: UnsafeMutablePointer<ph_error_buf>?) {
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
