import Dispatch
import Foundation

/// Cancels one request. Set when the caller's task is cancelled or when the provider's
/// ``Provider/cancelAll()`` runs; transports stop the transfer when it fires.
public final class CancellationSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var cancelled = false
    private var handlers: [UInt64: @Sendable () -> Void] = [:]
    private var nextID: UInt64 = 0

    /// Creates a signal that has not fired.
    public init() {}

    /// Whether the signal has fired.
    public var isCancelled: Bool {
        lock.lock()
        defer { lock.unlock() }
        return cancelled
    }

    /// Fires the signal: every handler runs once, now. Calling it again does nothing.
    public func cancel() {
        lock.lock()
        guard !cancelled else { lock.unlock(); return }
        cancelled = true
        let toRun = Array(handlers.values)
        handlers = [:]
        lock.unlock()
        for handler in toRun { handler() }
    }

    /// Runs `handler` when the signal fires (at once if it already has). Returns an id for
    /// ``removeHandler(_:)``, or nil when the handler already ran.
    @discardableResult
    public func onCancel(_ handler: @escaping @Sendable () -> Void) -> UInt64? {
        lock.lock()
        if cancelled {
            lock.unlock()
            handler()
            return nil
        }
        nextID += 1
        handlers[nextID] = handler
        let id = nextID
        lock.unlock()
        return id
    }

    /// Forgets a handler that is no longer needed.
    public func removeHandler(_ id: UInt64?) {
        guard let id else { return }
        lock.lock()
        handlers[id] = nil
        lock.unlock()
    }

    /// Waits `seconds`; returns false (early) when the signal or the calling task is cancelled.
    public func sleep(seconds: Double) async -> Bool {
        guard seconds > 0 else { return !isCancelled && !Task.isCancelled }
        let once = Once()
        let finished: Bool = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                once.set(continuation)
                let id = onCancel { once.resume(false) }
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                    self.removeHandler(id)
                    once.resume(true)
                }
            }
        } onCancel: {
            once.resume(false)
        }
        return finished && !isCancelled
    }

    /// Resumes a continuation at most once.
    private final class Once: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<Bool, Never>?
        private var early: Bool?

        func set(_ continuation: CheckedContinuation<Bool, Never>) {
            lock.lock()
            if let early {
                lock.unlock()
                continuation.resume(returning: early)
                return
            }
            self.continuation = continuation
            lock.unlock()
        }

        func resume(_ value: Bool) {
            lock.lock()
            guard let continuation else {
                if early == nil { early = value }
                lock.unlock()
                return
            }
            self.continuation = nil
            early = value
            lock.unlock()
            continuation.resume(returning: value)
        }
    }
}
