import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("credentials plugin (loaded from its bundle)")
struct CredentialsPluginTests {
    func entry(port: Int? = nil, host: String = "127.0.0.1", preemptive: Bool = false, extra: [String: Any] = [:]) throws -> [String: Any] {
        var entry: [String: Any] = ["host": host, "user": "u", "password": "p", "preemptive": preemptive]
        entry["port"] = try port ?? TestServer.url().port!
        for (key, value) in extra { entry[key] = value }
        return entry
    }

    @Test func answersABasicChallengeForAListedHost() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("credentials", ["credentials": [try entry()]])])
        let response = try await provider.request(try Bin("basic-auth/u/p")).value
        #expect(response.statusCode == 200)
        #expect(try response.mapJSON()["authenticated"]?.boolValue == true)
    }

    /// A long password (a token used as one) is given as a compiled-in plugin gives it: the
    /// host's buffers were 1,024 bytes, and the loaded plugin's answer became a silent rejection.
    /// One past the buffers is rejected saying why, in the log.
    @Test func aLongPasswordIsGivenAndOnePastTheBuffersIsLogged() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let long = String(repeating: "x", count: 1100)
        let provider = try f.provider([("credentials", ["credentials": [try entry(extra: ["password": long])]])])
        #expect(try await provider.request(try Bin("basic-auth/u/\(long)")).value.statusCode == 200)

        let lines = LockedCounter()
        let services = PluginServices()
        services.setLogHandler { level, plugin, message in lines.append("\(level) \(plugin): \(message)") }
        let huge = String(repeating: "y", count: 70_000)
        let refusing = try f.provider([("credentials", ["credentials": [try entry(extra: ["password": huge])]])], services: services)
        #expect(try await refusing.request(try Bin("basic-auth/u/p")).value.statusCode == 401)
        #expect(
            lines.log.contains(
                "error credentials: credential: the answer does not fit the host's buffers (65536 bytes each; user 1, password 70000 bytes): "
                    + "the challenge is rejected"), "\(lines.log)")
    }

    /// The `Authorization` a preemptive entry sends up front is its first answer: a wrong
    /// password goes `rounds` times per attempt, not once more (the server's `401` to it was
    /// answered again with the same password, one failure more for a server that locks accounts).
    @Test func aPreemptiveAnswerIsARound() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        /// The status of one request to the fixture's counting Basic endpoint, and how many
        /// requests the endpoint saw for it.
        func statusAndRequests(rounds: Int, _ entries: [[String: Any]]) async throws -> (Int, Int?) {
            let provider = try f.provider([("credentials", ["rounds": rounds, "credentials": entries])])
            let parameters = ["key": "preemptive-\(UUID().uuidString)", "offer": "Basic"]
            let target = try Bin("fixture/digest", task: .requestParameters(parameters: parameters, encoding: URLEncoding.queryString))
            let response = try await provider.request(target).value
            return (response.statusCode, try response.mapJSON()["count"]?.intValue)
        }
        let wrong = try entry(preemptive: true, extra: ["password": "wrong"])
        for rounds in [1, 2] {
            let (status, requests) = try await statusAndRequests(rounds: rounds, [wrong])
            #expect(status == 401)
            #expect(requests == rounds, "rounds \(rounds)")
        }
        // A preemptive entry of another realm sent up front: the entry of the challenge's realm
        // has had no answer yet, and gives one.
        let otherRealm = try entry(preemptive: true, extra: ["password": "wrong", "realm": "admin"])
        let challenged = try entry(extra: ["realm": "fixture-digest@127.0.0.1"])
        let (inRealm, inRealmRequests) = try await statusAndRequests(rounds: 1, [otherRealm, challenged])
        #expect(inRealm == 200)
        #expect(inRealmRequests == 2)
        // The right password up front: one request.
        let (right, rightRequests) = try await statusAndRequests(rounds: 1, [try entry(preemptive: true)])
        #expect(right == 200)
        #expect(rightRequests == 1)
        // The app's own `Authorization` goes instead (the entry sends nothing up front): refused,
        // it is answered with the entry's credentials. It was counted as the entry's answer, and
        // with one round the challenge went unanswered.
        let provider = try f.provider([("credentials", ["rounds": 1, "credentials": [try entry(preemptive: true)]])])
        let parameters = ["key": "own-\(UUID().uuidString)", "offer": "Basic"]
        let own = try Bin(
            "fixture/digest", task: .requestParameters(parameters: parameters, encoding: URLEncoding.queryString),
            headers: ["Authorization": "Basic " + Data("u:app-wrong".utf8).base64EncodedString()])
        let answered = try await provider.request(own).value
        #expect(answered.statusCode == 200)
        #expect(try answered.mapJSON()["count"]?.intValue == 2)
    }

    /// `"port": null` is any port, as an absent one: it was port 0, and the entry never answered.
    @Test func aNullPortIsAnyPort() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        var any = try entry()
        any["port"] = NSNull()
        let provider = try f.provider([("credentials", ["credentials": [any]])])
        #expect(try await provider.request(try Bin("basic-auth/u/p")).value.statusCode == 200)
    }

    /// A proxy's `407` is never answered with a server's password: only an entry marked
    /// `proxy: true` answers it (through ABI 1.6's `ph_challenge.is_proxy`), and such an entry
    /// answers no server's `401`.
    @Test func aProxyIsAnsweredOnlyFromAProxyEntry() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let origin = URL(string: "http://origin.test")!
        let server: [String: Any] = ["host": "origin.test", "scheme": "http", "user": "svc", "password": "server-secret"]
        let proxy = ProxyChallengeTransport()
        let serverOnly = try f.provider([("credentials", ["credentials": [server]])], transport: proxy)
        let refused = try await serverOnly.request(try Bin("through/proxy", base: origin)).value
        #expect(refused.statusCode == 407)
        #expect(proxy.sent.withLock { $0.count } == 1)
        #expect(proxy.sent.withLock { $0.last?.value(forHTTPHeaderField: "Proxy-Authorization") } == nil)

        let answering = ProxyChallengeTransport()
        var proxyEntry = server
        proxyEntry["user"] = "proxy-user"
        proxyEntry["proxy"] = true
        let withProxy = try f.provider([("credentials", ["credentials": [server, proxyEntry]])], transport: answering)
        #expect(try await withProxy.request(try Bin("through/proxy", base: origin)).value.statusCode == 200)
        let answer = try #require(answering.sent.withLock { $0.last?.value(forHTTPHeaderField: "Proxy-Authorization") })
        #expect(answer.hasPrefix(#"Digest username="proxy-user", realm="proxy""#))

        // A proxy entry answers no server.
        let proxyOnly = try f.provider([("credentials", ["credentials": [try entry(extra: ["proxy": true])]])])
        #expect(try await proxyOnly.request(try Bin("basic-auth/u/p")).value.statusCode == 401)
    }

    @Test func realmMustMatchWhenGiven() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let matching = try f.provider([("credentials", ["credentials": [try entry(extra: ["realm": "Fake Realm"])]])])
        #expect(try await matching.request(try Bin("basic-auth/u/p")).value.statusCode == 200)
        let other = try f.provider([("credentials", ["credentials": [try entry(extra: ["realm": "Other Realm"])]])])
        #expect(try await other.request(try Bin("basic-auth/u/p")).value.statusCode == 401)
    }

    /// An entry for one realm answers that realm only: not a challenge without a realm, nor one
    /// with an empty realm (a loaded plugin was given both as no realm, and answered them).
    @Test func anEntryForOneRealmAnswersNoChallengeWithoutIt() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let entry: [String: Any] = ["host": "origin.test", "scheme": "http", "realm": "API", "user": "u", "password": "p"]
        for (challenge, answered) in [(#"Basic realm="API""#, true), ("Basic", false), (#"Basic realm="""#, false), (#"Basic realm="Other""#, false)]
        {
            let transport = ScriptedChallenges([(401, ["WWW-Authenticate": challenge])])
            let provider = try f.provider([("credentials", ["credentials": [entry]])], transport: transport)
            let response = try await provider.request(try Bin("x", base: URL(string: "http://origin.test")!)).value
            #expect(response.statusCode == (answered ? 200 : 401), "\(challenge)")
            #expect(transport.sent.withLock { $0.count } == (answered ? 2 : 1), "\(challenge)")
        }
        // An entry without a realm answers any.
        let any = ScriptedChallenges([(401, ["WWW-Authenticate": "Basic"])])
        let provider = try f.provider(
            [("credentials", ["credentials": [["host": "origin.test", "scheme": "http", "user": "u", "password": "p"]]])], transport: any)
        #expect(try await provider.request(try Bin("x", base: URL(string: "http://origin.test")!)).value.statusCode == 200)
    }

    /// An entry that names no scheme answers over https, and over plain http only for a loopback
    /// host: its password went in clear to any listed host over http, up front and in answers.
    /// `"scheme": "http"` says plain http is meant.
    @Test func anEntryWithoutASchemeSendsNoPasswordOverPlainHTTPToANetworkHost() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for preemptive in [false, true] {
            let entry: [String: Any] = ["host": "origin.test", "user": "u", "password": "p", "preemptive": preemptive]
            let transport = ScriptedChallenges([(401, ["WWW-Authenticate": #"Basic realm="API""#])])
            let provider = try f.provider([("credentials", ["credentials": [entry]])], transport: transport)
            let plain = try await provider.request(try Bin("x", base: URL(string: "http://origin.test")!)).value
            #expect(plain.statusCode == 401, "preemptive \(preemptive)")
            #expect(transport.sent.withLock { $0.map { $0.value(forHTTPHeaderField: "Authorization") } } == [nil], "preemptive \(preemptive)")
            // Over https the entry answers (up front too).
            let challenging = ScriptedChallenges([(401, ["WWW-Authenticate": #"Basic realm="API""#])])
            let overTLS = try f.provider([("credentials", ["credentials": [entry]])], transport: challenging)
            _ = try await overTLS.request(try Bin("x", base: URL(string: "https://origin.test")!)).value
            #expect(
                challenging.sent.withLock { $0.map { $0.value(forHTTPHeaderField: "Authorization") } }
                    == (preemptive ? ["Basic dTpw"] : [nil, "Basic dTpw"]), "preemptive \(preemptive)")
            var named = entry
            named["scheme"] = "http"
            let chosen = ScriptedChallenges([(401, ["WWW-Authenticate": #"Basic realm="API""#])])
            let meant = try f.provider([("credentials", ["credentials": [named]])], transport: chosen)
            // Up front, the password is the one answer the scripted `401` gets (a round).
            let answered = try await meant.request(try Bin("x", base: URL(string: "http://origin.test")!)).value
            #expect(answered.statusCode == (preemptive ? 401 : 200))
            #expect(
                chosen.sent.withLock { $0.map { $0.value(forHTTPHeaderField: "Authorization") } }
                    == (preemptive ? ["Basic dTpw"] : [nil, "Basic dTpw"]))
        }
    }

    /// A password from the environment loses the line break a variable made from a file ends
    /// with (it was sent with it, and refused); an empty variable gives no password.
    @Test func aPasswordFromTheEnvironmentLosesItsLineBreak() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let variable = "PLUGINHOST_TEST_CREDENTIALS_" + UUID().uuidString.prefix(8).uppercased()
        setenv(variable, "p\r\n", 1)
        defer { unsetenv(variable) }
        var fromEnvironment = try entry(extra: ["passwordEnv": variable])
        fromEnvironment["password"] = nil
        let provider = try f.provider([("credentials", ["credentials": [fromEnvironment]])])
        #expect(try await provider.request(try Bin("basic-auth/u/p")).value.statusCode == 200)
        setenv(variable, "", 1)
        let transport = ScriptedChallenges([(401, ["WWW-Authenticate": #"Basic realm="API""#])])
        let empty = try f.provider(
            [("credentials", ["credentials": [["host": "origin.test", "user": "u", "passwordEnv": variable]]])], transport: transport)
        #expect(try await empty.request(try Bin("x", base: URL(string: "https://origin.test")!)).value.statusCode == 401)
        #expect(transport.sent.withLock { $0.count } == 1)
    }

    /// A host past ASCII is listed in either form (its own, any case, or IDNA's `xn--`), and both
    /// a challenge (its host read as the URL holds it, `xn--`) and a preemptive answer (the host
    /// read back from the URL's string, decoded) find it: the one form matched one path only.
    @Test(arguments: ["bücher.example", "BÜCHER.example", "xn--bcher-kva.example"])
    func anInternationalHostIsListedInEitherForm(_ listed: String) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let challenged = ScriptedChallenges([(401, ["WWW-Authenticate": #"Basic realm="API""#])])
        let provider = try f.provider([("credentials", ["credentials": [["host": listed, "user": "u", "password": "p"]]])], transport: challenged)
        for base in ["https://bücher.example", "https://xn--bcher-kva.example"] {
            let response = try await provider.request(try Bin("x", base: try #require(URL(string: base)))).value
            #expect(response.statusCode == 200, "\(base)")
        }
        #expect(challenged.sent.withLock { $0.map { $0.value(forHTTPHeaderField: "Authorization") } } == [nil, "Basic dTpw", nil])
        let eager = ScriptedChallenges([])
        let preemptive = try f.provider(
            [("credentials", ["credentials": [["host": listed, "user": "u", "password": "p", "preemptive": true]]])], transport: eager)
        for base in ["https://bücher.example", "https://xn--bcher-kva.example", "https://bucher.example"] {
            _ = try await preemptive.request(try Bin("x", base: try #require(URL(string: base)))).value
        }
        #expect(eager.sent.withLock { $0.map { $0.value(forHTTPHeaderField: "Authorization") } } == ["Basic dTpw", "Basic dTpw", nil])
    }

    /// An IPv6 host is one host in each spelling, with or without brackets, in any of its forms,
    /// for an answer sent up front and for an answer to a challenge alike: a request's URL gives
    /// the host with brackets (`[::1]`), a challenge without them (`::1`), and each spelling of the
    /// entry answered one of the two only.
    @Test(arguments: ["::1", "[::1]", "0:0:0:0:0:0:0:1", "[0::1]"])
    func anIPv6HostIsOneHostInEachSpelling(_ host: String) async throws {
        /// Challenges a request without `Basic dTpw` (`u:p`), as a server on [::1] would.
        final class Challenging: Transport, Sendable {
            let sent = Locked([String]())
            func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
                let url = request.urlRequest.url!
                let authorization = request.urlRequest.value(forHTTPHeaderField: "Authorization")
                sent.withLock { $0.append(authorization ?? "none") }
                let answered = authorization == "Basic dTpw"
                return TransportResponse(
                    response: HTTPURLResponse(
                        url: url, statusCode: answered ? 200 : 401, httpVersion: "HTTP/1.1",
                        headerFields: answered ? [:] : ["WWW-Authenticate": #"Basic realm="r""#])!, data: Data())
            }
        }
        let f = try PluginFixtures()
        defer { f.remove() }
        let target = try Bin("private", base: URL(string: "http://[::1]:8080")!)
        for preemptive in [true, false] {
            let transport = Challenging()
            let provider = try f.provider(
                [("credentials", ["credentials": [["host": host, "user": "u", "password": "p", "preemptive": preemptive]]])], transport: transport)
            #expect(try await provider.request(target).value.statusCode == 200, "\(host), preemptive \(preemptive)")
            #expect(transport.sent.withLock { $0 } == (preemptive ? ["Basic dTpw"] : ["none", "Basic dTpw"]), "\(host), preemptive \(preemptive)")
        }
        // Another address is another host.
        let transport = Challenging()
        let other = try f.provider([("credentials", ["credentials": [["host": host, "user": "u", "password": "p"]]])], transport: transport)
        #expect(try await other.request(try Bin("private", base: URL(string: "http://[::2]:8080")!)).value.statusCode == 401)
    }

    @Test func neverAnswersForAnUnlistedHostOrPort() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let otherHost = try f.provider([("credentials", ["credentials": [try entry(host: "api.example.invalid")]])])
        #expect(try await otherHost.request(try Bin("basic-auth/u/p")).value.statusCode == 401)
        let otherPort = try f.provider([("credentials", ["credentials": [try entry(port: try TestServer.second().port!)]])])
        #expect(try await otherPort.request(try Bin("basic-auth/u/p")).value.statusCode == 401)
    }

    @Test func wrongPasswordIsNotRetriedForever() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("credentials", ["credentials": [try entry()]])])
        #expect(try await provider.request(try Bin("basic-auth/u/secret")).value.statusCode == 401)
    }

    @Test func preemptiveBasicForHiddenAuth() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let lazy = try f.provider([("credentials", ["credentials": [try entry()]])])
        #expect(try await lazy.request(try Bin("hidden-basic-auth/u/p")).value.statusCode == 404)
        let eager = try f.provider([("credentials", ["credentials": [try entry(preemptive: true)]])])
        #expect(try await eager.request(try Bin("hidden-basic-auth/u/p")).value.statusCode == 200)
    }

    @Test func passwordFromTheHostStore() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        var stored = try entry()
        stored["password"] = nil
        stored["passwordKey"] = "api_password"
        let provider = try f.provider([("credentials", ["credentials": [stored]])])
        provider.services.setValue("p", forKey: "api_password")
        #expect(try await provider.request(try Bin("basic-auth/u/p")).value.statusCode == 200)
    }

    /// A response to a request the host answered a challenge for is no anonymous response: a
    /// cache inside `credentials` does not store it shared (it served it, `X-Cache: hit`, after
    /// the password was changed: the response's request fields left the answer out).
    @Test func aResponseToAnAnsweredChallengeIsNotCachedShared() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        var stored = try entry()
        stored["password"] = nil
        stored["passwordKey"] = "api_password"
        let provider = try f.provider([("credentials", ["credentials": [stored]]), ("cache", [:])])
        provider.services.setValue("p", forKey: "api_password")
        let target = try Bin("basic-auth/u/p", options: ["cache": "60"])
        let first = try await provider.request(target).value
        #expect(first.statusCode == 200)
        provider.services.setValue("wrong", forKey: "api_password")
        let second = try await provider.request(target).value
        #expect(second.statusCode == 401)
        #expect(second.response?.value(forHTTPHeaderField: "X-Cache") != "hit")
    }

    /// A proxy's answer goes to the proxy alone: a response the host answered a `407` for is
    /// cached as any other (the origin saw no credentials).
    @Test func aResponseThroughAnAnsweredProxyIsCached() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let proxyEntry: [String: Any] = ["host": "origin.test", "user": "proxy-user", "password": "p", "proxy": true]
        let transport = ProxyChallengeTransport()
        let provider = try f.provider([("credentials", ["credentials": [proxyEntry]]), ("cache", [:])], transport: transport)
        let target = try Bin("through/proxy", options: ["cache": "60"], base: URL(string: "http://origin.test")!)
        #expect(try await provider.request(target).value.statusCode == 200)
        let second = try await provider.request(target).value
        #expect(second.statusCode == 200)
        #expect(second.response?.value(forHTTPHeaderField: "X-Cache") == "hit")
        #expect(transport.sent.withLock { $0.count } == 2)
    }

    @Test func authorizationIsDroppedOnACrossOriginRedirect() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("credentials", ["credentials": [try entry(preemptive: true)]])])
        let other = try TestServer.second().absoluteString + "/headers"
        let crossed = try await provider.request(
            try Bin("redirect-to", task: .requestParameters(parameters: ["url": other], encoding: URLEncoding.default))
        ).mapJSON().value
        #expect(crossed["headers"]?["Authorization"] == nil)
        #expect(crossed["headers"]?["Host"]?.stringValue == "127.0.0.1:\(try TestServer.second().port!)")
        let same = try await provider.request(
            try Bin("redirect-to", task: .requestParameters(parameters: ["url": "/headers"], encoding: URLEncoding.default))
        ).mapJSON().value
        #expect(same["headers"]?["Authorization"]?.stringValue == "Basic dTpw")
    }

    /// Digest challenges are answered too (RFC 7616, computed by the host); an unlisted host's are not.
    @Test func digestChallengesAreAnsweredForListedHostsOnly() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("credentials", ["credentials": [try entry()]])])
        let response = try await provider.request(try Bin("digest-auth/auth/u/p")).value
        #expect(response.statusCode == 200)
        #expect(response.request?.value(forHTTPHeaderField: "Authorization")?.hasPrefix(#"Digest username="u", "#) == true)
        let other = try f.provider([("credentials", ["credentials": [try entry(host: "api.example.invalid")]])])
        let refused = try await other.request(try Bin("digest-auth/auth/u/p")).value
        #expect(refused.statusCode == 401)
        #expect(refused.value(forHTTPHeaderField: "WWW-Authenticate")?.hasPrefix("Digest") == true)
    }
}
