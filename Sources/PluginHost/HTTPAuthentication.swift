import Foundation
import PluginSDK

/// One challenge of a `WWW-Authenticate` or `Proxy-Authenticate` field (RFC 9110 §11.6.1):
/// a scheme, then either a `token68` or a list of parameters.
struct HTTPChallenge: Equatable, Sendable {
    /// The scheme as the server spelled it (`Basic`, `Digest`, …).
    var scheme: String
    /// Parameters by lower-cased name, unquoted.
    var parameters: [String: String] = [:]
    /// The `token68` form (`Negotiate abc==`), when the challenge has one.
    var token68: String?

    /// Whether `challenge` says `charset=UTF-8` (RFC 7616 §4, RFC 7617 §2.1: the only value
    /// allowed, compared without regard to case).
    static func asksForUTF8(_ challenge: HTTPChallenge) -> Bool {
        challenge.parameters["charset"]?.lowercased() == "utf-8"
    }

    /// Every challenge in a field value. Several fields folded with `, ` read the same as one.
    static func parse(_ value: String) -> [HTTPChallenge] {
        var scanner = Scanner(Array(value.utf8))
        var challenges: [HTTPChallenge] = []
        while true {
            scanner.skip { $0 == .space || $0 == .tab || $0 == .comma }
            if scanner.atEnd { break }
            let scheme = scanner.token()
            if scheme.isEmpty {
                scanner.advance()  // not a token character: skip it
                continue
            }
            var challenge = HTTPChallenge(scheme: scheme)
            scanner.skip { $0 == .space || $0 == .tab }
            if scanner.peek == .comma {
                // `Negotiate, NTLM`: a comma right after the scheme ends the challenge (a token68
                // or a parameter needs the space first).
                challenges.append(challenge)
                continue
            }
            var first = true
            while !scanner.atEnd {
                let mark = scanner.position
                scanner.skip { $0 == .space || $0 == .tab || $0 == .comma }
                let name = scanner.token()
                scanner.skip { $0 == .space || $0 == .tab }
                if !name.isEmpty, scanner.peek == .equals {
                    scanner.advance()
                    scanner.skip { $0 == .space || $0 == .tab }
                    if first, scanner.atEnd || scanner.peek == .comma || scanner.peek == .equals {
                        // `abc=` or `abc==` ends the item: a token68, not a parameter without a value.
                        // Its padding: the `=` read, and those that follow (not the white space
                        // before a comma, `abc= ,`).
                        let padding = scanner.position
                        scanner.skip { $0 == .equals }
                        challenge.token68 = name + String(repeating: "=", count: 1 + scanner.position - padding)
                        break
                    }
                    challenge.parameters[name.lowercased()] = scanner.peek == .quote ? scanner.quoted() : scanner.tokenValue()
                    first = false
                    continue
                }
                if first, !name.isEmpty, scanner.atEnd || scanner.peek == .comma {
                    challenge.token68 = name
                    first = false
                    continue
                }
                scanner.position = mark  // the next challenge starts here
                break
            }
            challenges.append(challenge)
        }
        return challenges
    }

    /// A byte cursor over a field value.
    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { position >= bytes.count }
        var peek: UInt8? { atEnd ? nil : bytes[position] }
        mutating func advance() { position += 1 }

        mutating func skip(while matches: (UInt8) -> Bool) {
            while let byte = peek, matches(byte) { position += 1 }
        }

        /// A `token` (RFC 9110 §5.6.2), plus the `token68` characters `/` and `+` (never
        /// separators in this grammar); empty when none is here.
        mutating func token() -> String {
            let start = position
            skip { $0 > 0x20 && $0 < 0x7f && !Self.delimiters.contains($0) }
            return String(decoding: bytes[start..<position], as: UTF8.self)
        }

        /// An unquoted parameter value: a token, and the `=` padding that ends a base64 value
        /// some servers send unquoted (`nonce=abc==`: RFC 9110 asks for quotes there, and without
        /// this the padding ended the challenge and lost its later parameters).
        mutating func tokenValue() -> String {
            let start = position
            _ = token()
            // Padding only where the value ends (`a=b=c` keeps its `b`, not a `b=`).
            var end = position
            while end < bytes.count, bytes[end] == .equals { end += 1 }
            if end == bytes.count || bytes[end] == .space || bytes[end] == .tab || bytes[end] == .comma { position = end }
            return String(decoding: bytes[start..<position], as: UTF8.self)
        }

        /// A `quoted-string` with its escapes resolved; an unterminated one runs to the end.
        mutating func quoted() -> String {
            advance()
            var out: [UInt8] = []
            while let byte = peek {
                advance()
                if byte == .quote { break }
                if byte == .backslash, let escaped = peek {
                    out.append(escaped)
                    advance()
                } else {
                    out.append(byte)
                }
            }
            return String(decoding: out, as: UTF8.self)
        }

        static let delimiters: Set<UInt8> = Set("\"(),:;<=>?@[\\]{}".utf8)
    }
}

extension UInt8 {
    fileprivate static let space = UInt8(ascii: " ")
    fileprivate static let tab = UInt8(ascii: "\t")
    fileprivate static let comma = UInt8(ascii: ",")
    fileprivate static let equals = UInt8(ascii: "=")
    fileprivate static let quote = UInt8(ascii: "\"")
    fileprivate static let backslash = UInt8(ascii: "\\")
}

/// A `Digest` challenge (RFC 7616) the host can answer, and the answer.
struct DigestChallenge: Equatable, Sendable {
    /// The hash functions of RFC 7616 §6.1, plus `SHA-512` (offered by httpbin and others).
    enum Algorithm: String, CaseIterable, Sendable {
        case md5 = "MD5"
        case sha256 = "SHA-256"
        case sha512Slash256 = "SHA-512-256"
        case sha512 = "SHA-512"

        /// Preference when a server offers several: the larger, the stronger.
        var strength: Int {
            switch self {
            case .md5: return 1
            case .sha256: return 2
            case .sha512Slash256: return 3
            case .sha512: return 4
            }
        }

        /// Lower-case hexadecimal of the hash of `text`'s UTF-8 bytes.
        func hex(_ text: String) -> String { hex(Array(text.utf8)) }

        /// Lower-case hexadecimal of the hash of `bytes`.
        func hex(_ bytes: [UInt8]) -> String {
            var hash = running()
            bytes.withUnsafeBytes { hash.update($0) }
            return hash.finalizeHex()
        }

        /// A hash of this algorithm computed as its bytes come (`auth-int` over a body read from a
        /// file in parts).
        func running() -> RunningHash {
            switch self {
            case .md5: return .md5(MD5.Hasher())
            case .sha256: return .sha256(SHA256())
            case .sha512Slash256: return .sha512(SHA512.Hasher(truncatedTo256: true))
            case .sha512: return .sha512(SHA512.Hasher())
            }
        }

        /// Lower-case hexadecimal of the hash of everything `fd` reads, from its start (a file
        /// sent as a body, or a body stream read into one), in parts of 64 KiB: nil when it is no
        /// regular file, a read fails, or `stopped` says so between parts (the request was
        /// cancelled or ran out of time). The descriptor's offset is neither used nor moved.
        func hex(readingFrom fd: Int32, stopped: () -> Bool) -> String? {
            var status = stat()
            guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
            var hash = running()
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            var offset: off_t = 0
            while true {
                if stopped() { return nil }
                let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
                if got < 0, errno == EINTR { continue }
                guard got >= 0 else { return nil }
                if got == 0 { return hash.finalizeHex() }
                buffer.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[..<got])) }
                offset += off_t(got)
            }
        }
    }

    /// A hash of one of the ``Algorithm``s, computed as its bytes come.
    enum RunningHash {
        case md5(MD5.Hasher)
        case sha256(SHA256)
        case sha512(SHA512.Hasher)

        /// Adds bytes.
        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            switch self {
            case .md5(var hash):
                hash.update(bytes)
                self = .md5(hash)
            case .sha256(var hash):
                hash.update(bytes)
                self = .sha256(hash)
            case .sha512(var hash):
                hash.update(bytes)
                self = .sha512(hash)
            }
        }

        /// The lower-case hexadecimal digest of every byte added.
        func finalizeHex() -> String {
            switch self {
            case .md5(let hash): return SHA256.hex(hash.finalize())
            case .sha256(var hash): return SHA256.hex(hash.finalize())
            case .sha512(let hash): return SHA256.hex(hash.finalize())
            }
        }
    }

    let realm: String
    let nonce: String
    let opaque: String?
    let algorithm: Algorithm
    /// Whether the algorithm is a `-sess` variant (A1 includes the nonce and cnonce).
    let session: Bool
    /// The algorithm token as the server spelled it, echoed back.
    let algorithmToken: String?
    /// The quality-of-protection values offered (`auth`, `auth-int`); empty: RFC 2069 style.
    let qops: [String]
    /// `stale=true`: the previous answer's credentials were right, its nonce was not.
    let stale: Bool
    /// `userhash=true`: the server wants the user name hashed.
    let userhash: Bool
    /// `charset=UTF-8`: the server expects the user name and password in Unicode's composed form
    /// (NFC), as RFC 7616 §4 asks (a name typed `a` + U+0308 is sent as `ä`).
    let composed: Bool

    /// The Digest challenge in `challenge`, when it is one the host can answer.
    init?(_ challenge: HTTPChallenge) {
        guard challenge.scheme.lowercased() == "digest", let nonce = challenge.parameters["nonce"] else { return nil }
        let token = challenge.parameters["algorithm"]
        var name = token ?? "MD5"
        session = name.lowercased().hasSuffix("-sess")
        if session { name.removeLast(5) }
        guard let algorithm = Algorithm.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else { return nil }
        self.algorithm = algorithm
        self.algorithmToken = token
        self.nonce = nonce
        self.realm = challenge.parameters["realm"] ?? ""
        self.opaque = challenge.parameters["opaque"]
        self.qops = (challenge.parameters["qop"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
        self.stale = challenge.parameters["stale"]?.lowercased() == "true"
        self.userhash = challenge.parameters["userhash"]?.lowercased() == "true"
        self.composed = HTTPChallenge.asksForUTF8(challenge)
    }

    /// What the answer needs from the request.
    struct RequestFacts {
        var method: String
        /// The request target as sent (path and query).
        var uri: String
        /// The body, for `auth-int`'s hash of it.
        var body: Body

        /// Where a request's body is, for `auth-int`.
        enum Body {
            /// In memory (none is an empty one).
            case bytes([UInt8])
            /// Read again to be hashed (a file, a body stream's file): its hash in an algorithm,
            /// lower-case hex, or nil when it cannot be read (gone, no regular file, or the
            /// request ended). `auth` is answered instead when it is offered: no second read of a
            /// body that may be large, or may have changed since it was sent.
            case reread((Algorithm) -> String?)
            /// None that can be read again (a body stream no send has read whole).
            case unavailable
        }

        /// The facts of a request whose body, if any, is `body` (nil: one that cannot be read again).
        init(method: String, uri: String, body: [UInt8]?) {
            self.init(method: method, uri: uri, body: body.map(Body.bytes) ?? .unavailable)
        }

        /// The facts of a request whose body is where `body` says.
        init(method: String, uri: String, body: Body) {
            self.method = method
            self.uri = uri
            self.body = body
        }
    }

    /// The `Authorization` value answering this challenge, or nil when it cannot be answered
    /// (only `auth-int` offered, or an unknown `qop`, and the body cannot be read; or a `-sess`
    /// algorithm without `qop`, where the server could not learn the `cnonce` it depends on).
    /// `auth-int` is preferred for a body in memory; for one read again, `auth` when offered.
    /// `nonceCount` is taken only for an answer made with a `qop` (one that sends `nc`): a
    /// challenge that cannot be answered, or one without `qop`, uses none of the nonce's counts.
    func authorization(
        user given: String, password givenPassword: String, request: RequestFacts, cnonce: String, nonceCount: @autoclosure () -> UInt32
    ) -> String? {
        let user = composed ? given.precomposedStringWithCanonicalMapping : given
        let password = composed ? givenPassword.precomposedStringWithCanonicalMapping : givenPassword
        let qop: String?
        var bodyHash: String?
        if qops.contains("auth-int") {
            switch request.body {
            case .bytes(let bytes): bodyHash = algorithm.hex(bytes)
            case .reread(let hash) where !qops.contains("auth"): bodyHash = hash(algorithm)
            case .reread, .unavailable: break
            }
        }
        if qops.isEmpty {
            if session { return nil }
            qop = nil
        } else if bodyHash != nil {
            qop = "auth-int"
        } else if qops.contains("auth") {
            qop = "auth"
        } else {
            return nil
        }
        var a1 = algorithm.hex("\(user):\(realm):\(password)")
        if session { a1 = algorithm.hex("\(a1):\(nonce):\(cnonce)") }
        let a2: String
        if let bodyHash, qop == "auth-int" {
            a2 = algorithm.hex("\(request.method):\(request.uri):\(bodyHash)")
        } else {
            a2 = algorithm.hex("\(request.method):\(request.uri)")
        }
        let nc = qop == nil ? "" : Self.nonceCountText(nonceCount())
        let response: String
        if let qop {
            response = algorithm.hex("\(a1):\(nonce):\(nc):\(cnonce):\(qop):\(a2)")
        } else {
            response = algorithm.hex("\(a1):\(nonce):\(a2)")
        }
        var parts: [String] = []
        if userhash {
            parts.append("username=\(Self.quoted(algorithm.hex("\(user):\(realm)")))")
        } else if user.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) {
            parts.append("username=\(Self.quoted(user))")
        } else {
            parts.append("username*=UTF-8''\(Self.extendedValue(user))")  // RFC 7616 §3.4.4, RFC 8187
        }
        parts.append("realm=\(Self.quoted(realm))")
        parts.append("uri=\(Self.quoted(request.uri))")
        if let algorithmToken { parts.append("algorithm=\(algorithmToken)") }
        parts.append("nonce=\(Self.quoted(nonce))")
        if let qop {
            parts.append("nc=\(nc)")
            parts.append("cnonce=\(Self.quoted(cnonce))")
            parts.append("qop=\(qop)")
        }
        parts.append("response=\(Self.quoted(response))")
        if let opaque { parts.append("opaque=\(Self.quoted(opaque))") }
        if userhash { parts.append("userhash=true") }
        return "Digest " + parts.joined(separator: ", ")
    }

    /// `nc`: eight lower-case hexadecimal digits.
    static func nonceCountText(_ count: UInt32) -> String {
        let hex = String(count, radix: 16)
        return String(repeating: "0", count: max(0, 8 - hex.count)) + hex
    }

    /// A `quoted-string`: `"` and `\` escaped.
    static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// RFC 8187's `value-chars`: attribute characters as they are, every other byte percent-encoded.
    static func extendedValue(_ text: String) -> String {
        let plain = Set("!#$&+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        var out = ""
        for byte in text.utf8 {
            if plain.contains(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    /// The request target of `url` as sent: its path (`/` when empty; resolved against a base
    /// URL; without `.` and `..` segments, which the transports remove before sending) and
    /// query, percent-encoded as given.
    static func requestURI(_ url: URL) -> String {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.path }
        let path = components.percentEncodedPath.isEmpty ? "/" : URLParts.removingDotSegments(components.percentEncodedPath)
        return components.percentEncodedQuery.map { path + "?" + $0 } ?? path
    }
}

/// `nc` per nonce (RFC 7616 §3.4): each use of a nonce counts one up, across requests.
final class DigestNonceCounts: Sendable {
    private struct Counts {
        /// Per nonce, its last count and when it was last used (a tick of `clock`).
        var table: [String: (count: UInt32, used: UInt64)] = [:]
        var clock: UInt64 = 0
    }
    private let counts = Locked(Counts())
    /// Nonces remembered at most; past it the quarter least recently used are forgotten (a nonce
    /// used again after that starts again at 1, which a server that checks `nc` against replays,
    /// such as Apache's `AuthDigestNcCheck`, refuses: only a nonce left unused the longest is).
    static let capacity = 1024

    /// The count for this use of `nonce` (1 for its first).
    func next(for nonce: String) -> UInt32 {
        counts.withLock { counts in
            counts.clock += 1
            if counts.table[nonce] == nil, counts.table.count >= Self.capacity {
                let oldest = counts.table.sorted { $0.value.used < $1.value.used }.prefix(Self.capacity / 4)
                for (forgotten, _) in oldest { counts.table[forgotten] = nil }
            }
            let next = (counts.table[nonce]?.count ?? 0) &+ 1
            counts.table[nonce] = (next, counts.clock)
            return next
        }
    }
}

/// The challenge of a `401`/`407` the host answers: the strongest it supports among those offered.
struct ChosenChallenge: Sendable {
    /// The scheme as hooks see it (`Basic`, `Digest`, or another the host cannot answer).
    var scheme: String
    var realm: String?
    /// Set when the scheme is a Digest the host can answer.
    var digest: DigestChallenge?
    /// The other Digest challenges of the same realm the host can parse, strongest first: tried
    /// in turn when ``digest`` cannot be answered for the request (a `-sess` without `qop`, an
    /// `auth-int` alone over a body that cannot be read again).
    var weakerDigests: [DigestChallenge] = []
    /// A Basic challenge's `charset=UTF-8` (RFC 7617 §2.1): the user name and password go in
    /// Unicode's composed form (NFC).
    var composed = false

    /// A Basic answer: `user:password` in base64, composed first when the challenge asks.
    func basicAnswer(user: String, password: String) -> String {
        let pair = composed ? "\(user):\(password)".precomposedStringWithCanonicalMapping : "\(user):\(password)"
        return "Basic " + Data(pair.utf8).base64EncodedString()
    }

    /// Picks from every challenge in `value`: a supported Digest (strongest algorithm first), then
    /// Basic, then the first challenge (so hooks still see what the server asked for).
    static func choose(from value: String) -> ChosenChallenge? {
        let challenges = HTTPChallenge.parse(value)
        let digests = challenges.compactMap { challenge in DigestChallenge(challenge).map { (challenge, $0) } }
        // Strongest first; of equal strength, in the order offered.
        let ranked = digests.enumerated().sorted { a, b in
            a.element.1.algorithm.strength != b.element.1.algorithm.strength
                ? a.element.1.algorithm.strength > b.element.1.algorithm.strength : a.offset < b.offset
        }
        .map(\.element)
        if let best = ranked.first {
            let weaker = ranked.dropFirst().map(\.1).filter { $0.realm == best.1.realm }
            return ChosenChallenge(scheme: best.0.scheme, realm: best.1.realm, digest: best.1, weakerDigests: weaker)
        }
        if let basic = challenges.first(where: { $0.scheme.lowercased() == "basic" }) {
            return ChosenChallenge(scheme: basic.scheme, realm: basic.parameters["realm"], composed: HTTPChallenge.asksForUTF8(basic))
        }
        return challenges.first.map { ChosenChallenge(scheme: $0.scheme, realm: $0.parameters["realm"]) }
    }
}
