import Foundation
import PluginSDK

/// Signs every request with a shared secret, in one of two schemes.
///
/// `hmac-sha256`: canonical string = METHOD `\n` PATH (percent-encoded as sent) `\n`
/// CANONICAL_QUERY `\n` TIMESTAMP `\n` NONCE `\n` lower-case hex SHA-256 of the body (of the empty
/// string when there is none). CANONICAL_QUERY is the query parameters as sent, names and values
/// percent-encoded per RFC 3986 (only `A–Z a–z 0–9 - . _ ~` kept, `%XX` upper-case) once their
/// escapes are decoded and a literal `+` is read as a space (as servers read a query: `a+b` signs
/// as `a%20b`, `a%2Bb` as `a%2Bb`), sorted by name then value, joined as `name=value` with `&`. The signature is the lower-case hex
/// HMAC-SHA256(secret, canonical string), sent in `X-Signature`, with `X-Timestamp` (Unix seconds
/// from the host clock), `X-Nonce` (32 lower-case hex characters from the host's random bytes) and
/// `X-Key-Id`; or, with `placement: query`, as the query parameters `x-signature`, `x-timestamp`,
/// `x-nonce` and `x-key-id`, which are then left out of CANONICAL_QUERY.
///
/// `md5-sorted` (a common legacy scheme): the request's parameters (the query, or the body of a
/// form-encoded request) plus `t` (timestamp) and `nonce`, sorted by key; every key and value
/// except `sign` concatenated; the secret appended; MD5; upper-case hex; added as parameter `sign`
/// (with `t` and `nonce`) where the parameters came from.
///
/// The secret comes from the host store (`secretKey`, default `signing_secret`), the environment
/// variable `secretEnv`, or the file `secretFile`; it is never logged. A missing secret fails the
/// request with a clear error.
public struct SignaturePlugin: ExportablePlugin {
    /// The name manifests and bundles know this plugin by.
    public static var pluginName: String { "signature" }
    /// This plugin's version.
    public static var pluginVersion: String { "1.0.0" }
    /// One line saying what this plugin does (`plugin.json`'s `summary`, `pluginhost list --json`).
    public static var pluginSummary: String { "Signs requests (HMAC-SHA256 canonical request, or legacy MD5 of sorted parameters)" }
    /// The hooks this plugin implements (the others are not exported).
    public static var implementedHooks: Set<InterceptorHook> { [.prepare] }

    enum Scheme: String {
        case hmac = "hmac-sha256"
        case md5 = "md5-sorted"
    }

    let scheme: Scheme
    let keyID: String
    let inQuery: Bool
    let secretKey: String
    let secretEnv: String?
    let secretFile: String?

    static let queryNames = (signature: "x-signature", timestamp: "x-timestamp", nonce: "x-nonce", keyID: "x-key-id")
    /// The four, as `placement: query` adds them (and leaves them out of the canonical query).
    static let addedQueryNames = [queryNames.signature, queryNames.timestamp, queryNames.nonce, queryNames.keyID]
    /// ``addedQueryNames`` as a set, for lookups.
    static let addedQueryNameSet = Set(addedQueryNames)

    /// The last secret seen and its prepared HMAC key (the secret is read per request, so a
    /// rotated secret is used at once; its pads are hashed once per secret, not per request).
    private let preparedKey = LastAnswer<[UInt8], HMACSHA256.Key>()

    func hmacKey(_ secret: [UInt8]) -> HMACSHA256.Key {
        preparedKey.answer(for: secret) { HMACSHA256.Key($0) }
    }

    /// Reads the configuration (keys in this plugin's README); an unknown key or a bad value throws
    /// a `PluginConfigurationError` naming it.
    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["scheme", "keyId", "placement", "secretKey", "secretEnv", "secretFile"])
        scheme = Scheme(rawValue: try configuration.oneOf("scheme", ["hmac-sha256", "md5-sorted"], default: "hmac-sha256"))!
        keyID = try configuration.string("keyId", default: "default") ?? "default"
        inQuery = try configuration.oneOf("placement", ["header", "query"], default: "header") == "query"
        secretKey = try configuration.string("secretKey", default: "signing_secret") ?? "signing_secret"
        secretEnv = try configuration.string("secretEnv")
        secretFile = try configuration.string("secretFile")
        if !HeaderValidation.isValidValue(keyID) { throw configuration.error("keyId must not contain CR, LF or NUL") }
        // An empty key id went out as an empty `X-Key-Id`; an empty variable or file name was
        // looked in ("environment variable ," in the error) instead of being refused here.
        if keyID.isEmpty { throw configuration.error("keyId must not be empty") }
        if secretEnv?.isEmpty == true { throw configuration.error("secretEnv must name an environment variable, not \"\"") }
        if secretFile?.isEmpty == true { throw configuration.error("secretFile must name a file, not \"\"") }
        // md5-sorted puts `sign` where the parameters came from: `placement: query` was ignored.
        if scheme == .md5, inQuery {
            throw configuration.error("placement query applies to hmac-sha256 only: md5-sorted adds sign where the parameters came from")
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The secret's bytes: the host store's value, else the environment variable's without white
    /// space at its ends (a variable set from a file keeps the file's last newline), else the
    /// file's (``readSecret(_:)``).
    func secret(_ services: any HostServices) throws -> [UInt8] {
        if let stored = services.value(forKey: secretKey), !stored.isEmpty { return Array(stored.utf8) }
        if let secretEnv, let value = ProcessInfo.processInfo.environment[secretEnv]?.trimmingCharacters(in: .whitespacesAndNewlines),
            !value.isEmpty
        {
            return Array(value.utf8)
        }
        if let secretFile, let bytes = try Self.readSecret(secretFile), !bytes.isEmpty { return bytes }
        var places = ["host store key \(secretKey.debugDescription)"]
        if let secretEnv { places.append("environment variable \(secretEnv)") }
        if let secretFile { places.append("file \(secretFile)") }
        throw Failure(description: "signature: no signing secret (looked in \(places.joined(separator: ", ")))")
    }

    /// The largest secret file read.
    static let maxSecretFileBytes = 64 << 10

    /// The secret in the file at `path`: a file of UTF-8 text is its text without white space at
    /// its ends (`echo secret > file` leaves a newline); any other file is its bytes as they are
    /// (a binary key, `openssl rand 32 > file`: read as text, each byte that is no UTF-8 became
    /// U+FFFD and two keys could be one). Nil when there is no such file. A file that is
    /// there must be a regular file of the current user that group and others cannot read (mode
    /// 0600 or narrower, as OpenSSH asks of a private key), of at most 64 KiB: else the request
    /// fails saying why (a FIFO waited for a writer, `/dev/zero` read on for good, and a file
    /// others may read was used as it was).
    static func readSecret(_ path: String) throws -> [UInt8]? {
        var status = stat()
        func refused(_ why: String) -> Failure { Failure(description: "signature: the secret file \(path) \(why)") }
        if lstat(path, &status) != 0 {
            if errno == ENOENT { return nil }
            // Not a stat of nothing to judge by (it said "is not a regular file").
            throw refused("cannot be checked: \(String(cString: strerror(errno)))")
        }
        guard let (fd, opened) = FileDescriptor.openRegularFile(path, limit: maxSecretFileBytes) else {
            if let problem = FileDescriptor.privacyProblem(status, .file) { throw refused(problem) }
            throw refused("cannot be read, or is larger than \(maxSecretFileBytes) bytes")
        }
        defer { close(fd) }
        if let problem = FileDescriptor.privacyProblem(opened, .file) { throw refused(problem) }
        guard let bytes = FileDescriptor.read(fd, size: Int(opened.st_size)) else { throw refused("cannot be read") }
        // Text when decoding changed no byte (a byte that is no UTF-8 became U+FFFD).
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.utf8.elementsEqual(bytes) else { return bytes }
        return Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
    }

    /// Signs the request with the configured scheme; fails it when there is no secret.
    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        let secret = try secret(context.services)
        let timestamp = String(Int(context.services.now()))
        // 16 random bytes on the stack, as 32 hex characters.
        let nonce = withUnsafeTemporaryAllocation(byteCount: 16, alignment: 1) { bytes in
            context.services.randomBytes(into: bytes)
            return SHA256.hex(UnsafeRawBufferPointer(bytes))
        }
        switch scheme {
        case .hmac: try signHMAC(request, secret: secret, timestamp: timestamp, nonce: nonce)
        case .md5: try signMD5(request, secret: secret, timestamp: timestamp, nonce: nonce)
        }
        return .proceed
    }

    /// Whether `path` has a `.` or `..` segment (`/./`, `/../`, or one at the end).
    static func hasDotSegment(_ path: UnsafeBufferPointer<UInt8>) -> Bool {
        let dot = UInt8(ascii: ".")
        let slash = UInt8(ascii: "/")
        var index = 0
        while index < path.count {
            if path[index] == slash, index + 1 < path.count, path[index + 1] == dot {
                var end = index + 2
                if end < path.count, path[end] == dot { end += 1 }
                if end == path.count || path[end] == slash { return true }
            }
            index += 1
        }
        return false
    }

    /// The SHA-256 of no bytes, in hex (most signed requests have no body).
    static let emptyBodyHash = SHA256.hex(SHA256.hash([UInt8]()))

    /// Writes the HMAC-SHA256 canonical string of a request to `write`, part by part: signing
    /// hashes the parts as they come, with no buffer of the whole string. A URL without a query
    /// (most) is read from its own bytes: no copy of it, no list of items.
    static func writeCanonical(
        method: String, url: String, body: [UInt8]?, timestamp: String, nonce: String, excluding: Set<String>,
        _ write: (UnsafeRawBufferPointer) -> Void
    ) {
        func text(_ string: String) {
            var string = string
            string.withUTF8 { write(UnsafeRawBufferPointer($0)) }
        }
        withUnsafeBytes(of: UInt8(ascii: "\n")) { newline in
            text(method)
            write(newline)
            var url = url
            let fromBytes = url.withUTF8 { utf8 -> Bool in
                guard let ranges = URLParts.pathAndQuery(utf8), ranges.query?.isEmpty ?? true else { return false }
                let path = UnsafeBufferPointer(rebasing: utf8[ranges.path])
                if path.isEmpty {
                    text("/")
                } else if hasDotSegment(path) {
                    text(URLParts.removingDotSegments(String(decoding: path, as: UTF8.self)))
                } else {
                    write(UnsafeRawBufferPointer(path))
                }
                write(newline)
                return true
            }
            if !fromBytes {
                let parts = URLParts(url)
                // Escaped from the bytes the escapes stand for: `%FF` is `%FF` (decoded as text it
                // became U+FFFD, and `a=%FF` and `a=%FE` were signed alike).
                var pairs: [(name: String, value: String)] = []
                for item in parts.escapedQueryItems(readingPlusAsSpace: true) where !excluding.contains(item.name) {
                    pairs.append(item)
                }
                pairs.sort { $0.name != $1.name ? $0.name < $1.name : $0.value < $1.value }
                text(parts.percentEncodedPath.isEmpty ? "/" : URLParts.removingDotSegments(parts.percentEncodedPath))
                write(newline)
                for (index, pair) in pairs.enumerated() {
                    if index > 0 { text("&") }
                    text(pair.name)
                    text("=")
                    text(pair.value)
                }
            }
            write(newline)
            text(timestamp)
            write(newline)
            text(nonce)
            write(newline)
            text(body.map { $0.isEmpty ? emptyBodyHash : SHA256.hex(SHA256.hash($0)) } ?? emptyBodyHash)
        }
    }

    func signHMAC(_ request: InterceptorRequest, secret: [UInt8], timestamp: String, nonce: String) throws {
        let names = Self.queryNames
        if inQuery {
            // The names the placement adds: a request's own would go out twice, and be signed over neither.
            if let own = URLParts(request.url).escapedQueryItems.first(where: { Self.addedQueryNameSet.contains($0.name) }) {
                throw Failure(
                    description: "signature: the request has its own parameter \(own.name.debugDescription) in its query, "
                        + "a name placement query adds (\(Self.addedQueryNames.joined(separator: ", "))): rename it, or place the signature in headers"
                )
            }
            let extra = [(names.timestamp, timestamp), (names.nonce, nonce), (names.keyID, keyID)]
            try request.setURL(Self.appending(extra, to: request.url))
        }
        var mac = HMACSHA256.Authenticator(key: hmacKey(secret))
        Self.writeCanonical(
            method: request.method, url: request.url, body: request.body, timestamp: timestamp,
            nonce: nonce, excluding: inQuery ? Self.addedQueryNameSet : []
        ) { mac.update($0) }
        let signature = mac.finalizeHex()
        if inQuery {
            try request.setURL(Self.appending([(names.signature, signature)], to: request.url))
        } else {
            // One call across the ABI for the four fields.
            try request.editHeaders([
                .set("X-Signature", signature), .set("X-Timestamp", timestamp), .set("X-Nonce", nonce), .set("X-Key-Id", keyID),
            ])
        }
    }

    func signMD5(_ request: InterceptorRequest, secret: [UInt8], timestamp: String, nonce: String) throws {
        let form = request.header("Content-Type")?.lowercased().hasPrefix("application/x-www-form-urlencoded") == true
        let body = request.body ?? []
        let fromBody = form && !body.isEmpty
        // The query is read as a form too (`+` is a space), as the servers of this scheme read it.
        var parameters = Self.formPairs(fromBody ? body[...] : URLParts(request.url).percentEncodedQueryBytes)
        // The names the scheme adds: a request's own would go out twice, and be signed once.
        if let own = parameters.first(where: { pair in Self.md5Names.contains { pair.name.elementsEqual($0.utf8) } }) {
            throw Failure(
                description: "signature: the request has its own parameter \(String(decoding: own.name, as: UTF8.self).debugDescription) in its "
                    + "\(fromBody ? "form body" : "query"), a name md5-sorted adds (t, nonce, sign): rename it, or sign with hmac-sha256")
        }
        parameters += [(Array("t".utf8), Array(timestamp.utf8)), (Array("nonce".utf8), Array(nonce.utf8))]
        // Sorted and joined as bytes, as the scheme's servers hash them (byte order is code point
        // order for UTF-8; Swift's `<` on strings would compare them as Unicode's equivalents).
        let text = parameters.sorted {
            $0.name != $1.name ? $0.name.lexicographicallyPrecedes($1.name) : $0.value.lexicographicallyPrecedes($1.value)
        }
        .flatMap { $0.name + $0.value }
        let sign = SHA256.hex(MD5.hash(text + secret)).uppercased()
        let added = [("t", timestamp), ("nonce", nonce), ("sign", sign)]
        if fromBody {
            let suffix = added.map { "\(Self.escape($0.0))=\(Self.escape($0.1))" }.joined(separator: "&")
            request.setBody(body + Array(("&" + suffix).utf8))
        } else {
            try request.setURL(Self.appending(added, to: request.url))
        }
    }

    /// The parameters md5-sorted adds, which a request must not carry itself.
    static let md5Names: Set<String> = ["t", "nonce", "sign"]

    /// `name=value` pairs of a form (`application/x-www-form-urlencoded`) as bytes: `+` is a
    /// space, each `%XX` a byte (a malformed escape stays as written), empty pairs are skipped. A
    /// value that is no UTF-8 (`%FF`, a GBK form's `%D6%D0`) is its bytes, as PHP-style servers read
    /// it: it was signed as its escaped text, `+` and all.
    static func formPairs(_ body: ArraySlice<UInt8>) -> [(name: [UInt8], value: [UInt8])] {
        body.split(separator: UInt8(ascii: "&")).map { pair in
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
                URLParts.decodedBytes(ArraySlice(bytes.map { $0 == UInt8(ascii: "+") ? 0x20 : $0 }))
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : [])
        }
    }

    static func appending(_ pairs: [(String, String)], to url: String) -> String {
        let query = pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
        let (base, fragment) = url.firstIndex(of: "#").map { (String(url[..<$0]), String(url[$0...])) } ?? (url, "")
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return base + separator + query + fragment
    }

    /// RFC 3986 percent-encoding: unreserved characters kept, everything else `%XX` upper-case.
    static func escape(_ text: String) -> String { RFC3986.escape(text) }
}
