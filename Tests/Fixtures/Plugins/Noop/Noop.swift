import PluginSDK

/// Implements every request and response hook and does nothing: measures the ABI's own cost.
public struct NoopPlugin: ExportablePlugin {
    public static var pluginName: String { "noop" }
    public static var pluginVersion: String { "1.0.0" }
    public static var pluginSummary: String { "Does nothing in every hook (benchmark fixture)" }
    public static var implementedHooks: Set<InterceptorHook> { [.prepare, .willSend, .didReceive, .process] }

    public init(configuration: PluginConfiguration, host: any HostServices) throws {}

    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction { .proceed }
    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {}
    public func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {}
    public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction { .proceed }
}

@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: NoopPlugin.self)
}
