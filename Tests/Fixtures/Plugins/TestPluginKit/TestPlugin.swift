import PluginSDK

/// What the `keep` option keeps past the hooks, behind a lock.
final class KeptViews: @unchecked Sendable {
    private let lock = Locked<Void>(())
    private var views: (request: InterceptorRequest?, response: InterceptorResponse?) = (nil, nil)

    func withLock<R>(_ body: (inout (request: InterceptorRequest?, response: InterceptorResponse?)) -> R) -> R {
        lock.withLock { _ in body(&views) }
    }
}

/// Names a test plugin.
public protocol TestPluginName {
    static var name: String { get }
}

/// A configurable plugin for the loader tests.
///
/// Always: `prepare` appends its name to the request header `X-Order` and `process` appends it
/// to the response header `X-Response-Order`. Configuration:
/// - `respond` (number): answer in `prepare` with this status and body `from <name>`.
/// - `replace` (number, -99999...99999): replace the result in `process` (a response or a
///   failure) with this status and body `from <name>` (a status the host refuses, to test that
///   it does).
/// - `answerField` (string): the value of the answer's `X-Responder` field (default: the name;
///   one with CR or LF, to test that the host refuses it).
/// - `throwIn` (one of prepare, willSend, didReceive, process): throw `boom in <hook>` there.
/// - `event` (string): emit this event from `willSend`, with the order so far, the target's `tag`
///   option and path, and the request's number and attempt.
/// - `retryAfter` (number, -1000...1000): ask for a retry after this many seconds in `process` (a
///   negative delay, to test that it is refused alike loaded and compiled in).
/// - `keep` (bool): keep the request of `prepare` and the response of `didReceive` past their
///   hooks (what a plugin must not do), use them in `process`, and answer there with what they
///   gave in the response header `X-Kept`.
public struct TestPlugin<N: TestPluginName>: ExportablePlugin {
    public static var pluginName: String { N.name }
    public static var pluginVersion: String { "0.1.0" }
    public static var pluginSummary: String { "Records its place in the chain (test fixture)" }
    public static var implementedHooks: Set<InterceptorHook> { [.prepare, .willSend, .didReceive, .process] }
    public static var pluginLicense: String { "MIT" }

    let respond: Int?
    let replace: Int?
    let answerField: String
    let throwIn: String?
    let event: String?
    let retryAfter: Double?
    let keep: Bool
    /// The request and response `keep` keeps (views are not `Sendable`: keeping one takes this).
    let kept = KeptViews()

    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["respond", "replace", "answerField", "throwIn", "event", "retryAfter", "keep"])
        respond = configuration.values["respond"] == nil ? nil : try configuration.integer("respond", default: 200, in: 100...599)
        replace = configuration.values["replace"] == nil ? nil : try configuration.integer("replace", default: 200, in: -99_999...99_999)
        answerField = try configuration.string("answerField") ?? N.name
        throwIn =
            configuration.values["throwIn"] == nil
            ? nil
            : try configuration.oneOf("throwIn", ["prepare", "willSend", "didReceive", "process"], default: "prepare")
        event = try configuration.string("event")
        retryAfter = configuration.values["retryAfter"] == nil ? nil : try configuration.number("retryAfter", default: 0, in: -1000...1000)
        keep = try configuration.bool("keep", default: false)
    }

    struct Boom: Error, CustomStringConvertible {
        let hook: String
        var description: String { "boom in \(hook)" }
    }

    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        if throwIn == "prepare" { throw Boom(hook: "prepare") }
        try request.setHeader("X-Order", [request.header("X-Order"), N.name].compactMap { $0 }.joined(separator: ","))
        if let respond { return .respond(answer(respond)) }
        if keep { kept.withLock { $0.request = request } }
        return .proceed
    }

    /// The answer `respond` and `replace` give.
    func answer(_ status: Int) -> SyntheticResponse {
        SyntheticResponse(statusCode: status, headers: [HTTPHeader(name: "X-Responder", value: answerField)], body: Array("from \(N.name)".utf8))
    }

    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        if throwIn == "willSend" { throw Boom(hook: "willSend") }
        if let event {
            context.services.emit(
                event,
                fields: [
                    "order": request.header("X-Order") ?? "", "option": context.target.pluginOptions["tag"] ?? "",
                    "request": "\(context.requestID)", "attempt": "\(context.attempt)", "path": context.target.path,
                ])
        }
    }

    public func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        if throwIn == "didReceive" { throw Boom(hook: "didReceive") }
        if keep { kept.withLock { $0.response = result.response } }
    }

    public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        if throwIn == "process" { throw Boom(hook: "process") }
        if let response = result.response {
            try response.setHeader("X-Response-Order", [response.header("X-Response-Order"), N.name].compactMap { $0 }.joined(separator: ","))
        }
        if keep, let response = result.response {
            let (request, old) = kept.withLock { ($0.request, $0.response) }
            func error(_ body: () throws -> Void) -> String {
                do {
                    try body()
                    return "none"
                } catch {
                    return "\(error)"
                }
            }
            let findings = [
                "request: method \(request?.method ?? "-") url \(request?.url ?? "-") headers \(request?.headers.count ?? -1)",
                "set \(error { try request?.setHeader("X-Late", "1") })",
                "response: status \(old?.statusCode ?? -1) headers \(old?.headers.count ?? -1) "
                    + "request headers \(old.map { $0.requestHeaders.map { String($0.count) } ?? "unknown" } ?? "-") "
                    + "set \(error { try old?.setHeader("X-Late", "1") })",
            ]
            try response.setHeader("X-Kept", findings.joined(separator: "; "))
        }
        if let replace { return .replace(answer(replace)) }
        if let retryAfter { return .retry(delay: retryAfter) }
        return .proceed
    }
}
