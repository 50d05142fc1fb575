import Dispatch
import Foundation
import PluginSDK

/// Cancels one request. Set when the caller's task is cancelled or when the provider's
/// ``Provider/cancelAll()`` runs; transports stop the transfer when it fires.
public final class CancellationSignal: Sendable {
    private struct State {
        var cancelled = false
        var handlers: [UInt64: @Sendable () -> Void] = [:]
        var nextID: UInt64 = 0
    }

    /// Its own lock and state, no box object between: a signal is made for every request.
    private let state = LockedBlock(State())

    /// Creates a signal that has not fired.
    public init() {}

    /// Whether the signal has fired.
    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Fires the signal: every handler runs once, now. Calling it again does nothing.
    public func cancel() {
        let toRun = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.cancelled else { return [] }
            state.cancelled = true
            defer { state.handlers = [:] }
            return Array(state.handlers.values)
        }
        for handler in toRun { handler() }
    }

    /// Runs `handler` when the signal fires (at once if it already has). Returns an id for
    /// ``removeHandler(_:)``, or nil when the handler already ran.
    @discardableResult
    public func onCancel(_ handler: @escaping @Sendable () -> Void) -> UInt64? {
        let id = state.withLock { state -> UInt64? in
            guard !state.cancelled else { return nil }
            state.nextID += 1
            state.handlers[state.nextID] = handler
            return state.nextID
        }
        if id == nil { handler() }
        return id
    }

    /// How many handlers wait for the signal (for tests).
    var handlerCount: Int { state.withLock { $0.handlers.count } }

    /// Forgets a handler that is no longer needed.
    public func removeHandler(_ id: UInt64?) {
        guard let id else { return }
        state.withLock { $0.handlers[id] = nil }
    }

    /// The value of `task` once it ends; nil, early, when the signal or the calling task is
    /// cancelled first. The task goes on: others may be waiting for it too.
    func value<Value: Sendable>(of task: Task<Value, Never>) async -> Value? {
        guard !isCancelled, !Task.isCancelled else { return nil }
        let once = Once<Value?>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                once.set(continuation)
                let id = onCancel { once.resume(nil) }
                Task {
                    let value = await task.value
                    self.removeHandler(id)
                    once.resume(value)
                }
            }
        } onCancel: {
            once.resume(nil)
        }
    }

    /// Fires the signal at `deadline`, unless the returned item is cancelled before.
    func cancel(at deadline: DispatchTime) -> DispatchWorkItem {
        let timer = DispatchWorkItem { self.cancel() }
        DispatchQueue.global().asyncAfter(deadline: deadline, execute: timer)
        return timer
    }

    /// Waits `seconds`; returns false (early) when the signal or the calling task is cancelled.
    /// Ended early, the wait leaves no handler on the signal and its timer is cancelled (a long
    /// wait cancelled kept both until its end: a signal that outlives many waits grew).
    public func sleep(seconds: Double) async -> Bool {
        guard seconds > 0 else { return !isCancelled && !Task.isCancelled }
        let once = Once<Bool>()
        let pending = Locked<(handler: UInt64?, timer: DispatchWorkItem)?>(nil)
        let finished: Bool = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                once.set(continuation)
                let id = onCancel { once.resume(false) }
                let timer = DispatchWorkItem { once.resume(true) }
                pending.withLock { $0 = (id, timer) }
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: timer)
            }
        } onCancel: {
            once.resume(false)
        }
        if let (handler, timer) = pending.withLock({ $0 }) {
            timer.cancel()
            removeHandler(handler)
        }
        return finished && !isCancelled
    }
}

/// Resumes a continuation at most once, with the first value given (before or after the
/// continuation is).
final class Once<Value: Sendable>: Sendable {
    private let state = Locked<(continuation: CheckedContinuation<Value, Never>?, early: Value?)>((nil, nil))

    func set(_ continuation: CheckedContinuation<Value, Never>) {
        let early = state.withLock { state -> Value? in
            if state.early == nil { state.continuation = continuation }
            return state.early
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(_ value: Value) {
        let continuation = state.withLock { state -> CheckedContinuation<Value, Never>? in
            guard let continuation = state.continuation else {
                if state.early == nil { state.early = value }
                return nil
            }
            state.continuation = nil
            state.early = value
            return continuation
        }
        continuation?.resume(returning: value)
    }
}
