import CDigest

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

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
///
/// The value and the lock live in memory of their own, not in stored properties: an `inout`
/// access to a class's stored property is checked for exclusivity at run time on every call,
/// which the lock already guarantees (and which cost as much as the lock on the hook path).
public final class Locked<Value> {
    @usableFromInline let value: UnsafeMutablePointer<Value>
    #if canImport(Darwin)
    @usableFromInline let lock: UnsafeMutablePointer<os_unfair_lock_s>
    #elseif os(Linux)
    /// The lock's word (`ph_lock` in ph_atomic.h: a futex lock taken and given back inline).
    @usableFromInline let lock: UnsafeMutablePointer<UInt32>
    #else
    @usableFromInline let lock: UnsafeMutablePointer<pthread_mutex_t>
    #endif

    /// Creates a box holding `value`.
    public init(_ value: Value) {
        self.value = .allocate(capacity: 1)
        self.value.initialize(to: value)
        lock = .allocate(capacity: 1)
        #if canImport(Darwin)
        lock.initialize(to: os_unfair_lock_s())
        #elseif os(Linux)
        lock.initialize(to: 0)
        #else
        lock.initialize(to: pthread_mutex_t())
        pthread_mutex_init(lock, nil)
        #endif
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        #if !canImport(Darwin) && !os(Linux)
        pthread_mutex_destroy(lock)
        #endif
        lock.deinitialize(count: 1)
        lock.deallocate()
    }

    /// Runs `body` with exclusive access to the value and returns what it returns.
    @inlinable @discardableResult
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        // The memory belongs to this object: it stays alive until the lock is given back.
        defer { withExtendedLifetime(self) {} }
        #if canImport(Darwin)
        os_unfair_lock_lock(lock)
        defer { os_unfair_lock_unlock(lock) }
        #elseif os(Linux)
        ph_lock(lock)
        defer { ph_unlock(lock) }
        #else
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        #endif
        return try body(&value.pointee)
    }
}

// Safe: the value is only ever touched inside `withLock`, under the lock.
extension Locked: @unchecked Sendable where Value: Sendable {}
