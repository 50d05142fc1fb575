import AccessTokenPlugin
import ActivityPlugin
import CachePlugin
import CredentialsPlugin
// pluginhost-bench: the cost of the provider and its plugins beside the bare transport, in one run.
//
//   Tests/bench          (builds in release, installs nginx when missing, bundles the plugins, runs this)
//
// Every figure that matters is a ratio or a difference measured in the same run, with min / median /
// max over several rounds: the machine is shared and noisy, so absolute numbers do not carry across
// machines, ratios do.
import Dispatch
import Foundation
import LoggerPlugin
import PluginHost
import PluginSDK
import SignaturePlugin

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

struct Options {
    var rounds = 5
    var stubRequests = 20_000
    var httpRequests = 2_000
    var downloads = 20
    var cacheRequests = 20_000
    var rssRequests = 100_000
    var plugins = ""
    var noop = ""
    var nginx = "/usr/sbin/nginx"
    var wrk = "/usr/bin/wrk"
    var loadOnce: String?
    var profile: String?
    var profileHTTP: String?
    /// How many targets a `--profile` stub scenario's requests go to in turn (paths `items/0`, …),
    /// each request made anew; nil: one pipeline's request, again and again.
    var targets: Int?

    init(_ arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        func number(_ current: Int) -> Int { Int(iterator.next() ?? "") ?? current }
        while let argument = iterator.next() {
            switch argument {
            case "--rounds": rounds = max(1, number(rounds))
            case "--stub-requests": stubRequests = number(stubRequests)
            case "--http-requests": httpRequests = number(httpRequests)
            case "--downloads": downloads = number(downloads)
            case "--cache-requests": cacheRequests = number(cacheRequests)
            case "--rss-requests": rssRequests = number(rssRequests)
            case "--plugins": plugins = URL(fileURLWithPath: iterator.next() ?? "").standardizedFileURL.path
            case "--noop": noop = iterator.next() ?? ""
            case "--nginx": nginx = iterator.next() ?? nginx
            case "--wrk": wrk = iterator.next() ?? wrk
            case "--load-once": loadOnce = iterator.next()
            case "--profile": profile = iterator.next()
            case "--profile-http": profileHTTP = iterator.next()
            case "--targets":
                guard let count = Int(iterator.next() ?? ""), count >= 1 else { Self.usage("--targets needs a number of targets, 1 or more") }
                targets = count
            default: Self.usage("unknown argument \(argument)")
            }
        }
    }

    /// Prints `problem` and the usage, and exits with status 2.
    static func usage(_ problem: String) -> Never {
        FileHandle.standardError.write(
            Data(
                """
                error: \(problem)
                usage: pluginhost-bench --plugins DIR --noop LIBRARY [--nginx PATH] [--wrk PATH] [--rounds R] [--stub-requests N]
                                        [--http-requests N] [--downloads N] [--cache-requests N] [--rss-requests N]
                                        [--profile SCENARIO [--targets N]] [--profile-http SCENARIO]
                (Tests/bench builds, bundles and runs it; --targets: a chain scenario's requests to N paths in turn)\n
                """.utf8))
        exit(2)
    }
}

// MARK: Targets

struct BenchTarget: TargetType {
    let baseURL: URL
    let path: String
    var method: HTTPMethod { .get }
    var sampleResponse: EndpointSampleResponse { .networkResponseWithHeaders(200, ["Cache-Control": "no-store"], BenchTarget.body) }
    static let body = Data(#"{"id":1,"name":"pluginhost","ok":true,"n":42}"#.utf8)
    static let stub = BenchTarget(baseURL: URL(string: "http://127.0.0.1:9")!, path: "small.json")
}

/// Targets `items/0` … `items/<count - 1>` on the stub's base, taken in turn: with more than one,
/// each request goes to another target than the last one's (as an app's to `users/{id}` do).
final class TargetsInTurn {
    let targets: [BenchTarget]
    private var next = 0

    init(_ count: Int) {
        targets = (0..<max(1, count)).map { BenchTarget(baseURL: BenchTarget.stub.baseURL, path: "items/\($0)") }
    }

    /// The target after the last one taken.
    func take() -> BenchTarget {
        next = (next + 1) % targets.count
        return targets[next]
    }
}

/// A target answered from a stub with a fresh, cacheable response (for cache hits).
/// Its base URL is stored, as ``BenchTarget``'s is: a URL parsed on every access (several per
/// request) would be measured as part of the cache hit.
struct CacheableTarget: TargetType {
    let path: String
    var baseURL: URL { BenchTarget.stub.baseURL }
    var method: HTTPMethod { .get }
    var sampleResponse: EndpointSampleResponse { .networkResponseWithHeaders(200, ["Cache-Control": "max-age=86400"], BenchTarget.body) }
}

struct InProcessNoop: Interceptor {
    var name: String { "noop" }
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction { .proceed }
    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {}
    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {}
    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction { .proceed }
}

// MARK: Measuring

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// µs per request of `count` sequential consumptions of `body`.
func latencies(_ count: Int, _ body: () async -> Void) async -> [Double] {
    var samples: [Double] = []
    samples.reserveCapacity(count)
    for _ in 0..<count {
        let start = now()
        await body()
        samples.append(Double(now() - start) / 1000)
    }
    return samples
}

/// Requests per second of `total` requests run by `workers` concurrent loops.
func throughput(total: Int, workers: Int, _ body: @escaping @Sendable () async -> Void) async -> Double {
    let start = now()
    await withTaskGroup(of: Void.self) { group in
        for worker in 0..<workers {
            let share = total / workers + (worker < total % workers ? 1 : 0)
            group.addTask { for _ in 0..<share { await body() } }
        }
    }
    return Double(total) / (Double(now() - start) / 1e9)
}

func residentMiB() -> Double {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return .nan }
    let pages = Double(text.split(separator: " ")[1]) ?? .nan
    return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
}

/// Fetches with a bare CurlTransport, no provider.
struct RawCurl: Sendable {
    let transport: CurlTransport
    func get(_ url: URL) async -> Int {
        (try? await transport.send(TransportRequest(urlRequest: URLRequest(url: url))).data.count) ?? -1
    }
}

/// Requests per second `wrk` reaches against `url` with `connections` connections for 3 s.
func wrkRate(_ wrk: String, _ url: URL, threads: Int, connections: Int) throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: wrk)
    process.arguments = ["-t\(threads)", "-c\(connections)", "-d3s", url.absoluteString]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Requests/sec:") }),
        let value = Double(line.dropFirst("Requests/sec:".count).trimmingCharacters(in: .whitespaces))
    else { return .nan }
    return value
}

/// Fetches with a bare URLSession, the same configuration the provider's transport uses.
struct RawClient: Sendable {
    let session: URLSession
    func get(_ url: URL) async -> Int {
        await withCheckedContinuation { continuation in
            session.dataTask(with: url) { data, _, _ in continuation.resume(returning: data?.count ?? -1) }.resume()
        }
    }
}

/// Collects one figure per round and reports min / median / max.
final class Figures {
    private var values: [String: [Double]] = [:]
    private(set) var order: [String] = []
    func add(_ key: String, _ value: Double) {
        if values[key] == nil { order.append(key) }
        values[key, default: []].append(value)
    }
    func median(_ key: String) -> Double { percentile(values[key] ?? [], 0.5) }
    func summary(_ key: String) -> (Double, Double, Double) {
        let v = (values[key] ?? []).sorted()
        return (v.first ?? .nan, percentile(v, 0.5), v.last ?? .nan)
    }
}

func fmt(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }

// MARK: Plugins

/// The six contrib plugins from their bundles: cache configured to miss (responses are
/// `no-store`), logger `off`, signature on.
func manifestURL(_ directory: String) throws -> URL {
    let manifest = """
        {"pluginDirectories": ["\(directory)"], "plugins": [
          {"name": "activity"}, {"name": "access-token"},
          {"name": "credentials", "config": {"credentials": [{"host": "api.example.invalid", "user": "u", "password": "p"}]}},
          {"name": "cache"}, {"name": "signature", "config": {"scheme": "hmac-sha256"}},
          {"name": "logger", "config": {"level": "off"}}
        ]}
        """
    let url = URL(fileURLWithPath: NSTemporaryDirectory() + "pluginhost-bench-manifest-\(getpid()).json")
    try manifest.write(to: url, atomically: true, encoding: .utf8)
    return url
}

func services() -> PluginServices {
    let services = PluginServices()
    services.setValue("bench-token", forKey: "access_token")
    services.setValue("bench-secret", forKey: "signing_secret")
    services.setLogHandler(nil)
    return services
}

let options = Options(CommandLine.arguments)

if let manifest = options.loadOnce {
    // A child process: load the manifest once, print the milliseconds it took.
    let start = now()
    do {
        _ = try PluginLoader.load(manifest: URL(fileURLWithPath: manifest), services: PluginServices())
    } catch {
        FileHandle.standardError.write(Data("\(error)\n".utf8))
        exit(1)
    }
    print(fmt(Double(now() - start) / 1e6, 3))
    exit(0)
}

// MARK: Cache profiles (`--profile hit`, `disk-hit`, `disk-hit-alternating`, `full-miss`, `full-disk-miss`)

/// The cache plugin of the bench's bundles loaded alone, configured by `configuration` (given the
/// path of a fresh directory it may use), in a stub provider; and that directory.
func cacheProvider(_ configuration: (String) -> String) throws -> (provider: Provider<CacheableTarget>, directory: String) {
    let services = PluginServices()
    let library = try PluginLibrary.open(path: options.plugins + "/cache.plugin/libCachePlugin.so")
    let directory = NSTemporaryDirectory() + "pluginhost-bench-cache-\(UUID().uuidString)"
    let cache = try LoadedPlugin(library: library, configJSON: Data(configuration(directory).utf8), services: services)
    return (Provider<CacheableTarget>(stubClosure: { _ in .immediate }, interceptors: [cache], services: services), directory)
}

/// Scenario 5's disk cache, which `--profile disk-hit` runs too: no memory tier, every hit read from
/// the entry's file in `directory`.
func diskOnlyCache(_ directory: String) -> String { #"{"directory": "\#(directory)", "maxMemoryEntries": 0}"# }

/// Scenario 5's alternating disk cache, which `--profile disk-hit-alternating` runs too: one entry in
/// memory, so two targets in turn are each read from `directory`.
func oneEntryInMemoryCache(_ directory: String) -> String { #"{"directory": "\#(directory)", "maxMemoryEntries": 1}"# }

/// The samples of the round of least p50, of `--rounds` rounds of `--stub-requests` calls of
/// `request` (µs): the least disturbed round.
func leastRound(_ request: () async -> Void) async -> [Double] {
    var least: [Double] = []
    for _ in 1...options.rounds {
        let round = await latencies(options.stubRequests, request)
        if least.isEmpty || percentile(round, 0.5) < percentile(least, 0.5) { least = round }
    }
    return least
}

/// The least p50 of `--rounds` rounds of `--stub-requests` calls of `request`, in µs.
func leastP50(_ request: () async -> Void) async -> Double { percentile(await leastRound(request), 0.5) }

/// Prints a cache profile's figure and the last response's `X-Cache`, removes its directory (here:
/// `exit` runs no `defer`) and exits.
func endCacheProfile(least: Double, cached: String, directory: String) -> Never {
    print("\(options.profile ?? ""): least p50 of \(options.rounds) rounds \(fmt(least)) µs (last response: X-Cache \(cached))")
    try? FileManager.default.removeItem(atPath: directory)
    exit(0)
}

/// The whole benchmark, in a nonisolated function: closures formed here run on the global
/// executor, like an app's requests, instead of hopping to the main actor for every request.
func runBench(_ options: Options) async throws {
    guard !options.plugins.isEmpty, !options.noop.isEmpty else {
        FileHandle.standardError.write(Data("error: --plugins DIR and --noop LIBRARY are required; run Tests/bench\n".utf8))
        exit(2)
    }
    // `--targets` applies to one chain scenario (`--profile 0`, `loaded6`, `alone:cache`, …) only.
    if options.targets != nil,
        options.profile == nil
            || ["stub", "stub-alone", "hit", "disk-hit", "disk-hit-alternating", "full-miss", "full-disk-miss"].contains(options.profile!)
    {
        Options.usage("--targets applies to one chain scenario's --profile (0, noop1, noop6, inprocess6, loaded6, compiled6, alone:P, compiled:P)")
    }

    let manifest = try manifestURL(options.plugins)
    defer { try? FileManager.default.removeItem(at: manifest) }
    /// Ends the run early, removing the manifest (`exit` runs no `defer`).
    func end(_ code: Int32) -> Never {
        try? FileManager.default.removeItem(at: manifest)
        exit(code)
    }
    let loadedServices = services()
    let loaded6: [any Interceptor] = try PluginLoader.load(manifest: manifest, services: loadedServices)
    let noopLibrary = try PluginLibrary.open(path: options.noop)
    let noop6: [any Interceptor] = try (0..<6).map { _ in try LoadedPlugin(library: noopLibrary, configJSON: Data("{}".utf8), services: services()) }
    let inProcess6: [any Interceptor] = (0..<6).map { _ in InProcessNoop() }
    // The same six, compiled into this binary, with the configuration the manifest gives the loaded ones.
    let compiledServices = services()
    func configuration(_ plugin: String, _ values: [String: JSONValue] = [:]) -> PluginConfiguration {
        PluginConfiguration(plugin: plugin, values: values)
    }
    let compiled6: [any Interceptor] = [
        try ActivityPlugin(configuration: configuration("activity"), host: compiledServices.hostServices(for: "activity")),
        try AccessTokenPlugin(configuration: configuration("access-token"), host: compiledServices.hostServices(for: "access-token")),
        try CredentialsPlugin(
            configuration: configuration("credentials", ["credentials": [["host": "api.example.invalid", "user": "u", "password": "p"]]]),
            host: compiledServices.hostServices(for: "credentials")),
        try CachePlugin(configuration: configuration("cache"), host: compiledServices.hostServices(for: "cache")),
        try SignaturePlugin(
            configuration: configuration("signature", ["scheme": "hmac-sha256"]), host: compiledServices.hostServices(for: "signature")),
        try LoggerPlugin(configuration: configuration("logger", ["level": "off"]), host: compiledServices.hostServices(for: "logger")),
    ]

    let stubProvider = { (chain: [any Interceptor], services: PluginServices) in
        Provider<BenchTarget>(stubClosure: { _ in .immediate }, interceptors: chain, services: services)
    }

    if options.profile == "stub" || options.profile == "stub-alone" {
        // Scenario 1 only, its scenarios interleaved round after round (no servers): the quick
        // check of a change to the chain's cost, e.g. `--profile stub --rounds 5`.
        let stubFigures = Figures()
        // With `--profile stub-alone`, each contrib plugin alone too, loaded and compiled in (and one no-op plugin:
        // what any loaded plugin costs).
        let alone =
            options.profile == "stub-alone"
            ? [("noop1", [noop6[0]], PluginServices())] + loaded6.map { ("alone:" + $0.name, [$0], loadedServices) }
                + compiled6.map { ("compiled:" + $0.name, [$0], compiledServices) } : []
        let scenarios: [(String, [any Interceptor], PluginServices)] =
            [
                ("0", [], PluginServices()), ("inprocess6", inProcess6, PluginServices()), ("noop6", noop6, PluginServices()),
                ("loaded6", loaded6, loadedServices), ("compiled6", compiled6, compiledServices),
            ] + alone
        for _ in 1...options.rounds {
            for (key, chain, scenarioServices) in scenarios {
                let pipeline = stubProvider(chain, scenarioServices).request(.stub)
                let samples = await latencies(options.stubRequests) { _ = try? await pipeline.value }
                stubFigures.add(key, percentile(samples, 0.5))
            }
        }
        // The least p50 of the rounds as well: on a shared machine, the round least disturbed.
        let empty = stubFigures.median("0")
        let emptyLeast = stubFigures.summary("0").0
        for (key, _, _) in scenarios {
            let least = stubFigures.summary(key).0
            print(
                "\(key): p50 median \(fmt(stubFigures.median(key))) µs, \(fmt(stubFigures.median(key) / empty)) × the empty chain; "
                    + "least \(fmt(least)) µs, \(fmt(least / emptyLeast)) ×")
        }
        // abi_hook_ns as the full run reports it: the loaded no-op chain over the in-process one, per hook call.
        print("abi_hook_ns (least): \(fmt((stubFigures.summary("noop6").0 - stubFigures.summary("inprocess6").0) * 1000 / 24, 1))")
        end(0)
    }

    if ["hit", "disk-hit", "disk-hit-alternating"].contains(options.profile) {
        // Cache hits from memory or from disk (scenario 5), for a profiler. From disk: no memory
        // tier, one target (every read is from disk); alternating: a and b in turn through one
        // entry in memory, as this scenario measured before the store could go without memory.
        let profile = options.profile!
        let (provider, directory) = try cacheProvider {
            switch profile {
            case "disk-hit": return diskOnlyCache($0)
            case "disk-hit-alternating": return oneEntryInMemoryCache($0)
            default: return "{}"
            }
        }
        let (a, b) = (provider.request(CacheableTarget(path: "a")), provider.request(CacheableTarget(path: "b")))
        _ = try? await a.value
        _ = try? await b.value
        var flip = false
        let least = await leastP50 {
            flip.toggle()
            _ = try? await (profile == "disk-hit-alternating" && flip ? b : a).value
        }
        let cached = (try? await a.value)?.value(forHTTPHeaderField: "X-Cache") ?? "absent"
        endCacheProfile(least: least, cached: cached, directory: directory)
    }

    if options.profile == "full-miss" || options.profile == "full-disk-miss" {
        // Misses into a full cache, for a profiler: 512 URLs in turn through 256 entries in memory
        // (and, on disk, about 250 files in 64 KiB): every request stores and evicts.
        let (provider, directory) = try cacheProvider {
            options.profile == "full-disk-miss" ? #"{"directory": "\#($0)", "maxDiskBytes": 65536}"# : #"{"maxMemoryEntries": 256}"#
        }
        let targets = (0..<512).map { CacheableTarget(path: "k\($0)") }
        var next = 0
        var cached = "absent"
        let least = await leastP50 {
            next = (next + 1) % targets.count
            cached = (try? await provider.request(targets[next]).value)?.value(forHTTPHeaderField: "X-Cache") ?? "absent"
        }
        endCacheProfile(least: least, cached: cached, directory: directory)
    }

    if let profile = options.profile {
        // Only one stub scenario, for a profiler: `0`, `noop1`, `noop6`, `inprocess6`, `loaded6` or `compiled6`.
        // `alone:<plugin>`: that contrib plugin loaded alone; `compiled:<plugin>`: compiled in alone.
        let alone = profile.hasPrefix("alone:") ? loaded6.filter { "alone:" + $0.name == profile } : nil
        let compiledAlone = profile.hasPrefix("compiled:") ? compiled6.filter { "compiled:" + $0.name == profile } : nil
        let named: [String: [any Interceptor]] = [
            "loaded6": loaded6, "noop6": noop6, "noop1": [noop6[0]], "inprocess6": inProcess6, "compiled6": compiled6,
        ]
        let chain = alone ?? compiledAlone ?? named[profile] ?? []
        let provider = stubProvider(
            chain,
            profile == "loaded6" || alone != nil
                ? loadedServices : profile == "compiled6" || compiledAlone != nil ? compiledServices : PluginServices())
        let pipeline = provider.request(.stub)
        var samples: [Double]
        var check: Result<Response, NetworkError>
        if let count = options.targets {
            // Requests to `--targets` targets in turn: what a chain costs when the next request's
            // target is not the last one's. The least disturbed of `--rounds` rounds.
            let targets = TargetsInTurn(count)
            var last: Result<Response, NetworkError>?
            samples = await leastRound { last = await provider.request(targets.take()).result }
            check = last ?? .failure(.cancelled)
        } else {
            samples = await latencies(options.stubRequests) { _ = try? await pipeline.value }
            check = await pipeline.result
        }
        let signed = (try? check.get().request?.value(forHTTPHeaderField: "X-Signature")) ?? nil
        let cached = (try? check.get().value(forHTTPHeaderField: "X-Cache")) ?? nil
        let figures = options.targets.map { "\($0) targets in turn, the round of least p50 of \(options.rounds): " } ?? ""
        print(
            "\(profile): \(figures)p50 \(fmt(percentile(samples, 0.5))) µs  p99 \(fmt(percentile(samples, 0.99))) µs"
                + "  (last response: X-Signature \(signed == nil ? "absent" : "present"), X-Cache \(cached ?? "absent"), \(check))")
        end(0)
    }

    // Scenarios 1 and 5 (no servers, CPU only) run first, on a process that has not yet started
    // URLSession's threads or loaded nginx, in three short rounds per round asked for. A shared
    // machine's CPU runs in a fast and a slow state that last longer than a scenario (the same
    // scenario's p50 differs 1.5× between them): each figure of these scenarios is the least p50
    // of its rounds, the fast state, and each ratio is one of those over another.
    let figures = Figures()
    _ = await latencies(200) { _ = try? await stubProvider(loaded6, loadedServices).request(.stub).value }
    let stubRequests = max(1, options.stubRequests / 3)
    let pathTargets = TargetsInTurn(1000).targets
    for _ in 1...(options.rounds * 3) {
        // 1. Chain overhead on the stub transport: each request to one target, and (`stub_paths_…`)
        // each to another of 1,000 paths in turn: a target's URL, contexts and C layout made again,
        // and the plugins' work for a URL other than the last one's. One pipeline per target, made
        // before the timing, so that the difference is what a change of target costs.
        let one = [BenchTarget.stub]
        let stubScenarios: [(String, [any Interceptor], PluginServices, [BenchTarget])] = [
            ("stub_0", [], PluginServices(), one), ("stub_inprocess_noop6", inProcess6, PluginServices(), one),
            ("stub_noop6", noop6, PluginServices(), one), ("stub_loaded6", loaded6, loadedServices, one),
            ("stub_compiled6", compiled6, compiledServices, one), ("stub_paths_0", [], PluginServices(), pathTargets),
            ("stub_paths_compiled6", compiled6, compiledServices, pathTargets), ("stub_paths_loaded6", loaded6, loadedServices, pathTargets),
        ]
        for (key, chain, scenarioServices, targets) in stubScenarios {
            let provider = stubProvider(chain, scenarioServices)
            let pipelines = targets.map { provider.request($0) }
            if case .failure(let error) = await pipelines[0].result {
                print("warning: \(key) requests fail, the figure measures a failing chain: \(error)")
            }
            let samples: [Double]
            if pipelines.count == 1 {
                // One pipeline, held by the closure: taking it out of the list on every request
                // would add its copy to the figure.
                let pipeline = pipelines[0]
                samples = await latencies(stubRequests) { _ = try? await pipeline.value }
            } else {
                var next = 0
                samples = await latencies(stubRequests) {
                    next = (next + 1) % pipelines.count
                    _ = try? await pipelines[next].value
                }
            }
            figures.add(key + "_p50", percentile(samples, 0.5))
            figures.add(key + "_p99", percentile(samples, 0.99))
        }
        // Each contrib plugin alone, loaded and compiled in: what it costs over the empty chain,
        // and how much of that is the ABI's.
        for plugin in loaded6 {
            let compiled = compiled6.filter { $0.name == plugin.name }.map { ("stub_compiled_alone_", $0, compiledServices) }
            for (key, chain, scenarioServices) in [("stub_alone_", plugin, loadedServices)] + compiled {
                let pipeline = stubProvider([chain], scenarioServices).request(.stub)
                let samples = await latencies(stubRequests / 2) { _ = try? await pipeline.value }
                figures.add(key + "\(plugin.name)_p50", percentile(samples, 0.5))
            }
        }
        // The stub transport called directly with the same request: the floor under the empty chain.
        let direct = StubTransport { _ in BenchTarget.stub.sampleResponse }
        let directRequest = TransportRequest(urlRequest: URLRequest(url: BenchTarget.stub.baseURL.appendingPathComponent(BenchTarget.stub.path)))
        let directSamples = await latencies(stubRequests) { _ = try? await direct.send(directRequest) }
        figures.add("stub_direct_p50", percentile(directSamples, 0.5))

        // 5. Cache hits from memory and from disk, each on one target as the empty chain is: from
        // disk, a store without a memory tier (every hit reads the entry's file). Also, as this
        // scenario measured before the store could go without memory: two targets in turn through
        // one entry in memory, which adds a new target's cost to every hit (`--targets`).
        let (memoryProvider, memoryDirectory) = try cacheProvider { _ in "{}" }
        let (diskProvider, diskDirectory) = try cacheProvider(diskOnlyCache)
        let (alternatingProvider, alternatingDirectory) = try cacheProvider(oneEntryInMemoryCache)
        let a = CacheableTarget(path: "a")
        let b = CacheableTarget(path: "b")
        _ = try? await memoryProvider.request(a).value
        _ = try? await diskProvider.request(a).value
        _ = try? await alternatingProvider.request(a).value
        _ = try? await alternatingProvider.request(b).value
        let memoryPipeline = memoryProvider.request(a)
        let memoryHits = await latencies(options.cacheRequests) { _ = try? await memoryPipeline.value }
        let diskPipeline = diskProvider.request(a)
        let diskHits = await latencies(options.cacheRequests / 10) { _ = try? await diskPipeline.value }
        let (alternateA, alternateB) = (alternatingProvider.request(a), alternatingProvider.request(b))
        var flip = false
        let alternatingHits = await latencies(options.cacheRequests / 10) {
            flip.toggle()
            _ = try? await (flip ? alternateA : alternateB).value
        }
        figures.add("cache_hit_us_p50_memory", percentile(memoryHits, 0.5))
        figures.add("cache_hit_us_p99_memory", percentile(memoryHits, 0.99))
        figures.add("cache_hit_us_p50_disk", percentile(diskHits, 0.5))
        figures.add("cache_hit_us_p99_disk", percentile(diskHits, 0.99))
        figures.add("cache_hit_us_p50_disk_alternating", percentile(alternatingHits, 0.5))
        figures.add("cache_hit_us_p99_disk_alternating", percentile(alternatingHits, 0.99))
        figures.add("cache_hit_rps_memory", Double(memoryHits.count) / (memoryHits.reduce(0, +) / 1e6))
        for directory in [memoryDirectory, diskDirectory, alternatingDirectory] { try? FileManager.default.removeItem(atPath: directory) }
    }
    // The chain's figures: least p50s, and ratios of them.
    let least = { (key: String) in figures.summary(key).0 }
    let empty = least("stub_0_p50")
    for key in ["loaded6", "compiled6", "noop6"] {
        figures.add("ratio_\(key)_empty", least("stub_\(key)_p50") / empty)
    }
    figures.add("abi_hook_ns", (least("stub_noop6_p50") - least("stub_inprocess_noop6_p50")) * 1000 / 24)
    for plugin in loaded6 {
        figures.add("stub_over_empty_\(plugin.name)", least("stub_alone_\(plugin.name)_p50") - empty)
        figures.add("stub_compiled_over_empty_\(plugin.name)", least("stub_compiled_alone_\(plugin.name)_p50") - empty)
    }
    figures.add("ratio_empty_direct", empty / least("stub_direct_p50"))
    figures.add("ratio_cache_hit_empty", least("cache_hit_us_p50_memory") / empty)
    figures.add("ratio_cache_disk_hit_empty", least("cache_hit_us_p50_disk") / empty)
    figures.add("ratio_cache_disk_hit_alternating_empty", least("cache_hit_us_p50_disk_alternating") / empty)
    // A chain of more work can only cost more than the empty one: when the least p50s say
    // otherwise, the empty chain never ran in the machine's fast state and every ratio of this run
    // is meaningless.
    if least("stub_inprocess_noop6_p50") < empty || least("stub_noop6_p50") < least("stub_inprocess_noop6_p50") {
        print(
            "warning: the empty chain's fastest round (\(fmt(empty)) µs) is slower than a longer chain's: the machine's CPU "
                + "changed speed under the benchmark and this run's chain ratios are not valid; run it again")
    }

    let nginx: NginxServer
    do {
        nginx = try NginxServer(binary: options.nginx)
    } catch {
        FileHandle.standardError.write(Data("error: \(error.localizedDescription)\n".utf8))
        end(1)
    }
    defer { nginx.stop() }

    let small = URL(string: nginx.base + "/small.json")!
    let big = URL(string: nginx.base + "/big.bin")!
    let raw = RawClient(session: URLSession(configuration: .default))
    func httpProvider(_ chain: [any Interceptor], _ services: PluginServices) -> Provider<BenchTarget> {
        Provider<BenchTarget>(configuration: .default, interceptors: chain, services: services)
    }
    let http0 = httpProvider([], PluginServices())
    let http6 = httpProvider(loaded6, loadedServices)
    let rawCurl = RawCurl(transport: try CurlTransport())
    func curlProvider(_ chain: [any Interceptor], _ services: PluginServices) throws -> Provider<BenchTarget> {
        Provider<BenchTarget>(transport: try CurlTransport(), interceptors: chain, services: services)
    }
    let curl0 = try curlProvider([], PluginServices())
    let curl6 = try curlProvider(loaded6, loadedServices)
    let smallTarget = BenchTarget(baseURL: URL(string: nginx.base)!, path: "small.json")
    let bigTarget = BenchTarget(baseURL: URL(string: nginx.base)!, path: "big.bin")

    print("pluginhost-bench  \(ProcessInfo.processInfo.activeProcessorCount) cores  \(options.rounds) rounds  nginx at \(nginx.base)")

    // Warm up everything once.
    _ = await latencies(200) { _ = try? await stubProvider(loaded6, loadedServices).request(.stub).value }
    _ = await raw.get(small)
    _ = try? await http0.request(smallTarget).value
    _ = try? await http6.request(smallTarget).value
    _ = await rawCurl.get(small)
    _ = try? await curl0.request(smallTarget).value
    _ = try? await curl6.request(smallTarget).value

    if let profile = options.profileHTTP {
        // Only one loopback scenario, for a profiler: `curl-seq`, `curl-64`, `curl6-64` (six loaded plugins).
        let count = options.httpRequests * 10
        let started = now()
        switch profile {
        case "curl-seq": _ = await latencies(count) { _ = await rawCurl.get(small) }
        case "curl6-64": _ = await throughput(total: count, workers: 64) { _ = try? await curl6.request(smallTarget).value }
        default: _ = await throughput(total: count, workers: 64) { _ = await rawCurl.get(small) }
        }
        print("\(profile): \(count) requests, \(fmt(Double(count) / (Double(now() - started) / 1e9), 0)) requests/s")
        // `exit` runs no `defer`: nginx (a child, not a daemon) would go on listening.
        nginx.stop()
        end(0)
    }

    for round in 1...options.rounds {
        // 2. Loopback HTTP, small JSON, sequential and 64 concurrent.
        let rawSeq = await latencies(options.httpRequests) { _ = await raw.get(small) }
        let zeroSeq = await latencies(options.httpRequests) { _ = try? await http0.request(smallTarget).value }
        let sixSeq = await latencies(options.httpRequests) { _ = try? await http6.request(smallTarget).value }
        let curlSeq = await latencies(options.httpRequests) { _ = await rawCurl.get(small) }
        let curl0Seq = await latencies(options.httpRequests) { _ = try? await curl0.request(smallTarget).value }
        let curl6Seq = await latencies(options.httpRequests) { _ = try? await curl6.request(smallTarget).value }
        for (key, samples) in [
            ("raw", rawSeq), ("0", zeroSeq), ("loaded6", sixSeq), ("curl", curlSeq), ("curl_provider0", curl0Seq),
            ("curl_loaded6", curl6Seq),
        ] {
            figures.add("seq_rps_" + key, Double(samples.count) / (samples.reduce(0, +) / 1e6))
            figures.add("seq_us_p50_" + key, percentile(samples, 0.5))
            figures.add("seq_us_p99_" + key, percentile(samples, 0.99))
        }
        figures.add(
            "ratio_seq",
            figures.median("seq_rps_loaded6") > 0
                ? (Double(sixSeq.count) / (sixSeq.reduce(0, +) / 1e6)) / (Double(rawSeq.count) / (rawSeq.reduce(0, +) / 1e6)) : .nan)
        let total = options.httpRequests * 2
        // 64 concurrent: (key, client) for each, raw URLSession, providers on URLSession, raw curl, providers on curl.
        let concurrent: [(String, @Sendable () async -> Void)] = [
            ("raw", { _ = await raw.get(small) }), ("0", { _ = try? await http0.request(smallTarget).value }),
            ("loaded6", { _ = try? await http6.request(smallTarget).value }), ("curl", { _ = await rawCurl.get(small) }),
            ("curl_provider0", { _ = try? await curl0.request(smallTarget).value }),
            ("curl_loaded6", { _ = try? await curl6.request(smallTarget).value }),
        ]
        var conc: [String: Double] = [:]
        for (key, client) in concurrent {
            conc[key] = await throughput(total: total, workers: 64, client)
            figures.add("conc64_rps_" + key, conc[key]!)
        }
        let rawConc = conc["raw"]!
        let curlConc = conc["curl"]!
        let curl6Conc = conc["curl_loaded6"]!
        figures.add("ratio_conc64", conc["loaded6"]! / rawConc)
        let wrkSeq = try wrkRate(options.wrk, small, threads: 1, connections: 1)
        let wrkConc = try wrkRate(options.wrk, small, threads: 2, connections: 64)
        figures.add("seq_rps_wrk", wrkSeq)
        figures.add("conc64_rps_wrk", wrkConc)
        let seqRate = { (samples: [Double]) in Double(samples.count) / (samples.reduce(0, +) / 1e6) }
        figures.add("ratio_curl_wrk_seq", seqRate(curlSeq) / wrkSeq)
        figures.add("ratio_curl_wrk_conc64", curlConc / wrkConc)
        figures.add("ratio_urlsession_wrk_seq", seqRate(rawSeq) / wrkSeq)
        figures.add("ratio_urlsession_wrk_conc64", rawConc / wrkConc)
        figures.add("ratio_curl_loaded6_seq", seqRate(curl6Seq) / seqRate(curlSeq))
        figures.add("ratio_curl_loaded6_conc64", curl6Conc / curlConc)

        // 3. 1 MiB downloads.
        let rawDownload = await latencies(options.downloads) { _ = await raw.get(big) }
        let sixDownload = await latencies(options.downloads) { _ = try? await http6.request(bigTarget).value }
        let mb = Double(1 << 20) / 1e6
        figures.add("download_mbps_raw", mb * Double(rawDownload.count) / (rawDownload.reduce(0, +) / 1e6))
        figures.add("download_mbps_loaded6", mb * Double(sixDownload.count) / (sixDownload.reduce(0, +) / 1e6))
        figures.add("ratio_download", figures.median("download_mbps_loaded6") / figures.median("download_mbps_raw"))
        let curlDownload = await latencies(options.downloads) { _ = await rawCurl.get(big) }
        let curl6Download = await latencies(options.downloads) { _ = try? await curl6.request(bigTarget).value }
        figures.add("download_mbps_curl", mb * Double(curlDownload.count) / (curlDownload.reduce(0, +) / 1e6))
        figures.add("download_mbps_curl_loaded6", mb * Double(curl6Download.count) / (curl6Download.reduce(0, +) / 1e6))

        print(
            "round \(round) done: stub loaded6 p50 \(fmt(figures.summary("stub_loaded6_p50").2)) µs, ratio_seq \(fmt(figures.summary("ratio_seq").2, 3)), "
                + "ratio_conc64 \(fmt(figures.summary("ratio_conc64").2, 3)), curl/wrk seq \(fmt(figures.summary("ratio_curl_wrk_seq").2, 3)), "
                + "curl/wrk conc64 \(fmt(figures.summary("ratio_curl_wrk_conc64").2, 3))")
    }

    // 4. Manifest load in fresh child processes.
    var loads: [Double] = []
    for _ in 0..<20 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = ["--load-once", manifest.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        if let value = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) { loads.append(value) }
    }
    figures.add("load_ms_p50", percentile(loads, 0.5))

    // 6. Memory: RSS before and after many stub requests through the six plugins.
    let rssProvider = stubProvider(loaded6, loadedServices)
    let rssPipeline = rssProvider.request(.stub)
    for _ in 0..<1000 { _ = try? await rssPipeline.value }
    let before = residentMiB()
    for _ in 0..<options.rssRequests { _ = try? await rssPipeline.value }
    let after = residentMiB()
    figures.add("rss_before_mib", before)
    figures.add("rss_after_mib", after)
    figures.add("rss_growth_mib", after - before)

    // MARK: Report

    let rows: [(String, String, String)] = [
        ("1 stub, 0 interceptors (µs p50 / p99)", "stub_0_p50", "stub_0_p99"),
        ("1 stub, 6 in-process no-op", "stub_inprocess_noop6_p50", "stub_inprocess_noop6_p99"),
        ("1 stub, 6 loaded no-op (ABI)", "stub_noop6_p50", "stub_noop6_p99"),
        ("1 stub, six contrib loaded", "stub_loaded6_p50", "stub_loaded6_p99"),
        ("1 stub, six contrib compiled in", "stub_compiled6_p50", "stub_compiled6_p99"),
        ("1 stub transport called directly", "stub_direct_p50", "stub_direct_p50"),
        ("1 stub, 1,000 paths in turn, 0", "stub_paths_0_p50", "stub_paths_0_p99"),
        ("1 stub, 1,000 paths in turn, six compiled", "stub_paths_compiled6_p50", "stub_paths_compiled6_p99"),
        ("1 stub, 1,000 paths in turn, six loaded", "stub_paths_loaded6_p50", "stub_paths_loaded6_p99"),
        ("2 sequential, raw URLSession (µs p50 / p99)", "seq_us_p50_raw", "seq_us_p99_raw"),
        ("2 sequential, provider 0", "seq_us_p50_0", "seq_us_p99_0"),
        ("2 sequential, provider six loaded", "seq_us_p50_loaded6", "seq_us_p99_loaded6"),
        ("2 sequential, raw CurlTransport", "seq_us_p50_curl", "seq_us_p99_curl"),
        ("2 sequential, curl provider 0", "seq_us_p50_curl_provider0", "seq_us_p99_curl_provider0"),
        ("2 sequential, curl provider six loaded", "seq_us_p50_curl_loaded6", "seq_us_p99_curl_loaded6"),
        ("5 cache hit, memory (µs p50 / p99)", "cache_hit_us_p50_memory", "cache_hit_us_p99_memory"),
        ("5 cache hit, disk", "cache_hit_us_p50_disk", "cache_hit_us_p99_disk"),
        ("5 cache hit, disk, 2 targets in turn", "cache_hit_us_p50_disk_alternating", "cache_hit_us_p99_disk_alternating"),
    ]
    print("")
    print("scenario                                      p50 (min / median / max)          p99 median")
    for (title, p50, p99) in rows {
        let s = figures.summary(p50)
        print(
            "\(title.padding(toLength: 45, withPad: " ", startingAt: 0)) \(fmt(s.0)) / \(fmt(s.1)) / \(fmt(s.2))".padding(
                toLength: 80, withPad: " ", startingAt: 0) + fmt(figures.median(p99)))
    }
    let single: [(String, String, Int)] = [
        ("2 sequential rps: raw", "seq_rps_raw", 0), ("2 sequential rps: provider 0", "seq_rps_0", 0),
        ("2 sequential rps: six loaded", "seq_rps_loaded6", 0), ("2 ratio six loaded / raw, sequential", "ratio_seq", 3),
        ("2 64 concurrent rps: raw", "conc64_rps_raw", 0), ("2 64 concurrent rps: provider 0", "conc64_rps_0", 0),
        ("2 64 concurrent rps: six loaded", "conc64_rps_loaded6", 0), ("2 ratio six loaded / raw, 64 concurrent", "ratio_conc64", 3),
        ("2 sequential rps: wrk", "seq_rps_wrk", 0), ("2 sequential rps: raw curl", "seq_rps_curl", 0),
        ("2 sequential rps: curl provider 0", "seq_rps_curl_provider0", 0), ("2 sequential rps: curl six loaded", "seq_rps_curl_loaded6", 0),
        ("2 64 concurrent rps: wrk", "conc64_rps_wrk", 0), ("2 64 concurrent rps: raw curl", "conc64_rps_curl", 0),
        ("2 64 concurrent rps: curl provider 0", "conc64_rps_curl_provider0", 0),
        ("2 64 concurrent rps: curl six loaded", "conc64_rps_curl_loaded6", 0),
        ("2 ratio raw curl / wrk, sequential", "ratio_curl_wrk_seq", 3), ("2 ratio raw curl / wrk, 64 concurrent", "ratio_curl_wrk_conc64", 3),
        ("2 ratio raw URLSession / wrk, sequential", "ratio_urlsession_wrk_seq", 3),
        ("2 ratio raw URLSession / wrk, 64 concurrent", "ratio_urlsession_wrk_conc64", 3),
        ("2 ratio curl six loaded / raw curl, seq", "ratio_curl_loaded6_seq", 3),
        ("2 ratio curl six loaded / raw curl, conc64", "ratio_curl_loaded6_conc64", 3),
        ("3 1 MiB download MB/s: raw", "download_mbps_raw", 1), ("3 1 MiB download MB/s: six loaded", "download_mbps_loaded6", 1),
        ("3 1 MiB download MB/s: raw curl", "download_mbps_curl", 1), ("3 1 MiB download MB/s: curl six loaded", "download_mbps_curl_loaded6", 1),
        ("3 ratio download six loaded / raw", "ratio_download", 3), ("4 manifest load, six bundles (ms p50 of 20)", "load_ms_p50", 2),
        ("5 cache 100%-hit rps (memory)", "cache_hit_rps_memory", 0), ("1 ABI cost per hook call (ns)", "abi_hook_ns", 0),
        ("1 ratio empty chain / stub direct", "ratio_empty_direct", 3), ("1 ratio 6 loaded no-op / empty", "ratio_noop6_empty", 3),
        ("1 ratio six compiled in / empty", "ratio_compiled6_empty", 3), ("1 ratio six loaded / empty", "ratio_loaded6_empty", 3),
        ("5 ratio cache hit memory / empty", "ratio_cache_hit_empty", 3), ("5 ratio cache hit disk / empty", "ratio_cache_disk_hit_empty", 3),
        ("5 ratio cache hit disk, 2 in turn / empty", "ratio_cache_disk_hit_alternating_empty", 3),
        ("6 RSS growth, \(options.rssRequests) stub requests (MiB)", "rss_growth_mib", 2),
    ]
    print("")
    print("figure                                        min / median / max")
    for (title, key, digits) in single {
        let s = figures.summary(key)
        print("\(title.padding(toLength: 45, withPad: " ", startingAt: 0)) \(fmt(s.0, digits)) / \(fmt(s.1, digits)) / \(fmt(s.2, digits))")
    }
    print("")
    print("each contrib plugin alone               µs p50 over the empty chain (least p50s): loaded / compiled in")
    for plugin in loaded6 {
        let over = figures.median("stub_over_empty_\(plugin.name)")
        let compiledOver = figures.median("stub_compiled_over_empty_\(plugin.name)")
        print("  \(plugin.name.padding(toLength: 36, withPad: " ", startingAt: 0)) \(fmt(over)) / \(fmt(compiledOver))")
    }
    var json: [String: Double] = [:]
    for key in [
        "stub_us_p50_0": "stub_0_p50", "stub_us_p50_loaded6": "stub_loaded6_p50", "stub_us_p50_noop6": "stub_noop6_p50",
        "stub_us_p50_inprocess_noop6": "stub_inprocess_noop6_p50", "stub_us_p50_compiled6": "stub_compiled6_p50",
        "stub_us_p50_direct": "stub_direct_p50", "cache_hit_us_p50_memory": "cache_hit_us_p50_memory",
        "cache_hit_us_p50_disk": "cache_hit_us_p50_disk", "cache_hit_us_p50_disk_alternating": "cache_hit_us_p50_disk_alternating",
        "stub_us_p50_0_paths": "stub_paths_0_p50",
        "stub_us_p50_compiled6_paths": "stub_paths_compiled6_p50", "stub_us_p50_loaded6_paths": "stub_paths_loaded6_p50",
    ] {
        // The least p50 of the chain's rounds (see scenario 1).
        json[key.key] = least(key.value)
    }
    for key in [
        "seq_rps_raw", "seq_rps_0", "seq_rps_loaded6", "conc64_rps_raw", "conc64_rps_0", "conc64_rps_loaded6", "ratio_seq",
        "ratio_conc64", "download_mbps_raw", "download_mbps_loaded6", "ratio_download", "load_ms_p50", "cache_hit_rps_memory", "rss_growth_mib",
        "abi_hook_ns", "seq_rps_wrk", "conc64_rps_wrk",
        "seq_rps_curl", "conc64_rps_curl", "seq_rps_curl_provider0", "conc64_rps_curl_provider0", "seq_rps_curl_loaded6",
        "conc64_rps_curl_loaded6", "ratio_curl_wrk_seq", "ratio_curl_wrk_conc64", "ratio_urlsession_wrk_seq",
        "ratio_urlsession_wrk_conc64", "ratio_curl_loaded6_seq", "ratio_curl_loaded6_conc64", "download_mbps_curl",
        "download_mbps_curl_loaded6",
    ] {
        json[key] = figures.median(key)
    }
    // The chain's ratios, made once from least p50s.
    for key in [
        "ratio_empty_direct", "ratio_loaded6_empty", "ratio_compiled6_empty", "ratio_noop6_empty", "ratio_cache_hit_empty",
        "ratio_cache_disk_hit_empty", "ratio_cache_disk_hit_alternating_empty",
    ] {
        json[key] = figures.median(key)
    }
    for plugin in loaded6 {
        json["stub_us_over_empty_\(plugin.name)"] = figures.median("stub_over_empty_\(plugin.name)")
        json["stub_us_over_empty_compiled_\(plugin.name)"] = figures.median("stub_compiled_over_empty_\(plugin.name)")
    }
    let rounded = json.mapValues { ($0 * 1000).rounded() / 1000 }
    let data = try JSONSerialization.data(withJSONObject: rounded, options: [.sortedKeys])
    print("")
    print("BENCH_JSON " + String(decoding: data, as: UTF8.self))
}

try await runBench(options)
