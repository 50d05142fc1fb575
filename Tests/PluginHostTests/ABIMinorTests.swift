import ActivityPlugin
import CPluginABI
import Foundation
import PluginSDK
import Testing

@testable import PluginHost

/// ABI 1.1 beside 1.0: per-instance hook masks (`declare_hooks`), `has_subscribers`, and a
/// plugin built against 1.0 loading next to 1.1 ones.
@Suite("ABI 1.1")
struct ABIMinorTests {
    func hostile(_ f: PluginFixtures, _ mode: String) throws -> URL {
        if !FileManager.default.fileExists(atPath: f.plugins + "/hostile.plugin") { try f.bundle("HostileTestPlugin") }
        return try f.manifest([["name": "hostile", "config": ["mode": mode]]], file: "\(mode).json")
    }

    @Test func aPluginBuiltAgainst1_0RunsBesideOnesBuiltAgainst1_1() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        try f.bundle("CPluginTestPlugin")
        try f.bundle("HostileTestPlugin")
        let plugins = try PluginLoader.load(
            manifest: try f.manifest([["name": "alpha"], ["name": "cplugin"], ["name": "hostile", "config": ["mode": "declare-none"]]]),
            services: PluginServices())
        #expect(plugins.map { "\($0.name) \($0.library.info.abiMajor).\($0.library.info.abiMinor)" } == ["alpha 1.6", "cplugin 1.0", "hostile 1.6"])
        let provider = Provider<Bin>(interceptors: plugins)
        let response = try await provider.request(try Bin("anything")).value
        #expect(try echo(response).header("X-Order") == "alpha,cplugin")
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "cplugin,alpha")
    }

    /// A plugin built against 1.0 cannot tell a proxy's `407` from a server's `401` (the
    /// challenge's host is the request's): it is not asked about a proxy, and so gives it no
    /// server password. A server's challenge it still answers.
    @Test func aPluginBuiltBefore1_6IsNotAskedAboutAProxy() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("CPluginTestPlugin")
        let plugins = try PluginLoader.load(manifest: try f.manifest([["name": "cplugin"]]), services: PluginServices())
        let proxy = ProxyChallengeTransport()
        let refused = try await Provider<Bin>(transport: proxy, interceptors: plugins).request(
            try Bin("through/proxy", base: URL(string: "http://origin.test")!)
        ).value
        #expect(refused.statusCode == 407)
        #expect(proxy.sent.withLock { $0.map { $0.value(forHTTPHeaderField: "Proxy-Authorization") } } == [nil])
        let answered = try await Provider<Bin>(interceptors: plugins).request(try Bin("basic-auth/c-user/c-secret")).value
        #expect(answered.statusCode == 200)
    }

    @Test func declaredHooksAreTheOnlyOnesCalled() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let plugins = try PluginLoader.load(manifest: try hostile(f, "declare-none"), services: PluginServices())
        #expect(plugins.first?.activeHooks == 0)
        // Its prepare fails if called: the request goes through.
        let response = try await Provider<Bin>(interceptors: plugins).request(try Bin("get")).value
        #expect(response.statusCode == 200)
    }

    @Test func declaringAHookTheDescriptorLacksIsRefusedAtLoad() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let error = loadError { _ = try PluginLoader.load(manifest: try hostile(f, "declare-extra"), services: PluginServices()) }
        #expect(error?.kind == .descriptorInvalid)
        #expect(error?.plugin == "hostile")
        #expect(error?.reason == "create declared hooks 0x09, but the descriptor implements only 0x01 (extra bits 0x08)")
    }

    /// A refused declaration stays refused: declaring again, validly, does not undo it.
    @Test func aRefusedDeclarationIsNotUndoneByAnother() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let error = loadError { _ = try PluginLoader.load(manifest: try hostile(f, "declare-retry"), services: PluginServices()) }
        #expect(error?.kind == .descriptorInvalid)
        #expect(error?.reason == "create declared hooks 0x09, but the descriptor implements only 0x01 (extra bits 0x08)")
    }

    @Test func declaringHooksOutsideCreateIsRefused() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try Provider<Bin>(manifest: try hostile(f, "declare-late"))
        let result = await provider.request(try Bin("get")).result
        guard case .failure(.interceptor("hostile", .prepare, let message)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(message == "declare_hooks outside create: PH_INVALID")
    }

    @Test func contribPluginsDeclareOnlyTheHooksTheirConfigurationNeeds() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.contrib("Logger")
        try f.contrib("Credentials")
        try f.contrib("Cache")
        func active(_ name: String, _ config: [String: Any]) throws -> UInt32? {
            try PluginLoader.load(
                manifest: try f.manifest([["name": name, "config": config]], file: "\(UUID().uuidString).json"), services: PluginServices()
            )
            .first?.activeHooks
        }
        #expect(try active("logger", ["level": "off"]) == 0)
        #expect(try active("logger", ["level": "basic"]) == PH_HOOK_WILL_SEND | PH_HOOK_DID_RECEIVE)
        #expect(try active("credentials", [:]) == 0)
        let entry: [String: Any] = ["host": "h", "user": "u", "password": "p"]
        #expect(try active("credentials", ["credentials": [entry]]) == PH_HOOK_CREDENTIAL)
        var preemptive = entry
        preemptive["preemptive"] = true
        #expect(try active("credentials", ["credentials": [preemptive]]) == PH_HOOK_PREPARE | PH_HOOK_CREDENTIAL)
        // ABI 1.3: a response tells the request as sent, so the cache needs no willSend.
        #expect(try active("cache", [:]) == PH_HOOK_PREPARE | PH_HOOK_PROCESS)
    }

    @Test func activityBuildsEventsOnlyWhileSomeoneListens() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let services = PluginServices()
        #expect(!services.hasSubscribers)
        let provider = try f.provider([("activity", [:])], services: services)
        _ = try await provider.request(try Bin("get")).value
        let events = LockedCounter()
        let subscription = services.subscribe { events.append("\($0.name) \($0.fields["inFlight"] ?? "")") }
        #expect(services.hasSubscribers)
        _ = try await provider.request(try Bin("get")).value
        subscription.cancel()
        #expect(!services.hasSubscribers)
        _ = try await provider.request(try Bin("get")).value
        // The count stayed right while nobody listened: 1 in flight, then 0.
        #expect(events.log == ["began 1", "ended 0"])
    }
}

/// Writes a batch of header edits from `prepare` and records what `willSend` reads back.
private struct BatchEditor: Interceptor {
    let edits: [HeaderEdit]
    let outcome: LockedBox<String>
    var name: String { "batch-editor" }

    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        do {
            try request.editHeaders(edits)
            outcome.set("applied")
        } catch let error as HeaderEditError {
            outcome.set(error.description)
        }
        return .proceed
    }
}

@Suite("ABI 1.1: header snapshots and batched edits")
struct BatchedHeaderEditTests {
    @Test func aBatchAppliesWholeOrNotAtAll() async throws {
        let outcome = LockedBox("")
        let good = Provider<Bin>(
            stubClosure: Provider<Bin>.immediatelyStub(_:),
            interceptors: [BatchEditor(edits: [.set("X-A", "1"), .add("X-A", "2"), .set("X-B", "3"), .remove("X-B")], outcome: outcome)])
        let sent = try await good.request(try Bin("get", headers: ["X-B": "old"])).value.request
        #expect(outcome.get() == "applied")
        #expect(sent?.value(forHTTPHeaderField: "X-A") == "1, 2")
        #expect(sent?.value(forHTTPHeaderField: "X-B") == nil)
        let bad = Provider<Bin>(
            stubClosure: Provider<Bin>.immediatelyStub(_:),
            interceptors: [BatchEditor(edits: [.set("X-A", "1"), .set("X-C", "ok"), .set("X-D", "a\r\nX-Evil: 1")], outcome: outcome)])
        let untouched = try await bad.request(try Bin("get")).value.request
        #expect(outcome.get() == "header edit 2: invalid value for header \"X-D\": CR, LF and NUL are not allowed")
        #expect(untouched?.value(forHTTPHeaderField: "X-A") == nil)
        #expect(untouched?.value(forHTTPHeaderField: "X-Evil") == nil)
        let tooMany = Provider<Bin>(
            stubClosure: Provider<Bin>.immediatelyStub(_:),
            interceptors: [BatchEditor(edits: Array(repeating: .set("X-A", "1"), count: HeaderEdit.maxCount + 1), outcome: outcome)])
        _ = try await tooMany.request(try Bin("get")).value
        #expect(outcome.get() == "header edit 256: more than 256 header edits in one call")
    }

    @Test func theSignaturePluginSignsWithOneBatchAcrossTheABI() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("signature", ["keyId": "batch"])])
        provider.services.setValue("fixture-signing-secret", forKey: "signing_secret")
        let verified = try await provider.request(try Bin("fixture/verify-hmac")).mapJSON().value
        #expect(verified["valid"] == .bool(true))
        let echoed = try echo(try await provider.request(try Bin("anything")).value)
        #expect(echoed.header("X-Key-Id") == "batch")
        #expect(echoed.header("X-Signature")?.count == 64)
    }
}

/// A plugin compiled in that needs only `prepare` for its configuration.
private struct PrepareOnly: ExportablePlugin {
    static var pluginName: String { "prepare-only" }
    static var pluginVersion: String { "1.0.0" }
    static var pluginSummary: String { "Records its hooks (test)" }
    static var implementedHooks: Set<InterceptorHook> { [.prepare, .willSend, .didReceive, .process] }
    let log: LockedCounter
    var activeHooks: Set<InterceptorHook>? { [.prepare] }

    init(configuration: PluginConfiguration, host: any HostServices) throws { log = LockedCounter() }
    init(log: LockedCounter) { self.log = log }

    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        log.append("prepare")
        return .proceed
    }
    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws { log.append("willSend") }
    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws { log.append("didReceive") }
    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        log.append("process")
        return .proceed
    }
}

/// A plugin compiled in that lists only `prepare` but implements `willSend` too (loaded, it is
/// refused at create: see `PluginRefusalTests`).
private struct ListsPrepareOnly: ExportablePlugin {
    static var pluginName: String { "lists-prepare-only" }
    static var pluginVersion: String { "1.0.0" }
    static var pluginSummary: String { "Records its hooks (test)" }
    static var implementedHooks: Set<InterceptorHook> { [.prepare] }
    let log: LockedCounter

    init(configuration: PluginConfiguration, host: any HostServices) throws { log = LockedCounter() }
    init(log: LockedCounter) { self.log = log }

    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        log.append("prepare")
        return .proceed
    }
    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        // Not called by the probe: it is not `prepare`'s fault that `willSend` goes unlisted.
        if context.requestID != 0 { log.append("willSend") }
    }
}

@Suite("ABI 1.1: declared hooks of plugins compiled in")
struct CompiledInActiveHooksTests {
    /// Without declared active hooks, a plugin compiled in is called for the hooks its type
    /// implements, as a loaded one's descriptor exports them (the SDK's defaults are not called);
    /// a hook it implements but does not list still runs in process.
    @Test func theChainCallsTheHooksACompiledInPluginImplements() async throws {
        let services = PluginServices()
        let contrib: [(any ExportablePlugin, Set<InterceptorHook>)] = [
            (
                try ActivityPlugin(configuration: PluginConfiguration(plugin: "activity", values: [:]), host: services.hostServices(for: "activity")),
                [.willSend, .didReceive]
            ),
            (PrepareOnly(log: LockedCounter()), [.prepare]),
            (ListsPrepareOnly(log: LockedCounter()), [.prepare, .willSend]),
        ]
        for (plugin, hooks) in contrib { #expect(InterceptorChain.hooks(of: plugin) == hooks, "\(plugin.name)") }
        let log = LockedCounter()
        let provider = Provider<Bin>(stubClosure: Provider<Bin>.immediatelyStub(_:), interceptors: [ListsPrepareOnly(log: log)], services: services)
        _ = try await provider.request(try Bin("get")).value
        #expect(log.log == ["prepare", "willSend"])
    }

    @Test func theChainCallsOnlyTheHooksACompiledInPluginDeclares() async throws {
        let log = LockedCounter()
        let provider = Provider<Bin>(stubClosure: Provider<Bin>.immediatelyStub(_:), interceptors: [PrepareOnly(log: log)])
        _ = try await provider.request(try Bin("get")).value
        #expect(log.log == ["prepare"])
    }
}
