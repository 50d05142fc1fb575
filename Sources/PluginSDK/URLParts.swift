import Foundation

/// Small helpers for reading a URL string's parts without building a `URLRequest`.
public struct URLParts: Sendable {
    /// The components, or nil when the string is not a URL.
    public let components: URLComponents?

    /// Parses `string`.
    public init(_ string: String) {
        components = URLComponents(string: string)
    }

    /// Decoded query items in order; a name without `=` has an empty value.
    public var queryItems: [(name: String, value: String)] {
        (components?.queryItems ?? []).map { ($0.name, $0.value ?? "") }
    }

    /// The percent-encoded path as sent.
    public var percentEncodedPath: String { components?.percentEncodedPath ?? "" }

    /// The host, if any.
    public var host: String? { components?.host }

    /// Whether the string is an absolute http or https URL with a host.
    public static func isAbsoluteHTTP(_ string: String) -> Bool {
        guard let components = URLComponents(string: string),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty
        else { return false }
        return true
    }
}
