import CDigest

// Pointer-sized memory read and written atomically (ph_atomic.h), where a lock would cost more
// than the work it guards. Each slot is one allocation its owner frees in its `deinit`.

/// A view's handle, in memory of its own read and written atomically: the view is pointed at the
/// next request's handle under the instance's lock, and the hook that used it last read it on
/// another thread (no lock between the two; the reference count that orders them is the
/// runtime's, which the thread sanitizer does not see).
struct HandleSlot {
    private let slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>

    init(_ handle: OpaquePointer) {
        slot = .allocate(capacity: 1)
        slot.initialize(to: UnsafeMutableRawPointer(handle))
    }

    var handle: OpaquePointer { OpaquePointer(ph_atomic_load_pointer(slot))! }

    func set(_ handle: OpaquePointer) { ph_atomic_store_pointer(slot, UnsafeMutableRawPointer(handle)) }

    /// Frees the memory (the view's `deinit`), after an atomic read that orders the last store
    /// before it for the sanitizer too.
    func free() {
        _ = ph_atomic_load_pointer(slot)
        slot.deallocate()
    }
}

/// A value made on first read and the same for every read after it, from any thread, without a
/// lock: threads that read it first at the same time may each make one, and all of them get the
/// one stored first (the others are dropped). For values that are cheap to make twice, where a
/// lock object per owner cost more than the value: an `HTTPURLResponse` or `URLRequest` made from
/// parts (rarely read at all), a cache entry's parsed fields (read by every hit).
package struct OnceSlot<Value> {
    private final class Box {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    private let slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>

    /// An empty slot; its owner calls ``free()`` in its `deinit`.
    package init() {
        slot = .allocate(capacity: 1)
        slot.initialize(to: nil)
    }

    /// The value, made by `make` when no thread has stored one yet.
    package func value(_ make: () -> Value) -> Value {
        if let stored = ph_atomic_load_pointer(slot) { return Unmanaged<Box>.fromOpaque(stored).takeUnretainedValue().value }
        let made = Unmanaged.passRetained(Box(make()))
        var found: UnsafeMutableRawPointer? = nil
        if ph_atomic_compare_exchange_pointer(slot, &found, made.toOpaque()) != 0 { return made.takeUnretainedValue().value }
        // Another thread stored one first: that one is the value.
        made.release()
        return Unmanaged<Box>.fromOpaque(found!).takeUnretainedValue().value
    }

    /// Releases the stored value and frees the memory (the owner's `deinit`: no one reads it any more).
    package func free() {
        // Read atomically too: the value may have been stored on another thread, and the reference
        // count that orders that store before this deinit is the runtime's, unseen by the sanitizer.
        if let stored = ph_atomic_load_pointer(slot) { Unmanaged<Box>.fromOpaque(stored).release() }
        slot.deallocate()
    }
}

// Safe: the slot is written once, atomically, with a value any thread may read (Sendable); it is
// freed only by its owner's deinit, when no thread reads it any more.
extension OnceSlot: @unchecked Sendable where Value: Sendable {}

/// A value one caller at a time works on as its own: ``withTaken(_:)`` runs the body on it
/// in place (no copy: no reference counted), with exclusive access while it holds it. A caller that
/// finds it taken (a hook of another request on another thread at the same moment) works on a
/// spare value instead, which it keeps nothing of. One compare-exchange and one store per call,
/// where a lock took two atomic operations and a value copied out of it retained every reference
/// it held (the body passes the taken value's parts on borrowed).
package struct TakenSlot<Value> {
    private let memory: UnsafeMutablePointer<Value>
    /// Non-nil while a caller holds the value (its own address, as a marker).
    private let taken: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    /// Makes the value a caller works on when another holds this one.
    private let spare: () -> Value

    /// A slot holding `value`, with `spare` for callers that find it taken; its owner calls
    /// ``free()`` in its `deinit`.
    package init(_ value: Value, spare: @escaping () -> Value) {
        self.spare = spare
        memory = .allocate(capacity: 1)
        memory.initialize(to: value)
        taken = .allocate(capacity: 1)
        taken.initialize(to: nil)
    }

    /// Runs `body` on the value, or on a spare one when another caller holds it.
    @inline(__always)
    package func withTaken<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        var free: UnsafeMutableRawPointer? = nil
        guard ph_atomic_compare_exchange_pointer(taken, &free, UnsafeMutableRawPointer(taken)) != 0 else {
            var own = spare()
            return try body(&own)
        }
        // Changed where it is (no copy): the body has exclusive access while the slot is taken.
        defer { ph_atomic_store_pointer(taken, nil) }
        return try body(&memory.pointee)
    }

    /// Destroys the value and frees the memory (the owner's `deinit`: no caller holds it any more).
    package func free() {
        _ = ph_atomic_load_pointer(taken)
        memory.deinitialize(count: 1)
        memory.deallocate()
        taken.deallocate()
    }
}
