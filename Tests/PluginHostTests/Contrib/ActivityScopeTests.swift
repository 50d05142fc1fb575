import Foundation
import PluginHost
import PluginSDK
import Testing

@testable import ActivityPlugin

/// The activity plugin's instances on one `PluginServices` share one in-flight count.
@Suite("activity plugin: one scope per services")
struct ActivityScopeTests {
    /// Instances made at once on one services (providers built concurrently) find one scope:
    /// each read the services' store, found no id, and made a scope of its own, so their counts
    /// went apart (a read and a write of the store apart: about one services in five here).
    @Test func instancesMadeAtOnceShareOneScope() async throws {
        let apart = try await offThePool { () -> Int in
            var apart = 0
            for _ in 0..<300 {
                let host = PluginServices().hostServices(for: "activity")
                let found = Locked<[ActivityPlugin.Scope]>([])
                DispatchQueue.concurrentPerform(iterations: 8) { _ in
                    let scope = ActivityPlugin.scope(host)
                    found.withLock { $0.append(scope) }
                }
                let scopes = found.withLock { $0 }
                if scopes.count != 8 || !scopes.allSatisfy({ $0 === scopes[0] }) { apart += 1 }
            }
            return apart
        }
        #expect(apart == 0, "\(apart) of 300 services had their instances' counts apart")
    }
}
