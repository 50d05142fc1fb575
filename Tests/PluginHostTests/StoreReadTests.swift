import CPluginABI
import Foundation
import PluginSDK
import Testing

@testable import PluginHost

/// A loaded plugin reads the store by a key's bytes; keys read lately are found by their bytes
/// alone. What it reads is what the store holds, before and after every change.
struct StoreReadTests {
    /// `key`'s bytes as a loaded plugin gives them.
    private func read(_ services: PluginServices, _ key: [UInt8]) -> String? {
        key.withUnsafeBufferPointer { services.value(forKey: ph_bytes(data: $0.baseAddress, len: $0.count)) }
    }

    /// `key`'s UTF-8 as a loaded plugin gives it.
    private func read(_ services: PluginServices, _ key: String) -> String? { read(services, Array(key.utf8)) }

    @Test func readsByBytesFollowEveryChangeOfTheStore() {
        let services = PluginServices()
        services.setValue("1", forKey: "signature.secret")
        services.setValue("2", forKey: "access_token")
        #expect(read(services, "signature.secret") == "1")
        #expect(read(services, "access_token") == "2")
        // Read again (found by their bytes), and a key not stored.
        #expect(read(services, "signature.secret") == "1")
        #expect(read(services, "missing") == nil)
        #expect(read(services, "missing") == nil)
        // A value stored, changed or removed after it was read is read as it is now.
        services.setValue("3", forKey: "missing")
        #expect(read(services, "missing") == "3")
        services.setValue("rotated", forKey: "access_token")
        #expect(read(services, "access_token") == "rotated")
        services.setValue(nil, forKey: "signature.secret")
        #expect(read(services, "signature.secret") == nil)
    }

    @Test func moreKeysThanAreKeptAreReadRightEveryTime() {
        let services = PluginServices()
        let count = PluginServices.recentReadsKept * 3
        for index in 0..<count where index % 3 != 0 { services.setValue("value \(index)", forKey: "key \(index)") }
        for _ in 0..<2 {
            for index in 0..<count {
                #expect(read(services, "key \(index)") == (index % 3 == 0 ? nil : "value \(index)"), "key \(index)")
            }
        }
    }

    @Test func anInvalidOrEmptyKeyIsReadAsItsRepairedString() {
        let services = PluginServices()
        services.setValue("repaired", forKey: "a\u{FFFD}")
        services.setValue("empty", forKey: "")
        for _ in 0..<2 {
            #expect(read(services, [0x61, 0xFF]) == "repaired")
            #expect(read(services, []) == "empty")
            #expect(services.value(forKey: ph_bytes(data: nil, len: 0)) == "empty")
        }
        // A length without a pointer is no bytes: the empty key's value, also after "hello" (of
        // that length) was read.
        services.setValue("h", forKey: "hello")
        #expect(read(services, "hello") == "h")
        #expect(services.value(forKey: ph_bytes(data: nil, len: 5)) == "empty")
    }
}
