import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Encodes parameters into a request: its query string or its body.
public protocol ParameterEncoding: Sendable {
    /// Returns `request` with `parameters` encoded into it.
    func encode(_ request: URLRequest, with parameters: Parameters?) throws -> URLRequest
}

/// Why parameters could not be encoded.
public enum ParameterEncodingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request has no URL to add a query to.
    case missingURL
    /// A value JSON cannot represent, with the key path where it was found.
    case invalidJSONValue(keyPath: String, type: String)
    /// A number a query or form cannot carry (NaN or an infinity, which JSON refuses too), with
    /// the key path where it was found (`ratio`, `a[b][]`).
    case invalidQueryValue(keyPath: String, type: String)
    /// JSONSerialization failed.
    case jsonSerializationFailed(String)

    /// A sentence naming the problem.
    public var description: String {
        switch self {
        case .missingURL:
            return "the request has no URL"
        case .invalidJSONValue(let keyPath, let type):
            return "the value at \(keyPath) (of type \(type)) cannot be encoded as JSON"
        case .invalidQueryValue(let keyPath, let type):
            return "the value at \(keyPath) (of type \(type)) cannot be encoded in a query or form"
        case .jsonSerializationFailed(let message):
            return "JSON serialization failed: \(message)"
        }
    }
}

/// A NaN or an infinity, which neither JSON nor a query or form can carry: how the encodings'
/// refusals name it (`Double (nan)`), and its text.
struct NonFiniteNumber {
    let type: String
    let text: String

    /// Nil for any value but a `Double` or `Float` that is not finite.
    init?(_ value: Any) {
        switch value {
        case let double as Double where !double.isFinite: (type, text) = ("Double (\(double))", "\(double)")
        case let float as Float where !float.isFinite: (type, text) = ("Float (\(float))", "\(float)")
        default: return nil
        }
    }
}

/// Encodes parameters as `application/x-www-form-urlencoded` pairs, into the query string
/// or the body.
///
/// Nested values follow the common convention: `key[sub]=v` for dictionaries and
/// `key[]=v` (or `key=v`, see ``ArrayEncoding``) for arrays. Keys are sorted, so the same
/// parameters always give the same bytes: a `Set`'s elements are written sorted by their text, a
/// dictionary's keys that are not strings by theirs. Everything outside RFC 3986's unreserved
/// set is percent-encoded. A NaN or infinite number fails ``encode(_:with:)`` with
/// ``ParameterEncodingError/invalidQueryValue(keyPath:type:)``.
public struct URLEncoding: ParameterEncoding {
    /// Where the encoded pairs go.
    public enum Destination: Sendable, Equatable {
        /// The query string for `GET`, `HEAD` and `DELETE`; the body otherwise.
        case methodDependent
        /// Always the query string.
        case queryString
        /// Always the body.
        case httpBody
    }

    /// How arrays are written.
    public enum ArrayEncoding: Sendable, Equatable {
        /// `key[]=a&key[]=b`.
        case brackets
        /// `key=a&key=b`.
        case noBrackets
    }

    /// How booleans are written.
    public enum BoolEncoding: Sendable, Equatable {
        /// `1` and `0`.
        case numeric
        /// `true` and `false`.
        case literal
    }

    /// Method-dependent destination, brackets, numeric booleans.
    public static let `default` = URLEncoding()
    /// Always the query string.
    public static let queryString = URLEncoding(destination: .queryString)
    /// Always the body.
    public static let httpBody = URLEncoding(destination: .httpBody)

    /// Where the pairs go.
    public var destination: Destination
    /// How arrays are written.
    public var arrayEncoding: ArrayEncoding
    /// How booleans are written.
    public var boolEncoding: BoolEncoding

    /// Creates an encoding.
    public init(destination: Destination = .methodDependent, arrayEncoding: ArrayEncoding = .brackets, boolEncoding: BoolEncoding = .numeric) {
        self.destination = destination
        self.arrayEncoding = arrayEncoding
        self.boolEncoding = boolEncoding
    }

    /// Encodes into the query string or the body, per ``destination``. Empty parameters leave
    /// the query as it is, and make an empty form body (with its `Content-Type`, as Alamofire's).
    public func encode(_ request: URLRequest, with parameters: Parameters?) throws -> URLRequest {
        guard let parameters else { return request }
        var request = request
        let method = (request.httpMethod ?? "GET").uppercased()
        if encodesInQuery(method: method) {
            guard !parameters.isEmpty else { return request }
            guard let url = request.url else { throw ParameterEncodingError.missingURL }
            request.url = Self.appendingQuery(try checkedQuery(parameters), to: url)
        } else {
            if request.value(forHTTPHeaderField: "Content-Type") == nil {
                request.setValue("application/x-www-form-urlencoded; charset=utf-8", forHTTPHeaderField: "Content-Type")
            }
            request.httpBody = Data(try checkedQuery(parameters).utf8)
        }
        return request
    }

    func encodesInQuery(method: String) -> Bool {
        switch destination {
        case .queryString: return true
        case .httpBody: return false
        case .methodDependent: return ["GET", "HEAD", "DELETE"].contains(method)
        }
    }

    /// The encoded pairs joined with `&`, keys sorted (a NaN or infinity written as its text:
    /// ``encode(_:with:)`` refuses it).
    public func query(_ parameters: Parameters) -> String {
        var invalid: ParameterEncodingError?
        return query(parameters, invalid: &invalid)
    }

    /// ``query(_:)``, or the refusal of its first value a query cannot carry.
    func checkedQuery(_ parameters: Parameters) throws(ParameterEncodingError) -> String {
        var invalid: ParameterEncodingError?
        let text = query(parameters, invalid: &invalid)
        if let invalid { throw invalid }
        return text
    }

    private func query(_ parameters: Parameters, invalid: inout ParameterEncodingError?) -> String {
        var pairs: [(String, String)] = []
        for key in parameters.keys.sorted() {
            components(key: key, value: parameters[key]!, into: &pairs, invalid: &invalid)
        }
        return pairs.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    private func components(key: String, value: Any, into pairs: inout [(String, String)], invalid: inout ParameterEncodingError?) {
        let value = OptionalParameter.unwrapped(value)
        if let number = NonFiniteNumber(value) {
            if invalid == nil { invalid = .invalidQueryValue(keyPath: key, type: number.type) }
            pairs.append((Self.escape(key), Self.escape(number.text)))
            return
        }
        switch value {
        case let dictionary as [String: Any]:
            for nested in dictionary.keys.sorted() {
                components(key: "\(key)[\(nested)]", value: dictionary[nested]!, into: &pairs, invalid: &invalid)
            }
        case let dictionary as [AnyHashable: Any]:
            // Keys that are not strings (`[Int: T]`), in the order of their text.
            for (text, nested) in dictionary.map({ ("\($0.key.base)", $0.value) }).sorted(by: { $0.0 < $1.0 }) {
                components(key: "\(key)[\(text)]", value: nested, into: &pairs, invalid: &invalid)
            }
        case let array as [Any]:
            for element in array {
                components(key: arrayEncoding == .brackets ? "\(key)[]" : key, value: element, into: &pairs, invalid: &invalid)
            }
        case let set as any SetAlgebra & Sequence:
            // A set's order changes from one process to the next: its elements by their text.
            for element in Self.elements(of: set).sorted(by: { "\($0)" < "\($1)" }) {
                components(key: arrayEncoding == .brackets ? "\(key)[]" : key, value: element, into: &pairs, invalid: &invalid)
            }
        case let number as NSNumber where type(of: value) is NSNumber.Type && !JSONValue.isBoolean(number):
            // A number `JSONSerialization` made: 0 and 1 match `as Bool` too, and are numbers.
            pairs.append((Self.escape(key), Self.escape("\(number)")))
        case let bool as Bool:
            let text = boolEncoding == .numeric ? (bool ? "1" : "0") : (bool ? "true" : "false")
            pairs.append((Self.escape(key), Self.escape(text)))
        case is NSNull:
            pairs.append((Self.escape(key), ""))
        default:
            pairs.append((Self.escape(key), Self.escape("\(value)")))
        }
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters.
    public static func escape(_ string: String) -> String { RFC3986.escape(string) }

    /// The elements of a sequence whose type is known only at run time.
    private static func elements(of sequence: some Sequence) -> [Any] { sequence.map { $0 as Any } }

    static func appendingQuery(_ query: String, to url: URL) -> URL {
        guard !query.isEmpty, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
        components.percentEncodedQuery = existing + query
        return components.url ?? url
    }
}

/// Encodes parameters as a JSON body (`Content-Type: application/json`).
public struct JSONEncoding: ParameterEncoding {
    /// Compact JSON.
    public static let `default` = JSONEncoding()
    /// Indented JSON.
    public static let prettyPrinted = JSONEncoding(options: .prettyPrinted)

    /// Serialization options; keys are always sorted.
    public let options: JSONSerialization.WritingOptions

    /// Creates an encoding.
    public init(options: JSONSerialization.WritingOptions = []) {
        self.options = options
    }

    /// Encodes `parameters` as the JSON body.
    public func encode(_ request: URLRequest, with parameters: Parameters?) throws -> URLRequest {
        guard let parameters else { return request }
        var request = request
        let object = try Self.jsonObject(parameters, path: "$")
        do {
            request.httpBody = try JSONSerialization.data(withJSONObject: object, options: options.union(.sortedKeys))
        } catch {
            throw ParameterEncodingError.jsonSerializationFailed(String(describing: error))
        }
        if request.value(forHTTPHeaderField: "Content-Type") == nil {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return request
    }

    /// `value` as `JSONSerialization` takes it: an optional's value, or `NSNull` for nil (as
    /// Darwin's bridging writes `null`), at any depth. Throws
    /// ``ParameterEncodingError/invalidJSONValue(keyPath:type:)`` at the first value JSON cannot hold.
    static func jsonObject(_ value: Any, path: String) throws -> Any {
        let value = OptionalParameter.unwrapped(value)
        if let number = NonFiniteNumber(value) { throw ParameterEncodingError.invalidJSONValue(keyPath: path, type: number.type) }
        switch value {
        case let dictionary as [String: Any]:
            var object: [String: Any] = [:]
            object.reserveCapacity(dictionary.count)
            // By name: the refusal names the first bad value by name, whatever the dictionary's order.
            for key in dictionary.keys.sorted() { object[key] = try jsonObject(dictionary[key]!, path: "\(path).\(key)") }
            return object
        case let array as [Any]:
            return try array.enumerated().map { index, nested in try jsonObject(nested, path: "\(path)[\(index)]") }
        case is String, is Bool, is Int, is Int8, is Int16, is Int32, is Int64, is UInt, is UInt8, is UInt16,
            is UInt32, is UInt64, is Double, is Float, is NSNull, is NSNumber:
            return value
        default:
            throw ParameterEncodingError.invalidJSONValue(keyPath: path, type: String(describing: type(of: value)))
        }
    }
}

/// An optional among `Parameters` (`["name": user.nickname]` with a `String?`): both encodings
/// take what it holds, and nil as `NSNull` (`null` in JSON, `key=` in a query), where a bare
/// `"\(value)"` wrote `Optional("…")` and JSON refused the type.
enum OptionalParameter {
    /// What `value` holds through any number of optionals; `NSNull` for nil.
    static func unwrapped(_ value: Any) -> Any {
        var value = value
        while let optional = value as? any HoldsOptional {
            guard let held = optional.held else { return NSNull() }
            value = held
        }
        return value
    }
}

/// `Optional`, seen through `Any`.
private protocol HoldsOptional {
    var held: Any? { get }
}

extension Optional: HoldsOptional {
    fileprivate var held: Any? { map { $0 as Any } }
}
