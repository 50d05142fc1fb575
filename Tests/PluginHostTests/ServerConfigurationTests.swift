import Foundation
import PluginHost
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A target that reads its base URL from the server layer, as the seeds' WebService does.
struct ServerTarget: TargetType {
    let server: ServerConfiguration
    var path: String = "anything"
    var task: RequestTask = .requestPlain
    var headers: [String: String]?
    var baseURL: URL { server.baseURL }
    var method: HTTPMethod { .get }
}

@Suite("Server layer")
struct ServerConfigurationTests {
    @Test func switchesEnvironmentsAtRunTime() async throws {
        let dev = try TestServer.url()
        let prod = try TestServer.second()
        let server = ServerConfiguration(baseURL: dev, environments: ["dev": dev, "prod": prod])
        let provider = Provider<ServerTarget>(server: server)
        let first = try echo(try await provider.request(ServerTarget(server: server)).value)
        try server.use(environment: "prod")
        #expect(server.snapshot.environment == "prod")
        let second = try echo(try await provider.request(ServerTarget(server: server)).value)
        #expect(first.url.hasPrefix(dev.absoluteString))
        #expect(second.url.hasPrefix(prod.absoluteString))
    }

    @Test func unknownEnvironmentIsRefusedByName() throws {
        let server = ServerConfiguration(baseURL: try TestServer.url(), environments: ["dev": try TestServer.url()])
        #expect(throws: ServerConfiguration.ConfigurationError.unknownEnvironment("staging", known: ["dev"])) {
            try server.use(environment: "staging")
        }
        #expect(
            ServerConfiguration.ConfigurationError.unknownEnvironment("staging", known: ["dev"]).description
                == "unknown environment \"staging\"; known: dev")
    }

    /// `setHeader` compares names without case: removing `authorization` removes `Authorization`
    /// (the old token stayed on every request), and setting it replaces it (both spellings went
    /// on, one chosen by dictionary order).
    @Test func setHeaderMatchesNamesWithoutCase() {
        let server = ServerConfiguration(baseURL: URL(string: "https://api.example.invalid")!, headers: ["Authorization": "Bearer old"])
        server.setHeader("authorization", nil)
        #expect(server.headers.isEmpty)
        server.setHeader("Authorization", "Bearer old")
        server.setHeader("AUTHORIZATION", "Bearer new")
        #expect(server.headers == ["AUTHORIZATION": "Bearer new"])
    }

    /// The known names of an unknown environment are sorted, so the error compares equal run to run.
    @Test func anUnknownEnvironmentListsTheKnownSorted() {
        let url = URL(string: "https://h.invalid")!
        let server = ServerConfiguration(baseURL: url, environments: ["dev": url, "prod": url, "qa": url, "stage": url])
        #expect(throws: ServerConfiguration.ConfigurationError.unknownEnvironment("x", known: ["dev", "prod", "qa", "stage"])) {
            try server.use(environment: "x")
        }
    }

    @Test func defaultHeadersAndParametersMergeAndTargetWins() async throws {
        let server = ServerConfiguration(
            baseURL: try TestServer.url(),
            headers: ["X-Client": "server", "X-Shared": "server"],
            parameters: ["lang": "en", "page": 1])
        let provider = Provider<ServerTarget>(server: server)
        let target = ServerTarget(
            server: server, task: .requestParameters(parameters: ["page": 5], encoding: URLEncoding.default),
            headers: ["X-Shared": "target"])
        let e = try echo(try await provider.request(target).value)
        #expect(e.header("X-Client") == "server")
        #expect(e.header("X-Shared") == "target")
        #expect(e.args?["lang"] == .string("en"))
        #expect(e.args?["page"] == .string("5"))
        // A plain task gets the defaults in its query string.
        let plain = try echo(try await provider.request(ServerTarget(server: server)).value)
        #expect(plain.args?["lang"] == .string("en"))
        #expect(plain.args?["page"] == .string("1"))
    }

    /// A server layer's default parameter that a query cannot carry (NaN) fails the request as a
    /// target's own does (it went as `r=nan` on a task the defaults are added to the query of).
    @Test func aDefaultParameterAQueryCannotCarryIsRefused() async throws {
        let server = ServerConfiguration(baseURL: try TestServer.url(), parameters: ["r": Double.nan])
        let provider = Provider<ServerTarget>(stubClosure: { _ in .immediate }, server: server)
        // A task whose defaults go in the query beside a body of its own.
        let result = await provider.request(ServerTarget(server: server, task: .requestData(Data("x".utf8)))).result
        guard case .failure(.parameterEncoding(let error)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(error as? ParameterEncodingError == .invalidQueryValue(keyPath: "r", type: "Double (nan)"))
    }

    @Test func defaultTimeoutApplies() async throws {
        let server = ServerConfiguration(baseURL: try TestServer.url(), timeout: 0.5)
        let provider = Provider<ServerTarget>(server: server)
        let result = await provider.request(ServerTarget(server: server, path: "delay/3")).result
        guard case .failure(let error) = result else {
            Issue.record("expected a timeout, got \(result)")
            return
        }
        #expect(error.isTimeout)
    }

    @Test func changesApplyToRequestsStartedAfterwards() async throws {
        let one = try TestServer.url()
        let two = try TestServer.second()
        let server = ServerConfiguration(baseURL: one)
        let provider = Provider<ServerTarget>(server: server)
        async let slow = provider.request(ServerTarget(server: server, path: "delay/1")).value
        try await Task.sleep(nanoseconds: 200_000_000)
        server.baseURL = two
        server.setHeader("X-After", "yes")
        let later = try echo(try await provider.request(ServerTarget(server: server)).value)
        let early = try echo(try await slow)
        #expect(early.url.hasPrefix(one.absoluteString))
        #expect(early.header("X-After") == nil)
        #expect(later.url.hasPrefix(two.absoluteString))
        #expect(later.header("X-After") == "yes")
    }

    @Test func concurrentSwitchingIsSafeAndConsistent() async throws {
        let one = try TestServer.url()
        let two = try TestServer.second()
        let server = ServerConfiguration(baseURL: one)
        let provider = Provider<ServerTarget>(server: server)
        let urls = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<40 {
                group.addTask {
                    if index % 4 == 0 { server.baseURL = index % 8 == 0 ? one : two }
                    return try echo(try await provider.request(ServerTarget(server: server)).value).url
                }
            }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        #expect(urls.count == 40)
        #expect(urls.allSatisfy { $0.hasPrefix(one.absoluteString) || $0.hasPrefix(two.absoluteString) })
    }
}
