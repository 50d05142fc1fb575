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
        #expect(throws: PluginConfigurationError(plugin: "p", message: "flag must be a number")) { try parsed.number("flag", default: 0) }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "one must be true or false")) { try parsed.bool("one", default: false) }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "zero must be true or false")) { try parsed.bool("zero", default: true) }
        #expect(throws: PluginConfigurationError(plugin: "p", message: "half must be a whole number")) { try parsed.integer("half", default: 0) }
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
