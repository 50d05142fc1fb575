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
