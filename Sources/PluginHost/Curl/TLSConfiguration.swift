import CCurlShim
import Foundation

/// How ``CurlTransport`` verifies the servers it talks to over HTTPS, and how it identifies itself.
///
/// Verification of the server's certificate chain and host name is always on: there is no
/// option to switch it off. What you choose is *what* is trusted.
///
/// ```swift
/// // An internal service with its own CA, besides the public ones:
/// var tls = TLSConfiguration()
/// tls.trustRoots = .systemAnd([.file("/etc/myorg/ca.pem")])
///
/// // Only one self-signed server certificate, nothing else:
/// let selfSigned = TLSConfiguration(trustRoots: .only([.file("/etc/myorg/server.pem")]))
///
/// // Pin the server's public key, with the next key already listed for rotation:
/// tls.pinnedPublicKeys = ["sha256//AbC…=", "sha256//XyZ…="]
///
/// // Mutual TLS:
/// tls.clientCertificate = .init(certificate: .file("client.pem"), privateKey: .file("client-key.pem"))
/// ```
public struct TLSConfiguration: Sendable, Equatable {
    /// PEM data: a file path or the bytes themselves.
    public enum PEMSource: Sendable, Equatable {
        /// A PEM file, read when the transport is created.
        case file(String)
        /// PEM bytes.
        case pem(Data)
    }

    /// Which certificate authorities (or certificates) are trusted.
    public enum TrustRoots: Sendable, Equatable {
        /// The system's CA store.
        case system
        /// The system's CA store and these certificates (e.g. an internal CA). On a libcurl without
        /// a CA directory, its built-in CA file goes into the bundle with them.
        case systemAnd([PEMSource])
        /// Only these certificates. A self-signed server certificate listed here is trusted as it
        /// is (its host name must still match).
        case only([PEMSource])
    }

    /// A client certificate for mutual TLS.
    public struct ClientCertificate: Sendable, Equatable {
        /// The certificate (PEM).
        public var certificate: PEMSource
        /// Its private key (PEM).
        public var privateKey: PEMSource
        /// The key's pass phrase, if it is encrypted.
        public var passphrase: String?

        /// Creates a client certificate.
        public init(certificate: PEMSource, privateKey: PEMSource, passphrase: String? = nil) {
            self.certificate = certificate
            self.privateKey = privateKey
            self.passphrase = passphrase
        }
    }

    /// The lowest TLS version accepted.
    public enum Version: String, Sendable, Equatable {
        /// TLS 1.2 (the default).
        case tls12 = "TLS 1.2"
        /// TLS 1.3.
        case tls13 = "TLS 1.3"
    }

    /// What is trusted; default ``TrustRoots/system``.
    public var trustRoots: TrustRoots
    /// SHA-256 hashes of trusted public keys (SPKI), each `sha256//` followed by the base64 of
    /// 32 bytes. When not empty, the server's key must match one of them (list several to rotate).
    public var pinnedPublicKeys: [String]
    /// A client certificate, for servers that ask for one.
    public var clientCertificate: ClientCertificate?
    /// The lowest TLS version accepted; default TLS 1.2.
    public var minimumVersion: Version

    /// Creates a TLS configuration; the defaults trust the system store, pin nothing and accept TLS 1.2 and later.
    public init(
        trustRoots: TrustRoots = .system, pinnedPublicKeys: [String] = [], clientCertificate: ClientCertificate? = nil,
        minimumVersion: Version = .tls12
    ) {
        self.trustRoots = trustRoots
        self.pinnedPublicKeys = pinnedPublicKeys
        self.clientCertificate = clientCertificate
        self.minimumVersion = minimumVersion
    }
}

/// A ``TLSConfiguration`` checked and read into memory: what each transfer hands to libcurl.
struct PreparedTLS: Sendable {
    /// The most bytes of a PEM file read (a system's CA bundle is about 200 KB).
    static let maxPEMBytes = 16 << 20

    /// PEM bytes of the extra trusted certificates, or nil.
    let caBundle: Data?
    /// Whether the system store is left out.
    let excludeSystemStore: Bool
    /// `sha256//…;sha256//…`, or nil.
    let pins: String?
    let clientCertificate: Data?
    let clientKey: Data?
    let passphrase: String?
    let minimumVersion: TLSConfiguration.Version
    /// The system's CA bundle to name to libcurl in place of its missing own
    /// (``SystemTrust/substituteFile``), for a configuration that trusts the system store alone.
    let systemFile: String?

    /// Reads and checks `configuration`; `context` names it in errors (e.g. `tls` or `tls for api.example.com`).
    /// `systemBundle` is libcurl's built-in CA file when it must go with extra CAs
    /// (``SystemTrust/bundleToInclude``).
    /// `systemFile` is the system's CA bundle when libcurl's own is missing (``SystemTrust/substituteFile``).
    init(_ configuration: TLSConfiguration, context: String, systemBundle: Data? = nil, systemFile: String? = nil) throws(CurlTransportError) {
        /// How errors name `source`: `client private key /etc/app/key.pem`, `CA certificate (PEM bytes)`.
        func named(_ source: TLSConfiguration.PEMSource, what: String) -> String {
            if case .file(let path) = source { return "\(what) \(path)" }
            return "\(what) (PEM bytes)"
        }
        func read(_ source: TLSConfiguration.PEMSource, what: String, marker: String) throws(CurlTransportError) -> Data {
            let data: Data
            let name = named(source, what: what)
            switch source {
            case .pem(let bytes):
                data = bytes
            case .file(let path):
                guard FileManager.default.fileExists(atPath: path) else {
                    throw CurlTransportError(.invalidConfiguration, "\(context): \(name): no such file")
                }
                // A FIFO or a device is no PEM file (a read of it may wait, or never end); nor is a
                // file too large for one, read whole into memory.
                var info = stat()
                guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
                    throw CurlTransportError(.invalidConfiguration, "\(context): \(name): not a regular file")
                }
                guard info.st_size <= PreparedTLS.maxPEMBytes else {
                    throw CurlTransportError(
                        .invalidConfiguration,
                        "\(context): \(name): \(info.st_size) bytes, more than a PEM file of certificates or a key holds (\(PreparedTLS.maxPEMBytes))"
                    )
                }
                guard let contents = FileManager.default.contents(atPath: path) else {
                    throw CurlTransportError(.invalidConfiguration, "\(context): \(name): cannot be read")
                }
                data = contents
            }
            guard let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN "), text.contains(marker) else {
                throw CurlTransportError(.invalidConfiguration, "\(context): \(name): not PEM (no -----BEGIN \(marker) block)")
            }
            return data
        }
        var trustRoots = configuration.trustRoots
        // Nothing added: the system's store as it is (an empty bundle in memory would replace
        // libcurl's CA file with nothing, and fail every handshake).
        if case .systemAnd(let sources) = trustRoots, sources.isEmpty { trustRoots = .system }
        switch trustRoots {
        case .system:
            caBundle = nil
            excludeSystemStore = false
            self.systemFile = systemFile
        case .systemAnd(let sources), .only(let sources):
            if case .only = trustRoots, sources.isEmpty {
                throw CurlTransportError(.invalidConfiguration, "\(context): trustRoots .only([]) trusts nothing; list at least one certificate")
            }
            var bundle = Data()
            // Extra CAs go to libcurl as a bundle in memory, and its OpenSSL backend then leaves
            // its built-in CA *file* aside (a CA *directory* still counts). Without a directory
            // (Fedora, Alpine builds) the system's CAs would be dropped: their file goes first.
            if case .systemAnd = trustRoots, let systemFile = systemBundle {
                bundle.append(systemFile)
                bundle.append(0x0A)
            }
            for source in sources {
                bundle.append(try read(source, what: "CA certificate", marker: "CERTIFICATE"))
                bundle.append(0x0A)
            }
            caBundle = bundle
            if case .only = trustRoots { excludeSystemStore = true } else { excludeSystemStore = false }
            // In memory, the bundle replaces libcurl's CA file (with `.systemAnd`, the system's
            // CAs are in it).
            self.systemFile = nil
        }
        for pin in configuration.pinnedPublicKeys {
            guard pin.hasPrefix("sha256//"), let digest = Data(base64Encoded: String(pin.dropFirst(8))), digest.count == 32 else {
                throw CurlTransportError(
                    .invalidConfiguration,
                    "\(context): pinned public key \"\(pin)\": expected sha256// followed by the base64 of a 32-byte SHA-256 digest")
            }
        }
        pins = configuration.pinnedPublicKeys.isEmpty ? nil : configuration.pinnedPublicKeys.joined(separator: ";")
        if let client = configuration.clientCertificate {
            clientCertificate = try read(client.certificate, what: "client certificate", marker: "CERTIFICATE")
            let key = try read(client.privateKey, what: "client private key", marker: "KEY")
            // An encrypted key without its passphrase: libcurl before 8.13 crashes reading such a
            // key from memory (a null passphrase handed to OpenSSL's callback), so it is refused here.
            if client.passphrase == nil, let text = String(data: key, encoding: .utf8),
                text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") || text.contains("Proc-Type: 4,ENCRYPTED")
            {
                throw CurlTransportError(
                    .invalidConfiguration, "\(context): \(named(client.privateKey, what: "client private key")): encrypted; give its passphrase")
            }
            clientKey = key
            passphrase = client.passphrase
        } else {
            clientCertificate = nil
            clientKey = nil
            passphrase = nil
        }
        minimumVersion = configuration.minimumVersion
    }
}

/// What libcurl trusts by default: its built-in CA file and CA directory (libcurl 7.84 and
/// later say so; nil for either on an older one, or when it has none).
struct SystemTrust: Sendable {
    var caFile: String?
    var caDirectory: String?
    /// Where distributions keep the system's CA bundle, looked for in this order when libcurl's
    /// own is missing (``substituteFile``).
    var knownBundles = SystemTrust.distributionBundles

    /// Debian, Ubuntu, Alpine and Arch; Fedora and RHEL (two names); openSUSE; others (`cert.pem`).
    static let distributionBundles = [
        "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem",
    ]

    /// The system's CA bundle, given to libcurl in place of its own when libcurl names a CA file
    /// or directory and none of them is there: a libcurl built for another distribution (one
    /// built on RHEL looks for `/etc/pki/tls/certs/ca-bundle.crt`, which Debian lacks) would
    /// otherwise fail every TLS handshake. Nil when libcurl's own store is there, or it names
    /// none (it then asks its TLS library, which knows its system).
    var substituteFile: String? {
        guard caFile != nil || caDirectory != nil else { return nil }
        let files = FileManager.default
        if let caFile, files.fileExists(atPath: caFile) { return nil }
        var isDirectory: ObjCBool = false
        if let caDirectory, files.fileExists(atPath: caDirectory, isDirectory: &isDirectory), isDirectory.boolValue { return nil }
        return knownBundles.first { files.fileExists(atPath: $0) }
    }

    /// The built-in CA file's contents (or its ``substituteFile``'s), to put before extra CAs
    /// given in memory: only when libcurl has no CA directory, which would still be read beside them.
    /// When libcurl names neither a file nor a directory, the system's bundle (the first of
    /// ``knownBundles`` there): a bundle in memory stops libcurl asking its TLS library for the
    /// system's store, and held the extra CAs alone.
    var bundleToInclude: Data? {
        if let substituteFile { return FileManager.default.contents(atPath: substituteFile) }
        guard caDirectory == nil else { return nil }
        guard let file = caFile ?? knownBundles.first(where: { FileManager.default.fileExists(atPath: $0) }) else { return nil }
        return FileManager.default.contents(atPath: file)
    }

    /// The loaded libcurl's defaults (none known before 7.84).
    static func ofLoadedLibrary() -> SystemTrust {
        guard let easy = ph_curl_easy_init() else { return SystemTrust() }
        defer { ph_curl_easy_cleanup(easy) }
        func info(_ code: Int32) -> String? {
            var value: UnsafePointer<CChar>?
            guard ph_curl_easy_getinfo_string(easy, code, &value) == 0, let value else { return nil }
            return String(cString: value)
        }
        return SystemTrust(caFile: info(PH_CURLINFO_CAINFO), caDirectory: info(PH_CURLINFO_CAPATH))
    }
}
