import Dispatch
import Foundation
import PluginHost
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request `test` sends.
struct CLITarget: TargetType {
    let baseURL: URL
    let method: HTTPMethod
    let headers: [String: String]?
    var path: String { "" }
    /// The request's deadline: the chain's request in `test` is bounded as each probe is.
    var deadline: TimeInterval?
    var limits: RequestLimits? { deadline.map { RequestLimits(deadline: $0) } }

    /// The embedded offline answer: works with no network and no server.
    static let stubBody = Data(#"{"ok":true,"from":"pluginhost offline stub"}"#.utf8)
    var sampleResponse: EndpointSampleResponse {
        .networkResponseWithHeaders(
            200,
            [
                "Content-Type": "application/json", "Cache-Control": "max-age=60",
                "ETag": "\"pluginhost-stub\"",
            ], Self.stubBody)
    }
    static let stubURL = URL(string: "https://stub.pluginhost.invalid/pluginhost/test")!
}

/// Options shared by `test` and its child probes.
struct RequestOptions {
    var url: URL?
    var method = HTTPMethod.get
    var headers: [String: String] = [:]
    var store: [(String, String)] = []

    init(_ arguments: ParsedArguments) throws {
        if let text = arguments.value("url") {
            guard let url = URL(string: text), URLParts.isAbsoluteHTTP(text) else {
                throw UsageError(description: "--url must be an absolute http or https URL, not '\(URLParts.redactingUserInfo(text))'")
            }
            self.url = url
        }
        if let method = arguments.value("method") {
            guard HeaderValidation.isValidName(method) else { throw UsageError(description: "--method must be a token such as GET, not '\(method)'") }
            self.method = HTTPMethod(rawValue: method.uppercased())
        }
        for header in arguments.all("header") {
            guard let colon = header.firstIndex(of: ":") else {
                throw UsageError(description: "--header must look like 'Name: value', not '\(header)'")
            }
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard HeaderValidation.isValidName(name), HeaderValidation.isValidValue(value) else {
                throw UsageError(description: "--header '\(header)' has an invalid name or value")
            }
            headers[name] = value
        }
        for pair in arguments.all("store") {
            guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                throw UsageError(description: "--store must look like KEY=VALUE, not '\(pair)'")
            }
            store.append((String(pair[..<equals]), String(pair[pair.index(after: equals)...])))
        }
    }

    var target: CLITarget { CLITarget(baseURL: url ?? CLITarget.stubURL, method: method, headers: headers.isEmpty ? nil : headers) }

    /// The request the stub answers (the probes, `--bench`): sent to the stub's own URL whatever
    /// `--url` says, so that no plugin keeps the stub's answer as the real URL's (a cache whose
    /// directory the app shares stored it, and the next real request was answered with it).
    var stubTarget: CLITarget { CLITarget(baseURL: CLITarget.stubURL, method: method, headers: headers.isEmpty ? nil : headers) }

    func provider(_ interceptors: [any Interceptor], services: PluginServices, stub: Bool? = nil) -> Provider<CLITarget> {
        for (key, value) in store { services.setValue(value, forKey: key) }
        let stubbed = stub ?? (url == nil)
        return Provider<CLITarget>(stubClosure: { _ in stubbed ? .immediate : .never }, interceptors: interceptors, services: services)
    }
}

/// `pluginhost test`: validate, probe each plugin in a child process, run one request.
enum TestCommand {
    static let requestFlags = [
        FlagSpec(name: "manifest", value: "FILE", repeatable: false, help: "the manifest to test"),
        FlagSpec(name: "url", value: "URL", repeatable: false, help: "send the request for real to URL (default: the built-in offline stub)"),
        FlagSpec(name: "method", value: "M", repeatable: false, help: "the request method (default GET)"),
        FlagSpec(name: "header", value: "'K: V'", repeatable: true, help: "a request header"),
        FlagSpec(name: "store", value: "KEY=VALUE", repeatable: true, help: "a value in the host store (e.g. access_token=…, signing_secret=…)"),
    ]

    static let spec = CommandSpec(
        name: "test", summary: "Test a manifest like nginx -t: validate it, probe each plugin in a child process, run one request through the chain.",
        positionals: [],
        flags: requestFlags + [
            FlagSpec(name: "json", value: nil, repeatable: false, help: "print a JSON document"),
            FlagSpec(name: "bench", value: "N", repeatable: false, help: "also run N requests on the stub and print per-plugin cost"),
            FlagSpec(
                name: "probe-timeout", value: "SECONDS", repeatable: false,
                help: "how long a probe may take before it is killed and reported (default 30)"),
        ],
        details: """
            Without --url the request is answered by a built-in offline stub (200, JSON, Cache-Control: max-age=60).
            Exit codes: 0 everything passed; 1 usage; 2 manifest error; 3 a plugin was refused (bundle, digest,
            permissions, ABI, configuration); 4 a plugin crashed or its probe timed out; 5 the request failed.
            """)

    static let probeSpec = CommandSpec(
        name: "__probe", summary: "internal: create one plugin and run one stubbed request through it alone",
        positionals: [], flags: requestFlags + [FlagSpec(name: "plugin", value: "NAME", repeatable: false, help: "")],
        details: "", hidden: true)

    /// The line a probe prints last when its request went through: its exit status alone does
    /// not say so (a plugin that ends the process with status 0 in `create` was counted as passed,
    /// then ran in the parent, which ended with it, printing nothing).
    static let probePassed = "pluginhost-probe-passed"
    /// The line a probe prints first when its request failed (status 5), for the same reason.
    static let probeRequestFailed = "pluginhost-probe-request-failed"

    /// Child side: exit 0 ok (``probePassed`` printed last), 3 refused (message on stdout), 5 request failed.
    static func probe(_ arguments: ParsedArguments) -> ExitCode {
        guard let path = arguments.value("manifest"), let name = arguments.value("plugin") else { return .usage }
        do {
            let options = try RequestOptions(arguments)
            let manifest = try PluginManifest.read(URL(fileURLWithPath: path)).filtered { $0.name == name }
            let services = PluginServices()
            services.setLogHandler(nil)
            let plugins = try PluginLoader.load(manifest, services: services)
            let provider = options.provider(plugins, services: services, stub: true)
            let semaphore = DispatchSemaphore(value: 0)
            let outcome = Locked<Result<Response, NetworkError>?>(nil)
            Task {
                let result = await provider.request(options.stubTarget).result
                outcome.withLock { $0 = result }
                semaphore.signal()
            }
            semaphore.wait()
            if case .failure(let error) = outcome.withLock({ $0 }) {
                Terminal.out(probeRequestFailed)
                Terminal.out(error.description)
                return .requestFailed
            }
            Terminal.out(probePassed)
            return .ok
        } catch let error as PluginLoadError {
            // As `list` words it: a permission problem may be a directory above the library, named.
            Terminal.out(error.kind == .insecurePermissions ? "\(error.file): \(error.reason)" : error.reason)
            return .refused
        } catch {
            Terminal.out("\(error)")
            return .usage
        }
    }

    struct ProbeResult {
        let name: String
        let status: String
        let detail: String
        let code: ExitCode
    }

    /// Parent side: runs the probe of `name` in a child process.
    static func runProbe(_ name: String, arguments: ParsedArguments, manifest: String, timeout: Double) -> ProbeResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: selfPath())
        // Each value joined to its option: a value that begins with `--` (a plugin named `--x`, a
        // `--store=--k=v`) would be read as an option of its own, and the probe fail.
        var childArguments = ["__probe", "--manifest=" + manifest, "--plugin=" + name]
        if let method = arguments.value("method") { childArguments.append("--method=" + method) }
        for key in ["header", "store"] { for value in arguments.all(key) { childArguments.append("--\(key)=" + value) } }
        process.arguments = childArguments
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do {
            try process.run()
        } catch {
            return ProbeResult(name: name, status: "error", detail: "cannot start a probe: \(error.localizedDescription)", code: .crashed)
        }
        // Read meanwhile (a probe that writes more than a pipe holds would wait for us), and
        // waited for a bounded time: a plugin that never answers must not hang the command.
        let collected = Locked(Data())
        let read = DispatchSemaphore(value: 0)
        let reader = output.fileHandleForReading
        DispatchQueue.global().async {
            let data = reader.readDataToEndOfFile()
            collected.withLock { $0 = data }
            read.signal()
        }
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
            return ProbeResult(
                name: name, status: "timed out", detail: "timed out after \(Terminal.seconds(timeout)) s (killed)", code: .crashed)
        }
        // A child of the plugin's may hold the pipe open: its output is not waited for long.
        _ = read.wait(timeout: .now() + 2)
        let text = String(decoding: collected.withLock { $0 }, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if process.terminationReason == .uncaughtSignal {
            return ProbeResult(name: name, status: "crashed", detail: "crashed (signal \(process.terminationStatus))", code: .crashed)
        }
        // Each marker is a line of its own, wherever the plugin's own output puts it.
        let lines = text.split(whereSeparator: \.isNewline).map(String.init)
        switch process.terminationStatus {
        case 0 where lines.contains(probePassed): return ProbeResult(name: name, status: "ok", detail: "ok", code: .ok)
        case ExitCode.requestFailed.rawValue where lines.contains(probeRequestFailed):
            let message = lines.filter { $0 != probeRequestFailed }.joined(separator: "\n")
            return ProbeResult(name: name, status: "failed", detail: "request failed: \(message)", code: .requestFailed)
        case 0, ExitCode.requestFailed.rawValue:
            return ProbeResult(
                name: name, status: "error",
                detail: "the probe ended (status \(process.terminationStatus)) before its request went through: the plugin ended the process",
                code: .crashed)
        case ExitCode.refused.rawValue: return ProbeResult(name: name, status: "refused", detail: "reject: \(text)", code: .refused)
        default: return ProbeResult(name: name, status: "error", detail: "probe exited with \(process.terminationStatus): \(text)", code: .crashed)
        }
    }

    static func selfPath() -> String {
        #if os(Linux)
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
        #endif
        return URL(fileURLWithPath: CommandLine.arguments[0], relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).path
    }

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        guard let manifestPath = arguments.value("manifest") else {
            Terminal.error("test needs --manifest FILE")
            return .usage
        }
        let options: RequestOptions
        var benchCount = 0
        var probeTimeout = 30.0
        do {
            options = try RequestOptions(arguments)
            if let text = arguments.value("probe-timeout") {
                guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                    throw UsageError(description: "--probe-timeout needs a number of seconds above 0 (at most 86400), not '\(text)'")
                }
                probeTimeout = seconds
            }
            if let bench = arguments.value("bench") {
                guard let count = Int(bench), count > 0 else {
                    throw UsageError(description: "--bench needs a positive number of requests, not '\(bench)'")
                }
                benchCount = count
            }
        } catch {
            Terminal.error("\(error)")
            return .usage
        }
        var report = TestReport(manifest: manifestPath)
        let exit = collect(
            into: &report, manifestPath: manifestPath, options: options, arguments: arguments, benchCount: benchCount, probeTimeout: probeTimeout)
        if arguments.has("json") {
            Terminal.out(Terminal.json(report.json))
        } else {
            report.printText()
        }
        return exit
    }

    /// Runs the checks, filling `report`; returns the exit code.
    static func collect(
        into report: inout TestReport, manifestPath: String, options: RequestOptions, arguments: ParsedArguments, benchCount: Int,
        probeTimeout: Double
    ) -> ExitCode {
        // 1. The manifest, like nginx -t.
        let manifestURL = URL(fileURLWithPath: manifestPath)
        let problems = PluginManifest.problems(in: manifestURL)
        guard problems.isEmpty else {
            report.problems = problems.map(\.description)
            report.exitCode = .manifest
            return .manifest
        }
        // Read again: the file may have changed (or gone) since it was checked.
        let manifest: PluginManifest
        do {
            manifest = try PluginManifest.read(manifestURL)
        } catch {
            report.problems = [error.description]
            report.exitCode = .manifest
            return .manifest
        }
        report.manifestSummary = (manifest.entries.count, manifest.entries.filter(\.enabled).count)

        // 2. Bundles, then a probe of each usable plugin in a child process.
        var usable: Set<String> = []
        for inventory in Inventory.collect(manifest: manifest, directories: [], forProbes: true) {
            if let problem = inventory.problems.first {
                report.probes.append(.init(name: inventory.name, status: "refused", detail: problem, code: .refused))
                report.worsen(.refused)
                continue
            }
            let result = runProbe(inventory.name, arguments: arguments, manifest: manifestPath, timeout: probeTimeout)
            report.probes.append(.init(name: inventory.name, status: result.status, detail: result.detail, code: result.code))
            if result.code == .ok || result.code == .requestFailed { usable.insert(inventory.name) }
            report.worsen(result.code)
        }

        // 3. One request through the whole chain of usable plugins.
        let services = PluginServices()
        services.setLogHandler { level, plugin, message in
            FileDescriptor.writeAll(2, "[\(plugin)] \(message)\n")
        }
        let plugins: [LoadedPlugin]
        do {
            plugins = try PluginLoader.load(manifest.filtered { $0.enabled && usable.contains($0.name) }, services: services)
        } catch {
            // Refused, unless a probe already crashed or timed out (exit 4 stands).
            report.loadError = error.description
            report.worsen(.refused)
            report.exitCode = report.worst
            return report.worst
        }
        let traces = plugins.map { _ in Trace() }
        let chain: [any Interceptor] = zip(plugins, traces).map { Traced(inner: $0, trace: $1) }
        let subscription = services.subscribe { event in
            if let index = plugins.firstIndex(where: { $0.name == event.plugin }) { traces[index].event(event.name) }
        }
        let provider = options.provider(chain, services: services)
        // Bounded as each probe is (`--probe-timeout`): a plugin that hangs on the real answer,
        // which its probe never saw, does not hang the command.
        var target = options.target
        target.deadline = probeTimeout
        let chainTarget = target
        let outcome = waitFor { await provider.request(chainTarget).result }
        subscription.cancel()
        report.chainMethod = options.method.rawValue
        report.chainURL = URLParts.redactingUserInfo(options.url?.absoluteString ?? CLITarget.stubURL.absoluteString)
        report.offline = options.url == nil
        for (index, plugin) in plugins.enumerated() {
            let trace = traces[index]
            var did = trace.actions
            if !trace.events.isEmpty { did.append("events: " + trace.events.joined(separator: ", ")) }
            report.steps.append(.init(name: plugin.name, did: did, microseconds: Double(trace.take()) / 1000))
        }
        switch outcome {
        case .success(let response):
            let request = response.request
            let headers = (request?.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { HTTPHeader(name: $0.key, value: $0.value) }
            report.request = .init(
                method: request?.httpMethod ?? "?", url: request?.url.map { URLParts.redactingUserInfo($0.absoluteString) } ?? report.chainURL,
                headers: headers.map(Traced.show))
            report.response = .init(
                status: response.statusCode, bytes: response.data.count, xCache: response.value(forHTTPHeaderField: "X-Cache"),
                metrics: response.metrics)
        case .failure(let error):
            report.requestError = error.description
            report.requestErrorMetrics = error.metrics
            report.worsen(.requestFailed)
        }

        // 4. --bench N on the stub.
        if benchCount > 0 {
            let benchProvider = options.provider(chain, services: services, stub: true)
            for trace in traces {
                trace.stopRecording()
                _ = trace.take()
            }
            let target = options.stubTarget
            let samples = waitFor { () async -> BenchSamples in
                var samples = BenchSamples()
                let pipeline = benchProvider.request(target)
                for _ in 0..<benchCount {
                    let start = DispatchTime.now().uptimeNanoseconds
                    _ = await pipeline.result
                    samples.add(total: Double(DispatchTime.now().uptimeNanoseconds - start) / 1000, plugins: traces.map { Double($0.take()) / 1000 })
                }
                return samples
            }
            let perPlugin = samples.perPlugin.isEmpty ? Array(repeating: [], count: plugins.count) : samples.perPlugin
            report.bench = .init(
                requests: benchCount,
                plugins: plugins.enumerated().map { (name: $1.name, p50: percentile(perPlugin[$0], 0.5), p99: percentile(perPlugin[$0], 0.99)) },
                chain: (percentile(samples.whole, 0.5), percentile(samples.whole, 0.99)))
        }
        report.exitCode = report.worst
        return report.worst
    }

    /// Runs `body` in a task and waits for it on this (non-cooperative) thread.
    static func waitFor<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let box = Locked<T?>(nil)
        let semaphore = DispatchSemaphore(value: 0)
        Task {
            let value = await body()
            box.withLock { $0 = value }
            semaphore.signal()
        }
        semaphore.wait()
        return box.withLock { $0! }
    }

    static func percentile(_ values: [Double], _ q: Double) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]
    }
}

/// What `pluginhost test` found: built once, printed as text or as JSON.
struct TestReport {
    struct Probe {
        let name: String, status: String, detail: String
        let code: ExitCode
    }
    struct Step {
        let name: String, did: [String]
        let microseconds: Double
    }
    struct SentRequest {
        let method: String, url: String, headers: [String]
    }
    struct Received {
        let status: Int, bytes: Int
        let xCache: String?
        /// How the exchange went, for a request sent with `--url` (none from the stub or a cache hit).
        let metrics: TransferMetrics?
    }
    struct Bench {
        let requests: Int
        let plugins: [(name: String, p50: Double, p99: Double)]
        let chain: (p50: Double, p99: Double)
    }

    let manifest: String
    var problems: [String] = []
    var manifestSummary: (plugins: Int, enabled: Int)?
    var probes: [Probe] = []
    var loadError: String?
    var chainMethod = "GET"
    var chainURL = ""
    var offline = false
    var steps: [Step] = []
    var request: SentRequest?
    var response: Received?
    var requestError: String?
    /// How far the failed request got, when the transport measured it (`--url` over libcurl).
    var requestErrorMetrics: TransferMetrics?
    var bench: Bench?
    var exitCode = ExitCode.ok
    private(set) var worst = ExitCode.ok

    init(manifest: String) { self.manifest = manifest }

    /// `metrics` as the JSON form gives them: seconds, counts, the peer.
    static func json(_ metrics: TransferMetrics) -> [String: Any] {
        var fields: [String: Any] = [
            "nameLookup": metrics.nameLookup, "connect": metrics.connect, "requestStart": metrics.requestStart,
            "firstByte": metrics.firstByte, "total": metrics.total, "redirectCount": metrics.redirectCount,
            "redirectTime": metrics.redirectTime, "reusedConnection": metrics.reusedConnection,
            "requestBodyBytes": metrics.requestBodyBytes, "responseBodyBytes": metrics.responseBodyBytes,
        ]
        if let handshake = metrics.tlsHandshake { fields["tlsHandshake"] = handshake }
        if let address = metrics.remoteAddress { fields["remoteAddress"] = address }
        if let port = metrics.remotePort { fields["remotePort"] = port }
        return fields
    }

    /// Keeps the worst outcome seen (crashed > refused > request failed > ok).
    mutating func worsen(_ code: ExitCode) {
        let rank: [ExitCode: Int] = [.ok: 0, .requestFailed: 1, .refused: 2, .crashed: 3]
        if (rank[code] ?? 0) > (rank[worst] ?? 0) { worst = code }
    }

    /// The text form: results on standard output, manifest problems and load errors on standard error.
    func printText() {
        guard problems.isEmpty else {
            for problem in problems { Terminal.error(problem) }
            return
        }
        if let summary = manifestSummary {
            Terminal.out("manifest \(manifest): " + Terminal.green("ok") + " (\(summary.plugins) plugins, \(summary.enabled) enabled)")
        }
        for probe in probes {
            let painted = probe.code == .ok ? Terminal.green(probe.detail) : Terminal.red(probe.detail)
            Terminal.out("probe  \(Terminal.pad(probe.name, 14)) \(painted)")
        }
        if let loadError {
            Terminal.error(loadError)
            return
        }
        Terminal.out("chain  \(chainMethod) \(chainURL)" + (offline ? " (offline stub)" : ""))
        for (index, step) in steps.enumerated() {
            let summary = step.did.isEmpty ? Terminal.dim("no change") : step.did.joined(separator: "; ")
            Terminal.out("  \(index + 1)  \(Terminal.pad(step.name, 13)) \(summary)  " + Terminal.dim(String(format: "%.0f µs", step.microseconds)))
        }
        if let request, let response {
            Terminal.out("request  \(request.method) \(request.url)")
            for header in request.headers { Terminal.out("  \(header)") }
            Terminal.out("response  \(response.status) (\(response.bytes) bytes)" + (response.xCache.map { ", X-Cache: \($0)" } ?? ""))
            if let metrics = response.metrics { Terminal.out("timing  \(metrics)") }
        }
        if let requestError {
            Terminal.out("request failed: " + Terminal.red(requestError))
            if let requestErrorMetrics { Terminal.out("timing  \(requestErrorMetrics)") }
        }
        if let bench {
            Terminal.out("bench  \(bench.requests) requests on the stub transport (µs per request)")
            for row in bench.plugins {
                Terminal.out("  \(Terminal.pad(row.name, 14)) p50 \(String(format: "%8.2f", row.p50))  p99 \(String(format: "%8.2f", row.p99))")
            }
            Terminal.out(
                "  \(Terminal.pad("whole chain", 14)) p50 \(String(format: "%8.2f", bench.chain.p50))  p99 \(String(format: "%8.2f", bench.chain.p99))"
            )
        }
        Terminal.out("result " + (exitCode == .ok ? Terminal.green("ok") : Terminal.red("failed (exit \(exitCode.rawValue))")))
    }

    /// The JSON form (Tests/Fixtures/test.schema.json).
    var json: [String: Any] {
        var document: [String: Any] = ["manifest": manifest, "manifestOK": problems.isEmpty]
        if !problems.isEmpty {
            document["problems"] = problems
            document["exitCode"] = exitCode.rawValue
            return document
        }
        document["probes"] = probes.map { ["name": $0.name, "status": $0.status, "detail": $0.detail] }
        if let loadError {
            document["loadError"] = loadError
            document["exitCode"] = exitCode.rawValue
            return document
        }
        document["chain"] = steps.enumerated().map { ["position": $0 + 1, "name": $1.name, "did": $1.did, "microseconds": $1.microseconds] }
        if let request, let response {
            document["request"] = ["method": request.method, "url": request.url, "headers": request.headers]
            var received: [String: Any] = ["status": response.status, "bytes": response.bytes]
            if let xCache = response.xCache { received["xCache"] = xCache }
            if let metrics = response.metrics { received["metrics"] = Self.json(metrics) }
            document["response"] = received
        }
        if let requestError { document["requestError"] = requestError }
        if let requestErrorMetrics { document["requestErrorMetrics"] = Self.json(requestErrorMetrics) }
        if let bench {
            document["bench"] = [
                "requests": bench.requests, "plugins": bench.plugins.map { ["name": $0.name, "p50": $0.p50, "p99": $0.p99] },
                "chain": ["p50": bench.chain.p50, "p99": bench.chain.p99],
            ]
        }
        document["exitCode"] = exitCode.rawValue
        return document
    }
}

/// Benchmark samples collected by a task: the whole chain's and each plugin's.
struct BenchSamples: Sendable {
    var whole: [Double] = []
    var perPlugin: [[Double]] = []

    mutating func add(total: Double, plugins: [Double]) {
        whole.append(total)
        if perPlugin.isEmpty { perPlugin = Array(repeating: [], count: plugins.count) }
        for (index, value) in plugins.enumerated() { perPlugin[index].append(value) }
    }
}
