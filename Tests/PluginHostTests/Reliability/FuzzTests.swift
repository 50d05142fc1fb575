import CPluginABI
import Foundation
import PluginSDK
import Testing

@testable import LoggerPlugin
@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A seeded, deterministic mutation fuzzer (SplitMix64): the same inputs every run.
struct Mutator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(1, n))) }

    static let tokens: [[UInt8]] = [
        "{", "}", "[", "]", "\"", ",", ":", "null", "true", "false", "0", "-1", "1e309", "1.5",
        "\\u0000", "\\\"", "\u{0}", "\r\n", "..", "/", "../../x", "\"name\"", "\"plugins\"",
        "\"config\"", "\"sha256\"", "\"library\"", "\u{00E9}", "\u{1F600}", String(repeating: "[", count: 64),
        String(repeating: "a", count: 300),
    ].map { Array($0.utf8) }

    /// One to four random edits of `seed`, sometimes spliced with `other`.
    mutating func mutate(_ seed: [UInt8], other: [UInt8]) -> [UInt8] {
        var bytes = seed
        for _ in 0...below(3) {
            let position = below(bytes.count + 1)
            switch below(7) {
            case 0 where !bytes.isEmpty: bytes[min(position, bytes.count - 1)] ^= UInt8(truncatingIfNeeded: 1 << below(8))
            case 1: bytes.insert(contentsOf: Self.tokens[below(Self.tokens.count)], at: position)
            case 2 where !bytes.isEmpty: bytes.removeSubrange(position..<min(bytes.count, position + 1 + below(16)))
            case 3 where !bytes.isEmpty:
                let start = below(bytes.count)
                let length = 1 + below(min(32, bytes.count - start))
                bytes.insert(contentsOf: bytes[start..<start + length], at: position)
            case 4: bytes.insert(UInt8(truncatingIfNeeded: next()), at: position)
            case 5 where !other.isEmpty: bytes = Array(bytes.prefix(position)) + Array(other.suffix(from: below(other.count)))
            default: bytes = Array(bytes.prefix(position))
            }
        }
        return bytes
    }
}

/// No input crashes the parsers or the ABI's header and URL handling; every refusal is a typed error.
@Suite("Fuzzing")
struct FuzzTests {
    static var scale: Int { Int(ProcessInfo.processInfo.environment["PLUGINHOST_FUZZ_SCALE"] ?? "") ?? 1 }

    static let manifests: [[UInt8]] = [
        #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}, {"name": "logger", "config": {"level": "basic"}}]}"#,
        #"{"comment": "x", "pluginDirectories": ["a", "/b"], "plugins": [{"name": "cache", "enabled": false, "sha256": "\#(String(repeating: "ab", count: 32))"}]}"#,
        #"{"pluginDirectories": [], "plugins": []}"#,
    ].map { Array($0.utf8) }

    static let pluginJSONs: [[UInt8]] = [
        #"{"name": "x", "version": "1.0.0", "abi": {"major": 1, "minor": 0}, "library": "libx.so", "sha256": "\#(String(repeating: "0", count: 64))", "defaultConfig": {"a": [1, {"b": null}]}}"#,
        #"{"name": "x", "version": "2", "abi": {"major": 1, "minor": 9}, "library": "libx.so", "sha256": "\#(String(repeating: "f", count: 64))", "summary": "s", "license": "MIT"}"#,
    ].map { Array($0.utf8) }

    @Test func manifestParser() async throws {
        let failures = try await offThePool { try Self.manifestParserBody() }
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(3))")
    }

    static func manifestParserBody() throws -> [String] {
        var failures: [String] = []
        func check(_ ok: Bool, _ message: @autoclosure () -> String = "") { if !ok { failures.append(message()) } }
        var fuzz = Mutator(seed: 0x5EED_0001)
        let count = 40_000 * Self.scale
        var refused = 0
        for index in 0..<count {
            let input = fuzz.mutate(Self.manifests[index % Self.manifests.count], other: Self.manifests[(index + 1) % Self.manifests.count])
            let data = Data(input)
            let problems = PluginManifest.problems(in: data, file: "/fuzz/manifest.json")
            do {
                _ = try PluginManifest.parse(data, file: "/fuzz/manifest.json")
                check(problems.isEmpty, "parse accepted what problems(in:) refused: \(problems)")
            } catch {
                refused += 1
                check(!problems.isEmpty)
                check(error.file == "/fuzz/manifest.json")
                check(!error.reason.isEmpty)
            }
        }
        check(refused > count / 10)
        print("fuzz: manifest parser, \(count) inputs, \(refused) refused with typed errors")
        return failures
    }

    @Test func pluginJSONParser() async throws {
        let failures = try await offThePool { try Self.pluginJSONParserBody() }
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(3))")
    }

    static func pluginJSONParserBody() throws -> [String] {
        var failures: [String] = []
        func check(_ ok: Bool, _ message: @autoclosure () -> String = "") { if !ok { failures.append(message()) } }
        var fuzz = Mutator(seed: 0x5EED_0002)
        let count = 30_000 * Self.scale
        var refused = 0
        for index in 0..<count {
            let input = fuzz.mutate(Self.pluginJSONs[index % 2], other: Self.pluginJSONs[(index + 1) % 2])
            do {
                let bundle = try PluginBundle.parse(Data(input), file: "/fuzz/x.plugin/plugin.json", directory: "/fuzz/x.plugin", name: "x")
                check(bundle.libraryPath.hasPrefix("/fuzz/x.plugin/"))
                check(!bundle.libraryPath.dropFirst("/fuzz/x.plugin/".count).contains("/"))
            } catch {
                refused += 1
                check(error.file.hasPrefix("/fuzz/x.plugin/"))
            }
        }
        check(refused > count / 10)
        print("fuzz: plugin.json parser, \(count) inputs, \(refused) refused with typed errors")
        return failures
    }

    @Test func headersAndURLsAcrossTheABI() async throws {
        let failures = try await offThePool { try Self.headersAndURLsAcrossTheABIBody() }
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(3))")
    }

    /// Bodies a server may send, as the logger's redaction scans them (JSON with secrets inside
    /// string values, GraphQL arguments), mutated and cut anywhere: nothing traps or hangs, a
    /// body comes out unchanged or with a `<redacted>` in it, and a secret of an unmutated seed
    /// never shows.
    @Test func loggerRedactionOfBodies() async throws {
        let failures = try await offThePool { Self.loggerRedactionBody() }
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(3))")
    }

    static func loggerRedactionBody() -> [String] {
        var failures: [String] = []
        func check(_ ok: Bool, _ message: @autoclosure () -> String = "") { if !ok { failures.append(message()) } }
        var fuzz = Mutator(seed: 0x5EED_0005)
        let names: Set<String> = ["password", "token", "secret"]
        let seeds: [[UInt8]] = [
            #"{"query": "mutation($pw: String!) { login(user: \"ann\", password: $pw, token: \"\"\"t-1\"\"\") { id } }", "variables": {"pw": "v-1"}}"#,
            #"{"payload": "{\"password\": \"p-1\", \"nested\": \"{\\\"secret\\\": [\\\"s-1\\\"]}\"}", "n": [1, true, null, "a:b"]}"#,
            #"[{"note": "token: 'q-1', next: x", "password": {"old": "o-1", "new": ["n-1"]}}, "\u00e9:\u0000"]"#,
            #"{"error": "token: Bearer b-1 expired; secret: Digest username=\"u\", response=\"d-1\"", "q": "f(password: [$a]) $3c"}"#,
        ].map { Array($0.utf8) }
        let count = 20_000 * Self.scale
        var changed = 0
        for index in 0..<count {
            let input = index < seeds.count ? seeds[index] : fuzz.mutate(seeds[index % seeds.count], other: seeds[(index + 1) % seeds.count])
            let text = String(decoding: input, as: UTF8.self)
            var found: [String] = []
            // As the logger reads a JSON body: a variable passed as a secret is one by its name too.
            let bodyNames = names.union(LoggerPlugin.secretVariables(in: text, names: names))
            let shown = LoggerPlugin.redactJSONMembers(in: text, names: bodyNames, found: &found)
            check(shown == text || shown.contains("<redacted>"), "changed without a redaction: \(text.debugDescription) → \(shown.debugDescription)")
            if shown != text { changed += 1 }
            if index < seeds.count {
                for secret in ["t-1", "v-1", "p-1", "s-1", "q-1", "o-1", "n-1", "b-1", "d-1"] where text.contains(secret) {
                    check(!shown.contains(secret), "seed \(index) shows \(secret): \(shown)")
                }
            }
            let arguments = LoggerPlugin.redactArguments(in: text, names: names, found: &found)
            check(arguments == text || arguments.contains("<redacted>"), "arguments changed without a redaction: \(text.debugDescription)")
        }
        check(changed > count / 2)
        print("fuzz: logger redaction, \(count) bodies, \(changed) with a redaction")
        return failures
    }

    @Test func batchedHeaderEditsAcrossTheABI() async throws {
        let failures = try await offThePool { Self.batchedHeaderEditsBody() }
        #expect(failures.isEmpty, "\(failures.count) failures, first: \(failures.prefix(3))")
    }

    /// ABI 1.1 `request_edit_headers` with fuzzed names, values and ops: all or none, the index of
    /// the first bad edit, never an injected header; and `request_headers` returns what is there.
    static func batchedHeaderEditsBody() -> [String] {
        var failures: [String] = []
        func check(_ ok: Bool, _ message: @autoclosure () -> String = "") { if !ok { failures.append(message()) } }
        var fuzz = Mutator(seed: 0x5EED_0004)
        let api = HostTable.template
        let count = 20_000 * Self.scale
        let seeds: [[UInt8]] = ["X-Token", "Authorization", "value", "Bearer abc", "a\r\nX-Evil: 1"].map { Array($0.utf8) }
        var accepted = 0
        for index in 0..<count {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:9/start")!)
            request.setValue("kept", forHTTPHeaderField: "X-Before")
            let state = RequestState(request)
            let handle = state.handle
            handle.reset(mayRespond: false)
            let pointer = OpaquePointer(Unmanaged.passUnretained(handle).toOpaque())
            let before = state.headers
            let size = index % 97 == 0 ? Int(PH_MAX_HEADER_EDITS) + 1 : 1 + index % 4
            let texts = (0..<size).map { i in
                (fuzz.mutate(seeds[(index + i) % 2], other: seeds[2 + (index + i) % 3]), fuzz.mutate(seeds[2 + i % 3], other: seeds[i % 2]))
            }
            let ops = (0..<size).map { _ in Int32(truncatingIfNeeded: fuzz.next() % 4) }  // 3 is not an op
            var badIndex = -1
            let status: Int32 = {
                var keep: [[UInt8]] = []
                var edits: [ph_header_edit] = []
                for (i, text) in texts.enumerated() {
                    keep.append(text.0)
                    keep.append(text.1)
                    edits.append(ph_header_edit(op: ops[i], name: ph_bytes(), value: ph_bytes()))
                }
                return withExtendedLifetime(keep) {
                    for i in edits.indices {
                        keep[2 * i].withUnsafeBufferPointer { edits[i].name = ph_bytes(data: $0.baseAddress, len: $0.count) }
                        keep[2 * i + 1].withUnsafeBufferPointer { edits[i].value = ph_bytes(data: $0.baseAddress, len: $0.count) }
                    }
                    return api.request_edit_headers(pointer, &edits, edits.count, &badIndex)
                }
            }()
            check(status == PH_OK || status == PH_INVALID)
            if status == PH_OK {
                accepted += 1
                check(size <= Int(PH_MAX_HEADER_EDITS))
            } else {
                // None applied, and the index names the first bad edit (or the count).
                check(state.headers == before, "a refused batch changed the headers")
                if size > Int(PH_MAX_HEADER_EDITS) {
                    check(badIndex == Int(PH_MAX_HEADER_EDITS))
                } else {
                    check(badIndex >= 0 && badIndex < size, "bad index \(badIndex) of \(size)")
                    func valid(_ i: Int) -> Bool {
                        (0...2).contains(ops[i])
                            && HeaderValidation.isValidName(String(decoding: texts[i].0, as: UTF8.self))
                            && (ops[i] == PH_EDIT_REMOVE || HeaderValidation.isValidValue(String(decoding: texts[i].1, as: UTF8.self)))
                    }
                    check(!valid(badIndex), "edit \(badIndex) was refused but is valid")
                    check((0..<badIndex).allSatisfy(valid), "edit \(badIndex) is not the first bad one")
                }
            }
            for header in state.headers {
                check(HeaderValidation.isValidName(header.name) && HeaderValidation.isValidValue(header.value))
            }
            let total = api.request_headers(pointer, nil, nil, 0)
            check(total == state.headers.count)
            var names = [ph_bytes](repeating: ph_bytes(), count: total)
            var values = [ph_bytes](repeating: ph_bytes(), count: total)
            check(api.request_headers(pointer, &names, &values, total) == total)
            check(zip(names, state.headers).allSatisfy { CBytes.string($0.0) == $0.1.name })
            _ = state.makeURLRequest()
        }
        check(accepted > 0 && accepted < count)
        print("fuzz: ABI batched header edits, \(count) batches, \(count - accepted) refused whole")
        return failures
    }

    static func headersAndURLsAcrossTheABIBody() throws -> [String] {
        var failures: [String] = []
        func check(_ ok: Bool, _ message: @autoclosure () -> String = "") { if !ok { failures.append(message()) } }
        var fuzz = Mutator(seed: 0x5EED_0003)
        let api = HostTable.template
        let count = 40_000 * Self.scale
        let seeds: [[UInt8]] = ["X-Token", "Authorization", "http://127.0.0.1:8080/a?b=c", "https://example.com/", "value with spaces"].map {
            Array($0.utf8)
        }
        var accepted = 0
        for index in 0..<count {
            let state = RequestState(URLRequest(url: URL(string: "http://127.0.0.1:9/start")!))
            let handle = state.handle
            handle.reset(mayRespond: true)
            let pointer = OpaquePointer(Unmanaged.passUnretained(handle).toOpaque())
            let name = fuzz.mutate(seeds[index % 2], other: seeds[2 + index % 3])
            let value = fuzz.mutate(seeds[2 + index % 3], other: seeds[index % 2])
            let status: Int32 = name.withUnsafeBufferPointer { n in
                value.withUnsafeBufferPointer { v in
                    let nameBytes = ph_bytes(data: n.baseAddress, len: n.count)
                    let valueBytes = ph_bytes(data: v.baseAddress, len: v.count)
                    switch index % 4 {
                    case 0: return api.request_set_header(pointer, nameBytes, valueBytes)
                    case 1: return api.request_add_header(pointer, nameBytes, valueBytes)
                    case 2: return api.request_set_url(pointer, valueBytes)
                    default:
                        var names = [nameBytes]
                        var values = [valueBytes]
                        return api.request_respond(pointer, Int32(truncatingIfNeeded: fuzz.next() % 1200), &names, &values, 1, valueBytes)
                    }
                }
            }
            check(status == PH_OK || status == PH_INVALID)
            if status == PH_OK { accepted += 1 }
            // Whatever was accepted is well-formed: no header injection, only absolute http(s) URLs.
            for header in state.headers {
                check(HeaderValidation.isValidName(header.name) && HeaderValidation.isValidValue(header.value))
            }
            check(URLParts.isAbsoluteHTTP(state.urlString))
            if let response = handle.answer {
                check((100...999).contains(response.statusCode))
                check(response.headers.allSatisfy { HeaderValidation.isValidName($0.name) && HeaderValidation.isValidValue($0.value) })
            }
            _ = state.makeURLRequest()
        }
        check(accepted > 0 && accepted < count)
        print("fuzz: ABI header/URL setters, \(count) inputs, \(count - accepted) refused")
        return failures
    }
}
