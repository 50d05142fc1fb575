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
/// The value and the lock live in one block of memory of their own (``LockedBlock``), not in
/// stored properties: an `inout` access to a class's stored property is checked for exclusivity at
/// run time on every call, which the lock already guarantees (and which cost as much as the lock on
/// the hook path).
public final class Locked<Value> {
    @usableFromInline let block: LockedBlock<Value>

    /// Creates a box holding `value`.
    public init(_ value: Value) { block = LockedBlock(value) }

    /// Runs `body` with exclusive access to the value and returns what it returns.
    @inlinable @discardableResult
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        // The memory belongs to this object: it stays alive until the lock is given back.
        defer { withExtendedLifetime(self) {} }
        return try block.withLock(body)
    }
}

/// The lock and the value of a ``Locked``, in one block of memory that this value owns (two
/// allocations per box, where a value and a lock word of their own were three). An object that
/// needs one lock for its own state keeps a block itself, with no box object between (a request's
/// cancellation signal: one allocation fewer per request).
@usableFromInline
package struct LockedBlock<Value>: ~Copyable {
    #if canImport(Darwin)
    @usableFromInline typealias LockWord = os_unfair_lock_s
    #elseif os(Linux)
    /// The lock's word (`ph_lock` in ph_atomic.h: a futex lock taken and given back inline).
    @usableFromInline typealias LockWord = UInt32
    #else
    @usableFromInline typealias LockWord = pthread_mutex_t
    #endif

    @usableFromInline let value: UnsafeMutablePointer<Value>
    /// The start of the block: the lock word, then the value (at ``valueOffset``).
    @usableFromInline let lock: UnsafeMutablePointer<LockWord>

    /// Where the value starts in the block: after the lock word, aligned for the value.
    private static var valueOffset: Int {
        let alignment = MemoryLayout<Value>.alignment
        return (MemoryLayout<LockWord>.size + alignment - 1) / alignment * alignment
    }

    /// A block holding `value`, unlocked.
    @usableFromInline
    package init(_ value: Value) {
        let block = UnsafeMutableRawPointer.allocate(
            byteCount: Self.valueOffset + MemoryLayout<Value>.size,
            alignment: max(MemoryLayout<LockWord>.alignment, MemoryLayout<Value>.alignment))
        lock = block.bindMemory(to: LockWord.self, capacity: 1)
        self.value = (block + Self.valueOffset).bindMemory(to: Value.self, capacity: 1)
        self.value.initialize(to: value)
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
        #if !canImport(Darwin) && !os(Linux)
        pthread_mutex_destroy(lock)
        #endif
        lock.deinitialize(count: 1)
        UnsafeMutableRawPointer(lock).deallocate()
    }

    /// Runs `body` with exclusive access to the value and returns what it returns. The caller
    /// keeps the block's owner alive for the call (a method of the owner does).
    @inlinable @discardableResult
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
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

// Safe: as `Locked`, whose storage it is.
extension LockedBlock: @unchecked Sendable where Value: Sendable {}
