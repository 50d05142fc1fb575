import Foundation

/// Thread-safe state a plugin keeps per request between its hooks, keyed by
/// ``InterceptorContext/requestID``.
///
/// Entries are removed by the plugin (usually in `process`, the last hook of an attempt);
/// entries older than ``maxAge`` seconds are dropped so a request that never reached its
/// response side cannot leak.
public final class PerRequestState<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [UInt64: (value: Value, stored: UInt64)] = [:]
    private var insertions = 0
    /// Seconds after which a forgotten entry is dropped; default 600.
    public let maxAge: Double

    /// Creates an empty table.
    public init(maxAge: Double = 600) {
        self.maxAge = maxAge
    }

    /// Stores `value` for `requestID`.
    public func set(_ value: Value, for requestID: UInt64) {
        let now = DispatchTime.now().uptimeNanoseconds
        lock.lock()
        defer { lock.unlock() }
        values[requestID] = (value, now)
        insertions += 1
        if insertions % 1024 == 0 {
            let limit = UInt64(maxAge * 1_000_000_000)
            values = values.filter { now &- $0.value.stored < limit }
        }
    }

    /// The value for `requestID`, if any.
    public func get(_ requestID: UInt64) -> Value? {
        lock.lock()
        defer { lock.unlock() }
        return values[requestID]?.value
    }

    /// Removes and returns the value for `requestID`.
    @discardableResult
    public func remove(_ requestID: UInt64) -> Value? {
        lock.lock()
        defer { lock.unlock() }
        return values.removeValue(forKey: requestID)?.value
    }

    /// Edits the value for `requestID` in place (creating it from `initial` when absent).
    public func update<R>(_ requestID: UInt64, initial: @autoclosure () -> Value, _ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        var entry = values[requestID] ?? (initial(), DispatchTime.now().uptimeNanoseconds)
        let result = body(&entry.value)
        values[requestID] = entry
        return result
    }

    /// How many requests have state.
    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return values.count
    }
}
