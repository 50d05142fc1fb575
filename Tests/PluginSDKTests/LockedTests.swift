import Foundation
import PluginSDK
import Testing

/// `Locked`: on Linux its own futex lock (ph_atomic.h), taken inline; a thread that finds it held
/// spins briefly, then sleeps until the holder gives it back.
@Suite("Locked")
struct LockedTests {
    /// Threads that take the lock at the same moment, many times each, lose no update.
    @Test func concurrentUpdatesAreAllKept() async {
        let counter = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<20_000 { counter.withLock { $0 += 1 } }
                }
            }
        }
        #expect(counter.withLock { $0 } == 160_000)
    }

    /// A holder that keeps the lock long enough for the others to stop spinning and sleep: each
    /// of them is woken and takes it in turn, and sees every change made before it.
    @Test func threadsThatSleepOnAHeldLockAreWokenOneByOne() {
        let log = Locked<[Int]>([])
        let started = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        log.withLock { entries in
            // Threads of their own (a pool's few threads, blocked here, could not run the rest).
            for index in 1...4 {
                Thread {
                    started.signal()
                    log.withLock { $0.append(index) }
                    done.signal()
                }.start()
            }
            for _ in 1...4 { started.wait() }
            // Long past the spin: every waiting thread is asleep in the kernel by now.
            Thread.sleep(forTimeInterval: 0.05)
            entries.append(0)
        }
        for _ in 1...4 { #expect(done.wait(timeout: .now() + 10) == .success) }
        let entries = log.withLock { $0 }
        #expect(entries.first == 0)
        #expect(entries.dropFirst().sorted() == [1, 2, 3, 4])
    }

    /// A value's result and error come back through the lock; the lock is given back on a throw.
    @Test func resultsAndErrorsPassThrough() {
        struct Refused: Error, Equatable {}
        let value = Locked("a")
        #expect(throws: Refused()) { try value.withLock { _ throws(Refused) in throw Refused() } }
        #expect(
            value.withLock {
                $0 += "b"
                return $0
            } == "ab")
    }
}
