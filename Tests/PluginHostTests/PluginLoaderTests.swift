import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

@Suite("Plugins loaded from shared libraries")
struct PluginLoaderTests {
    @Test func requestSideInManifestOrderResponseSideReversed() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for product in ["AlphaTestPlugin", "BetaTestPlugin", "GammaTestPlugin"] { try f.bundle(product) }
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "alpha"], ["name": "beta"], ["name": "gamma"]]))
        let response = try await provider.request(try Bin("anything")).value
        #expect(try echo(response).header("X-Order") == "alpha,beta,gamma")
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "gamma,beta,alpha")
        #expect(provider.interceptors.map(\.name) == ["alpha", "beta", "gamma"])
    }

    @Test func loadedAndInProcessInterceptorsMix() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        try f.bundle("BetaTestPlugin")
        let log = LockedCounter()
        let provider = try Provider<Bin>(
            manifest: try f.manifest([["name": "alpha"], ["name": "beta"]]),
            before: [Recorder("first", log: log)], after: [Recorder("last", log: log)])
        let response = try await provider.request(try Bin("anything")).value
        #expect(try echo(response).header("X-Order") == "first,alpha,beta,last")
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "last,beta,alpha,first")
    }

    /// An app that wraps a loaded plugin in an interceptor of its own and hands it a response of
    /// its own making (a `ResponseBackend` of its own) gets a refusal naming why, as for such a
    /// request: the plugin read it as status 0 without fields, and its edit went nowhere.
    @Test func aResponseTheHostDidNotMakeIsRefusedByName() throws {
        final class AppResponse: ResponseBackend {
            var statusCode = 203
            var headers = [HTTPHeader(name: "X-Response-Order", value: "app")]
            var body: [UInt8] = Array("kept".utf8)
            func setStatusCode(_ code: Int) throws { statusCode = code }
            func header(named name: String, index: Int) -> String? {
                let values = headers.filter { $0.name.lowercased() == name.lowercased() }.map(\.value)
                return index < values.count ? values[index] : nil
            }
            func setHeader(named name: String, value: String?) throws {
                headers.removeAll { $0.name.lowercased() == name.lowercased() }
                if let value { headers.append(HTTPHeader(name: name, value: value)) }
            }
            func addHeader(named name: String, value: String) throws { headers.append(HTTPHeader(name: name, value: value)) }
            func setBody(_ body: [UInt8]) { self.body = body }
        }
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let plugins = try PluginLoader.load(manifest: try f.manifest([["name": "alpha"]]), services: PluginServices())
        let alpha = try #require(plugins.first)
        let context = InterceptorContext(
            target: TargetInfo(method: "GET", baseURL: "http://app.test", path: "/"), requestID: 1, attempt: 1,
            services: PluginServices().hostServices(for: "alpha"))
        let backend = AppResponse()
        for hook in [InterceptorHook.didReceive, .process] {
            let error = #expect(throws: InterceptorError.self) {
                if hook == .didReceive {
                    try alpha.didReceive(.response(InterceptorResponse(backend: backend)), context: context)
                } else {
                    _ = try alpha.process(.response(InterceptorResponse(backend: backend)), context: context)
                }
            }
            #expect(error == .failed("a loaded plugin can only work on responses made by the host"))
        }
        #expect(backend.statusCode == 203 && backend.headers == [HTTPHeader(name: "X-Response-Order", value: "app")])
        // A failure is the host's to describe whoever made it: the plugin's hook runs.
        #expect(throws: Never.self) {
            _ = try alpha.process(.failure(TransportFailure(kind: .timedOut, message: "app")), context: context)
        }
    }

    @Test func aManifestProviderTakesTheSameParametersAsTheMainOne() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let services = PluginServices()
        services.setValue("bad", forKey: "access_token")
        let refreshes = LockedCounter()
        services.registerRefresher(forKey: "access_token") { _ in "bad-\(refreshes.increment())" }
        let provider = try Provider<Bin>(
            manifest: try f.manifest([["name": "alpha"]]), before: [TokenInterceptor()],
            configuration: .ephemeral, services: services, maxInterceptorRetries: 0)
        #expect(provider.transport is URLSessionTransport)
        #expect(try await provider.request(try Bin("bearer")).value.statusCode == 401)
        #expect(refreshes.value == 0)
    }

    @Test func cPluginRunsNextToSwiftPlugins() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        try f.bundle("CPluginTestPlugin")
        try f.bundle("GammaTestPlugin")
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "alpha"], ["name": "cplugin"], ["name": "gamma"]]))
        let response = try await provider.request(try Bin("anything")).value
        #expect(try echo(response).header("X-Order") == "alpha,cplugin,gamma")
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "gamma,cplugin,alpha")
    }

    @Test func shortCircuitFromALoadedPlugin() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for product in ["AlphaTestPlugin", "BetaTestPlugin", "GammaTestPlugin"] { try f.bundle(product) }
        let transport = CountingTransport()
        let provider = try Provider<Bin>(
            manifest: try f.manifest([["name": "alpha"], ["name": "beta", "config": ["respond": 203]], ["name": "gamma"]]),
            transport: transport)
        let response = try await provider.request(try Bin("anything")).value
        #expect(transport.count == 0)
        #expect(response.statusCode == 203)
        #expect(String(decoding: response.data, as: UTF8.self) == "from beta")
        #expect(response.value(forHTTPHeaderField: "X-Responder") == "beta")
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "beta,alpha")
    }

    /// A loaded Swift plugin's answer the host refuses (a status outside 100...999, a field value
    /// with CR LF) fails the request with the error an interceptor compiled in gets (the messages
    /// of `TimeoutAndStatusTests.anAnswerThatIsNoValidResponseFailsTheRequest`): the SDK explains
    /// the host's refusal. Nothing of the refused answer reaches the app.
    @Test func aLoadedPluginsRefusedAnswerIsExplained() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        try f.bundle("BetaTestPlugin")
        let badValue = "invalid value for header \"X-Responder\": CR, LF and NUL are not allowed"
        let cases: [([String: Any], InterceptorHook, String)] = [
            (["respond": 200, "answerField": "a\r\nX-Evil: 1"], .prepare, badValue),
            (["replace": 42], .process, "invalid status code 42: must be within 100...999"),
            (["replace": 1000], .process, "invalid status code 1000: must be within 100...999"),
            (["replace": 200, "answerField": "a\nb"], .process, badValue),
        ]
        for (config, hook, why) in cases {
            let transport = CountingTransport()
            let provider = try Provider<Bin>(
                manifest: try f.manifest([["name": "alpha"], ["name": "beta", "config": config]]), transport: transport)
            let result = await provider.request(try Bin("anything")).result
            guard case .failure(.interceptor(let name, let failedHook, let message)) = result else {
                Issue.record("\(config) was accepted: \(result)")
                continue
            }
            #expect(name == "beta", "\(config)")
            #expect(failedHook == hook, "\(config)")
            #expect(message == why, "\(config)")
            #expect(transport.count == (hook == .prepare ? 0 : 1), "\(config)")
        }
        // A valid replacement goes through, with alpha's process after it.
        let transport = CountingTransport()
        let provider = try Provider<Bin>(
            manifest: try f.manifest([["name": "alpha"], ["name": "beta", "config": ["replace": 203]]]), transport: transport)
        let response = try await provider.request(try Bin("anything")).value
        #expect(transport.count == 1)
        #expect(response.statusCode == 203)
        #expect(String(decoding: response.data, as: UTF8.self) == "from beta")
        #expect(response.value(forHTTPHeaderField: "X-Responder") == "beta")
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "alpha")
    }

    @Test(arguments: [InterceptorHook.prepare, .willSend, .didReceive, .process])
    func loadedPluginThrowingFailsOnlyThatRequest(hook: InterceptorHook) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        try f.bundle("BetaTestPlugin")
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "alpha"], ["name": "beta", "config": ["throwIn": hook.rawValue]]]))
        let result = await provider.request(try Bin("get")).result
        guard case .failure(.interceptor(let name, let failedHook, let message)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(name == "beta")
        #expect(failedHook == hook)
        #expect(message == "boom in \(hook.rawValue)")
    }

    @Test func eventsContextAndOptionsCrossTheABI() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin", defaultConfig: ["event": "sending"])
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "alpha"]]))
        let events = LockedCounter()
        let subscription = provider.services.subscribe {
            events.append("\($0.plugin) \($0.name) \($0.fields["order"] ?? "") \($0.fields["option"] ?? "")")
        }
        defer { subscription.cancel() }
        _ = try await provider.request(try Bin("get", options: ["tag": "blue"])).value
        #expect(events.log == ["alpha sending alpha blue"])
        // A plugin reuses the target it decoded last only while the host's bytes are the same:
        // each request below sees its own options (the same again, another of the same length,
        // none, an extra one).
        for options in [["tag": "blue"], ["tag": "bloo"], [:], ["tag": "red", "z": "1"], ["tag": "blue"]] {
            _ = try await provider.request(try Bin("get", options: options)).value
        }
        #expect(
            events.log.dropFirst() == [
                "alpha sending alpha blue", "alpha sending alpha bloo", "alpha sending alpha ", "alpha sending alpha red", "alpha sending alpha blue",
            ])
    }

    /// Wraps an interceptor, changing the context it hands on.
    struct Retagging: Interceptor {
        let inner: any Interceptor
        var name: String { "retagging" }
        func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
            var changed = context
            changed.target.pluginOptions["tag"] = "wrapped"
            changed.target.path = "rewritten"
            changed.attempt = context.attempt + 10
            try inner.willSend(request, context: changed)
        }
    }

    /// A loaded plugin called by an interceptor of the app's with a context it changed sees the
    /// context as changed: the chain's C view, which the context carries, is for the context as
    /// the chain made it (the plugin saw the original target, number and attempt).
    @Test func aWrappedPluginSeesTheContextItIsHanded() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin", defaultConfig: ["event": "sending"])
        try f.bundle("BetaTestPlugin")
        let services = PluginServices()
        let loaded = try PluginLoader.load(manifest: try f.manifest([["name": "alpha"], ["name": "beta"]]), services: services)
        let alpha = try #require(loaded.first { $0.name == "alpha" })
        let beta = try #require(loaded.first { $0.name == "beta" })
        let provider = Provider<Bin>(interceptors: [beta, Retagging(inner: alpha)], services: services)
        let events = Locked<[[String: String]]>([])
        let subscription = services.subscribe { event in events.withLock { $0.append(event.fields) } }
        defer { subscription.cancel() }
        for _ in 0..<2 {
            let response = try await provider.request(try Bin("get", options: ["tag": "given"])).value
            #expect(response.statusCode == 200)
        }
        let seen = events.withLock { $0 }
        #expect(seen.map { $0["option"] ?? "?" } == ["wrapped", "wrapped"])
        #expect(seen.map { $0["path"] ?? "?" } == ["rewritten", "rewritten"])
        #expect(seen.map { $0["attempt"] ?? "?" } == ["11", "11"])
    }

    @Test func aReusedTargetCarriesEachRequestsOwnNumberAndPath() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin", defaultConfig: ["event": "sending"])
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "alpha"]]))
        let events = Locked<[[String: String]]>([])
        let subscription = provider.services.subscribe { event in events.withLock { $0.append(event.fields) } }
        defer { subscription.cancel() }
        // The same target three times (the plugin's last context, with a new request number),
        // then another path, then options given in another order (the host lays them out sorted).
        let targets = [
            try Bin("get", options: ["tag": "a", "z": "1"]), try Bin("get", options: ["tag": "a", "z": "1"]),
            try Bin("get", options: ["tag": "a", "z": "1"]), try Bin("anything", options: ["tag": "a", "z": "1"]),
            try Bin("anything", options: ["z": "1", "tag": "a"]),
        ]
        var numbers: [UInt64] = []
        for target in targets {
            let response = try await provider.request(target).value
            #expect(response.statusCode == 200)
            numbers.append(try #require(events.withLock { $0.last.flatMap { $0["request"] }.flatMap(UInt64.init) }))
        }
        let seen = events.withLock { $0 }
        #expect(seen.map { $0["path"] ?? "?" } == ["get", "get", "get", "anything", "anything"])
        #expect(seen.map { $0["attempt"] ?? "?" } == ["1", "1", "1", "1", "1"])
        #expect(seen.map { $0["option"] ?? "?" } == ["a", "a", "a", "a", "a"])
        #expect(Set(numbers).count == 5)
        #expect(numbers == numbers.sorted())
    }

    @Test func fiveHundredConcurrentRequestsCompleteExactlyOnce() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for product in ["AlphaTestPlugin", "CPluginTestPlugin", "GammaTestPlugin"] { try f.bundle(product) }
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "alpha"], ["name": "cplugin"], ["name": "gamma"]]))
        let completions = LockedCounter()
        let target = try Bin("get")
        let outcomes = await withTaskGroup(of: (Int, Int).self) { group in
            for index in 0..<500 {
                group.addTask {
                    let response = await provider.request(target).result
                    completions.append("\(index)")
                    return (index, (try? response.get().value(forHTTPHeaderField: "X-Response-Order")) == "gamma,cplugin,alpha" ? 1 : 0)
                }
            }
            return await group.reduce(into: [Int: Int]()) { $0[$1.0, default: 0] += $1.1 }
        }
        #expect(completions.log.count == 500)
        #expect(Set(completions.log).count == 500)
        #expect(outcomes.count == 500)
        #expect(outcomes.values.allSatisfy { $0 == 1 })
    }

    @Test func aLibraryLoadedTwiceIsOpenedOnce() throws {
        let path = try PluginFixtures.library("GammaTestPlugin")
        let first = try PluginLibrary.open(path: path)
        let second = try PluginLibrary.open(path: path)
        #expect(first === second)
        #expect(first.info.name == "gamma")
        #expect(first.info.hooks == [.prepare, .willSend, .didReceive, .process])
        #expect(first.info.abiMajor == 1)
    }

    @Test func disabledPluginsAreListedButNotLoaded() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let url = try f.manifest([["name": "alpha"], ["name": "absent", "enabled": false]])
        let manifest = try PluginManifest.read(url)
        #expect(manifest.entries.map(\.name) == ["alpha", "absent"])
        #expect(manifest.entries.map(\.enabled) == [true, false])
        let plugins = try PluginLoader.load(manifest, services: PluginServices())
        #expect(plugins.map(\.name) == ["alpha"])
    }

    @Test func manifestConfigMergesOverBundleDefaults() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin", defaultConfig: ["respond": 299, "event": "x"])
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "alpha", "config": ["respond": 202]]]))
        #expect(try await provider.request(try Bin("get")).value.statusCode == 202)
    }

    @Test func bundleCommandRefusesALibraryWithoutDescriptor() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let error = loadError { try f.bundle("NoEntryTestPlugin") }
        #expect(error?.kind == .missingEntrySymbol)
        #expect(error?.reason.hasPrefix("no pluginhost_plugin_v1 symbol:") == true)
    }
}
