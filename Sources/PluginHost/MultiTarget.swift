import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Wraps any target so one provider can serve several target types.
public enum MultiTarget: TargetType {
    /// The wrapped target.
    case target(any TargetType)

    /// Wraps `target`.
    public init(_ target: any TargetType) {
        self = .target(target)
    }

    /// The wrapped target.
    public var target: any TargetType {
        switch self {
        case .target(let target): return target
        }
    }

    /// The wrapped target's base URL.
    public var baseURL: URL { target.baseURL }
    /// The wrapped target's path.
    public var path: String { target.path }
    /// The wrapped target's method.
    public var method: HTTPMethod { target.method }
    /// The wrapped target's task.
    public var task: RequestTask { target.task }
    /// The wrapped target's headers.
    public var headers: [String: String]? { target.headers }
    /// The wrapped target's sample data.
    public var sampleData: Data { target.sampleData }
    /// The wrapped target's sample response.
    public var sampleResponse: EndpointSampleResponse { target.sampleResponse }
    /// The wrapped target's validation.
    public var validationType: ValidationType { target.validationType }
    /// The wrapped target's plugin options.
    public var pluginOptions: [String: String] { target.pluginOptions }
    /// The wrapped target's redirect policy.
    public var redirectPolicy: RedirectPolicy? { target.redirectPolicy }
    /// The wrapped target's limits.
    public var limits: RequestLimits? { target.limits }
}
