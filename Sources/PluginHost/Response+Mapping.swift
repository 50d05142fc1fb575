import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Response {
    /// Returns self when the status code is in `statusCodes`; throws ``NetworkError/statusCode(_:)`` otherwise.
    public func filter<R: RangeExpression>(statusCodes: R) throws(NetworkError) -> Response where R.Bound == Int {
        guard statusCodes.contains(statusCode) else { throw .statusCode(self) }
        return self
    }

    /// Returns self when the status code is `statusCode`.
    public func filter(statusCode code: Int) throws(NetworkError) -> Response {
        try filter(statusCodes: code...code)
    }

    /// Returns self for 200 to 299.
    public func filterSuccessfulStatusCodes() throws(NetworkError) -> Response {
        try filter(statusCodes: 200...299)
    }

    /// Returns self for 200 to 399.
    public func filterSuccessfulStatusAndRedirectCodes() throws(NetworkError) -> Response {
        try filter(statusCodes: 200...399)
    }

    /// Parses the body as JSON; an empty body is `null` unless `failsOnEmptyData`.
    public func mapJSON(failsOnEmptyData: Bool = true) throws(NetworkError) -> JSONValue {
        if data.isEmpty && !failsOnEmptyData { return .null }
        do {
            return try JSONValue(parsing: data)
        } catch {
            throw .jsonMapping(self)
        }
    }

    /// The body as UTF-8 text, or the string at `keyPath` (dot-separated) of a JSON body.
    ///
    /// A key path's key names an object's member, or an array's element when it is an index
    /// (`items.0.name`); any other key applied to an array is taken from each element, as Moya's
    /// key-value coding does (`items.name`: every element's `name`, `null` where one has no such
    /// member). A path that is not in the body is ``NetworkError/keyPathNotFound(keyPath:_:)``:
    /// a key through a string or a number, an index past an array's end (in any element too).
    public func mapString(atKeyPath keyPath: String? = nil) throws(NetworkError) -> String {
        guard let keyPath else {
            guard let string = String(data: data, encoding: .utf8) else { throw .stringMapping(self) }
            return string
        }
        guard let string = try value(atKeyPath: keyPath) as? String else { throw .stringMapping(self) }
        return string
    }

    /// Decodes the body, or the value at `keyPath` (read as ``mapString(atKeyPath:)`` reads it:
    /// `items.0.name`, or `items.name` for every element's), into `type`.
    ///
    /// Values at a key path may be fragments (a number, string, Boolean or URL). An empty
    /// body fails with ``NetworkError/objectMapping(_:_:)`` unless `failsOnEmptyData` is
    /// false and `type` can be decoded from `null` (an optional), `{}` (a model whose
    /// properties are all optional) or `[]` (an array), tried in that order.
    public func map<D: Decodable>(
        _ type: D.Type, atKeyPath keyPath: String? = nil, using decoder: JSONDecoder = JSONDecoder(),
        failsOnEmptyData: Bool = true
    ) throws(NetworkError) -> D {
        if data.isEmpty && !failsOnEmptyData {
            // The same with and without a key path: null (an optional), else an empty object (a
            // model whose properties are all optional), else an empty array. (Moya tries `{}`,
            // then `[{}]`: README, "What behaves differently".)
            var firstError: (any Error)?
            for empty in ["null", "{}", "[]"] {
                do {
                    return try decoder.decode(D.self, from: Data(empty.utf8))
                } catch {
                    firstError = firstError ?? error
                }
            }
            throw .objectMapping(firstError!, self)
        }
        let source: Data
        if let keyPath {
            let value = try self.value(atKeyPath: keyPath)
            do {
                source = try JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed])
            } catch {
                throw .objectMapping(error, self)
            }
        } else {
            source = data
        }
        do {
            return try decoder.decode(D.self, from: source)
        } catch {
            throw .objectMapping(error, self)
        }
    }

    /// The Foundation value at a dot-separated key path of the JSON body. A key names an
    /// object's member, or an array's element when it is an index (`items.0.name`). Any other key
    /// applied to an array is taken from each of its elements, as Foundation's key-value coding
    /// (which Moya reads key paths with) does: `items.name` is every element's `name`, `null` for
    /// an element without it.
    private func value(atKeyPath keyPath: String) throws(NetworkError) -> Any {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw .jsonMapping(self)
        }
        let keys = keyPath.split(separator: ".", omittingEmptySubsequences: false)
        guard let found = Self.value(in: root, at: keys[...], inElement: false) else {
            throw .keyPathNotFound(keyPath: keyPath, self)
        }
        return found
    }

    /// The value at `keys` of `value`; nil when it is not there. Within an array's elements
    /// (`inElement`) a missing member is `null`, as key-value coding has it; a value that has no
    /// members (a string, a number) is not there in either case.
    private static func value(in value: Any, at keys: ArraySlice<Substring>, inElement: Bool) -> Any? {
        guard let key = keys.first else { return value }
        let rest = keys.dropFirst()
        if let object = value as? [String: Any] {
            guard let member = object[String(key)] else { return inElement ? NSNull() : nil }
            return Self.value(in: member, at: rest, inElement: inElement)
        }
        if let array = value as? [Any] {
            if let index = Int(key) {
                return array.indices.contains(index) ? Self.value(in: array[index], at: rest, inElement: inElement) : nil
            }
            var values: [Any] = []
            values.reserveCapacity(array.count)
            for element in array {
                guard let found = Self.value(in: element, at: keys, inElement: true) else { return nil }
                values.append(found)
            }
            return values
        }
        return inElement && value is NSNull ? NSNull() : nil
    }
}
