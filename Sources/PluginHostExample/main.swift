// A runnable tour of PluginHost: a target enum, an interceptor, a pipeline mapping to a model.
//
//   swift run pluginhost-example                         # offline: answers come from stubs
//   swift run pluginhost-example http://127.0.0.1:8080   # against a running httpbin
//
// With a manifest, its plugins join the chain; with --serve it keeps sending (one request a
// second) and reloads the manifest on SIGHUP, printing what changed:
//
//   swift run pluginhost-example --manifest plugins.json --serve http://127.0.0.1:8080
//   kill -HUP <the pid it prints>
import Dispatch
import Foundation
import PluginHost
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `--manifest PATH`, `--serve` and an optional httpbin URL.
enum Options {
    static let arguments = Array(CommandLine.arguments.dropFirst())
    static let manifest: String? = arguments.firstIndex(of: "--manifest").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
    static let serve = arguments.contains("--serve")
    static let url: URL? = arguments.enumerated().first { index, argument in
        !argument.hasPrefix("--") && (index == 0 || arguments[index - 1] != "--manifest")
    }.flatMap { URL(string: $0.element) }
}

/// The API, one case per call.
enum HTTPBin: TargetType {
    case slideshow
    case echo(name: String)

    static let live = Options.url

    var baseURL: URL { Self.live ?? URL(string: "https://stub.invalid")! }
    var path: String {
        switch self {
        case .slideshow: return "json"
        case .echo: return "anything"
        }
    }
    var method: HTTPMethod {
        switch self {
        case .slideshow: return .get
        case .echo: return .post
        }
    }
    var task: RequestTask {
        switch self {
        case .slideshow: return .requestPlain
        case .echo(let name): return .requestParameters(parameters: ["name": name], encoding: JSONEncoding.default)
        }
    }
    var validationType: ValidationType { .successCodes }
    var pluginOptions: [String: String] { ["activity": "show"] }
    var sampleData: Data {
        switch self {
        case .slideshow: return Data(#"{"slideshow":{"title":"Sample Slide Show","author":"Stub","slides":[]}}"#.utf8)
        case .echo(let name): return Data(#"{"json":{"name":"\#(name)"}}"#.utf8)
        }
    }
}

/// The model the slideshow maps to.
struct Slideshow: Decodable, Sendable {
    let title: String
    let author: String
}

/// An in-process interceptor: stamps a header and reports each call on the event sink.
struct Stamp: Interceptor {
    var name: String { "stamp" }
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.setHeader("X-Client", "pluginhost-example")
        return .proceed
    }
    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        let status = result.response.map { String($0.statusCode) } ?? "failed"
        context.services.emit("done", fields: ["path": context.target.path, "status": status])
    }
}

/// Writes a line to standard output at once (unbuffered, also into a pipe).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let stubs: Provider<HTTPBin>.StubClosure = { _ in HTTPBin.live == nil ? .immediate : .never }
let provider: Provider<HTTPBin>
if let manifest = Options.manifest {
    do {
        provider = try Provider<HTTPBin>(manifest: URL(fileURLWithPath: manifest), before: [Stamp()], stubClosure: stubs)
    } catch {
        say("error: \(error)")
        exit(2)
    }
} else {
    provider = Provider<HTTPBin>(stubClosure: stubs, interceptors: [Stamp()])
}
let subscription = provider.services.subscribe { event in
    say("event \(event.plugin).\(event.name) path=\(event.fields["path"] ?? "") status=\(event.fields["status"] ?? "")")
}

do {
    let show = try await provider.request(.slideshow).map(Slideshow.self, atKeyPath: "slideshow").value
    say("slideshow: \(show.title) by \(show.author)")
    let name = try await provider.request(.echo(name: "Ann")).mapString(atKeyPath: "json.name").value
    say("echoed name: \(name)")
} catch {
    say("error: \(error)")
    exit(1)
}
subscription.cancel()

if Options.serve {
    // Reload on SIGHUP: the running chain keeps serving if the new manifest is refused.
    signal(SIGHUP, SIG_IGN)
    let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .main)
    hangup.setEventHandler {
        do {
            say("reloaded: \(try provider.reloadPlugins())")
        } catch {
            say("reload refused, generation \(provider.pluginGeneration) keeps serving: \(error)")
        }
    }
    hangup.resume()
    say("serving with plugins \(provider.interceptors.map(\.name).joined(separator: ",")); reload with: kill -HUP \(getpid())")
    while true {
        let status = await provider.request(.slideshow).result.map { String($0.statusCode) }
        let outcome = (try? status.get()) ?? "failed"
        say("generation \(provider.pluginGeneration): slideshow \(outcome)")
        try? await Task.sleep(nanoseconds: 1_000_000_000)
    }
}
