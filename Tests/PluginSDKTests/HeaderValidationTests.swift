import PluginSDK
import Testing

@Suite("PluginSDK validation")
struct HeaderValidationTests {
    @Test(arguments: ["X-Token", "accept", "x_y.z~1", "!#$%&'*+-.^_`|~"])
    func tokensAreValidNames(name: String) throws {
        try HeaderValidation.check(name: name, value: "v")
    }

    @Test func everyASCIIByteIsATokenByteExactlyWhenRFC9110SaysSo() {
        // tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8(0)..<128 {
            let name = "X" + String(decoding: [byte], as: UTF8.self) + "Y"
            #expect(HeaderValidation.isValidName(name) == tchar.contains(byte), "byte \(byte)")
        }
        for byte in UInt8(128)...255 {
            #expect(!HeaderValidation.isValidName(String(decoding: [0x58, byte], as: UTF8.self)), "byte \(byte)")
        }
    }

    @Test(arguments: ["", "X Token", "X:Token", "Ä", "X\r\nInjected"])
    func nonTokensAreRefused(name: String) {
        #expect(throws: InterceptorError.invalidHeaderName(name)) { try HeaderValidation.check(name: name, value: "v") }
    }

    @Test(arguments: ["a\r\nX-Evil: 1", "a\nb", "a\rb", "a\u{0}b"])
    func crlfAndNulValuesAreRefused(value: String) {
        #expect(throws: InterceptorError.invalidHeaderValue(name: "X-A")) { try HeaderValidation.check(name: "X-A", value: value) }
    }

    /// The word-at-a-time check against the byte-by-byte definition: every length up to 40 and
    /// every position of a refused byte, and bytes that only look like them (same low bits, or
    /// next to them), in a value that is otherwise plain or multi-byte UTF-8.
    @Test func valuesAreRefusedExactlyWhenABytePositionHoldsCRLFOrNUL() {
        func naive(_ bytes: [UInt8]) -> Bool { !bytes.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 } }
        #expect(HeaderValidation.isFree(UnsafeRawBufferPointer(start: nil, count: 0)))
        for filler in [Array("abcdefghijklmnopqrstuvwxyz0123456789ABCD".utf8), Array("ÄÖÜäöüßéèêëïîçñ€€€".utf8)] {
            for length in 0...40 {
                let base = Array(filler.prefix(length))
                #expect(HeaderValidation.isValidValue(String(decoding: base, as: UTF8.self)) == naive(base))
                for position in 0..<base.count {
                    for byte: UInt8 in [0x00, 0x0A, 0x0D, 0x01, 0x0B, 0x0C, 0x0E, 0x8A, 0x8D, 0x80, 0xFF, 0x7F] {
                        var bytes = base
                        bytes[position] = byte
                        let refused = !naive(bytes)
                        #expect(bytes.withUnsafeBytes { HeaderValidation.isFree($0) } == !refused, "length \(length), byte \(byte) at \(position)")
                    }
                }
            }
        }
    }

    @Test func errorsDescribeTheProblem() {
        #expect(
            InterceptorError.invalidHeaderValue(name: "X-A").description
                == "invalid value for header \"X-A\": CR, LF and NUL are not allowed")
        #expect(InterceptorError.invalidURL("nope").description == "invalid URL \"nope\": must be an absolute http or https URL")
        #expect(InterceptorError.invalidMethod("GE T").description == "invalid method \"GE T\": must be a token")
    }

    @Test func absoluteHTTPURLs() {
        #expect(URLParts.isAbsoluteHTTP("http://127.0.0.1:8080/x?y=1"))
        #expect(URLParts.isAbsoluteHTTP("HTTPS://example.com"))
        #expect(!URLParts.isAbsoluteHTTP("ftp://example.com"))
        #expect(!URLParts.isAbsoluteHTTP("/relative"))
        #expect(!URLParts.isAbsoluteHTTP("http://"))
    }

    @Test func defaultPortsFollowTheScheme() {
        #expect(URLParts.defaultPort(forScheme: "https") == 443)
        #expect(URLParts.defaultPort(forScheme: "HTTPS") == 443)
        #expect(URLParts.defaultPort(forScheme: "http") == 80)
        #expect(URLParts.defaultPort(forScheme: nil) == 80)
    }

    @Test func queryItemsAreDecodedInOrder() {
        let items = URLParts("http://h/p?b=2&a=x%20y&c").queryItems
        #expect(items.map(\.name) == ["b", "a", "c"])
        #expect(items.map(\.value) == ["2", "x y", ""])
    }

    /// ASCII letters compare without case, nothing else does: not `[` and `{` (which differ by the
    /// same bit), not `@` and `` ` ``, not non-ASCII letters; short (inline) and long strings alike.
    @Test func namesAreEqualIgnoringASCIICaseOnly() {
        let equal = [("Content-Type", "content-type"), ("", ""), ("X-REQUEST-IDENTIFIER-LONG", "x-request-identifier-long"), ("a1-_.", "A1-_.")]
        let different = [
            ("X-A", "X-B"), ("a", "ab"), ("[", "{"), ("@", "`"), ("\u{C4}", "\u{E4}"), ("X-Request-Identifier-Lonf", "x-request-identifier-long"),
        ]
        for (a, b) in equal { #expect(HTTPHeader.namesEqual(a, b) && HTTPHeader.namesEqual(b, a), "\(a) \(b)") }
        for (a, b) in different { #expect(!HTTPHeader.namesEqual(a, b) && !HTTPHeader.namesEqual(b, a), "\(a) \(b)") }
    }

    @Test(arguments: [0, 40])
    func foldingJoinsRepeatedNamesUnderTheFirstSpelling(padding: Int) {
        // Short lists compare names with the earlier ones; long ones (over 32) index them.
        let filler = (0..<padding).map { HTTPHeader(name: "X-Filler-\($0)", value: "\($0)") }
        let fields =
            [HTTPHeader(name: "Accept", value: "a"), HTTPHeader(name: "X-Id", value: "1")] + filler
            + [HTTPHeader(name: "accept", value: "b"), HTTPHeader(name: "ACCEPT", value: "c"), HTTPHeader(name: "x-id", value: "2")]
        var expected = ["Accept": "a, b, c", "X-Id": "1, 2"]
        for header in filler { expected[header.name] = header.value }
        #expect(fields.folded() == expected)
    }

    @Test(arguments: [0, 29, 40])
    func aListThatRepeatsNoNameIsItsOwnFolding(padding: Int) {
        // Up to 32 fields the list itself is returned; past that it is folded as before; the
        // fields and their order are the same either way.
        let filler = (0..<padding).map { HTTPHeader(name: "X-Filler-\($0)", value: "\($0)") }
        let fields =
            [HTTPHeader(name: "Accept", value: "a"), HTTPHeader(name: "X-Id", value: "1"), HTTPHeader(name: "Accept-Language", value: "en")] + filler
        #expect(fields.foldedFields().map { [$0.name, $0.value] } == fields.map { [$0.name, $0.value] })
        // One repeated name, last: folded into the first.
        let repeated = fields + [HTTPHeader(name: "x-ID", value: "2")]
        #expect(
            repeated.foldedFields().map { [$0.name, $0.value] }
                == ([fields[0], HTTPHeader(name: "X-Id", value: "1, 2")] + fields.dropFirst(2)).map { [$0.name, $0.value] })
    }

    @Test(arguments: [0, 40])
    func foldingFoldsASCIICaseOnly(padding: Int) {
        // Not validated names (an app's own dictionary may hold them): a non-ASCII letter of
        // another case makes another name, as `namesEqual` says, in short and long lists alike.
        let filler = (0..<padding).map { HTTPHeader(name: "X-Filler-\($0)", value: "\($0)") }
        let fields = [HTTPHeader(name: "\u{C4}-X", value: "a")] + filler + [HTTPHeader(name: "\u{E4}-x", value: "b")]
        let folded = fields.folded()
        #expect(folded["\u{C4}-X"] == "a")
        #expect(folded["\u{E4}-x"] == "b")
        #expect(folded.count == 2 + padding)
    }

    /// Names that differ as bytes but that Swift's `String` holds equal (the Kelvin sign
    /// U+212A is canonically `K`) fold into one value, never a trap on a duplicate key.
    @Test func canonicallyEqualNamesFoldWithoutATrap() {
        let folded = [HTTPHeader(name: "X-\u{212A}ey", value: "1"), HTTPHeader(name: "X-Key", value: "2")].folded()
        #expect(folded.count == 1)
        #expect(folded.values.first == "1, 2")
    }
}
