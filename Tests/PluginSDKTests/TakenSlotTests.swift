import Foundation
import PluginSDK
import Testing

@Suite("A value taken by one caller at a time")
struct TakenSlotTests {
    /// Owns a slot the way a loaded plugin's instance does; a spare starts at -1.
    final class Owner: @unchecked Sendable {
        let slot = TakenSlot<[Int]>([]) { [-1] }
        deinit { slot.free() }
    }

    @Test func theValueKeepsWhatEachCallerChangedAndANestedCallerWorksOnASpare() {
        let owner = Owner()
        owner.slot.withTaken { $0.append(1) }
        owner.slot.withTaken { $0.append(2) }
        // A caller that finds the value taken (here: the same thread, inside the first) gets a
        // spare, and what it does to it is not kept.
        let inner = owner.slot.withTaken { outer -> [Int] in
            outer.append(3)
            return owner.slot.withTaken { spare in
                spare.append(99)
                return spare
            }
        }
        #expect(inner == [-1, 99])
        #expect(owner.slot.withTaken { $0 } == [1, 2, 3])
        // A throwing body gives the value back, with what it changed before it threw.
        struct Stop: Error {}
        #expect(throws: Stop.self) {
            try owner.slot.withTaken { value in
                value.append(4)
                throw Stop()
            }
        }
        #expect(owner.slot.withTaken { $0 } == [1, 2, 3, 4])
    }

    @Test func concurrentCallersEachGetTheValueOrASpareAndNoChangeIsTorn() async {
        let owner = Owner()
        // 8 tasks × 2,000 calls: each call either appends to the kept value or to a spare. Every
        // append to the kept value stays, in one piece (the thread sanitizer runs this too).
        let spares = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var spares = 0
                    for call in 0..<2_000 {
                        let wasSpare = owner.slot.withTaken { value -> Bool in
                            let spare = value.first == -1
                            value.append(task * 10_000 + call)
                            return spare
                        }
                        if wasSpare { spares += 1 }
                    }
                    return spares
                }
            }
            return await group.reduce(0, +)
        }
        let kept = owner.slot.withTaken { $0 }
        #expect(kept.count + spares == 16_000)
        #expect(Set(kept).count == kept.count)
        #expect(kept.first != -1)
    }
}
