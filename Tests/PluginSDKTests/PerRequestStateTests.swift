import Dispatch
import Foundation
import PluginSDK
import Testing

@testable import PluginSDK

@Suite("Per-request state")
struct PerRequestStateTests {
    @Test func setGetUpdateAndRemovePerRequest() {
        let state = PerRequestState<String>()
        #expect(state.get(1) == nil)
        state.set("a", for: 1)
        state.set("b", for: 2)
        #expect(state.get(1) == "a" && state.get(2) == "b" && state.count == 2)
        // Set again: replaced.
        state.set("a2", for: 1)
        #expect(state.get(1) == "a2")
        // Update in place, or from the initial value for a request without one.
        let length = state.update(1, initial: "unused") { value -> Int in
            value += "!"
            return value.count
        }
        #expect(length == 3 && state.get(1) == "a2!")
        state.update(3, initial: "c") { $0 += "?" }
        #expect(state.get(3) == "c?")
        #expect(state.remove(1) == "a2!")
        #expect(state.remove(1) == nil)
        #expect(state.get(1) == nil && state.count == 2)
    }

    /// Entries a request never removed (it never reached its response side) go once they are older
    /// than `maxAge`, checked every 1,024 insertions.
    @Test func forgottenEntriesAreDroppedAfterMaxAge() throws {
        let state = PerRequestState<Int>(maxAge: 0.05)
        for id in 0..<1000 { state.set(Int(id), for: UInt64(id)) }
        #expect(state.count == 1000)
        Thread.sleep(forTimeInterval: 0.2)
        // The 1,024th insertion sweeps: only the entries made since the pause are left.
        for id in 1000..<1024 { state.set(Int(id), for: UInt64(id)) }
        #expect(state.count == 24)
        #expect(state.get(0) == nil && state.get(999) == nil && state.get(1023) == 1023)
        // The table's count of entries (read without its lock, so that an empty table is asked
        // and emptied without taking it) follows the sweep: emptied, then an entry is found again.
        for id in 1000..<1024 { #expect(state.remove(UInt64(id)) == id) }
        #expect(state.count == 0 && state.get(1023) == nil && state.remove(1023) == nil)
        state.set(7, for: 5000)
        state.update(5001, initial: 8) { $0 += 1 }
        #expect(state.get(5000) == 7 && state.get(5001) == 9 && state.remove(5001) == 9 && state.count == 1)
    }

    /// A `maxAge` of no time, of none (NaN) or of centuries does not trap (its nanoseconds
    /// trapped below 0 and past 584 years): none or no time drops every entry at the sweep,
    /// centuries none.
    @Test func anyMaxAgeIsTaken() {
        for (maxAge, left) in [(-1.0, 0), (.nan, 0), (1e300, 1024), (.infinity, 1024)] {
            let state = PerRequestState<Int>(maxAge: maxAge)
            for id in 0..<1024 { state.set(id, for: UInt64(id)) }
            #expect(state.count == left, "maxAge \(maxAge)")
        }
    }

    @Test func concurrentRequestsKeepTheirOwnValues() async {
        let state = PerRequestState<UInt64>()
        await withTaskGroup(of: Bool.self) { group in
            for id in UInt64(0)..<200 {
                group.addTask {
                    state.set(id * 2, for: id)
                    state.update(id, initial: 0) { $0 += 1 }
                    return state.remove(id) == id * 2 + 1
                }
            }
            let all = await group.reduce(true) { $0 && $1 }
            #expect(all)
        }
        #expect(state.count == 0)
        state.set(1, for: 1)
        #expect(state.get(1) == 1 && state.remove(1) == 1 && state.get(1) == nil)
    }

    /// Entries `update` makes count toward the sweep as `set`'s do: they never did, and a plugin
    /// that keeps its state through `update` (access-token's retries) grew without bound.
    @Test func entriesUpdateMakesAreSweptToo() {
        let state = PerRequestState<Int>(maxAge: 0)
        for id in 0..<5000 { state.update(UInt64(id), initial: id) { _ in } }
        // Swept (every entry, at a max age of 0) before the 1,024th, 2,048th, 3,072nd and 4,096th
        // entries are made: those made from the 4,096th on are left.
        #expect(state.count == 5000 - 4095)
    }

    /// A sweep keeps an entry stamped after the sweeping `set` read its clock: `set` read it
    /// before it had the lock, the newer stamp wrapped past the limit, and a live entry went
    /// (with an infinite max age too).
    @Test func aSweepKeepsAnEntryStampedWhileItWaitedForTheLock() {
        let state = PerRequestState<Int>(maxAge: .infinity)
        for id in 0..<1023 { state.set(id, for: UInt64(id)) }
        for id in 0..<1023 { state.remove(UInt64(id)) }
        let done = DispatchSemaphore(value: 0)
        state.table.withLock { table in
            // The 1,024th insertion sweeps; it waits for this lock.
            Thread {
                state.set(-1, for: 9999)
                done.signal()
            }.start()
            usleep(50_000)
            table.values[42] = (7, DispatchTime.now().uptimeNanoseconds)
            state.entries.add(1)
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(state.get(42) == 7)
        #expect(state.get(9999) == -1)
    }
}
