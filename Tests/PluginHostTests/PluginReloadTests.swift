import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `Provider.reloadPlugins()`: all or nothing, generations never mixed, old instances released.
@Suite("live reload of the manifest", .serialized)
struct PluginReloadTests {
    /// A manifest with the `generation` plugin configured as `generation`.
    func writeManifest(_ f: PluginFixtures, generation: Int, extra: [String: Any] = [:], file: String = "manifest.json") throws -> URL {
        var config: [String: Any] = ["generation": generation]
        for (key, value) in extra { config[key] = value }
        return try f.manifest([["name": "generation", "config": config]], file: file)
    }

    /// The instance stamps of one exchange: what the request carried (as httpbin echoes it) and
    /// what the response side stamped.
    func stamps(_ response: Response) throws -> (request: String?, response: String?) {
        let json = try response.mapJSON()
        return (json["headers"]?["X-Instance"]?.stringValue, response.value(forHTTPHeaderField: "X-Instance"))
    }

    /// Instances of the fixture plugin alive now, as the next response reports them.
    func liveInstances(_ provider: Provider<Bin>) async throws -> Int {
        let response = try await provider.request(try Bin("get")).value
        return Int(response.value(forHTTPHeaderField: "X-Live-Instances") ?? "") ?? -1
    }

    @Test func sixtyFourWayLoadWhileReloadingFiftyTimes() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let manifest = try writeManifest(f, generation: 1)
        let provider = try Provider<Bin>(manifest: manifest)
        let reloadsDone = Locked(false)
        let reports = Locked([PluginReloadReport]())

        // 64 workers send until the reloads are over (each at least 3, at most 400 requests).
        let outcomes = await withTaskGroup(of: [(Int, Result<Response, NetworkError>)].self) { group in
            for worker in 0..<64 {
                group.addTask {
                    var results: [(Int, Result<Response, NetworkError>)] = []
                    var sent = 0
                    while sent < 400 && (sent < 3 || !reloadsDone.withLock({ $0 })) {
                        let index = worker * 1000 + sent
                        let target = try? Bin("anything/\(index)")
                        if let target { results.append((index, await provider.request(target).result)) }
                        sent += 1
                    }
                    return results
                }
            }
            group.addTask {
                for reload in 1...50 {
                    do {
                        _ = try writeManifest(f, generation: reload % 2 == 1 ? 2 : 1)
                        let report = try provider.reloadPlugins()
                        reports.withLock { $0.append(report) }
                    } catch {
                        Issue.record("reload \(reload) failed: \(error)")
                    }
                    try? await Task.sleep(nanoseconds: 10_000_000)
                }
                reloadsDone.withLock { $0 = true }
                return []
            }
            var all: [(Int, Result<Response, NetworkError>)] = []
            for await part in group { all += part }
            return all
        }

        #expect(reports.withLock { $0.count } == 50)
        #expect(reports.withLock { $0.map(\.generation) } == Array(2...51))
        #expect(reports.withLock { $0.allSatisfy { $0.reconfigured == ["generation"] && $0.added.isEmpty && $0.upgraded.isEmpty } })
        #expect(provider.pluginGeneration == 51)
        // Nothing lost or duplicated: every index answered once, by the request it was sent for.
        #expect(Set(outcomes.map(\.0)).count == outcomes.count)
        var generationsSeen: Set<String> = []
        for (index, result) in outcomes {
            guard case .success(let response) = result else {
                Issue.record("request \(index) failed: \(result)")
                continue
            }
            #expect(response.statusCode == 200)
            let json = try response.mapJSON()
            #expect(json["url"]?.stringValue?.hasSuffix("/anything/\(index)") == true)
            // One instance throughout: the one that stamped the request stamped the response.
            let (sent, received) = try stamps(response)
            #expect(sent != nil && sent == received, "request \(index): sent \(sent ?? "nil"), response \(received ?? "nil")")
            if let sent { generationsSeen.insert(String(sent.prefix { $0 != "-" })) }
        }
        #expect(generationsSeen == ["g1", "g2"])
        // The old generations' instances go when their last request ends: one chain's worth is left.
        var live = -1
        for _ in 0..<100 {
            live = try await liveInstances(provider)
            if live == 1 { break }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        #expect(live == 1)
    }

    @Test func aFailedReloadKeepsTheRunningChain() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.bundle("GenerationTestPlugin")
        let manifest = try writeManifest(f, generation: 1)
        let provider = try Provider<Bin>(manifest: manifest)
        let failures = Locked([String]())
        let subscription = provider.services.subscribe { event in
            if event.name == "plugins.reload-failed" { failures.withLock { $0.append(event.fields["error"] ?? "") } }
        }
        defer { subscription.cancel() }
        func stillServingGenerationOne() async throws {
            let response = try await provider.request(try Bin("anything")).value
            let (sent, received) = try stamps(response)
            #expect(sent?.hasPrefix("g1-") == true)
            #expect(sent == received)
            #expect(provider.pluginGeneration == 1)
        }

        // 1. A broken manifest.
        _ = try f.manifest(raw: Data("{\"plugins\": [".utf8))
        let broken = loadError { _ = try provider.reloadPlugins() }
        #expect(broken?.kind == .notJSON)
        #expect(broken?.file == manifest.path)
        try await stillServingGenerationOne()

        // 2. A refused configuration: no instance of the new generation survives.
        _ = try writeManifest(f, generation: 2, extra: ["refuse": true])
        let livesBefore = try await liveInstances(provider)
        let refused = loadError { _ = try provider.reloadPlugins() }
        #expect(refused?.kind == .createFailed)
        #expect(refused?.file == manifest.path)
        #expect(refused?.jsonPath == "plugins[0].config")
        #expect(refused?.plugin == "generation")
        #expect(refused?.reason == "generation: refuse is true: this configuration is refused")
        try await stillServingGenerationOne()
        #expect(try await liveInstances(provider) == livesBefore)

        // 3. A tampered library: its digest no longer matches plugin.json.
        _ = try writeManifest(f, generation: 2)
        let library = try #require(
            try FileManager.default.contentsOfDirectory(atPath: bundle).first { $0.hasSuffix(".so") || $0.hasSuffix(".dylib") })
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: bundle + "/" + library))
        handle.seekToEndOfFile()
        handle.write(Data([0]))
        try handle.close()
        let tampered = loadError { _ = try provider.reloadPlugins() }
        #expect(tampered?.kind == .digestMismatch)
        #expect(tampered?.file == bundle + "/" + library)
        #expect(tampered?.reason.hasPrefix("sha256 mismatch: the file is ") == true)
        try await stillServingGenerationOne()

        #expect(failures.withLock { $0 } == [broken, refused, tampered].map { $0?.description ?? "" })
    }

    @Test func theReportSaysWhatChangedAndSubscribersHearIt() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for product in ["AlphaTestPlugin", "BetaTestPlugin", "GammaTestPlugin", "CPluginTestPlugin"] { try f.bundle(product) }
        let provider = try Provider<Bin>(
            manifest: try f.manifest([["name": "alpha"], ["name": "beta"], ["name": "cplugin"], ["name": "gamma", "enabled": false]]))
        let events = Locked([PluginEvent]())
        let subscription = provider.services.subscribe { event in
            if event.name == "plugins.reloaded" { events.withLock { $0.append(event) } }
        }
        defer { subscription.cancel() }

        let same = try provider.reloadPlugins()
        #expect(same.description == "generation 2: no change")
        #expect(!same.changed)

        _ = try f.manifest([["name": "beta"], ["name": "alpha", "config": ["event": "e"]], ["name": "cplugin"], ["name": "gamma"]])
        let changed = try provider.reloadPlugins()
        #expect(changed.added == ["gamma"])
        #expect(changed.removed == [])
        #expect(changed.reordered)
        #expect(changed.order == ["beta", "alpha", "cplugin", "gamma"])
        #expect(changed.reconfigured == ["alpha"])
        #expect(changed.description == "generation 3: added gamma; reordered (beta, alpha, cplugin, gamma); reconfigured alpha")
        #expect(provider.interceptors.map(\.name) == ["beta", "alpha", "cplugin", "gamma"])

        // A rebuilt cplugin (version 1.0.0 → 1.0.1) dropped into its bundle: loaded beside the old one.
        let bundle = f.plugins + "/cplugin.plugin"
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: bundle + "/plugin.json"))) as? [String: Any])
        let libraryPath = bundle + "/" + (json["library"] as? String ?? "")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: libraryPath))
        let marker = Data("1.0.0\0".utf8)
        let found = try #require(bytes.range(of: marker))
        #expect(bytes.range(of: marker, in: found.upperBound..<bytes.endIndex) == nil, "the version string is unique in the library")
        bytes.replaceSubrange(found, with: Data("1.0.1\0".utf8))
        try bytes.write(to: URL(fileURLWithPath: libraryPath))
        var upgradedJSON = json
        upgradedJSON["sha256"] = SHA256.hex(SHA256.hash([UInt8](bytes)))
        upgradedJSON["version"] = "1.0.1"
        try JSONSerialization.data(withJSONObject: upgradedJSON, options: [.sortedKeys]).write(to: URL(fileURLWithPath: bundle + "/plugin.json"))
        _ = try f.manifest([["name": "beta"], ["name": "cplugin"]])
        let upgraded = try provider.reloadPlugins()
        #expect(upgraded.removed == ["alpha", "gamma"])
        #expect(upgraded.upgraded.map { "\($0.name) \($0.from) → \($0.to)" } == ["cplugin 1.0.0 → 1.0.1"])
        #expect(upgraded.upgraded.first?.toSHA256 == SHA256.hex(SHA256.hash([UInt8](bytes))))
        #expect(!upgraded.reordered)
        let response = try await provider.request(try Bin("anything")).value
        #expect(try response.mapJSON()["headers"]?["X-Order"]?.stringValue == "beta,cplugin")
        let cplugin = try #require(provider.interceptors.last as? LoadedPlugin)
        #expect(cplugin.library.info.version == "1.0.1")

        let received = events.withLock { $0 }
        #expect(received.map { $0.fields["generation"] } == ["2", "3", "4"])
        #expect(received.allSatisfy { $0.plugin == "pluginhost" })
        #expect(received[1].fields["added"] == "gamma")
        #expect(received[1].fields["reconfigured"] == "alpha")
        #expect(received[1].fields["reordered"] == "true")
        #expect(received[2].fields["upgraded"] == "cplugin 1.0.0→1.0.1")
        #expect(received[2].fields["removed"] == "alpha,gamma")
    }

    /// `retry(_:)` sends again on the chain of its first attempt, even when a reload happened in between.
    @Test func pipelineRetriesStayOnTheirGeneration() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let provider = try Provider<Bin>(manifest: try writeManifest(f, generation: 1))
        let retries = LockedCounter()
        let policy = RetryPolicy(retryLimit: 2, exponentialBackoffScale: 0.001) { _ in
            retries.increment()
            do {
                _ = try writeManifest(f, generation: 2)
                try provider.reloadPlugins()
            } catch {
                Issue.record("reload failed: \(error)")
            }
        }
        let response = try await provider.request(try Bin("status/503")).retry(policy).value
        #expect(retries.value == 2)
        #expect(provider.pluginGeneration == 3)
        #expect(response.statusCode == 503)
        #expect(response.value(forHTTPHeaderField: "X-Instance")?.hasPrefix("g1-") == true)
        #expect(response.request?.value(forHTTPHeaderField: "X-Instance") == response.value(forHTTPHeaderField: "X-Instance"))
        // A new consumption starts on the new generation.
        let next = try await provider.request(try Bin("status/200")).value
        #expect(next.value(forHTTPHeaderField: "X-Instance")?.hasPrefix("g2-") == true)
    }

    /// A request started (`start`, `events()`) from within a retried consumption is a caller of its
    /// own: it runs on the provider's chain of when it starts, not on the one the retry pinned.
    @Test func aRequestStartedWithinARetryTakesTheNewGeneration() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let provider = try Provider<Bin>(manifest: try writeManifest(f, generation: 1))
        let started = LockedBox<String?>(nil)
        let streamed = LockedBox<AsyncThrowingStream<PipelineEvent<Response>, any Error>?>(nil)
        let policy = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.001) { _ in
            do {
                _ = try writeManifest(f, generation: 2)
                try provider.reloadPlugins()
                _ = provider.request(try Bin("status/200")).start { result in
                    started.set((try? result.get())?.value(forHTTPHeaderField: "X-Instance") ?? "failed: \(result)")
                }
                streamed.set(provider.request(try Bin("status/200")).events())
            } catch {
                Issue.record("reload or start failed: \(error)")
            }
        }
        let retried = try await provider.request(try Bin("status/503")).retry(policy).value
        #expect(retried.value(forHTTPHeaderField: "X-Instance")?.hasPrefix("g1-") == true)
        #expect(await eventually(60) { started.get() != nil }, "the started request did not end")
        #expect(started.get()?.hasPrefix("g2-") == true, "\(String(describing: started.get()))")
        var last: Response?
        for try await event in try #require(streamed.get()) {
            if case .completed(let response) = event { last = response }
        }
        #expect(last?.value(forHTTPHeaderField: "X-Instance")?.hasPrefix("g2-") == true)
    }

    /// A `Task {}` started within a retried consumption inherits its pin (task-locals pass to
    /// unstructured tasks): a request it makes once the consumption has returned runs on the
    /// provider's chain of that time, not on the one the retry had pinned (it stayed on it for good).
    @Test func aTaskStartedWithinARetryTakesTheNewGenerationOnceTheRetryEnded() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let provider = try Provider<Bin>(manifest: try writeManifest(f, generation: 1))
        let retryEnded = LockedBox(false)
        let later = LockedBox<String?>(nil)
        let target = try Bin("status/200")
        let policy = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 0.001) { _ in
            do {
                _ = try writeManifest(f, generation: 2)
                try provider.reloadPlugins()
            } catch {
                Issue.record("reload failed: \(error)")
            }
            Task {
                _ = await eventually(60) { retryEnded.get() }
                let result = await provider.request(target).result
                later.set((try? result.get())?.value(forHTTPHeaderField: "X-Instance") ?? "failed: \(result)")
            }
        }
        let retried = try await provider.request(try Bin("status/503")).retry(policy).value
        #expect(retried.value(forHTTPHeaderField: "X-Instance")?.hasPrefix("g1-") == true)
        retryEnded.set(true)
        #expect(await eventually(60) { later.get() != nil }, "the task's request did not end")
        #expect(later.get()?.hasPrefix("g2-") == true, "\(String(describing: later.get()))")
    }

    /// A retried consumption started within another (in a `Task {}`), that outlives it, stays on
    /// the chain it began with: a reload between its attempts after the other ended mixed two
    /// generations in it (it had taken the other's pin, which ended with it).
    @Test func aNestedRetryThatOutlivesTheOtherStaysOnItsGeneration() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let providerBox = LockedBox<Provider<Bin>?>(nil)
        let firstAttemptDone = LockedBox(false)
        let innerResult = LockedBox<String?>(nil)
        let innerStarted = LockedBox(false)
        let inner = try Bin("status/503")
        let innerPolicy = RetryPolicy(retryLimit: 1, exponentialBackoffScale: 3) { _ in firstAttemptDone.set(true) }
        let provider = try Provider<Bin>(
            manifest: try writeManifest(f, generation: 1),
            requestClosure: { _, request in
                guard request.url?.path == "/status/200", let provider = providerBox.get(), !innerStarted.get() else { return request }
                innerStarted.set(true)
                Task {
                    let result = await provider.request(inner).retry(innerPolicy).result
                    innerResult.set((try? result.get())?.value(forHTTPHeaderField: "X-Instance") ?? "failed: \(result)")
                }
                // The outer consumption returns once the inner one's first attempt ended within it.
                _ = await eventually(20) { firstAttemptDone.get() }
                return request
            })
        providerBox.set(provider)
        let outer = try await provider.request(try Bin("status/200")).retry(RetryPolicy(retryLimit: 1)).value
        #expect(outer.value(forHTTPHeaderField: "X-Instance")?.hasPrefix("g1-") == true)
        // The outer one ended; the inner one waits out its 3 s backoff. Reloaded meanwhile:
        _ = try writeManifest(f, generation: 2)
        try provider.reloadPlugins()
        #expect(await eventually(30) { innerResult.get() != nil })
        #expect(innerResult.get()?.hasPrefix("g1-") == true, "\(String(describing: innerResult.get()))")
        // A request of its own takes the new generation.
        #expect(try await provider.request(try Bin("status/200")).value.value(forHTTPHeaderField: "X-Instance")?.hasPrefix("g2-") == true)
    }

    /// A reload asked for from within a reload of the same provider (here by a subscriber that
    /// the new plugin's `create` reached) is refused saying why: it waited for itself, for good.
    @Test func aReloadFromWithinAReloadIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let manifest = try writeManifest(f, generation: 1)
        let provider = try Provider<Bin>(manifest: manifest)
        let inner = Locked([String]())
        let subscription = provider.services.subscribe { event in
            guard event.name == "created" else { return }
            do throws(PluginLoadError) {
                _ = try provider.reloadPlugins()
                inner.withLock { $0.append("reloaded") }
            } catch {
                inner.withLock { $0.append("\(error.kind) \(error.file): \(error.reason)") }
            }
        }
        defer { subscription.cancel() }
        _ = try writeManifest(f, generation: 2, extra: ["announce": true])
        let report = try provider.reloadPlugins()
        #expect(report.generation == 2)
        #expect(
            inner.withLock { $0 } == [
                "reloadInProgress \(manifest.path): reloadPlugins() was called from within a reload of this provider (a plugin's create, "
                    + "or a log handler or subscriber it reached); reloads are serialized: reload after this one returns"
            ])
        #expect(provider.pluginGeneration == 2)
    }

    /// A `Task {}` started within a reload (by a subscriber the new plugin's `create` reached)
    /// inherits the reload's scope; once that reload has returned, its own reload runs. One that
    /// reloads at once, on its own thread, waits for the reload and reloads after it.
    @Test(arguments: [true, false]) func aTaskStartedDuringAReloadReloadsAfterIt(waits: Bool) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let manifest = try writeManifest(f, generation: 1)
        let provider = try Provider<Bin>(manifest: manifest)
        let outerDone = Locked(false)
        let inner = Locked<String?>(nil)
        let started = Locked(false)
        let subscription = provider.services.subscribe { event in
            // The first `created` only (the inner reload's plugin announces itself too).
            guard event.name == "created" else { return }
            let first = started.withLock { started in
                defer { started = true }
                return !started
            }
            guard first else { return }
            Task {
                if waits { for _ in 0..<200 where !outerDone.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(10)) } }
                do throws(PluginLoadError) {
                    let report = try provider.reloadPlugins()
                    inner.withLock { $0 = "generation \(report.generation)" }
                } catch {
                    inner.withLock { $0 = "\(error.kind)" }
                }
            }
        }
        defer { subscription.cancel() }
        _ = try writeManifest(f, generation: 2, extra: ["announce": true])
        #expect(try provider.reloadPlugins().generation == 2)
        outerDone.withLock { $0 = true }
        #expect(await eventually(10) { inner.withLock { $0 } != nil })
        #expect(inner.withLock { $0 } == "generation 3")
        #expect(provider.pluginGeneration == 3)
    }

    /// A plugin's host services kept past its instance (by a thread it started as it was
    /// destroyed) reach no host: the host freed the table they went through when `destroy`
    /// returned. Values are nil, events and log lines go nowhere, clocks and random bytes still work.
    @Test func hostServicesKeptPastDestroyReachNoHost() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let report = f.root + "/late.txt"
        let manifest = try writeManifest(f, generation: 1, extra: ["lateReport": report])
        let services = PluginServices()
        services.setValue("v1", forKey: "generation-key")
        let lines = Locked([String]())
        services.setLogHandler { _, _, message in lines.withLock { $0.append(message) } }
        let events = Locked([String]())
        let subscription = services.subscribe { event in events.withLock { $0.append(event.name) } }
        defer { subscription.cancel() }
        do {
            let provider = try Provider<Bin>(manifest: manifest, services: services)
            let json = try await provider.request(try Bin("get")).value.mapJSON()
            #expect(json["headers"]?["X-Generation-Key"]?.stringValue == "v1")
        }
        // The provider, its chain and the plugin are gone: destroyed.
        #expect(await eventually(10) { FileManager.default.fileExists(atPath: report) })
        #expect(try String(contentsOfFile: report, encoding: .utf8) == "value=nil subscribers=false random=true clock=true")
        #expect(lines.withLock { $0 }.filter { $0.contains("late") } == [])
        #expect(!events.withLock { $0 }.contains("late"))
        #expect(services.value(forKey: "late") == nil)
    }

    /// A plugin's host call that leads to its own destroy on the same thread (its thread emits an
    /// event; the subscriber reloads, and the old instance goes at once) does not wait for
    /// itself: `destroy` waits for the other threads' calls only.
    @Test func aHostCallThatDestroysItsOwnInstanceReturns() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("GenerationTestPlugin")
        let manifest = try writeManifest(f, generation: 1, extra: ["tickAfter": 0.3])
        let provider = try Provider<Bin>(manifest: manifest)
        let livesBefore = try await liveInstances(provider)
        _ = try writeManifest(f, generation: 2)
        let reloaded = Locked<String?>(nil)
        let subscription = provider.services.subscribe { event in
            guard event.name == "tick" else { return }
            do throws(PluginLoadError) {
                let report = try provider.reloadPlugins()
                reloaded.withLock { $0 = "generation \(report.generation), from \(event.fields["generation"] ?? "?")" }
            } catch {
                reloaded.withLock { $0 = "\(error)" }
            }
        }
        defer { subscription.cancel() }
        #expect(await eventually(10) { reloaded.withLock { $0 } != nil })
        #expect(reloaded.withLock { $0 } == "generation 2, from 1")
        // The old instance went in the reload (the new one took its place).
        #expect(try await liveInstances(provider) == livesBefore)
    }

    @Test func aProviderWithoutAManifestHasNothingToReload() {
        let error = loadError { _ = try Provider<Bin>().reloadPlugins() }
        #expect(error?.kind == .notReloadable)
        #expect(error?.reason == "this provider was not created from a manifest (Provider(manifest:)); it has nothing to reload")
        // No file: the text starts with the reason (it read `: this provider …`).
        #expect(error?.description == "this provider was not created from a manifest (Provider(manifest:)); it has nothing to reload")
    }

    /// The same library bytes under another path (a bundle copied elsewhere) are not loaded twice.
    @Test func aLibraryWithTheSameDigestIsReused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let first = try PluginLibrary.open(path: try PluginFixtures.library("GammaTestPlugin"))
        let copy = f.root + "/libcopy.so"
        try FileManager.default.copyItem(atPath: first.path, toPath: copy)
        chmod(copy, 0o755)
        let second = try PluginLibrary.open(path: copy)
        #expect(second.path == copy)
        #expect(second.sha256 == first.sha256)
        #expect(second.info == first.info)
        #expect(second.hasSameImage(as: first))
    }
}
