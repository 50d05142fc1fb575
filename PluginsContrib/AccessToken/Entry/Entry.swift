import AccessTokenPlugin
import PluginSDK

/// The library's one entry point (ABI 1.0): the plugin's descriptor. It lives in its own target so
/// that the plugin module itself can also be linked into an app and used in-process.
@_cdecl("pluginhost_plugin_v1")
public func pluginhostPlugin() -> UnsafeRawPointer {
    PluginExport.descriptor(for: AccessTokenPlugin.self)
}
