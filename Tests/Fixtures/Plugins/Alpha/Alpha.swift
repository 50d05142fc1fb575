import PluginSDK
import TestPluginKit

/// The `alpha` test plugin.
public enum AlphaName: TestPluginName {
    public static var name: String { "alpha" }
}

@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: TestPlugin<AlphaName>.self)
}
