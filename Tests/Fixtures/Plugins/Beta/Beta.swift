import PluginSDK
import TestPluginKit

/// The `beta` test plugin.
public enum BetaName: TestPluginName {
    public static var name: String { "beta" }
}

@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: TestPlugin<BetaName>.self)
}
