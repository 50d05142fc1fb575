import Foundation
import PluginSDK

/// Tracks every running request of a provider: lets callers share identical in-flight
/// requests, lets each caller cancel alone, and lets the provider cancel them all.
///
/// An unshared request runs inline in the caller's task (no hop to another thread); its
/// ``CancellationSignal`` fires when the caller's task is cancelled or on ``cancelAll()``.
/// A shared request runs in a task of its own that callers wait on: a caller that is
/// cancelled gets ``NetworkError/cancelled`` at once while the others keep waiting, and the
/// shared work is cancelled when its last caller leaves.
final class RequestRegistry: Sendable {
    typealias Outcome = Result<Response, NetworkError>
    typealias Waiter = CheckedContinuation<Outcome, Never>
    typealias Progress = @Sendable (TransferProgress) -> Void
    /// A request's work: told its cancellation and where its progress goes.
    typealias Work = @Sendable (CancellationSignal, Progress?) async -> Outcome

    // Safe as @unchecked Sendable: its mutable fields are only touched inside the registry's `state` lock.
    private final class Entry: @unchecked Sendable {
        let id: UInt64
        let signal = CancellationSignal()
        var task: Task<Void, Never>?
        var waiters: [UInt64: Waiter] = [:]
        /// The progress handlers of the callers waiting, by waiter: a caller that leaves is
        /// told no more (its own lock: handlers are called outside the registry's).
        let progress = Locked([UInt64: Progress]())
        init(id: UInt64) { self.id = id }

        /// Tells every caller still waiting.
        func report(_ value: TransferProgress) {
            for handler in progress.withLock({ Array($0.values) }) { handler(value) }
        }
    }

    private struct State {
        var shared: [String: Entry] = [:]
        var inline: [UInt64: CancellationSignal] = [:]
        var nextID: UInt64 = 0
        var cancelledEarly: Set<UInt64> = []
        /// The signals of the retry backoffs being waited out (``sleep(nanoseconds:unlessCancelledSince:)``).
        var backoffs: [UInt64: CancellationSignal] = [:]
    }

    private let state = Locked(State())

    /// Request ids, unique within the process (across providers).
    private static let requestIDs = Locked<UInt64>(0)

    /// A request id unique within the process.
    func makeRequestID() -> UInt64 {
        Self.requestIDs.withLock { value in
            value += 1
            return value
        }
    }

    /// How many distinct requests are running.
    var runningCount: Int { state.withLock { $0.shared.count + $0.inline.count } }

    /// A fresh identifier, unique within this registry, for a waiter or an entry (request ids
    /// come from ``makeRequestID()``, unique within the process).
    func makeID() -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
    }

    /// Runs `work`, or joins an identical running request when `sharingKey` matches one.
    /// `epoch`: ``cancellations`` when the caller's consumption began; a ``cancelAll()`` since,
    /// which came before this request was registered, cancels it as one after would.
    func run(sharingKey: String?, epoch: Int? = nil, progress: Progress? = nil, work: @escaping Work) async -> Outcome {
        guard let sharingKey else { return await runInline(work, epoch: epoch, progress: progress) }
        return await runShared(key: sharingKey, epoch: epoch, progress: progress, work: work)
    }

    /// How many times ``cancelAll()`` was called: a consumption that reads it at its start and
    /// again between its sends (after its request closure, before a retry) knows whether a
    /// `cancelAll()` meant it, though nothing of it was being sent (one atomic read, no
    /// registration per request).
    let cancellations = AtomicCount()

    /// Sleeps `nanoseconds` (a retry's backoff); false, early, when the caller's task is
    /// cancelled or ``cancelAll()`` is called, or was since `epoch` (a value of ``cancellations``).
    func sleep(nanoseconds: UInt64, unlessCancelledSince epoch: Int) async -> Bool {
        let signal = CancellationSignal()
        let id = register(signal, in: \.backoffs, epoch: epoch)
        defer { _ = state.withLock { $0.backoffs.removeValue(forKey: id) } }
        guard !signal.isCancelled else { return false }
        let sleeper = Task { (try? await Task.sleep(nanoseconds: nanoseconds)) != nil }
        guard let slept = await signal.value(of: sleeper) else {
            sleeper.cancel()
            return false
        }
        return slept
    }

    /// Puts `signal` in `table`, where ``cancelAll()`` finds it, and returns its key; cancels it
    /// when a `cancelAll()` came since `epoch`. Read once registered: a `cancelAll()` before is
    /// counted here, one after finds the signal.
    private func register(_ signal: CancellationSignal, in table: WritableKeyPath<State, [UInt64: CancellationSignal]>, epoch: Int?) -> UInt64 {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            state[keyPath: table][state.nextID] = signal
            return state.nextID
        }
        if let epoch, cancellations.value != epoch { signal.cancel() }
        return id
    }

    private func runInline(_ work: Work, epoch: Int?, progress: Progress?) async -> Outcome {
        let signal = CancellationSignal()
        let id = register(signal, in: \.inline, epoch: epoch)
        defer { _ = state.withLock { $0.inline.removeValue(forKey: id) } }
        return await withTaskCancellationHandler {
            await work(signal, progress)
        } onCancel: {
            signal.cancel()
        }
    }

    private func runShared(key: String, epoch: Int?, progress: Progress?, work: @escaping Work) async -> Outcome {
        let waiterID = makeID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                state.withLock { state in
                    // Cancelled already, or by a `cancelAll()` since the consumption began (one
                    // after this takes the lock finds the entry's signal).
                    if state.cancelledEarly.remove(waiterID) != nil || epoch.map({ cancellations.value != $0 }) == true {
                        continuation.resume(returning: .failure(.cancelled))
                        return
                    }
                    if let entry = state.shared[key] {
                        entry.waiters[waiterID] = continuation
                        if let progress { entry.progress.withLock { $0[waiterID] = progress } }
                        return
                    }
                    state.nextID += 1
                    let entry = Entry(id: state.nextID)
                    entry.waiters[waiterID] = continuation
                    if let progress { entry.progress.withLock { $0[waiterID] = progress } }
                    state.shared[key] = entry
                    let signal = entry.signal
                    entry.task = Task { [weak self] in
                        let outcome = await work(signal, { entry.report($0) })
                        self?.finish(key: key, entryID: entry.id, outcome: outcome)
                    }
                }
            }
        } onCancel: {
            leave(key: key, waiterID: waiterID)
        }
    }

    /// Cancels every running request, and every one between its sends (see ``cancellations``);
    /// each caller gets ``NetworkError/cancelled``.
    func cancelAll() {
        cancellations.add(1)
        let signals = state.withLock { Array($0.inline.values) + $0.shared.values.map(\.signal) + $0.backoffs.values }
        for signal in signals { signal.cancel() }
    }

    private func finish(key: String, entryID: UInt64, outcome: Outcome) {
        let waiters = state.withLock { state -> [Waiter] in
            guard let entry = state.shared[key], entry.id == entryID else { return [] }
            state.shared[key] = nil
            defer { entry.waiters = [:] }
            return Array(entry.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    private func leave(key: String, waiterID: UInt64) {
        let (waiter, orphaned) = state.withLock { state -> (Waiter?, Entry?) in
            guard let entry = state.shared[key], let waiter = entry.waiters.removeValue(forKey: waiterID) else {
                state.cancelledEarly.insert(waiterID)
                return (nil, nil)
            }
            // No progress after the caller's completion: the handler goes before it is resumed.
            entry.progress.withLock { _ = $0.removeValue(forKey: waiterID) }
            if entry.waiters.isEmpty {
                state.shared[key] = nil
                return (waiter, entry)
            }
            return (waiter, nil)
        }
        if let orphaned {
            orphaned.signal.cancel()
            orphaned.task?.cancel()
        }
        waiter?.resume(returning: .failure(.cancelled))
    }
}
