import Foundation

/// A plugin's configuration: the JSON object from its bundle's defaults merged with the
/// app's manifest, with typed accessors whose errors name the plugin, the key and the
/// expected form (e.g. `logger: level must be one of off, basic, headers, body`).
// Safe as @unchecked Sendable: the JSON object is parsed once and never mutated afterwards.
public struct PluginConfiguration: @unchecked Sendable {
    /// The plugin the configuration is for, used in error messages.
    public let plugin: String
    /// The raw JSON object.
    public let values: [String: Any]

    /// Parses a JSON object; throws ``PluginConfigurationError`` when it is not one.
    public init(plugin: String, json: [UInt8]) throws {
        self.plugin = plugin
        if json.isEmpty {
            values = [:]
            return
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(json), options: [.fragmentsAllowed])
        } catch {
            throw PluginConfigurationError(plugin: plugin, message: "configuration is not valid JSON")
        }
        guard let dictionary = object as? [String: Any] else {
            throw PluginConfigurationError(plugin: plugin, message: "configuration must be a JSON object")
        }
        values = dictionary
    }

    /// Wraps an already parsed object (for in-process use and tests).
    public init(plugin: String, values: [String: Any]) {
        self.plugin = plugin
        self.values = values
    }

    /// Throws when a key outside `allowed` is present.
    public func rejectUnknownKeys(_ allowed: Set<String>) throws {
        if let unknown = values.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw error("unknown key \(unknown.debugDescription); known keys: \(allowed.sorted().joined(separator: ", "))")
        }
    }

    /// A string, or `defaultValue` when absent.
    public func string(_ key: String, default defaultValue: String? = nil) throws -> String? {
        guard let value = values[key], !(value is NSNull) else { return defaultValue }
        guard let string = value as? String else { throw error("\(key) must be a string") }
        return string
    }

    /// One of `allowed`, or `defaultValue` when absent.
    public func oneOf(_ key: String, _ allowed: [String], default defaultValue: String) throws -> String {
        let value = try string(key, default: defaultValue) ?? defaultValue
        guard allowed.contains(value) else { throw error("\(key) must be one of \(allowed.joined(separator: ", "))") }
        return value
    }

    /// A Boolean, or `defaultValue` when absent.
    public func bool(_ key: String, default defaultValue: Bool) throws -> Bool {
        guard let value = values[key], !(value is NSNull) else { return defaultValue }
        if let number = value as? NSNumber, String(cString: number.objCType) == "c" { return number.boolValue }
        if let bool = value as? Bool { return bool }
        throw error("\(key) must be true or false")
    }

    /// A number within `range`, or `defaultValue` when absent.
    public func number(
        _ key: String, default defaultValue: Double, in range: ClosedRange<Double> = -Double.greatestFiniteMagnitude...Double.greatestFiniteMagnitude
    ) throws -> Double {
        guard let value = values[key], !(value is NSNull) else { return defaultValue }
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else { throw error("\(key) must be a number") }
        let double = number.doubleValue
        guard range.contains(double) else {
            throw error("\(key) must be between \(Self.format(range.lowerBound)) and \(Self.format(range.upperBound))")
        }
        return double
    }

    /// A whole number within `range`, or `defaultValue` when absent.
    public func integer(_ key: String, default defaultValue: Int, in range: ClosedRange<Int> = Int.min...Int.max) throws -> Int {
        guard let value = values[key], !(value is NSNull) else { return defaultValue }
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c",
            let int = Int(exactly: number.doubleValue)
        else { throw error("\(key) must be a whole number") }
        guard range.contains(int) else { throw error("\(key) must be between \(range.lowerBound) and \(range.upperBound)") }
        return int
    }

    /// A list of strings, or `defaultValue` when absent.
    public func strings(_ key: String, default defaultValue: [String] = []) throws -> [String] {
        guard let value = values[key], !(value is NSNull) else { return defaultValue }
        guard let array = value as? [Any], let strings = array as? [String], strings.count == array.count else {
            throw error("\(key) must be a list of strings")
        }
        return strings
    }

    /// An object of string values, or `defaultValue` when absent.
    public func stringMap(_ key: String, default defaultValue: [String: String] = [:]) throws -> [String: String] {
        guard let value = values[key], !(value is NSNull) else { return defaultValue }
        guard let object = value as? [String: Any] else { throw error("\(key) must be an object of strings") }
        var result: [String: String] = [:]
        for (name, entry) in object {
            guard let string = entry as? String else { throw error("\(key).\(name) must be a string") }
            result[name] = string
        }
        return result
    }

    /// An error for this plugin with `message`.
    public func error(_ message: String) -> PluginConfigurationError {
        PluginConfigurationError(plugin: plugin, message: message)
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
