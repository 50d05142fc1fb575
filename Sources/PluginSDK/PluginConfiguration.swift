import Foundation

/// A plugin's configuration: the JSON object from its bundle's defaults merged with the
/// app's manifest, with typed accessors whose errors name the plugin, the key and the
/// expected form (e.g. `logger: level must be one of off, basic, headers, body`).
///
/// ```swift
/// let configuration = PluginConfiguration(plugin: "logger", values: ["level": "headers", "curl": true])
/// ```
public struct PluginConfiguration: Sendable {
    /// The plugin the configuration is for, used in error messages.
    public let plugin: String
    /// The JSON object's members.
    public let values: [String: JSONValue]

    /// Parses a JSON object; throws ``PluginConfigurationError`` when it is not one.
    public init(plugin: String, json: [UInt8]) throws {
        self.plugin = plugin
        if json.isEmpty {
            values = [:]
            return
        }
        let parsed: JSONValue
        do {
            parsed = try JSONValue(parsing: Data(json))
        } catch {
            throw PluginConfigurationError(plugin: plugin, message: "configuration is not valid JSON")
        }
        guard let object = parsed.objectValue else {
            throw PluginConfigurationError(plugin: plugin, message: "configuration must be a JSON object")
        }
        values = object
    }

    /// Wraps members already at hand (for in-process use and tests).
    public init(plugin: String, values: [String: JSONValue]) {
        self.plugin = plugin
        self.values = values
    }

    /// Throws when a key outside `allowed` is present.
    public func rejectUnknownKeys(_ allowed: Set<String>) throws {
        if let unknown = values.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw error("unknown key \(unknown.debugDescription); known keys: \(allowed.sorted().joined(separator: ", "))")
        }
    }

    /// The member `key`, unless absent or `null`.
    private func member(_ key: String) -> JSONValue? {
        guard let value = values[key], value != .null else { return nil }
        return value
    }

    /// A string, or `defaultValue` when absent.
    public func string(_ key: String, default defaultValue: String? = nil) throws -> String? {
        guard let value = member(key) else { return defaultValue }
        guard let string = value.stringValue else { throw error("\(key) must be a string") }
        return string
    }

    /// One of `allowed`, or `defaultValue` when absent.
    public func oneOf(_ key: String, _ allowed: [String], default defaultValue: String) throws -> String {
        let value = try string(key, default: defaultValue) ?? defaultValue
        guard allowed.contains(value) else {
            // An enumeration's choice is no secret: shown as given.
            let given = value.count > 64 ? String(value.prefix(63)) + "…" : value
            throw error("\(key) must be one of \(allowed.joined(separator: ", ")), not \(given.debugDescription)")
        }
        return value
    }

    /// A Boolean, or `defaultValue` when absent.
    public func bool(_ key: String, default defaultValue: Bool) throws -> Bool {
        guard let value = member(key) else { return defaultValue }
        guard let bool = value.boolValue else { throw error("\(key) must be true or false, not \(Self.shown(value))") }
        return bool
    }

    /// A number within `range`, or `defaultValue` when absent.
    public func number(
        _ key: String, default defaultValue: Double, in range: ClosedRange<Double> = -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude
    ) throws -> Double {
        guard let value = member(key) else { return defaultValue }
        guard let double = value.doubleValue else { throw error("\(key) must be a number, not \(Self.shown(value))") }
        guard range.contains(double) else {
            throw error("\(key) must be between \(Self.format(range.lowerBound)) and \(Self.format(range.upperBound)), not \(Self.shown(value))")
        }
        return double
    }

    /// A whole number within `range`, or `defaultValue` when absent.
    public func integer(_ key: String, default defaultValue: Int, in range: ClosedRange<Int> = Int.min...Int.max) throws -> Int {
        guard let value = member(key) else { return defaultValue }
        // An integer as it is (through a Double, 2^53 + 1 was rounded and Int.max refused).
        let whole: Int?
        switch value {
        case .int(let int): whole = int
        case .double(let double): whole = Int(exactly: double)
        default: whole = nil
        }
        guard let int = whole else { throw error("\(key) must be a whole number, not \(Self.shown(value))") }
        guard range.contains(int) else { throw error("\(key) must be between \(range.lowerBound) and \(range.upperBound), not \(int)") }
        return int
    }

    /// A list of strings, or `defaultValue` when absent.
    public func strings(_ key: String, default defaultValue: [String] = []) throws -> [String] {
        guard let value = member(key) else { return defaultValue }
        guard let array = value.arrayValue else { throw error("\(key) must be a list of strings") }
        // The first entry that is not a string is named: `redactHeaders[1] must be a string, not 7`.
        if let bad = array.firstIndex(where: { $0.stringValue == nil }) {
            throw error("\(key)[\(bad)] must be a string, not \(array[bad])")
        }
        return array.compactMap(\.stringValue)
    }

    /// An object of string values, or `defaultValue` when absent.
    public func stringMap(_ key: String, default defaultValue: [String: String] = [:]) throws -> [String: String] {
        guard let value = member(key) else { return defaultValue }
        guard let object = value.objectValue else { throw error("\(key) must be an object of strings") }
        var result: [String: String] = [:]
        for (name, entry) in object {
            guard let string = entry.stringValue else { throw error("\(key).\(name) must be a string") }
            result[name] = string
        }
        return result
    }

    /// An error for this plugin with `message`.
    public func error(_ message: String) -> PluginConfigurationError {
        PluginConfigurationError(plugin: plugin, message: message)
    }

    /// A value as a refusal of its type shows it: a number, Boolean or null as it is (`1.5`), a
    /// string, list or object by its kind only (`a string`): a secret put under the wrong key
    /// (a proxy URL with its password where a Boolean goes) is not printed.
    static func shown(_ value: JSONValue) -> String {
        switch value {
        case .string: return "a string"
        case .array: return "a list"
        case .object: return "an object"
        default: return value.description
        }
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}

/// A configuration the plugin refuses; `description` is `plugin: message`.
public struct PluginConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The plugin.
    public let plugin: String
    /// What is wrong and what is expected.
    public let message: String

    /// Creates an error.
    public init(plugin: String, message: String) {
        self.plugin = plugin
        self.message = message
    }

    /// `plugin: message`.
    public var description: String { "\(plugin): \(message)" }
}
