import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The libcurl transport's cookie jar (`configuration.cookies`): RFC 6265's parsing, storage and
/// `Cookie` header, RFC 6265bis's rules for `Secure`, and curl's bounds. The jar used to be
/// Foundation's `HTTPCookie`, which on Linux reads `Max-Age` for version 1 cookies only: a cookie
/// deleted with `Max-Age=0` was kept and sent on.
@Suite("Curl transport: cookie jar")
struct CookieJarTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func jar(_ fields: [String], from url: String = "https://example.test/a/b/page", at time: Date? = nil) -> CookieJar {
        let jar = CookieJar()
        jar.store(setCookie: fields, for: URL(string: url)!, now: time ?? now)
        return jar
    }

    func sent(_ jar: CookieJar, to url: String, after seconds: TimeInterval = 0) -> String? {
        jar.header(for: URL(string: url)!, now: now.addingTimeInterval(seconds))
    }

    /// The bodies httpbin answers `/cookies` with: the cookies it was sent.
    func cookiesSent(_ transport: CurlTransport, _ path: String = "cookies", handlingCookies: Bool = true) async throws -> [String: String]? {
        var request = URLRequest(url: try TestServer.url().appendingPathComponent(path))
        request.httpShouldHandleCookies = handlingCookies
        let response = try await transport.send(TransportRequest(urlRequest: request))
        return (try JSONSerialization.jsonObject(with: response.data) as? [String: Any])?["cookies"] as? [String: String]
    }

    func transport() throws -> CurlTransport {
        var configuration = CurlTransport.Configuration()
        configuration.cookies = true
        return try CurlTransport(configuration: configuration)
    }

    /// httpbin's `/cookies/delete` answers `Expires` in 1970 and `Max-Age=0`: the cookie goes.
    @Test func aCookieDeletedByTheServerIsNoLongerSent() async throws {
        let transport = try transport()
        #expect(try await cookiesSent(transport, "cookies/set/session/abc") == ["session": "abc"])
        #expect(try await cookiesSent(transport, "cookies/set/other/1") == ["session": "abc", "other": "1"])
        #expect(try await cookiesSent(transport, "cookies/delete") == ["session": "abc", "other": "1"], "no name: nothing deleted")
        let url = try TestServer.url()
        var components = try #require(URLComponents(url: url.appendingPathComponent("cookies/delete"), resolvingAgainstBaseURL: false))
        components.queryItems = [URLQueryItem(name: "session", value: nil)]
        _ = try await transport.send(TransportRequest(urlRequest: URLRequest(url: try #require(components.url))))
        #expect(try await cookiesSent(transport) == ["other": "1"])
    }

    /// A request with `httpShouldHandleCookies` false is sent none of the jar's cookies, and the
    /// cookies its answers set (on each redirect too) are not kept, as URL loading does.
    @Test func aRequestThatHandlesNoCookiesLeavesTheJarAlone() async throws {
        let transport = try transport()
        #expect(try await cookiesSent(transport, "cookies/set/session/abc") == ["session": "abc"])
        #expect(try await cookiesSent(transport, handlingCookies: false) == [:])
        #expect(try await cookiesSent(transport, "cookies/set/other/1", handlingCookies: false) == [:])
        #expect(try await cookiesSent(transport) == ["session": "abc"])
    }

    @Test func maxAgeWinsOverExpiresAndZeroOrLessDeletes() {
        let both = jar(["a=1; Max-Age=10; Expires=Thu, 01 Jan 1970 00:00:00 GMT", "b=2; Expires=Thu, 01 Jan 2037 00:00:00 GMT; Max-Age=10"])
        #expect(sent(both, to: "https://example.test/a/b/") == "a=1; b=2")
        #expect(sent(both, to: "https://example.test/a/b/", after: 11) == nil)
        let kept = jar(["c=3", "d=4", "e=5"])
        kept.store(setCookie: ["c=; Max-Age=0", "d=x; Max-Age=-1", "e=y; Max-Age=1x"], for: URL(string: "https://example.test/a/b/page")!, now: now)
        // `1x` is no Max-Age: `e` is replaced as a session cookie.
        #expect(sent(kept, to: "https://example.test/a/b/") == "e=y")
        let expired = jar(["f=6; Expires=Wed, 21 Oct 2015 07:28:00 GMT", "g=7; expires=Sun, 06-Nov-94 08:49:37 GMT", "h=8; Expires=nonsense"])
        #expect(sent(expired, to: "https://example.test/a/b/") == "h=8", "an Expires that is no date is none")
    }

    @Test func cookieDatesAreReadAsBrowsersReadThem() {
        let instant = Date(timeIntervalSince1970: 784_111_777)
        for text in [
            "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "06 Nov 1994 08:49:37",
            "Nov 06 08:49:37 1994 GMT",
        ] {
            #expect(CookieJar.cookieDate(text) == instant, "\(text)")
        }
        #expect(CookieJar.cookieDate("Thu, 01 Jan 1970 00:00:00 GMT") == Date(timeIntervalSince1970: 0))
        #expect(CookieJar.cookieDate("Sat, 29 Feb 2048 23:59:59 GMT") == Date(timeIntervalSince1970: 2_466_633_599))
        for invalid in [
            "", "tomorrow", "Sun, 06 Nov 1994", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
            "06 Nov 1600 08:49:37", "31 Feb 2030 00:00:00", "29 Feb 2031 00:00:00", "29 Feb 1900 00:00:00",
        ] {
            #expect(CookieJar.cookieDate(invalid) == nil, "\(invalid)")
        }
    }

    /// No `Path`: the directory of the URL that set it (§5.1.4); paths match on whole segments,
    /// on the path as sent, trailing slash included; the longest path goes first.
    @Test func pathsDefaultToTheDirectoryAndMatchWholeSegments() {
        // `Path=relative` is no path: the default, as `dir`'s.
        let cookies = jar(["dir=1", "root=2; Path=/", "slash=3; Path=/a/", "deep=4; Path=/a/b/c", "odd=5; Path=relative"])
        #expect(sent(cookies, to: "https://example.test/a/b") == "dir=1; odd=5; slash=3; root=2")
        #expect(sent(cookies, to: "https://example.test/a/b/c") == "deep=4; dir=1; odd=5; slash=3; root=2")
        #expect(sent(cookies, to: "https://example.test/a/bc") == "slash=3; root=2")
        #expect(sent(cookies, to: "https://example.test/a/") == "slash=3; root=2")
        #expect(sent(cookies, to: "https://example.test/a") == "root=2")
        #expect(sent(cookies, to: "https://example.test/a%2Fb") == "root=2", "an escaped slash is no segment boundary")
        #expect(CookieJar.defaultPath("/") == "/")
        #expect(CookieJar.defaultPath("/login") == "/")
        #expect(CookieJar.defaultPath("/api/v1/login") == "/api/v1")
        #expect(CookieJar.defaultPath("") == "/")
    }

    /// The path matched and defaulted to is the path libcurl sends: `.` and `..` resolved, and a
    /// URL relative to a base resolved against it (`/admin/../public` matched `Path=/admin`, and
    /// a relative URL's path `y` matched no cookie).
    @Test func thePathIsThePathAsSent() throws {
        let cookies = jar(["adm=1; Path=/admin", "v1=2"], from: "https://ex.test/v1/x")
        #expect(sent(cookies, to: "https://ex.test/admin/../public") == nil)
        #expect(sent(cookies, to: "https://ex.test/public/../admin/./x") == "adm=1")
        let relative = try #require(URL(string: "y", relativeTo: URL(string: "https://ex.test/v1/")))
        #expect(cookies.header(for: relative, now: now) == "v1=2")
        // Set through a relative URL and a dotted path: the directory as sent.
        let set = CookieJar()
        set.store(setCookie: ["r=1"], for: try #require(URL(string: "a/page", relativeTo: URL(string: "https://ex.test/v2/"))), now: now)
        set.store(setCookie: ["d=1"], for: try #require(URL(string: "https://ex.test/admin/../pub/page")), now: now)
        #expect(set.all(at: now).map(\.path).sorted() == ["/pub", "/v2/a"])
    }

    /// A cookie's name, value and attributes are split at the bytes `;` and `=` (§5.2): a `;`
    /// before a combining mark kept `; Secure` in the value (the cookie then went over http),
    /// and `=` before one left no `=` (the cookie was dropped). Names are compared byte for byte.
    @Test func aCookieIsSplitAtBytesAndNamedByThem() {
        let cookies = jar(["a=\u{0600}; Secure", "b=\u{301}x", "café=1", "cafe\u{301}=2"])
        #expect(sent(cookies, to: "http://example.test/a/b/page") == "b=\u{301}x; café=1; cafe\u{301}=2")
        #expect(cookies.all(at: now).first { $0.name == "a" }?.secure == true)
        #expect(cookies.all(at: now).count == 4)
    }

    /// Eviction drops the least recently *used* cookie (§5.3: the earliest last access, which a
    /// `Cookie` header updates, §5.4): a session cookie sent on every request went first once
    /// its host set 50 more.
    @Test func evictionGoesByLastUse() {
        let cookies = jar(["sid=1; Path=/"])
        for index in 0..<CookieJar.maxCookiesPerDomain {
            #expect(sent(cookies, to: "https://example.test/api")?.hasPrefix("sid=1") == true)
            cookies.store(setCookie: ["c\(index)=x; Path=/static"], for: URL(string: "https://example.test/")!, now: now)
        }
        let names = Set(cookies.all(at: now).map(\.name))
        #expect(names.contains("sid"))
        #expect(!names.contains("c0"))
        #expect(names.count == CookieJar.maxCookiesPerDomain)
    }

    @Test func domainsAndHostOnlyCookies() {
        let cookies = jar(
            ["host=1", "wide=2; Domain=.Example.TEST", "empty=3; Domain=", "other=4; Domain=elsewhere.test", "tld=5; Domain=test"],
            from: "https://www.example.test/")
        #expect(sent(cookies, to: "https://www.example.test/") == "host=1; wide=2; empty=3")
        #expect(sent(cookies, to: "https://deep.www.example.test/") == "wide=2", "not the host-only ones")
        #expect(sent(cookies, to: "https://example.test/") == "wide=2")
        #expect(sent(cookies, to: "https://sub.example.test/") == "wide=2")
        let address = jar(["plain=1", "above=2; Domain=0.0.1", "itself=3; Domain=127.0.0.1"], from: "http://127.0.0.1/")
        #expect(sent(address, to: "http://127.0.0.1/") == "plain=1; itself=3")
    }

    /// RFC 6265 §5.3 step 5, by the public suffix list (the system's libpsl, which Debian's
    /// libcurl links): a site cannot set a cookie for a suffix others share (`co.uk`, and the
    /// private `github.io`); a host that is a suffix itself gets a host-only cookie. They were
    /// stored and sent to every site below the suffix (two labels were the only rule).
    @Test func aPublicSuffixIsNoCookieDomain() throws {
        #expect(CookieJar.isPublicSuffix("co.uk") == true, "libpsl.so.5 (apt-get install libpsl5) answers")
        #expect(CookieJar.isPublicSuffix("github.io") == true && CookieJar.isPublicSuffix("example.co.uk") == false)
        let cookies = jar(
            ["suffix=1; Domain=co.uk", "site=2; Domain=example.co.uk", "host=3"], from: "https://www.example.co.uk/")
        #expect(sent(cookies, to: "https://bank.co.uk/") == nil)
        #expect(sent(cookies, to: "https://shop.example.co.uk/") == "site=2")
        #expect(sent(cookies, to: "https://www.example.co.uk/") == "site=2; host=3")
        let pages = jar(["wide=1; Domain=github.io"], from: "https://attacker.github.io/")
        #expect(sent(pages, to: "https://victim.github.io/") == nil && pages.all(at: now).isEmpty)
        let itself = jar(["own=1; Domain=github.io"], from: "https://github.io/")
        #expect(sent(itself, to: "https://github.io/") == "own=1")
        #expect(sent(itself, to: "https://victim.github.io/") == nil, "host-only")
        #expect(try #require(itself.all(at: now).first).hostOnly)
    }

    /// RFC 6265bis §5.7: `Secure` is set over https only, and a response over http neither
    /// replaces nor shadows a secure cookie of the same name (session fixation).
    @Test func plainHTTPCannotSetOrOverwriteASecureCookie() {
        let cookies = jar(["sid=good; Secure", "pref=a; Secure; Path=/"], from: "https://example.test/")
        cookies.store(
            setCookie: ["sid=attacker", "pref=b; Path=/deeper", "plain=1; Secure", "free=1"], for: URL(string: "http://example.test/")!, now: now)
        #expect(sent(cookies, to: "https://example.test/deeper") == "sid=good; pref=a; free=1")
        #expect(sent(cookies, to: "http://example.test/deeper") == "free=1")
        // An expired secure cookie shadows nothing.
        let expiring = jar(["gone=1; Secure; Max-Age=5"], from: "https://example.test/")
        expiring.store(setCookie: ["gone=2"], for: URL(string: "http://example.test/")!, now: now.addingTimeInterval(10))
        #expect(sent(expiring, to: "http://example.test/", after: 10) == "gone=2")
        // Over https, the secure cookie is replaced as any other.
        cookies.store(setCookie: ["sid=renewed; Secure"], for: URL(string: "https://example.test/")!, now: now)
        #expect(sent(cookies, to: "https://example.test/") == "sid=renewed; pref=a; free=1")
    }

    /// RFC 6265bis §5.6: a value with a control character sets nothing (a bare CR went on to every
    /// host of the domain in their `Cookie` header); a tab is no control character here.
    @Test func aSetCookieWithAControlCharacterSetsNothing() {
        let cookies = jar(
            ["a=b\rX-Injected: 1; Domain=example.test", "c=d\n; Path=/", "e=f; Path=/\u{0}x", "g=h\u{7F}", "tab=\tok\t; Path=/"],
            from: "https://www.example.test/")
        #expect(sent(cookies, to: "https://api.example.test/") == nil)
        #expect(sent(cookies, to: "https://www.example.test/") == "tab=ok")
    }

    /// An attribute value over 1,024 bytes is ignored (RFC 6265bis §5.6): a path of 100 KB was kept
    /// for the jar's lifetime, 3,000 times over.
    @Test func anAttributeValueOver1024BytesIsIgnored() {
        let long = "/" + String(repeating: "x", count: 1024)
        let cookies = jar(["a=b; Path=\(long)", "c=d; Path=\(long.dropLast())", "e=f; Domain=\(String(repeating: "e", count: 1020)).example.test"])
        #expect(cookies.all(at: now).map(\.path) == ["/a/b", String(long.dropLast()), "/a/b"])
        #expect(cookies.all(at: now).map(\.hostOnly) == [true, true, true])
    }

    /// `__Secure-` needs `Secure`; `__Host-` needs `Secure`, no `Domain` and `Path=/` (RFC 6265bis
    /// §5.6, names compared without case): a sibling host tossed `__Host-sid` to the whole domain.
    @Test func cookieNamePrefixesAreEnforced() {
        let refused = jar(
            [
                "__Host-sid=evil; Secure; Path=/; Domain=example.test", "__Secure-x=1; Path=/", "__host-a=1; Secure",
                "__HOST-b=1; Secure; Path=/x", "__Host-c=1; Path=/",
            ], from: "https://a.example.test/")
        #expect(sent(refused, to: "https://a.example.test/x") == nil)
        let kept = jar(
            ["__Host-sid=1; Secure; Path=/", "__Secure-x=2; Secure; Domain=example.test", "__SECURE-y=3; secure"], from: "https://a.example.test/")
        #expect(sent(kept, to: "https://a.example.test/") == "__Host-sid=1; __Secure-x=2; __SECURE-y=3")
        #expect(sent(kept, to: "https://b.example.test/") == "__Secure-x=2")
    }

    @Test func theJarAndItsHeaderAreBounded() throws {
        let big = String(repeating: "v", count: 4000)
        var fields = (0..<60).map { "c\($0)=\(big)" }
        fields.append("huge=" + String(repeating: "x", count: 4093))
        let cookies = jar(fields)
        let kept = cookies.all(at: now)
        #expect(kept.count == CookieJar.maxCookiesPerDomain)
        #expect(kept.first?.name == "c10", "the least recently set go first")
        #expect(!kept.contains { $0.name == "huge" }, "over 4,096 bytes of name and value")
        let header = try #require(sent(cookies, to: "https://example.test/a/b/"))
        #expect(header.utf8.count <= CookieJar.maxHeaderBytes)
        #expect(header.split(separator: ";").count == 2)
        #expect(header.hasPrefix("c10="))
        // Many domains: 3,000 cookies in all.
        let wide = CookieJar()
        for index in 0..<70 {
            wide.store(setCookie: (0..<50).map { "n\($0)=1" }, for: URL(string: "https://h\(index).example.test/")!, now: now)
        }
        #expect(wide.all(at: now).count == CookieJar.maxCookies)
        #expect(sent(wide, to: "https://h0.example.test/") == nil, "the oldest domain's went first")
        #expect(sent(wide, to: "https://h69.example.test/")?.split(separator: ";").count == 50)
    }

    /// A server that floods the jar (300 cookies of 3 kB) no longer makes every later request
    /// fail: the jar keeps 50 for the host, and sends what fits in 8,190 bytes.
    @Test func aCookieFloodLeavesTheHostReachable() async throws {
        let transport = try transport()
        let value = String(repeating: "z", count: 3000)
        for index in 0..<300 {
            var components = try #require(
                URLComponents(url: try TestServer.url().appendingPathComponent("response-headers"), resolvingAgainstBaseURL: false))
            components.queryItems = [URLQueryItem(name: "Set-Cookie", value: "flood\(index)=\(value)")]
            let response = try await transport.send(TransportRequest(urlRequest: URLRequest(url: try #require(components.url))))
            #expect(response.response.statusCode == 200)
        }
        let cookies = try #require(try await cookiesSent(transport))
        #expect(cookies.count == 2, "two cookies of 3 kB fit in 8,190 bytes, three do not")
        // The two sent with every request are the most recently used: they stay (§5.3), and the
        // jar's 50 are them and the last 48 set.
        #expect(cookies.keys.sorted() == ["flood0", "flood1"])
    }
}
