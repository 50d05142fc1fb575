import PluginSDK

/// Instances of this plugin alive in the process, and how many were ever made.
let instances = Locked((live: 0, made: 0))

/// Counts an instance alive from its plugin's creation to its destruction.
final class LiveToken: Sendable {
    let serial: Int
    init() {
        serial = instances.withLock {
            $0.live += 1
            $0.made += 1
            return $0.made
        }
    }
    deinit { instances.withLock { $0.live -= 1 } }
}

/// Stamps which instance handled a request (for the reload tests).
///
/// Configuration: `generation` (number), `refuse` (`true`: create fails) and `announce` (`true`:
/// create emits the event `created` with the field `generation`). `prepare` sets the
/// request header `X-Instance: g<generation>-<serial>`; `process` sets the response headers
/// `X-Instance` (its own stamp) and `X-Live-Instances` (instances alive in the process).
public struct GenerationPlugin: ExportablePlugin {
    public static var pluginName: String { "generation" }
    public static var pluginVersion: String { "1.0.0" }
    public static var pluginSummary: String { "Stamps its instance on requests and responses (reload fixture)" }
    public static var implementedHooks: Set<InterceptorHook> { [.prepare, .process] }

    let token: LiveToken
    let stamp: String

    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["generation", "refuse", "announce"])
        if try configuration.bool("refuse", default: false) { throw configuration.error("refuse is true: this configuration is refused") }
        let generation = try configuration.integer("generation", default: 0)
        token = LiveToken()
        stamp = "g\(generation)-\(token.serial)"
        if try configuration.bool("announce", default: false) { host.emit("created", fields: ["generation": String(generation)]) }
    }

    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.setHeader("X-Instance", stamp)
        return .proceed
    }

    public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        if let response = result.response {
            try response.setHeader("X-Instance", stamp)
            try response.setHeader("X-Live-Instances", String(instances.withLock { $0.live }))
        }
        return .proceed
    }
}

@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: GenerationPlugin.self)
}
