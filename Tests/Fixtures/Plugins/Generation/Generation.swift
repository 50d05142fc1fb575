import Foundation
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

/// Calls every host service from a thread of its own 100 ms after the instance that held it was
/// destroyed, and writes what they gave to `report` (`value=… subscribers=… random=… clock=…`).
final class LateCaller: Sendable {
    let host: any HostServices
    let report: String

    init(host: any HostServices, report: String) {
        self.host = host
        self.report = report
    }

    deinit {
        let (host, report) = (host, report)
        Thread.detachNewThread {
            usleep(100_000)
            host.log(.error, "late log line")
            host.emit("late", fields: [:])
            host.setValue("late", forKey: "late")
            let value = host.value(forKey: "generation-key") ?? "nil"
            let random = host.randomBytes(32).contains { $0 != 0 }
            let clock = host.now() > 1e9 && host.monotonicNanoseconds() > 0
            let text = "value=\(value) subscribers=\(host.hasSubscribers) random=\(random) clock=\(clock)"
            FileManager.default.createFile(atPath: report + ".part", contents: Data(text.utf8))
            rename(report + ".part", report)
        }
    }
}

/// Stamps which instance handled a request (for the reload tests).
///
/// Configuration: `generation` (number), `refuse` (`true`: create fails) and `announce` (`true`:
/// create emits the event `created` with the field `generation`), `tickAfter` (seconds: a thread
/// of the plugin's own emits `tick`, with the field `generation`, that long after create),
/// `lateReport` (a path: see
/// ``LateCaller``). `prepare` sets the request header `X-Instance: g<generation>-<serial>` (and,
/// with `lateReport`, `X-Generation-Key` to the host's value of `generation-key`); `process` sets
/// the response headers `X-Instance` (its own stamp) and `X-Live-Instances` (instances alive in
/// the process).
public struct GenerationPlugin: ExportablePlugin {
    public static var pluginName: String { "generation" }
    public static var pluginVersion: String { "1.0.0" }
    public static var pluginSummary: String { "Stamps its instance on requests and responses (reload fixture)" }
    public static var implementedHooks: Set<InterceptorHook> { [.prepare, .process] }

    let token: LiveToken
    let stamp: String
    let late: LateCaller?

    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["generation", "refuse", "announce", "lateReport", "tickAfter"])
        if try configuration.bool("refuse", default: false) { throw configuration.error("refuse is true: this configuration is refused") }
        let generation = try configuration.integer("generation", default: 0)
        token = LiveToken()
        stamp = "g\(generation)-\(token.serial)"
        if try configuration.bool("announce", default: false) { host.emit("created", fields: ["generation": String(generation)]) }
        late = try configuration.string("lateReport").map { LateCaller(host: host, report: $0) }
        let delay = try configuration.number("tickAfter", default: -1, in: -1...10)
        if delay >= 0 {
            Thread.detachNewThread {
                usleep(UInt32(delay * 1_000_000))
                host.emit("tick", fields: ["generation": String(generation)])
            }
        }
    }

    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.setHeader("X-Instance", stamp)
        if let late { try request.setHeader("X-Generation-Key", late.host.value(forKey: "generation-key") ?? "nil") }
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
