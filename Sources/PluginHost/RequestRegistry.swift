import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Tracks every running request of a provider: lets callers share identical in-flight
/// requests, lets each caller cancel alone, and lets the provider cancel them all.
///
/// Each request runs in a task of its own. A caller waits on a continuation, so a caller
/// that is cancelled gets ``NetworkError/cancelled`` at once even while others keep
/// waiting; the shared work is cancelled when its last caller leaves.
final class RequestRegistry: Sendable {
    typealias Outcome = Result<Response, NetworkError>
    typealias Waiter = CheckedContinuation<Outcome, Never>

    private final class Entry: @unchecked Sendable {
        let id: UInt64
        var task: Task<Void, Never>?
        var waiters: [UInt64: Waiter] = [:]
        init(id: UInt64) { self.id = id }
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var nextID: UInt64 = 0
        var cancelledEarly: Set<UInt64> = []
    }

    private let state = Locked(State())

    /// How many distinct requests are running.
    var runningCount: Int { state.withLock { $0.entries.count } }

    /// A fresh identifier (also used as a request id).
    func makeID() -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
    }

    /// Runs `work`, or joins an identical running request when `sharingKey` matches one.
    func run(sharingKey: String?, work: @escaping @Sendable () async -> Outcome) async -> Outcome {
        let waiterID = makeID()
        let key = sharingKey ?? "#\(waiterID)"
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                state.withLock { state in
                    if state.cancelledEarly.remove(waiterID) != nil {
                        continuation.resume(returning: .failure(.cancelled))
                        return
                    }
                    if let entry = state.entries[key] {
                        entry.waiters[waiterID] = continuation
                        return
                    }
                    state.nextID += 1
                    let entry = Entry(id: state.nextID)
                    entry.waiters[waiterID] = continuation
                    state.entries[key] = entry
                    entry.task = Task { [weak self] in
                        let outcome = await work()
                        self?.finish(key: key, entryID: entry.id, outcome: outcome)
                    }
                }
            }
        } onCancel: {
            leave(key: key, waiterID: waiterID)
        }
    }

    /// Cancels every running request; each caller gets ``NetworkError/cancelled``.
    func cancelAll() {
        let tasks = state.withLock { $0.entries.values.compactMap(\.task) }
        for task in tasks { task.cancel() }
    }

    private func finish(key: String, entryID: UInt64, outcome: Outcome) {
        let waiters = state.withLock { state -> [Waiter] in
            guard let entry = state.entries[key], entry.id == entryID else { return [] }
            state.entries[key] = nil
            defer { entry.waiters = [:] }
            return Array(entry.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    private func leave(key: String, waiterID: UInt64) {
        let (waiter, orphaned) = state.withLock { state -> (Waiter?, Task<Void, Never>?) in
            guard let entry = state.entries[key], let waiter = entry.waiters.removeValue(forKey: waiterID) else {
                state.cancelledEarly.insert(waiterID)
                return (nil, nil)
            }
            if entry.waiters.isEmpty {
                state.entries[key] = nil
                return (waiter, entry.task)
            }
            return (waiter, nil)
        }
        orphaned?.cancel()
        waiter?.resume(returning: .failure(.cancelled))
    }
}
