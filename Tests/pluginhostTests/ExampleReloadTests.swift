import Dispatch
import Foundation
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `pluginhost-example --manifest … --serve` reloads its manifest on SIGHUP, as the README says.
@Suite("pluginhost-example reloads on SIGHUP")
struct ExampleReloadTests {
    /// Collects a child's standard output as it comes.
    final class Lines: Sendable {
        private let text = Locked("")
        func append(_ data: Data) { text.withLock { $0 += String(decoding: data, as: UTF8.self) } }
        var all: String { text.withLock { $0 } }

        /// Waits (at most `seconds`) for a line containing `fragment`, and returns it.
        func waitFor(_ fragment: String, seconds: Double = 60) async throws -> String? {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if let line = all.split(separator: "\n").first(where: { $0.contains(fragment) }) { return String(line) }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            return nil
        }
    }

    @Test func sighupReloadsAndARefusedManifestKeepsTheChain() async throws {
        let workspace = try await Workspace.make(bundling: ["Activity", "Logger"])
        let manifest = workspace.root + "/manifest.json"
        func write(_ json: String) throws {
            try json.write(toFile: manifest, atomically: true, encoding: .utf8)
            chmod(manifest, 0o644)
        }
        try write(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}]}"#)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLI.binDirectory + "/pluginhost-example")
        process.arguments = ["--manifest", manifest, "--serve"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        let lines = Lines()
        out.fileHandleForReading.readabilityHandler = { handle in lines.append(handle.availableData) }
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
            out.fileHandleForReading.readabilityHandler = nil
        }
        let serving = try await lines.waitFor("serving with plugins")
        #expect(serving == "serving with plugins stamp,activity; reload with: kill -HUP \(process.processIdentifier)", "\(lines.all)")
        #expect(try await lines.waitFor("generation 1: slideshow 200") != nil, "\(lines.all)")

        try write(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "activity"}, {"name": "logger", "config": {"level": "off"}}]}"#)
        kill(process.processIdentifier, SIGHUP)
        let reloaded = try await lines.waitFor("reloaded:")
        #expect(reloaded == "reloaded: generation 2: added logger", "\(lines.all)")
        #expect(try await lines.waitFor("generation 2: slideshow 200") != nil, "\(lines.all)")

        try write(#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "nosuch"}]}"#)
        kill(process.processIdentifier, SIGHUP)
        let refused = try await lines.waitFor("reload refused")
        #expect(
            refused
                == "reload refused, generation 2 keeps serving: \(manifest): plugins[0].name: plugin \"nosuch\": no nosuch.plugin in \(workspace.plugins)",
            "\(lines.all)")
        let before = lines.all.components(separatedBy: "generation 2: slideshow 200").count
        #expect(await eventuallyAsync { lines.all.components(separatedBy: "generation 2: slideshow 200").count > before }, "\(lines.all)")
    }
}

/// Polls `condition` every 50 ms for at most `seconds`.
func eventuallyAsync(_ seconds: Double = 30, _ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: 50_000_000)
    }
    return condition()
}
