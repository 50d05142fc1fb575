import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What only the libcurl transport does: redirect policies, compression, cookies, HTTP versions,
/// and the refusals of bad input. (Everything both transports do runs against both in the
/// transport, task-kind, progress, cancellation and fault suites.)
@Suite("Curl transport")
struct CurlTransportTests {
    func send(
        _ transport: CurlTransport, _ path: String, headers: [String: String] = [:], redirects: RedirectPolicy? = nil,
        base: URL? = nil
    ) async throws(TransportFailure) -> TransportResponse {
        let url = (try? base ?? TestServer.url())!.appendingPathComponent(path)
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return try await transport.send(TransportRequest(urlRequest: request, redirects: redirects))
    }

    func failure(_ body: () async throws(TransportFailure) -> TransportResponse) async -> TransportFailure? {
        do {
            let response = try await body()
            Issue.record("expected a failure, got status \(response.response.statusCode)")
            return nil
        } catch {
            return error
        }
    }

    /// A field whose value is empty, or only spaces and tabs (which are not part of a value, RFC
    /// 9110 §5.5), is sent with an empty value: libcurl left out a field with nothing after its
    /// colon, and for `Accept` its own `*/*` as well.
    /// A SOCKS proxy's failed handshake (libcurl's `CURLE_PROXY`, from 7.73) is a connection
    /// that could not be made, as one to an unreachable proxy is (it was `other`, never retried).
    @Test func aSOCKSHandshakeFailureCannotConnect() {
        let failure = CurlCall.failure(code: 97, detail: "Can't complete SOCKS5 connection to 10.0.0.1. (5)")
        #expect(failure == TransportFailure(kind: .cannotConnect, message: "Can't complete SOCKS5 connection to 10.0.0.1. (5) (curl error 97)"))
    }

    @Test func aFieldOfOnlySpacesIsSentEmpty() async throws {
        var request = URLRequest(url: try TestServer.url().appendingPathComponent("anything"))
        request.setValue(" ", forHTTPHeaderField: "X-Blank")
        request.setValue("\t", forHTTPHeaderField: "Accept")
        request.setValue("", forHTTPHeaderField: "X-Empty")
        let response = try await CurlTransport().send(TransportRequest(urlRequest: request))
        let headers = (try JSONSerialization.jsonObject(with: response.data) as? [String: Any])?["headers"] as? [String: String]
        #expect(headers?["X-Blank"] == "")
        #expect(headers?["Accept"] == "")
        #expect(headers?["X-Empty"] == "")
    }

    @Test func redirectsCanBeTurnedOffPerTransportAndPerRequest() async throws {
        var configuration = CurlTransport.Configuration()
        configuration.redirects = .doNotFollow
        let off = try CurlTransport(configuration: configuration)
        let delivered = try await send(off, "redirect/2")
        #expect(delivered.response.statusCode == 302)
        #expect(delivered.response.value(forHTTPHeaderField: "Location") == "/relative-redirect/1")
        let following = try CurlTransport()
        #expect(try await send(following, "redirect/2").response.statusCode == 200)
        #expect(try await send(following, "redirect/2", redirects: .doNotFollow).response.statusCode == 302)
        #expect(try await send(following, "redirect/3", redirects: RedirectPolicy(maxRedirects: 2)).response.statusCode == 302)
    }

    /// Both transports say whether they followed a redirect (`TransportResponse.redirected`).
    @Test(arguments: TransportKind.allCases) func theResponseSaysWhetherARedirectWasFollowed(_ kind: TransportKind) async throws {
        let transport = kind.make()
        func response(_ path: String, _ redirects: RedirectPolicy? = nil) async throws -> TransportResponse {
            let request = URLRequest(url: try TestServer.url().appendingPathComponent(path))
            return try await transport.send(TransportRequest(urlRequest: request, redirects: redirects))
        }
        let followed = try await response("redirect/2")
        #expect(followed.response.statusCode == 200 && followed.redirected)
        let direct = try await response("get")
        #expect(direct.response.statusCode == 200 && !direct.redirected)
        let delivered = try await response("redirect/1", .doNotFollow)
        #expect(delivered.response.statusCode == 302 && !delivered.redirected)
        let stopped = try await response("redirect/3", RedirectPolicy(maxRedirects: 1))
        #expect(stopped.response.statusCode == 302 && stopped.redirected)
    }

    @Test func aTargetsRedirectPolicyReachesTheTransport() async throws {
        struct NoRedirects: TargetType {
            var baseURL: URL
            var path: String { "redirect/1" }
            var method: HTTPMethod { .get }
            var redirectPolicy: RedirectPolicy? { RedirectPolicy.doNotFollow }
        }
        for transport in TransportKind.allCases {
            let provider = Provider<NoRedirects>(transport: transport.make())
            let response = try await provider.request(NoRedirects(baseURL: try TestServer.url())).value
            #expect(response.statusCode == 302, "\(transport)")
        }
    }

    /// A `303` turns a `POST` into a `GET` without the body, on both transports (URLSessionTransport
    /// follows a redirect that keeps a body itself: this one does not).
    @Test(arguments: TransportKind.allCases) func aPOSTRedirectedWith303BecomesAGET(_ kind: TransportKind) async throws {
        let transport = kind.make()
        let location = try TestServer.url().appendingPathComponent("anything/after").absoluteString
        var request = URLRequest(
            url: try TestServer.url().appendingPathComponent("redirect-to")
                .appending(queryItems: [URLQueryItem(name: "url", value: location), URLQueryItem(name: "status_code", value: "303")]))
        request.httpMethod = "POST"
        request.httpBody = Data("secret=body".utf8)
        let response = try await transport.send(TransportRequest(urlRequest: request))
        let echo = try JSONSerialization.jsonObject(with: response.data) as? [String: Any]
        #expect(echo?["method"] as? String == "GET")
        #expect(echo?["data"] as? String == "")
        #expect(response.response.url?.path == "/anything/after")
    }

    @Test func compressedBodiesAreDecodedWhenTheTransportAskedForThem() async throws {
        let transport = try CurlTransport()
        let gzip = try await send(transport, "gzip")
        let json = try JSONSerialization.jsonObject(with: gzip.data) as? [String: Any]
        #expect(json?["gzipped"] as? Bool == true)
        #expect(gzip.httpVersion == "HTTP/1.1")
        let deflate = try await send(transport, "deflate")
        #expect((try JSONSerialization.jsonObject(with: deflate.data) as? [String: Any])?["deflated"] as? Bool == true)
        if transport.libraryDescription.isEmpty == false, CurlLibraryProbe.hasBrotli {
            let brotli = try await send(transport, "brotli")
            #expect((try JSONSerialization.jsonObject(with: brotli.data) as? [String: Any])?["brotli"] as? Bool == true)
        }
    }

    @Test func aBodyInAnEncodingTheCallerAskedForPassesThroughUndecoded() async throws {
        let transport = try CurlTransport()
        let response = try await send(transport, "gzip", headers: ["Accept-Encoding": "gzip"])
        #expect(response.response.value(forHTTPHeaderField: "Content-Encoding") == "gzip")
        #expect(Array(response.data.prefix(2)) == [0x1F, 0x8B])
    }

    @Test func aBodyInAnEncodingNobodyAskedForIsDeliveredAsItCame() async throws {
        let response = try await send(try CurlTransport(), "fixture/unknown-encoding")
        #expect(response.response.statusCode == 200)
        #expect(response.response.value(forHTTPHeaderField: "Content-Encoding") == "x-custom")
        #expect(response.data == Data("opaque-bytes".utf8))
    }

    @Test func cookiesAreOffByDefaultAndKeptInMemoryWhenOn() async throws {
        let plain = try CurlTransport()
        let none = try await send(plain, "cookies/set/flavour/oat")
        #expect((try JSONSerialization.jsonObject(with: none.data) as? [String: Any])?["cookies"] as? [String: String] == [:])
        var configuration = CurlTransport.Configuration()
        configuration.cookies = true
        let jar = try CurlTransport(configuration: configuration)
        let set = try await send(jar, "cookies/set/flavour/oat")
        #expect((try JSONSerialization.jsonObject(with: set.data) as? [String: Any])?["cookies"] as? [String: String] == ["flavour": "oat"])
        let again = try await send(jar, "cookies")
        #expect((try JSONSerialization.jsonObject(with: again.data) as? [String: Any])?["cookies"] as? [String: String] == ["flavour": "oat"])
    }

    /// The jar keeps a cookie whatever the case of its field's name (HTTP/2 sends `set-cookie`),
    /// and never one a response sets for another domain (RFC 6265 §5.3): one site cannot plant a
    /// cookie that the jar would send to another.
    @Test func theJarTakesLowerCaseFieldsAndRefusesOtherDomains() async throws {
        var configuration = CurlTransport.Configuration()
        configuration.cookies = true
        let jar = try CurlTransport(configuration: configuration)
        func setting(_ name: String, _ value: String) async throws -> TransportResponse {
            var components = try #require(URLComponents(url: try TestServer.url(), resolvingAgainstBaseURL: false))
            components.path = "/response-headers"
            components.queryItems = [URLQueryItem(name: name, value: value)]
            return try await jar.send(TransportRequest(urlRequest: URLRequest(url: try #require(components.url))))
        }
        let lower = try await setting("set-cookie", "lower=1")
        #expect(lower.response.statusCode == 200)
        for planted in ["planted=1; Domain=example.com", "single=1; Domain=test", "parent=1; Domain=0.0.1"] {
            _ = try await setting("Set-Cookie", planted)
        }
        _ = try await setting("Set-Cookie", "exact=1; Domain=127.0.0.1")
        let sent = try await send(jar, "cookies")
        let cookies = (try JSONSerialization.jsonObject(with: sent.data) as? [String: Any])?["cookies"] as? [String: String]
        #expect(cookies == ["lower": "1", "exact": "1"])
        #expect(!CookieJar.domain(".example.com", isFor: "evil.test"))
        #expect(CookieJar.domain(".example.com", isFor: "www.example.com"))
        #expect(!CookieJar.domain(".com", isFor: "example.com"))
        #expect(CookieJar.domain("localhost", isFor: "localhost"))
    }

    /// `Proxy-Authorization` goes to the proxy only (libcurl's proxy list): a plain request through
    /// a proxy carries it (httpbin plays the proxy, echoing what it got), and a request without a
    /// proxy does not give it to the origin; nor would a tunnel (`CONNECT`) for an https URL.
    @Test func proxyAuthorizationGoesToTheProxyOnly() async throws {
        let field = ["Proxy-Authorization": "Basic cHJveHk6c2VjcmV0"]
        func received(_ response: TransportResponse) throws -> [String: String]? {
            (try JSONSerialization.jsonObject(with: response.data) as? [String: Any])?["headers"] as? [String: String]
        }
        let direct = try await send(try CurlTransport(), "headers", headers: field)
        #expect(try received(direct)?["Proxy-Authorization"] == nil)
        #expect(try received(direct)?["Host"] != nil)
        var configuration = CurlTransport.Configuration()
        configuration.proxy = .url(try TestServer.url().absoluteString)
        let proxied = try await send(
            try CurlTransport(configuration: configuration), "headers", headers: field, base: URL(string: "http://origin.test")!)
        #expect(try received(proxied)?["Proxy-Authorization"] == "Basic cHJveHk6c2VjcmV0")
        #expect(try received(proxied)?["Host"] == "origin.test")
    }

    /// The transport's sockets are close-on-exec: a process the app starts (`Process`, `posix_spawn`)
    /// inherits none of its connections. Checked while the request waits for its answer: the
    /// socket connected to this test's own server (no other test knows its port), found by its
    /// inode in `/proc/net/tcp`, has `FD_CLOEXEC`. (libcurl 7.88's and 8.12's own `socket()`
    /// set no such flag.)
    #if os(Linux)
    @Test func connectionsAreNotInheritedByChildProcesses() async throws {
        let port = Locked(0)
        let seen = Locked([String]())
        let server = try RefusingProxy { _ in
            let checked = Self.closeOnExec(ofSocketTo: port.withLock { $0 })
            seen.withLock { $0.append(checked) }
            return "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
        port.withLock { $0 = server.port }
        let response = try await send(try CurlTransport(), "x", base: URL(string: "http://127.0.0.1:\(server.port)")!)
        #expect(response.response.statusCode == 204)
        #expect(seen.withLock { $0 } == ["cloexec"])
    }

    /// `cloexec` or `inherited` for each descriptor of this process connected to 127.0.0.1:`port`,
    /// or why there is none.
    static func closeOnExec(ofSocketTo port: Int) -> String {
        // To its end: Foundation reads a /proc file one page deep, and this table is longer when
        // other tests hold connections.
        guard let bytes = FileDescriptor.readToEnd("/proc/net/tcp", limit: 64 << 20) else { return "no /proc/net/tcp" }
        let table = String(decoding: bytes, as: UTF8.self)
        let remote = String(format: "0100007F:%04X", port)
        // sl, local address, remote address, state, queues, timer, retransmits, uid, timeout, inode.
        let inodes = table.split(separator: "\n").dropFirst().compactMap { line -> String? in
            let fields = line.split(separator: " ")
            return fields.count > 9 && fields[2] == remote ? "socket:[\(fields[9])]" : nil
        }
        guard !inodes.isEmpty else { return "no socket connected to port \(port)" }
        var found: [String] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            guard let fd = Int32(name), let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"),
                inodes.contains(link)
            else { continue }
            let flags = fcntl(fd, F_GETFD)
            found.append(flags >= 0 && flags & FD_CLOEXEC != 0 ? "cloexec" : "inherited")
        }
        return found.isEmpty ? "no descriptor connected to port \(port)" : found.joined(separator: ",")
    }
    #endif

    /// A proxy that refuses the tunnel says so, with its status: a `403` (its policy) is `other`
    /// and not retried; a `502` (it could not reach the origin) is `cannotConnect`, retried as a
    /// refused connection is. Both were `connectionLost` ("CONNECT tunnel failed"), the status
    /// lost, and the `403` sent three times.
    @Test(arguments: [(403, TransportFailureKind.other, 1), (502, .cannotConnect, 3)])
    func aProxyRefusingTheTunnelSaysSo(_ status: Int, _ kind: TransportFailureKind, _ connects: Int) async throws {
        let proxy = try RefusingProxy { _ in "HTTP/1.1 \(status) Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" }
        var configuration = CurlTransport.Configuration()
        configuration.proxy = .url("http://127.0.0.1:\(proxy.port)")
        let provider = Provider<Bin>(transport: try CurlTransport(configuration: configuration))
        let result = await provider.request(try Bin("tunnelled", base: URL(string: "https://origin.test")!))
            .retry(RetryPolicy(exponentialBackoffScale: 0.001)).result
        guard case .failure(.underlying(let failure, _)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure.kind == kind)
        #expect(failure.message == "the proxy refused the tunnel to origin.test:443: its answer to CONNECT was \(status)")
        #expect(proxy.heads.withLock { $0 }.count == connects)
    }

    /// A proxy's `407` to the tunnel's `CONNECT` (an https URL) reaches the chain as a `407`
    /// response, not a transport error: the credential hooks are asked (a proxy challenge), and
    /// the answer goes to the proxy in the next `CONNECT`. This proxy refuses every tunnel, so the
    /// last `407` is delivered after the hook's one round.
    @Test func aProxysChallengeToTheTunnelIsAnswered() async throws {
        /// Answers `u`/`p` to a first proxy challenge and keeps what it was asked.
        final class ProxyCredentials: Interceptor, Sendable {
            var name: String { "proxy-credentials" }
            let asked = LockedCounter()
            func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
                asked.append("\(challenge.isProxy) \(challenge.method) \(challenge.realm ?? "") \(challenge.previousFailureCount)")
                return challenge.isProxy && challenge.previousFailureCount == 0 ? .useCredential(user: "u", password: "p") : .performDefault
            }
        }
        let proxy = try RefusingProxy()
        var configuration = CurlTransport.Configuration()
        configuration.proxy = .url("http://127.0.0.1:\(proxy.port)")
        let credentials = ProxyCredentials()
        let provider = Provider<Bin>(transport: try CurlTransport(configuration: configuration), interceptors: [credentials])
        let response = try await provider.request(try Bin("tunnelled", base: URL(string: "https://origin.test")!)).value
        #expect(response.statusCode == 407)
        // The proxy's answer to the CONNECT is a transfer's too, measured to the proxy.
        #expect(response.metrics?.remotePort == Int(proxy.port))
        #expect(response.value(forHTTPHeaderField: "Proxy-Authenticate") == #"Basic realm="proxy""#)
        #expect(credentials.asked.log == ["true Basic proxy 0", "true Basic proxy 1"])
        let heads = proxy.heads.withLock { $0 }
        try #require(heads.count == 2)
        #expect(heads[0].hasPrefix("CONNECT origin.test:443 HTTP/1.1\r\n"))
        #expect(!heads[0].lowercased().contains("proxy-authorization"))
        #expect(heads[1].contains("Proxy-Authorization: Basic dTpw\r\n"))
    }

    /// A Digest answer to the tunnel's `407` covers what was challenged: `CONNECT` and its
    /// target (`origin.test:443`), no body. It covered the request's method and path, which a
    /// proxy refuses. A host past ASCII is the target as libcurl sends it (IDNA's `xn--` form;
    /// the answer named it in percent-encoded UTF-8); a host written percent-encoded goes out
    /// decoded, in that form too (the answer named it as written).
    @Test(arguments: [
        ("https://origin.test", "origin.test:443"), ("https://bücher.example:8443", "xn--bcher-kva.example:8443"),
        ("https://api%2Eexample.test", "api.example.test:443"), ("https://b%C3%BCcher.example", "xn--bcher-kva.example:443"),
    ])
    func aProxysDigestChallengeToTheTunnelIsAnsweredForTheConnect(_ base: String, _ tunnel: String) async throws {
        let challenge = #"Digest realm="proxy", nonce="n0", qop="auth", algorithm=SHA-256"#
        let proxy = try RefusingProxy(challenge: challenge)
        let provider = try proxied(through: proxy)
        let target = try Bin("tunnelled", method: .post, task: .requestData(Data("body".utf8)), base: URL(string: base)!)
        #expect(try await provider.request(target).value.statusCode == 407)
        let heads = proxy.heads.withLock { $0 }
        try #require(heads.count == 2)
        let answer = try #require(heads[1].firstMatch(of: /Proxy-Authorization: (Digest [^\r]+)\r\n/)?.1)
        let cnonce = try #require(answer.firstMatch(of: /cnonce="([^"]+)"/)?.1)
        let digest = try #require(ChosenChallenge.choose(from: challenge)?.digest)
        #expect(heads[0].hasPrefix("CONNECT \(tunnel) HTTP/1.1\r\n"), "\(heads[0])")
        #expect(answer.contains("uri=\"\(tunnel)\""), "\(answer)")
        #expect(
            String(answer)
                == digest.authorization(
                    user: "u", password: "p", request: .init(method: "CONNECT", uri: tunnel, body: .bytes([])), cnonce: String(cnonce),
                    nonceCount: 1))
    }

    /// A redirect to another origin through the same proxy keeps `Proxy-Authorization` (the
    /// proxy is the same; the field goes to it alone): it was dropped with `Authorization`, and
    /// the proxy's new `407` counted as a failed round.
    @Test func aRedirectThroughTheSameProxyKeepsTheProxysAnswer() async throws {
        let proxy = try RefusingProxy { head in
            let close = "Content-Length: 0\r\nConnection: close\r\n\r\n"
            guard head.lowercased().contains("proxy-authorization: basic dtpw") else {
                return "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"proxy\"\r\n" + close
            }
            return head.hasPrefix("GET http://a.test/")
                ? "HTTP/1.1 302 Found\r\nLocation: http://b.test/next\r\n" + close : "HTTP/1.1 200 OK\r\n" + close
        }
        let provider = try proxied(through: proxy)
        let response = try await provider.request(try Bin("start", base: URL(string: "http://a.test")!)).value
        #expect(response.statusCode == 200)
        let heads = proxy.heads.withLock { $0 }
        #expect(
            heads.map { $0.components(separatedBy: "\r\n")[0] } == [
                "GET http://a.test/start HTTP/1.1", "GET http://a.test/start HTTP/1.1", "GET http://b.test/next HTTP/1.1",
            ])
    }

    /// Under the environment's proxies, the proxy is chosen per scheme (`http_proxy`,
    /// `https_proxy`): a redirect to another scheme may go through another proxy, which must not
    /// get this one's `Proxy-Authorization`.
    @Test func proxyCredentialsStayOnlyWhileTheProxyIsTheSame() {
        let a = URL(string: "http://a.test/x")!
        let b = URL(string: "http://b.test/y")!
        let secure = URL(string: "https://b.test/y")!
        #expect(CurlCall.keepsProxy(from: a, to: b, proxy: .environment))
        #expect(!CurlCall.keepsProxy(from: a, to: secure, proxy: .environment))
        #expect(CurlCall.keepsProxy(from: a, to: secure, proxy: .url("http://127.0.0.1:3128")))
        #expect(!CurlCall.keepsProxy(from: a, to: b, proxy: .none))
    }

    /// One origin whichever way its host is written: a name past ASCII in its own form, IDNA's or
    /// percent-encoded, in any case (the libcurl transport sends all three to one host, and a
    /// redirect between two of them was taken for one to another origin, its credentials dropped
    /// and the response's hooks told so). Another scheme, port or host, an address written
    /// otherwise, or a trailing dot is another origin.
    @Test func anOriginIsOneWhicheverWayItsHostIsWritten() throws {
        func url(_ text: String) throws -> URL { try #require(URL(string: text)) }
        let same = [
            "https://xn--bcher-kva.example/a", "https://b%C3%BCcher.example/b", "https://BÜCHER.example:443/c", "https://B%C3%9CCHER.example/",
        ]
        for a in same {
            for b in same { #expect(SessionRouter.sameOrigin(try url(a), try url(b)), "\(a) \(b)") }
        }
        let other = [
            "http://xn--bcher-kva.example/", "https://xn--bcher-kva.example:8443/", "https://bucher.example/", "https://xn--bcher-kva.example./",
            "https://b%C3%BCcher.example.evil.test/",
        ]
        for b in other { #expect(!SessionRouter.sameOrigin(try url(same[1]), try url(b)), "\(b)") }
        #expect(!SessionRouter.sameOrigin(try url("https://127.0.0.1/"), try url("https://127.1/")))
    }

    @Test func aURLLibcurlRefusesIsATypedFailure() async throws {
        let transport = try CurlTransport()
        let refused = await failure { () throws(TransportFailure) in
            try await transport.send(TransportRequest(urlRequest: URLRequest(url: URL(string: "http://127.0.0.1:99999/get")!)))
        }
        #expect(refused?.kind == .other)
        #expect(refused?.message.hasPrefix("libcurl refused the URL: ") == true)
        let scheme = await failure { () throws(TransportFailure) in
            try await transport.send(TransportRequest(urlRequest: URLRequest(url: URL(string: "ftp://127.0.0.1/file")!)))
        }
        #expect(
            scheme == TransportFailure(kind: .other, message: "cannot send ftp://127.0.0.1/file: only http and https URLs with a host are supported"))
    }

    @Test func aHeaderWithCRLFNeverReachesTheWire() async throws {
        // URLRequest keeps such a value when set through allHTTPHeaderFields: the transport refuses it.
        let transport = try CurlTransport()
        var request = URLRequest(url: try TestServer.url().appendingPathComponent("headers"))
        request.allHTTPHeaderFields = ["X-Injected": "a\r\nEvil: yes"]
        let refused = await failure { () throws(TransportFailure) in try await transport.send(TransportRequest(urlRequest: request)) }
        #expect(refused == TransportFailure(kind: .other, message: "refused to send header X-Injected: its value contains CR, LF or NUL"))
        // Through a target's headers the value never reaches the transport at all: it is refused by name.
        let result = await Provider<Bin>(transport: transport)
            .request(try Bin("headers", headers: ["X-Injected": "a\r\nEvil: yes"])).result
        guard case .failure(.invalidHeader(let name, let reason)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(name == "X-Injected" && reason == "has a value holding CR, LF or NUL")
        #expect(transport.activeTransferCount == 0)
    }

    @Test func aRedirectWithoutLocationIsDeliveredWithItsBody() async throws {
        // (URLSession on Linux delivers the 302 without its body.)
        let response = try await TransportKind.curl.provider().request(try Bin("fixture/no-location")).value
        #expect(response.statusCode == 302)
        #expect(try response.mapJSON()["moved"]?.stringValue == "nowhere")
    }

    @Test func badTLSConfigurationIsRefusedNamingTheFile() throws {
        func refusal(_ tls: TLSConfiguration) -> CurlTransportError? {
            var configuration = CurlTransport.Configuration()
            configuration.tls = tls
            do {
                _ = try CurlTransport(configuration: configuration)
                return nil
            } catch {
                return error
            }
        }
        #expect(
            refusal(TLSConfiguration(trustRoots: .systemAnd([.file("/nonexistent/ca.pem")])))
                == CurlTransportError(.invalidConfiguration, "tls: CA certificate /nonexistent/ca.pem: no such file"))
        let notPEM = FileManager.default.temporaryDirectory.appendingPathComponent("not-pem-\(UUID().uuidString).pem")
        try Data("just text".utf8).write(to: notPEM)
        defer { try? FileManager.default.removeItem(at: notPEM) }
        #expect(
            refusal(TLSConfiguration(trustRoots: .only([.file(notPEM.path)])))
                == CurlTransportError(.invalidConfiguration, "tls: CA certificate \(notPEM.path): not PEM (no -----BEGIN CERTIFICATE block)"))
        // A FIFO (which would block the read for good) and a device are no PEM file.
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("fifo-\(UUID().uuidString).pem").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        for path in [fifo, "/dev/zero"] {
            #expect(
                refusal(TLSConfiguration(trustRoots: .only([.file(path)])))
                    == CurlTransportError(.invalidConfiguration, "tls: CA certificate \(path): not a regular file"))
        }
        #expect(
            refusal(TLSConfiguration(pinnedPublicKeys: ["md5//abc"]))
                == CurlTransportError(
                    .invalidConfiguration,
                    "tls: pinned public key \"md5//abc\": expected sha256// followed by the base64 of a 32-byte SHA-256 digest"))
        #expect(
            refusal(TLSConfiguration(trustRoots: .only([])))
                == CurlTransportError(.invalidConfiguration, "tls: trustRoots .only([]) trusts nothing; list at least one certificate"))
        var overrides = CurlTransport.Configuration()
        overrides.tlsOverrides = [
            "internal.example": TLSConfiguration(clientCertificate: .init(certificate: .pem(Data("x".utf8)), privateKey: .file("/k")))
        ]
        #expect(
            throws: CurlTransportError(
                .invalidConfiguration,
                "tls for internal.example: client certificate (PEM bytes): not PEM (no -----BEGIN CERTIFICATE block)")
        ) {
            try CurlTransport(configuration: overrides)
        }
    }

    @Test func withoutLibcurlTheDefaultFallsBackToURLSessionAndSaysSoOnce() {
        let services = PluginServices()
        let lines = LockedCounter()
        services.setLogHandler { level, plugin, message in lines.append("\(level) \(plugin) \(message)") }
        let transport = Provider<Bin>.defaultTransport(services: services) { () throws(CurlTransportError) -> CurlTransport in
            var configuration = CurlTransport.Configuration()
            configuration.libraryPath = "/nonexistent/libcurl.so.4"
            return try CurlTransport(configuration: configuration)
        }
        #expect(transport is URLSessionTransport)
        #expect(
            lines.log == [
                "warning pluginhost CurlTransport unavailable (libraryUnavailable: cannot load libcurl from "
                    + "/nonexistent/libcurl.so.4: no such file); using URLSessionTransport"
            ])
        #if os(Linux)
        #expect(Provider<Bin>.defaultTransport(services: services) is CurlTransport)
        #endif
    }

    @Test func aConfiguredProxyIsUsedAndABadOneRefused() async throws {
        var configuration = CurlTransport.Configuration()
        let closed = closedPortURL()
        configuration.proxy = .url(closed.absoluteString)
        let viaProxy = try CurlTransport(configuration: configuration)
        let failed = await failure { () throws(TransportFailure) in try await send(viaProxy, "get") }
        #expect(failed?.kind == .cannotConnect)
        #expect(failed?.message.contains(String(closed.port!)) == true)
        configuration.proxy = .url(closed.absoluteString, noProxy: ["127.0.0.1"])
        #expect(try await send(try CurlTransport(configuration: configuration), "get").response.statusCode == 200)
        configuration.proxy = .url("not a url")
        #expect(throws: CurlTransportError(.invalidConfiguration, "proxy \"not a url\": not a URL with a host")) {
            try CurlTransport(configuration: configuration)
        }
    }

    /// `no_proxy` in the environment (Tests/test sets it to 127.0.0.1) does not open a way past
    /// a proxy the configuration names: only the configuration's own exceptions do.
    @Test func anExplicitProxyIgnoresNoProxyFromTheEnvironment() async throws {
        guard ProcessInfo.processInfo.environment["no_proxy"]?.contains("127.0.0.1") == true else {
            throw TestServer.Missing(variable: "no_proxy")
        }
        var configuration = CurlTransport.Configuration()
        let closed = closedPortURL()
        configuration.proxy = .url(closed.absoluteString, noProxy: [])
        let transport = try CurlTransport(configuration: configuration)
        let failed = await failure { () throws(TransportFailure) in try await send(transport, "get") }
        #expect(failed?.kind == .cannotConnect)
        #expect(failed?.message.contains(String(closed.port!)) == true)
    }

    /// The method goes into the request line as it is: one that is no token (a space, CR, LF)
    /// is refused before anything is sent, as an invalid header name is.
    @Test func aMethodThatIsNoTokenIsRefused() async throws {
        var request = URLRequest(url: try TestServer.url().appendingPathComponent("anything"))
        request.httpMethod = "GET / HTTP/1.1\r\nX-Evil: 1\r\n\r\nGET"
        let transport = try CurlTransport()
        let failed = await failure { () throws(TransportFailure) in try await transport.send(TransportRequest(urlRequest: request)) }
        let refusal = #"refused to send a request with an invalid method "GET / HTTP/1.1\r\nX-EVIL: 1\r\n\r\nGET""#
        #expect(failed == TransportFailure(kind: .other, message: refusal))
    }

    /// PUT and PATCH carry content: with no body they say so (`Content-Length: 0`), as POST does.
    @Test func aPutOrPatchWithoutABodySendsAZeroLength() async throws {
        for method in ["PUT", "PATCH", "POST"] {
            var request = URLRequest(url: try TestServer.url().appendingPathComponent("anything"))
            request.httpMethod = method
            let response = try await CurlTransport().send(TransportRequest(urlRequest: request))
            let echoed = try JSONSerialization.jsonObject(with: response.data) as? [String: Any]
            #expect(echoed?["method"] as? String == method)
            #expect((echoed?["headers"] as? [String: Any])?["Content-Length"] as? String == "0", "\(method)")
        }
    }

    /// Trailer fields after a chunked body are not header fields of the response: no
    /// `X-Checksum`, and no cookie stored from a trailer's `Set-Cookie`.
    @Test func trailerFieldsAreNotHeaderFields() async throws {
        var configuration = CurlTransport.Configuration()
        configuration.cookies = true
        let transport = try CurlTransport(configuration: configuration)
        let response = try await send(transport, "trailers", base: try TestServer.url("FAULT_URL"))
        #expect(response.response.statusCode == 200)
        #expect(response.data == Data("ok".utf8))
        #expect(response.response.value(forHTTPHeaderField: "X-Checksum") == nil)
        #expect(response.response.value(forHTTPHeaderField: "Set-Cookie") == nil)
        // Cookies go by host, not port: httpbin, on 127.0.0.1 too, would be sent `t=1`.
        let echoed = try await send(transport, "cookies")
        #expect((try JSONSerialization.jsonObject(with: echoed.data) as? [String: Any])?["cookies"] as? [String: String] == [:])
    }

    /// A body given as a stream (`httpBodyStream`, as a request closure may set it) is sent
    /// whole, with its length and no form label, and again after a `307` that keeps the body
    /// (URL loading sent it chunked, and nothing after the `307`). The `307` comes once the server
    /// has read the body: answered before, libcurl 7.88 may end the request as a broken pipe
    /// (README, early answers), which is not what this test is about.
    @Test(arguments: TransportKind.allCases) func aBodyStreamIsSentWholeAndAgainAfterA307(_ kind: TransportKind) async throws {
        let text = String(repeating: "stream-body-", count: 20_000)  // 240,000 bytes: several reads
        let echo = try TestServer.url().appendingPathComponent("anything/streamed").absoluteString
        let provider = streamingProvider(text, transport: kind.make())
        for target in [
            try Bin("anything/streamed", method: .put),
            try Bin(
                "fixture/read-first/redirect-to", method: .post,
                task: .requestParameters(parameters: ["url": echo, "status_code": 307], encoding: URLEncoding.queryString)),
        ] {
            let response = try await provider.request(target).value
            let echoed = try JSONSerialization.jsonObject(with: response.data) as? [String: Any]
            let headers = echoed?["headers"] as? [String: Any]
            #expect(echoed?["method"] as? String == target.method.rawValue, "\(target.path)")
            #expect(echoed?["url"] as? String == echo, "\(target.path)")
            let sent = echoed?["data"] as? String ?? ""
            #expect(sent == text ? true : false, "\(target.path): \(sent.utf8.count) bytes arrived, not the 240,000 sent")
            #expect(headers?["Content-Length"] as? String == "240000", "\(target.path)")
            #expect(headers?["Content-Type"] == nil, "\(target.path)")
        }
    }

    /// Reading a body stream stops when the provider cancels the request (`cancelAll`, which
    /// cancels no task), not when the stream ends: this one would take seconds.
    @Test func readingABodyStreamStopsWhenTheRequestIsCancelled() async throws {
        /// Zeros, a read a millisecond, for 3,000 reads at most; counted where the test reads them
        /// too (the request ends before its reader's last read does).
        final class SlowZeros: InputStream, @unchecked Sendable {
            let reads = Locked(0)
            let closed = Locked(false)
            private var status: Stream.Status = .notOpen
            override var streamStatus: Stream.Status { status }
            override func open() { status = .open }
            override func close() {
                status = .closed
                closed.withLock { $0 = true }
            }
            override var hasBytesAvailable: Bool { reads.withLock { $0 } < 3_000 }
            override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
                guard reads.withLock({ $0 }) < 3_000 else { return 0 }
                reads.withLock { $0 += 1 }
                usleep(1000)
                buffer.initialize(repeating: 0, count: maxLength)
                return maxLength
            }
        }
        /// The stream, handed to the request closure (streams are not `Sendable`; this one is read
        /// by one transfer at a time).
        final class Held: @unchecked Sendable {
            let stream = SlowZeros(data: Data())
        }
        let held = Held()
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                request.httpBodyStream = held.stream
                return request
            }, transport: try CurlTransport())
        let target = try Bin("anything", method: .post)
        let request = Task { await provider.request(target).result }
        try await Task.sleep(nanoseconds: 200_000_000)
        provider.cancelAll()
        let result = await request.value
        guard case .failure(.cancelled) = result else {
            Issue.record("got \(result)")
            return
        }
        // The reader stops after the read it was in (and closes the stream), not at the stream's end.
        #expect(await eventually { held.stream.closed.withLock { $0 } })
        let reads = held.stream.reads.withLock { $0 }
        #expect(reads < 3_000, "\(reads) reads")
    }

    /// A provider on `CurlTransport` whose requests' bodies are gated streams of `gate`.
    func gatedProvider(_ gate: StreamGate) throws -> Provider<Bin> {
        Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                let stream = GatedStream(data: Data())
                stream.gate = gate
                request.httpBodyStream = stream
                return request
            }, transport: try CurlTransport())
    }

    /// Reading a body stream holds no thread of the concurrency pool: with more requests whose
    /// streams block than the pool has threads, another request still goes and comes back.
    @Test func aBlockedBodyStreamLeavesThePoolFree() async throws {
        let gate = StreamGate()
        let uploading = try gatedProvider(gate)
        let upload = try Bin("anything", method: .post)
        // More than the pool's threads, whether it counts the cores online or those this process may use.
        let blocked = max(ProcessInfo.processInfo.activeProcessorCount, sysconf(Int32(_SC_NPROCESSORS_ONLN))) + 1
        let uploads = (0..<blocked).map { _ in Task { await uploading.request(upload).result } }
        #expect(await gate.reached(blocked), "the uploads did not reach their streams' reads")
        let plain = try await Provider<Bin>(transport: try CurlTransport()).request(try Bin("get")).value
        #expect(plain.statusCode == 200)
        #expect(gate.timedOut.withLock { $0 } == false, "the request waited for the blocked streams")
        gate.open(blocked)
        for upload in uploads {
            let echoed = try await upload.value.get().mapJSON()
            #expect(echoed["data"]?.stringValue == "gggg")
        }
    }

    /// A request cancelled while its body stream's read blocks ends at once, cancelled: the read
    /// is left to end on its own thread.
    @Test func aRequestCancelledWhileItsStreamBlocksEnds() async throws {
        let gate = StreamGate()
        let provider = try gatedProvider(gate)
        let target = try Bin("anything", method: .post)
        let upload = Task { await provider.request(target).result }
        #expect(await gate.reached(1), "the upload did not reach its stream's read")
        provider.cancelAll()
        let result = await upload.value
        guard case .failure(.cancelled) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(gate.timedOut.withLock { $0 } == false, "the request waited for the blocked read")
        gate.open(1)
    }

    /// A stream an earlier send of the call stopped waiting for (its reader may still be in a
    /// read) is not touched again: the next send of the call fails, saying why.
    @Test func aStreamLeftInAReadIsNotTouchedAgain() async throws {
        /// Counts every look at its status.
        final class Watched: InputStream, @unchecked Sendable {
            let looks = Locked(0)
            override var streamStatus: Stream.Status {
                looks.withLock { $0 += 1 }
                return .notOpen
            }
        }
        let stream = Watched(data: Data("x".utf8))
        var request = URLRequest(url: try TestServer.url().appendingPathComponent("anything"))
        request.httpMethod = "POST"
        request.httpBodyStream = stream
        var sending = TransportRequest(urlRequest: request)
        sending.bodySpool = BodySpool()
        sending.bodySpool?.abandon(stream)
        var failed: TransportFailure?
        do throws(TransportFailure) {
            _ = try await SpooledBody.reading(sending)
        } catch {
            failed = error
        }
        #expect(
            failed
                == TransportFailure(
                    kind: .other, message: "the request's body stream is still in a read an earlier send of this call stopped waiting for"))
        #expect(stream.looks.withLock { $0 } == 0)
    }

    /// A stream is read once per call: one opened before the call (by an earlier call, or anyone) is refused,
    /// never sent short.
    @Test func aBodyStreamReadAlreadyIsRefused() async throws {
        var request = URLRequest(url: try TestServer.url().appendingPathComponent("anything"))
        request.httpMethod = "POST"
        let stream = InputStream(data: Data("once".utf8))
        stream.open()
        request.httpBodyStream = stream
        let transport = try CurlTransport()
        let failed = await failure { () throws(TransportFailure) in try await transport.send(TransportRequest(urlRequest: request)) }
        let refusal =
            "the request's body stream was read already (a stream is read once per call: give a body another call sends again as data or a file)"
        #expect(failed == TransportFailure(kind: .other, message: refusal))
    }

    /// A body stream is read once per call: the sends after it (each answering a Digest
    /// challenge, and a retry's) send the bytes kept from the first read, whole.
    @Test(arguments: TransportKind.allCases) func aBodyStreamIsSentAgainToAnswerAChallengeAndOnARetry(_ kind: TransportKind) async throws {
        /// Retries the first attempt once, whatever its result.
        struct RetryFirstAttempt: Interceptor {
            var name: String { "retry-first" }
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                context.attempt == 1 ? .retry() : .proceed
            }
        }
        let text = String(repeating: "stream-body-", count: 20_000)  // 240,000 bytes: several reads
        let credentials = CountingCredentials()
        let provider = streamingProvider(text, transport: kind.make(), interceptors: [credentials, RetryFirstAttempt()])
        let key = counterKey()
        let target = try Bin(
            "fixture/digest", method: .post,
            task: .requestParameters(parameters: ["key": key, "algorithm": "SHA-256"], encoding: URLEncoding.queryString))
        let response = try await provider.request(target).value
        let json = try response.mapJSON()
        #expect(response.statusCode == 200, "\(json)")
        #expect(json["bodySha256"]?.stringValue == SHA256.hex(SHA256.hash(Array(text.utf8))))
        // Each attempt: the challenge, then the answer; the hooks asked once per attempt.
        #expect(try await serverHits(key) == 4)
        #expect(credentials.asked.value == 2)
    }

    /// A body stream that goes on past `RequestLimits.maxStreamedBodyBytes` fails the request
    /// before anything is sent (the server sees no request), naming the limit and the bytes read
    /// (one past the limit: no read takes more), and a retry of the call fails alike (the stream, read in part, is not read
    /// again); a stream within its limit is sent whole.
    @Test(arguments: TransportKind.allCases) func aBodyStreamPastItsLimitFailsBeforeAnythingIsSent(_ kind: TransportKind) async throws {
        /// Retries a first attempt that failed, once.
        struct RetryAFailedFirstAttempt: Interceptor {
            let failures = LockedCounter()
            var name: String { "retry-failed" }
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                guard let failure = result.failure else { return .proceed }
                failures.append(failure.message)
                return context.attempt == 1 ? .retry() : .proceed
            }
        }
        let text = String(repeating: "stream-body-", count: 20_000)  // 240,000 bytes
        let retry = RetryAFailedFirstAttempt()
        let provider = streamingProvider(text, transport: kind.make(), interceptors: [retry])
        for limit: Int64 in [100_000, 240_000] {
            let key = counterKey()
            var target = try counted(key, method: .post)
            target.limits = RequestLimits(maxStreamedBodyBytes: limit)
            let result = await provider.request(target).result
            if limit == 240_000 {
                #expect(try result.get().statusCode == 200)
                #expect(try await serverHits(key) == 1)
                continue
            }
            guard case .failure(.underlying(let failure, _)) = result else {
                Issue.record("not the limit's failure: \(result)")
                continue
            }
            #expect(
                failure
                    == TransportFailure(
                        kind: .other, message: "the request's body stream passed maxStreamedBodyBytes (100000 bytes): 100001 bytes read",
                        limit: 100_000, observedBytes: 100_001))
            #expect(try await serverHits(key) == 0)
            let message = "the request's body stream passed maxStreamedBodyBytes (100000 bytes): 100001 bytes read"
            #expect(retry.failures.log == [message, message], "both attempts, the retry's without a read")
        }
    }

    /// A call whose sends go through two transports: the body stream `CurlTransport` kept (in a
    /// file without a name) is refused by `URLSessionTransport` with the reason, never sent empty.
    @Test func aBodyStreamKeptByCurlIsRefusedByURLSession() async throws {
        /// Sends the call's first try through libcurl, the others through URL loading.
        final class Switching: Transport {
            let curl: CurlTransport
            let session = URLSessionTransport()
            let sends = LockedCounter()
            init() throws { curl = try CurlTransport() }
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                sends.increment() == 1 ? try await curl.send(request) : try await session.send(request)
            }
        }
        struct RetryFirstAttempt: Interceptor {
            var name: String { "retry-first" }
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                context.attempt == 1 ? .retry() : .proceed
            }
        }
        let transport = try Switching()
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                request.httpBodyStream = InputStream(data: Data("streamed".utf8))
                return request
            }, transport: transport, interceptors: [RetryFirstAttempt()])
        let result = await provider.request(try Bin("anything", method: .post)).result
        guard case .failure(.underlying(let failure, _)) = result else {
            Issue.record("expected a transport failure, got \(result)")
            return
        }
        #expect(transport.sends.value == 2)
        #expect(failure.kind == .other)
        #expect(
            failure.message
                == "the request's body stream was read into a file without a name by another transport "
                + "(URLSessionTransport maps the file by its name): send every try of a call through one transport")
    }

    /// A download redirected to a URL that cannot be sent (no host) fails with the reason, and
    /// leaves no partial file: the hop before it opened one.
    @Test func aDownloadRedirectedNowhereLeavesNoFile() async throws {
        let directory = NSTemporaryDirectory() + "pluginhost-redirect-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let destination = URL(fileURLWithPath: directory + "/file.bin")
        let target = try Bin(
            "redirect-to",
            task: .downloadParameters(
                parameters: ["url": "http:///x", "status_code": 302], encoding: URLEncoding.default, destination: .file(destination)))
        let partials = {
            (try? FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()))?.filter { $0.hasSuffix(".download") }.count ?? 0
        }
        let before = partials()
        do {
            let response = try await Provider<Bin>(transport: try CurlTransport()).request(target).value
            Issue.record("expected a failure, got \(response.statusCode)")
        } catch let error as NetworkError {
            guard case .underlying(let failure, _) = error else {
                Issue.record("expected a transport failure, got \(error)")
                return
            }
            #expect(failure.kind == .other)
            #expect(failure.message.contains("only http and https URLs with a host are supported"), "\(failure.message)")
        }
        #expect(!FileManager.default.fileExists(atPath: destination.path))
        // Other suites' downloads come and go in the same directory meanwhile: theirs end within
        // seconds, a leaked one stays.
        var settled = partials() <= before
        for _ in 0..<50 where !settled {
            try await Task.sleep(nanoseconds: 100_000_000)
            settled = partials() <= before
        }
        #expect(settled)
    }

    /// `.systemAnd` extra CAs go to libcurl in memory, and its OpenSSL backend then reads its
    /// built-in CA file no more (its CA directory still). A libcurl with no directory (Fedora,
    /// Alpine builds) would trust the extra CAs alone: the built-in file goes into the bundle
    /// first. Here the test's CA stands for the built-in file, and another CA is the extra.
    @Test func systemAndKeepsTheBuiltInCAFileWhenLibcurlHasNoCADirectory() async throws {
        let ca = try CurlTLSTests.env("TLS_CA_PEM")
        let other = try CurlTLSTests.env("TLS_OTHER_CA_PEM")
        let base = try TestServer.url("HTTPBIN_TLS_URL")
        var configuration = CurlTransport.Configuration()
        configuration.tls = TLSConfiguration(trustRoots: .systemAnd([.file(other)]))
        func send(_ system: SystemTrust) async throws -> Result<Int, TransportFailure> {
            let transport = try CurlTransport(configuration: configuration, systemTrust: system)
            let request = TransportRequest(urlRequest: URLRequest(url: base.appendingPathComponent("get")))
            do {
                return .success(try await transport.send(request).response.statusCode)
            } catch {
                return .failure(error)
            }
        }
        #expect(try await send(SystemTrust(caFile: ca, caDirectory: nil)) == .success(200))
        // A libcurl that names neither (it asks its TLS library): the system's bundle goes with
        // the extra CA (the bundle held the extra CA alone, and every public server failed).
        #expect(try await send(SystemTrust(caFile: nil, caDirectory: nil, knownBundles: ["/nonexistent/ca.pem", ca])) == .success(200))
        // With a directory, the file is left to libcurl: the bundle is the extra CA alone, and
        // the test's CA (in no system store) is not trusted.
        guard case .failure(let refused) = try await send(SystemTrust(caFile: ca, caDirectory: "/nonexistent")) else {
            Issue.record("the built-in file was put in the bundle though libcurl has a CA directory")
            return
        }
        #expect(refused.kind == .serverCertificateUntrusted)
        // `.only` never takes the built-in file.
        let builtIn = SystemTrust(caFile: ca, caDirectory: nil).bundleToInclude
        let only = try PreparedTLS(TLSConfiguration(trustRoots: .only([.file(other)])), context: "tls", systemBundle: builtIn)
        #expect(only.caBundle == (try Data(contentsOf: URL(fileURLWithPath: other))) + [0x0A])
    }

    /// A libcurl built for another distribution looks for its CA store where this system has
    /// none (one built on RHEL: `/etc/pki/tls/certs/ca-bundle.crt`, not on Debian): the system's
    /// bundle is named to it instead. Here the test's CA stands for the system's bundle.
    @Test func theSystemsBundleStandsInForAMissingBuiltInStore() async throws {
        let ca = try CurlTLSTests.env("TLS_CA_PEM")
        let base = try TestServer.url("HTTPBIN_TLS_URL")
        func send(_ system: SystemTrust, _ trust: TLSConfiguration.TrustRoots = .system) async throws -> Result<Int, TransportFailure> {
            var configuration = CurlTransport.Configuration()
            configuration.tls = TLSConfiguration(trustRoots: trust)
            let transport = try CurlTransport(configuration: configuration, systemTrust: system)
            do {
                return .success(
                    try await transport.send(TransportRequest(urlRequest: URLRequest(url: base.appendingPathComponent("get")))).response.statusCode)
            } catch {
                return .failure(error)
            }
        }
        let missing = SystemTrust(caFile: "/nonexistent/ca-bundle.crt", caDirectory: "/nonexistent/certs", knownBundles: ["/nonexistent/a.pem", ca])
        #expect(missing.substituteFile == ca)
        #expect(try await send(missing) == .success(200))
        // `.systemAnd` puts the same bundle before its extra CAs.
        #expect(try await send(missing, .systemAnd([.file(try CurlTLSTests.env("TLS_OTHER_CA_PEM"))])) == .success(200))
        // The bundle found is what is trusted: another CA's bundle does not hold the test's CA.
        var other = missing
        other.knownBundles = ["/nonexistent/a.pem", try CurlTLSTests.env("TLS_OTHER_CA_PEM")]
        guard case .failure(let failure) = try await send(other) else {
            Issue.record("the test's CA was trusted though the bundle that stood in does not hold it")
            return
        }
        #expect(failure.kind == .serverCertificateUntrusted, "\(failure)")
        var none = missing
        none.knownBundles = ["/nonexistent/a.pem"]
        #expect(none.substituteFile == nil)
        // Where libcurl's own store is there, or it names none, nothing stands in.
        #expect(SystemTrust(caFile: ca, caDirectory: "/nonexistent/certs", knownBundles: ["/etc/hostname"]).substituteFile == nil)
        #expect(SystemTrust(caFile: "/nonexistent/ca.pem", caDirectory: "/etc", knownBundles: ["/etc/hostname"]).substituteFile == nil)
        #expect(SystemTrust(caFile: nil, caDirectory: nil, knownBundles: ["/etc/hostname"]).substituteFile == nil)
        #expect(SystemTrust(caFile: "/nonexistent/ca.pem", caDirectory: nil, knownBundles: ["/etc/hostname"]).substituteFile == "/etc/hostname")
    }

    @Test func theTransportLoadsTheLibcurlThisRunIsAbout() throws {
        // Tests/test runs these suites on the system's libcurl, then on libcurl 8 (with
        // LD_LIBRARY_PATH): each run says which one libcurl.so.4 is.
        guard let expected = ProcessInfo.processInfo.environment["PLUGINHOST_TEST_LIBCURL_VERSION"] else {
            Issue.record("PLUGINHOST_TEST_LIBCURL_VERSION is not set: run the tests with Tests/test")
            return
        }
        let description = try CurlTransport().libraryDescription
        #expect(description.hasPrefix("libcurl \(expected) ("), "\(description)")
    }

    /// Once its loop has ended, a transport's loop finishes what reaches it as released, and a
    /// second shutdown (the transport's own, at release) returns at once: the multi handle is
    /// gone, and no late submission or cancellation may wake it (before, the call below waited
    /// for ever, and so did the release).
    @Test func whatReachesAnEndedLoopIsReleasedNotQueued() async throws {
        let transport = try CurlTransport()
        transport.loop.shutdown()
        let request = TransportRequest(urlRequest: URLRequest(url: try TestServer.url().appendingPathComponent("get")))
        let outcome = Locked<Result<Int, TransportFailure>?>(nil)
        let task = Task {
            do throws(TransportFailure) {
                let response = try await transport.send(request)
                outcome.withLock { $0 = .success(response.response.statusCode) }
            } catch {
                outcome.withLock { $0 = .failure(error) }
            }
        }
        #expect(await eventually(60) { outcome.withLock { $0 } != nil }, "the call never finished")
        #expect(outcome.withLock { $0 } == .failure(TransportFailure(kind: .cancelled, message: "the transport was released")))
        #expect(transport.activeTransferCount == 0)
        if outcome.withLock({ $0 }) != nil { await task.value }
        transport.loop.cancel(CurlCall(request: request, loop: transport.loop, spooledBody: nil))
        transport.loop.shutdown()
    }

    /// One libcurl serves the process: a path to the loaded file is that library, and a path to
    /// another file (here a copy of it) is refused naming both, never answered with the first.
    @Test func anotherLibcurlThanTheLoadedOneIsRefusedByName() throws {
        _ = try CurlTransport()
        let loaded = try #require(CurlLibrary.loadedFile)
        #expect(loaded.hasPrefix("/") && loaded.contains("libcurl"), "\(loaded)")
        var same = CurlTransport.Configuration()
        same.libraryPath = loaded
        _ = try CurlTransport(configuration: same)
        let directory = NSTemporaryDirectory() + "pluginhost-libcurl-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let copy = directory + "/libcurl.so.4"
        try FileManager.default.copyItem(atPath: loaded, toPath: copy)
        var other = CurlTransport.Configuration()
        other.libraryPath = copy
        let message = "cannot load libcurl from \(copy): libcurl is loaded from \(loaded) already (one libcurl serves a process)"
        #expect(throws: CurlTransportError(.libraryUnavailable, message)) {
            try CurlTransport(configuration: other)
        }
    }

    @Test func aMissingLibraryIsATypedError() {
        var configuration = CurlTransport.Configuration()
        configuration.libraryPath = "/nonexistent/libcurl.so.4"
        #expect(throws: CurlTransportError(.libraryUnavailable, "cannot load libcurl from /nonexistent/libcurl.so.4: no such file")) {
            try CurlTransport(configuration: configuration)
        }
    }

    /// A bare name is refused: the dynamic loader searches for it, and the file checked (in the
    /// current directory) was not the one loaded.
    @Test func aLibraryPathWithoutASlashIsRefused() {
        var configuration = CurlTransport.Configuration()
        configuration.libraryPath = "libcurl-bare-name.so.4"
        #expect(
            throws: CurlTransportError(
                .libraryUnavailable,
                "cannot load libcurl from libcurl-bare-name.so.4: libraryPath must be a path with a / (a bare name is searched for by the "
                    + "dynamic loader, not the file in the current directory; write ./libcurl-bare-name.so.4 for that one)")
        ) {
            try CurlTransport(configuration: configuration)
        }
    }
}

/// What the loaded libcurl decodes.
enum CurlLibraryProbe {
    static var hasBrotli: Bool { (try? CurlLibrary.load(path: nil))?.encodings.contains("br") ?? false }
}

/// Holds gated streams' first reads until opened (30 s at most, then says so), and counts the
/// reads that reached it.
final class StreamGate: Sendable {
    let semaphore = DispatchSemaphore(value: 0)
    let timedOut = Locked(false)
    let waiting = Locked(0)

    /// Whether `count` reads reached the gate within 60 s.
    func reached(_ count: Int) async -> Bool { await eventually(60) { waiting.withLock { $0 } >= count } }

    /// Lets `count` reads through.
    func open(_ count: Int) {
        for _ in 0..<count { semaphore.signal() }
    }
}

/// Four bytes, after its gate opens.
final class GatedStream: InputStream, @unchecked Sendable {
    var gate: StreamGate?
    private var status: Stream.Status = .notOpen
    private var sent = false
    override var streamStatus: Stream.Status { status }
    override func open() { status = .open }
    override func close() { status = .closed }
    override var hasBytesAvailable: Bool { !sent }
    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        guard !sent, let gate else { return 0 }
        gate.waiting.withLock { $0 += 1 }
        if gate.semaphore.wait(timeout: .now() + 30) == .timedOut { gate.timedOut.withLock { $0 = true } }
        sent = true
        buffer.initialize(repeating: UInt8(ascii: "g"), count: 4)
        return 4
    }
}

/// A proxy on 127.0.0.1 that answers every request (a tunnel's `CONNECT`) with `407` and a Basic
/// challenge, closing each connection, and keeps the request heads it got; it stops after 8
/// connections or 10 s without one.
final class RefusingProxy: Sendable {
    let port: Int
    let heads = Locked([String]())

    /// A proxy that answers every request with `407` and `challenge` in `Proxy-Authenticate`.
    convenience init(challenge: String = #"Basic realm="proxy""#) throws {
        try self.init { _ in
            "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: \(challenge)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
    }

    /// A proxy that answers each request head (up to 8) with what `answer` makes of it, then closes.
    /// It stops listening after 60 s without a connection: a test's next request may wait that
    /// long for a thread while the suite starts hundreds of tests at once (10 s was too short
    /// there: the request found the port closed).
    init(answer: @escaping @Sendable (String) -> String) throws {
        guard let (fd, port) = boundLoopbackSocket() else {
            throw TransportFailure(kind: .other, message: "the test proxy cannot bind a port of 127.0.0.1")
        }
        guard listen(fd, 8) == 0 else {
            close(fd)
            throw TransportFailure(kind: .other, message: "the test proxy cannot listen on 127.0.0.1")
        }
        self.port = port
        let heads = heads
        Thread {
            defer { close(fd) }
            for _ in 0..<8 {
                var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&waiting, 1, 60_000) > 0 else { return }
                let client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                var head: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !head.suffix(4).elementsEqual([13, 10, 13, 10]) {
                    let got = read(client, &buffer, buffer.count)
                    guard got > 0 else { break }
                    head += buffer[0..<got]
                }
                let text = String(decoding: head, as: UTF8.self)
                heads.withLock { $0.append(text) }
                let answer = Array(answer(text).utf8)
                _ = answer.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                close(client)
            }
        }.start()
    }
}

/// A provider whose every request carries `text` as a body stream (a new stream per request, set
/// by its request closure, as an app would set one).
func streamingProvider(_ text: String, transport: any Transport, interceptors: [any Interceptor] = []) -> Provider<Bin> {
    Provider<Bin>(
        requestClosure: { _, request in
            var request = request
            request.httpBodyStream = InputStream(data: Data(text.utf8))
            return request
        }, transport: transport, interceptors: interceptors)
}

/// A provider on a `CurlTransport` through `proxy`, with a hook that answers a proxy's first
/// challenge with `u`/`p`.
func proxied(through proxy: RefusingProxy) throws -> Provider<Bin> {
    var configuration = CurlTransport.Configuration()
    configuration.proxy = .url("http://127.0.0.1:\(proxy.port)")
    return Provider<Bin>(transport: try CurlTransport(configuration: configuration), interceptors: [FirstProxyChallengeAnswer()])
}

/// Answers a proxy's first challenge with `u`/`p`, and nothing else.
struct FirstProxyChallengeAnswer: Interceptor {
    var name: String { "proxy-credentials" }
    func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
        challenge.isProxy && challenge.previousFailureCount == 0 ? .useCredential(user: "u", password: "p") : .performDefault
    }
}
