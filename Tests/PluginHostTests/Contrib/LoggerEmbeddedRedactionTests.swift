import Foundation
import Testing

@testable import LoggerPlugin

/// The logger's redaction of secrets inside JSON string values, called directly: how deep it
/// looks, a string cut inside an escape, and the forms an argument's value takes.
@Suite("logger: secrets inside JSON strings")
struct LoggerEmbeddedRedactionTests {
    let names: Set<String> = ["password", "token", "apikey"]

    /// `text` as a JSON string literal.
    func quoted(_ text: String) -> String { "\"" + FieldNames.asciiJSON(text) + "\"" }

    @Test func stringsHoldingJSONAreLookedIntoToADepthThenRedactedWhole() {
        // Level 1: `password: deep-secret`; each level more: that text as a string in `{"p": …}`.
        func nested(_ levels: Int) -> String {
            (1..<levels).reduce("password: deep-secret") { inner, _ in #"{"p": "# + quoted(inner) + "}" }
        }
        var found: [String] = []
        let shallow = LoggerPlugin.redactJSONMembers(in: nested(4), names: names, found: &found)
        #expect(!shallow.contains("deep-secret"), "\(shallow)")
        #expect(shallow.hasPrefix(#"{"p": "{\"p\": "#), "the levels within the limit keep their shape: \(shallow)")
        #expect(shallow.contains("password: "), "\(shallow)")
        let deep = LoggerPlugin.redactJSONMembers(in: nested(LoggerPlugin.maxEmbeddingDepth + 4), names: names, found: &found)
        #expect(!deep.contains("deep-secret"), "\(deep)")
        #expect(deep.contains("<redacted>"), "\(deep)")
    }

    @Test func aStringCutInsideAnEscapeIsRedactedAsFarAsItGoes() {
        var found: [String] = []
        for cut in [#"{"q": "login(password: \"cut-secret\") then \u00"#, #"{"q": "login(password: \"cut-secret\") then \"#] {
            let shown = LoggerPlugin.redactJSONMembers(in: cut, names: names, found: &found)
            #expect(!shown.contains("cut-secret"), "\(shown)")
            #expect(shown.hasPrefix(#"{"q": "login(password: \"<redacted>\") then"#), "\(shown)")
        }
    }

    @Test func anArgumentsValueInEachForm() {
        let rows: [(String, String)] = [
            (#"token: ab12/CD+e==, next"#, #"token: "<redacted>", next"#),
            (#"f(password: 'single-q')"#, #"f(password: "<redacted>")"#),
            (#"f(apiKey: 4321)"#, #"f(apiKey: "<redacted>")"#),
            (#"f(password: "unclosed"#, #"f(password: "<redacted>""#),
            (#"f(password: ["a-1", "b-2"]) { id }"#, #"f(password: "<redacted>") { id }"#),
            // A variable, its definition, and a name that is no secret stay.
            (
                #"mutation($password: String!) { f(password: $password, user: "ann") }"#,
                #"mutation($password: String!) { f(password: $password, user: "ann") }"#
            ),
        ]
        for (text, shown) in rows {
            var found: [String] = []
            #expect(LoggerPlugin.redactArguments(in: text, names: names, found: &found) == shown, "\(text)")
        }
        var found: [String] = []
        _ = LoggerPlugin.redactArguments(in: #"f(password: "p\u00e4ss \"q\"")"#, names: names, found: &found)
        #expect(found == [#"p\u00e4ss \"q\""#, "päss \"q\"", #"p\u00e4ss \"q\""#], "as written, decoded, and as a JSON echo writes it")
        #expect(LoggerPlugin.secretVariables(in: #"mutation($pw: String!, $u: String) { f(password: $pw, user: $u) }"#, names: names) == ["pw"])
    }
}
