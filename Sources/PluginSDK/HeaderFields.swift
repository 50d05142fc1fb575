// Header-field helpers shared by the host and plugins: ASCII case-insensitive names, lookups,
// and folding repeated fields.

extension HTTPHeader {
    /// `byte` with an ASCII capital letter made small (every other byte as it is): how header
    /// names compare.
    @inlinable
    package static func asciiLowercased(_ byte: UInt8) -> UInt8 { byte &- 65 < 26 ? byte | 0x20 : byte }

    /// Whether two header names are equal ignoring ASCII case (header names are ASCII tokens).
    @inlinable @inline(__always)
    public static func namesEqual(_ a: String, _ b: String) -> Bool {
        // ASCII names: different lengths never match (O(1) for native strings). Most names
        // compared while a list is searched differ in length, and are told apart here, inline.
        a.utf8.count == b.utf8.count && sameLengthNamesEqual(a, b)
    }

    /// ``namesEqual(_:_:)`` for two names of the same length in UTF-8.
    @usableFromInline
    static func sameLengthNamesEqual(_ a: String, _ b: String) -> Bool {
        // Native strings (all of them on Linux): compared as two byte buffers.
        let contiguous = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                for index in 0..<x.count where x[index] != y[index] {
                    if asciiLowercased(x[index]) != asciiLowercased(y[index]) { return false }
                }
                return true
            }
        }
        if let contiguous, let equal = contiguous { return equal }
        var left = a.utf8.makeIterator()
        var right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil):
                return true
            case (let x?, let y?):
                if x == y { continue }
                if asciiLowercased(x) != asciiLowercased(y) { return false }
            default:
                return false
            }
        }
    }
}

extension Array where Element == HTTPHeader {
    /// The `index`-th value of the field `name` (case-insensitive).
    public func value(named name: String, index: Int = 0) -> String? {
        var seen = 0
        for header in self where HTTPHeader.namesEqual(header.name, name) {
            if seen == index { return header.value }
            seen += 1
        }
        return nil
    }

    /// Every value of the field `name`, in order.
    public func values(named name: String) -> [String] {
        var values: [String] = []
        for header in self where HTTPHeader.namesEqual(header.name, name) { values.append(header.value) }
        return values
    }

    /// Replaces every field named `name` with one field, or removes them when `value` is nil.
    public mutating func set(named name: String, value: String?) {
        // Most names set are new to the list: one read-only pass finds that, and `removeAll`
        // (which walks and rewrites the tail of the list even when nothing goes) is not called.
        if contains(where: { HTTPHeader.namesEqual($0.name, name) }) { removeAll { HTTPHeader.namesEqual($0.name, name) } }
        if let value { append(HTTPHeader(name: name, value: value)) }
    }
}

/// Reads every value of a header through an indexed getter (as the views' backends offer).
enum HeaderReading {
    static func values(named name: String, _ header: (String, Int) -> String?) -> [String] {
        var values: [String] = []
        while let value = header(name, values.count) { values.append(value) }
        return values
    }
}

extension Array where Element == HTTPHeader {
    /// The fields as a dictionary, repeated names folded into one value joined by ", " as
    /// RFC 9110 §5.3 says, for requests and responses alike (the first spelling of a name is kept).
    public func folded() -> [String: String] {
        // Names folded as bytes (ASCII case); Swift's `String` keys compare canonically
        // (`X-\u{212A}ey` equals `X-Key`): such names are joined too, never a trap.
        Dictionary(foldedFields().lazy.map { ($0.name, $0.value) }, uniquingKeysWith: { $0 + ", " + $1 })
    }

    /// The fields with repeated names folded into one, as ``folded()`` does, in the order of each
    /// name's first field.
    package func foldedFields() -> [HTTPHeader] {
        // A short list that repeats no name (most) is its own folding: no new list.
        if count <= 32, !indices.contains(where: { index in self[..<index].contains { HTTPHeader.namesEqual($0.name, self[index].name) } }) {
            return self
        }
        var fields: [HTTPHeader] = []
        fields.reserveCapacity(count)
        // A long list finds the first field of a name by its bytes with ASCII letters lower-cased
        // (bytes, not a String: names equal as `namesEqual` says, no Unicode folding); a short one
        // looks back (names of other lengths are passed over at once).
        var firsts: [[UInt8]: Int]? = count > 32 ? [:] : nil
        for header in self {
            let first: Int?
            if firsts != nil {
                let lowered = header.name.utf8.map(HTTPHeader.asciiLowercased)
                first = firsts![lowered]
                if first == nil { firsts![lowered] = fields.count }
            } else {
                first = fields.firstIndex { HTTPHeader.namesEqual($0.name, header.name) }
            }
            if let first {
                fields[first].value += ", " + header.value
            } else {
                fields.append(header)
            }
        }
        return fields
    }
}
