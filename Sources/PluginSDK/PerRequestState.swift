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
        let now = DispatchTime.now().uptimeNanoseconds
        let limit = maxAge.saturatingNanoseconds
        table.withLock { table in
            table.values[requestID] = (value, now)
            table.insertions += 1
            if table.insertions % 1024 == 0 {
                table.values = table.values.filter { now &- $0.value.stored < limit }
            }
        }
    }

    /// The value for `requestID`, if any.
    @inlinable
    public func get(_ requestID: UInt64) -> Value? {
        table.withLock { $0.values[requestID]?.value }
    }

    /// Removes and returns the value for `requestID`.
    @discardableResult
    @inlinable
    public func remove(_ requestID: UInt64) -> Value? {
        table.withLock { $0.values.removeValue(forKey: requestID)?.value }
    }

    /// Edits the value for `requestID` in place (creating it from `initial` when absent).
    @inlinable
    public func update<R>(_ requestID: UInt64, initial: @autoclosure () -> Value, _ body: (inout Value) -> R) -> R {
        table.withLock { table in
            if table.values[requestID] == nil { table.values[requestID] = (initial(), DispatchTime.now().uptimeNanoseconds) }
            // In place: the stored value is not copied out and back.
            return body(&table.values[requestID]!.value)
        }
    }

    /// How many requests have state.
    public var count: Int { table.withLock { $0.values.count } }
}

// Safe: the table is only touched under its lock, and values cross threads only when Sendable.
extension PerRequestState: @unchecked Sendable where Value: Sendable {}
