import CDigest
import Foundation

// Pointer-sized memory read and written atomically (ph_atomic.h), where a lock would cost more
// than the work it guards. Each slot is one allocation its owner frees in its `deinit`.

/// A view's handle, in memory of its own read and written atomically: the view is pointed at the
/// next request's handle by the hook call that holds the instance's ``TakenSlot`` value, and the
/// hook that used it last read it on another thread (no lock between the two; the reference count
/// that orders them is the runtime's, which the thread sanitizer does not see).
struct HandleSlot {
    private let slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>

    init(_ handle: OpaquePointer) {
        slot = .allocate(capacity: 1)
        slot.initialize(to: UnsafeMutableRawPointer(handle))
    }

    /// The handle; nil once the view is retired (a NULL handle, which the host reads as none).
    var handle: OpaquePointer? { OpaquePointer(ph_atomic_load_pointer(slot)) }

    func set(_ handle: OpaquePointer) { ph_atomic_store_pointer(slot, UnsafeMutableRawPointer(handle)) }

    /// Points the view at no handle: a plugin kept it past its hook, after which the handle's
    /// state may be freed (and its memory another request's).
    func retire() { ph_atomic_store_pointer(slot, nil) }

    /// What a setter of a retired view throws.
    static let retired = InterceptorError.failed(
        "a request or response was used after its hook returned (a hook's request and response are valid only during the call)")

    /// Whether the slot holds `handle` (compared without unwrapping a handle, which kept the view
    /// retained across the read for the unwrap's trap).
    func holds(_ handle: OpaquePointer) -> Bool { ph_atomic_load_pointer(slot) == UnsafeMutableRawPointer(handle) }

    /// Frees the memory (the view's `deinit`), after an atomic read that orders the last store
    /// before it for the sanitizer too.
    func free() {
        _ = ph_atomic_load_pointer(slot)
        slot.deallocate()
    }
}

/// A count read and changed atomically, where a lock would cost more than the read: how many
/// subscribers listen for events, which every request of an event emitter asks; how many entries a
/// ``PerRequestState`` holds.
@usableFromInline
package final class AtomicCount: @unchecked Sendable {
    // Safe: the memory is read and written only atomically, and freed by `deinit` alone.
    private let slot: UnsafeMutablePointer<Int>

    /// A count of zero.
    @usableFromInline
    package init() {
        slot = .allocate(capacity: 1)
        slot.initialize(to: 0)
    }

    deinit {
        _ = ph_atomic_load_count(slot)
        slot.deallocate()
    }

    /// The count now.
    @usableFromInline
    package var value: Int { ph_atomic_load_count(slot) }

    /// Adds `delta` (negative to subtract).
    @usableFromInline
    package func add(_ delta: Int) { ph_atomic_add_count(slot, delta) }
}

/// The host calls of one plugin instance's ``HostServices`` under way, and whether the host table
/// they go through is still valid: the host frees it once `destroy` returns, and a task or thread
/// the plugin started may still hold the services then (they are `Sendable`). A call counts itself
/// in while it reads the table; ``close()`` (the instance's `destroy`) shuts out the calls after
/// it and waits for those under way. One atomic count: the calls, plus ``closedMark`` once closed.
final class CallGate: @unchecked Sendable {
    // Safe: the memory is read and written only atomically, and freed by `deinit` alone.
    private let slot: UnsafeMutablePointer<Int>
    /// Added to the count by ``close()``: far above any number of calls under way at once (and
    /// twice it still an `Int`).
    private static let closedMark = Int.max / 4 + 1

    init() {
        slot = .allocate(capacity: 1)
        slot.initialize(to: 0)
    }

    deinit {
        _ = ph_atomic_load_count(slot)
        slot.deallocate()
    }

    /// Runs `body` counted in, or returns `closed` without running it once the gate is closed.
    @inline(__always)
    func pass<T>(closed: @autoclosure () -> T, _ body: () -> T) -> T {
        guard ph_atomic_add_fetch_count(slot, 1) < Self.closedMark else {
            ph_atomic_add_count(slot, -1)
            return closed()
        }
        // This thread is in one more call of this gate (its close() from within does not wait for it).
        var outerDepth = 0
        let outer = ph_gate_thread_current(&outerDepth)
        let me = UnsafeRawPointer(slot)
        ph_gate_thread_set(me, outer == me ? outerDepth + 1 : 1)
        defer {
            ph_gate_thread_set(outer, outerDepth)
            ph_atomic_add_count(slot, -1)
        }
        return body()
    }

    /// Shuts out the calls from now on and waits for those under way to return, but for the
    /// ones this thread is in (a host call of the instance that led to its destroy: an event
    /// handler that reloads, a log handler that lets the provider go).
    func close() {
        guard ph_atomic_add_fetch_count(slot, Self.closedMark) < 2 * Self.closedMark else { return }
        var depth = 0
        let own = ph_gate_thread_current(&depth) == UnsafeRawPointer(slot) ? depth : 0
        while ph_atomic_load_count(slot) % Self.closedMark > own { sched_yield() }
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

/// Values that callers work on in place, one caller at a time per value: ``withTaken(_:)`` takes
/// the first value no other caller holds (one compare-exchange on its flag), runs the body on it
/// where it is (no copy: nothing retained, and the body passes its parts on borrowed), and gives it
/// back with a release store. A caller that finds every value taken (more hooks of one plugin at the
/// same moment than there are values, or a hook that calls back into its own plugin) works on a
/// spare value, made for it and kept nothing of.
///
/// Where a lock guarded one value, a caller copied what it needed out of it (a retain and a release
/// per reference, and the lock's own call); here a caller holds its value for as long as its body
/// runs, so there is one value per thread that may run the body at once (``valueCount``).
package struct TakenSlot<Value>: ~Copyable {
    private let memory: UnsafeMutablePointer<Value>
    /// Non-nil while a caller holds the value at the same position (its own address, as a marker).
    private let taken: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    private let count: Int
    /// Makes the value a caller works on when every one is held.
    private let spare: @Sendable () -> Value

    /// How many values a slot keeps: one per processor, up to 16 (hooks run on the threads of the
    /// concurrency pool, one per processor), and at least 2.
    package static var valueCount: Int { min(16, max(2, ProcessInfo.processInfo.activeProcessorCount)) }

    /// ``valueCount`` values, each made by `make`, and `spare` for callers that find them all taken.
    package init(count: Int = Self.valueCount, _ make: () -> Value, spare: @escaping @Sendable () -> Value) {
        self.count = max(1, count)
        self.spare = spare
        memory = .allocate(capacity: self.count)
        taken = .allocate(capacity: self.count)
        for index in 0..<self.count {
            (memory + index).initialize(to: make())
            (taken + index).initialize(to: nil)
        }
    }

    /// Runs `body` on the first value no other caller holds, or on a spare one when every value is
    /// held. A caller working alone always gets the first value.
    @inline(__always)
    package func withTaken<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        for index in 0..<count {
            var expected: UnsafeMutableRawPointer? = nil
            let flag = taken + index
            guard ph_atomic_compare_exchange_pointer(flag, &expected, UnsafeMutableRawPointer(flag)) != 0 else { continue }
            // Changed where it is (no copy): the body has exclusive access while it holds the flag.
            // Through the value's own pointer: `&memory[index]` is an access to `memory.pointee`
            // too for the thread sanitizer, which then sees two holders of different values
            // write the first one.
            defer { ph_atomic_store_pointer(flag, nil) }
            let value = memory + index
            return try body(&value.pointee)
        }
        var own = spare()
        return try body(&own)
    }

    deinit {
        // Read atomically: the last caller gave its value back on another thread, ordered before this
        // deinit by the owner's reference count, which the thread sanitizer does not see.
        for index in 0..<count { _ = ph_atomic_load_pointer(taken + index) }
        memory.deinitialize(count: count)
        memory.deallocate()
        taken.deallocate()
    }
}

// Safe: each value is reached only by the caller holding its flag, taken and given back atomically
// (acquire, release); the spare maker is Sendable.
extension TakenSlot: @unchecked Sendable where Value: Sendable {}
