import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Traps (crashes the process) in `create` or in `prepare`, ends it with status 0 in `create`
/// (`exit`), or waits 20 s in `prepare` for any request but the CLI's offline stub's
/// (`hangOffStub`), as configured: the CLI's crash probe fixture.
public struct TrapPlugin: ExportablePlugin {
    public static var pluginName: String { "trap" }
    public static var pluginVersion: String { "0.0.1" }
    public static var pluginSummary: String { "Crashes on purpose (test fixture)" }
    public static var implementedHooks: Set<InterceptorHook> { [.prepare] }

    let inPrepare: Bool

    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        let place = try configuration.oneOf("trapIn", ["create", "prepare", "exit", "hangOffStub"], default: "create")
        if place == "create" { fatalError("trap plugin: trapping in create as configured") }
        if place == "exit" { exit(0) }
        inPrepare = place == "prepare"
        hangsOffStub = place == "hangOffStub"
    }

    let hangsOffStub: Bool

    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        if inPrepare { fatalError("trap plugin: trapping in prepare as configured") }
        if hangsOffStub, !request.url.contains("stub.pluginhost.invalid") { sleep(20) }
        return .proceed
    }
}

@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: TrapPlugin.self)
}
