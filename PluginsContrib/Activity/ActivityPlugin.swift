import Foundation
import PluginSDK

/// Network activity: emits `began` and `ended` events for every attempt, with the number of
/// requests in flight, so an app can show and hide a loading indicator.
///
/// Per target, `pluginOptions["activity"]` is `show` or `hide` (the "show loading" flag) and is
/// passed on in both events. `ended` comes exactly once for every `began`, also when the attempt
/// fails, times out or is cancelled; the count never goes negative. The count is the provider's
/// (its services'), not the instance's: a reload does not start it again from 0.
public struct ActivityPlugin: ExportablePlugin {
    /// The name manifests and bundles know this plugin by.
    public static var pluginName: String { "activity" }
    /// This plugin's version.
    public static var pluginVersion: String { "1.0.0" }
    /// One line saying what this plugin does (`plugin.json`'s `summary`, `pluginhost list --json`).
    public static var pluginSummary: String { "Emits began/ended events with the in-flight count (loading indicators)" }
    /// The hooks this plugin implements (the others are not exported).
    public static var implementedHooks: Set<InterceptorHook> { [.willSend, .didReceive] }

    /// `show` or `hide` for targets that do not say.
    let defaultVisibility: String
    /// The count of the provider's services, shared by every instance made for them.
    private let state: Scope

    /// The in-flight count of one provider's services (or of the providers sharing them), shared
    /// by every instance of this library made for them: after a reload, requests still running on
    /// the old instance count with those the new one sends, and end where they began.
    typealias Scope = Locked<Shared>

    /// The scopes alive, by the id kept in the services' store under ``scopeKey`` (held weakly:
    /// a scope goes with the last instance of its services).
    private static let scopes = Locked([String: WeakScope]())

    struct WeakScope: @unchecked Sendable {
        // Safe as @unchecked Sendable: read and written only inside `scopes`' lock.
        weak var scope: Scope?
    }

    /// The key of the host store that names this provider's scope (a random id).
    static let scopeKey = "activity.scope"

    /// This services' scope: the one its id names, or a new one (and a new id).
    /// The store is read and written under the scopes' lock: two instances made at once on one
    /// services each found no id, and each made a scope of its own (their counts apart).
    static func scope(_ host: any HostServices) -> Scope {
        scopes.withLock { scopes in
            let id: String
            if let known = host.value(forKey: scopeKey) {
                id = known
            } else {
                id = SHA256.hex(host.randomBytes(16))
                host.setValue(id, forKey: scopeKey)
            }
            if let scope = scopes[id]?.scope { return scope }
            let scope = Scope(Shared())
            scopes = scopes.filter { $0.value.scope != nil }
            scopes[id] = WeakScope(scope: scope)
            return scope
        }
    }

    struct Shared {
        var inFlight = 0
        /// The attempts in flight, each with whether its `began` went out.
        var open: [Key: Bool] = [:]
        /// The last event's number: counted with `inFlight`, under the same lock. A scope made
        /// anew for known services (their last instance went, then a reload enabled the plugin
        /// again) or by an upgraded library numbers on past every number an earlier scope gave:
        /// it starts from the monotonic clock's nanoseconds, which no scope's count of events
        /// since its own start can reach (it started again from 0, and an indicator that keeps
        /// the highest number seen ignored the new scope's events until they passed the old).
        var sequence = DispatchTime.now().uptimeNanoseconds
    }

    struct Key: Hashable {
        let request: UInt64
        let attempt: Int
    }

    /// Reads the configuration (keys in this plugin's README); an unknown key or a bad value throws
    /// a `PluginConfigurationError` naming it.
    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["defaultVisibility"])
        defaultVisibility = try configuration.oneOf("defaultVisibility", ["show", "hide"], default: "show")
        state = Self.scope(host)
    }

    func visibility(_ context: InterceptorContext) -> String {
        switch context.target.pluginOptions["activity"] {
        case "show": return "show"
        case "hide": return "hide"
        default: return defaultVisibility
        }
    }

    func fields(_ context: InterceptorContext, inFlight: Int, sequence: UInt64) -> [String: String] {
        [
            "requestID": String(context.requestID), "attempt": String(context.attempt), "method": context.target.method,
            "path": context.target.path, "inFlight": String(inFlight), "activity": visibility(context), "sequence": String(sequence),
        ]
    }

    /// Counts the attempt in flight; emits `began` when someone subscribes to events.
    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        let key = Key(request: context.requestID, attempt: context.attempt)
        // The count is kept either way; the event is built only when someone listens, and
        // `ended` goes only after a `began` that went out.
        let listening = context.services.hasSubscribers
        let (inserted, count, sequence) = state.withLock { state -> (Bool, Int, UInt64) in
            guard state.open[key] == nil else { return (false, state.inFlight, 0) }
            state.open[key] = listening
            state.inFlight += 1
            state.sequence += 1
            return (true, state.inFlight, state.sequence)
        }
        if inserted, listening { context.services.emit("began", fields: fields(context, inFlight: count, sequence: sequence)) }
    }

    /// Counts the attempt out (once, whatever its outcome); emits `ended` with the outcome when
    /// someone subscribes, or `count` when its `began` went to nobody (a subscriber that came
    /// in between learns the count from it: without it, the attempts begun before it ended
    /// unseen, and an indicator stayed on with the last count it saw).
    public func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        let key = Key(request: context.requestID, attempt: context.attempt)
        let (began, count, sequence) = state.withLock { state -> (Bool, Int, UInt64) in
            guard let began = state.open.removeValue(forKey: key) else { return (false, state.inFlight, 0) }
            state.inFlight = max(0, state.inFlight - 1)
            state.sequence += 1
            return (began, state.inFlight, state.sequence)
        }
        guard sequence != 0, context.services.hasSubscribers else { return }
        var fields = fields(context, inFlight: count, sequence: sequence)
        switch result {
        case .response(let response): fields["outcome"] = String(response.statusCode)
        case .failure(let failure): fields["outcome"] = failure.kind.rawValue
        }
        // No `ended` without its `began`: a subscriber that came in between got one unpaired.
        context.services.emit(began ? "ended" : "count", fields: fields)
    }
}
