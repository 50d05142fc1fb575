import Foundation

/// A JSON document as a `Sendable` value: what a provider's `mapJSON` returns, and what a
/// plugin's ``PluginConfiguration`` is made of. Literals build it:
///
/// ```swift
/// let config: JSONValue = ["level": "headers", "maxBodyBytes": 4096, "curl": true]
/// ```
public enum JSONValue: Sendable, Hashable, CustomStringConvertible {
    /// `null`
    case null
    /// `true` or `false`
    case bool(Bool)
    /// A whole number that fits in `Int`. Parsed JSON gives one for any whole value, `10.0` and
    /// `1e2` too (`JSONSerialization` keeps no spelling), so they are written back as `10` and `100`.
    case int(Int)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])

    /// The member `key` of an object, or nil.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The element at `index` of an array, or nil.
    public subscript(index: Int) -> JSONValue? {
        if case .array(let elements) = self, elements.indices.contains(index) { return elements[index] }
        return nil
    }

    /// The string, if this is one.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer, if this is one.
    public var intValue: Int? {
        if case .int(let value) = self { return value }
        return nil
    }

    /// The number as a `Double`, if this is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    /// The Boolean, if this is one.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members, if this is an object.
    public var objectValue: [String: JSONValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// Parses JSON text (top-level fragments allowed).
    public init(parsing data: Data) throws {
        let object = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        self = JSONValue(foundation: object)
    }

    /// Converts a value produced by `JSONSerialization`.
    package init(foundation object: Any) {
        switch object {
        case is NSNull:
            self = .null
        case let string as String:
            self = .string(string)
        case let dictionary as [String: Any]:
            self = .object(dictionary.mapValues(JSONValue.init(foundation:)))
        case let array as [Any]:
            self = .array(array.map(JSONValue.init(foundation:)))
        case let number as NSNumber:
            self = JSONValue(number: number)
        default:
            self = .string(String(describing: object))
        }
    }

    /// Whether a number `JSONSerialization` produced is a JSON Boolean (the one place that decides).
    /// `text` as a JSON string's contents with only what JSON requires escaped (`"`, `\`, C0
    /// controls; `\n`, `\r` and `\t` by their short forms).
    package static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    package static func isBoolean(_ number: NSNumber) -> Bool {
        // JSONSerialization gives booleans the ObjC type "c"; it never makes numbers of that type.
        String(cString: number.objCType) == "c"
    }

    private init(number: NSNumber) {
        if Self.isBoolean(number) {
            self = .bool(number.boolValue)
            return
        }
        let text = number.stringValue
        if !text.contains("."), !text.lowercased().contains("e"), let int = Int(text) {
            self = .int(int)
        } else if let int = Int(exactly: number.doubleValue) {
            // A whole value spelled with a fraction or an exponent: swift-corelibs-foundation
            // keeps `10.0` as a Double whose text is "10.0" (Darwin's is "10").
            self = .int(int)
        } else {
            self = .double(number.doubleValue)
        }
    }

    /// Whether every number in the value is finite.
    private var isFinite: Bool {
        switch self {
        case .double(let value): return value.isFinite
        case .array(let values): return values.allSatisfy(\.isFinite)
        case .object(let members): return members.values.allSatisfy(\.isFinite)
        default: return true
        }
    }

    /// The value as a Foundation object for `JSONSerialization`.
    package var foundationObject: Any {
        switch self {
        case .null: return NSNull()
        case .bool(let value): return value
        case .int(let value): return value
        case .double(let value): return value
        case .string(let value): return value
        case .array(let values): return values.map(\.foundationObject)
        case .object(let members): return members.mapValues(\.foundationObject)
        }
    }

    /// Compact JSON text with sorted keys; `null` for a value holding a number JSON cannot
    /// write (NaN or an infinity: on Apple platforms `JSONSerialization` raises an exception for
    /// one, which no `try` catches).
    public var description: String {
        guard isFinite, let data = try? JSONSerialization.data(withJSONObject: foundationObject, options: [.fragmentsAllowed, .sortedKeys]) else {
            return "null"
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    /// `null`.
    public init(nilLiteral: ()) { self = .null }
    /// A Boolean.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An integer.
    public init(integerLiteral value: Int) { self = .int(value) }
    /// A number with a fraction.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A string.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An array.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// An object (a repeated key keeps its last value).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
