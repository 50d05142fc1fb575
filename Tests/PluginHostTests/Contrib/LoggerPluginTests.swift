import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("logger plugin (loaded from its bundle)")
struct LoggerPluginTests {
    func log(_ f: PluginFixtures) -> String { (try? String(contentsOfFile: f.root + "/requests.log", encoding: .utf8)) ?? "" }

    @Test func basicLinesToAFileCreatedWithMode0600() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "basic", "output": "file", "file": f.root + "/requests.log"])])
        _ = try await provider.request(try Bin("get")).value
        _ = await provider.request(try Bin("get", base: closedPortURL())).result
        var info = stat()
        #expect(stat(f.root + "/requests.log", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let lines = log(f).split(separator: "\n").map(String.init)
        let base = try TestServer.url().absoluteString
        #expect(lines.count == 4)
        #expect(lines[0].hasPrefix("→ GET \(base)/get #"))
        #expect(lines[1].range(of: #"^← 200 get #\d+ \(\d+\.\d ms, \d+ bytes\)$"#, options: .regularExpression) != nil)
        #expect(lines[3].range(of: #"^← failed cannotConnect get #\d+ \(\d+\.\d ms\): "#, options: .regularExpression) != nil)
    }

    @Test func headersAreRedactedAndCURLIsRendered() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            (
                "logger",
                [
                    "level": "headers", "output": "file", "file": f.root + "/requests.log", "curl": true,
                    "redactHeaders": ["X-Api-Key"], "redactQuery": ["token", "Set-Cookie"],
                ]
            )
        ])
        _ = try await provider.request(
            try Bin(
                "response-headers",
                task: .requestParameters(parameters: ["token": "q-secret-1", "Set-Cookie": "sid=s-secret-2"], encoding: URLEncoding.default),
                headers: ["Authorization": "Bearer h-secret-3", "X-Api-Key": "k-secret-4", "Cookie": "c=c-secret-5", "X-Plain": "visible"])
        ).value
        let text = log(f)
        for secret in ["q-secret-1", "s-secret-2", "h-secret-3", "k-secret-4", "c-secret-5"] {
            #expect(!text.contains(secret), "\(secret) leaked into the log")
        }
        #expect(text.contains("  Authorization: <redacted>"))
        #expect(text.contains("  X-Api-Key: <redacted>"))
        #expect(text.contains("  X-Plain: visible"))
        #expect(text.contains("  Set-Cookie: <redacted>"))
        #expect(text.contains("token=<redacted>"))
        #expect(text.contains("-H 'Authorization: <redacted>'"))
        #expect(text.contains("curl -X GET"))
    }

    @Test func bodiesAreTruncatedAndBinaryBodiesShowOnlyTheirSize() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "maxBodyBytes": 64])])
        _ = try await provider.request(
            try Bin(
                "anything", method: .post, task: .requestData(Data(String(repeating: "x", count: 500).utf8)),
                headers: ["Content-Type": "text/plain"])
        ).value
        _ = try await provider.request(try Bin("bytes/300")).value
        let text = log(f)
        #expect(text.contains(String(repeating: "x", count: 64) + "… (truncated, 500 bytes in all)"))
        #expect(!text.contains(String(repeating: "x", count: 65)))
        #expect(text.contains("<300 bytes, not UTF-8>"))
    }

    @Test func secretsNeverAppearEvenInEchoedBodies() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([
            ("access-token", [:]), ("signature", [:]),
            ("logger", ["level": "body", "output": "file", "file": f.root + "/requests.log", "curl": true, "maxBodyBytes": 100_000]),
        ])
        let token = "tok-" + UUID().uuidString
        let secret = "sig-" + UUID().uuidString
        provider.services.setValue(token, forKey: "access_token")
        provider.services.setValue(secret, forKey: "signing_secret")
        for _ in 0..<3 {
            _ = try await provider.request(
                try Bin("anything", method: .post, task: .requestParameters(parameters: ["note": "hello"], encoding: JSONEncoding.default))
            ).value
        }
        let text = log(f)
        #expect(text.contains("\"note\""))
        #expect(!text.contains(token))
        #expect(!text.contains(secret))
        #expect(text.contains("<redacted>"))
    }

    @Test func hostLogSink() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["output": "host"])])
        let lines = LockedCounter()
        provider.services.setLogHandler { level, plugin, message in lines.append("\(level) \(plugin) \(message.prefix(6))") }
        _ = try await provider.request(try Bin("get")).value
        #expect(lines.log == ["info logger → GET ", "info logger ← 200 "])
    }

    @Test func offLogsNothing() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("logger", ["level": "off", "output": "file", "file": f.root + "/requests.log"])])
        _ = try await provider.request(try Bin("get")).value
        #expect(log(f).isEmpty)
    }
}
