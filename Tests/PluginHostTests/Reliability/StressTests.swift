import Foundation
import PluginHost
import PluginSDK
import Testing

/// Open file descriptors of this process, from `/dev/fd` (Linux and macOS alike).
func openFileDescriptors() throws -> Int {
    try FileManager.default.contentsOfDirectory(atPath: "/dev/fd").count - loadedLibraryFiles()
}

/// The descriptors that hold loaded plugin libraries' verified bytes (sealed memory files on
/// Linux): one per library, open for as long as the library stays loaded, which is for good.
func loadedLibraryFiles() -> Int {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    let targets = names.map { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)) ?? "" }
    return targets.filter { $0.hasPrefix("/memfd:pluginhost:") }.count
}

/// Stress through the six loaded contrib plugins. Runs alone (`Tests/test` gives this suite its own
/// `swift test` run) so the file descriptor count is this test's only.
@Suite("StressTests", .serialized)
struct StressTests {
    static var requests: Int { Int(ProcessInfo.processInfo.environment["PLUGINHOST_STRESS_REQUESTS"] ?? "") ?? 10_000 }

    enum Kind: CaseIterable { case getArgs, postJSON, status, postForm, cancelled }

    @Test func stressEveryRequestCompletesExactlyOnceAndNothingLeaks() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let token = "stress-token-" + UUID().uuidString
        let secret = "stress-secret-" + UUID().uuidString
        let password = "stress-password-" + UUID().uuidString
        // Warm up first: the first network use of a process opens descriptors that live as long
        // as the process (libdispatch's event loop); the baseline is taken after them.
        do {
            let warmup = Provider<Bin>()
            _ = try await warmup.request(try Bin("get")).value
        }
        try await Task.sleep(nanoseconds: 500_000_000)
        let fdsBefore = try openFileDescriptors()
        let librariesBefore = loadedLibraryFiles()
        let total = Self.requests
        let completions = Locked([Int: Int]())
        let mismatches = LockedCounter()
        let activity = Locked((began: 0, ended: 0, negative: 0))
        let started = Date()
        do {
            let host = try TestServer.url()
            let provider = try f.provider([
                ("activity", [:]), ("cache", [:]), ("access-token", ["required": true]),
                (
                    "credentials",
                    ["credentials": [["host": "127.0.0.1", "port": host.port!, "user": "stress", "password": password, "preemptive": true]]]
                ),
                ("signature", [:]),
                ("logger", ["level": "body", "output": "file", "file": f.root + "/stress.log", "curl": true, "maxBodyBytes": 100_000]),
            ])
            provider.services.setValue(token, forKey: "access_token")
            provider.services.setValue(secret, forKey: "signing_secret")
            let subscription = provider.services.subscribe { event in
                activity.withLock { state in
                    if event.name == "began" { state.began += 1 } else if event.name == "ended" { state.ended += 1 }
                    if (Int(event.fields["inFlight"] ?? "0") ?? 0) < 0 { state.negative += 1 }
                }
            }
            defer { subscription.cancel() }
            let next = Locked(0)
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<64 {
                    group.addTask {
                        while true {
                            let index = next.withLock { value -> Int in
                                defer { value += 1 }
                                return value
                            }
                            guard index < total else { return }
                            await Self.one(index, provider: provider, completions: completions, mismatches: mismatches)
                        }
                    }
                }
            }
            subscription.cancel()
            #expect(await eventually { activity.withLock { $0.began == $0.ended } })
        }
        let counts = completions.withLock { $0 }
        let duplicated = counts.values.filter { $0 > 1 }.count
        let lost = total - counts.count
        #expect(counts.count == total, "lost \(lost)")
        #expect(duplicated == 0)
        #expect(mismatches.log.isEmpty, "\(mismatches.log.prefix(5))")
        let (began, ended, negative) = activity.withLock { ($0.began, $0.ended, $0.negative) }
        #expect(began == ended)
        #expect(negative == 0)
        // The provider is gone: its sessions, connections and log file close.
        let released = await eventually(30) { ((try? openFileDescriptors()) ?? .max) <= fdsBefore }
        let fdsAfter = try openFileDescriptors()
        #expect(released, "fds before \(fdsBefore), after \(fdsAfter)")
        // The six libraries' verified bytes stay open, as the libraries stay loaded; nothing more.
        #expect(loadedLibraryFiles() - librariesBefore <= 6, "library files before \(librariesBefore), after \(loadedLibraryFiles())")
        let log = (try? String(contentsOfFile: f.root + "/stress.log", encoding: .utf8)) ?? ""
        #expect(log.contains("→ POST"))
        #expect(!log.contains(token))
        #expect(!log.contains(secret))
        #expect(!log.contains(password))
        print(
            "stress: \(total) requests sent, \(counts.count) completed, \(duplicated) duplicated, \(lost) lost; "
                + "activity began \(began) ended \(ended); fds before \(fdsBefore) after \(fdsAfter); "
                + String(format: "%.1f s", Date().timeIntervalSince(started)))
    }

    static func one(_ index: Int, provider: Provider<Bin>, completions: Locked<[Int: Int]>, mismatches: LockedCounter) async {
        let kind = index % 20 == 7 ? Kind.cancelled : [Kind.getArgs, .postJSON, .status, .postForm][index % 4]
        func record() { completions.withLock { $0[index, default: 0] += 1 } }
        do {
            switch kind {
            case .getArgs:
                let json = try await provider.request(
                    try Bin("anything", task: .requestParameters(parameters: ["i": index], encoding: URLEncoding.default))
                ).mapJSON().value
                record()
                if json["args"]?["i"]?.stringValue != String(index) { mismatches.append("get \(index)") }
            case .postJSON:
                let json = try await provider.request(
                    try Bin("anything", method: .post, task: .requestParameters(parameters: ["i": index], encoding: JSONEncoding.default))
                ).mapJSON().value
                record()
                if json["json"]?["i"]?.intValue != index { mismatches.append("post \(index)") }
            case .status:
                let code = [200, 201, 404, 500][(index / 4) % 4]
                let response = try await provider.request(try Bin("status/\(code)")).value
                record()
                if response.statusCode != code { mismatches.append("status \(index): \(response.statusCode)") }
            case .postForm:
                let json = try await provider.request(
                    try Bin("anything", method: .post, task: .requestParameters(parameters: ["form": "v\(index)"], encoding: URLEncoding.default))
                ).mapJSON().value
                record()
                if json["form"]?["form"]?.stringValue != "v\(index)" { mismatches.append("form \(index)") }
            case .cancelled:
                let target = try Bin("delay/1")
                let calls = LockedCounter()
                let box = LockedBox<(any Cancellable)?>(nil)
                let outcome: Result<Response, NetworkError> = await withCheckedContinuation { continuation in
                    box.set(
                        provider.request(target).start { result in
                            if calls.increment() == 1 { continuation.resume(returning: result) }
                        })
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(index % 50)) { box.get()?.cancel() }
                }
                record()
                try await Task.sleep(nanoseconds: 20_000_000)
                if calls.value != 1 { mismatches.append("callback \(index) ran \(calls.value) times") }
                if case .failure(let error) = outcome, !error.isCancelled { mismatches.append("cancel \(index): \(error)") }
            }
        } catch {
            record()
            mismatches.append("\(kind) \(index): \(error)")
        }
    }
}
