import CCurlShim
import Foundation
import PluginSDK

/// An in-memory cookie jar, RFC 6265 with RFC 6265bis's rules for `Secure` (§5.7): the parsing
/// (§5.2), storage (§5.3) and `Cookie` header (§5.4) are done here, with curl's bounds.
///
/// - `Max-Age` wins over `Expires`; either in the past (`Max-Age=0`, a negative one, an old
///   date) deletes the cookie.
/// - A cookie's default path is the directory of the URL that set it (§5.1.4); paths match on
///   whole segments, on the path as sent (percent-encoded, its trailing slash kept).
/// - A `Domain` must be the host or one above it, with two labels at least; an empty `Domain`
///   is no attribute (a host-only cookie); a host given as an IP address takes no other domain.
///   A `Domain` that is a public suffix (`co.uk`, `github.io`: the system's libpsl, as curl asks
///   it) sets nothing, unless it is the host itself, which then gets a host-only cookie (§5.3
///   step 5): `evil.co.uk` cannot set a cookie every `*.co.uk` site would be sent. Without libpsl
///   (it ships with libcurl on Debian and Ubuntu) only the two-label rule stands.
/// - `Secure` cookies are set over https only, and a response over http can neither set one nor
///   replace (shadow) one of the same name.
/// - RFC 6265bis §5.6: a `Set-Cookie` value with a control character (other than a tab) sets
///   nothing (a bare CR went on in `Cookie` headers to every host of the domain); an attribute
///   whose value is over 1,024 bytes is ignored; a name beginning `__Secure-` (any case) needs
///   `Secure`, one beginning `__Host-` needs `Secure`, no `Domain` and `Path=/`.
/// - Bounds: name and value of at most 4,096 bytes together, 50 cookies per domain and 3,000 in
///   all (the least recently used, set or sent, goes first), 400 days at most (RFC 6265bis §5.5), and a `Cookie`
///   header of at most 150 cookies and 8,190 bytes (longest paths first, as §5.4 orders them).
final class CookieJar: Sendable {
    /// One stored cookie (§5.3).
    struct Cookie: Sendable, Equatable {
        var name: String
        var value: String
        /// Lower case, without a leading dot.
        var domain: String
        /// Sent to `domain` alone (no `Domain` attribute), not to the hosts below it.
        var hostOnly: Bool
        var path: String
        var secure: Bool
        /// When it goes; nil: with the jar (a session cookie).
        var expires: Date?
        /// Order of creation (kept when a cookie is replaced), for §5.4's order.
        var created: UInt64
        /// Order of the last access (set, or sent: §5.4 step 3), for eviction (§5.3).
        var updated: UInt64
    }

    /// The most bytes of a cookie's name and value together (curl's bound).
    static let maxCookieBytes = 4096
    /// The most cookies kept for one domain.
    static let maxCookiesPerDomain = 50
    /// The most cookies kept in all.
    static let maxCookies = 3000
    /// The most cookies in one `Cookie` header (curl's bound).
    static let maxCookiesSent = 150
    /// The most bytes of one `Cookie` header's value (curl's bound).
    static let maxHeaderBytes = 8190
    /// The longest a cookie is kept: 400 days (RFC 6265bis §5.5).
    static let maxLifetime: TimeInterval = 400 * 86_400
    /// The longest attribute value read; a longer one is ignored (RFC 6265bis §5.6).
    static let maxAttributeValueBytes = 1024

    private let state = Locked((cookies: [Cookie](), clock: UInt64(0)))

    /// Every cookie kept and not expired at `now`.
    func all(at now: Date = Date()) -> [Cookie] {
        state.withLock { $0.cookies.filter { $0.expires.map { $0 > now } ?? true } }
    }

    /// Stores the cookies a response to `url` sets (`values`: its `Set-Cookie` fields, one cookie
    /// each, whatever the case of the fields' name: HTTP/2 sends every name in lower case).
    func store(setCookie values: [String], for url: URL, now: Date = Date()) {
        guard !values.isEmpty, let host = url.host?.lowercased(), !host.isEmpty else { return }
        let secureScheme = url.scheme?.lowercased() == "https"
        let requestPath = Self.requestPath(of: url)
        let parsed = values.compactMap { Self.parse($0, host: host, requestPath: requestPath, secureScheme: secureScheme, now: now) }
        guard !parsed.isEmpty else { return }
        state.withLock { state in
            for var cookie in parsed {
                // An expired secure cookie is gone: it shadows nothing.
                if !secureScheme, state.cookies.contains(where: { Self.shadows(cookie, $0) && $0.expires.map { $0 > now } ?? true }) {
                    continue
                }
                state.clock += 1
                cookie.created = state.clock
                cookie.updated = state.clock
                if let old = state.cookies.firstIndex(where: { Self.same($0, cookie) }) {
                    cookie.created = state.cookies[old].created
                    state.cookies.remove(at: old)
                }
                if let expires = cookie.expires, expires <= now { continue }
                state.cookies.append(cookie)
                Self.evict(&state.cookies, domain: cookie.domain, now: now)
            }
        }
    }

    /// The `Cookie` header value for a request to `url`, or nil.
    func header(for url: URL, now: Date = Date()) -> String? {
        guard let host = url.host?.lowercased() else { return nil }
        let path = Self.requestPath(of: url)
        let secure = url.scheme?.lowercased() == "https"
        return state.withLock { state -> String? in
            let matching = state.cookies.indices.filter { index in
                let cookie = state.cookies[index]
                return (cookie.hostOnly ? host == cookie.domain : Self.domain(cookie.domain, isFor: host))
                    && Self.path(path, matches: cookie.path) && (!cookie.secure || secure) && (cookie.expires.map { $0 > now } ?? true)
            }
            .sorted {
                let (first, second) = (state.cookies[$0], state.cookies[$1])
                return first.path.utf8.count != second.path.utf8.count
                    ? first.path.utf8.count > second.path.utf8.count : first.created < second.created
            }
            var header = ""
            var count = 0
            for index in matching {
                let pair = state.cookies[index].name + "=" + state.cookies[index].value
                let added = (header.isEmpty ? 0 : 2) + pair.utf8.count
                if count == Self.maxCookiesSent || header.utf8.count + added > Self.maxHeaderBytes { break }
                header += (header.isEmpty ? "" : "; ") + pair
                count += 1
                // Sent: its last access (§5.4 step 3), which eviction goes by (§5.3).
                state.clock += 1
                state.cookies[index].updated = state.clock
            }
            return header.isEmpty ? nil : header
        }
    }

    /// Whether a cookie's `domain` (a leading dot ignored) may be set by, and sent to, `host`:
    /// the host itself, or a domain of two labels at least above a host that is no IP address.
    static func domain(_ domain: String, isFor host: String) -> Bool {
        var domain = domain.lowercased()
        if domain.hasPrefix(".") { domain.removeFirst() }
        if domain == host { return true }
        let isAddress = host.contains(":") || host.split(separator: ".").allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
        return !isAddress && domain.contains(".") && host.hasSuffix("." + domain)
    }

    /// Whether `domain` (lower case) is a public suffix, by the system's libpsl; nil when libpsl
    /// is not there.
    static func isPublicSuffix(_ domain: String) -> Bool? {
        switch ph_psl_is_public_suffix(domain) {
        case PH_PSL_SUFFIX: return true
        case PH_PSL_NOT_SUFFIX: return false
        default: return nil
        }
    }

    /// Whether `requestPath` path-matches `cookiePath` (§5.1.4): the same, or below it on a
    /// segment boundary.
    static func path(_ requestPath: String, matches cookiePath: String) -> Bool {
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return requestPath.utf8.count == cookiePath.utf8.count || cookiePath.hasSuffix("/")
            || requestPath.utf8.dropFirst(cookiePath.utf8.count).first == UInt8(ascii: "/")
    }

    /// The URL's path as sent (percent-encoded, trailing slash kept, `.` and `..` segments
    /// resolved as libcurl resolves them, and a URL relative to a base resolved against it);
    /// `/` when it has none. (The path as written matched `Path=/admin` for `/admin/../public`,
    /// and a relative URL's `a/b` no cookie.)
    static func requestPath(of url: URL) -> String {
        let path = URLComponents(url: url.absoluteURL, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.absoluteURL.path
        return path.hasPrefix("/") ? URLParts.removingDotSegments(path) : "/"
    }

    /// The default path of a cookie set by a request to `requestPath` (§5.1.4): its directory.
    static func defaultPath(_ requestPath: String) -> String {
        guard requestPath.hasPrefix("/"), let last = requestPath.lastIndex(of: "/"), last != requestPath.startIndex else { return "/" }
        return String(requestPath[..<last])
    }

    /// Whether `a` and `b` are one cookie (§5.3 step 11): the same name, domain and path, byte
    /// for byte (`café` and `cafe\u{301}` are two names, as a server reads them).
    static func same(_ a: Cookie, _ b: Cookie) -> Bool {
        a.name.utf8.elementsEqual(b.name.utf8) && a.domain.utf8.elementsEqual(b.domain.utf8) && a.path.utf8.elementsEqual(b.path.utf8)
    }

    /// Whether `new`, set over http, would replace or shadow the secure `old` (RFC 6265bis §5.7
    /// step 16): same name, domains that match one way or the other, and `new`'s path at or
    /// below `old`'s.
    static func shadows(_ new: Cookie, _ old: Cookie) -> Bool {
        old.secure && old.name.utf8.elementsEqual(new.name.utf8) && (domain(old.domain, isFor: new.domain) || domain(new.domain, isFor: old.domain))
            && path(new.path, matches: old.path)
    }

    /// Drops the least recently used cookies (set or sent) past the bounds: for `domain`, then in
    /// all; expired ones first.
    static func evict(_ cookies: inout [Cookie], domain: String, now: Date) {
        if cookies.count > maxCookies || cookies.lazy.filter({ $0.domain == domain }).count > maxCookiesPerDomain {
            cookies.removeAll { $0.expires.map { $0 <= now } ?? false }
        }
        while cookies.lazy.filter({ $0.domain == domain }).count > maxCookiesPerDomain,
            let oldest = cookies.indices.filter({ cookies[$0].domain == domain }).min(by: { cookies[$0].updated < cookies[$1].updated })
        {
            cookies.remove(at: oldest)
        }
        while cookies.count > maxCookies, let oldest = cookies.indices.min(by: { cookies[$0].updated < cookies[$1].updated }) {
            cookies.remove(at: oldest)
        }
    }

    /// The cookie one `Set-Cookie` value sets for a response from `host` (§5.2, §5.3), or nil
    /// when it sets none: a control character, no `=`, an empty name, name and value over
    /// ``maxCookieBytes``, a `Domain` that is not the host's or one above it, `Secure` over http,
    /// or a name prefix whose conditions the cookie does not meet.
    static func parse(_ field: String, host: String, requestPath: String, secureScheme: Bool, now: Date) -> Cookie? {
        guard !field.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) else { return nil }
        // Split at the bytes `;` and `=` (§5.2), not at characters: a `;` that a combining mark
        // follows is one character with it, and kept `; Secure` in the value.
        let parts = field.utf8.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false).map { Substring($0) }
        guard let pair = parts.first, let equals = pair.utf8.firstIndex(of: UInt8(ascii: "=")) else { return nil }
        let name = trimmed(pair[..<equals])
        let value = trimmed(pair[pair.utf8.index(after: equals)...])
        guard !name.isEmpty, name.utf8.count + value.utf8.count <= maxCookieBytes else { return nil }
        var expires: Date?
        var maxAge: Date?
        var domainAttribute: String?
        var path: String?
        var secure = false
        for attribute in parts.dropFirst() {
            let equals = attribute.utf8.firstIndex(of: UInt8(ascii: "="))
            let key = trimmed(attribute[..<(equals ?? attribute.endIndex)]).lowercased()
            let argument = equals.map { trimmed(attribute[attribute.utf8.index(after: $0)...]) } ?? ""
            guard argument.utf8.count <= maxAttributeValueBytes else { continue }
            switch key {
            case "expires":
                if let date = cookieDate(argument) { expires = date }
            case "max-age":
                // A digit or `-` first, digits after; zero or less is the earliest date (§5.2.2).
                let digits = argument.hasPrefix("-") ? argument.dropFirst() : Substring(argument)
                guard !digits.isEmpty, digits.utf8.allSatisfy(isDigit) else { continue }
                let seconds = Double(argument) ?? 0
                maxAge = seconds <= 0 ? .distantPast : now.addingTimeInterval(min(seconds, maxLifetime))
            case "domain":
                // An empty one is no attribute (§5.2.3); a leading dot is dropped.
                var domain = argument.lowercased()
                if domain.hasPrefix(".") { domain.removeFirst() }
                if !domain.isEmpty { domainAttribute = domain }
            case "path":
                path = argument.hasPrefix("/") ? argument : nil
            case "secure":
                secure = true
            default:
                continue
            }
        }
        if secure, !secureScheme { return nil }
        // Name prefixes (RFC 6265bis §5.6), compared without case.
        let lowerName = name.lowercased()
        if lowerName.hasPrefix("__secure-"), !secure { return nil }
        if lowerName.hasPrefix("__host-"), !secure || domainAttribute != nil || path != "/" { return nil }
        let domain: String
        var hostOnly = true
        if let domainAttribute {
            guard self.domain(domainAttribute, isFor: host) else { return nil }
            // §5.3 step 5: a public suffix is shared by sites that are not one another's.
            if isPublicSuffix(domainAttribute) == true {
                guard domainAttribute == host else { return nil }
            } else {
                hostOnly = false
            }
            domain = domainAttribute
        } else {
            domain = host
        }
        return Cookie(
            name: name, value: value, domain: domain, hostOnly: hostOnly, path: path ?? defaultPath(requestPath), secure: secure,
            expires: (maxAge ?? expires).map { min($0, now.addingTimeInterval(maxLifetime)) }, created: 0, updated: 0)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// `text` without the spaces and tabs around it (§5.2's WSP).
    private static func trimmed(_ text: Substring) -> String {
        text.trimmingCharacters(in: whitespace)
    }

    private static let whitespace = CharacterSet(charactersIn: " \t")

    /// A cookie date (§5.1.1): lenient tokens for time, day of month, month and year, in any
    /// order, as browsers and curl read `Expires`; nil when one is missing or out of range.
    static func cookieDate(_ text: String) -> Date? {
        func isDelimiter(_ byte: UInt8) -> Bool {
            byte == 0x09 || (0x20...0x2F).contains(byte) || (0x3B...0x40).contains(byte) || (0x5B...0x60).contains(byte)
                || (0x7B...0x7E).contains(byte)
        }
        let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        var time: (Int, Int, Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        for token in text.utf8.split(whereSeparator: isDelimiter) {
            let string = String(decoding: token, as: UTF8.self)
            // Leading digits of a token (`1994abc` is a year, as §5.1.1's grammar allows).
            func leadingNumber(_ text: Substring.UTF8View, _ digits: ClosedRange<Int>) -> Int? {
                let lead = text.prefix(while: isDigit)
                return digits.contains(lead.count) ? Int(String(decoding: lead, as: UTF8.self)) : nil
            }
            func number(_ digits: ClosedRange<Int>) -> Int? { leadingNumber(Substring(string).utf8, digits) }
            if time == nil {
                // hh:mm:ss, one or two digits each; the seconds may be followed by other bytes.
                let fields = string.split(separator: ":", omittingEmptySubsequences: false)
                if fields.count == 3, fields[0].utf8.allSatisfy(Self.isDigit), fields[1].utf8.allSatisfy(Self.isDigit),
                    let h = leadingNumber(fields[0].utf8, 1...2), let m = leadingNumber(fields[1].utf8, 1...2),
                    let s = leadingNumber(fields[2].utf8, 1...2)
                {
                    time = (h, m, s)
                    continue
                }
            }
            if day == nil, let value = number(1...2) {
                day = value
                continue
            }
            if month == nil, token.count >= 3, let index = months.firstIndex(of: String(string.prefix(3)).lowercased()) {
                month = index + 1
                continue
            }
            if year == nil, let value = number(2...4) {
                year = value
                continue
            }
        }
        guard var year, let month, let day, let time else { return nil }
        if (70...99).contains(year) { year += 1900 } else if (0...69).contains(year) { year += 2000 }
        // A day the month has (`31 Feb` is no date, not 3 March).
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...monthDays).contains(day), year >= 1601, time.0 <= 23, time.1 <= 59, time.2 <= 59 else { return nil }
        // Days from 1970-01-01 to the date (proleptic Gregorian; Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = Double(days) * 86_400 + Double(time.0 * 3600 + time.1 * 60 + time.2)
        return Date(timeIntervalSince1970: seconds)
    }
}
