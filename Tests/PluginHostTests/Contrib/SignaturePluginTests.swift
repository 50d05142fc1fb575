import Foundation
import PluginHost
import PluginSDK
import Testing

@testable import SignaturePlugin

#if canImport(Glibc)
import Glibc
#endif

/// The fixture server recomputes every signature with Python's hmac and hashlib.
@Suite("signature plugin (loaded from its bundle)")
struct SignaturePluginTests {
    static let secret = "fixture-signing-secret"

    func verify(
        _ provider: Provider<Bin>, _ path: String, method: HTTPMethod = .get, task: RequestTask = .requestPlain,
        headers: [String: String]? = nil
    ) async throws -> JSONValue {
        try await provider.request(try Bin(path, method: method, task: task, headers: headers)).filterSuccessfulStatusCodes().mapJSON().value
    }

    /// The fixture's verdict on `pathAndQuery` (the query as written) sent through the signature
    /// plugin configured with `config`.
    func verdict(_ config: [String: Any], _ pathAndQuery: String) async throws -> JSONValue {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", config)])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        return try await provider.get(try TestServer.url().absoluteString + "/" + pathAndQuery).filterSuccessfulStatusCodes().mapJSON().value
    }

    @Test func hmacInHeadersVerifiesIndependently() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["keyId": "key-7"])])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        let result = try await verify(provider, "fixture/verify-hmac")
        #expect(result["valid"] == .bool(true))
        #expect(result["keyId"]?.stringValue == "key-7")
        let nonce = try #require(result["nonce"]?.stringValue)
        #expect(nonce.count == 32 && nonce.allSatisfy { "0123456789abcdef".contains($0) })
        let timestamp = try #require(result["timestamp"]?.stringValue.flatMap(Double.init))
        #expect(abs(timestamp - Date().timeIntervalSince1970) < 60)
    }

    /// The path is signed as it is sent: libcurl removes `.` and `..` segments (RFC 3986
    /// §5.2.4) from the path it sends, so the canonical path does too. The path was signed as
    /// written, and the server, which got the other one, refused the signature.
    @Test(arguments: TransportKind.allCases) func aPathWithDotSegmentsIsSignedAsSent(_ kind: TransportKind) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", [:])], transport: kind.make())
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        for path in ["fixture/./verify-hmac", "fixture/extra/../verify-hmac", "fixture/a/b/../../verify-hmac"] {
            let result = try await verify(provider, path)
            #expect(result["valid"] == .bool(true), "\(path)")
            let query = try await verify(
                provider, path, task: .requestParameters(parameters: ["page": 2, "q": "a b"], encoding: URLEncoding.queryString))
            #expect(query["valid"] == .bool(true), "\(path) with a query")
        }
        #expect(URLParts.removingDotSegments("/a/b/c/./../../g") == "/a/g")
        #expect(URLParts.removingDotSegments("/mid/content=5/../6") == "/mid/6")
        #expect(URLParts.removingDotSegments("/a/./") == "/a/")
        #expect(URLParts.removingDotSegments("/a/..") == "/")
        #expect(URLParts.removingDotSegments("/../a") == "/a")
        #expect(URLParts.removingDotSegments("/a/.b/..c/") == "/a/.b/..c/")
    }

    @Test func hmacCoversQueryBodyAndEncodedPaths() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", [:])])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        let parameters: Parameters = ["b": "two words", "a": ["z", "y"], "emoji": "é✓", "sym": "a+b=c&d/e~"]
        let result = try await verify(
            provider, "fixture/verify-hmac", method: .post,
            task: .requestCompositeParameters(bodyParameters: ["x": 1], bodyEncoding: JSONEncoding.default, urlParameters: parameters))
        #expect(result["valid"] == .bool(true), "\(result)")
        let canonical = try #require(result["canonical"]?.stringValue).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(canonical[0] == "POST")
        #expect(canonical[2] == "a%5B%5D=y&a%5B%5D=z&b=two%20words&emoji=%C3%A9%E2%9C%93&sym=a%2Bb%3Dc%26d%2Fe~")
        #expect(canonical[5] == SHA256.hex(SHA256.hash(Array(#"{"x":1}"#.utf8))))
    }

    /// Query escapes that are no UTF-8 are signed as the bytes they stand for (`%FF`, not the
    /// `%EF%BF%BD` of a replacement character): `a=%FF` and `a=%FE` were signed alike, and a
    /// verifier working on bytes refused both.
    @Test func queryBytesThatAreNoUTF8AreSignedAsTheyAre() async throws {
        let result = try await verdict([:], "fixture/verify-hmac?b=%FE&a=%ff&c=%C3%A9%7e+")
        #expect(result["valid"] == .bool(true), "\(result)")
        #expect(result["canonical"]?.stringValue?.split(separator: "\n", omittingEmptySubsequences: false)[2] == "a=%FF&b=%FE&c=%C3%A9~%20")
        let items = URLParts("http://h/p?a=%FF&a=%FE&x%2Dy&=%41").escapedQueryItems
        #expect(items.map { "\($0.name)=\($0.value)" } == ["a=%FF", "a=%FE", "x-y=", "=A"])
    }

    /// A literal `+` in the query is signed as the space a server reads it as, and `%2B` as a
    /// plus: both were signed `%2B`, so a `+` put for a `%2B` on the way (`phone=%2B1555` read as
    /// `" 1555"`) kept a valid signature.
    @Test func aPlusInTheQueryIsSignedAsTheSpaceServersRead() async throws {
        let result = try await verdict([:], "fixture/verify-hmac?q=a+b&r=a%2Bb&s=a%20b")
        #expect(result["valid"] == .bool(true), "\(result)")
        #expect(result["canonical"]?.stringValue?.split(separator: "\n", omittingEmptySubsequences: false)[2] == "q=a%20b&r=a%2Bb&s=a%20b")
        let canonical = { (url: String) -> String in
            var bytes: [UInt8] = []
            SignaturePlugin.writeCanonical(method: "GET", url: url, body: nil, timestamp: "1", nonce: "n", excluding: []) { bytes += $0 }
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(canonical("http://h/p?phone=+1555") != canonical("http://h/p?phone=%2B1555"))
        #expect(canonical("http://h/p?phone=+1555") == canonical("http://h/p?phone=%201555"))
        #expect(URLParts("http://h/p?a+b=c+d").escapedQueryItems.map { "\($0.name)=\($0.value)" } == ["a%2Bb=c%2Bd"])
    }

    @Test func hmacInTheQuery() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["placement": "query"])])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        let result = try await verify(
            provider, "fixture/verify-hmac", task: .requestParameters(parameters: ["page": 2], encoding: URLEncoding.default))
        #expect(result["valid"] == .bool(true), "\(result)")
        #expect(result["inQuery"] == .bool(true))
        #expect(result["canonical"]?.stringValue?.split(separator: "\n", omittingEmptySubsequences: false)[2] == "page=2")
    }

    /// With `placement: query`, a request with its own `x-nonce` (or another name the placement
    /// adds) is refused by name, as md5-sorted refuses its own names: it went out twice.
    @Test func hmacInTheQueryRefusesARequestWithItsOwnNames() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["placement": "query"])])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        let result = await provider.request(
            try Bin("fixture/verify-hmac", task: .requestParameters(parameters: ["x-nonce": "mine", "page": 2], encoding: URLEncoding.default))
        ).result
        guard case .failure(.interceptor("signature", .prepare, let message)) = result else {
            Issue.record("not refused: \(result)")
            return
        }
        #expect(
            message
                == "signature: the request has its own parameter \"x-nonce\" in its query, a name placement query adds "
                + "(x-signature, x-timestamp, x-nonce, x-key-id): rename it, or place the signature in headers")
    }

    @Test func md5SortedOverTheQuery() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["scheme": "md5-sorted"])])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        let result = try await verify(
            provider, "fixture/verify-md5", task: .requestParameters(parameters: ["uid": 42, "name": "Zoë"], encoding: URLEncoding.default))
        #expect(result["valid"] == .bool(true), "\(result)")
        #expect(result["fromBody"] == .bool(false))
        #expect(result["sign"]?.stringValue?.count == 32)
    }

    /// A query is read as the form its servers read it (`+` a space, as PHP and `parse_qsl` do):
    /// `q=a+b` was signed as `a+b` and refused.
    @Test func md5SortedReadsAPlusInTheQueryAsASpace() async throws {
        let result = try await verdict(["scheme": "md5-sorted"], "fixture/verify-md5?q=a+b&r=c%2Bd&&empty=")
        #expect(result["valid"] == .bool(true), "\(result)")
    }

    /// md5-sorted reads names and values as bytes, as its PHP-style servers hash them: a value
    /// that is no UTF-8 (`%FF`, a GBK form's `%D6%D0`) is signed as its bytes (it was signed as
    /// its escaped text, `+` and all), and names are sorted by their bytes, not as Unicode's
    /// equivalents (a decomposed `é` sorted before `f`, and the server refused the signature).
    @Test(arguments: ["q=a+%FF", "name=%D6%D0&city=x", "%65%CC%81=1&f=2", "%C3%A9=1&e%CC%81=2"])
    func md5SortedSignsBytes(_ query: String) async throws {
        let result = try await verdict(["scheme": "md5-sorted"], "fixture/verify-md5?" + query)
        #expect(result["valid"] == .bool(true), "\(query): \(result)")
        let pairs = SignaturePlugin.formPairs(ArraySlice("q=a+%FF&%zz=%4".utf8))
        #expect(pairs.map(\.name) == [Array("q".utf8), Array("%zz".utf8)])
        #expect(pairs.map(\.value) == [[0x61, 0x20, 0xFF], Array("%4".utf8)])
    }

    /// Signed in headers, a request may carry `x-key-id` (or another name query placement uses) as
    /// a parameter of its own, which is signed: the fixture took it for query placement.
    @Test func hmacInHeadersSignsAnXNameOfTheQuery() async throws {
        let result = try await verdict([:], "fixture/verify-hmac?x-key-id=tenant")
        #expect(result["valid"] == .bool(true), "\(result)")
        #expect(result["inQuery"] == .bool(false))
        #expect(result["canonical"]?.stringValue?.split(separator: "\n", omittingEmptySubsequences: false)[2] == "x-key-id=tenant")
    }

    /// A request with its own `t`, `nonce` or `sign` is refused by name: the scheme adds them, and
    /// the request went with two of each, signed over one (the server refused the signature).
    @Test func md5SortedRefusesARequestWithItsOwnTNonceOrSign() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["scheme": "md5-sorted"])])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        func refusal(_ result: Result<Response, NetworkError>) -> String? {
            guard case .failure(.interceptor("signature", .prepare, let message)) = result else { return "got \(result)" }
            return message
        }
        let inQuery = await provider.request(
            try Bin("fixture/verify-md5", task: .requestParameters(parameters: ["t": "list", "uid": 1], encoding: URLEncoding.default))
        ).result
        #expect(
            refusal(inQuery)
                == "signature: the request has its own parameter \"t\" in its query, a name md5-sorted adds (t, nonce, sign): "
                + "rename it, or sign with hmac-sha256")
        let inBody = await provider.request(
            try Bin("fixture/verify-md5", method: .post, task: .requestParameters(parameters: ["sign": "x"], encoding: URLEncoding.default))
        ).result
        #expect(
            refusal(inBody)
                == "signature: the request has its own parameter \"sign\" in its form body, a name md5-sorted adds (t, nonce, sign): "
                + "rename it, or sign with hmac-sha256")
    }

    @Test func md5SortedOverAFormBody() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["scheme": "md5-sorted"])])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        let result = try await verify(
            provider, "fixture/verify-md5", method: .post,
            task: .requestParameters(parameters: ["uid": 42, "city": "São Paulo"], encoding: URLEncoding.default))
        #expect(result["valid"] == .bool(true), "\(result)")
        #expect(result["fromBody"] == .bool(true))
    }

    /// A `POST` body without a `Content-Type` goes as a form (URL loading labels it so): the
    /// plugin sees the label the server sees and signs the body's parameters (it signed the empty
    /// query, and the server found no `sign` in the form it read).
    @Test func md5SortedSignsAnUnlabelledPostBodyAsTheFormItGoesAs() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["scheme": "md5-sorted"])])
        provider.services.setValue(Self.secret, forKey: "signing_secret")
        let result = try await verify(provider, "fixture/verify-md5", method: .post, task: .requestData(Data("uid=42".utf8)))
        #expect(result["valid"] == .bool(true), "\(result)")
        #expect(result["fromBody"] == .bool(true))
    }

    @Test func secretFromEnvironmentOrFile() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let variable = "PLUGINHOST_TEST_SECRET_" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        setenv(variable, Self.secret, 1)
        defer { unsetenv(variable) }
        let fromEnv = try f.provider([("signature", ["secretEnv": variable])])
        #expect(try await verify(fromEnv, "fixture/verify-hmac")["valid"] == .bool(true))
        try (Self.secret + "\n").write(toFile: f.root + "/secret", atomically: true, encoding: .utf8)
        chmod(f.root + "/secret", 0o600)
        let fromFile = try f.provider([("signature", ["secretFile": f.root + "/secret"])])
        #expect(try await verify(fromFile, "fixture/verify-hmac")["valid"] == .bool(true))
        // A variable set from a file (`SECRET=$(cat f)` keeps no newline, an orchestrator's
        // secret often does) is read without white space at its ends, as the file is.
        setenv(variable, Self.secret + "\n", 1)
        #expect(try await verify(fromEnv, "fixture/verify-hmac")["valid"] == .bool(true))
    }

    /// A secret file that is no UTF-8 text (a binary key) is its bytes as they are: read as text,
    /// `FF` and `FE` both became U+FFFD (two keys were one), and a key ending in a byte 0A lost it.
    @Test func aBinarySecretFileIsItsBytes() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for bytes: [UInt8] in [[0xFF, 0x01, 0x20, 0x0A], [0xFE, 0x01, 0x20, 0x0A], Array(" text\n".utf8)] {
            let path = f.root + "/key"
            unlink(path)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            chmod(path, 0o600)
            #expect(try SignaturePlugin.readSecret(path) == (bytes.first == 0x20 ? Array("text".utf8) : bytes))
        }
    }

    /// A secret file must be the current user's regular file, closed to group and others, of at
    /// most 64 KiB: one others may read was used as it was, a FIFO blocked the request until
    /// something wrote to it, and `/dev/zero` was read on for good.
    @Test func anUnsafeSecretFileIsRefusedSayingWhy() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let file = f.root + "/secret"
        try Self.secret.write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o644)
        let fifo = f.root + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let large = f.root + "/large"
        try String(repeating: "s", count: 65 << 10).write(toFile: large, atomically: true, encoding: .utf8)
        chmod(large, 0o600)
        let link = f.root + "/link"
        chmod(file, 0o600)
        #expect(symlink(file, link) == 0)
        chmod(file, 0o644)
        for (path, why) in [
            (file, "has mode 644: group or others may read or write it; chmod 600 it"), (fifo, "is not a regular file"),
            (large, "cannot be read, or is larger than 65536 bytes"), (link, "is not a regular file"),
            ("/dev/zero", "is not a regular file"), (file + "/inside", "cannot be checked: Not a directory"),
            (f.root + "/" + String(repeating: "n", count: 300), "cannot be checked: File name too long"),
        ] {
            let provider = try f.provider([("signature", ["secretFile": path, "secretKey": "pluginhost-no-such-key"])])
            let result = await provider.request(try Bin("get")).result
            guard case .failure(.interceptor("signature", .prepare, let message)) = result else {
                Issue.record("\(path): got \(result)")
                continue
            }
            #expect(message == "signature: the secret file \(path) \(why)")
        }
    }

    @Test func missingSecretIsAClearError() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["secretEnv": "PLUGINHOST_NO_SUCH_SECRET"])])
        let result = await provider.request(try Bin("get")).result
        guard case .failure(.interceptor("signature", .prepare, let message)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(
            message == "signature: no signing secret (looked in host store key \"signing_secret\", environment variable PLUGINHOST_NO_SUCH_SECRET)")
    }
}
