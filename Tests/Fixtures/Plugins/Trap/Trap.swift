import PluginSDK

/// Traps (crashes the process) in `create` or in `prepare`, as configured: the CLI's crash probe fixture.
public struct TrapPlugin: ExportablePlugin {
    public static var pluginName: String { "trap" }
    public static var pluginVersion: String { "0.0.1" }
    public static var pluginSummary: String { "Crashes on purpose (test fixture)" }
    public static var implementedHooks: Set<InterceptorHook> { [.prepare] }

    let inPrepare: Bool

    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        let place = try configuration.oneOf("trapIn", ["create", "prepare"], default: "create")
        if place == "create" { fatalError("trap plugin: trapping in create as configured") }
        inPrepare = true
    }

    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        if inPrepare { fatalError("trap plugin: trapping in prepare as configured") }
        return .proceed
    }
}

@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: TrapPlugin.self)
}
