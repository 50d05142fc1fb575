import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Transports")
struct TransportTests {
    @Test(arguments: TransportKind.allCases) func aChallenged401KeepsItsBody(_ transport: TransportKind) async throws {
        let response = try await transport.provider().request(try Bin("fixture/token")).value
        #expect(response.statusCode == 401)
        #expect(response.value(forHTTPHeaderField: "WWW-Authenticate") == "Bearer realm=\"fixture\"")
        #expect(try response.mapJSON()["error"]?.stringValue == "bad token")
    }

    /// URL loading is never handed a proxy's credentials for an https URL: it would send them to
    /// the origin, inside the proxy's tunnel, and never to the proxy. Over plain http they go to
    /// an HTTP proxy, which takes the whole request; on Linux, to a host no HTTP proxy stands
    /// before (none in the environment as libcurl reads it, a SOCKS one, or `no_proxy` exempts
    /// the host), they are not sent either: they would reach the origin (they did, before).
    @Test func urlLoadingIsGivenAProxysCredentialsOnlyForAnHTTPProxy() throws {
        #if canImport(FoundationNetworking)
        let linux = true
        #else
        let linux = false
        #endif
        let proxy = "http://p:3128"
        let cases: [(url: String, environment: [String: String], kept: Bool)] = [
            ("https://a.test/x", ["http_proxy": proxy], false), ("HTTPS://a.test/x", ["https_proxy": proxy], false),
            ("http://a.test/x", ["http_proxy": proxy], true), ("http://a.test/x", ["all_proxy": "p:3128"], true),
            ("http://a.test/x", ["ALL_PROXY": "https://p"], true),
            // None for plain http: upper-case HTTP_PROXY (which libcurl refuses), https_proxy, empty, SOCKS.
            ("http://a.test/x", ["HTTP_PROXY": proxy, "https_proxy": proxy], !linux), ("http://a.test/x", ["http_proxy": ""], !linux),
            ("http://a.test/x", ["http_proxy": "socks5h://p:1080"], !linux), ("http://a.test/x", ["all_proxy": "SOCKS4://p"], !linux),
            ("http://a.test/x", ["http_proxy": "", "all_proxy": proxy], true),
            // no_proxy exempts; an empty no_proxy is no value, and NO_PROXY counts then.
            ("http://api.example.com/x", ["http_proxy": proxy, "no_proxy": "example.com"], !linux),
            ("http://api.example.com/x", ["http_proxy": proxy, "no_proxy": "", "NO_PROXY": "example.com"], !linux),
            ("http://api.example.com/x", ["http_proxy": proxy, "no_proxy": "other.test", "NO_PROXY": "example.com"], true),
            ("http://10.0.0.7:8080/x", ["http_proxy": proxy, "no_proxy": "10.0.0.0/8"], !linux),
            ("http://[::1]/x", ["http_proxy": proxy, "no_proxy": "::1"], !linux),
            // The host percent-decoded, as libcurl compares it.
            ("http://ex%61mple.com/x", ["http_proxy": proxy, "no_proxy": "example.com"], !linux),
        ]
        for (url, environment, kept) in cases {
            var request = URLRequest(url: try #require(URL(string: url)))
            request.setValue("Basic cA==", forHTTPHeaderField: "Proxy-Authorization")
            request.setValue("yes", forHTTPHeaderField: "X-Kept")
            let given = URLSessionTransport.sessionRequest(TransportRequest(urlRequest: request), proxy: SessionProxy(environment: environment))
            #expect((given.value(forHTTPHeaderField: "Proxy-Authorization") != nil) == kept, "\(url), \(environment)")
            #expect(given.value(forHTTPHeaderField: "X-Kept") == "yes")
        }
    }

    /// `no_proxy` read as libcurl 7.88 reads it (`Curl_check_noproxy`), on libcurl's own cases
    /// (its unit test 1614) and a few more: names by domain without case, one leading and one
    /// trailing dot ignored; addresses as addresses, and networks in CIDR notation; `*` alone;
    /// where libcurl's reading depends on its version or its IDN support, exempt.
    @Test func noProxyAsLibcurlReadsIt() {
        let cases: [(host: String, list: String, exempt: Bool)] = [
            ("www.example.com", "localhost .example.com .example.de", true), ("www.example.com", "localhost,.example.com,.example.de", true),
            ("www.example.com.", "localhost,.example.com,.example.de", true), ("example.com", "localhost,.example.com,.example.de", true),
            ("example.com.", "localhost,.example.com,.example.de", true), ("www.example.com", "localhost,.example.com.,.example.de", true),
            ("www.example.com", "localhost,www.example.com.,.example.de", true), ("example.com", "localhost,example.com,.example.de", true),
            ("example.com.", "localhost,example.com,.example.de", true), ("nexample.com", "localhost,example.com,.example.de", false),
            ("www.example.com", "localhost,example.com,.example.de", true), ("127.0.0.1", "127.0.0.1,localhost", true),
            ("127.0.0.1", "127.0.0.1,localhost,", true), ("127.0.0.1", "127.0.0.1/8,localhost,", true),
            ("127.0.0.1", "127.0.0.1/28,localhost,", true), ("127.0.0.1", "127.0.0.1/31,localhost,", true),
            ("127.0.0.1", "localhost,127.0.0.1", true), ("127.0.0.1", "localhost,127.0.0.1.127.0.0.1.127.0.0.1", false),
            ("localhost", "localhost,127.0.0.1", true), ("localhost", "127.0.0.1,localhost", true), ("foobar", "barfoo", false),
            ("foobar", "foobar", true), ("192.168.0.1", "foobar", false), ("192.168.0.1", "192.168.0.0/16", true),
            ("192.168.0.1", "192.168.0.0/24", true), ("192.168.0.1", "192.168.0.0/32", false), ("192.168.0.1", "192.168.0.0", false),
            ("192.168.1.1", "192.168.0.0/24", false), ("192.168.1.1", "foo, bar, 192.168.0.0/24", false),
            ("192.168.1.1", "foo, bar, 192.168.0.0/16", true), ("[::1]", "foo, bar, 192.168.0.0/16", false),
            ("[::1]", "foo, bar, ::1/64", true), ("bar", "foo, bar, ::1/64", true), ("BAr", "foo, bar, ::1/64", true),
            ("BAr", "foo,,,,,              bar, ::1/64", true), ("www.example.com", "foo, .example.com", true),
            ("www.example.com", "www2.example.com, .example.net", false), ("example.com", ".example.com, .example.net", true),
            ("nonexample.com", ".example.com, .example.net", false),
            // Beyond libcurl's list: `*` only as the whole value; an address is no name suffix;
            // IPv6 spelt otherwise, without brackets, and in a network; bits past the address.
            ("a.test", "*", true), ("a.test", "localhost,*", false), ("10.0.0.7", "0.7", false), ("::1", "0:0::1", true),
            ("fd00::5", "fd00::/8", true), ("fe00::5", "fd00::/8", false), ("192.168.0.1", "192.168.0.1/33", false),
            ("[::1]", "[::1]", false), ("::1", "::1.", true),
            // IPv4 as a URL may write it, read as libcurl's URL parser reads it (not as a name).
            ("127.1", "127.0.0.0/8", true), ("0x7f000001", "127.0.0.1", true), ("2130706433", "127.0.0.1", true),
            ("0177.0.0.1", "127.0.0.1", true), ("127.1", "127.1", false), ("08.1", "08.1", true),
            // With a trailing dot it is no address but a name, and the dot is ignored.
            ("127.0.0.1.", "127.0.0.1", true),
            // A host of other than ASCII characters (libcurl sends punycode): exempt from a list that names anything.
            ("bücher.test", "other.test", true), ("bücher.test", ",", false),
        ]
        for (host, list, exempt) in cases {
            #expect(SessionProxy.exempts(list, host: host) == exempt, "\(host) in \(list)")
        }
    }

    /// Over plain http with no proxy, the origin does not get a caller's `Proxy-Authorization`
    /// through URL loading (httpbin echoes what it got); the test command names no proxy for 127.0.0.1.
    @Test func anOriginGetsNoProxyCredentialsThroughURLLoading() async throws {
        var target = try Bin("headers")
        try #require(
            !SessionProxy(environment: ProcessInfo.processInfo.environment).proxies(target.baseURL),
            "the test command sets no_proxy for the test server; a proxy for it in this environment would take every test's requests")
        target.headers = ["Proxy-Authorization": "Basic cHJveHk6c2VjcmV0", "X-Kept": "yes"]
        let response = try await TransportKind.urlSession.provider().request(target).value
        let headers = try response.mapJSON()["headers"]
        #expect(headers?["X-Kept"]?.stringValue == "yes")
        #if canImport(FoundationNetworking)
        #expect(headers?["Proxy-Authorization"] == nil)
        #endif
    }

    /// The request a challenge after redirects answers: the last URL; a method a redirect turned
    /// into `GET` leaves the body and its fields behind; another origin, the credentials and cookies
    /// set for the first (not the proxy's).
    @Test func theRequestARedirectLeft() throws {
        var request = URLRequest(url: URL(string: "http://a.test/post")!)
        request.httpMethod = "POST"
        request.httpBody = Data("x=1".utf8)
        for (name, value) in [
            ("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Bearer a"), ("Cookie", "s=1"),
            ("Proxy-Authorization", "Basic cA=="), ("X-Kept", "yes"),
        ] {
            request.setValue(value, forHTTPHeaderField: name)
        }
        let sent = TransportRequest(urlRequest: request, body: .upload)
        let same = sent.redirected(to: URL(string: "http://a.test/kept")!, method: nil)
        #expect(same.urlRequest.url?.absoluteString == "http://a.test/kept")
        #expect(same.urlRequest.httpMethod == "POST")
        #expect(same.urlRequest.httpBody == Data("x=1".utf8))
        #expect(same.urlRequest.value(forHTTPHeaderField: "Authorization") == "Bearer a")
        #expect(same.urlRequest.value(forHTTPHeaderField: "Cookie") == "s=1")
        guard case .upload = same.body else {
            Issue.record("the body's kind changed: \(same.body)")
            return
        }
        let other = sent.redirected(to: URL(string: "http://b.test/seen")!, method: "GET")
        #expect(other.urlRequest.httpMethod == "GET")
        #expect(other.urlRequest.httpBody == nil)
        guard case .inline = other.body else {
            Issue.record("a GET keeps the upload: \(other.body)")
            return
        }
        for name in ["Content-Type", "Authorization", "Cookie"] {
            #expect(other.urlRequest.value(forHTTPHeaderField: name) == nil, "\(name)")
        }
        #expect(other.urlRequest.value(forHTTPHeaderField: "X-Kept") == "yes")
        // The proxy is the same: its answer stays.
        #expect(other.urlRequest.value(forHTTPHeaderField: "Proxy-Authorization") == "Basic cA==")
        // A user in the URL goes with the credentials; to the same origin it stays.
        var withUser = URLRequest(url: URL(string: "http://u:p@a.test/post")!)
        withUser.httpMethod = "POST"
        let user = TransportRequest(urlRequest: withUser)
        #expect(user.redirected(to: URL(string: "http://u:p@b.test/seen")!, method: "GET").urlRequest.url?.absoluteString == "http://b.test/seen")
        #expect(user.redirected(to: URL(string: "http://u:p@a.test/kept")!, method: nil).urlRequest.url?.absoluteString == "http://u:p@a.test/kept")
        // Another port is another origin.
        let port = sent.redirected(to: URL(string: "http://a.test:8080/post")!, method: "POST")
        #expect(port.urlRequest.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(port.urlRequest.httpBody == Data("x=1".utf8))
    }

    @Test(arguments: TransportKind.allCases) func everyCallLeavesTheTransportsTable(_ kind: TransportKind) async throws {
        let transport = kind.make()
        let provider = Provider<Bin>(transport: transport)
        let targets = [try Bin("get"), try Bin("status/404"), try Bin("status/401"), try Bin("bytes/2048"), try Bin("get", base: closedPortURL())]
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<50 { group.addTask { _ = await provider.request(targets[index % targets.count]).result } }
        }
        let progress = LockedCounter()
        _ = try await provider.request(try Bin("bytes/4096")).run { progress.append("\($0.completedBytes)") }
        #expect(progress.log.last == "4096")
        switch transport {
        case let session as URLSessionTransport: #expect(session.router.registeredCount == 0)
        case let curl as CurlTransport: #expect(curl.activeTransferCount == 0)
        default: Issue.record("unexpected transport \(transport)")
        }
    }

    /// A body goes again to where a `307` or `308` leads, whatever its kind: data, a file, a
    /// multipart upload (URL loading on Linux sent each of them there empty, and the request
    /// succeeded).
    @Test(arguments: TransportKind.allCases) func aBodyIsSentAgainAfterA307OrA308(_ kind: TransportKind) async throws {
        let payload = String(repeating: "body-", count: 2_000)  // 10,000 bytes
        let file = URL(fileURLWithPath: NSTemporaryDirectory() + "pluginhost-redirect-body-" + UUID().uuidString)
        try Data(payload.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let echo = try TestServer.url().appendingPathComponent("anything/landed").absoluteString
        for status in [307, 308] {
            let provider = Provider<Bin>(
                requestClosure: { _, request in
                    var request = request
                    var parts = URLComponents(url: request.url!, resolvingAgainstBaseURL: false)!
                    parts.path = "/redirect-to"
                    parts.queryItems = [URLQueryItem(name: "url", value: echo), URLQueryItem(name: "status_code", value: "\(status)")]
                    request.url = parts.url
                    return request
                }, transport: kind.make())
            for task in [RequestTask.requestData(Data(payload.utf8)), .uploadFile(file), .uploadMultipart([.text(payload, name: "part")])] {
                // Raw data of its own type: without one it would be labelled (and echoed) as a form.
                let headers = task.isData ? ["Content-Type": "text/plain"] : nil
                let response = try await provider.request(try Bin("start", method: .post, task: task, headers: headers)).value
                let echoed = try JSONSerialization.jsonObject(with: response.data) as? [String: Any]
                #expect(response.statusCode == 200, "\(status) \(task)")
                #expect(echoed?["method"] as? String == "POST", "\(status) \(task)")
                #expect(echoed?["url"] as? String == echo, "\(status) \(task)")
                #expect(response.response?.url?.absoluteString == echo, "\(status) \(task)")
                let arrived: String?
                if case .uploadMultipart = task {
                    arrived = (echoed?["form"] as? [String: Any])?["part"] as? String
                } else {
                    arrived = echoed?["data"] as? String
                }
                #expect(arrived == payload ? true : false, "\(status) \(task): \(arrived?.utf8.count ?? 0) bytes arrived, not 10,000")
            }
        }
    }

    /// A `307` that keeps a `POST`'s body, to an `ftp://` listener: the `307` is delivered and
    /// nothing connects there (URL loading on Linux made the transport send the body to it as an
    /// FTP upload, in clear, to whatever host the server named).
    @Test(arguments: TransportKind.allCases) func aRedirectIsFollowedToHTTPOnly(_ kind: TransportKind) async throws {
        let (fd, port) = try #require(boundLoopbackSocket())
        defer { close(fd) }
        #expect(listen(fd, 4) == 0)
        #expect(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0)
        let location = "ftp://127.0.0.1:\(port)/upload".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        var parts = URLComponents(url: try TestServer.url().appendingPathComponent("fixture/respond"), resolvingAgainstBaseURL: false)!
        parts.percentEncodedQuery = "status=307&h_Location=\(location)"
        var request = URLRequest(url: parts.url!)
        request.httpMethod = "POST"
        request.httpBody = Data("a body".utf8)
        request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        request.timeoutInterval = 5
        let response = try await kind.make().send(TransportRequest(urlRequest: request, body: .upload))
        #expect(response.response.statusCode == 307)
        let accepted = accept(fd, nil, nil)
        if accepted >= 0 { close(accepted) }
        #expect(accepted < 0, "something connected to the ftp:// Location")
    }

    /// A relative `Location` is resolved against the URL redirected from (RFC 3986), as a
    /// browser resolves it: URL loading on Linux put it at the root of the origin.
    @Test(arguments: TransportKind.allCases) func aRelativeLocationIsResolvedAgainstTheURL(_ kind: TransportKind) async throws {
        let respond = try TestServer.url().appendingPathComponent("fixture/respond")
        let key = "relative-" + UUID().uuidString
        for (location, landing, status) in [
            ("counted?key=\(key)&quiet=1", "fixture/counted?key=\(key)&quiet=1", 200), ("?status=201", "fixture/respond?status=201", 201),
            ("../fixture/respond?status=202", "fixture/respond?status=202", 202),
        ] {
            var parts = URLComponents(url: respond, resolvingAgainstBaseURL: false)!
            parts.percentEncodedQuery = "status=302&h_Location=" + location.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            var request = URLRequest(url: parts.url!)
            request.timeoutInterval = 10
            let response = try await kind.make().send(TransportRequest(urlRequest: request, body: .inline))
            #expect(response.response.statusCode == status, "\(location)")
            #expect(response.response.url?.absoluteString == (try TestServer.url()).absoluteString + "/" + landing, "\(location)")
        }
    }

    /// A `HEAD` answered with a `303` stays a `HEAD` (no body comes), and a `305` is delivered,
    /// not followed: only `301`, `302`, `303`, `307` and `308` are (URL loading on Linux turned
    /// the `HEAD` into a `GET` and followed `305` and `306`).
    @Test(arguments: TransportKind.allCases) func aHEADStaysAHEADAndA305IsDelivered(_ kind: TransportKind) async throws {
        func redirect(_ method: String, to url: String, status: Int) async throws -> TransportResponse {
            var parts = URLComponents(url: try TestServer.url().appendingPathComponent("redirect-to"), resolvingAgainstBaseURL: false)!
            parts.queryItems = [URLQueryItem(name: "url", value: url), URLQueryItem(name: "status_code", value: "\(status)")]
            var request = URLRequest(url: parts.url!)
            request.httpMethod = method
            request.timeoutInterval = 10
            return try await kind.make().send(TransportRequest(urlRequest: request, body: .inline))
        }
        let head = try await redirect("HEAD", to: "/bytes/1000", status: 303)
        #expect(head.response.statusCode == 200)
        #expect(head.data.isEmpty, "\(head.data.count) bytes of a GET")
        #expect((head.finalMethod ?? "HEAD") == "HEAD")
        for status in [305, 306] {
            let response = try await redirect("GET", to: "/get", status: status)
            #expect(response.response.statusCode == status)
        }
    }

    /// A redirect the URL-loading transport follows itself (a body kept) to another scheme
    /// leaves `Proxy-Authorization` behind: the environment's proxy for that scheme may be another.
    @Test func anotherSchemeLeavesTheProxyCredentials() {
        var request = URLRequest(url: URL(string: "https://a.test/post")!)
        request.httpMethod = "POST"
        request.httpBody = Data("x".utf8)
        request.setValue("Basic cA==", forHTTPHeaderField: "Proxy-Authorization")
        let sent = TransportRequest(urlRequest: request, body: .upload)
        let same = URLSessionTransport.following(sent, to: URL(string: "https://b.test/post")!, method: "POST")
        #expect(same.urlRequest.value(forHTTPHeaderField: "Proxy-Authorization") == "Basic cA==")
        let other = URLSessionTransport.following(sent, to: URL(string: "http://a.test/post")!, method: "POST")
        #expect(other.urlRequest.value(forHTTPHeaderField: "Proxy-Authorization") == nil)
        #expect(other.urlRequest.httpBody == Data("x".utf8))
    }

    /// A request answered before its body was read (a `307` here), then another large request:
    /// each is answered at once. URL loading on Linux sent the next request on the connection
    /// whose body it had stopped sending, where the server took it for the rest of that body,
    /// and the request waited for its timeout (1 in 10 from 140 KB on loopback); the transport
    /// now sends such bodies after the server's `100 Continue`. (`CurlTransport`, which sends no
    /// `Expect`, may fail the early answer as a broken pipe when the server closes first: README.)
    @Test func aRequestAfterOneAnsweredBeforeItsBodyIsAnswered() async throws {
        let transport = URLSessionTransport()
        let body = Data(repeating: UInt8(ascii: "a"), count: 240_000)
        func post(_ url: URL) async throws(TransportFailure) -> TransportResponse {
            var request = URLRequest(url: url)
            request.httpMethod = "POST"
            request.httpBody = body
            request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
            request.timeoutInterval = 5
            return try await transport.send(TransportRequest(urlRequest: request, body: .upload, redirects: .doNotFollow))
        }
        var early = URLComponents(url: try TestServer.url().appendingPathComponent("redirect-to"), resolvingAgainstBaseURL: false)!
        early.queryItems = [URLQueryItem(name: "url", value: "/anything"), URLQueryItem(name: "status_code", value: "307")]
        let echo = try TestServer.url().appendingPathComponent("anything")
        for round in 0..<20 {
            let answered = try await post(early.url!)
            #expect(answered.response.statusCode == 307, "round \(round)")
            let next = try await post(echo)
            #expect(next.response.statusCode == 200, "round \(round)")
        }
    }

    /// Redirects that keep the body count against the request's policy like any other, and the
    /// response says the redirects were followed (`URLSessionTransport` follows these itself).
    @Test(arguments: TransportKind.allCases) func redirectsThatKeepTheBodyCountAgainstThePolicy(_ kind: TransportKind) async throws {
        let transport = kind.make()
        let echo = try TestServer.url().appendingPathComponent("anything/landed").absoluteString
        func redirect(to url: String) throws -> String {
            var parts = URLComponents(url: try TestServer.url().appendingPathComponent("redirect-to"), resolvingAgainstBaseURL: false)!
            parts.queryItems = [URLQueryItem(name: "url", value: url), URLQueryItem(name: "status_code", value: "307")]
            return parts.url!.absoluteString
        }
        let twice = try redirect(to: try redirect(to: echo))
        func post(_ policy: RedirectPolicy?) async throws -> TransportResponse {
            var request = URLRequest(url: URL(string: twice)!)
            request.httpMethod = "POST"
            request.httpBody = Data("kept".utf8)
            request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
            return try await transport.send(TransportRequest(urlRequest: request, redirects: policy))
        }
        for policy in [nil, RedirectPolicy(maxRedirects: 2)] {
            let landed = try await post(policy)
            let echoed = try JSONSerialization.jsonObject(with: landed.data) as? [String: Any]
            #expect(landed.response.statusCode == 200 && landed.redirected, "\(String(describing: policy))")
            #expect(landed.finalMethod == "POST")
            #expect(echoed?["data"] as? String == "kept")
            #expect(echoed?["url"] as? String == echo)
        }
        let stopped = try await post(RedirectPolicy(maxRedirects: 1))
        #expect(stopped.response.statusCode == 307 && stopped.redirected)
        #expect(stopped.response.url?.absoluteString == (try redirect(to: echo)))
        let delivered = try await post(.doNotFollow)
        #expect(delivered.response.statusCode == 307 && !delivered.redirected)
    }

    /// Without a policy, URL loading's redirects and those the transport follows itself (which
    /// keep the body) count together against its limit of 20: the 21st fails the call. (URL
    /// loading's own limit counts one task's redirects: a call whose body-keeping redirect
    /// started a second task followed 21 and more.)
    @Test func urlLoadingFollowsTwentyRedirectsInAllWithoutAPolicy() async throws {
        let transport = URLSessionTransport()
        let base = try TestServer.url()
        /// A POST answered with a 307 (which keeps the body: the transport follows it, in a new
        /// task), then a 302 to `redirect/<n>` (a GET, followed by URL loading), then `n` redirects.
        func send(thenRedirects count: Int) async throws(TransportFailure) -> TransportResponse {
            func redirect(to url: String, status: Int) -> String {
                var parts = URLComponents(url: base.appendingPathComponent("redirect-to"), resolvingAgainstBaseURL: false)!
                parts.queryItems = [URLQueryItem(name: "url", value: url), URLQueryItem(name: "status_code", value: String(status))]
                return parts.url!.absoluteString
            }
            let first = redirect(to: redirect(to: base.appendingPathComponent("redirect/\(count)").absoluteString, status: 302), status: 307)
            var request = URLRequest(url: URL(string: first)!)
            request.httpMethod = "POST"
            request.httpBody = Data("x=1".utf8)
            return try await transport.send(TransportRequest(urlRequest: request, body: .upload))
        }
        #expect(try await send(thenRedirects: 18).response.statusCode == 200, "20 redirects in all")
        do {
            let response = try await send(thenRedirects: 19)
            Issue.record("followed 21 redirects: \(response.response.statusCode)")
        } catch {
            #expect(error == TransportFailure(kind: .other, message: "more than 20 redirects"))
        }
        // In one task, URL loading stops the 21st itself: the same failure.
        do {
            let response = try await transport.send(TransportRequest(urlRequest: URLRequest(url: base.appendingPathComponent("redirect/21"))))
            Issue.record("followed 21 redirects in one task: \(response.response.statusCode)")
        } catch {
            #expect(error == TransportFailure(kind: .other, message: "more than 20 redirects"))
        }
    }

    @Test(arguments: TransportKind.allCases) func redirectsAreFollowed(_ transport: TransportKind) async throws {
        let response = try await transport.provider().request(try Bin("redirect/3")).value
        #expect(response.statusCode == 200)
        #expect(response.response?.url?.path == "/get")
    }

    /// Credentials and cookies do not follow a redirect to another origin, nor does a `Host`
    /// the caller set for the first (it went to the second, which got the first's name).
    @Test(arguments: TransportKind.allCases) func aCrossOriginRedirectDropsCredentials(_ transport: TransportKind) async throws {
        let (first, second) = (try TestServer.url(), try TestServer.second())
        let target = second.appendingPathComponent("headers").absoluteString
        let response = try await transport.provider().request(
            try Bin(
                "redirect-to",
                task: .requestParameters(
                    parameters: ["url": target], encoding: URLEncoding.queryString),
                headers: [
                    "Authorization": "Bearer secret", "Cookie": "session=secret", "X-Kept": "yes",
                    "Host": "\(first.host ?? ""):\(first.port ?? 0)",
                ])
        ).value
        #expect(response.statusCode == 200)
        let headers = try response.mapJSON()["headers"]
        #expect(headers?["Authorization"] == nil)
        #expect(headers?["Cookie"] == nil)
        #expect(headers?["X-Kept"]?.stringValue == "yes")
        #expect(headers?["Host"]?.stringValue == "\(second.host ?? ""):\(second.port ?? 0)")
    }

    /// A user and password in the URL are credentials too (libcurl sends them as Basic): they do
    /// not go to another origin. URL loading on Linux kept them in the next URL when the
    /// `Location` named only another host (`//host/path`), and the other origin got them.
    @Test(arguments: TransportKind.allCases) func aCrossOriginRedirectLeavesTheURLsUserBehind(_ transport: TransportKind) async throws {
        var withUser = try #require(URLComponents(url: try TestServer.url(), resolvingAgainstBaseURL: false))
        withUser.user = "user"
        withUser.password = "secret"
        let second = try #require(URLComponents(url: try TestServer.second(), resolvingAgainstBaseURL: false))
        let location = "//\(try #require(second.host)):\(try #require(second.port))/headers"
        let base = try #require(withUser.url)
        let provider = transport.provider()
        let echoed = try await provider.request(try Bin("headers", base: base)).value.mapJSON()["headers"]
        #expect(echoed?["Authorization"]?.stringValue == "Basic dXNlcjpzZWNyZXQ=", "the first origin is given them")
        let response = try await provider.request(
            try Bin("redirect-to", task: .requestParameters(parameters: ["url": location], encoding: URLEncoding.queryString), base: base)
        ).value
        #expect(response.statusCode == 200)
        #expect(response.response?.url?.user == nil)
        #expect(try response.mapJSON()["headers"]?["Authorization"] == nil)
    }

    /// A body without a `Content-Type` goes with the one URLSession gives it, on every transport:
    /// a `POST`'s is labelled a form (as URL loading labels it, on Darwin and Linux), before the
    /// chain, so hooks see it; any other method's, and an empty `POST`, go without one. libcurl
    /// labelled every body a form (a `PUT`'s and an empty `POST`'s too) after the hooks had seen none.
    @Test(arguments: TransportKind.allCases) func aBodyWithoutAContentTypeIsLabelledAsURLSessionLabelsIt(_ transport: TransportKind) async throws {
        let provider = transport.provider()
        func sent(_ method: HTTPMethod, _ task: RequestTask) async throws -> JSONValue? {
            try await provider.request(try Bin("anything", method: method, task: task)).filterSuccessfulStatusCodes().mapJSON().value
        }
        let post = try await sent(.post, .requestData(Data("uid=42".utf8)))
        #expect(post?["headers"]?["Content-Type"]?.stringValue == "application/x-www-form-urlencoded")
        #expect(post?["form"]?["uid"]?.stringValue == "42")
        for (method, task) in [
            (HTTPMethod.put, RequestTask.requestData(Data("uid=42".utf8))), (.patch, .requestData(Data("x".utf8))), (.post, .requestPlain),
        ] {
            let echoed = try await sent(method, task)
            #expect(echoed?["method"]?.stringValue == method.rawValue)
            #expect(echoed?["headers"]?["Content-Type"] == nil, "\(method.rawValue): \(String(describing: echoed?["headers"]))")
        }
        // A body the request closure set is labelled as the endpoint's is (libcurl's label was
        // taken away for every body, and only URL loading labelled it).
        let closing = transport.provider(requestClosure: { _, request in
            var request = request
            request.httpBody = Data("uid=7".utf8)
            return request
        })
        let closure = try await closing.request(try Bin("anything", method: .post)).filterSuccessfulStatusCodes().mapJSON().value
        #expect(closure["headers"]?["Content-Type"]?.stringValue == "application/x-www-form-urlencoded")
        #expect(closure["form"]?["uid"]?.stringValue == "7")
    }

    /// A `POST` a `303` turns into a `GET` leaves its body's fields behind (RFC 9110 §15.4): URL
    /// loading on Linux dropped the body and kept its `Content-Type`; both transports kept the
    /// other fields about the body (its coding, language, location and digests).
    @Test(arguments: TransportKind.allCases) func aRedirectToAGetLeavesTheBodysFieldsBehind(_ transport: TransportKind) async throws {
        let contentFields = [
            "Content-Type": "application/json", "Content-Encoding": "identity", "Content-Language": "en", "Content-Location": "/a",
            "Content-Digest": "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
            "Repr-Digest": "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
            "Digest": "SHA-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=", "Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg==",
        ]
        let response = try await transport.provider().request(
            try Bin(
                "redirect-to", method: .post,
                task: .requestCompositeData(bodyData: Data(#"{"a":1}"#.utf8), urlParameters: ["url": "/headers", "status_code": "303"]),
                headers: contentFields.merging(["X-Kept": "yes", "Last-Modified": "Sun, 06 Nov 1994 08:49:37 GMT"]) { $1 })
        ).value
        #expect(response.statusCode == 200)
        #expect(response.response?.url?.path == "/headers")
        let headers = try response.mapJSON()["headers"]
        for name in contentFields.keys.sorted() + ["Content-Length", "Last-Modified"] {
            #expect(headers?[name] == nil, "\(name)")
        }
        #expect(headers?["X-Kept"]?.stringValue == "yes")
    }
}

extension RequestTask {
    /// Whether this is `.requestData`.
    fileprivate var isData: Bool {
        if case .requestData = self { return true }
        return false
    }
}
