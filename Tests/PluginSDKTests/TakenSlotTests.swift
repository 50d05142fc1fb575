import Foundation
import PluginSDK
import Testing

@Suite("Values taken by one caller at a time")
struct TakenSlotTests {
    /// Owns a slot the way a loaded plugin's instance does: values start empty, a spare at [-1].
    final class Owner: @unchecked Sendable {
        let slot: TakenSlot<[Int]>
        init(count: Int) { slot = TakenSlot(count: count, { [] }, spare: { [-1] }) }
    }

    @Test func aCallerAloneAlwaysGetsTheFirstValueAndNestedCallersTheNextThenASpare() {
        let owner = Owner(count: 2)
        owner.slot.withTaken { $0.append(1) }
        owner.slot.withTaken { $0.append(2) }
        // A caller that finds the first value taken (here: the same thread, inside the first) gets
        // the second; one inside that finds both taken gets a spare, and what it does is not kept.
        let (second, spare) = owner.slot.withTaken { first -> ([Int], [Int]) in
            first.append(3)
            return owner.slot.withTaken { second in
                second.append(10)
                let spare = owner.slot.withTaken { spare in
                    spare.append(99)
                    return spare
                }
                return (second, spare)
            }
        }
        #expect(second == [10])
        #expect(spare == [-1, 99])
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
        // The second value kept its own change.
        #expect(owner.slot.withTaken { _ in owner.slot.withTaken { $0 } } == [10])
    }

    @Test func concurrentCallersEachGetAValueOrASpareAndNoChangeIsTorn() async {
        let owner = Owner(count: 2)
        // 8 tasks × 2,000 calls on 2 values: each call appends to a kept value or to a spare. Every
        // append to a kept value stays, in one piece (the thread sanitizer runs this too); whether
        // any call found both values taken depends on the scheduler, and either way is right.
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
        // Both values, read one inside the other (the second read gets the second value).
        let (first, second) = owner.slot.withTaken { first in (first, owner.slot.withTaken { $0 }) }
        let kept = first + second
        #expect(kept.count + spares == 16_000)
        #expect(Set(kept).count == kept.count)
        #expect(!kept.contains(-1))
    }

    @Test func aSlotKeepsOneValuePerProcessorWithinBounds() {
        #expect(TakenSlot<Int>.valueCount == min(16, max(2, ProcessInfo.processInfo.activeProcessorCount)))
    }
}
