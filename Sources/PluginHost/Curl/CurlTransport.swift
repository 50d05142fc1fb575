import CCurlShim
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Why a ``CurlTransport`` cannot be created.
public struct CurlTransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The category.
    public enum Kind: String, Sendable, Equatable {
        /// libcurl could not be loaded (not installed, or a symbol is missing).
        case libraryUnavailable
        /// The libcurl found is older than the one needed, or lacks a feature.
        case libraryTooOld
        /// The configuration is invalid (a CA file that does not exist or is not PEM, a bad pin, …).
        case invalidConfiguration
    }

    /// The category.
    public let kind: Kind
    /// What is wrong, naming the file, option or version.
    public let message: String

    /// Creates an error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// `kind: message`.
    public var description: String { "\(kind.rawValue): \(message)" }
}

/// How many redirects a transport follows before it hands the `3xx` response to the chain.
public struct RedirectPolicy: Sendable, Equatable, Hashable {
    /// The most redirects followed for one request; `0` follows none.
    public var maxRedirects: Int

    /// Creates a policy following at most `maxRedirects` redirects.
    public init(maxRedirects: Int) { self.maxRedirects = max(0, maxRedirects) }

    /// Follows up to 10 redirects (the default).
    public static let follow = RedirectPolicy(maxRedirects: 10)
    /// Follows none: every `3xx` reaches the interceptors and the caller.
    public static let doNotFollow = RedirectPolicy(maxRedirects: 0)
}

/// A ``Transport`` on libcurl's multi interface: the default of ``Provider`` on Linux.
///
/// One event-loop thread per transport drives every transfer (`curl_multi_poll`), reusing
/// connections (HTTP/1.1 keep-alive, HTTP/2 multiplexing when the server offers `h2` by ALPN)
/// and easy handles. libcurl itself is loaded at run time (`libcurl.so.4` on Linux,
/// `libcurl.4.dylib` on Darwin): no headers or package are needed to build.
///
/// ```swift
/// var configuration = CurlTransport.Configuration()
/// configuration.tls.trustRoots = .systemAnd([.file("/etc/myorg/ca.pem")])
/// let provider = Provider<MyAPI>(transport: try CurlTransport(configuration: configuration))
/// ```
///
/// Behaviour:
/// - **Timeouts**: the request's `timeoutInterval` is an idle timeout (no byte sent or received
///   for that long), as with URLSession; ``Configuration/connectTimeout`` bounds the connection.
/// - **Redirects**: followed by the transport itself (``Configuration/redirects``, or per request
///   ``TransportRequest/redirects``); `301`/`302` turn a `POST` into a `GET`, `303` any method but
///   `HEAD`; `Authorization` and `Cookie` are dropped when the scheme, host or port changes, and
///   `Proxy-Authorization` (which goes to the proxy alone) when the proxy may change: the scheme
///   changes under ``Configuration/Proxy/environment``; a `3xx` without `Location` is delivered
///   with its body.
/// - **Compression**: when the request carries no `Accept-Encoding`, or exactly
///   ``acceptEncoding`` (what a provider sends by default), the transport asks for every coding
///   it decodes (gzip and deflate with the system's zlib, br and zstd where their libraries are
///   installed) and decodes the body itself, whatever libcurl's version or build. When the
///   request sets another `Accept-Encoding`, or the server answers in a coding the transport did
///   not ask for, the body is passed through as it came, with its `Content-Encoding`. A body
///   that is not in its codings fails with `badResponse`, naming the coding and why.
/// - **Proxies**: from the standard environment variables (`http_proxy`, `https_proxy`,
///   `no_proxy`, …) by default, as curl does; see ``Configuration/proxy``.
/// - **Cookies**: none are stored unless ``Configuration/cookies`` is on; then an in-memory jar
///   (RFC 6265, with RFC 6265bis's rules for `Secure` and curl's bounds) keeps them.
/// - `Expect: 100-continue` is not sent unless the request names it (the body goes at once);
///   after a `417` to it, libcurl sends the request again in the same transfer, and the second
///   answer is the response (the `417`'s cookies are kept); `SIGPIPE` is ignored; its
///   connections' sockets are close-on-exec (a process the app starts inherits none of them).
public final class CurlTransport: Transport {
    /// Settings of a transport.
    public struct Configuration: Sendable {
        /// Connections to one host (scheme, host and port) at once; default 32. Requests beyond
        /// wait for a free connection (HTTP/2 streams share one connection and do not count).
        public var maxConnectionsPerHost: Int = 32
        /// Connections in all at once; default 256.
        public var maxConnections: Int = 256
        /// The longest a connection (DNS, TCP, TLS) may take; default 30 s. The request's own
        /// timeout applies too when it is shorter.
        public var connectTimeout: TimeInterval = 30
        /// How many redirects are followed; default ``RedirectPolicy/follow`` (10).
        public var redirects: RedirectPolicy = .follow
        /// TLS for every host not listed in ``tlsOverrides``.
        public var tls = TLSConfiguration()
        /// TLS per host name (as in the URL, lowercased), replacing ``tls`` for that host. A
        /// fully qualified name's trailing dot is no part of it: `api.example.com.` in a URL (or a
        /// redirect) gets the override of `api.example.com`, as libcurl checks its certificate. A
        /// name past ASCII may be written in its own form or IDNA's (`bücher.example` or
        /// `xn--bcher-kva.example`): both are the one host. A URL whose host is written
        /// percent-encoded (`b%C3%BCcher.example`) is sent to the host it decodes to, in IDNA's
        /// form, and gets that host's entry; one that decodes to no host name fails the request
        /// (libcurl's own IDNA may read it as another host), and a proxy URL written so, or past
        /// ASCII, is refused. An IP address is one entry however it is written (`127.1` and
        /// `2130706433` are `127.0.0.1`, as libcurl reads them; `[0:0::1]` is `::1`); an IPv6
        /// address on one link (`fe80::1%eth0`) gets its own entry, else the address's.
        public var tlsOverrides: [String: TLSConfiguration] = [:]
        /// Which proxy to use.
        public var proxy: Proxy = .environment
        /// Whether HTTP/2 is used when the server offers it over TLS; default true.
        public var http2 = true
        /// Whether an in-memory cookie jar stores `Set-Cookie` and sends `Cookie`; default false.
        /// A request whose `httpShouldHandleCookies` is false is left out of it both ways.
        public var cookies = false
        /// A path to load libcurl from instead of the platform's usual names: with a `/` (a bare
        /// name is refused: the dynamic loader would search for it). The first libcurl
        /// loaded serves the whole process: a later transport whose path names another file
        /// (links resolved) fails with ``CurlTransportError/Kind/libraryUnavailable``, naming both.
        public var libraryPath: String?

        /// A proxy choice.
        public enum Proxy: Sendable, Equatable {
            /// From `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy`, as curl reads them.
            case environment
            /// No proxy, whatever the environment says.
            case none
            /// This proxy URL (e.g. `http://proxy.example:3128`), with hosts that bypass it. An
            /// `https://` proxy is verified with its host's ``Configuration/tlsOverrides`` entry
            /// (trust roots, pins, client certificate), else against the system's trust store
            /// (``Configuration/tls`` is the origins').
            case url(String, noProxy: [String] = [])
        }

        /// The defaults.
        public init() {}
    }

    /// libcurl's version and TLS library, e.g. `libcurl 7.88.1 (OpenSSL/3.0.11)`.
    public let libraryDescription: String
    /// The settings.
    public let configuration: Configuration
    /// The content codings this transport decodes (`gzip, deflate`, with `br` and `zstd` where
    /// their libraries are installed); a request that carries exactly this `Accept-Encoding`
    /// gets its body decoded.
    public let acceptEncoding: String?
    let loop: CurlEventLoop

    /// The oldest libcurl accepted: 7.77.0 (curl_multi_poll, curl_multi_wakeup, CA blobs).
    public static let minimumLibcurlVersion = "7.77.0"

    /// A proxy URL as errors name it, its user information (a password) replaced by `…` (in a
    /// URL without a scheme too, `user:password@host:port`), and its host as written.
    static func proxyAsWritten(_ given: String) -> (shown: String, host: Substring) {
        let scheme = given.range(of: "://")
        var authority = given[(scheme?.upperBound ?? given.startIndex)...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        var shown = given
        if let at = authority.lastIndex(of: "@") {
            shown.replaceSubrange(authority.startIndex..<at, with: "…")
            authority = authority[authority.index(after: at)...]
        }
        let host = authority.hasPrefix("[") ? authority.prefix { $0 != "]" } : authority.prefix { $0 != ":" }
        return (shown, host)
    }

    /// Creates a transport with its own event-loop thread.
    ///
    /// - Throws: ``CurlTransportError``: libcurl is missing or too old, or the configuration is
    ///   invalid (each error names the file, option or version).
    public convenience init(configuration: Configuration = Configuration()) throws(CurlTransportError) {
        try self.init(configuration: configuration, systemTrust: nil)
    }

    /// The same, with libcurl's built-in trust given (`nil`: asked of the loaded libcurl), for tests
    /// of a libcurl built otherwise than the one installed.
    init(configuration: Configuration, systemTrust: SystemTrust?) throws(CurlTransportError) {
        let library = try CurlLibrary.load(path: configuration.libraryPath)
        guard configuration.maxConnectionsPerHost > 0, configuration.maxConnections > 0 else {
            throw CurlTransportError(.invalidConfiguration, "maxConnectionsPerHost and maxConnections must be at least 1")
        }
        // libcurl's built-in CA store, or the system's bundle where that is missing; its file is
        // read once, and only for a configuration that adds CAs to the system's.
        let trust = systemTrust ?? SystemTrust.ofLoadedLibrary()
        let systemFile = trust.substituteFile
        let addsToSystem = ([configuration.tls] + configuration.tlsOverrides.values).contains {
            if case .systemAnd = $0.trustRoots { return true }
            return false
        }
        let systemBundle = addsToSystem ? trust.bundleToInclude : nil
        let defaultTLS = try PreparedTLS(configuration.tls, context: "tls", systemBundle: systemBundle, systemFile: systemFile)
        var overrides: [String: PreparedTLS] = [:]
        // In order, so a host named twice is reported the same way each time.
        for (host, tls) in configuration.tlsOverrides.sorted(by: { $0.key < $1.key }) {
            let key = CurlSettings.overrideKey(host)
            guard overrides[key] == nil else {
                throw CurlTransportError(.invalidConfiguration, "tlsOverrides name the host \(key) twice (\(host) is one of them)")
            }
            overrides[key] = try PreparedTLS(tls, context: "tls for \(host)", systemBundle: systemBundle, systemFile: systemFile)
        }
        if case .url(let given, _) = configuration.proxy {
            let (proxy, writtenHost) = Self.proxyAsWritten(given)
            guard let url = URL(string: given), url.host != nil else {
                throw CurlTransportError(.invalidConfiguration, "proxy \"\(proxy)\": not a URL with a host")
            }
            // libcurl decodes such a host with its own IDNA library, and the entry looked up for
            // its TLS could be another host's.
            if let written = URLComponents(url: url, resolvingAgainstBaseURL: false)?.encodedHost, !written.hasPrefix("[") {
                if written.contains("%") {
                    throw CurlTransportError(
                        .invalidConfiguration, "proxy \"\(proxy)\": its host \(written) is written percent-encoded; write the name itself")
                }
                // libcurl is given the text as it is, and converts a name past ASCII itself, if at
                // all. (A password past ASCII is the user's: only the host is looked at.)
                if writtenHost.utf8.contains(where: { $0 >= 0x80 }) {
                    throw CurlTransportError(
                        .invalidConfiguration, "proxy \"\(proxy)\": write it in ASCII, its host in IDNA's form (\(written))")
                }
            }
        }
        // An https:// proxy: its host's entry, else the system's trust alone (the default `tls`
        // is the origins': its pins or private roots would refuse a proxy of a public CA).
        var proxyTLS: PreparedTLS?
        if let host = CurlSettings.httpsProxyHost(configuration.proxy) {
            if let entry = CurlSettings.entry(for: host, in: overrides) {
                proxyTLS = entry
            } else {
                proxyTLS = try PreparedTLS(TLSConfiguration(), context: "tls for the proxy", systemFile: systemFile)
            }
        }
        self.configuration = configuration
        self.libraryDescription = library.description
        self.acceptEncoding = library.encodings.isEmpty ? nil : library.encodings
        let settings = CurlSettings(
            configuration: configuration, defaultTLS: defaultTLS, tlsOverrides: overrides, proxyTLS: proxyTLS,
            encodings: library.encodings)
        loop = try CurlEventLoop(settings: settings)
    }

    deinit {
        loop.shutdown()
    }

    /// Transfers in flight or waiting to start (for tests of leaks).
    public var activeTransferCount: Int { loop.callCount }

    /// Sends `request` through libcurl.
    public func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        let call = CurlCall(request: request, loop: loop, spooledBody: try await SpooledBody.reading(request))
        let registration = request.cancellation?.onCancel { call.cancel() }
        defer { request.cancellation?.removeHandler(registration) }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                call.begin(continuation)
            }
        } onCancel: {
            call.cancel()
        }
        return try result.get().transportResponse(for: request)
    }
}

/// The loaded libcurl: checked once per process.
struct CurlLibrary: Sendable {
    let description: String
    /// The `Accept-Encoding` value libcurl can decode.
    let encodings: String

    private static let loaded = Locked<[String: Result<CurlLibrary, CurlTransportError>]>([:])

    /// The file of the libcurl this process loaded, links resolved; nil before one was.
    static var loadedFile: String? { ph_curl_loaded_file().map { String(cString: $0) } }

    /// Loads libcurl (once per path) and checks its version and features.
    static func load(path: String?) throws(CurlTransportError) -> CurlLibrary {
        try loaded.withLock { cache throws(CurlTransportError) -> CurlLibrary in
            let key = path ?? ""
            if let result = cache[key] { return try result.get() }
            let result = Result<CurlLibrary, CurlTransportError> { () throws(CurlTransportError) -> CurlLibrary in try open(path: path) }
            cache[key] = result
            return try result.get()
        }
    }

    private static func open(path: String?) throws(CurlTransportError) -> CurlLibrary {
        // A name without a `/` is one the dynamic loader searches for, not the file checked here.
        if let path, !path.contains("/") {
            throw CurlTransportError(
                .libraryUnavailable,
                "cannot load libcurl from \(path): libraryPath must be a path with a / (a bare name is searched for by the dynamic loader, "
                    + "not the file in the current directory; write ./\(path) for that one)")
        }
        if let path, !FileManager.default.fileExists(atPath: path) {
            throw CurlTransportError(.libraryUnavailable, "cannot load libcurl from \(path): no such file")
        }
        var error = [CChar](repeating: 0, count: 512)
        let status = error.withUnsafeMutableBufferPointer { buffer in
            ph_curl_load(path, buffer.baseAddress, buffer.count)
        }
        guard status == 0 else {
            throw CurlTransportError(.libraryUnavailable, String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        let info = ph_curl_version()
        let version = info.version.map { String(cString: $0) } ?? "unknown"
        guard info.version_num >= 0x074D00 else {
            throw CurlTransportError(.libraryTooOld, "libcurl \(version) found; \(CurlTransport.minimumLibcurlVersion) or later is needed")
        }
        guard info.features & PH_CURL_VERSION_SSL != 0 else {
            throw CurlTransportError(.libraryTooOld, "libcurl \(version) was built without TLS support")
        }
        // The transport decodes bodies itself, with the system's zlib, brotli and zstd.
        let encodings = ContentDecoder.available
        let ssl = info.ssl_version.map { String(cString: $0) } ?? "no TLS"
        return CurlLibrary(description: "libcurl \(version) (\(ssl))", encodings: encodings.joined(separator: ", "))
    }
}

/// What every transfer of one transport shares: the configuration, checked and prepared.
struct CurlSettings: Sendable {
    let configuration: CurlTransport.Configuration
    let defaultTLS: PreparedTLS
    let tlsOverrides: [String: PreparedTLS]
    /// The `Accept-Encoding` the transport sends and decodes (empty: none).
    let encodings: String
    /// The same as a set of content codings (with `identity` and `x-gzip`).
    let decodable: Set<String>
    let cookieJar: CookieJar?
    /// The TLS of the connection to an `https://` proxy URL (``CurlTransport/Configuration/proxy``):
    /// its host's ``CurlTransport/Configuration/tlsOverrides`` entry, else the system's trust;
    /// nil for no proxy or a plain one.
    let proxyTLS: PreparedTLS?

    init(
        configuration: CurlTransport.Configuration, defaultTLS: PreparedTLS, tlsOverrides: [String: PreparedTLS], proxyTLS: PreparedTLS?,
        encodings: String
    ) {
        self.configuration = configuration
        self.defaultTLS = defaultTLS
        self.tlsOverrides = tlsOverrides
        self.proxyTLS = proxyTLS
        self.encodings = encodings
        var decodable = Set(encodings.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        decodable.insert("identity")
        if decodable.contains("gzip") { decodable.insert("x-gzip") }
        self.decodable = decodable
        self.cookieJar = configuration.cookies ? CookieJar() : nil
    }

    func tls(for host: String) -> PreparedTLS {
        tlsOverrides.isEmpty ? defaultTLS : Self.entry(for: host, in: tlsOverrides) ?? defaultTLS
    }

    /// The entry of `overrides` (by ``overrideKey(_:)``) for `host`, an origin's or a proxy's; an
    /// IPv6 address on one link (`fe80::1%eth0`) without an entry of its own gets the address's.
    static func entry(for host: String, in overrides: [String: PreparedTLS]) -> PreparedTLS? {
        let key = overrideKey(host)
        if let entry = overrides[key] { return entry }
        if key.contains(":"), let zone = key.firstIndex(of: "%") { return overrides[String(key[..<zone])] }
        return nil
    }

    /// The host of an `https://` proxy URL, as `URL` reads it (an IPv6 address without its
    /// brackets, as an origin's is looked up); nil for no proxy, the environment's, or a plain one.
    static func httpsProxyHost(_ proxy: CurlTransport.Configuration.Proxy) -> String? {
        guard case .url(let text, _) = proxy, let url = URL(string: text), url.scheme?.lowercased() == "https" else { return nil }
        return url.host
    }

    /// A host as ``CurlTransport/Configuration/tlsOverrides`` are looked up: lowercased, without
    /// a trailing dot (libcurl matches a certificate to `api.example.com.` as to
    /// `api.example.com`, so a pin of the one must hold for the other), and a name past ASCII in
    /// IDNA's form, the one a URL's host is read in (`bücher.example` is `xn--bcher-kva.example`:
    /// an entry written the one way was never found for a request, and its pin was skipped).
    ///
    /// An IP address is looked up in one form: IPv4 dotted (libcurl reads `127.1`, `2130706433`,
    /// `0x7f.0.0.1` and `127.1.` as `127.0.0.1`, and an entry for that address was passed over for
    /// them; an IPv4-mapped IPv6 address, `::ffff:127.0.0.1`, is that IPv4 address too), IPv6 as
    /// `inet_ntop` writes it, without brackets, its zone kept (`[0:0::1]` is `::1`, `[fe80::1%25eth0]`
    /// is `fe80::1%eth0`: `fe80::1` is another host on each link; ``tls(for:)`` gives an address on
    /// a link without an entry of its own the address's).
    static func overrideKey(_ host: String) -> String {
        var text = Substring(host)
        if text.hasPrefix("["), text.hasSuffix("]") { text = text.dropFirst().dropLast() }
        if text.contains(":") {
            let address = text.prefix { $0 != "%" }
            // The zone as a URL writes it (`%25eth0`) or as it is (`%eth0`).
            let rest = text.dropFirst(address.count)
            let zone = rest.hasPrefix("%25") ? "%" + rest.dropFirst(3) : String(rest)
            if let bytes = SessionProxy.IPAddress.parse(String(address)), bytes.count == 16 {
                if bytes[..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
                    return bytes[12...].map(String.init).joined(separator: ".")
                }
                var written = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
                if bytes.withUnsafeBytes({ inet_ntop(AF_INET6, $0.baseAddress, &written, socklen_t(written.count)) }) != nil {
                    return String(decoding: written.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + zone
                }
            }
        }
        if let address = SessionProxy.normalizedIPv4(text.hasSuffix(".") ? text.dropLast() : text) { return address }
        let key = URLParts.lookupHost(host)
        return key.hasSuffix(".") ? String(key.dropLast()) : key
    }
}
