import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Describes one API call. Conform an enum (one case per call) or a struct.
///
/// Only ``baseURL``, ``path`` and ``method`` are required; the rest have defaults:
/// a plain task, no extra headers, empty sample data answered with status 200, no
/// status-code validation and no plugin options.
public protocol TargetType: Sendable {
    /// The server's base URL, e.g. `https://api.example.com/v1`.
    var baseURL: URL { get }
    /// The path appended to ``baseURL``; an empty path adds nothing (no trailing slash).
    var path: String { get }
    /// The HTTP method.
    var method: HTTPMethod { get }
    /// What the request carries: parameters, a body, an upload or a download.
    var task: RequestTask { get }
    /// Header fields for this call (merged over the server's defaults: these win).
    var headers: [String: String]? { get }
    /// The body a stub answers with.
    var sampleData: Data { get }
    /// The whole stubbed answer; by default status 200 with ``sampleData``.
    var sampleResponse: EndpointSampleResponse { get }
    /// Which status codes count as success.
    var validationType: ValidationType { get }
    /// String-keyed options for interceptors, e.g. `["auth": "bearer", "cache": "60"]`.
    var pluginOptions: [String: String] { get }
    /// How many redirects the transport follows for this call; nil (the default) leaves it to
    /// the transport. ``RedirectPolicy/doNotFollow`` hands every `3xx` to the interceptors and the caller.
    var redirectPolicy: RedirectPolicy? { get }
    /// What this call's response may cost and how long it may take; nil (the default): the
    /// provider's ``Provider/limits``. Replaces them whole.
    var limits: RequestLimits? { get }
}

extension TargetType {
    /// Default: ``RequestTask/requestPlain``.
    public var task: RequestTask { .requestPlain }
    /// Default: no headers of its own.
    public var headers: [String: String]? { nil }
    /// Default: empty.
    public var sampleData: Data { Data() }
    /// Default: status 200 with ``sampleData``.
    public var sampleResponse: EndpointSampleResponse { .networkResponse(200, sampleData) }
    /// Default: ``ValidationType/none``.
    public var validationType: ValidationType { .none }
    /// Default: no options.
    public var pluginOptions: [String: String] { [:] }
    /// Default: nil, the transport's own policy.
    public var redirectPolicy: RedirectPolicy? { nil }
    /// Default: nil, the provider's limits.
    public var limits: RequestLimits? { nil }
}

extension TargetType {
    /// The full URL: ``baseURL`` with ``path`` appended (unchanged when the path is empty).
    public var url: URL {
        let path = path
        return path.isEmpty ? baseURL : TargetURL.appending(path, to: baseURL)
    }
}

/// The URL the last base and path made, kept: a program sends most requests to a few targets, and
/// `appendingPathComponent` parses, encodes and rebuilds the URL (the costliest step of making a
/// request from a target).
enum TargetURL {
    /// A base URL's string and a path, the same only when their bytes are.
    struct Parts: Equatable {
        let base: String
        let path: String

        static func == (a: Parts, b: Parts) -> Bool { UTF8Bytes.equal(a.base, b.base) && UTF8Bytes.equal(a.path, b.path) }
    }

    private static let last = LastAnswer<Parts, URL>()

    /// `base.appendingPathComponent(path)`, or the same URL kept from the last call for the same bytes
    /// (on Linux, where the URL is its string; elsewhere made each time). On Linux with Swift 6.2 or
    /// later, a new path and an `http` or `https` base are joined by their bytes (``joined(_:_:)``)
    /// and parsed, the same URL for a third of the cost.
    static func appending(_ path: String, to base: URL) -> URL {
        #if canImport(FoundationNetworking)
        // A base relative to another is not told apart by its string, and a file URL's result
        // depends on the file system (a directory gets a trailing slash): made each time. The
        // scheme is read from the string's bytes (`isFileURL` parses it again).
        let string = base.absoluteString
        guard base.baseURL == nil, !isFile(string) else { return base.appendingPathComponent(path) }
        return last.answer(for: Parts(base: string, path: path)) { _ in
            #if compiler(>=6.2)
            // Earlier Foundations encode a `:` in the first segment after a base without a path.
            if let url = joined(string, path).flatMap({ URL(string: $0) }) { return url }
            #endif
            return base.appendingPathComponent(path)
        }
        #else
        return base.appendingPathComponent(path)
        #endif
    }

    /// The string `appendingPathComponent` makes of an `http` or `https` base of ASCII bytes without
    /// a query or fragment (nearly every API's base) and `path`: one separating slash (the path's
    /// own leading one, or one added; not two when the base ends with one), the path's bytes
    /// outside RFC 3986's path characters percent-encoded (`%` too: the path is not decoded).
    /// Parsing it is a third of what `appendingPathComponent` costs, and a request to a new path
    /// (`users/42`, then `users/43`) pays it. nil for any other base: Foundation makes those.
    /// Used on Linux with Swift 6.2 or later (whose swift-foundation `URL` is its string, and
    /// whose `appendingPathComponent` this matches); elsewhere Foundation joins.
    static func joined(_ base: String, _ path: String) -> String? {
        var base = base
        guard base.withUTF8({ isHTTP($0) && !$0.contains { $0 >= 0x80 || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } })
        else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(base.utf8.count + 1 + path.utf8.count)
        bytes.append(contentsOf: base.utf8)
        switch (base.utf8.last == UInt8(ascii: "/"), path.utf8.first == UInt8(ascii: "/")) {
        case (true, true): bytes.removeLast()
        case (false, false): bytes.append(UInt8(ascii: "/"))
        default: break
        }
        RFC3986.escape(path, keeping: isPathByte, into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `bytes` start with `http://` or `https://` (the scheme in any case) and go on after it.
    private static func isHTTP(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        func letter(_ index: Int, _ lower: Unicode.Scalar) -> Bool { bytes[index] | 0x20 == UInt8(ascii: lower) }
        guard bytes.count > 7, letter(0, "h"), letter(1, "t"), letter(2, "t"), letter(3, "p") else { return false }
        let afterScheme = letter(4, "s") ? 5 : 4
        return bytes.count > afterScheme + 3 && bytes[afterScheme] == UInt8(ascii: ":") && bytes[afterScheme + 1] == UInt8(ascii: "/")
            && bytes[afterScheme + 2] == UInt8(ascii: "/")
    }

    /// Whether `byte` stands for itself in a URL's path (RFC 3986 `pchar` and `/`, less `%`):
    /// unreserved characters, sub-delimiters, `:`, `@` and `/`.
    private static func isPathByte(_ byte: UInt8) -> Bool {
        RFC3986.isUnreserved(byte) || "!$&'()*+,;=:@/".utf8.contains(byte)
    }

    /// Whether a URL string without a base names the `file` scheme (in any case), as `isFileURL` says.
    static func isFile(_ string: String) -> Bool {
        var bytes = string.utf8.makeIterator()
        for expected in "file:".utf8 {
            guard let byte = bytes.next(), byte | (expected == UInt8(ascii: ":") ? 0 : 0x20) == expected else { return false }
        }
        return true
    }
}
