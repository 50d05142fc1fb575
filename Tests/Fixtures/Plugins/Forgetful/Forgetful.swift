import PluginSDK

/// Implements `willSend` but lists only `prepare` in `implementedHooks`: loading it must fail,
/// naming the hook (a loaded plugin would never run it).
public struct ForgetfulPlugin: ExportablePlugin {
    public static var pluginName: String { "forgetful" }
    public static var pluginVersion: String { "0.0.1" }
    public static var pluginSummary: String { "Leaves a hook out of implementedHooks (test fixture)" }
    public static var implementedHooks: Set<InterceptorHook> { [.prepare] }

    /// Refuses `{"refuse": true}`, as a plugin refuses a configuration it cannot use.
    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        if try configuration.bool("refuse", default: false) { throw configuration.error("refused as asked") }
    }

    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction { .proceed }

    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {}
}

@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: ForgetfulPlugin.self)
}
