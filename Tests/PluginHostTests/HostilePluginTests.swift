import Foundation
import PluginHost
import PluginSDK
import Testing

/// Plugins that misbehave get typed errors, never a crash or an injected header.
@Suite("Hostile plugins")
struct HostilePluginTests {
    func provider(_ f: PluginFixtures, mode: String, timeout: Double? = nil) throws -> Provider<Bin> {
        if !FileManager.default.fileExists(atPath: f.plugins + "/hostile.plugin") { try f.bundle("HostileTestPlugin") }
        return try Provider<Bin>(
            manifest: try f.manifest([["name": "hostile", "config": ["mode": mode]]], file: "\(mode).json"),
            requestClosure: { _, request in
                var request = request
                if let timeout { request.timeoutInterval = timeout }
                return request
            })
    }

    func failure(_ provider: Provider<Bin>) async throws -> NetworkError? {
        let result = await provider.request(try Bin("get")).result
        if case .failure(let error) = result { return error }
        Issue.record("expected a failure, got \(result)")
        return nil
    }

    @Test func a100KBErrorMessageIsTruncated() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        guard case .interceptor("hostile", .prepare, let message) = try await failure(try provider(f, mode: "big-error")) else {
            Issue.record("not an interceptor error")
            return
        }
        #expect(message.utf8.count == 4096)
        #expect(message.hasPrefix("ABCDEFGHIJKLMNOPQRSTUVWXYZABC"))
    }

    /// A hook's message stays its own when the app's code, run inside the hook (a log handler),
    /// loads a plugin whose `create` fails on the same thread: the nested call wrote into the
    /// same thread's buffer, and the outer hook failed with the other plugin's message.
    @Test func aNestedHookCallLeavesTheOuterHooksMessage() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("HostileTestPlugin")
        let refusing = try f.manifest([["name": "hostile", "config": ["mode": "refuse-create"]]], file: "refusing.json")
        let nestedError = LockedBox<String?>(nil)
        let services = PluginServices()
        services.setLogHandler { _, _, message in
            guard message == "nest" else { return }
            do {
                _ = try Provider<Bin>(manifest: refusing)
            } catch {
                nestedError.set("\(error)")
            }
        }
        let provider = try Provider<Bin>(
            manifest: try f.manifest([["name": "hostile", "config": ["mode": "log-then-fail"]]], file: "outer.json"), services: services)
        guard case .interceptor("hostile", .prepare, let message) = try await failure(provider) else {
            Issue.record("not an interceptor error")
            return
        }
        #expect(nestedError.get()?.contains("refused by create") == true, "\(nestedError.get() ?? "no nested error")")
        #expect(message == "the outer hook's own message")
    }

    @Test func anErrorWithoutAMessageIsStillNamed() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        guard case .interceptor("hostile", .prepare, let message) = try await failure(try provider(f, mode: "silent-error")) else {
            Issue.record("not an interceptor error")
            return
        }
        #expect(message == "prepare failed with status 1 and no message")
    }

    /// A plugin that points `error->data` at memory of its own is not read through it: the host
    /// reads only its own buffer, and says the message was not written there.
    @Test func anErrorPointingOutsideTheHostsBufferIsNotRead() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        guard case .interceptor("hostile", .prepare, let message) = try await failure(try provider(f, mode: "repoint-error")) else {
            Issue.record("not an interceptor error")
            return
        }
        #expect(message == "prepare failed with status 1; its message was not written into the host's buffer")
    }

    @Test func aSlowHookCountsAgainstTheRequestTimeout() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let error = try await failure(try provider(f, mode: "slow", timeout: 1))
        guard case .underlying(let transport, nil) = error else {
            Issue.record("got \(String(describing: error))")
            return
        }
        #expect(transport.kind == .timedOut)
        #expect(transport.message.hasPrefix("the request's timeout (1.0 s) ran out in interceptor hooks"))
        // With a longer timeout the same slow hook is fine.
        #expect(try await provider(f, mode: "slow", timeout: 10).request(try Bin("get")).value.statusCode == 200)
    }

    @Test(arguments: [
        ("crlf", "the host refused a CR/LF header value"), ("bad-name", "the host refused a bad header name"),
        ("bad-url", "the host refused an invalid URL"),
    ])
    func invalidEditsAreRefused(mode: String, message: String) async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        guard case .interceptor("hostile", .prepare, let reported) = try await failure(try provider(f, mode: mode)) else {
            Issue.record("not an interceptor error")
            return
        }
        #expect(reported == message)
    }

    /// Bytes that are no buffer (NULL data with a length; a length of SIZE_MAX, as C makes it
    /// from a size that went below 0) change nothing through the setters of a request's body and
    /// of the store: the 1.0 setters, which return nothing, leave them as they were, and the
    /// checked setters of ABI 1.5 and `request_respond` say PH_INVALID (2). (The other setters:
    /// ``BorrowedEditBytesTests``.)
    @Test func bytesThatAreNoBufferChangeNothing() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("HostileTestPlugin")
        let services = PluginServices()
        services.setValue("secret", forKey: "k")
        let plugins = try PluginLoader.load(
            manifest: try f.manifest([["name": "hostile", "config": ["mode": "unbuffered"]]]), services: services)
        let target = try Bin("post", method: .post, task: .requestData(Data("keep".utf8)))
        let response = try await Provider<Bin>(interceptors: plugins).request(target).value
        #expect(
            response.value(forHTTPHeaderField: "X-Findings")
                == "respond 2, set_body kept yes, checked 2 2, store secret 2, then 0")
        // The checked setter with a buffer changed the body; the refused store left the key alone
        // and stored nothing under the empty name.
        #expect(String(decoding: response.data, as: UTF8.self) == "new")
        #expect(services.value(forKey: "k") == "secret")
        #expect(services.value(forKey: "") == nil)
    }

    /// A Swift plugin that keeps its request and response past their hooks finds them retired:
    /// they read nothing and their setters throw, and the host's state (freed once the request
    /// ends, its memory then another request's) is never reached through them. The next request's
    /// hooks get views of their own.
    @Test func viewsKeptPastTheirHookAreRetired() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "alpha", "config": ["keep": true]]]))
        let late = "a request or response was used after its hook returned (a hook's request and response are valid only during the call)"
        for _ in 0..<3 {
            let response = try await provider.request(try Bin("get")).value
            #expect(
                response.value(forHTTPHeaderField: "X-Kept")
                    == "request: method  url  headers 0; set \(late); response: status 0 headers 0 request headers unknown set \(late)")
            #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "alpha")
            let echoed = try JSONSerialization.jsonObject(with: response.data) as? [String: Any]
            #expect((echoed?["headers"] as? [String: String])?["X-Order"] == "alpha")
        }
    }

    /// Every accessor called with a NULL request, result or host table reads nothing and
    /// changes nothing (pluginhost.h says what each returns), and the host does not crash.
    @Test func nullHandlesAreNone() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("HostileTestPlugin")
        let services = PluginServices()
        let events = LockedCounter()
        let subscription = services.subscribe { events.append($0.name) }
        defer { withExtendedLifetime(subscription) {} }
        let plugins = try PluginLoader.load(
            manifest: try f.manifest([["name": "hostile", "config": ["mode": "null-handles"]]]), services: services)
        let response = try await Provider<Bin>(interceptors: plugins).request(try Bin("get")).value
        #expect(response.statusCode == 200)
        let findings = [
            "request: method 0 url 0 set_method 2 set_url 2 header 3 count 0 at 3 set 2 add 2 remove 2 headers 0 edit 2 bad 99",
            "body 3 set_body 2 timeout inf respond 2 background 2;",
            "result: failure 7 status 0 header 3 count 0 at 3 set 2 add 2 remove 2 body 0 set_body 2 replace 2 retry 2 headers 0",
            "request_headers 0 redirected 0;",
            "host: kv_get -1 kv_set 2 declare 2 subscribers 0; borrowed untouched",
        ]
        #expect(response.value(forHTTPHeaderField: "X-Findings") == findings.joined(separator: " "))
        #expect(services.value(forKey: "X-A") == nil)
        #expect(events.log.isEmpty)
    }
}
