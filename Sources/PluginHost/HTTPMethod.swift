/// An HTTP method. Use the constants, or `HTTPMethod(rawValue:)` for an extension method.
public struct HTTPMethod: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The method token as sent, e.g. `GET`.
    public let rawValue: String

    /// Creates a method from its token.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// `CONNECT`
    public static let connect = HTTPMethod(rawValue: "CONNECT")
    /// `DELETE`
    public static let delete = HTTPMethod(rawValue: "DELETE")
    /// `GET`
    public static let get = HTTPMethod(rawValue: "GET")
    /// `HEAD`
    public static let head = HTTPMethod(rawValue: "HEAD")
    /// `OPTIONS`
    public static let options = HTTPMethod(rawValue: "OPTIONS")
    /// `PATCH`
    public static let patch = HTTPMethod(rawValue: "PATCH")
    /// `POST`
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `TRACE`
    public static let trace = HTTPMethod(rawValue: "TRACE")

    /// The token.
    public var description: String { rawValue }
}
