import AccessTokenPlugin
import ActivityPlugin
import CachePlugin
import CredentialsPlugin
import Foundation
import LoggerPlugin
import PluginHost
import PluginSDK
import SignaturePlugin
import Testing

/// Every contrib plugin exports every hook it implements: loaded, it behaves as in-process.
@Suite("Implemented hooks")
struct ImplementedHooksTests {
    static func configuration(_ plugin: String, _ values: [String: JSONValue] = [:]) -> PluginConfiguration {
        PluginConfiguration(plugin: plugin, values: values)
    }

    @Test func everyContribPluginListsEveryHookItImplements() throws {
        let services = PluginServices()
        let cacheDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("hooks-cache-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: cacheDirectory) }
        let plugins: [(any Interceptor, Set<InterceptorHook>)] = [
            (
                try ActivityPlugin(configuration: Self.configuration("activity"), host: services.hostServices(for: "activity")),
                ActivityPlugin.implementedHooks
            ),
            (
                try CachePlugin(
                    configuration: Self.configuration("cache", ["directory": .string(cacheDirectory)]), host: services.hostServices(for: "cache")),
                CachePlugin.implementedHooks
            ),
            (
                try AccessTokenPlugin(configuration: Self.configuration("access-token"), host: services.hostServices(for: "access-token")),
                AccessTokenPlugin.implementedHooks
            ),
            (
                try CredentialsPlugin(
                    configuration: Self.configuration("credentials", ["credentials": [["host": "a.invalid", "user": "u", "password": "p"]]]),
                    host: services.hostServices(for: "credentials")), CredentialsPlugin.implementedHooks
            ),
            (
                try SignaturePlugin(
                    configuration: Self.configuration("signature", ["scheme": "hmac-sha256"]), host: services.hostServices(for: "signature")),
                SignaturePlugin.implementedHooks
            ),
            (
                try LoggerPlugin(configuration: Self.configuration("logger", ["level": "body"]), host: services.hostServices(for: "logger")),
                LoggerPlugin.implementedHooks
            ),
        ]
        for (plugin, listed) in plugins {
            #expect(HookProbe.unlistedHooks(of: plugin, listed: listed) == [], "\(plugin.name)")
        }
        // The probe does see a hook that is the plugin's own.
        struct Sneaky: Interceptor {
            func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {}
        }
        #expect(HookProbe.unlistedHooks(of: Sneaky(), listed: [.prepare]) == [.willSend])
    }
}
