import Foundation

/// Thread-safe state a plugin keeps per request between its hooks, keyed by
/// ``InterceptorContext/requestID``.
///
/// Entries are removed by the plugin (usually in `process`, the last hook of an attempt);
/// entries older than ``maxAge`` seconds are dropped so a request that never reached its
/// response side cannot leak.
public final class PerRequestState<Value> {
    // Inlinable, with the table's parts usable from inlined code: a plugin's calls are then
    // specialised for its own `Value` (generic code across the module boundary looks up type
    // metadata on every call).
    @usableFromInline
    struct Table {
        @usableFromInline var values: [UInt64: (value: Value, stored: UInt64)] = [:]
        @usableFromInline var insertions = 0
        @usableFromInline init() {}
    }

    @usableFromInline let table = Locked(Table())
    /// How many entries the table holds, read without the lock: a table with none (a plugin that
    /// keeps state only now and then) is asked and emptied without taking it. The entry of a request
    /// is set and removed by that request's hooks, which run one after another: a hook that reads
    /// zero here has no entry of its own to find.
    @usableFromInline let entries = AtomicCount()
    /// Seconds after which a forgotten entry is dropped; default 600 (zero, less or NaN: every
    /// entry goes at the next sweep; infinity: none).
    public let maxAge: Double

    /// Creates an empty table.
    public init(maxAge: Double = 600) {
        self.maxAge = maxAge
    }

    /// Stores `value` for `requestID`.
    @inlinable
    public func set(_ value: Value, for requestID: UInt64) {
        table.withLock { table in
            // Read under the lock: an entry stamped by another thread is never newer than `now`
            // (it wrapped past the limit, and a live entry was swept).
            let now = DispatchTime.now().uptimeNanoseconds
            if table.values.updateValue((value, now), forKey: requestID) == nil {
                entries.add(1)
                sweepEvery1024(&table, now: now)
            }
        }
    }

    /// Counts an insertion; every 1,024th drops the entries older than ``maxAge`` (`set`'s own
    /// too, at a max age of no time; `update` counts before it makes its entry, which it edits).
    @inlinable
    func sweepEvery1024(_ table: inout Table, now: UInt64) {
        table.insertions += 1
        guard table.insertions % 1024 == 0 else { return }
        let limit = maxAge.saturatingNanoseconds
        let before = table.values.count
        table.values = table.values.filter { now &- $0.value.stored < limit }
        entries.add(table.values.count - before)
    }

    /// The value for `requestID`, if any.
    @inlinable
    public func get(_ requestID: UInt64) -> Value? {
        guard entries.value > 0 else { return nil }
        return table.withLock { $0.values[requestID]?.value }
    }

    /// Removes and returns the value for `requestID`.
    @discardableResult
    @inlinable
    public func remove(_ requestID: UInt64) -> Value? {
        guard entries.value > 0 else { return nil }
        return table.withLock { table in
            guard let removed = table.values.removeValue(forKey: requestID) else { return nil }
            entries.add(-1)
            return removed.value
        }
    }

    /// Edits the value for `requestID` in place (creating it from `initial` when absent).
    @inlinable
    public func update<R>(_ requestID: UInt64, initial: @autoclosure () -> Value, _ body: (inout Value) -> R) -> R {
        table.withLock { table in
            if table.values[requestID] == nil {
                let now = DispatchTime.now().uptimeNanoseconds
                // Counted as `set` counts: entries made here are swept too.
                sweepEvery1024(&table, now: now)
                table.values[requestID] = (initial(), now)
                entries.add(1)
            }
            // In place: the stored value is not copied out and back.
            return body(&table.values[requestID]!.value)
        }
    }

    /// How many requests have state.
    public var count: Int { table.withLock { $0.values.count } }
}

// Safe: the table is only touched under its lock, and values cross threads only when Sendable.
extension PerRequestState: @unchecked Sendable where Value: Sendable {}
