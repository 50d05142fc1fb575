import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// TLS you control, against HTTPS servers whose CA, certificates and keys `Tests/test` makes at
/// start (Tests/Fixtures/testserver.py), and HTTP/2 by ALPN.
@Suite("Curl transport: TLS and HTTP/2")
struct CurlTLSTests {
    static func env(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else { throw TestServer.Missing(variable: name) }
        return value
    }

    func get(_ base: String, path: String = "get", tls: TLSConfiguration) async throws -> Result<TransportResponse, TransportFailure> {
        var configuration = CurlTransport.Configuration()
        configuration.tls = tls
        let transport = try CurlTransport(configuration: configuration)
        let url = try #require(URL(string: base)).appendingPathComponent(path)
        do {
            return .success(try await transport.send(TransportRequest(urlRequest: URLRequest(url: url))))
        } catch {
            return .failure(error)
        }
    }

    /// What `transport` makes of a GET of `url`: the response, or the failure.
    func outcome(_ transport: CurlTransport, _ url: URL) async -> Result<TransportResponse, TransportFailure> {
        do {
            return .success(try await transport.send(TransportRequest(urlRequest: URLRequest(url: url))))
        } catch {
            return .failure(error)
        }
    }

    func kind(_ result: Result<TransportResponse, TransportFailure>) -> TransportFailureKind? {
        guard case .failure(let failure) = result else { return nil }
        return failure.kind
    }

    /// The failure's kind and message; nil for a response.
    func refusal(_ result: Result<TransportResponse, TransportFailure>) -> String? {
        guard case .failure(let failure) = result else { return nil }
        return "\(failure.kind): \(failure.message)"
    }

    func status(_ result: Result<TransportResponse, TransportFailure>) -> Int? {
        guard case .success(let response) = result else { return nil }
        return response.response.statusCode
    }

    @Test func theSystemStoreRefusesThePrivateCA() async throws {
        let result = try await get(try Self.env("HTTPBIN_TLS_URL"), tls: TLSConfiguration())
        #expect(kind(result) == .serverCertificateUntrusted)
        guard case .failure(let failure) = result else { return }
        #expect(failure.message.contains("curl error 60"))
    }

    /// URL loading's refusal of a certificate it does not trust is that kind of failure, as
    /// libcurl's is (`RetryPolicy` and the hooks tell it from others); on Linux it came as an
    /// unknown error (`other`), swift-corelibs-foundation mapping few of libcurl's codes.
    @Test func urlLoadingTellsAnUntrustedCertificate() async throws {
        let transport = URLSessionTransport()
        for base in [try Self.env("HTTPBIN_TLS_URL"), try Self.env("HTTPBIN_SELFSIGNED_URL")] {
            let url = try #require(URL(string: base)).appendingPathComponent("get")
            do {
                let response = try await transport.send(TransportRequest(urlRequest: URLRequest(url: url)))
                Issue.record("\(base): answered \(response.response.statusCode)")
            } catch {
                // The libcurl 8 the tests also run on was built for another distribution: URL
                // loading has it read a CA file this machine lacks, so it trusts nothing, and says so.
                let unreadable = ["trust anchors", "certificate file", "verify locations"].contains { error.message.contains($0) }
                let expected: TransportFailureKind = unreadable ? .tlsHandshakeFailed : .serverCertificateUntrusted
                #expect(error.kind == expected, "\(base): \(error)")
            }
        }
        // libcurl's words for the kinds URL loading on Linux reports as unknown.
        for (message, kind) in [
            ("SSL certificate problem: unable to get local issuer certificate", TransportFailureKind.serverCertificateUntrusted),
            ("SSL: no alternative certificate subject name matches target host name 'a.example'", .serverCertificateUntrusted),
            ("OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to 127.0.0.1:443", .tlsHandshakeFailed),
            ("TLS connect error: error:0A000410:SSL routines::sslv3 alert handshake failure", .tlsHandshakeFailed),
            ("error adding trust anchors from file: /etc/pki/tls/certs/ca-bundle.crt", .tlsHandshakeFailed),
            ("error setting certificate file: /etc/pki/tls/certs/ca-bundle.crt", .tlsHandshakeFailed),
            ("Failed to connect to 10.255.255.1 port 80 after 3 ms: No route to host", .cannotConnect),
            ("Send failure: Broken pipe", .connectionLost), ("Recv failure: Connection reset by peer", .connectionLost),
            ("OpenSSL SSL_read: Connection reset by peer, errno 104", .connectionLost),
            ("Failure when receiving data from the peer", .connectionLost),
            ("something else", .other),
        ] {
            let error = NSError(domain: NSURLErrorDomain, code: NSURLErrorUnknown, userInfo: [NSLocalizedDescriptionKey: message])
            #expect(SessionCall.failure(for: error, cancelled: false).kind == kind, "\(message)")
        }
        let secure = NSError(domain: NSURLErrorDomain, code: NSURLErrorSecureConnectionFailed, userInfo: [NSLocalizedDescriptionKey: "x"])
        #expect(SessionCall.failure(for: secure, cancelled: false).kind == .tlsHandshakeFailed)
    }

    @Test func trustingThePrivateCAWorksBesideOrInsteadOfTheSystemStore() async throws {
        let ca = try Self.env("TLS_CA_PEM")
        let base = try Self.env("HTTPBIN_TLS_URL")
        #expect(status(try await get(base, tls: TLSConfiguration(trustRoots: .systemAnd([.file(ca)])))) == 200)
        #expect(status(try await get(base, tls: TLSConfiguration(trustRoots: .only([.file(ca)])))) == 200)
        let pem = try Data(contentsOf: URL(fileURLWithPath: ca))
        #expect(status(try await get(base, tls: TLSConfiguration(trustRoots: .only([.pem(pem)])))) == 200)
        // Another CA is not enough.
        #expect(
            kind(try await get(base, tls: TLSConfiguration(trustRoots: .only([.file(try Self.env("TLS_OTHER_CA_PEM"))]))))
                == .serverCertificateUntrusted)
    }

    @Test func trustingOnlyOneSelfSignedCertificate() async throws {
        let base = try Self.env("HTTPBIN_SELFSIGNED_URL")
        #expect(kind(try await get(base, tls: TLSConfiguration())) == .serverCertificateUntrusted)
        #expect(status(try await get(base, tls: TLSConfiguration(trustRoots: .only([.file(try Self.env("TLS_SELFSIGNED_PEM"))])))) == 200)
    }

    @Test func pinnedPublicKeysWithRotation() async throws {
        let base = try Self.env("HTTPBIN_TLS_URL")
        let ca = TLSConfiguration.TrustRoots.only([.file(try Self.env("TLS_CA_PEM"))])
        let pin = try Self.env("TLS_SERVER_PIN")
        let other = try Self.env("TLS_SELFSIGNED_PIN")
        #expect(status(try await get(base, tls: TLSConfiguration(trustRoots: ca, pinnedPublicKeys: [pin]))) == 200)
        #expect(status(try await get(base, tls: TLSConfiguration(trustRoots: ca, pinnedPublicKeys: [other, pin]))) == 200)
        let mismatch = try await get(base, tls: TLSConfiguration(trustRoots: ca, pinnedPublicKeys: [other]))
        #expect(kind(mismatch) == .publicKeyPinMismatch)
    }

    @Test func mutualTLS() async throws {
        let base = try Self.env("HTTPBIN_MTLS_URL")
        let ca = TLSConfiguration.TrustRoots.only([.file(try Self.env("TLS_CA_PEM"))])
        let without = try await get(base, tls: TLSConfiguration(trustRoots: ca))
        #expect(kind(without) == .tlsHandshakeFailed)
        let client = TLSConfiguration.ClientCertificate(
            certificate: .file(try Self.env("TLS_CLIENT_CERT")),
            privateKey: .file(try Self.env("TLS_CLIENT_KEY")))
        #expect(status(try await get(base, tls: TLSConfiguration(trustRoots: ca, clientCertificate: client))) == 200)
    }

    /// An encrypted client key without its passphrase is refused when the transport is made:
    /// libcurl before 8.13 crashed the process reading it (a null passphrase handed to OpenSSL).
    /// With its passphrase it is used; with a wrong one the handshake fails.
    @Test(arguments: ["TLS_CLIENT_KEY_ENCRYPTED", "TLS_CLIENT_KEY_TRADITIONAL"])
    func anEncryptedClientKeyNeedsItsPassphrase(_ variable: String) async throws {
        let base = try Self.env("HTTPBIN_MTLS_URL")
        let ca = TLSConfiguration.TrustRoots.only([.file(try Self.env("TLS_CA_PEM"))])
        let key = try Self.env(variable)
        func client(_ passphrase: String?) throws -> TLSConfiguration.ClientCertificate {
            TLSConfiguration.ClientCertificate(certificate: .file(try Self.env("TLS_CLIENT_CERT")), privateKey: .file(key), passphrase: passphrase)
        }
        var configuration = CurlTransport.Configuration()
        configuration.tls = TLSConfiguration(trustRoots: ca, clientCertificate: try client(nil))
        #expect(throws: CurlTransportError(.invalidConfiguration, "tls: client private key \(key): encrypted; give its passphrase")) {
            try CurlTransport(configuration: configuration)
        }
        #expect(status(try await get(base, tls: TLSConfiguration(trustRoots: ca, clientCertificate: try client("s3cret")))) == 200)
        let wrong = try await get(base, tls: TLSConfiguration(trustRoots: ca, clientCertificate: try client("wrong")))
        #expect(kind(wrong) == .tlsHandshakeFailed, "\(wrong)")
    }

    /// `.systemAnd([])` adds nothing to the system's store: it is the system's store (an empty
    /// bundle in memory replaced libcurl's CA file, and every handshake failed). The test server's
    /// private CA is untrusted, as with `.system`.
    @Test func theSystemStoreAndNothingIsTheSystemStore() async throws {
        let base = try Self.env("HTTPBIN_TLS_URL")
        #expect(kind(try await get(base, tls: TLSConfiguration(trustRoots: .system))) == .serverCertificateUntrusted)
        #expect(kind(try await get(base, tls: TLSConfiguration(trustRoots: .systemAnd([])))) == .serverCertificateUntrusted)
    }

    /// A proxy's password never shows in an error: not in a URL without a scheme (read as one of
    /// scheme `user`, with no host), and a password past ASCII is the user's own (it was refused
    /// as if the host were written so, quoting it).
    @Test func aProxysPasswordIsNotInItsErrors() throws {
        var configuration = CurlTransport.Configuration()
        configuration.proxy = .url("user:s3cret@proxy.example:3128")
        #expect(
            throws: CurlTransportError(.invalidConfiguration, "proxy \"…@proxy.example:3128\": not a URL with a host")
        ) { try CurlTransport(configuration: configuration) }
        configuration.proxy = .url("http://u:p%C3%A4ss@127.0.0.1:3128")
        _ = try CurlTransport(configuration: configuration)
        configuration.proxy = .url("http://u:päss@127.0.0.1:3128")
        _ = try CurlTransport(configuration: configuration)
        configuration.proxy = .url("http://u:s3cret@bücher.example:3128")
        #expect(
            throws: CurlTransportError(
                .invalidConfiguration, "proxy \"http://…@bücher.example:3128\": write it in ASCII, its host in IDNA's form (xn--bcher-kva.example)")
        ) { try CurlTransport(configuration: configuration) }
    }

    /// An `https://` proxy is verified with its host's `tlsOverrides` entry (a private CA, a pinned
    /// key, a client certificate), else against the system's trust store: the default `tls` is the
    /// origins' (its roots and pins would refuse a proxy they are not meant for). libcurl's own CA
    /// store was all a proxy was checked against: one with a certificate of a private CA could not
    /// be used. The requests are plain `http://` through the proxy (httpbin over TLS plays it).
    @Test func anHTTPSProxyIsVerifiedWithItsHostsTLSConfiguration() async throws {
        func viaProxy(
            _ proxy: String, tls: TLSConfiguration = TLSConfiguration(), overrides: [String: TLSConfiguration] = [:]
        ) async throws -> Result<TransportResponse, TransportFailure> {
            var configuration = CurlTransport.Configuration()
            configuration.proxy = .url(proxy)
            configuration.tls = tls
            configuration.tlsOverrides = overrides
            let transport = try CurlTransport(configuration: configuration)
            let request = TransportRequest(urlRequest: URLRequest(url: try #require(URL(string: "http://origin.example.test/get"))))
            do {
                return .success(try await transport.send(request))
            } catch {
                return .failure(error)
            }
        }
        let proxy = try Self.env("HTTPBIN_TLS_URL")
        let ca = TLSConfiguration.TrustRoots.only([.file(try Self.env("TLS_CA_PEM"))])
        #expect(kind(try await viaProxy(proxy)) == .serverCertificateUntrusted)
        let trusted = try await viaProxy(proxy, overrides: ["127.0.0.1": TLSConfiguration(trustRoots: ca)])
        #expect(status(trusted) == 200)
        let echo = try JSONSerialization.jsonObject(with: try trusted.get().data) as? [String: Any]
        // httpbin names the scheme it was reached by (TLS), and the origin's host.
        #expect((echo?["url"] as? String)?.hasSuffix("://origin.example.test/get") == true, "the request went through the proxy")
        // The default `tls` is the origins': a proxy without an entry is not held to it.
        #expect(kind(try await viaProxy(proxy, tls: TLSConfiguration(trustRoots: ca))) == .serverCertificateUntrusted)
        let otherPin = try Self.env("TLS_SELFSIGNED_PIN")
        #expect(
            kind(try await viaProxy(proxy, overrides: ["127.0.0.1": TLSConfiguration(trustRoots: ca, pinnedPublicKeys: [otherPin])]))
                == .publicKeyPinMismatch)
        let pin = try Self.env("TLS_SERVER_PIN")
        #expect(status(try await viaProxy(proxy, overrides: ["127.0.0.1": TLSConfiguration(trustRoots: ca, pinnedPublicKeys: [pin])])) == 200)
        // A proxy that asks for a client certificate.
        let mutual = try Self.env("HTTPBIN_MTLS_URL")
        #expect(kind(try await viaProxy(mutual, overrides: ["127.0.0.1": TLSConfiguration(trustRoots: ca)])) == .tlsHandshakeFailed)
        let client = TLSConfiguration.ClientCertificate(
            certificate: .file(try Self.env("TLS_CLIENT_CERT")), privateKey: .file(try Self.env("TLS_CLIENT_KEY")))
        #expect(status(try await viaProxy(mutual, overrides: ["127.0.0.1": TLSConfiguration(trustRoots: ca, clientCertificate: client)])) == 200)
    }

    /// The host an `https://` proxy's entry is looked up by, as an origin's is: an IPv6 address
    /// without its brackets (`URLComponents` kept them, and the entry for `::1` was passed over),
    /// a user and password left out; no host for a plain proxy or the environment's.
    @Test func anHTTPSProxysHostIsReadAsAnOriginsIs() {
        #expect(CurlSettings.httpsProxyHost(.url("https://[::1]:8443")) == "::1")
        #expect(CurlSettings.httpsProxyHost(.url("https://user:pass@proxy.example:3128")) == "proxy.example")
        #expect(CurlSettings.httpsProxyHost(.url("HTTPS://Proxy.Example")).map(CurlSettings.overrideKey) == "proxy.example")
        #expect(CurlSettings.httpsProxyHost(.url("http://proxy.example:3128")) == nil)
        #expect(CurlSettings.httpsProxyHost(.environment) == nil)
        #expect(CurlSettings.httpsProxyHost(.none) == nil)
    }

    @Test func perHostOverridesReplaceTheDefault() async throws {
        var configuration = CurlTransport.Configuration()
        configuration.tlsOverrides = ["127.0.0.1": TLSConfiguration(trustRoots: .only([.file(try Self.env("TLS_CA_PEM"))]))]
        let transport = try CurlTransport(configuration: configuration)
        let url = try #require(URL(string: try Self.env("HTTPBIN_TLS_URL"))).appendingPathComponent("get")
        #expect(try await transport.send(TransportRequest(urlRequest: URLRequest(url: url))).response.statusCode == 200)
    }

    /// A fully qualified host (`api.example.test.`, in a URL or a redirect's `Location`) gets the
    /// override of its name: libcurl matches the certificate to both alike, and the pin was
    /// skipped. Two keys for one host are refused.
    @Test func aTrailingDotGetsTheHostsOverride() throws {
        var configuration = CurlTransport.Configuration()
        let pin = "sha256//" + Data(count: 32).base64EncodedString()
        configuration.tlsOverrides = ["API.example.test": TLSConfiguration(pinnedPublicKeys: [pin])]
        let settings = try CurlTransport(configuration: configuration).loop.settings
        for host in ["api.example.test", "api.example.test.", "Api.Example.Test."] {
            #expect(settings.tls(for: host).pins == pin, "\(host)")
        }
        #expect(settings.tls(for: "other.example.test").pins == nil)
        #expect(settings.tls(for: "api.example.test..").pins == nil)
        // Only an IPv6 address on a link falls back to the address's entry, never a name with a `%`.
        #expect(settings.tls(for: "api.example.test%eth0").pins == nil)
        configuration.tlsOverrides["api.example.test."] = TLSConfiguration()
        #expect(
            throws: CurlTransportError(.invalidConfiguration, "tlsOverrides name the host api.example.test twice (api.example.test. is one of them)")
        ) { try CurlTransport(configuration: configuration) }
    }

    /// A host past ASCII gets its override whichever form the entry and the URL are written in
    /// (IDNA: `bücher.example` is `xn--bcher-kva.example`, as a URL's host reads): an entry in
    /// the name's own form was never found, and its pin was skipped. Both forms are one host.
    @Test func anInternationalHostGetsItsOverrideInEitherForm() throws {
        var configuration = CurlTransport.Configuration()
        let pin = "sha256//" + Data(count: 32).base64EncodedString()
        configuration.tlsOverrides = ["BÜCHER.example": TLSConfiguration(pinnedPublicKeys: [pin])]
        let settings = try CurlTransport(configuration: configuration).loop.settings
        let url = try #require(URL(string: "https://bücher.example/x"))
        for host in ["xn--bcher-kva.example", "bücher.example", "XN--BCHER-KVA.example.", try #require(url.host)] {
            #expect(settings.tls(for: host).pins == pin, "\(host)")
        }
        #expect(settings.tls(for: "bucher.example").pins == nil)
        configuration.tlsOverrides["xn--bcher-kva.example"] = TLSConfiguration()
        #expect(
            throws: CurlTransportError(
                .invalidConfiguration, "tlsOverrides name the host xn--bcher-kva.example twice (xn--bcher-kva.example is one of them)")
        ) { try CurlTransport(configuration: configuration) }
    }

    /// A host written percent-encoded goes out in the form its override is looked up by: libcurl
    /// decodes such a host and converts it with its own IDNA library, which reads
    /// `local%E2%80%8Dhost` as `localhost` (a name Foundation's IDNA refuses), and the request
    /// reached the pinned host with the default TLS. A host that reads as no name is refused, as
    /// is an `https://` proxy whose host is written so.
    @Test func aPercentEncodedHostGetsTheOverrideOfTheHostItReaches() async throws {
        let port = try #require(URL(string: try Self.env("HTTPBIN_TLS_URL"))?.port)
        let ca = TLSConfiguration.TrustRoots.only([.file(try Self.env("TLS_CA_PEM"))])
        func transport(pin: String) throws -> CurlTransport {
            var configuration = CurlTransport.Configuration()
            configuration.tls = TLSConfiguration(trustRoots: ca)
            configuration.tlsOverrides = ["localhost": TLSConfiguration(trustRoots: ca, pinnedPublicKeys: [pin])]
            return try CurlTransport(configuration: configuration)
        }
        func send(_ host: String, _ transport: CurlTransport) async throws -> Result<TransportResponse, TransportFailure> {
            return await outcome(transport, try #require(URL(string: "https://\(host):\(port)/get")))
        }
        let wrongPin = try transport(pin: try Self.env("TLS_SELFSIGNED_PIN"))
        // The control: the pin holds for the name, and a host without an entry gets the default.
        #expect(kind(try await send("localhost", wrongPin)) == .publicKeyPinMismatch)
        #expect(status(try await send("127.0.0.1", wrongPin)) == 200)
        for host in ["%6Cocalhost", "LOCAL%48OST", "%EF%BD%8Cocalhost"] {
            #expect(kind(try await send(host, wrongPin)) == .publicKeyPinMismatch, "\(host)")
        }
        #expect(
            refusal(try await send("local%E2%80%8Dhost", wrongPin))
                == "other: cannot send https://local%E2%80%8Dhost:\(port)/get: its host \"local\u{200D}host\" (written percent-encoded) does not decode to a host name"
        )
        #expect(
            refusal(try await send("local%2Fhost", wrongPin))
                == "other: cannot send https://local%2Fhost:\(port)/get: its host \"local/host\" (written percent-encoded) does not decode to a host name"
        )
        // Sent, the URL names the host reached.
        let rightPin = try transport(pin: try Self.env("TLS_SERVER_PIN"))
        let reached = try await send("%EF%BD%8Cocalhost", rightPin)
        #expect(status(reached) == 200)
        #expect((try? reached.get())?.response.url?.absoluteString == "https://localhost:\(port)/get")
        var configuration = CurlTransport.Configuration()
        configuration.proxy = .url("https://local%E2%80%8Dhost:\(port)")
        #expect(
            throws: CurlTransportError(
                .invalidConfiguration,
                "proxy \"https://local%E2%80%8Dhost:\(port)\": its host local%E2%80%8Dhost is written percent-encoded; write the name itself")
        ) { try CurlTransport(configuration: configuration) }
        configuration.proxy = .url("https://bücher.example:\(port)")
        #expect(
            throws: CurlTransportError(
                .invalidConfiguration, "proxy \"https://bücher.example:\(port)\": write it in ASCII, its host in IDNA's form (xn--bcher-kva.example)")
        ) { try CurlTransport(configuration: configuration) }
    }

    /// `withHostAsRead` rewrites a host written percent-encoded, and only that: a `%` in the user,
    /// path or query, an IPv6 zone and a plain host leave the URL as it is; a host holding a
    /// character `URLComponents` refuses in a host (`<`, from `%3C`) is a failure, not a trap
    /// (a redirect's `Location` is the server's to write).
    @Test func onlyAHostWrittenPercentEncodedIsRewritten() throws {
        let unchanged = [
            "https://api.example.test/a%20b?q=%C3%BC#%41", "https://u%40:p%3A@api.example.test:8443/", "https://[fe80::1%25eth0]:8443/x",
            "https://xn--bcher-kva.example/", "http://127.0.0.1:8080/%2F",
        ]
        for text in unchanged {
            let url = try #require(URL(string: text))
            #expect(try CurlCall.withHostAsRead(url).absoluteString == text)
        }
        let rewritten = [
            ("https://u%40:p%3A@b%C3%BCcher.example:8443/a%20b?q=%C3%BC", "https://u%40:p%3A@xn--bcher-kva.example:8443/a%20b?q=%C3%BC"),
            ("https://%31%32%37.0.0.1:8080/", "https://127.0.0.1:8080/"), ("https://API%2Eexample.test/", "https://api.example.test/"),
        ]
        for (text, expected) in rewritten {
            #expect(try CurlCall.withHostAsRead(try #require(URL(string: text))).absoluteString == expected)
        }
        let relative = try #require(URL(string: "//b%C3%BCcher.example/x", relativeTo: URL(string: "https://base.example/")))
        #expect(try CurlCall.withHostAsRead(relative).absoluteString == "https://xn--bcher-kva.example/x")
        for (host, decoded) in [("a%3Cb.example", "a<b.example"), ("a%7Cb", "a|b"), ("a%22b", "a\"b"), ("a%2Ab", "a*b"), ("%20", " ")] {
            let url = try #require(URL(string: "https://user:secret@\(host):8443/x"))
            #expect(
                throws: TransportFailure(
                    kind: .other,
                    message:
                        "cannot send https://\(host):8443/x: its host \(decoded.debugDescription) (written percent-encoded) does not decode to a host name"
                )
            ) { try CurlCall.withHostAsRead(url) }
        }
    }

    /// A redirect to a host written so that `URLComponents` could not hold it decoded fails the
    /// request (it trapped the process); one to a host written percent-encoded gets that host's
    /// override on its hop.
    @Test func aRedirectToAPercentEncodedHostIsReadAsTheFirstRequestIs() async throws {
        let base = try Self.env("HTTPBIN_TLS_URL")
        let port = try #require(URL(string: base)?.port)
        let ca = TLSConfiguration.TrustRoots.only([.file(try Self.env("TLS_CA_PEM"))])
        var configuration = CurlTransport.Configuration()
        configuration.tls = TLSConfiguration(trustRoots: ca)
        configuration.tlsOverrides = ["localhost": TLSConfiguration(trustRoots: ca, pinnedPublicKeys: [try Self.env("TLS_SELFSIGNED_PIN")])]
        let transport = try CurlTransport(configuration: configuration)
        func redirect(to location: String) async throws -> Result<TransportResponse, TransportFailure> {
            var query = URLComponents()
            query.queryItems = [URLQueryItem(name: "url", value: location)]
            return await outcome(transport, try #require(URL(string: base + "/redirect-to?" + (query.percentEncodedQuery ?? ""))))
        }
        #expect(
            refusal(try await redirect(to: "https://a%3Cb.example:\(port)/get"))
                == "other: cannot send https://a%3Cb.example:\(port)/get: its host \"a<b.example\" (written percent-encoded) does not decode to a host name"
        )
        #expect(kind(try await redirect(to: "https://%6Cocalhost:\(port)/get")) == .publicKeyPinMismatch)
        #expect(status(try await redirect(to: "https://127.0.0.1:\(port)/get")) == 200)
    }

    /// An address gets its override in any form libcurl reads it in: `127.1`, `2130706433` and
    /// `0x7f.0.0.1` are `127.0.0.1` to libcurl, and an entry for that address was passed over for
    /// them (its pin skipped); an IPv6 address in any spelling, with or without brackets or a
    /// zone. Two entries for one address are refused.
    @Test func anAddressGetsItsOverrideInAnyFormItIsWritten() async throws {
        let port = try #require(URL(string: try Self.env("HTTPBIN_TLS_URL"))?.port)
        let ca = TLSConfiguration.TrustRoots.only([.file(try Self.env("TLS_CA_PEM"))])
        var configuration = CurlTransport.Configuration()
        configuration.tls = TLSConfiguration(trustRoots: ca)
        let pin = try Self.env("TLS_SELFSIGNED_PIN")
        configuration.tlsOverrides = [
            "127.0.0.1": TLSConfiguration(trustRoots: ca, pinnedPublicKeys: [pin]), "[::1]": TLSConfiguration(pinnedPublicKeys: [pin]),
        ]
        let transport = try CurlTransport(configuration: configuration)
        for host in [
            "127.0.0.1", "127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "::1", "[::1]", "0:0::1", "0000::0001", "::1%lo", "[::1%25lo]", "127.1.",
            "2130706433.", "::ffff:127.0.0.1", "[::FFFF:7f00:1]",
        ] {
            #expect(transport.loop.settings.tls(for: host).pins == pin, "\(host)")
        }
        #expect(transport.loop.settings.tls(for: "127.0.0.2").pins == nil)
        #expect(transport.loop.settings.tls(for: "::2").pins == nil)
        #expect(transport.loop.settings.tls(for: "127.1..").pins == nil)
        // An address on one link is another host on each: its own entry, else the address's.
        let link = "sha256//" + Data(count: 32).base64EncodedString()
        configuration.tlsOverrides["fe80::1"] = TLSConfiguration(pinnedPublicKeys: [pin])
        configuration.tlsOverrides["[fe80:0::1%25eth0]"] = TLSConfiguration(pinnedPublicKeys: [link])
        let zoned = try CurlTransport(configuration: configuration).loop.settings
        for (host, expected) in [("fe80::1%eth0", link), ("[fe80::1%25eth0]", link), ("fe80::1%eth1", pin), ("fe80::1", pin), ("fe80::0:1", pin)] {
            #expect(zoned.tls(for: host).pins == expected, "\(host)")
        }
        // A proxy's entry is found the same way.
        for (proxy, expected) in [
            ("https://[fe80::1%25eth1]:3128", pin), ("https://[fe80::1%25eth0]:3128", link), ("https://[::ffff:7f00:1]:3128", pin),
        ] {
            configuration.proxy = .url(proxy)
            #expect(try CurlTransport(configuration: configuration).loop.settings.proxyTLS?.pins == expected, "\(proxy)")
        }
        #expect(transport.loop.settings.tls(for: "::127.0.0.1").pins == nil)
        for host in ["127.1", "2130706433", "0x7f.0.0.1"] {
            let result = await outcome(transport, try #require(URL(string: "https://\(host):\(port)/get")))
            #expect(kind(result) == .publicKeyPinMismatch, "\(host): \(result)")
        }
        configuration.tlsOverrides["127.1"] = TLSConfiguration()
        #expect(
            throws: CurlTransportError(.invalidConfiguration, "tlsOverrides name the host 127.0.0.1 twice (127.1 is one of them)")
        ) { try CurlTransport(configuration: configuration) }
    }

    @Test func http2ByALPNMultiplexesConcurrentRequests() async throws {
        var configuration = CurlTransport.Configuration()
        configuration.tls = TLSConfiguration(trustRoots: .only([.file(try Self.env("TLS_CA_PEM"))]))
        let provider = Provider<Bin>(transport: try CurlTransport(configuration: configuration))
        let base = try #require(URL(string: try Self.env("HTTPBIN_H2_URL")))
        let versions = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for index in 0..<100 {
                group.addTask {
                    let response = try await provider.request(try Bin("anything/\(index)", base: base)).value
                    return (response.statusCode, response.httpVersion)
                }
            }
            var all: [(Int, String?)] = []
            for try await item in group { all.append(item) }
            return all
        }
        #expect(versions.count == 100)
        #expect(versions.allSatisfy { $0.0 == 200 && $0.1 == "HTTP/2" })
        // The same transport speaks HTTP/1.1 to a server without h2.
        let plain = try await provider.request(try Bin("get")).value
        #expect(plain.httpVersion == "HTTP/1.1")
    }
}
