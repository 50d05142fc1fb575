// pluginhost-bench: the cost of the provider and its plugins, measured in one run.
//
//   swift build -c release && swift run -c release pluginhost-bench [--requests N] [--rounds R]
//
// Every figure that matters is a ratio or a difference measured in the same run: the machine
// is shared and noisy, so absolute numbers do not carry across machines.
import Dispatch
import Foundation
import PluginHost
import PluginSDK

struct Options {
    var requests = 20_000
    var rounds = 5
    var binDirectory: String?

    init(_ arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--requests": requests = Int(iterator.next() ?? "") ?? requests
            case "--rounds": rounds = Int(iterator.next() ?? "") ?? rounds
            case "--bin-dir": binDirectory = iterator.next()
            default:
                FileHandle.standardError.write(Data("usage: pluginhost-bench [--requests N] [--rounds R] [--bin-dir DIR]\n".utf8))
                exit(2)
            }
        }
    }
}

/// A target for the stub transport.
struct StubTarget: TargetType {
    var baseURL: URL { URL(string: "http://127.0.0.1:9/")! }
    var path: String { "bench" }
    var method: HTTPMethod { .get }
    var sampleData: Data { Data(#"{"ok":true}"#.utf8) }
}

/// An in-process interceptor that does nothing in every hook.
struct InProcessNoop: Interceptor {
    var name: String { "noop" }
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction { .proceed }
    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {}
    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {}
    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction { .proceed }
}

/// Microseconds per request for `requests` sequential stubbed requests.
func measure(_ provider: Provider<StubTarget>, requests: Int) async -> [Double] {
    var samples: [Double] = []
    samples.reserveCapacity(requests)
    let pipeline = provider.request(StubTarget())
    for _ in 0..<requests {
        let start = DispatchTime.now().uptimeNanoseconds
        _ = try? await pipeline.value
        samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
    }
    return samples.sorted()
}

func percentile(_ sorted: [Double], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

func format(_ value: Double) -> String { String(format: "%.2f", value) }

let options = Options(CommandLine.arguments)
let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
let binDirectory = options.binDirectory ?? executable.deletingLastPathComponent().path
let noopPath = binDirectory + "/libNoopTestPlugin.so"

let services = PluginServices()
let library: PluginLibrary
do {
    library = try PluginLibrary.open(path: noopPath, checkPermissions: false)
} catch {
    FileHandle.standardError.write(Data("error: \(error)\nbuild the fixtures first: swift build -c release\n".utf8))
    exit(1)
}
let loaded6: [any Interceptor] = try (0..<6).map { _ in try LoadedPlugin(library: library, configJSON: Data("{}".utf8), services: services) }
let scenarios: [(String, [any Interceptor])] = [
    ("0 interceptors", []),
    ("6 in-process no-op", (0..<6).map { _ in InProcessNoop() }),
    ("6 loaded no-op (ABI)", loaded6),
]

print("pluginhost-bench: \(options.requests) stubbed requests per scenario, \(options.rounds) rounds, \(ProcessInfo.processInfo.activeProcessorCount) cores")
var medians: [String: [Double]] = [:]
for round in 1...options.rounds {
    for (name, chain) in scenarios {
        let provider = Provider<StubTarget>(stubClosure: Provider.immediatelyStub, interceptors: chain, services: services)
        _ = await measure(provider, requests: min(1000, options.requests))
        let samples = await measure(provider, requests: options.requests)
        medians[name, default: []].append(percentile(samples, 0.5))
        print("round \(round)  \(name.padding(toLength: 24, withPad: " ", startingAt: 0))  p50 \(format(percentile(samples, 0.5))) µs  p99 \(format(percentile(samples, 0.99))) µs")
    }
}

@MainActor func summary(_ name: String) -> (min: Double, median: Double, max: Double) {
    let values = (medians[name] ?? []).sorted()
    return (values.first ?? .nan, percentile(values, 0.5), values.last ?? .nan)
}

print("")
print("scenario                  p50 µs/request (min / median / max over rounds)")
for (name, _) in scenarios {
    let s = summary(name)
    print("\(name.padding(toLength: 24, withPad: " ", startingAt: 0))  \(format(s.min)) / \(format(s.median)) / \(format(s.max))")
}
// Per round: (loaded - in-process) / 24 hook calls = what crossing the ABI adds to one hook call.
let perHook = zip(medians["6 loaded no-op (ABI)"] ?? [], medians["6 in-process no-op"] ?? []).map { ($0 - $1) * 1000 / 24 }.sorted()
let inProcessPerHook = zip(medians["6 in-process no-op"] ?? [], medians["0 interceptors"] ?? []).map { ($0 - $1) * 1000 / 24 }.sorted()
print("")
print("ABI cost added to one hook call: \(String(format: "%.0f", percentile(perHook, 0.5))) ns (min \(String(format: "%.0f", perHook.first ?? .nan)), max \(String(format: "%.0f", perHook.last ?? .nan)))")
print("in-process hook call:            \(String(format: "%.0f", percentile(inProcessPerHook, 0.5))) ns")
let json: [String: Double] = [
    "stub_us_p50_0": summary("0 interceptors").median,
    "stub_us_p50_inprocess_noop6": summary("6 in-process no-op").median,
    "stub_us_p50_noop6": summary("6 loaded no-op (ABI)").median,
    "abi_hook_ns": percentile(perHook, 0.5),
]
let data = try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])
print("BENCH_JSON " + String(decoding: data, as: UTF8.self))
