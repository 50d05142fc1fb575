/// Which status codes count as success; others fail with ``NetworkError/statusCode(_:)``.
public enum ValidationType: Sendable, Equatable {
    /// Every status code is accepted.
    case none
    /// 200 to 299.
    case successCodes
    /// 200 to 399.
    case successAndRedirectCodes
    /// Exactly these codes; an empty list accepts every code (as Moya skips validation then).
    case customCodes([Int])

    /// The accepted codes; empty for ``none``.
    public var statusCodes: [Int] {
        switch self {
        case .none: return []
        case .successCodes: return Array(200..<300)
        case .successAndRedirectCodes: return Array(200..<400)
        case .customCodes(let codes): return codes
        }
    }

    /// Whether `statusCode` is accepted.
    public func accepts(_ statusCode: Int) -> Bool {
        switch self {
        case .none: return true
        case .successCodes: return (200..<300).contains(statusCode)
        case .successAndRedirectCodes: return (200..<400).contains(statusCode)
        case .customCodes(let codes): return codes.isEmpty || codes.contains(statusCode)
        }
    }
}
