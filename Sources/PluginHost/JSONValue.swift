import PluginSDK

/// A JSON document as a `Sendable` value (defined in PluginSDK, where plugin configurations use
/// it too): what ``Response/mapJSON(failsOnEmptyData:)`` returns.
public typealias JSONValue = PluginSDK.JSONValue
