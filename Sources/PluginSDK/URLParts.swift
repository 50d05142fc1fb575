import Foundation

/// Small helpers for reading a URL string's parts without building a `URLRequest`.
///
/// The path and the query are read straight from the string's bytes (no Foundation URL
/// parsing on the hot path of a signing plugin); an unusual string (no `scheme://`, a `%` not
/// followed by two hex digits) falls back to `URLComponents`, so the results are the same.
public struct URLParts: Sendable {
    /// The string parsed.
    public let string: String
    /// Its bytes, and where the path and the query (without `?`) are in them; nil ranges: the
    /// properties ask `URLComponents` instead.
    private let utf8: [UInt8]
    private let ranges: (path: Range<Int>, query: Range<Int>?)?

    /// Parses `string`: its bytes are scanned once for the path and the query (the components,
    /// when asked for, are Foundation's).
    public init(_ string: String) {
        self.string = string
        let utf8 = Array(string.utf8)
        self.utf8 = utf8
        self.ranges = Self.ranges(utf8)
    }

    /// The components, or nil when the string is not a URL.
    public var components: URLComponents? { URLComponents(string: string) }

    /// Where the percent-encoded path and the query (without `?`) are in the bytes of a URL
    /// string, when they can be read from the bytes alone; nil when `URLComponents` must decide
    /// (no `scheme://`, a `%` not followed by two hex digits, a byte a URL may not hold). For
    /// readers of a string's own bytes (`String.withUTF8`), with no copy of them made.
    public static func pathAndQuery(_ utf8: UnsafeBufferPointer<UInt8>) -> (path: Range<Int>, query: Range<Int>?)? {
        ranges(utf8)
    }

    /// The byte ranges of the path and the query (without `?`), or nil to fall back.
    private static func ranges<Bytes: RandomAccessCollection<UInt8>>(_ utf8: Bytes) -> (path: Range<Int>, query: Range<Int>?)?
    where Bytes.Index == Int {
        guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")), colon > 0, utf8.count >= colon + 3,
            utf8[colon + 1] == UInt8(ascii: "/"), utf8[colon + 2] == UInt8(ascii: "/"),
            utf8[..<colon].allSatisfy({ isSchemeByte($0) })
        else { return nil }
        var index = colon + 3
        while index < utf8.count, utf8[index] != UInt8(ascii: "/"), utf8[index] != UInt8(ascii: "?"), utf8[index] != UInt8(ascii: "#") {
            index += 1
        }
        let pathStart = index
        while index < utf8.count, utf8[index] != UInt8(ascii: "?"), utf8[index] != UInt8(ascii: "#") { index += 1 }
        let path = pathStart..<index
        var query: Range<Int>?
        if index < utf8.count, utf8[index] == UInt8(ascii: "?") {
            let queryStart = index + 1
            index = queryStart
            while index < utf8.count, utf8[index] != UInt8(ascii: "#") { index += 1 }
            query = queryStart..<index
        }
        // Anything URLComponents would refuse or treat specially: let it decide. One pass, a mask
        // test per byte; only a `%` is looked at more closely.
        for i in 0..<index where isSpecial(utf8[i]) {
            guard utf8[i] == UInt8(ascii: "%"), i + 2 < utf8.count, hexValue(utf8[i + 1]) != nil, hexValue(utf8[i + 2]) != nil else {
                return nil
            }
        }
        return (path, query)
    }

    /// Whether `byte` needs escaping (``needsEscaping(_:)``) or is `%`: from two 64-bit masks of
    /// such bytes below 64 and below 128 (every byte from 128 is one).
    @inline(__always)
    static func isSpecial(_ byte: UInt8) -> Bool {
        if byte < 64 { return (0x5000_0025_ffff_ffff as UInt64) >> UInt64(byte) & 1 != 0 }
        if byte < 128 { return (0xb800_0001_5000_0000 as UInt64) >> UInt64(byte - 64) & 1 != 0 }
        return true
    }

    /// Decoded query items in order; a name without `=` has an empty value.
    public var queryItems: [(name: String, value: String)] {
        guard let ranges else { return (components?.queryItems ?? []).map { ($0.name, $0.value ?? "") } }
        guard let query = ranges.query, !query.isEmpty else { return [] }
        var items: [(name: String, value: String)] = []
        for item in utf8[query].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            if let equals = item.firstIndex(of: UInt8(ascii: "=")) {
                items.append((Self.decode(item[item.startIndex..<equals]), Self.decode(item[(equals + 1)...])))
            } else {
                items.append((Self.decode(item), ""))
            }
        }
        return items
    }

    /// The query items in order, each name and value as RFC 3986 spells it byte for byte: its
    /// escapes decoded to bytes and every byte but `A–Z a–z 0–9 - . _ ~` encoded again as `%XX`
    /// upper-case (`%7e` is `~`, `~` stays, `+` is `%2B`, `%FF` stays `%FF`). Unlike
    /// ``queryItems``, bytes that are no UTF-8 are not replaced: `a=%FF` and `a=%FE` differ.
    /// Read from the query's bytes as spelled (``percentEncodedQueryBytes``), an awkward string's
    /// too: a `%` without two hex digits is `%25` (`URLComponents` escaped every `%` of such a
    /// query again, `%7e` as `%257e`).
    public var escapedQueryItems: [(name: String, value: String)] { escapedQueryItems(readingPlusAsSpace: false) }

    /// ``escapedQueryItems``; with `readingPlusAsSpace`, a literal `+` is read as a space (`%20`),
    /// as a form and most servers' query parsers read it: `q=a+b` is `q=a%20b`, and only `%2B` is
    /// a plus. A signature over the items so read tells `a+b` from `a%2Bb`, which such a server
    /// reads as two values.
    public func escapedQueryItems(readingPlusAsSpace: Bool) -> [(name: String, value: String)] {
        func escaped(_ raw: ArraySlice<UInt8>) -> String {
            var out: [UInt8] = []
            out.reserveCapacity(raw.count)
            let spelled = readingPlusAsSpace && raw.contains(UInt8(ascii: "+")) ? ArraySlice(raw.map { $0 == UInt8(ascii: "+") ? 0x20 : $0 }) : raw
            RFC3986.escape(Self.decodedBytes(spelled), keeping: RFC3986.isUnreserved, into: &out)
            return String(decoding: out, as: UTF8.self)
        }
        let query = percentEncodedQueryBytes
        guard !query.isEmpty else { return [] }
        let raw = query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false)
        return raw.map { item in
            guard let equals = item.firstIndex(of: UInt8(ascii: "=")) else { return (escaped(item), "") }
            return (escaped(item[item.startIndex..<equals]), escaped(item[(equals + 1)...]))
        }
    }

    /// The query as the string spells it (percent-encoded, between `?` and `#`), read from its
    /// bytes whatever they hold; empty when there is none.
    public var percentEncodedQueryBytes: ArraySlice<UInt8> {
        if let ranges { return ranges.query.map { utf8[$0] } ?? [] }
        let end = utf8.firstIndex(of: UInt8(ascii: "#")) ?? utf8.endIndex
        guard let mark = utf8[..<end].firstIndex(of: UInt8(ascii: "?")) else { return [] }
        return utf8[(mark + 1)..<end]
    }

    /// The percent-encoded path as sent.
    public var percentEncodedPath: String {
        guard let ranges else { return components?.percentEncodedPath ?? "" }
        return String(decoding: utf8[ranges.path], as: UTF8.self)
    }

    /// The host, if any.
    public var host: String? { components?.host }

    /// `path` (percent-encoded, beginning with `/`) without its `.` and `..` segments (RFC 3986
    /// §5.2.4), as libcurl sends it (`%2E` segments are left): what a signature or a Digest
    /// answer covers must be the path sent.
    public static func removingDotSegments(_ path: String) -> String {
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".":
                if last { output.append("") }
            case "..":
                if !output.isEmpty { output.removeLast() }
                if last { output.append("") }
            default:
                output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }

    /// The port a URL of `scheme` uses when it names none: 443 for `https` (any case), else 80.
    public static func defaultPort(forScheme scheme: String?) -> Int { scheme?.lowercased() == "https" ? 443 : 80 }

    /// Whether `host` (in lower case, as written in a URL) is a loopback host as libcurl reaches
    /// it without asking DNS: `localhost` and names under it (RFC 6761; not `localhost.`, which
    /// libcurl resolves), `127.0.0.0/8` written as four decimal parts without leading zeros
    /// (`127.0.0.09` is no address to libcurl, and goes to DNS), `[::1]` (`::1` as a challenge
    /// names it, without brackets).
    package static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") || host == "[::1]" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127"
            && parts.allSatisfy { part in
                (1...3).contains(part.count) && part.allSatisfy({ ("0"..."9").contains($0) }) && Int(part)! <= 255
                    && (part.count == 1 || part.first != "0")
            }
    }

    /// `host` (a name as configured, or a URL's host as `URL` or `URLComponents` reads it) in lower
    /// case, a name past ASCII in IDNA's form (`bücher.example` is `xn--bcher-kva.example`, the
    /// name DNS is asked for and the form a URL holds), so that a name configured in either form
    /// matches a request's host however it was read. A host holding a delimiter, a space or a
    /// control character, or that IDNA cannot convert, is only lower-cased.
    package static func lookupHost(_ host: String) -> String {
        let lower = host.lowercased()
        guard !lower.utf8.allSatisfy({ $0 < 0x80 }), holdsNoDelimiter(lower),
            let ascii = URLComponents(string: "https://" + lower)?.encodedHost?.lowercased(), !ascii.isEmpty
        else { return lower }
        return ascii
    }

    /// `host` as ``lookupHost(_:)`` reads it, when that is a host name of RFC 3986's unreserved
    /// characters alone (`URLComponents` traps on a host set to one holding a character it does
    /// not allow in a host, such as `<` from `%3C`); nil otherwise.
    package static func hostName(_ host: String) -> String? {
        let name = lookupHost(host)
        return !name.isEmpty && name.utf8.allSatisfy(RFC3986.isUnreserved) ? name : nil
    }

    /// Whether `text` holds none of a URL's delimiters (`/ ? # @ : [ ] \ %`), no space and no
    /// control character: whether, read as a host, it can only be a name.
    package static func holdsNoDelimiter(_ text: String) -> Bool {
        !text.unicodeScalars.contains { $0.value <= 0x20 || $0.value == 0x7F || "/?#@:[]\\%".unicodeScalars.contains($0) }
    }

    /// Where a URL's user information is (`user:password` in `http://user:password@host/`, before
    /// the authority's last `@`), or nil when it has none. A scheme-relative URL
    /// (`//user:password@host/`, as a `Location` may be written) has its authority at the start.
    public static func userInfoRange(of url: String) -> Range<String.Index>? {
        // Most URLs have no `@` at all.
        guard url.utf8.contains(UInt8(ascii: "@")) else { return nil }
        let start: String.Index
        if url.hasPrefix("//") {
            start = url.index(url.startIndex, offsetBy: 2)
        } else if let scheme = url.range(of: "://") {
            start = scheme.upperBound
        } else {
            return nil
        }
        let authority = url[start...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return authority.lastIndex(of: "@").map { start..<$0 }
    }

    /// `url` with its password replaced by `<redacted>` (`http://user:<redacted>@host/`), and a
    /// user information without a colon, an API key or a token (`https://key@api…`), replaced
    /// whole; a URL without user information as it is. For URLs that are shown or logged.
    public static func redactingUserInfo(_ url: String) -> String {
        guard let info = userInfoRange(of: url), !info.isEmpty else { return url }
        var url = url
        if let colon = url[info].firstIndex(of: ":"), url.index(after: colon) < info.upperBound {
            // From the first colon: the password is everything after it (it may hold colons).
            url.replaceSubrange(url.index(after: colon)..<info.upperBound, with: "<redacted>")
        } else {
            url.replaceSubrange(info, with: "<redacted>")
        }
        return url
    }

    /// Whether the string is an absolute http or https URL with a host.
    public static func isAbsoluteHTTP(_ string: String) -> Bool {
        guard let components = URLComponents(string: string),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty
        else { return false }
        return true
    }

    /// Bytes a URL may not hold unescaped (RFC 3986): URLComponents refuses them.
    static func needsEscaping(_ byte: UInt8) -> Bool {
        switch byte {
        case 0...0x20, 0x7F...0xFF, UInt8(ascii: "\""), UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "\\"), UInt8(ascii: "^"),
            UInt8(ascii: "`"), UInt8(ascii: "{"), UInt8(ascii: "|"), UInt8(ascii: "}"):
            return true
        default:
            return false
        }
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
            return true
        default:
            return false
        }
    }

    /// The value of a hexadecimal digit (either case), or nil for another byte.
    public static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Percent-decodes (validated beforehand); `+` stays `+`, as URLComponents leaves it.
    private static func decode(_ bytes: ArraySlice<UInt8>) -> String {
        guard bytes.contains(UInt8(ascii: "%")) else { return String(decoding: bytes, as: UTF8.self) }
        return String(decoding: decodedBytes(bytes), as: UTF8.self)
    }

    /// The bytes with each `%XX` escape decoded; a `%` not followed by two hex digits, and `+`,
    /// stay as they are.
    package static func decodedBytes(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.endIndex, let high = hexValue(bytes[index + 1]),
                let low = hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }
}
