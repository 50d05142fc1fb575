import PluginSDK
import TestPluginKit

/// The `gamma` test plugin.
public enum GammaName: TestPluginName {
    public static var name: String { "gamma" }
}

@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: TestPlugin<GammaName>.self)
}
