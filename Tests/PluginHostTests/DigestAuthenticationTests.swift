import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Digest authentication: challenge parsing and RFC 7616 answers")
struct DigestUnitTests {
    /// RFC 7616 §3.9.1: the server's challenge (both algorithms offered) and the client's answers.
    static let rfcChallenge =
        #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=SHA-256, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS", "#
        + #"Digest realm="http-auth@example.org", qop="auth, auth-int", algorithm=MD5, nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#

    @Test(arguments: [
        ("MD5", "8ca523f5e9506fed4657c9700eebdbec"),
        ("SHA-256", "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1"),
    ])
    func rfc7616KnownAnswer(algorithm: String, response: String) throws {
        let challenges = HTTPChallenge.parse(Self.rfcChallenge)
        #expect(challenges.count == 2)
        let challenge = try #require(challenges.compactMap(DigestChallenge.init).first { $0.algorithmToken == algorithm })
        // The example's request has no body in memory to protect, so it answers `qop=auth`.
        let value = challenge.authorization(
            user: "Mufasa", password: "Circle of Life",
            request: .init(method: "GET", uri: "/dir/index.html", body: nil),
            cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", nonceCount: 1)
        #expect(
            value
                == #"Digest username="Mufasa", realm="http-auth@example.org", uri="/dir/index.html", algorithm=\#(algorithm), "#
                + #"nonce="7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", nc=00000001, cnonce="f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ", "#
                + #"qop=auth, response="\#(response)", opaque="FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS""#)
    }

    @Test func theStrongestOfferedAlgorithmIsChosen() throws {
        let chosen = try #require(ChosenChallenge.choose(from: Self.rfcChallenge))
        #expect(chosen.digest?.algorithm == .sha256)
        let many =
            #"Basic realm="r", Digest realm="r", nonce="n1", algorithm=MD5, Digest realm="r", nonce="n2", algorithm=SHA-512-256-sess, "#
            + #"Digest realm="r", nonce="n3", algorithm=SHA-512, Digest realm="r", nonce="n4", algorithm=SHA3-256"#
        let best = try #require(ChosenChallenge.choose(from: many))
        #expect(best.digest?.algorithm == .sha512)
        #expect(best.digest?.nonce == "n3")
        let sessionOnly = try #require(ChosenChallenge.choose(from: #"Digest realm="r", nonce="n", algorithm=sha-256-SESS"#))
        #expect(sessionOnly.digest?.algorithm == .sha256)
        #expect(sessionOnly.digest?.session == true)
        // An algorithm the host does not know is not answered as Digest: Basic is, when offered.
        let unknown = try #require(ChosenChallenge.choose(from: #"Digest realm="r", nonce="n", algorithm=SHA3-256, Basic realm="b""#))
        #expect(unknown.digest == nil)
        #expect(unknown.scheme == "Basic")
        #expect(unknown.realm == "b")
        #expect(ChosenChallenge.choose(from: "")?.scheme == nil)
    }

    @Test func challengeGrammarOfRFC9110() {
        // RFC 9110 §11.6.1's example: two challenges, a quoted value with escapes, a token value.
        let parsed = HTTPChallenge.parse(#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#)
        #expect(
            parsed == [
                HTTPChallenge(scheme: "Newauth", parameters: ["realm": "apps", "type": "1", "title": #"Login to "apps""#]),
                HTTPChallenge(scheme: "Basic", parameters: ["realm": "simple"]),
            ])
        #expect(
            HTTPChallenge.parse("Negotiate abc+/d==, Basic, Bearer realm=x")
                == [
                    HTTPChallenge(scheme: "Negotiate", token68: "abc+/d=="),
                    HTTPChallenge(scheme: "Basic"),
                    HTTPChallenge(scheme: "Bearer", parameters: ["realm": "x"]),
                ])
        // White space before the comma that ends a token68 is no padding (it was counted as `=`).
        #expect(
            HTTPChallenge.parse("Negotiate abc= , NTLM  abc==  , Basic realm=\"r\"")
                == [
                    HTTPChallenge(scheme: "Negotiate", token68: "abc="),
                    HTTPChallenge(scheme: "NTLM", token68: "abc=="),
                    HTTPChallenge(scheme: "Basic", parameters: ["realm": "r"]),
                ])
        #expect(
            HTTPChallenge.parse("  ,, Digest  REALM = \"r\" ,NONCE=abc") == [
                HTTPChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "abc"])
            ])
        // A base64 value sent unquoted keeps its padding, and the parameters after it.
        #expect(
            HTTPChallenge.parse(#"Digest nonce=abc==, realm="r", qop=auth"#) == [
                HTTPChallenge(scheme: "Digest", parameters: ["nonce": "abc==", "realm": "r", "qop": "auth"])
            ])
        #expect(
            HTTPChallenge.parse("Digest realm=r, nonce=YWJj=, Basic realm=b") == [
                HTTPChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "YWJj="]),
                HTTPChallenge(scheme: "Basic", parameters: ["realm": "b"]),
            ])
        #expect(
            HTTPChallenge.parse("Digest realm=r, nonce=YWJj==") == [HTTPChallenge(scheme: "Digest", parameters: ["realm": "r", "nonce": "YWJj=="])])
        // Not padding: an `=` inside a value is not taken into it.
        #expect(HTTPChallenge.parse("Digest a=b=c").first?.parameters["a"] == "b")
        // A comma right after the scheme ends that challenge: the next token is a scheme, not a token68.
        #expect(HTTPChallenge.parse("Negotiate, NTLM") == [HTTPChallenge(scheme: "Negotiate"), HTTPChallenge(scheme: "NTLM")])
        #expect(
            HTTPChallenge.parse("Bearer, Basic realm=\"b\"") == [
                HTTPChallenge(scheme: "Bearer"), HTTPChallenge(scheme: "Basic", parameters: ["realm": "b"]),
            ])
        #expect(ChosenChallenge.choose(from: "Bearer, Basic realm=\"b\"")?.scheme == "Basic")
        // Unterminated quotes run to the end; stray delimiters are skipped; nothing is lost or invented.
        #expect(HTTPChallenge.parse(#"Digest realm="open"#) == [HTTPChallenge(scheme: "Digest", parameters: ["realm": "open"])])
        #expect(HTTPChallenge.parse("=;Basic") == [HTTPChallenge(scheme: "Basic")])
    }

    @Test func qopChoiceSessionNoQopAndAuthInt() throws {
        func digest(_ header: String) throws -> DigestChallenge {
            try #require(HTTPChallenge.parse(header).compactMap(DigestChallenge.init).first)
        }
        let both = try digest(#"Digest realm="r", nonce="n", qop="auth,auth-int""#)
        let withBody = try #require(
            both.authorization(
                user: "u", password: "p", request: .init(method: "POST", uri: "/x", body: Array("hi".utf8)), cnonce: "c", nonceCount: 2))
        let a1 = DigestChallenge.Algorithm.md5.hex("u:r:p")
        let a2 = DigestChallenge.Algorithm.md5.hex("POST:/x:" + DigestChallenge.Algorithm.md5.hex("hi"))
        #expect(withBody.contains("qop=auth-int"))
        #expect(withBody.contains("nc=00000002"))
        #expect(withBody.contains(#"response="\#(DigestChallenge.Algorithm.md5.hex("\(a1):n:00000002:c:auth-int:\(a2)"))""#))
        #expect(withBody.contains("algorithm") == false, "no algorithm offered: none echoed (MD5 implied)")
        let streamed = try #require(
            both.authorization(user: "u", password: "p", request: .init(method: "POST", uri: "/x", body: nil), cnonce: "c", nonceCount: 1))
        #expect(streamed.contains("qop=auth,") || streamed.contains("qop=auth "))
        let integrityOnly = try digest(#"Digest realm="r", nonce="n", qop="auth-int""#)
        #expect(
            integrityOnly.authorization(user: "u", password: "p", request: .init(method: "PUT", uri: "/", body: nil), cnonce: "c", nonceCount: 1)
                == nil)
        // RFC 2069 style: no qop, no nc or cnonce.
        let legacy = try digest(#"Digest realm="r", nonce="n""#)
        let old = try #require(
            legacy.authorization(user: "u", password: "p", request: .init(method: "GET", uri: "/", body: nil), cnonce: "c", nonceCount: 1))
        #expect(!old.contains("nc=") && !old.contains("cnonce="))
        #expect(old.contains(#"response="\#(DigestChallenge.Algorithm.md5.hex("\(a1):n:" + DigestChallenge.Algorithm.md5.hex("GET:/")))""#))
        // -sess without qop cannot be answered: the server would never learn the cnonce A1 depends on.
        let sessionWithoutQop = try digest(#"Digest realm="r", nonce="n", algorithm=MD5-sess"#)
        #expect(
            sessionWithoutQop.authorization(user: "u", password: "p", request: .init(method: "GET", uri: "/", body: nil), cnonce: "c", nonceCount: 1)
                == nil)
        // -sess: A1 = H(H(user:realm:password):nonce:cnonce).
        let session = try digest(#"Digest realm="r", nonce="n", qop=auth, algorithm=SHA-256-sess"#)
        let sha = DigestChallenge.Algorithm.sha256
        let sessionA1 = sha.hex(sha.hex("u:r:p") + ":n:c")
        let expected = sha.hex("\(sessionA1):n:00000001:c:auth:" + sha.hex("GET:/a?b=1"))
        let answer = try #require(
            session.authorization(user: "u", password: "p", request: .init(method: "GET", uri: "/a?b=1", body: nil), cnonce: "c", nonceCount: 1))
        #expect(answer.contains(#"response="\#(expected)""#))
        #expect(answer.contains("algorithm=SHA-256-sess"))
    }

    @Test func userhashAndNonASCIIUserNames() throws {
        // RFC 7616 §3.9.2's user name and realm; the hash was computed independently with Python's hashlib.
        let challenge = try #require(
            HTTPChallenge.parse(#"Digest realm="api@example.org", qop="auth", algorithm=SHA-512-256, nonce="n", userhash=true"#)
                .compactMap(DigestChallenge.init).first)
        let hashed = try #require(
            challenge.authorization(
                user: "Jäsøn Doe", password: "Secret, or not?", request: .init(method: "GET", uri: "/doe.json", body: nil), cnonce: "c", nonceCount: 1
            ))
        #expect(hashed.hasPrefix(#"Digest username="793263caabb707a56211940d90411ea4a575adeccb7e360aeb624ed06ece9b0b", "#))
        #expect(hashed.hasSuffix("userhash=true"))
        let plain = try #require(
            HTTPChallenge.parse(#"Digest realm="api@example.org", qop="auth", nonce="n""#).compactMap(DigestChallenge.init).first)
        let extended = try #require(
            plain.authorization(user: "Jäsøn Doe", password: "p", request: .init(method: "GET", uri: "/", body: nil), cnonce: "c", nonceCount: 1))
        #expect(extended.hasPrefix("Digest username*=UTF-8''J%C3%A4s%C3%B8n%20Doe, "))
        let quoted = try #require(
            plain.authorization(user: #"a"b\c"#, password: "p", request: .init(method: "GET", uri: "/", body: nil), cnonce: "c", nonceCount: 1))
        #expect(quoted.hasPrefix(#"Digest username="a\"b\\c", "#))
    }

    @Test func nonceCountsPerNonce() {
        let counts = DigestNonceCounts()
        #expect(counts.next(for: "a") == 1)
        #expect(counts.next(for: "a") == 2)
        #expect(counts.next(for: "b") == 1)
        // Full, the least recently used are forgotten, not every count (a nonce in use restarted
        // at 1, which a server checking `nc` against replays refuses).
        for index in 0..<DigestNonceCounts.capacity {
            _ = counts.next(for: "n\(index)")
            _ = counts.next(for: "a")
        }
        #expect(counts.next(for: "a") == 3 + UInt32(DigestNonceCounts.capacity))
        #expect(counts.next(for: "b") == 1)
        #expect(DigestChallenge.nonceCountText(0x1a) == "0000001a")
        #expect(DigestChallenge.requestURI(URL(string: "http://h:1")!) == "/")
        #expect(DigestChallenge.requestURI(URL(string: "http://h/a%20b?x=%2F&y")!) == "/a%20b?x=%2F&y")
    }
}

extension DigestUnitTests {
    /// The `uri` of an answer is the request target as sent: resolved against a base URL (it
    /// was the relative string), without `.` and `..` segments (libcurl removes them before it
    /// sends; encoded ones it leaves), the query as it is.
    @Test func theRequestURIIsTheTargetAsSent() throws {
        let relative = try #require(URL(string: "a/b?x", relativeTo: URL(string: "http://h/p/")!))
        #expect(DigestChallenge.requestURI(relative) == "/p/a/b?x")
        #expect(DigestChallenge.requestURI(URL(string: "http://h/fixture/x/../digest?k=/../v")!) == "/fixture/digest?k=/../v")
        #expect(DigestChallenge.requestURI(URL(string: "http://h/a/./b/.")!) == "/a/b/")
        #expect(DigestChallenge.requestURI(URL(string: "http://h/a/%2E%2E/b")!) == "/a/%2E%2E/b")
    }

    /// The strongest Digest challenge the request cannot be answered for (a `-sess` without
    /// `qop`) gives way to the next of the same realm; the hooks are asked once. The one passed
    /// over takes none of the nonce's counts (both offer one nonce, as RFC 7616's example does),
    /// and a `stale` challenge that follows is answered by the same rule.
    @Test func anUnanswerableStrongestChallengeOfTheSameNonceTakesNoCount() async throws {
        let offered = #"Digest realm="r", nonce="n", algorithm=SHA-512-256-sess, Digest realm="r", nonce="n", algorithm=SHA-256, qop="auth""#
        let stale =
            #"Digest realm="r", nonce="m", algorithm=SHA-512-256-sess, stale=true, Digest realm="r", nonce="m", algorithm=SHA-256, qop="auth", stale=true"#
        let transport = ScriptedChallenges([(401, ["WWW-Authenticate": offered]), (401, ["WWW-Authenticate": stale])])
        let credentials = CountingCredentials()
        let provider = Provider<Bin>(transport: transport, interceptors: [credentials])
        let response = try await provider.request(try Bin("x", base: URL(string: "http://origin.test")!)).value
        #expect(response.statusCode == 200)
        #expect(credentials.asked.value == 1)
        let answers = transport.sent.withLock { $0 }.dropFirst().map { $0.value(forHTTPHeaderField: "Authorization") ?? "" }
        try #require(answers.count == 2)
        #expect(answers[0].contains(#"nonce="n""#) && answers[0].contains("nc=00000001,"), "\(answers[0])")
        #expect(
            answers[1].contains(#"nonce="m""#) && answers[1].contains("algorithm=SHA-256,") && answers[1].contains("nc=00000001,"), "\(answers[1])")
    }

    @Test func anUnanswerableStrongestChallengeGivesWayToTheNext() async throws {
        let offered = #"Digest realm="r", nonce="a", algorithm=SHA-512-256-sess, Digest realm="r", nonce="b", algorithm=SHA-256, qop="auth""#
        let chosen = try #require(ChosenChallenge.choose(from: offered))
        #expect(chosen.digest?.algorithmToken == "SHA-512-256-sess")
        #expect(chosen.weakerDigests.map(\.nonce) == ["b"])
        let transport = ScriptedChallenges([(401, ["WWW-Authenticate": offered])])
        let credentials = CountingCredentials()
        let provider = Provider<Bin>(transport: transport, interceptors: [credentials])
        let response = try await provider.request(try Bin("x", base: URL(string: "http://origin.test")!)).value
        #expect(response.statusCode == 200)
        #expect(credentials.asked.value == 1)
        let answer = transport.sent.withLock { $0 }.last?.value(forHTTPHeaderField: "Authorization") ?? ""
        #expect(answer.contains(#"nonce="b""#) && answer.contains("algorithm=SHA-256,"), "\(answer)")
    }

    /// Where `auth-int` finds a body that is no bytes in memory: a file read again (a FIFO or a
    /// missing file: nothing to hash), a stream only once a send read it into a file, and
    /// nothing once the request is cancelled or out of time. Such a body is hashed only when
    /// `auth-int` is offered alone: beside `auth`, `auth` is answered and nothing is read.
    @Test func authIntBodyOfFilesAndStreams() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-digest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = try #require(URL(string: "http://127.0.0.1/upload"))
        let bytes = [UInt8]((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })  // more than three parts of 64 KiB
        let file = directory.appendingPathComponent("body")
        try Data(bytes).write(to: file)
        func reread(_ request: TransportRequest) throws -> (DigestChallenge.Algorithm) -> String? {
            guard case .reread(let hash) = InterceptorChain.bodySource(of: request) else {
                throw Unexpected(InterceptorChain.bodySource(of: request))
            }
            return hash
        }
        struct Unexpected: Error, CustomStringConvertible {
            let description: String
            init(_ source: DigestChallenge.RequestFacts.Body) { description = "\(source)" }
        }
        for algorithm in DigestChallenge.Algorithm.allCases {
            let hash = try reread(TransportRequest(urlRequest: URLRequest(url: url), body: .file(file)))
            #expect(hash(algorithm) == algorithm.hex(bytes), "\(algorithm)")
        }
        // A FIFO (opened without blocking, and no regular file) and a missing file: nothing to hash.
        let fifo = directory.appendingPathComponent("fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        for unreadable in [fifo, directory.appendingPathComponent("missing")] {
            let hash = try reread(TransportRequest(urlRequest: URLRequest(url: url), body: .file(unreadable)))
            #expect(hash(.sha256) == nil, "\(unreadable.lastPathComponent)")
        }
        // A file past its request's deadline: not read.
        let late = try reread(
            TransportRequest(urlRequest: URLRequest(url: url), body: .file(file), deadline: (DispatchTime.now() - .seconds(1), 1)))
        #expect(late(.md5) == nil)
        // A body stream: nothing until a send of the call has read it; then the bytes it read.
        var streamed = URLRequest(url: url)
        streamed.httpBodyStream = InputStream(data: Data(bytes))
        var request = TransportRequest(urlRequest: streamed)
        guard case .unavailable = InterceptorChain.bodySource(of: request) else { throw Unexpected(InterceptorChain.bodySource(of: request)) }
        request.bodySpool = BodySpool()
        guard case .unavailable = InterceptorChain.bodySource(of: request) else { throw Unexpected(InterceptorChain.bodySource(of: request)) }
        let signal = CancellationSignal()
        request.cancellation = signal
        // What a send does first: reads the stream into the call's spool.
        #expect(try await SpooledBody.reading(request) != nil)
        let hash = try reread(request)
        #expect(hash(.md5) == DigestChallenge.Algorithm.md5.hex(bytes))
        #expect(hash(.sha512) == DigestChallenge.Algorithm.sha512.hex(bytes), "read by offset: a second read sees it all again")
        signal.cancel()
        #expect(hash(.md5) == nil, "cancelled: the body is not read")
        // Offered alone, auth-int is answered from a body read again; with nothing to hash, not at all.
        func challenge(_ qop: String) throws -> DigestChallenge {
            try #require(HTTPChallenge.parse(#"Digest realm="r", nonce="n", qop="\#(qop)""#).compactMap(DigestChallenge.init).first)
        }
        let asked = Locked(0)
        let counted = DigestChallenge.RequestFacts(
            method: "PUT", uri: "/upload",
            body: .reread { algorithm in
                asked.withLock { $0 += 1 }
                return algorithm.hex(bytes)
            })
        let integrity = try #require(try challenge("auth-int").authorization(user: "u", password: "p", request: counted, cnonce: "c", nonceCount: 1))
        let a2 = DigestChallenge.Algorithm.md5.hex("PUT:/upload:" + DigestChallenge.Algorithm.md5.hex(bytes))
        let a1 = DigestChallenge.Algorithm.md5.hex("u:r:p")
        #expect(integrity.contains(#"response="\#(DigestChallenge.Algorithm.md5.hex("\(a1):n:00000001:c:auth-int:\(a2)"))""#))
        let unreadable = DigestChallenge.RequestFacts(method: "PUT", uri: "/upload", body: .reread { _ in nil })
        #expect(try challenge("auth-int").authorization(user: "u", password: "p", request: unreadable, cnonce: "c", nonceCount: 1) == nil)
        // Beside auth: auth, and the body is not read again (it may be large, or have changed).
        let both = try #require(try challenge("auth-int, auth").authorization(user: "u", password: "p", request: counted, cnonce: "c", nonceCount: 1))
        #expect(both.contains("qop=auth,"))
        #expect(asked.withLock { $0 } == 1)
        // A body in memory: auth-int, preferred beside auth.
        let inMemory = DigestChallenge.RequestFacts(method: "PUT", uri: "/upload", body: bytes)
        #expect(
            try challenge("auth, auth-int").authorization(user: "u", password: "p", request: inMemory, cnonce: "c", nonceCount: 1)?.contains(
                "qop=auth-int") == true)
    }
}

extension TransportKind {
    /// A transport of this kind that keeps no cookies: httpbin's digest endpoints set some, and
    /// URLSession's shared cookie store would send them on every later test's requests.
    func isolated() -> any Transport {
        guard self == .urlSession else { return make() }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        return URLSessionTransport(configuration: configuration)
    }
}

/// Answers every challenge with `u`/`p` the first time and counts how often it was asked.
final class CountingCredentials: Interceptor, Sendable {
    let name = "counting-credentials"
    let asked = LockedCounter()
    let user: String
    let password: String
    let methods = Locked([String]())
    init(user: String = "u", password: String = "p") {
        self.user = user
        self.password = password
    }
    func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
        asked.increment()
        methods.withLock { $0.append(challenge.method) }
        return challenge.previousFailureCount == 0 ? .useCredential(user: user, password: password) : .performDefault
    }
}

@Suite("Digest authentication against httpbin and the fixture server", .serialized)
struct DigestLiveTests {
    func fixture(_ key: String, _ options: [String: String]) throws -> Bin {
        var parameters: Parameters = ["key": key]
        for (name, value) in options { parameters[name] = value }
        return try Bin("fixture/digest", task: .requestParameters(parameters: parameters, encoding: URLEncoding.queryString))
    }

    @Test(arguments: TransportKind.allCases, ["MD5", "SHA-256", "SHA-512"])
    func httpbinEachAlgorithmThroughTheCredentialsPlugin(_ transport: TransportKind, algorithm: String) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let entry: [String: Any] = ["host": "127.0.0.1", "user": "u", "password": "p"]
        let provider = try f.provider([("credentials", ["credentials": [entry]])], transport: transport.isolated())
        for qop in ["auth", "auth-int"] {
            let response = try await provider.request(try Bin("digest-auth/\(qop)/u/p/\(algorithm)")).value
            #expect(response.statusCode == 200, "\(qop) \(algorithm): \(String(decoding: response.data, as: UTF8.self))")
            #expect(try response.mapJSON()["authenticated"]?.boolValue == true)
            #expect(response.request?.value(forHTTPHeaderField: "Authorization")?.contains("algorithm=\(algorithm),") == true)
            #expect(response.request?.value(forHTTPHeaderField: "Authorization")?.contains("qop=\(qop),") == true)
        }
    }

    /// A challenge that says `charset=UTF-8` gets the user name and password in Unicode's composed
    /// form (RFC 7616 §4, RFC 7617 §2.1): a name typed `a` + U+0308 is the server's `ä`. Without
    /// it, the bytes go as given (and that name is another user). They always went as given.
    @Test(arguments: ["MD5", "SHA-256", "Basic"], [true, false])
    func aUTF8ChallengeGetsTheComposedForm(_ offer: String, _ charset: Bool) async throws {
        let decomposed = "Ja\u{0308}son"
        let key = counterKey()
        var options = ["offer": offer, "user": "J\u{00E4}son", "pass": "p\u{00E4}ss"]
        if charset { options["charset"] = "1" }
        let provider = Provider<Bin>(interceptors: [CountingCredentials(user: decomposed, password: "pa\u{0308}ss")])
        let response = try await provider.request(try fixture(key, options)).value
        #expect(response.statusCode == (charset ? 200 : 401), "\(offer): \(String(decoding: response.data, as: UTF8.self))")
    }

    @Test(arguments: TransportKind.allCases)
    func wrongPasswordDeliversThe401AfterTheConfiguredRounds(_ transport: TransportKind) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let entry: [String: Any] = ["host": "127.0.0.1", "user": "u", "password": "wrong"]
        for rounds in [1, 3] {
            let key = counterKey()
            let provider = try f.provider([("credentials", ["credentials": [entry], "rounds": rounds])], transport: transport.isolated())
            let response = try await provider.request(try fixture(key, ["algorithm": "SHA-256"])).value
            #expect(response.statusCode == 401)
            #expect(try response.mapJSON()["reason"]?.stringValue == "wrong response")
            #expect(try await serverHits(key) == 1 + rounds)
        }
        // httpbin too: the 401 comes back, no loop.
        let provider = try f.provider([("credentials", ["credentials": [entry]])], transport: transport.isolated())
        #expect(try await provider.request(try Bin("digest-auth/auth/u/p/SHA-512")).value.statusCode == 401)
    }

    @Test(arguments: TransportKind.allCases)
    func staleIsAnsweredOnceWithTheNewNonceWithoutAskingAgain(_ transport: TransportKind) async throws {
        let key = counterKey()
        let credentials = CountingCredentials()
        let provider = Provider<Bin>(transport: transport.isolated(), interceptors: [credentials])
        let response = try await provider.request(try fixture(key, ["algorithm": "SHA-512", "stale": "1"])).value
        #expect(response.statusCode == 200)
        #expect(try await serverHits(key) == 3)  // challenge, stale, accepted
        #expect(credentials.asked.value == 1)
        // A server that keeps answering stale gets one more answer, then its 401 is delivered.
        let looping = counterKey()
        let second = CountingCredentials()
        let again = Provider<Bin>(transport: transport.isolated(), interceptors: [second])
        let refused = try await again.request(try fixture(looping, ["algorithm": "MD5", "stale": "9"])).value
        #expect(refused.statusCode == 401)
        #expect(try refused.mapJSON()["reason"]?.stringValue == "stale nonce")
        #expect(try await serverHits(looping) == 3)
        #expect(second.asked.value == 1)
    }

    @Test(arguments: TransportKind.allCases)
    func fixtureChecksEveryVariant(_ transport: TransportKind) async throws {
        let credentials = CountingCredentials(user: "Jäsøn Doe", password: "Secret, or not?")
        let provider = Provider<Bin>(transport: transport.isolated(), interceptors: [credentials])
        let user = ["user": "Jäsøn Doe", "pass": "Secret, or not?"]
        let cases: [[String: String]] = [
            ["algorithm": "MD5-sess"], ["algorithm": "SHA-256-sess"], ["algorithm": "SHA-512-256"], ["algorithm": "SHA-512-sess"],
            ["algorithm": "SHA-256", "userhash": "1"], ["algorithm": "MD5", "qop": ""], ["algorithm": "SHA-256", "qop": "auth-int"],
        ]
        for options in cases {
            let response = try await provider.request(try fixture(counterKey(), options.merging(user) { a, _ in a })).value
            let json = try response.mapJSON()
            #expect(response.statusCode == 200, "\(options): \(json)")
            #expect(json["algorithm"]?.stringValue == options["algorithm"])
            if options["userhash"] == "1" {
                #expect(json["userhash"]?.boolValue == true)
            } else {
                #expect(json["username"]?.stringValue == "Jäsøn Doe")
            }
            #expect(json["qop"]?.stringValue == (options["qop"] == "" ? nil : options["qop"] ?? "auth"))
        }
        #expect(credentials.methods.withLock { $0 } == Array(repeating: "Digest", count: cases.count))
    }

    @Test(arguments: TransportKind.allCases)
    func authIntProtectsAnInMemoryBody(_ transport: TransportKind) async throws {
        let provider = Provider<Bin>(transport: transport.isolated(), interceptors: [CountingCredentials()])
        let key = counterKey()
        var target = try Bin(
            "fixture/digest", method: .post,
            task: .requestCompositeData(bodyData: Data(#"{"a":1}"#.utf8), urlParameters: ["key": key, "qop": "auth-int", "algorithm": "SHA-256"]))
        target.headers = ["Content-Type": "application/json"]
        let response = try await provider.request(target).value
        #expect(response.statusCode == 200, "\(String(decoding: response.data, as: UTF8.self))")
        #expect(try response.mapJSON()["qop"]?.stringValue == "auth-int")
    }

    /// `auth-int` protects a body sent from a file or read from a stream too, on a server that
    /// offers nothing else: the file is hashed again (in parts of 64 KiB), the stream from the
    /// file its first send read it into. (These answers were `401`s delivered before.)
    @Test(arguments: TransportKind.allCases)
    func authIntProtectsAFileOrAStreamBody(_ transport: TransportKind) async throws {
        let text = String(repeating: "integrity-", count: 20_000)  // 200,000 bytes
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-digest-\(UUID().uuidString)")
        try Data(text.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        for (algorithm, streamed) in [("MD5", false), ("SHA-512-256", true), ("SHA-512-sess", false), ("SHA-256", true)] {
            let query = "?key=\(counterKey())&qop=auth-int&algorithm=\(algorithm)"
            let provider = Provider<Bin>(
                requestClosure: { _, request in
                    var request = request
                    request.url = URL(string: (request.url?.absoluteString ?? "") + query)
                    if streamed { request.httpBodyStream = InputStream(data: Data(text.utf8)) }
                    return request
                }, transport: transport.isolated(), interceptors: [CountingCredentials()])
            let target = try Bin("fixture/digest", method: .put, task: streamed ? .requestPlain : .uploadFile(file))
            let response = try await provider.request(target).value
            let json = try response.mapJSON()
            #expect(response.statusCode == 200, "\(algorithm), streamed: \(streamed): \(json)")
            #expect(json["qop"]?.stringValue == "auth-int", "\(algorithm), streamed: \(streamed)")
            #expect(json["algorithm"]?.stringValue == algorithm)
            #expect(json["bodySha256"]?.stringValue == SHA256.hex(SHA256.hash(Array(text.utf8))), "the whole body arrived with the answer")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func severalChallengesTheStrongestIsAnswered(_ transport: TransportKind) async throws {
        let provider = Provider<Bin>(transport: transport.isolated(), interceptors: [CountingCredentials()])
        for (offer, expected) in [
            ("Basic,MD5,SHA-256", "SHA-256"), ("MD5,SHA-512-256,SHA-256-sess,Basic", "SHA-512-256"), ("MD5,SHA-512", "SHA-512"),
        ] {
            let response = try await provider.request(try fixture(counterKey(), ["offer": offer])).value
            #expect(response.statusCode == 200)
            #expect(try response.mapJSON()["algorithm"]?.stringValue == expected)
        }
        let basicOnly = try await provider.request(try fixture(counterKey(), ["offer": "Basic"])).value
        #expect(try basicOnly.mapJSON()["scheme"]?.stringValue == "Basic")
    }

    @Test(arguments: TransportKind.allCases)
    func ncCountsUpWhileTheServerKeepsItsNonce(_ transport: TransportKind) async throws {
        let provider = Provider<Bin>(transport: transport.isolated(), interceptors: [CountingCredentials()])
        let nonce = UUID().uuidString
        var seen: [String?] = []
        var cnonces: Set<String> = []
        for _ in 0..<3 {
            let json = try await provider.request(try fixture(counterKey(), ["nonce": nonce, "algorithm": "SHA-256"])).mapJSON().value
            seen.append(json["nc"]?.stringValue)
            cnonces.insert(json["cnonce"]?.stringValue ?? "")
        }
        #expect(seen == ["00000001", "00000002", "00000003"])
        #expect(cnonces.count == 3 && !cnonces.contains(""))
    }

    /// The fixture's Digest URL (SHA-256) for `key`, on the test server's port at `host`.
    func digestURL(key: String, host: String = "127.0.0.1") throws -> URL {
        var components = try #require(URLComponents(url: try TestServer.url(), resolvingAgainstBaseURL: false))
        components.host = host
        components.path = "/fixture/digest"
        components.queryItems = [URLQueryItem(name: "key", value: key), URLQueryItem(name: "algorithm", value: "SHA-256")]
        return try #require(components.url)
    }

    /// A path with dot segments is answered for the path sent (libcurl removes them): the
    /// server refused the `uri` of the path as written.
    @Test(arguments: TransportKind.allCases)
    func aPathWithDotSegmentsIsAnsweredForThePathSent(_ transport: TransportKind) async throws {
        let provider = Provider<Bin>(transport: transport.isolated(), interceptors: [CountingCredentials()])
        let key = counterKey()
        let target = try Bin(
            "fixture/x/../digest", task: .requestParameters(parameters: ["key": key, "algorithm": "SHA-256"], encoding: URLEncoding.queryString))
        let response = try await provider.request(target).value
        #expect(response.statusCode == 200, "\(String(decoding: response.data, as: UTF8.self))")
        #expect(try await serverHits(key) == 2)
    }

    /// A right answer the server redirects on the same origin: the transport sends the answer
    /// on (libcurl keeps `Authorization` there), it does not cover the new target, and the
    /// server challenges again. That is no failed round: it is answered there, and the request
    /// succeeds with `rounds` at 1.
    @Test(arguments: TransportKind.allCases)
    func aRightAnswerRedirectedOnTheSameOriginIsAnsweredThereToo(_ transport: TransportKind) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let entry: [String: Any] = ["host": "127.0.0.1", "user": "u", "password": "p"]
        let provider = try f.provider([("credentials", ["credentials": [entry], "rounds": 1])], transport: transport.isolated())
        let key = counterKey()
        let response = try await provider.request(try fixture(key, ["algorithm": "SHA-256", "moved_once": "1"])).value
        let json = try response.mapJSON()
        #expect(response.statusCode == 200, "\(json)")
        #expect(json["scheme"]?.stringValue == "Digest")
        #expect(response.request?.url?.query?.hasSuffix("&moved=1") == true)
        // The challenge, the answer (moved), the answer sent on (challenged again), the new answer.
        #expect(try await serverHits(key) == 4)
        // A wrong password still gets its 401 after one answer: the rounds of one target count.
        let wrongKey = counterKey()
        let wrong = try f.provider(
            [("credentials", ["credentials": [["host": "127.0.0.1", "user": "u", "password": "wrong"]], "rounds": 1])],
            transport: transport.isolated())
        #expect(try await wrong.request(try fixture(wrongKey, ["algorithm": "SHA-256", "moved_once": "1"])).value.statusCode == 401)
        #expect(try await serverHits(wrongKey) == 2)
    }

    /// A challenge that comes after a redirect is the last request's: answered at the URL the
    /// transport was sent to (the Digest `uri` is the server's request target), with the method
    /// the redirect left (a `303` turns a `POST` into a `GET`, which the Digest hash covers).
    @Test(arguments: TransportKind.allCases)
    func aChallengeAfterARedirectIsAnsweredWhereTheRedirectLed(_ transport: TransportKind) async throws {
        /// Keeps whether each response the hooks saw came through a redirect.
        final class RedirectSeen: Interceptor, Sendable {
            var name: String { "redirect-seen" }
            let seen = Locked([Bool]())
            func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
                seen.withLock { $0.append(result.response?.isRedirected ?? false) }
            }
        }
        let redirects = RedirectSeen()
        let provider = Provider<Bin>(transport: transport.isolated(), interceptors: [CountingCredentials(), redirects])
        for (method, status) in [(HTTPMethod.get, 302), (.post, 303), (.put, 307)] {
            let key = counterKey()
            let last = try digestURL(key: key)
            let target = try Bin(
                "redirect-to", method: method,
                task: .requestParameters(
                    parameters: ["url": last.absoluteString, "status_code": status], encoding: URLEncoding.queryString))
            let response = try await provider.request(target).value
            let json = try response.mapJSON()
            #expect(response.statusCode == 200, "\(method) after \(status): \(json)")
            #expect(json["scheme"]?.stringValue == "Digest")
            // The redirect's target, challenged then answered: the redirect was followed once.
            #expect(try await serverHits(key) == 2, "\(method) after \(status)")
            #expect(response.request?.url == last)
            #expect(response.request?.httpMethod == (status == 303 ? "GET" : method.rawValue))
        }
        // Sent straight to the last URL, the answered request's response is still the first URL's
        // through a redirect (a cache stores nothing for it under the first).
        #expect(redirects.seen.withLock { $0 } == [true, true, true])
    }

    /// A `POST` that a `303` turned into a `GET`, challenged and answered there, and answered
    /// `503`: a pipeline's retry decides on the method the chain sent (`POST`), not on the last
    /// hop's request that the response names (`GET`), and does not send it again. (Deciding on
    /// the response's request, it was sent three times.)
    @Test func aPostRedirectedAndAnsweredIsNotRetried() async throws {
        let provider = Provider<Bin>(transport: TransportKind.curl.isolated(), interceptors: [CountingCredentials()])
        let key = counterKey()
        var last = try #require(URLComponents(url: try digestURL(key: key), resolvingAgainstBaseURL: false))
        last.queryItems?.append(URLQueryItem(name: "answered_status", value: "503"))
        let target = try Bin(
            "redirect-to", method: .post,
            task: .requestParameters(
                parameters: ["url": try #require(last.url).absoluteString, "status_code": 303], encoding: URLEncoding.queryString))
        let retries = LockedCounter()
        let result = await provider.request(target).filterSuccessfulStatusCodes()
            .retry(RetryPolicy(exponentialBackoffScale: 0.001) { _ in retries.increment() }).result
        guard case .failure(.statusCode(let response)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(response.statusCode == 503)
        #expect(response.request?.httpMethod == "GET")
        #expect(retries.value == 0)
        // The challenge and the answer, once.
        #expect(try await serverHits(key) == 2)
    }

    /// Another origin's challenge, after a redirect, is asked for with that origin's host, and the
    /// answer goes to it.
    @Test(arguments: TransportKind.allCases)
    func aChallengeOfAnotherOriginAfterARedirectNamesItsHost(_ transport: TransportKind) async throws {
        /// Answers with `u`/`p` and keeps the hosts it was asked for.
        final class HostRecorder: Interceptor, Sendable {
            var name: String { "host-recorder" }
            let hosts = Locked([String]())
            func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
                hosts.withLock { $0.append(challenge.host) }
                return challenge.previousFailureCount == 0 ? .useCredential(user: "u", password: "p") : .performDefault
            }
        }
        let recorder = HostRecorder()
        let provider = Provider<Bin>(transport: transport.isolated(), interceptors: [recorder])
        let key = counterKey()
        let last = try digestURL(key: key, host: "localhost")
        let target = try Bin(
            "redirect-to", task: .requestParameters(parameters: ["url": last.absoluteString, "status_code": 302], encoding: URLEncoding.queryString))
        let response = try await provider.request(target).value
        let json = try response.mapJSON()
        #expect(response.statusCode == 200, "\(json)")
        #expect(recorder.hosts.withLock { $0 } == ["localhost"])
        #expect(try await serverHits(key) == 2)
        #expect(json["authorization"]?.stringValue?.hasPrefix(#"Digest username="u""#) == true)
        #expect(response.request?.url == last)
    }

    /// A request to `http://origin.test/x` answered by `script` (then `200`), with a hook that
    /// answers first challenges: the response, how often the hook was asked, and what was sent.
    func answered(_ script: [(status: Int, headers: [String: String])]) async throws -> (Response, Int, [URLRequest]) {
        let transport = ScriptedChallenges(script)
        let credentials = CountingCredentials()
        let provider = Provider<Bin>(transport: transport, interceptors: [credentials])
        let response = try await provider.request(try Bin("x", base: URL(string: "http://origin.test")!)).value
        return (response, credentials.asked.value, transport.sent.withLock { $0 })
    }

    /// `stale=true` reuses the last answer only for the same field and realm: after answering a proxy,
    /// an origin's stale challenge goes to the hooks (which match hosts and realms), never gets the proxy's
    /// answer. The proxy's round does not count against the origin: the origin's challenge reaches the
    /// hooks as a first one (`previousFailureCount` 0), as each protection space counts its own.
    @Test func staleForAnotherRealmOrFieldAsksTheHooks() async throws {
        // A proxy (`407`, realm `proxy`), then an origin that calls the answer stale (`401`, realm
        // `origin`, `stale=true`) before accepting.
        let (response, asked, sent) = try await answered([
            (407, ["Proxy-Authenticate": #"Digest realm="proxy", nonce="p1", qop="auth""#]),
            (401, ["WWW-Authenticate": #"Digest realm="origin", nonce="o1", qop="auth", stale=true"#]),
        ])
        // This hook answers only a first challenge: the origin's is one, and is answered.
        #expect(response.statusCode == 200)
        #expect(asked == 2)
        try #require(sent.count == 3)
        #expect(sent[1].value(forHTTPHeaderField: "Proxy-Authorization")?.contains(#"realm="proxy""#) == true)
        #expect(sent[1].value(forHTTPHeaderField: "Authorization") == nil)
        let origin = try #require(sent[2].value(forHTTPHeaderField: "Authorization"))
        #expect(origin.hasPrefix(#"Digest username="u", realm="origin", uri="/x", "#), "\(origin)")
        #expect(origin.contains(#"nonce="o1""#))
        #expect(sent[2].value(forHTTPHeaderField: "Proxy-Authorization") == sent[1].value(forHTTPHeaderField: "Proxy-Authorization"))
    }

    /// A `stale` Digest answer is sent once for the proxy and once for the origin: the proxy's
    /// does not use up the origin's.
    @Test func aStaleAnswerForTheProxyLeavesTheOriginsOwn() async throws {
        let (response, asked, sent) = try await answered([
            (407, ["Proxy-Authenticate": #"Digest realm="proxy", nonce="p1", qop="auth""#]),
            (407, ["Proxy-Authenticate": #"Digest realm="proxy", nonce="p2", qop="auth", stale=true"#]),
            (401, ["WWW-Authenticate": #"Digest realm="origin", nonce="o1", qop="auth""#]),
            (401, ["WWW-Authenticate": #"Digest realm="origin", nonce="o2", qop="auth", stale=true"#]),
        ])
        #expect(response.statusCode == 200)
        #expect(asked == 2)
        try #require(sent.count == 5)
        #expect(sent[2].value(forHTTPHeaderField: "Proxy-Authorization")?.contains(#"nonce="p2""#) == true)
        #expect(sent[4].value(forHTTPHeaderField: "Authorization")?.contains(#"nonce="o2""#) == true)
    }

    /// A `407` is answered in `Proxy-Authorization` (gunicorn drops `Proxy-Authenticate` as a
    /// hop-by-hop field, so a scripted transport plays the proxy).
    @Test func proxyChallengeIsAnsweredInProxyAuthorization() async throws {
        let proxy = ProxyChallengeTransport()
        let provider = Provider<Bin>(transport: proxy, interceptors: [CountingCredentials()])
        let response = try await provider.request(
            try Bin(
                "through/proxy", task: .requestParameters(parameters: ["q": 1], encoding: URLEncoding.queryString),
                base: URL(string: "http://origin.test")!)
        ).value
        #expect(response.statusCode == 200)
        let sent = proxy.sent.withLock { $0 }
        #expect(sent.count == 2)
        let answer = try #require(sent.last?.value(forHTTPHeaderField: "Proxy-Authorization"))
        #expect(answer.hasPrefix(#"Digest username="u", realm="proxy", uri="/through/proxy?q=1", algorithm=SHA-256, nonce="pn", nc=00000001, "#))
        #expect(sent.last?.value(forHTTPHeaderField: "Authorization") == nil)
    }
}

/// Plays servers behind redirects: each request gets the next step of its script (the URL the
/// transport was redirected to, if it was, and the method it ended with), then `200`.
final class RedirectedChallenges: Transport, Sendable {
    struct Step: Sendable {
        var redirectedTo: String?
        var method: String?
        var status: Int
        var headers: [String: String]
    }
    let sent = Locked([URLRequest]())
    let script: [Step]

    init(_ script: [Step]) { self.script = script }

    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        let count = sent.withLock {
            $0.append(request.urlRequest)
            return $0.count
        }
        let step = count <= script.count ? script[count - 1] : Step(status: 200, headers: [:])
        let url = step.redirectedTo.flatMap(URL.init(string:)) ?? request.urlRequest.url!
        var response = TransportResponse(
            response: HTTPURLResponse(url: url, statusCode: step.status, httpVersion: "HTTP/1.1", headerFields: step.headers)!,
            data: Data(), redirected: step.redirectedTo != nil)
        response.finalMethod = step.method
        return response
    }
}

/// Answers `u`/`p` for the hosts it is given, first challenges only, and keeps who asked.
final class HostCredentials: Interceptor, Sendable {
    var name: String { "host-credentials" }
    let hosts: Set<String>
    let asked = Locked([String]())
    init(_ hosts: Set<String>) { self.hosts = hosts }
    func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
        asked.withLock { $0.append("\(challenge.host) \(challenge.previousFailureCount)") }
        guard hosts.contains(challenge.host), challenge.previousFailureCount == 0 else { return .performDefault }
        return .useCredential(user: "u", password: "p")
    }
}

@Suite("Digest and Basic answers after redirects (scripted servers)")
struct ChallengesAfterRedirectsTests {
    func request(
        _ script: [RedirectedChallenges.Step], hosts: Set<String>, method: HTTPMethod = .get
    ) async throws -> (Response, [String], [URLRequest]) {
        let transport = RedirectedChallenges(script)
        let credentials = HostCredentials(hosts)
        let provider = Provider<Bin>(transport: transport, interceptors: [credentials])
        let target = try Bin(
            "form", method: method, task: method == .get ? .requestPlain : .requestData(Data("x=1".utf8)),
            base: URL(string: "http://a.test")!)
        let response = try await provider.request(target).value
        return (response, credentials.asked.withLock { $0 }, transport.sent.withLock { $0 })
    }

    /// A `stale` challenge from another origin than the one answered (after a redirect) never gets
    /// the first origin's credentials without asking: the hooks are asked, for its host.
    @Test func aStaleChallengeOfAnotherOriginAsksTheHooks() async throws {
        let (response, asked, sent) = try await request(
            [
                .init(status: 401, headers: ["WWW-Authenticate": #"Digest realm="r", nonce="n1", qop="auth""#]),
                .init(
                    redirectedTo: "http://b.test/elsewhere", status: 401,
                    headers: ["WWW-Authenticate": #"Digest realm="r", nonce="n2", qop="auth", stale=true"#]),
            ], hosts: ["a.test"])
        #expect(response.statusCode == 401)
        #expect(asked == ["a.test 0", "b.test 0"])
        #expect(sent.count == 2)
    }

    /// Each space counts its own rounds: the origin answered before a redirect leaves the next
    /// origin's challenge a first one; and the proxy is the same after the redirect, so its answer
    /// goes with the request sent to the other origin, which the proxy does not challenge again.
    @Test func anotherOriginsChallengeIsAFirstOneAndTheProxysAnswerStays() async throws {
        let (response, asked, sent) = try await request(
            [
                .init(status: 407, headers: ["Proxy-Authenticate": #"Basic realm="proxy""#]),
                .init(status: 401, headers: ["WWW-Authenticate": #"Basic realm="a""#]),
                .init(redirectedTo: "http://b.test/there", status: 401, headers: ["WWW-Authenticate": #"Basic realm="b""#]),
            ], hosts: ["a.test", "b.test"])
        #expect(response.statusCode == 200)
        #expect(asked == ["a.test 0", "a.test 0", "b.test 0"])
        try #require(sent.count == 4)
        #expect(sent[3].url?.absoluteString == "http://b.test/there")
        #expect(sent[3].value(forHTTPHeaderField: "Proxy-Authorization") == "Basic dTpw")
        #expect(sent[3].value(forHTTPHeaderField: "Authorization") == "Basic dTpw")
    }

    /// A redirect to another scheme may go through another proxy (the environment's are per
    /// scheme, and the transports leave `Proxy-Authorization` behind there): the chain's answer
    /// to the redirected challenge goes without the first proxy's answer, and that proxy's
    /// rounds and Digest answer do not count for the next proxy (its first `407` was taken for a
    /// second round and refused; a `stale` one got the first proxy's credentials unasked).
    @Test func anotherSchemeLeavesTheProxysAnswerAndRounds() async throws {
        let (response, asked, sent) = try await request(
            [
                .init(status: 407, headers: ["Proxy-Authenticate": #"Basic realm="proxy""#]),
                .init(redirectedTo: "https://b.test/there", status: 401, headers: ["WWW-Authenticate": #"Basic realm="b""#]),
            ], hosts: ["a.test", "b.test"])
        #expect(response.statusCode == 200)
        try #require(sent.count == 3)
        #expect(sent[2].url?.absoluteString == "https://b.test/there")
        #expect(sent[2].value(forHTTPHeaderField: "Proxy-Authorization") == nil)
        #expect(sent[2].value(forHTTPHeaderField: "Authorization") == "Basic dTpw")
        #expect(asked == ["a.test 0", "b.test 0"])

        let (second, secondAsked, _) = try await request(
            [
                .init(status: 407, headers: ["Proxy-Authenticate": #"Basic realm="p1""#]),
                .init(redirectedTo: "https://b.test/there", status: 407, headers: ["Proxy-Authenticate": #"Basic realm="p2""#]),
            ], hosts: ["a.test", "b.test"])
        #expect(second.statusCode == 200)
        #expect(secondAsked == ["a.test 0", "b.test 0"])

        let (_, staleAsked, staleSent) = try await request(
            [
                .init(status: 407, headers: ["Proxy-Authenticate": #"Digest realm="p", nonce="n1", qop="auth""#]),
                .init(
                    redirectedTo: "https://b.test/there", status: 407,
                    headers: ["Proxy-Authenticate": #"Digest realm="p", nonce="n2", qop="auth", stale=true"#]),
            ], hosts: ["a.test"])
        #expect(staleAsked == ["a.test 0", "b.test 0"])
        #expect(staleSent.count == 2)
    }

    /// Each space keeps its own Digest answer: the proxy's `stale` challenge, after the origin was
    /// answered, is answered again with the proxy's credentials without asking the hooks.
    @Test func aProxysStaleChallengeAfterTheOriginsReusesTheProxysAnswer() async throws {
        let (response, asked, sent) = try await request(
            [
                .init(status: 407, headers: ["Proxy-Authenticate": #"Digest realm="proxy", nonce="p1", qop="auth""#]),
                .init(status: 401, headers: ["WWW-Authenticate": #"Digest realm="origin", nonce="o1", qop="auth""#]),
                .init(status: 407, headers: ["Proxy-Authenticate": #"Digest realm="proxy", nonce="p2", qop="auth", stale=true"#]),
            ], hosts: ["a.test"])
        #expect(response.statusCode == 200)
        #expect(asked == ["a.test 0", "a.test 0"])
        try #require(sent.count == 4)
        #expect(sent[3].value(forHTTPHeaderField: "Proxy-Authorization")?.contains(#"nonce="p2""#) == true)
        #expect(sent[3].value(forHTTPHeaderField: "Authorization")?.contains(#"nonce="o1""#) == true)
    }

    /// Redirects from origin to origin, each challenging: an attempt sends ten answers at most,
    /// then delivers the challenge.
    @Test func anAttemptSendsTenAnswersAtMost() async throws {
        let hosts = (0..<12).map { "h\($0).test" }
        let script =
            [RedirectedChallenges.Step(status: 401, headers: ["WWW-Authenticate": #"Basic realm="r""#])]
            + hosts.map { .init(redirectedTo: "http://\($0)/next", status: 401, headers: ["WWW-Authenticate": #"Basic realm="r""#]) }
        let (response, asked, sent) = try await request(script, hosts: Set(hosts + ["a.test"]))
        #expect(response.statusCode == 401)
        #expect(asked.count == InterceptorChain.maxAnswersPerAttempt)
        #expect(sent.count == InterceptorChain.maxAnswersPerAttempt + 1)
    }

    /// A `303` back to the same URL turns a `POST` into a `GET`: the answer is a `GET` without the
    /// body, and its Digest covers `GET`.
    @Test func aSeeOtherToTheSameURLIsAnsweredWithItsGet() async throws {
        let (response, _, sent) = try await request(
            [
                .init(
                    redirectedTo: "http://a.test/form", method: "GET", status: 401,
                    headers: ["WWW-Authenticate": #"Digest realm="r", nonce="n", qop="auth", algorithm=SHA-256"#])
            ], hosts: ["a.test"], method: .post)
        #expect(response.statusCode == 200)
        try #require(sent.count == 2)
        #expect(sent[0].httpMethod == "POST")
        #expect(sent[1].httpMethod == "GET")
        #expect(sent[1].httpBody == nil)
        let answer = try #require(sent[1].value(forHTTPHeaderField: "Authorization"))
        let expected = try #require(
            ChosenChallenge.choose(from: #"Digest realm="r", nonce="n", qop="auth", algorithm=SHA-256"#)?.digest)
        let cnonce = try #require(answer.firstMatch(of: /cnonce="([^"]+)"/)?.1)
        #expect(
            answer
                == expected.authorization(
                    user: "u", password: "p", request: .init(method: "GET", uri: "/form", body: nil), cnonce: String(cnonce), nonceCount: 1))
    }
}

/// Answers each request in turn with the next status and fields of its script, then `200`.
final class ScriptedChallenges: Transport, Sendable {
    let sent = Locked([URLRequest]())
    let script: [(status: Int, headers: [String: String])]

    init(_ script: [(status: Int, headers: [String: String])]) { self.script = script }

    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        let count = sent.withLock {
            $0.append(request.urlRequest)
            return $0.count
        }
        let (status, headers) = count <= script.count ? script[count - 1] : (200, [:])
        return TransportResponse(
            response: HTTPURLResponse(url: request.urlRequest.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!,
            data: Data())
    }
}

/// Answers `407` with a Digest challenge until a request carries `Proxy-Authorization`.
final class ProxyChallengeTransport: Transport, Sendable {
    let sent = Locked([URLRequest]())

    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        sent.withLock { $0.append(request.urlRequest) }
        let url = request.urlRequest.url!
        let answered = request.urlRequest.value(forHTTPHeaderField: "Proxy-Authorization") != nil
        let headers = answered ? [:] : ["Proxy-Authenticate": #"Digest realm="proxy", nonce="pn", qop="auth", algorithm=SHA-256"#]
        return TransportResponse(
            response: HTTPURLResponse(url: url, statusCode: answered ? 200 : 407, httpVersion: "HTTP/1.1", headerFields: headers)!,
            data: Data())
    }
}
