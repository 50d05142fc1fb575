import Foundation
import PluginSDK

/// Walks parsed JSON, producing ``PluginLoadError``s that name the file and the JSON path.
struct JSONReader {
    let file: String
    let value: Any
    let path: String

    /// Parses `data` from `file`; the root path is empty.
    ///
    /// An object that repeats a key is refused, naming its path: a parser keeps one of the values
    /// (Foundation's the last), while a reader of the file, or a tool, may take the first.
    static func parse(_ data: Data, file: String) throws(PluginLoadError) -> JSONReader {
        // UTF-8 only (RFC 8259 §8.1): Foundation would also read UTF-16 and UTF-32, which the scan
        // for repeated keys does not. Their text has NUL bytes, or starts with a byte order mark.
        if data.contains(0) || data.starts(with: [0xFE, 0xFF]) || data.starts(with: [0xFF, 0xFE]) {
            throw PluginLoadError(.notJSON, file: file, reason: "not UTF-8 (a NUL byte or a UTF-16/UTF-32 byte order mark); save it as UTF-8")
        }
        let value: Any
        do {
            value = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw PluginLoadError(.notJSON, file: file, reason: "not valid JSON" + (detail.map { " (\($0))" } ?? ""))
        }
        switch DuplicateKeys.first(in: data) {
        case .repeatedKey(let path, let key)?:
            throw PluginLoadError(.schema, file: file, jsonPath: path, reason: "duplicate key \(key.debugDescription)")
        case .trailingComma(let path, let container)?:
            // Foundation's parser takes `[1,]` and `{"a": 1,}`; JSON (and jq, and Python) does not.
            throw PluginLoadError(
                .notJSON, file: file, jsonPath: path.isEmpty ? "$" : path,
                reason: "not valid JSON (a comma after the last \(container == "[" ? "element of an array" : "member of an object"))")
        case nil:
            break
        }
        return JSONReader(file: file, value: value, path: "")
    }

    func schemaError(_ reason: String, at path: String? = nil) -> PluginLoadError {
        let location = path ?? self.path
        return PluginLoadError(.schema, file: file, jsonPath: location.isEmpty ? "$" : location, reason: reason)
    }

    func child(_ key: String) -> String { Self.child(path, key) }

    /// The JSON path of member `key` of the object at `path` (`plugins[0]` and `name` make
    /// `plugins[0].name`; the root's members are their keys). A key that is no identifier (ASCII
    /// letters, digits and `_`, not a digit first) is written in brackets as a JSON string
    /// (`plugins[0]["a.b"]`): after a dot, `a.b` read as two members.
    static func child(_ path: String, _ key: String) -> String {
        let isIdentifier =
            key.utf8.first.map { !(0x30...0x39).contains($0) } ?? false
            && key.utf8.allSatisfy { ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A || (0x30...0x39).contains($0) || $0 == 0x5F }
        guard !isIdentifier else { return path.isEmpty ? key : "\(path).\(key)" }
        return path + "[\"" + JSONValue.escaped(key) + "\"]"
    }

    /// The members of an object, refusing keys outside `allowed`.
    func object(allowing allowed: Set<String>) throws(PluginLoadError) -> [String: JSONReader] {
        guard let dictionary = value as? [String: Any] else { throw schemaError("must be an object") }
        if let unknown = dictionary.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw schemaError(
                "unknown key \(unknown.debugDescription); expected one of \(allowed.sorted().joined(separator: ", "))",
                at: child(unknown))
        }
        var members: [String: JSONReader] = [:]
        for (key, member) in dictionary { members[key] = JSONReader(file: file, value: member, path: child(key)) }
        return members
    }

    func array() throws(PluginLoadError) -> [JSONReader] {
        guard let array = value as? [Any] else { throw schemaError("must be an array") }
        return array.enumerated().map { JSONReader(file: file, value: $0.element, path: "\(path)[\($0.offset)]") }
    }

    func string() throws(PluginLoadError) -> String {
        guard let string = value as? String else { throw schemaError("must be a string") }
        return string
    }

    func nonEmptyString() throws(PluginLoadError) -> String {
        let string = try string()
        guard !string.trimmingCharacters(in: .whitespaces).isEmpty else { throw schemaError("must not be empty") }
        return string
    }

    func bool() throws(PluginLoadError) -> Bool {
        if let number = value as? NSNumber, JSONValue.isBoolean(number) { return number.boolValue }
        throw schemaError("must be true or false")
    }

    /// A whole number, read exactly: `9007199254740993` is not rounded to an even neighbour,
    /// a whole number past `Int` is refused as out of range, and `1.00000000000000000001`
    /// (more digits than a `Double` holds) is no whole number.
    func int() throws(PluginLoadError) -> Int {
        guard let number = value as? NSNumber, !JSONValue.isBoolean(number) else { throw schemaError("must be a whole number") }
        if let decimal = number as? NSDecimalNumber {
            // Foundation's parser gives a number with more digits than a `Double` holds as a decimal.
            var exact = decimal.decimalValue
            var whole = Decimal()
            NSDecimalRound(&whole, &exact, 0, .plain)
            guard whole == exact else { throw schemaError("must be a whole number") }
            guard let int = Int(exactly: NSDecimalNumber(decimal: whole).int64Value), NSDecimalNumber(value: int).decimalValue == whole else {
                throw schemaError("must be a whole number from \(Int.min) to \(Int.max) (it is out of range)")
            }
            return int
        }
        // An integer Foundation read as one (`Int64`, or `UInt64` past `Int64.max`) is exact as it
        // is; a number with a fraction or an exponent is a `Double`.
        let type = String(cString: number.objCType)
        if ["q", "l", "i", "s", "c"].contains(type) { return number.intValue }
        if ["Q", "L", "I", "S", "C"].contains(type) {
            guard let int = Int(exactly: number.uint64Value) else {
                throw schemaError("must be a whole number from \(Int.min) to \(Int.max) (it is out of range)")
            }
            return int
        }
        let double = number.doubleValue
        guard double.isFinite, double.rounded() == double else { throw schemaError("must be a whole number") }
        guard let int = Int(exactly: double) else {
            throw schemaError("must be a whole number from \(Int.min) to \(Int.max) (it is out of range)")
        }
        return int
    }

    /// An object kept as raw JSON (a plugin configuration).
    func configObject() throws(PluginLoadError) -> [String: Any] {
        guard let dictionary = value as? [String: Any] else { throw schemaError("must be an object") }
        return dictionary
    }

    func sha256() throws(PluginLoadError) -> String {
        let string = try string().lowercased()
        guard string.count == 64, string.allSatisfy({ $0.isASCII && $0.isHexDigit }) else {
            throw schemaError("must be 64 hexadecimal digits (a SHA-256)")
        }
        return string
    }
}

/// Merges `overlay` over `base`: objects merge key by key, anything else is replaced.
func mergeJSON(_ base: [String: Any], _ overlay: [String: Any]) -> [String: Any] {
    var merged = base
    for (key, value) in overlay {
        if let inner = value as? [String: Any], let existing = merged[key] as? [String: Any] {
            merged[key] = mergeJSON(existing, inner)
        } else {
            merged[key] = value
        }
    }
    return merged
}

/// Finds the first key an object of a JSON text repeats, or the first comma after a last
/// element, for text `JSONSerialization` accepted.
enum DuplicateKeys {
    /// What a JSON text that Foundation's parser took has that JSON does not allow.
    enum Finding: Equatable {
        /// An object repeats `key`, at `path` (`plugins[0].enabled`).
        case repeatedKey(path: String, key: String)
        /// The array (`container` `[`) or object (`{`) at `path` (empty: the root) ends in a comma.
        case trailingComma(path: String, container: Character)
    }

    /// The first repeated key or trailing comma, or nil.
    static func first(in data: Data) -> Finding? {
        let bytes = [UInt8](data)
        // UTF-8 only (``JSONReader/parse(_:file:)`` refuses other text first), after any byte order mark.
        guard !bytes.contains(0) else { return nil }
        var position = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        return value(bytes, &position, path: "")
    }

    private static func skipSpace(_ bytes: [UInt8], _ position: inout Int) {
        while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
    }

    /// Scans the value at `position`, leaving `position` after it.
    private static func value(_ bytes: [UInt8], _ position: inout Int, path: String) -> Finding? {
        skipSpace(bytes, &position)
        guard position < bytes.count else { return nil }
        switch bytes[position] {
        case UInt8(ascii: "{"):
            position += 1
            var keys: Set<String> = []
            while true {
                skipSpace(bytes, &position)
                guard position < bytes.count, bytes[position] != UInt8(ascii: "}") else { break }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                    skipSpace(bytes, &position)
                    if position < bytes.count, bytes[position] == UInt8(ascii: "}") { return .trailingComma(path: path, container: "{") }
                    continue
                }
                let key = string(bytes, &position)
                if !keys.insert(key).inserted { return .repeatedKey(path: JSONReader.child(path, key), key: key) }
                skipSpace(bytes, &position)
                position += 1  // the colon
                if let found = value(bytes, &position, path: JSONReader.child(path, key)) { return found }
            }
            position += 1
        case UInt8(ascii: "["):
            position += 1
            var index = 0
            while true {
                skipSpace(bytes, &position)
                guard position < bytes.count, bytes[position] != UInt8(ascii: "]") else { break }
                if bytes[position] == UInt8(ascii: ",") {
                    position += 1
                    skipSpace(bytes, &position)
                    if position < bytes.count, bytes[position] == UInt8(ascii: "]") { return .trailingComma(path: path, container: "[") }
                    index += 1
                    continue
                }
                if let found = value(bytes, &position, path: "\(path)[\(index)]") { return found }
            }
            position += 1
        case UInt8(ascii: "\""):
            _ = string(bytes, &position)
        default:
            while position < bytes.count, !",]} \t\r\n".utf8.contains(bytes[position]) { position += 1 }
        }
        return nil
    }

    /// The string at `position` (its quote), decoded as JSON decodes it (`"\u0061"` is `"a"`).
    private static func string(_ bytes: [UInt8], _ position: inout Int) -> String {
        let start = position
        position += 1
        while position < bytes.count, bytes[position] != UInt8(ascii: "\"") {
            position += bytes[position] == UInt8(ascii: "\\") ? 2 : 1
        }
        position += 1
        let token = Data(bytes[start..<min(position, bytes.count)])
        return (try? JSONSerialization.jsonObject(with: token, options: [.fragmentsAllowed])) as? String ?? String(decoding: token, as: UTF8.self)
    }
}
