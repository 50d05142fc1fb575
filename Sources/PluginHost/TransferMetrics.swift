import PluginSDK

/// How an exchange went, as the transport measured it (defined in PluginSDK, where a
/// ``TransportFailure`` carries it too): ``Response/metrics``, ``NetworkError/metrics``.
public typealias TransferMetrics = PluginSDK.TransferMetrics
