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
    static let stubURL = URL(string: "http://stub.pluginhost.invalid/pluginhost/test")!
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
                throw UsageError(description: "--url must be an absolute http or https URL, not '\(text)'")
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
        ],
        details: """
            Without --url the request is answered by a built-in offline stub (200, JSON, Cache-Control: max-age=60).
            Exit codes: 0 everything passed; 1 usage; 2 manifest error; 3 a plugin was refused (bundle, digest,
            permissions, ABI, configuration); 4 a plugin crashed; 5 the request failed.
            """)

    static let probeSpec = CommandSpec(
        name: "__probe", summary: "internal: create one plugin and run one stubbed request through it alone",
        positionals: [], flags: requestFlags + [FlagSpec(name: "plugin", value: "NAME", repeatable: false, help: "")],
        details: "", hidden: true)

    /// Child side: exit 0 ok, 3 refused (message on stdout), 5 request failed.
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
                let result = await provider.request(options.target).result
                outcome.withLock { $0 = result }
                semaphore.signal()
            }
            semaphore.wait()
            if case .failure(let error) = outcome.withLock({ $0 }) {
                Terminal.out(error.description)
                return .requestFailed
            }
            return .ok
        } catch let error as PluginLoadError {
            Terminal.out(error.reason)
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
    static func runProbe(_ name: String, arguments: ParsedArguments, manifest: String) -> ProbeResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: selfPath())
        var childArguments = ["__probe", "--manifest", manifest, "--plugin", name]
        for key in ["url", "method"] { if let value = arguments.value(key) { childArguments += ["--\(key)", value] } }
        for key in ["header", "store"] { for value in arguments.all(key) { childArguments += ["--\(key)", value] } }
        process.arguments = childArguments
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return ProbeResult(name: name, status: "error", detail: "cannot start a probe: \(error.localizedDescription)", code: .crashed)
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if process.terminationReason == .uncaughtSignal {
            return ProbeResult(name: name, status: "crashed", detail: "crashed (signal \(process.terminationStatus))", code: .crashed)
        }
        switch process.terminationStatus {
        case 0: return ProbeResult(name: name, status: "ok", detail: "ok", code: .ok)
        case ExitCode.refused.rawValue: return ProbeResult(name: name, status: "refused", detail: "refused: \(text)", code: .refused)
        case ExitCode.requestFailed.rawValue:
            return ProbeResult(name: name, status: "failed", detail: "request failed: \(text)", code: .requestFailed)
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
        do {
            options = try RequestOptions(arguments)
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
        let json = arguments.has("json")
        var document: [String: Any] = ["manifest": manifestPath]
        func say(_ line: String) { if !json { Terminal.out(line) } }

        // 1. The manifest, like nginx -t.
        let manifestURL = URL(fileURLWithPath: manifestPath)
        let problems = PluginManifest.problems(in: manifestURL)
        if !problems.isEmpty {
            document["manifestOK"] = false
            document["problems"] = problems.map(\.description)
            if json { Terminal.out(Terminal.json(document)) } else { for problem in problems { Terminal.error(problem.description) } }
            document["exitCode"] = ExitCode.manifest.rawValue
            return .manifest
        }
        let manifest = try! PluginManifest.read(manifestURL)
        document["manifestOK"] = true
        say(
            "manifest \(manifestPath): " + Terminal.green("ok")
                + " (\(manifest.entries.count) plugins, \(manifest.entries.filter(\.enabled).count) enabled)")

        // 2. Bundles, then a probe of each usable plugin in a child process.
        var worst = ExitCode.ok
        func worsen(_ code: ExitCode) {
            let rank: [ExitCode: Int] = [.ok: 0, .requestFailed: 1, .refused: 2, .crashed: 3]
            if (rank[code] ?? 0) > (rank[worst] ?? 0) { worst = code }
        }
        let reports = Inventory.collect(manifest: manifest, directories: []).filter { $0.enabled }
        var usable: Set<String> = []
        var probes: [[String: Any]] = []
        for report in reports {
            if let problem = report.problems.first {
                say("probe  \(Terminal.pad(report.name, 14)) " + Terminal.red(problem))
                probes.append(["name": report.name, "status": "refused", "detail": problem])
                worsen(.refused)
                continue
            }
            let result = runProbe(report.name, arguments: arguments, manifest: manifestPath)
            let painted = result.code == .ok ? Terminal.green(result.detail) : Terminal.red(result.detail)
            say("probe  \(Terminal.pad(report.name, 14)) \(painted)")
            probes.append(["name": report.name, "status": result.status, "detail": result.detail])
            if result.code == .ok || result.code == .requestFailed { usable.insert(report.name) }
            worsen(result.code)
        }
        document["probes"] = probes

        // 3. One request through the whole chain of usable plugins.
        let services = PluginServices()
        services.setLogHandler { level, plugin, message in
            FileHandle.standardError.write(Data("[\(plugin)] \(message)\n".utf8))
        }
        let plugins: [LoadedPlugin]
        do {
            plugins = try PluginLoader.load(manifest.filtered { $0.enabled && usable.contains($0.name) }, services: services)
        } catch {
            Terminal.error(error.description)
            return .refused
        }
        let traces = plugins.map { _ in Trace() }
        let chain: [any Interceptor] = zip(plugins, traces).map { Traced(inner: $0, trace: $1) }
        let subscription = services.subscribe { event in
            if let index = plugins.firstIndex(where: { $0.name == event.plugin }) { traces[index].event(event.name) }
        }
        let provider = options.provider(chain, services: services)
        let outcome = Locked<Result<Response, NetworkError>?>(nil)
        let semaphore = DispatchSemaphore(value: 0)
        Task {
            let result = await provider.request(options.target).result
            outcome.withLock { $0 = result }
            semaphore.signal()
        }
        semaphore.wait()
        subscription.cancel()
        let url = options.url?.absoluteString ?? CLITarget.stubURL.absoluteString
        say("chain  \(options.method.rawValue) \(url)" + (options.url == nil ? " (offline stub)" : ""))
        var steps: [[String: Any]] = []
        for (index, plugin) in plugins.enumerated() {
            let trace = traces[index]
            let micros = Double(trace.take()) / 1000
            var did = trace.actions
            if !trace.events.isEmpty { did.append("events: " + trace.events.joined(separator: ", ")) }
            steps.append(["position": index + 1, "name": plugin.name, "did": did, "microseconds": micros])
            let summary = did.isEmpty ? Terminal.dim("no change") : did.joined(separator: "; ")
            say("  \(index + 1)  \(Terminal.pad(plugin.name, 13)) \(summary)  " + Terminal.dim(String(format: "%.0f µs", micros)))
        }
        document["chain"] = steps
        switch outcome.withLock({ $0 }) {
        case .success(let response):
            let request = response.request
            say("request  \(request?.httpMethod ?? "?") \(request?.url?.absoluteString ?? url)")
            let headers = (request?.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { HTTPHeader(name: $0.key, value: $0.value) }
            for header in headers { say("  \(Traced.show(header))") }
            say(
                "response  \(response.statusCode) (\(response.data.count) bytes)"
                    + (response.value(forHTTPHeaderField: "X-Cache").map { ", X-Cache: \($0)" } ?? ""))
            document["request"] = [
                "method": request?.httpMethod ?? "", "url": request?.url?.absoluteString ?? url,
                "headers": headers.map(Traced.show),
            ]
            document["response"] = ["status": response.statusCode, "bytes": response.data.count]
        case .failure(let error):
            say("request failed: " + Terminal.red(error.description))
            document["requestError"] = error.description
            worsen(.requestFailed)
        case nil:
            worsen(.requestFailed)
        }

        // 4. --bench N on the stub.
        if benchCount > 0 {
            let benchProvider = options.provider(chain, services: services, stub: true)
            for trace in traces {
                trace.stopRecording()
                _ = trace.take()
            }
            var perPlugin = Array(repeating: [Double](), count: plugins.count)
            var whole: [Double] = []
            let done = DispatchSemaphore(value: 0)
            let target = options.target
            let collected = Locked(BenchSamples())
            Task {
                let pipeline = benchProvider.request(target)
                for _ in 0..<benchCount {
                    let start = DispatchTime.now().uptimeNanoseconds
                    _ = await pipeline.result
                    let total = Double(DispatchTime.now().uptimeNanoseconds - start) / 1000
                    let plugins = traces.map { Double($0.take()) / 1000 }
                    collected.withLock { $0.add(total: total, plugins: plugins) }
                }
                done.signal()
            }
            done.wait()
            (whole, perPlugin) = collected.withLock { ($0.whole, $0.perPlugin.isEmpty ? Array(repeating: [], count: plugins.count) : $0.perPlugin) }
            func p(_ values: [Double], _ q: Double) -> Double {
                let sorted = values.sorted()
                return sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))]
            }
            say("bench  \(benchCount) requests on the stub transport (µs per request)")
            var rows: [[String: Any]] = []
            for (index, plugin) in plugins.enumerated() {
                say(
                    "  \(Terminal.pad(plugin.name, 14)) p50 \(String(format: "%8.2f", p(perPlugin[index], 0.5)))  p99 \(String(format: "%8.2f", p(perPlugin[index], 0.99)))"
                )
                rows.append(["name": plugin.name, "p50": p(perPlugin[index], 0.5), "p99": p(perPlugin[index], 0.99)])
            }
            say("  \(Terminal.pad("whole chain", 14)) p50 \(String(format: "%8.2f", p(whole, 0.5)))  p99 \(String(format: "%8.2f", p(whole, 0.99)))")
            document["bench"] = ["requests": benchCount, "plugins": rows, "chain": ["p50": p(whole, 0.5), "p99": p(whole, 0.99)]]
        }

        document["exitCode"] = worst.rawValue
        if json {
            Terminal.out(Terminal.json(document))
        } else {
            say("result " + (worst == .ok ? Terminal.green("ok") : Terminal.red("failed (exit \(worst.rawValue))")))
        }
        return worst
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
