import Foundation
import PluginHost
import PluginSDK
import Testing

extension PluginFixtures {
    /// The repository root.
    static var root: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// A provider on the project's example manifest (its six plugins bundled here), with the
    /// logger's configuration replaced by `logger` (the example logs to standard error).
    func exampleManifestProvider(logger: [String: Any]) throws -> Provider<Bin> {
        for name in ["Activity", "Cache", "AccessToken", "Credentials", "Signature", "Logger"] { try contrib(name) }
        let example = URL(fileURLWithPath: Self.root + "/PluginsContrib/manifest.example.json")
        var manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: example)) as? [String: Any] ?? [:]
        var plugins = manifest["plugins"] as? [[String: Any]] ?? []
        for index in plugins.indices where plugins[index]["name"] as? String == "logger" { plugins[index]["config"] = logger }
        manifest["plugins"] = plugins
        return try Provider<Bin>(manifest: try self.manifest(raw: JSONSerialization.data(withJSONObject: manifest)))
    }

    /// Bundles a contrib plugin (`Logger` → `logger.plugin`) with its documented default configuration.
    @discardableResult
    func contrib(_ name: String) throws -> String {
        let configPath = Self.root + "/PluginsContrib/\(name)/plugin-config.json"
        let defaults = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: configPath))) as? [String: Any] ?? [:]
        return try bundle("\(name)Plugin", defaultConfig: defaults)
    }

    /// A provider whose chain is the given contrib plugins (loaded from bundles), in order.
    func provider<T: TargetType>(
        _ entries: [(String, [String: Any])], for: T.Type = Bin.self, before: [any Interceptor] = [],
        after: [any Interceptor] = [], transport: (any Transport)? = nil,
        services: PluginServices = PluginServices(), requestTimeout: Double? = nil
    ) throws -> Provider<T> {
        var manifestEntries: [[String: Any]] = []
        for (plugin, config) in entries {
            let product = Self.contribProducts[plugin] ?? plugin
            if !FileManager.default.fileExists(atPath: plugins + "/" + plugin + ".plugin") { try contrib(product) }
            manifestEntries.append(["name": plugin, "config": config])
        }
        return try Provider<T>(
            manifest: try manifest(manifestEntries, file: "manifest-\(UUID().uuidString).json"),
            before: before, after: after,
            requestClosure: { _, request in
                var request = request
                if let requestTimeout { request.timeoutInterval = requestTimeout }
                return request
            },
            transport: transport, services: services)
    }

    static let contribProducts = [
        "access-token": "AccessToken", "credentials": "Credentials", "activity": "Activity",
        "logger": "Logger", "signature": "Signature", "cache": "Cache",
    ]
}

/// A fresh key for the fixture hit counters.
func counterKey() -> String { UUID().uuidString }

/// How many times the fixture server saw `key`.
func serverHits(_ key: String) async throws -> Int {
    let provider = Provider<MultiTarget>()
    let json = try await provider.get(try TestServer.url().absoluteString + "/fixture/hits", parameters: ["key": key]).mapJSON().value
    return json["count"]?.intValue ?? -1
}

/// A `/fixture/counted` target with response headers set through `h_` parameters.
func counted(
    _ key: String, headers: [String: String] = [:], method: HTTPMethod = .get, status: Int = 200,
    options: [String: String] = [:], requestHeaders: [String: String]? = nil
) throws -> Bin {
    var parameters: Parameters = ["key": key, "status": status]
    for (name, value) in headers { parameters["h_" + name] = value }
    return try Bin(
        "fixture/counted", method: method, task: .requestParameters(parameters: parameters, encoding: URLEncoding.queryString),
        headers: requestHeaders, options: options)
}
