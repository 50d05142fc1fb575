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
        let signal = CancellationSignal()
        /// ``cancellations`` when the entry was made: a `cancelAll()` since (counted before its
        /// signals fire) means no one joins it any more.
        let epoch: Int
        init(epoch: Int) { self.epoch = epoch }
        var task: Task<Void, Never>?
        var waiters: [UInt64: Waiter] = [:]
        /// The progress handlers of the callers waiting, by waiter: a caller that leaves is
        /// told no more (its own lock: handlers are called outside the registry's).
        let progress = Locked([UInt64: Progress]())

        /// Tells every caller still waiting.
        func report(_ value: TransferProgress) {
            for handler in progress.withLock({ Array($0.values) }) { handler(value) }
        }
    }

    private struct State {
        /// The shared requests new callers may join: none that is cancelled (a `cancelAll()`
        /// leaves it in the table until its work ends; a caller after it starts a fresh one).
        var shared: [String: Entry] = [:]
        /// The entry each waiting caller joined, by waiter: a cancelled entry replaced in
        /// `shared` still has its own waiters to tell.
        var joined: [UInt64: Entry] = [:]
        var inline: [UInt64: CancellationSignal] = [:]
        var nextID: UInt64 = 0
        /// The signals of the retry backoffs being waited out (``sleep(nanoseconds:unlessCancelledSince:)``).
        var backoffs: [UInt64: CancellationSignal] = [:]
        /// The consumptions preparing their request (``beginPreparation()``).
        var preparing = 0
        /// The retried consumptions running (``begin(_:)``), each with how many of its requests
        /// and of the retried consumptions within it count on their own.
        var consumptions: [ObjectIdentifier: ConsumptionCount] = [:]
        /// The retried consumption each waiting caller of a shared request counts for.
        var waiterConsumptions: [UInt64: ConsumptionEpoch] = [:]

        /// Ends what a request of `consumption` counted (it is counted itself again when none is
        /// left). Held by reference: no other consumption takes its identity meanwhile.
        mutating func release(_ consumption: ConsumptionEpoch?) {
            guard let consumption else { return }
            consumptions[ObjectIdentifier(consumption)]?.active -= 1
        }

        /// The consumption `claim`'s attempt belongs to, counting what claims it from now, when
        /// the attempt is not claimed yet and the consumption runs; nil otherwise (what asked counts
        /// on its own: a request of a task the attempt started, say).
        mutating func claim(_ claim: AttemptClaim?) -> ConsumptionEpoch? {
            guard let claim, !claim.claimed, consumptions[ObjectIdentifier(claim.consumption)] != nil else { return nil }
            claim.claimed = true
            consumptions[ObjectIdentifier(claim.consumption)]!.active += 1
            return claim.consumption
        }
    }

    /// A retried consumption's tally: it counts as one request while none of its own counts
    /// (between its attempts: deciding on a retry, waiting out a backoff, starting the next).
    struct ConsumptionCount {
        var active = 0
        let parent: ConsumptionEpoch?
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

    /// How many distinct requests are running: a shared one a fresh one replaced after a
    /// `cancelAll()` too, while it has callers; the consumptions preparing their request (its
    /// endpoint and request closure run); and the retried consumptions between their attempts
    /// (deciding on a retry, waiting out its backoff, starting the next: `cancelAll()` reaches
    /// them too).
    var runningCount: Int {
        state.withLock { state in
            Set(state.joined.values.map(ObjectIdentifier.init)).count + state.inline.count + state.preparing
                + state.consumptions.values.reduce(0) { $0 + ($1.active == 0 ? 1 : 0) }
        }
    }

    /// A request being prepared (``beginPreparation()``), and the retried consumption it counts for.
    struct Preparation: Sendable {
        fileprivate let consumption: ConsumptionEpoch?
    }

    /// A consumption begins preparing its request (its endpoint and request closure run): it is
    /// counted by ``runningCount`` until its request is registered (``run(sharingKey:epoch:progress:prepared:work:)``
    /// with the preparation, in the same step) and then until that ends, or until
    /// ``endPreparation(_:)`` says it made none, so the count never reads 0 in between. The
    /// request of an attempt of a retried consumption (``begin(_:)``, ``AttemptClaim``) counts for
    /// it: the consumption is counted in its stead from the step the request ends in. (A
    /// `cancelAll()` meanwhile reaches it by its epoch.)
    func beginPreparation() -> Preparation {
        let claim = Self.attempt.flatMap { $0.consumption.registry === self ? $0 : nil }
        return state.withLock { state in
            state.preparing += 1
            return Preparation(consumption: state.claim(claim))
        }
    }

    /// The preparation begun by ``beginPreparation()`` ended without a request (it failed).
    func endPreparation(_ preparation: Preparation) {
        state.withLock { state in
            state.preparing -= 1
            state.release(preparation.consumption)
        }
    }

    /// A retried consumption of this registry starts (``ResponsePipeline/retry(_:)``): from now
    /// until ``end(_:)`` it counts as one request whenever nothing of its own does, so
    /// ``runningCount`` does not read 0 between its attempts. Run as an attempt of another one
    /// (its pipeline retried within the other's), it counts for that one as the attempt's
    /// request would.
    func begin(_ consumption: ConsumptionEpoch) {
        let claim = Self.attempt.flatMap { $0.consumption.registry === self ? $0 : nil }
        state.withLock { state in
            let parent = state.claim(claim)
            state.consumptions[ObjectIdentifier(consumption)] = ConsumptionCount(parent: parent)
        }
    }

    /// The retried consumption begun by ``begin(_:)`` ended (in the same step, the one it runs
    /// within counts itself again, if nothing else of it does).
    func end(_ consumption: ConsumptionEpoch) {
        state.withLock { state in
            state.release(state.consumptions.removeValue(forKey: ObjectIdentifier(consumption))?.parent)
        }
    }

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
    /// `prepared`: the preparation (``beginPreparation()``) the request ends as it is registered.
    func run(
        sharingKey: String?, epoch: Int? = nil, progress: Progress? = nil, prepared: Preparation? = nil, work: @escaping Work
    ) async -> Outcome {
        guard let sharingKey else { return await run(reserve(epoch: epoch, prepared: prepared), progress: progress, work: work) }
        return await runShared(key: sharingKey, epoch: epoch, progress: progress, prepared: prepared, work: work)
    }

    /// How many times ``cancelAll()`` was called: a consumption that reads it at its start and
    /// again between its sends (after its request closure, before a retry) knows whether a
    /// `cancelAll()` meant it, though nothing of it was being sent (one atomic read, no
    /// registration per request).
    let cancellations = AtomicCount()

    /// The registry and epoch (``cancellations`` at its start) of the retried consumption this
    /// task runs in, set by ``ResponsePipeline/retry(_:)``: each attempt compares with the
    /// consumption's epoch, not with one read anew, so a `cancelAll()` between a backoff's end
    /// and the next attempt's start is not missed.
    @TaskLocal static var consumption: ConsumptionEpoch?

    /// The attempt of a retried consumption this task runs (``ResponsePipeline/retry(_:)``, one
    /// per attempt): its request is the first one prepared in it (see ``beginPreparation()``).
    @TaskLocal static var attempt: AttemptClaim?

    /// The epoch a consumption of this registry starting now compares with: the retried
    /// consumption's it runs in (while it runs), else the count now.
    var consumptionEpoch: Int {
        if let consumption = Self.consumption, consumption.registry === self, consumption.life.isLive { return consumption.epoch }
        return cancellations.value
    }

    /// Sleeps `nanoseconds` (a retry's backoff); false, early, when the caller's task is
    /// cancelled or ``cancelAll()`` is called, or was since `epoch` (a value of ``cancellations``).
    func sleep(nanoseconds: UInt64, unlessCancelledSince epoch: Int) async -> Bool {
        let signal = CancellationSignal()
        let id = register(signal, in: \.backoffs, epoch: epoch, prepared: nil)
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
    /// counted here, one after finds the signal. `prepared`: it ends a preparation, in the same step.
    private func register(
        _ signal: CancellationSignal, in table: WritableKeyPath<State, [UInt64: CancellationSignal]>, epoch: Int?, prepared: Preparation?
    ) -> UInt64 {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            state[keyPath: table][state.nextID] = signal
            if prepared != nil { state.preparing -= 1 }
            return state.nextID
        }
        if let epoch, cancellations.value != epoch { signal.cancel() }
        return id
    }

    /// A request registered now and run later (``run(_:progress:work:)``): counted by
    /// ``runningCount`` and cancelled by ``cancelAll()`` from now on (and at once when one came
    /// since `epoch`).
    struct Reservation: Sendable {
        fileprivate let id: UInt64
        fileprivate let signal: CancellationSignal
        /// The retried consumption it counts for, from its preparation.
        fileprivate let consumption: ConsumptionEpoch?
    }

    /// Registers a request that will run: see ``Reservation``.
    func reserve(epoch: Int?, prepared: Preparation? = nil) -> Reservation {
        let signal = CancellationSignal()
        let id = register(signal, in: \.inline, epoch: epoch, prepared: prepared)
        return Reservation(id: id, signal: signal, consumption: prepared?.consumption)
    }

    /// Runs the reserved request, unshared, in the caller's task.
    func run(_ reservation: Reservation, progress: Progress? = nil, work: Work) async -> Outcome {
        defer {
            state.withLock { state in
                state.inline.removeValue(forKey: reservation.id)
                state.release(reservation.consumption)
            }
        }
        let signal = reservation.signal
        return await withTaskCancellationHandler {
            await work(signal, progress)
        } onCancel: {
            signal.cancel()
        }
    }

    private func runShared(key: String, epoch: Int?, progress: Progress?, prepared: Preparation?, work: @escaping Work) async -> Outcome {
        let waiterID = makeID()
        // Closed before this caller returns: a report the exchange was making to the callers as
        // this one left (its handler taken from the table already) reaches it no more.
        let gate = progress.map(ProgressGate.init)
        defer { gate?.close() }
        let progress = gate?.handler
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                state.withLock { state in
                    // The preparation ends here, whatever follows: a waiter, or an answer at once.
                    if let prepared {
                        state.preparing -= 1
                        if let consumption = prepared.consumption { state.waiterConsumptions[waiterID] = consumption }
                    }
                    // Cancelled already (the flag is set before `leave` runs, so a `leave` that
                    // found nothing came before this), or by a `cancelAll()` since the
                    // consumption began (one after this takes the lock finds the entry's signal).
                    if Task.isCancelled || epoch.map({ cancellations.value != $0 }) == true {
                        state.release(state.waiterConsumptions.removeValue(forKey: waiterID))
                        continuation.resume(returning: .failure(.cancelled))
                        return
                    }
                    let current = cancellations.value
                    if let entry = state.shared[key], entry.epoch == current, !entry.signal.isCancelled {
                        entry.waiters[waiterID] = continuation
                        state.joined[waiterID] = entry
                        if let progress { entry.progress.withLock { $0[waiterID] = progress } }
                        return
                    }
                    let entry = Entry(epoch: current)
                    entry.waiters[waiterID] = continuation
                    state.joined[waiterID] = entry
                    if let progress { entry.progress.withLock { $0[waiterID] = progress } }
                    state.shared[key] = entry
                    let signal = entry.signal
                    entry.task = Task { [weak self] in
                        // Without the first caller's deadline (each caller's own ends its wait) or
                        // pinned chains (it serves every caller).
                        let outcome = await ConsumptionScope.leaving { await work(signal, { entry.report($0) }) }
                        self?.finish(key: key, entry: entry, outcome: outcome)
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
        // Counted under the lock: a caller that takes it before finds the count unchanged and
        // its entry in the table (cancelled below); one after finds the count changed. Counted
        // before the lock, a caller in between replaced a running entry with a fresh one, which
        // `shared` no longer held: the running one went on, and the fresh one was cancelled.
        let signals = state.withLock { state in
            cancellations.add(1)
            return Array(state.inline.values) + state.shared.values.map(\.signal) + state.backoffs.values
        }
        for signal in signals { signal.cancel() }
    }

    /// Tells the entry's callers its outcome (those of an entry a fresh one replaced too).
    private func finish(key: String, entry: Entry, outcome: Outcome) {
        let waiters = state.withLock { state -> [Waiter] in
            if state.shared[key] === entry { state.shared[key] = nil }
            for id in entry.waiters.keys {
                state.joined[id] = nil
                state.release(state.waiterConsumptions.removeValue(forKey: id))
            }
            defer { entry.waiters = [:] }
            return Array(entry.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    /// A caller's task was cancelled: it gets ``NetworkError/cancelled`` now (unless told the
    /// outcome already, or not waiting yet: then it sees its task cancelled when it would), and
    /// the entry's work is cancelled when it was the last caller.
    private func leave(key: String, waiterID: UInt64) {
        let (waiter, orphaned) = state.withLock { state -> (Waiter?, Entry?) in
            guard let entry = state.joined.removeValue(forKey: waiterID), let waiter = entry.waiters.removeValue(forKey: waiterID) else {
                return (nil, nil)
            }
            state.release(state.waiterConsumptions.removeValue(forKey: waiterID))
            // No progress after the caller's completion: the handler goes before it is resumed.
            entry.progress.withLock { _ = $0.removeValue(forKey: waiterID) }
            if entry.waiters.isEmpty {
                if state.shared[key] === entry { state.shared[key] = nil }
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

/// A caller's progress handler behind a gate its caller closes as it returns. A report is made
/// holding the gate's lock, so once ``close()`` returns none is being made, and none is made
/// after: a caller hears of no progress after its call returned.
final class ProgressGate: Sendable {
    private let open = Locked(true)
    private let inner: @Sendable (TransferProgress) -> Void

    init(_ handler: @escaping @Sendable (TransferProgress) -> Void) {
        inner = handler
    }

    /// Tells the handler, unless the gate is closed.
    func report(_ value: TransferProgress) {
        open.withLock { if $0 { inner(value) } }
    }

    /// ``report(_:)`` as a handler.
    var handler: @Sendable (TransferProgress) -> Void { { self.report($0) } }

    /// Closes the gate, after a report being made ends.
    func close() {
        open.withLock { $0 = false }
    }
}

/// What a consumption passes down to the work it runs, in task-locals: its deadline
/// (``ExchangeDeadline``), its pinned chains (``ChainPin``) and its cancellation epoch
/// (``RequestRegistry/consumption``).
enum ConsumptionScope {
    /// `body`, run as part of no consumption: for work that serves several (a shared exchange, a
    /// credential refresh) or is a caller of its own (`start`, `events()`).
    static func leaving<T>(_ body: () async -> T) async -> T {
        await ExchangeDeadline.$binding.withValue(nil) {
            await ChainPin.$current.withValue(nil) {
                await RequestRegistry.$consumption.withValue(nil) {
                    await RequestRegistry.$attempt.withValue(nil) { await body() }
                }
            }
        }
    }

    /// The same, for synchronous work (which starts tasks that inherit what it runs with).
    static func leavingSynchronously<T>(_ body: () -> T) -> T {
        ExchangeDeadline.$binding.withValue(nil) {
            ChainPin.$current.withValue(nil) {
                RequestRegistry.$consumption.withValue(nil) {
                    RequestRegistry.$attempt.withValue(nil) { body() }
                }
            }
        }
    }
}

/// A retried consumption's cancellation epoch, bound to its attempts (``RequestRegistry/consumption``).
/// It holds its registry (no other can take its identity) and counts only while the consumption
/// runs: a task an attempt started, which inherits the binding and outlives the consumption,
/// compares with the count of its own time again.
final class ConsumptionEpoch: Sendable {
    let registry: RequestRegistry
    let epoch: Int
    /// Ended when the retried consumption returns.
    let life = ConsumptionLife()

    init(registry: RequestRegistry, epoch: Int) {
        self.registry = registry
        self.epoch = epoch
    }
}

/// One attempt of a retried consumption (``RequestRegistry/attempt``). The first request prepared
/// in it (its pipeline's own: the provider prepares it before the request's closures run), or the
/// first retried consumption begun in it, claims it and counts for the consumption; a request a
/// task started within the attempt makes later finds it claimed, and counts on its own.
// Safe as @unchecked Sendable: `claimed` is read and set only under the registry's lock.
final class AttemptClaim: @unchecked Sendable {
    let consumption: ConsumptionEpoch
    var claimed = false

    init(_ consumption: ConsumptionEpoch) {
        self.consumption = consumption
    }
}

/// Whether the consumption a task-local binding belongs to still runs: what it passes down
/// (its epoch; its deadline, until its work ends) counts only until then, not
/// in the tasks started within it that outlive it.
final class ConsumptionLife: Sendable {
    private let live = Locked(true)

    /// Whether the consumption still runs.
    var isLive: Bool { live.withLock { $0 } }

    /// The consumption ended.
    func end() { live.withLock { $0 = false } }
}
