import Foundation

/// Walks parsed JSON, producing ``PluginLoadError``s that name the file and the JSON path.
struct JSONReader {
    let file: String
    let value: Any
    let path: String

    /// Parses `data` from `file`; the root path is empty.
    static func parse(_ data: Data, file: String) throws(PluginLoadError) -> JSONReader {
        do {
            let value = try JSONSerialization.jsonObject(with: data, options: [])
            return JSONReader(file: file, value: value, path: "")
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw PluginLoadError(.notJSON, file: file, reason: "not valid JSON" + (detail.map { " (\($0))" } ?? ""))
        }
    }

    func schemaError(_ reason: String, at path: String? = nil) -> PluginLoadError {
        let location = path ?? self.path
        return PluginLoadError(.schema, file: file, jsonPath: location.isEmpty ? "$" : location, reason: reason)
    }

    func child(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

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

    func int() throws(PluginLoadError) -> Int {
        guard let number = value as? NSNumber, !JSONValue.isBoolean(number),
            let int = Int(exactly: number.doubleValue)
        else { throw schemaError("must be a whole number") }
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
