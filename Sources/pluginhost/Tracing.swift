import Dispatch
import Foundation
import PluginHost
import PluginSDK

/// What one plugin did during a traced request, and how long its hooks took.
final class Trace: Sendable {
    private struct State {
        var actions: [String] = []
        var events: [String] = []
        var nanoseconds: UInt64 = 0
        var recording = true
    }

    private let state = Locked(State())

    /// The changes recorded so far.
    var actions: [String] { state.withLock { $0.actions } }
    /// The events recorded so far.
    var events: [String] { state.withLock { $0.events } }

    /// Stops recording actions and events (hook time still adds up).
    func stopRecording() {
        state.withLock { $0.recording = false }
    }

    func record(_ action: String) {
        state.withLock { if $0.recording { $0.actions.append(action) } }
    }

    func event(_ name: String) {
        state.withLock { if $0.recording { $0.events.append(name) } }
    }

    func add(_ elapsed: UInt64) {
        state.withLock { $0.nanoseconds &+= elapsed }
    }

    /// The hook time since the last call, in nanoseconds.
    func take() -> UInt64 {
        state.withLock { state in
            defer { state.nanoseconds = 0 }
            return state.nanoseconds
        }
    }
}

/// Wraps an interceptor, recording the changes its hooks make and the time they take.
struct Traced: Interceptor {
    let inner: any Interceptor
    let trace: Trace
    var name: String { inner.name }

    static let sensitive: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]

    static func show(_ header: HTTPHeader) -> String {
        "\(header.name): " + (sensitive.contains(header.name.lowercased()) ? "<redacted>" : header.value)
    }

    private func timed<R>(_ body: () throws -> R) rethrows -> R {
        let start = DispatchTime.now().uptimeNanoseconds
        defer { trace.add(DispatchTime.now().uptimeNanoseconds &- start) }
        return try body()
    }

    /// Records header changes between two snapshots, as one line per side.
    private func diff(_ side: String, before: [HTTPHeader], after: [HTTPHeader]) {
        func table(_ headers: [HTTPHeader]) -> [String: HTTPHeader] {
            var result: [String: HTTPHeader] = [:]
            for header in headers { result[header.name.lowercased()] = header }
            return result
        }
        let old = table(before)
        let new = table(after)
        var changes: [String] = []
        for key in new.keys.sorted() {
            if let previous = old[key] {
                if previous.value != new[key]!.value { changes.append("~\(Self.show(new[key]!))") }
            } else {
                changes.append("+\(Self.show(new[key]!))")
            }
        }
        for key in old.keys.sorted() where new[key] == nil { changes.append("-\(old[key]!.name)") }
        if !changes.isEmpty { trace.record("\(side): " + changes.joined(separator: ", ")) }
    }

    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        let beforeHeaders = request.headers
        let beforeURL = request.url
        let action = try timed { try inner.prepare(request, context: context) }
        diff("request", before: beforeHeaders, after: request.headers)
        if request.url != beforeURL {
            let old = Set(URLParts(beforeURL).queryItems.map { "\($0.name)=\($0.value)" })
            let new = URLParts(request.url).queryItems.map { "\($0.name)=\($0.value)" }
            let added = new.filter { !old.contains($0) }
            trace.record(
                added.isEmpty ? "url: " + URLParts.redactingUserInfo(request.url) : "query: " + added.map { "+\($0)" }.joined(separator: " "))
        }
        if case .respond(let response) = action { trace.record("answered \(response.statusCode) itself (short-circuit: no network)") }
        return action
    }

    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        try timed { try inner.willSend(request, context: context) }
    }

    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        try timed { try inner.didReceive(result, context: context) }
    }

    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        let before = result.response?.headers ?? []
        let action = try timed { try inner.process(result, context: context) }
        if let response = result.response { diff("response", before: before, after: response.headers) }
        switch action {
        case .proceed: break
        case .replace(let response): trace.record("replaced the result with \(response.statusCode)")
        case .retry(let delay, let refresh):
            trace.record("asked for a retry" + (refresh.map { " after refreshing \($0.key)" } ?? "") + (delay > 0 ? " in \(delay) s" : ""))
        }
        return action
    }

    func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
        let answer = timed { inner.credential(for: challenge, context: context) }
        if answer != .performDefault { trace.record("answered a \(challenge.method) challenge from \(challenge.host)") }
        return answer
    }
}
