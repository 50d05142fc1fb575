import Foundation
import PluginHost
import PluginSDK
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
        // Past the limit the string holding the arguments is redacted whole, its name with it.
        #expect(!deep.contains("password") && deep.contains("<redacted>"), "\(deep)")
        // Many redactions eight levels deep: each level's escapes double, and a string that would
        // more than double is redacted whole, so the text stays within a bound of its size.
        let many = (1..<LoggerPlugin.maxEmbeddingDepth).reduce(String(repeating: "token:1 é ", count: 500)) { inner, _ in
            #"{"p": "# + quoted(inner) + "}"
        }
        let bounded = LoggerPlugin.redactJSONMembers(in: many, names: names, found: &found)
        #expect(bounded.utf8.count <= 2 * many.utf8.count + 1024, "\(many.utf8.count) bytes became \(bounded.utf8.count)")
        #expect(!bounded.contains("token:1"), "\(bounded.prefix(300))")
    }

    /// A URL's parameter whose value holds a `?` is looked into one after another, not by a call
    /// within a call: a `Location` or a request URL of 100,000 `=?` (200 KB; a header may hold it)
    /// nested as many calls, each copying what the next returned (the stack overflowed).
    @Test func aValueOfManyQuestionMarksIsReadInOnePass() throws {
        let logger = try LoggerPlugin(
            configuration: PluginConfiguration(plugin: "logger", values: [:]), host: PluginServices().hostServices(for: "logger"))
        let marks = String(repeating: "=?", count: 100_000)
        #expect(logger.redact(url: "http://127.0.0.1/get?x" + marks) == "http://127.0.0.1/get?x" + marks)
        var found: [String] = []
        let shown = logger.redact(url: "http://127.0.0.1/get?x" + marks + "access_token=deep-secret&b=1", found: &found)
        #expect(shown == "http://127.0.0.1/get?x" + marks + "access_token=<redacted>&b=1")
        #expect(found.contains("deep-secret"))
    }

    /// A string Foundation's decoder refuses (a lone surrogate: a string cut inside an emoji)
    /// is read all the same, its secrets found.
    @Test func aStringWithALoneSurrogateIsReadAllTheSame() {
        var found: [String] = []
        let body = #"{"query": "mutation { login(password: \"lone-secret\") } \ud83d", "n": "\ud83d\ude00:x"}"#
        let shown = LoggerPlugin.redactJSONMembers(in: body, names: names, found: &found)
        #expect(shown == #"{"query": "mutation { login(password: \"<redacted>\") } \#u{FFFD}", "n": "\ud83d\ude00:x"}"#, "\(shown)")
        #expect(found.contains("lone-secret"))
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
            // The credentials after an authentication scheme, and a scheme's parameters.
            (#"error: invalid token: Bearer eyJhbGci.eyJzdWIi.c2ln expired"#, #"error: invalid token: "<redacted>" expired"#),
            (#"f(password: Basic dXNlcjpwYXNz)"#, #"f(password: "<redacted>")"#),
            (#"token: Digest username="ann lee", realm="x", response="6629fae4", opaque=5ccc then"#, #"token: "<redacted>" then"#),
            (#"token: digest username=\"ann lee\", response=\"6629fae4\""#, #"token: "<redacted>""#),
            (#"token: Bearer"#, #"token: "<redacted>""#),
            (#"token: OAuth oauth_token="t-1", oauth_signature="s-1""#, #"token: "<redacted>""#),
            (#"token: Digest username=\"ann\",\nresponse=\"d-1\""#, #"token: "<redacted>""#),
            (#"token: Digest\nusername=\"ann\", response=\"d-2\""#, #"token: "<redacted>""#),
            // Not past the credentials: a space alone ends them, and a next argument is no parameter.
            (#"token: Bearer abc status=200 path=/x"#, #"token: "<redacted>" status=200 path=/x"#),
            (#"login(token: Basic user: "ann")"#, #"login(token: "<redacted>" user: "ann")"#),
            // A quote inside a bare value is a byte: an unpaired one does not take the rest.
            (#"mutation { log(message: "token: 1234", level: INFO) }"#, #"mutation { log(message: "token: "<redacted>", level: INFO) }"#),
            // A variable the document does not define is prose's value.
            (#"password: $Hunter2 ok"#, #"password: "<redacted>" ok"#),
            // A `$` that starts no GraphQL name is a value.
            (#"password: $3cr3t, user: ann"#, #"password: "<redacted>", user: ann"#),
            (#"password: $pw!x"#, #"password: "<redacted>""#),
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
        // Still JSON-escaped, indented with `\n` and `\t`; a name ending in digits, as names are read.
        #expect(LoggerPlugin.secretVariables(in: #"{"query": "mutation {\n\tf(\n\t\tpassword: $pw\n\t)\n}"}"#, names: names) == ["pw"])
        #expect(LoggerPlugin.secretVariables(in: #"f(password: $v1)"#, names: names) == ["v"])
        // In a secret's list or input object; not beside it, nor in a definition.
        #expect(LoggerPlugin.secretVariables(in: #"f(password: [$a, $b], user: $u)"#, names: names) == ["a", "b"])
        #expect(LoggerPlugin.secretVariables(in: #"f(password: {old: $o, new: [$n]}, user: $u)"#, names: names) == ["o", "n"])
        #expect(LoggerPlugin.secretVariables(in: #"query Q($a: Int, $pw: String) { f(user: $u, password: $p) { g(a: $a) } }"#, names: names) == ["p"])
        // Without commas (GraphQL's commas are optional), across escaped lines, past a string holding a bracket.
        #expect(LoggerPlugin.secretVariables(in: #"{"query": "f(password: {old: $o new: $n}) { g(a: $a) }"}"#, names: names) == ["o", "n"])
        #expect(LoggerPlugin.secretVariables(in: #"{"query": "f(password: [$a $b]\n  user: $u)"}"#, names: names) == ["a", "b"])
        #expect(LoggerPlugin.secretVariables(in: #"{"query": "f(password: {old: $o\n  new: $n})"}"#, names: names) == ["o", "n"])
        #expect(LoggerPlugin.secretVariables(in: #"{"query": "f(password: [\"x]\", $b], note: \"a \\\" ]\", user: $u)"}"#, names: names) == ["b"])
        // Past a comment with a quote in it, and a block string holding one.
        let commented = #"{"query": "mutation($p: String!) { # a 5\" screen\n login(password: $p) }", "variables": {"p": "s"}}"#
        #expect(LoggerPlugin.secretVariables(in: commented, names: names) == ["p"])
        let block = #"{"query": "mutation($p: String!) { f(note: \"\"\"a 5\" screen\"\"\") login(password: $p) }"}"#
        #expect(LoggerPlugin.secretVariables(in: block, names: names) == ["p"])
        // One pass: 1 MiB of variables in a secret's list, and of commas and dollars (a walk back
        // from each `$`, as before, took 37 s over four times these in a debug build; the pass,
        // under 2 s).
        let list = #"{"query": "f(password: ["# + String(repeating: "$a, ", count: 1 << 18) + #"])"}"#
        #expect(LoggerPlugin.secretVariables(in: list, names: names) == ["a"])
        let commas = #"{"query": "f(password: ["# + String(repeating: "$,", count: 1 << 19) + #"])"}"#
        #expect(LoggerPlugin.secretVariables(in: commas, names: names).isEmpty)
    }
}
