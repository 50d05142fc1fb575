import CPluginABI
import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ABI 1.4: `ph_context.target_serial`. The host numbers each laid-out target; a plugin that
/// sees the serial of the target it decoded last reuses it without comparing bytes, and reads
/// the serial only from a context long enough to carry it.
@Suite("ABI 1.4: target serials")
struct TargetSerialTests {
    let target = { (path: String, options: [String: String]) in
        TargetInfo(method: "GET", baseURL: "http://a.invalid", path: path, pluginOptions: options)
    }

    @Test func anEqualTargetKeepsItsSerialAndAnotherGetsANewOne() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let plugins = try PluginLoader.load(manifest: try f.manifest([["name": "alpha"]]), services: PluginServices())
        let chain = InterceptorChain(interceptors: plugins, services: PluginServices(), maxRetries: 2)
        func serial(_ target: TargetInfo, _ id: UInt64) throws -> UInt64 {
            let layout = try #require(exactly(chain.makeContexts(target: target, requestID: id, attempt: 1)[0].hostAttachment, CContext.self))
            #expect(layout.pointer.pointee.struct_size == UInt32(MemoryLayout<ph_context>.size))
            #expect(layout.pointer.pointee.request_id == id)
            return layout.pointer.pointee.target_serial
        }
        let first = try serial(target("p", ["k": "v"]), 1)
        #expect(first != 0)
        #expect(try serial(target("p", ["k": "v"]), 2) == first)
        let other = try serial(target("p", ["k": "w"]), 3)
        #expect(other != first && other != 0)
        // The first target again: a layout of its own, so a serial of its own (never reused).
        let again = try serial(target("p", ["k": "v"]), 4)
        #expect(again != first && again != other)
        // A context made for a lone call (a credential hook, a wrapped plugin) is numbered too.
        let lone = CContext(
            InterceptorContext(target: target("p", [:]), requestID: 5, attempt: 1, services: BoundServices(services: PluginServices(), plugin: "p")))
        #expect(![0, first, other, again].contains(lone.pointer.pointee.target_serial))
    }

    /// A ph_context for `target`'s layout, as a host of the given struct size lays it out (the
    /// bytes past `size` hold `serial` all the same: a reader that honours the size never sees them).
    func context(_ layout: CTargetLayout, id: UInt64, size: Int, serial: UInt64) -> UnsafeMutablePointer<ph_context> {
        let pointer = UnsafeMutablePointer<ph_context>.allocate(capacity: 1)
        pointer.initialize(
            to: ph_context(
                struct_size: UInt32(size), request_id: id, attempt: 1, target_method: layout.names[0], target_base_url: layout.values[0],
                target_path: layout.names[1], option_count: layout.optionCount, option_keys: UnsafePointer(layout.names + 2),
                option_values: UnsafePointer(layout.values + 2), target_serial: serial))
        return pointer
    }

    /// Alpha loaded from its bundle, emitting `sending` from `willSend`, and the paths it reports
    /// (until the subscription is cancelled).
    func sendingAlpha(_ f: PluginFixtures) throws -> (LoadedPlugin, Locked<[String]>, EventSubscription) {
        try f.bundle("AlphaTestPlugin", defaultConfig: ["event": "sending"])
        let services = PluginServices()
        let plugin = try #require(try PluginLoader.load(manifest: try f.manifest([["name": "alpha"]]), services: services).first)
        let events = Locked<[String]>([])
        let subscription = services.subscribe { event in events.withLock { $0.append(event.fields["path"] ?? "?") } }
        return (plugin, events, subscription)
    }

    @Test func theSDKTrustsASerialAndComparesBytesWithoutOne() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let (plugin, events, subscription) = try sendingAlpha(f)
        defer { subscription.cancel() }
        let full = MemoryLayout<ph_context>.size
        let before14 = MemoryLayout<ph_context>.offset(of: \ph_context.target_serial)!
        let a = CTargetLayout(target("a", [:]))
        let b = CTargetLayout(target("b", [:]))
        let c = CTargetLayout(target("c", [:]))
        let contexts = [
            // 1.4: target a, decoded.
            context(a, id: 1, size: full, serial: 77),
            // 1.4: target b's bytes under a's serial: the plugin trusts the serial (a host never
            // does this; it shows that bytes are not compared when the serial matches).
            context(b, id: 2, size: full, serial: 77),
            // A 1.3 host's context (shorter, no serial) for c: compared byte for byte, and the
            // serial past its end (77 again) is never read.
            context(c, id: 3, size: before14, serial: 77),
            // 1.4 again, target b under a new serial: decoded.
            context(b, id: 4, size: full, serial: 78),
        ]
        defer {
            for pointer in contexts {
                pointer.deinitialize(count: 1)
                pointer.deallocate()
            }
        }
        for pointer in contexts {
            let state = RequestState(URLRequest(url: URL(string: "http://a.invalid/x")!))
            try withExtendedLifetime((a, b, c)) { try plugin.willSend(state.handle, UnsafePointer(pointer)) }
        }
        #expect(events.withLock { $0 } == ["a", "a", "c", "b"])
    }

    /// A context at the address of the last one, of the same request and attempt, but of another
    /// target (a new serial): the SDK reads it anew (it kept the last context, having compared
    /// only the address, the request and the attempt; a host may free a lone context, for a
    /// wrapped plugin, and the next one is made at the same address).
    @Test func aNewSerialAtTheSameAddressIsReadAnew() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let (plugin, events, subscription) = try sendingAlpha(f)
        defer { subscription.cancel() }
        let a = CTargetLayout(target("a", [:]))
        let b = CTargetLayout(target("b", [:]))
        let pointer = context(a, id: 9, size: MemoryLayout<ph_context>.size, serial: a.serial)
        defer {
            pointer.deinitialize(count: 1)
            pointer.deallocate()
        }
        let state = RequestState(URLRequest(url: URL(string: "http://a.invalid/x")!))
        try withExtendedLifetime((a, b)) {
            try plugin.willSend(state.handle, UnsafePointer(pointer))
            pointer.pointee.target_path = b.names[1]
            pointer.pointee.target_serial = b.serial
            try plugin.willSend(state.handle, UnsafePointer(pointer))
        }
        #expect(events.withLock { $0 } == ["a", "b"])
    }
}
