import Foundation
import PluginHost
import PluginSDK
import Testing

@Suite("activity plugin (loaded from its bundle)")
struct ActivityPluginTests {
    @Test func beganAndEndedWithFieldsAndTheShowLoadingFlag() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("activity", [:])])
        let events = LockedCounter()
        let subscription = provider.services.subscribe { event in
            events.append(
                "\(event.plugin) \(event.name) \(event.fields["method"]!) \(event.fields["path"]!) \(event.fields["inFlight"]!) \(event.fields["activity"]!) \(event.fields["outcome"] ?? "-")"
            )
        }
        defer { subscription.cancel() }
        _ = try await provider.request(try Bin("status/201", options: ["activity": "hide"])).value
        _ = try await provider.request(try Bin("get")).value
        #expect(
            events.log == [
                "activity began GET status/201 1 hide -", "activity ended GET status/201 0 hide 201",
                "activity began GET get 1 show -", "activity ended GET get 0 show 200",
            ])
    }

    @Test func endedComesOnErrorsTimeoutsAndCancellation() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("activity", ["defaultVisibility": "hide"])])
        let outcomes = LockedCounter()
        let subscription = provider.services.subscribe { if $0.name == "ended" { outcomes.append($0.fields["outcome"]!) } }
        defer { subscription.cancel() }
        _ = await provider.request(try Bin("get", base: closedPortURL())).result
        let slow = try f.provider([("activity", [:])], services: provider.services, requestTimeout: 0.5)
        _ = await slow.request(try Bin("delay/3")).result
        let target = try Bin("delay/10")
        let task = Task { await provider.request(target).result }
        #expect(await eventually { outcomes.log.count == 2 && provider.inflightCount == 1 })
        try await Task.sleep(nanoseconds: 200_000_000)
        task.cancel()
        _ = await task.value
        #expect(await eventually { outcomes.log.count == 3 })
        #expect(outcomes.log == ["cannotConnect", "timedOut", "cancelled"])
    }

    /// A subscriber that comes while an attempt is in flight gets no `ended` for it (its `began`
    /// went to nobody): it got one unpaired, and an indicator counting them went below zero. It
    /// gets a `count` instead, with the new count (see the next test).
    @Test func noEndedWithoutItsBegan() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("activity", [:])])
        let task = Task { try await provider.request(try Bin("delay/1")).value }
        #expect(await eventually { provider.inflightCount == 1 })
        try await Task.sleep(nanoseconds: 200_000_000)
        let events = LockedCounter()
        let subscription = provider.services.subscribe { events.append("\($0.name) \($0.fields["inFlight"]!)") }
        defer { subscription.cancel() }
        _ = try await task.value
        _ = try await provider.request(try Bin("get")).value
        #expect(events.log == ["count 0", "began 1", "ended 0"])
    }

    /// Requests begun before anyone subscribed, ending after one that began and ended since:
    /// their ends tell the count (`count`), down to 0. They ended unseen, and an indicator that
    /// keeps the highest sequence's count stayed on with the 1 the later request's `ended` said.
    @Test func theEndsOfUnseenAttemptsTellTheCount() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("activity", [:])])
        let slow = Task { try await provider.request(try Bin("delay/2")).value }
        #expect(await eventually { provider.inflightCount == 1 })
        try await Task.sleep(nanoseconds: 200_000_000)
        let events = Locked([(name: String, inFlight: Int, sequence: UInt64)]())
        let subscription = provider.services.subscribe { event in
            guard event.plugin == "activity" else { return }
            events.withLock { $0.append((event.name, Int(event.fields["inFlight"]!)!, UInt64(event.fields["sequence"]!)!)) }
        }
        defer { subscription.cancel() }
        _ = try await provider.request(try Bin("get")).value
        _ = try await slow.value
        #expect(events.withLock { $0.map { "\($0.name) \($0.inFlight)" } } == ["began 2", "ended 1", "count 0"])
        #expect(events.withLock { $0.max { $0.sequence < $1.sequence }?.inFlight } == 0)
    }

    /// The count is the provider's: after a reload, the new instance counts on from the requests
    /// still running on the old one (it started again from 0, and an indicator hid while they ran).
    @Test func aReloadKeepsCounting() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        _ = try f.contrib("Activity")
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "activity"]]))
        let events = LockedCounter()
        let subscription = provider.services.subscribe { event in
            if event.plugin == "activity" { events.append("\(event.name) \(event.fields["path"]!) \(event.fields["inFlight"]!)") }
        }
        defer { subscription.cancel() }
        let slow = Task { try await provider.request(try Bin("delay/3")).value }
        #expect(await eventually(10) { events.log.count == 1 })
        _ = try f.manifest([["name": "activity", "config": ["defaultVisibility": "hide"]]])
        #expect(try provider.reloadPlugins().reconfigured == ["activity"])
        _ = try await provider.request(try Bin("get")).value
        _ = try await slow.value
        #expect(events.log == ["began delay/3 1", "began get 2", "ended get 1", "ended delay/3 0"])
    }

    /// A scope made anew for the same services (a reload disabled the plugin, its last instance
    /// went, another reload enabled it) numbers its events past the old scope's: it counted from
    /// 1 again, and an indicator keeping the highest `sequence` seen ignored its events.
    @Test func aScopeMadeAnewNumbersOnPastTheOldOne() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        _ = try f.contrib("Activity")
        let provider = try Provider<Bin>(manifest: try f.manifest([["name": "activity"]]))
        let sequences = LockedCounter()
        let subscription = provider.services.subscribe { event in
            if event.plugin == "activity" { sequences.append(event.fields["sequence"]!) }
        }
        defer { subscription.cancel() }
        for _ in 0..<3 { _ = try await provider.request(try Bin("get")).value }
        _ = try f.manifest([["name": "activity", "enabled": false]])
        #expect(try provider.reloadPlugins().removed == ["activity"])
        _ = try f.manifest([["name": "activity"]])
        #expect(try provider.reloadPlugins().added == ["activity"])
        _ = try await provider.request(try Bin("get")).value
        let numbers = sequences.log.map { UInt64($0)! }
        #expect(numbers.count == 8)
        #expect(numbers == numbers.sorted() && Set(numbers).count == 8, "\(numbers)")
    }

    /// Events of concurrent requests may reach a subscriber out of order (each hook sends its
    /// own after counting); `sequence`, counted with `inFlight`, orders them: replayed by it,
    /// every `inFlight` is the count of the events before, and the last one says 0. Without it a
    /// late `ended` with 0 hid an indicator while another request ran.
    @Test func eventsReplayedBySequenceCountInFlight() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("activity", [:])])
        let events = Locked<[(sequence: UInt64, began: Bool, inFlight: Int)]>([])
        let subscription = provider.services.subscribe { event in
            let entry = (UInt64(event.fields["sequence"] ?? "") ?? 0, event.name == "began", Int(event.fields["inFlight"]!)!)
            events.withLock { $0.append(entry) }
        }
        defer { subscription.cancel() }
        let target = try Bin("get")
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<64 { group.addTask { _ = await provider.request(target).result } }
        }
        let sorted = events.withLock { $0 }.sorted { $0.sequence < $1.sequence }
        #expect(sorted.count == 128)
        #expect(Set(sorted.map(\.sequence)).count == 128 && sorted.first?.sequence ?? 0 > 0, "every event has a number of its own")
        var count = 0
        var wrong = 0
        for event in sorted {
            count += event.began ? 1 : -1
            if event.inFlight != count { wrong += 1 }
        }
        #expect(wrong == 0 && sorted.last?.inFlight == 0)
    }

    @Test func inFlightReturnsToZeroAfterABurstWithCancellations() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("activity", [:])])
        struct Tally: Sendable {
            var open: [String: Int] = [:]
            var began = 0, ended = 0, negative = 0, unmatched = 0
        }
        let tally = Locked(Tally())
        let subscription = provider.services.subscribe { event in
            let key = event.fields["requestID"]! + "/" + event.fields["attempt"]!
            tally.withLock { tally in
                if Int(event.fields["inFlight"]!)! < 0 { tally.negative += 1 }
                if event.name == "began" {
                    tally.began += 1
                    tally.open[key, default: 0] += 1
                } else {
                    tally.ended += 1
                    if tally.open[key] != 1 { tally.unmatched += 1 }
                    tally.open[key] = nil
                }
            }
        }
        defer { subscription.cancel() }
        let fast = try Bin("get")
        let slow = try Bin("delay/2")
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                let cancelled = index % 5 == 0
                group.addTask {
                    let task = Task { await provider.request(cancelled ? slow : fast).result }
                    if cancelled {
                        try? await Task.sleep(nanoseconds: 150_000_000)
                        task.cancel()
                    }
                    _ = await task.value
                }
            }
        }
        #expect(await eventually { tally.withLock { $0.began == $0.ended } })
        let last = LockedCounter()
        let probe = provider.services.subscribe { if $0.name == "began" { last.append($0.fields["inFlight"]!) } }
        defer { probe.cancel() }
        _ = try await provider.request(fast).value
        let final = tally.withLock { $0 }
        // Requests cancelled before they were sent never begin; every one that began ended.
        #expect(final.began >= 161)
        #expect(final.ended == final.began)
        #expect(final.negative == 0)
        #expect(final.unmatched == 0)
        #expect(final.open.isEmpty)
        #expect(last.log == ["1"])
    }
}
