import Foundation

/// A value behind a lock: the one lock type of the SDK, the host and the contrib plugins.
///
/// Every access to the value goes through ``withLock(_:)``. The box is `Sendable` exactly when
/// its value is: a non-`Sendable` value stays confined to the threads that share the box knowingly.
///
/// ```swift
/// let hits = Locked(0)
/// hits.withLock { $0 += 1 }
/// let now = hits.withLock { $0 }
/// ```
public final class Locked<Value> {
    @usableFromInline var value: Value
    @usableFromInline let lock = NSLock()

    /// Creates a box holding `value`.
    public init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value and returns what it returns.
    @inlinable @discardableResult
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

// Safe: the value is only ever touched inside `withLock`, under the lock.
extension Locked: @unchecked Sendable where Value: Sendable {}
