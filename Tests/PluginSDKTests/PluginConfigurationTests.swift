import Foundation
import PluginSDK
import Testing

/// PluginConfiguration on JSONValue: one idea of a JSON Boolean, typed errors naming the key.
@Suite("Plugin configuration")
struct PluginConfigurationTests {
    @Test func booleansAndNumbersAreNeverConfused() throws {
        let parsed = try PluginConfiguration(plugin: "p", json: Array(#"{"flag": true, "one": 1, "half": 0.5, "zero": 0}"#.utf8))
        #expect(try parsed.bool("flag", default: false))
        #expect(try parsed.integer("one", default: 0) == 1)
        #expect(try parsed.number("half", default: 0) == 0.5)
        #expect(throws: PluginConfigurationError(plugin: "p", message: "flag must be a number, not true")) { try parsed.number("flag", default: 0) }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "one must be true or false, not 1")) { try parsed.bool("one", default: false) }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "zero must be true or false, not 0")) {
            try parsed.bool("zero", default: true)
        }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "half must be a whole number, not 0.5")) {
            try parsed.integer("half", default: 0)
        }
    }

    /// A refusal of an enumeration shows the choice given (cut after 64 characters), one of a
    /// Boolean or a number the number given; a string, list or object where a Boolean or number
    /// goes is shown by its kind only (a proxy URL with its password put under the wrong key),
    /// and a string's type error shows nothing of the value (a secret given as a number).
    @Test func refusalsShowTheValueGiven() throws {
        let long = String(repeating: "x", count: 80)
        let parsed = try PluginConfiguration(
            plugin: "p", json: Array(#"{"mode": "Fast", "wide": "\#(long)", "size": 42, "ratio": 1.5, "name": 12345, "on": "yes"}"#.utf8))
        #expect(throws: PluginConfigurationError(plugin: "p", message: #"mode must be one of fast, slow, not "Fast""#)) {
            try parsed.oneOf("mode", ["fast", "slow"], default: "fast")
        }
        #expect(throws: PluginConfigurationError(plugin: "p", message: #"wide must be one of fast, slow, not "\#(long.prefix(63))…""#)) {
            try parsed.oneOf("wide", ["fast", "slow"], default: "fast")
        }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "size must be between 1 and 10, not 42")) {
            try parsed.integer("size", default: 1, in: 1...10)
        }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "ratio must be between 0 and 1, not 1.5")) {
            try parsed.number("ratio", default: 0, in: 0...1)
        }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "on must be true or false, not a string")) {
            try parsed.bool("on", default: false)
        }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "name must be a string")) { try parsed.string("name") }
        let secret = try PluginConfiguration(plugin: "p", json: Array(#"{"proxy": "http://u:s3cret@proxy:3128", "n": [1]}"#.utf8))
        #expect(throws: PluginConfigurationError(plugin: "p", message: "proxy must be true or false, not a string")) {
            try secret.bool("proxy", default: false)
        }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "n must be a number, not a list")) { try secret.number("n", default: 0) }
    }

    /// Integers are read as they are: through a `Double`, 2^53 + 1 was rounded to 2^53 and
    /// `Int.max` refused as no whole number. A whole `Double` is still an integer.
    @Test func integersAreNotRoundedThroughADouble() throws {
        let parsed = PluginConfiguration(plugin: "p", values: ["odd": .int(9_007_199_254_740_993), "max": .int(.max), "two": .double(2)])
        #expect(try parsed.integer("odd", default: 0) == 9_007_199_254_740_993)
        #expect(try parsed.integer("max", default: 0) == .max)
        #expect(try parsed.integer("two", default: 0) == 2)
        let json = try PluginConfiguration(plugin: "p", json: Array(#"{"odd": 9007199254740993}"#.utf8))
        #expect(try json.integer("odd", default: 0) == 9_007_199_254_740_993)
    }

    /// A number JSON cannot write makes the description `null` (on Apple platforms the writer
    /// raised an exception no `try` catches).
    @Test func aValueWithANumberJSONCannotWriteDescribesAsNull() {
        #expect(JSONValue.double(.nan).description == "null")
        #expect(JSONValue.array([1, .double(.infinity)]).description == "null")
        #expect(JSONValue.object(["a": 1.5]).description == #"{"a":1.5}"#)
    }

    @Test func literalsBuildTheSameConfigurationAsJSON() throws {
        let literal = PluginConfiguration(plugin: "p", values: ["level": "headers", "tags": ["a", "b"], "map": ["k": "v"], "off": nil])
        let parsed = try PluginConfiguration(
            plugin: "p", json: Array(#"{"level": "headers", "tags": ["a", "b"], "map": {"k": "v"}, "off": null}"#.utf8))
        #expect(literal.values == parsed.values)
        #expect(try literal.strings("tags") == ["a", "b"])
        #expect(try literal.stringMap("map") == ["k": "v"])
        #expect(try literal.string("off", default: "fallback") == "fallback")
    }

    @Test func aDocumentThatIsNotAnObjectIsRefused() {
        #expect(throws: PluginConfigurationError(plugin: "p", message: "configuration must be a JSON object")) {
            try PluginConfiguration(plugin: "p", json: Array("[1]".utf8))
        }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "configuration is not valid JSON")) {
            try PluginConfiguration(plugin: "p", json: Array("{".utf8))
        }
    }
}
