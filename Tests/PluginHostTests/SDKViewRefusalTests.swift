import CPluginABI
import Foundation
import Testing

@testable import PluginHost
@testable import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A loaded plugin's request and response views leave the checking of header fields to the host
/// (which trusts no plugin); the host's refusal reaches the plugin as the error a plugin compiled
/// in gets, and changes nothing.
@Suite("SDK views: the host's refusals")
struct SDKViewRefusalTests {
    @Test func aRefusedFieldIsTheSameErrorAsInProcessAndChangesNothing() throws {
        var api = HostTable.template
        let request = RequestState(URLRequest(url: URL(string: "http://127.0.0.1:9/a")!))
        let response = ResponseState(SyntheticResponse(statusCode: 200, headers: [HTTPHeader(name: "X-Kept", value: "1")]), url: nil)
        try withUnsafePointer(to: &api) { api in
            let requestView = InterceptorRequest(
                backend: CRequestBackend(handle: OpaquePointer(Unmanaged.passUnretained(request.handle).toOpaque()), api: api))
            let responseView = InterceptorResponse(
                backend: CResultBackend(handle: OpaquePointer(Unmanaged.passUnretained(response.handle).toOpaque()), api: api))
            let injected = "a\r\nX-Evil: 1"
            #expect(throws: InterceptorError.invalidHeaderName("Bad Name")) { try requestView.setHeader("Bad Name", "1") }
            #expect(throws: InterceptorError.invalidHeaderName("Bad Name")) { try requestView.removeHeader("Bad Name") }
            #expect(throws: InterceptorError.invalidHeaderValue(name: "X-A")) { try requestView.setHeader("X-A", injected) }
            #expect(throws: InterceptorError.invalidHeaderValue(name: "X-A")) { try requestView.addHeader("X-A", injected) }
            #expect(throws: InterceptorError.invalidHeaderName("Bad Name")) { try responseView.setHeader("Bad Name", "1") }
            #expect(throws: InterceptorError.invalidHeaderValue(name: "X-A")) { try responseView.addHeader("X-A", injected) }
            // A batch: the first bad edit and why, none applied.
            #expect(throws: HeaderEditError(index: 1, reason: InterceptorError.invalidHeaderValue(name: "X-B").description)) {
                try requestView.editHeaders([.set("X-A", "1"), .set("X-B", injected), .remove("X-C")])
            }
            #expect(throws: HeaderEditError(index: 2, reason: InterceptorError.invalidHeaderName("X C").description)) {
                try requestView.editHeaders([.set("X-A", "1"), .add("X-B", "2"), .remove("X C")])
            }
            #expect(request.headers.isEmpty)
            #expect(response.headers == [HTTPHeader(name: "X-Kept", value: "1")])
            // Good ones go through.
            try requestView.editHeaders([.set("X-A", "1"), .add("X-A", "2"), .set("X-B", "3")])
            try requestView.setHeader("X-C", "4")
            try responseView.setHeader("X-Kept", nil)
            try responseView.addHeader("X-New", "5")
            #expect(request.headers.values(named: "X-A") == ["1", "2"])
            #expect(request.headers.value(named: "X-B") == "3" && request.headers.value(named: "X-C") == "4")
            #expect(response.headers == [HTTPHeader(name: "X-New", value: "5")])
        }
    }

    /// Answers every request in `prepare`.
    struct Answering: ExportablePlugin {
        static var pluginName: String { "answering" }
        static var pluginVersion: String { "1.0.0" }
        static var pluginSummary: String { "Answers in prepare (test)" }
        static var implementedHooks: Set<InterceptorHook> { [.prepare] }
        init(configuration: PluginConfiguration, host: any HostServices) throws {}
        func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
            .respond(SyntheticResponse(statusCode: 200))
        }
    }

    /// `ph_challenge.is_proxy` (ABI 1.6) sits in what was the tail padding of a 1.5 challenge:
    /// `struct_size` is 88 bytes on a 64-bit host of either minor, so the SDK reads it only from a
    /// host of 1.6 or later (it read the padding of an older host's challenge as `is_proxy`, and a
    /// server's password could go to a proxy, or a proxy's to a server).
    @Test func isProxyIsReadOnlyFromAHostThatSetsIt() {
        let layout = MemoryLayout<ph_challenge>.self
        let endOf15 = layout.offset(of: \ph_challenge.previous_failure_count)! + 4
        let sizeOf15 = (endOf15 + layout.alignment - 1) / layout.alignment * layout.alignment
        #expect(sizeOf15 == layout.size)
        func isProxy(hostMinor: UInt16, field: Int32) -> Bool {
            var challenge = ph_challenge()
            challenge.struct_size = UInt32(layout.size)
            challenge.is_proxy = field
            return withUnsafePointer(to: &challenge) { ChallengeReading.question($0, hostMinor: hostMinor).isProxy }
        }
        // An older host's padding, whatever it holds, is no proxy.
        #expect(!isProxy(hostMinor: 5, field: -1) && !isProxy(hostMinor: 5, field: 1) && !isProxy(hostMinor: 0, field: 1))
        #expect(isProxy(hostMinor: 6, field: 1) && !isProxy(hostMinor: 6, field: 0))
    }

    /// A hook returns `PH_OK`, or `PH_ERROR` with a message (pluginhost.h): a host's refusal of an
    /// answer the SDK finds nothing wrong with was passed through as `PH_INVALID`, without one.
    @Test func aRefusedAnswerIsAnErrorWithAMessage() throws {
        var api = HostTable.template
        api.request_respond = { _, _, _, _, _, _ in PH_INVALID }
        let descriptor = PluginExport.descriptor(for: Answering.self).assumingMemoryBound(to: ph_plugin_descriptor.self)
        let request = RequestState(URLRequest(url: URL(string: "http://127.0.0.1:9/a")!))
        var storage = [UInt8](repeating: 0, count: 256)
        let (status, message) = try withUnsafePointer(to: &api) { api -> (Int32, String) in
            let config = Array("{}".utf8)
            let instance = config.withUnsafeBufferPointer { bytes in
                descriptor.pointee.create(ph_bytes(data: bytes.baseAddress, len: bytes.count), api, nil)
            }
            let created = try #require(instance)
            defer { descriptor.pointee.destroy(created) }
            return storage.withUnsafeMutableBufferPointer { buffer in
                var error = ph_error_buf(data: buffer.baseAddress, capacity: buffer.count, len: 0)
                let handle = OpaquePointer(Unmanaged.passUnretained(request.handle).toOpaque())
                let status = descriptor.pointee.prepare(created, handle, nil, &error)
                return (status, String(decoding: buffer[0..<error.len], as: UTF8.self))
            }
        }
        #expect(status == PH_ERROR)
        #expect(message == "the host refused the response (status \(PH_INVALID))")
    }
}
