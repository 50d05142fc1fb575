// A runnable tour of PluginHost: a target enum, an interceptor, a pipeline mapping to a model.
//
//   swift run pluginhost-example                         # offline: answers come from stubs
//   swift run pluginhost-example http://127.0.0.1:8080   # against a running httpbin
import Foundation
import PluginHost
import PluginSDK

/// The API, one case per call.
enum HTTPBin: TargetType {
    case slideshow
    case echo(name: String)

    static let live = CommandLine.arguments.dropFirst().first.flatMap(URL.init(string:))

    var baseURL: URL { Self.live ?? URL(string: "http://stub.invalid")! }
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

let provider = Provider<HTTPBin>(stubClosure: { _ in HTTPBin.live == nil ? .immediate : .never }, interceptors: [Stamp()])
let subscription = provider.services.subscribe { event in
    print("event \(event.plugin).\(event.name) path=\(event.fields["path"] ?? "") status=\(event.fields["status"] ?? "")")
}

do {
    let show = try await provider.request(.slideshow).map(Slideshow.self, atKeyPath: "slideshow").value
    print("slideshow: \(show.title) by \(show.author)")
    let name = try await provider.request(.echo(name: "Ann")).mapString(atKeyPath: "json.name").value
    print("echoed name: \(name)")
} catch {
    print("error: \(error)")
    exit(1)
}
subscription.cancel()
