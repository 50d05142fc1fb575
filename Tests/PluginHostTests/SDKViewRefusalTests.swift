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
}
