import Foundation
import PluginSDK
import Testing

@Suite("A value made once on first read")
struct OnceSlotTests {
    /// Counts how many values were made and how many went away.
    final class Made: Sendable {
        static let counts = Locked((made: 0, gone: 0))
        init() { Self.counts.withLock { $0.made += 1 } }
        deinit { Self.counts.withLock { $0.gone += 1 } }
    }

    /// Owns a slot the way the host's deferred request and response do.
    final class Owner: Sendable {
        let slot = OnceSlot<Made>()
        deinit { slot.free() }
    }

    /// Reads `owner`'s value on 64 tasks at once, then once more; the identities seen.
    func read(_ owner: Owner) async -> (concurrent: Set<ObjectIdentifier>, later: ObjectIdentifier, madeBefore: Int) {
        let concurrent = await withTaskGroup(of: ObjectIdentifier.self) { group in
            for _ in 0..<64 { group.addTask { ObjectIdentifier(owner.slot.value { Made() }) } }
            return await group.reduce(into: Set<ObjectIdentifier>()) { $0.insert($1) }
        }
        let madeBefore = Made.counts.withLock { $0.made }
        return (concurrent, ObjectIdentifier(owner.slot.value { Made() }), madeBefore)
    }

    @Test func everyReaderGetsTheFirstValueStoredAndItGoesWithItsOwner() async {
        Made.counts.withLock { $0 = (0, 0) }
        let seen = await read(Owner())
        // All readers got one object, whichever thread stored it; a later read made nothing.
        #expect(seen.concurrent.count == 1)
        #expect(seen.later == seen.concurrent.first)
        let counts = Made.counts.withLock { $0 }
        #expect(counts.made == seen.madeBefore && counts.made >= 1)
        // Values made by threads that lost the race went at once, the stored one with its owner.
        #expect(counts.gone == counts.made)
    }
}
