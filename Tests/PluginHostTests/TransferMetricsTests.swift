import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `Response.metrics`: what `CurlTransport` measured of the exchange (libcurl's times of the last
/// hop, the redirects before it, the connection and the body bytes), none where no transfer made
/// the response.
@Suite("Transfer metrics")
struct TransferMetricsTests {
    /// An interceptor that answers every request itself, in `prepare`.
    struct Answering: Interceptor {
        var name: String { "answering" }
        func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
            .respond(SyntheticResponse(statusCode: 203, headers: [], body: Array("made".utf8)))
        }
    }

    /// An interceptor that only changes the response's status: the transfer's metrics stay.
    struct Editing: Interceptor {
        var name: String { "editing" }
        func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
            if case .response(let response) = result { try response.setStatusCode(299) }
        }
    }

    func stagesInOrder(_ metrics: TransferMetrics) -> Bool {
        0 <= metrics.nameLookup && metrics.nameLookup <= metrics.connect && metrics.connect <= metrics.requestStart
            && (metrics.tlsHandshake.map { metrics.connect <= $0 && $0 <= metrics.requestStart } ?? true)
            && metrics.requestStart <= metrics.firstByte && metrics.firstByte <= metrics.total && metrics.total > 0
    }

    @Test func aPlainExchangeSaysWhenEachStageEndedAndOverWhichConnection() async throws {
        let base = try TestServer.url()
        let provider = Provider<Bin>(transport: try CurlTransport())
        let body = Data(repeating: 0x61, count: 1000)
        let first = try await provider.request(try Bin("anything", method: .post, task: .requestData(body))).value
        let metrics = try #require(first.metrics, "CurlTransport measures every exchange")
        #expect(stagesInOrder(metrics), "\(metrics)")
        #expect(metrics.tlsHandshake == nil)
        #expect(metrics.remoteAddress == "127.0.0.1")
        #expect(metrics.remotePort == base.port)
        #expect(metrics.requestBodyBytes == 1000)
        #expect(metrics.responseBodyBytes == Int64(first.data.count))
        #expect(metrics.redirectCount == 0 && metrics.redirectTime == 0)
        #expect(!metrics.reusedConnection)
        // The next request goes over the connection the first one made (kept alive).
        let second = try #require(try await provider.request(try Bin("get")).value.metrics)
        #expect(second.reusedConnection)
        #expect(second.connect == 0 && second.requestBodyBytes == 0)
        #expect(stagesInOrder(second), "\(second)")
    }

    @Test func aTLSExchangeSaysWhenItsHandshakeEnded() async throws {
        var configuration = CurlTransport.Configuration()
        configuration.tls = TLSConfiguration(trustRoots: .only([.file(try CurlTLSTests.env("TLS_CA_PEM"))]))
        let base = try #require(URL(string: try CurlTLSTests.env("HTTPBIN_TLS_URL")))
        let provider = Provider<Bin>(transport: try CurlTransport(configuration: configuration))
        let metrics = try #require(try await provider.request(try Bin("get", base: base)).value.metrics)
        let handshake = try #require(metrics.tlsHandshake, "\(metrics)")
        #expect(handshake > metrics.connect)
        #expect(stagesInOrder(metrics), "\(metrics)")
        #expect(metrics.remotePort == base.port)
    }

    @Test func redirectsAreCountedWithTheTimeTheyTook() async throws {
        let provider = Provider<Bin>(transport: try CurlTransport())
        let response = try await provider.request(try Bin("redirect/3")).value
        #expect(response.statusCode == 200)
        let metrics = try #require(response.metrics)
        #expect(metrics.redirectCount == 3)
        #expect(metrics.redirectTime > 0)
        #expect(stagesInOrder(metrics), "\(metrics)")
        #expect(metrics.description.contains("3 redirects in "), "\(metrics)")
    }

    /// A response a hook made, or a stub, has none; one a hook only edited keeps the transfer's.
    @Test func onlyATransferHasMetrics() async throws {
        let answered = Provider<Bin>(transport: try CurlTransport(), interceptors: [Answering()])
        let made = try await answered.request(try Bin("get")).value
        #expect(made.statusCode == 203 && made.metrics == nil)
        let edited = Provider<Bin>(transport: try CurlTransport(), interceptors: [Editing()])
        let kept = try await edited.request(try Bin("get")).value
        #expect(kept.statusCode == 299)
        #expect(kept.metrics != nil)
        let stubbed = Provider<Bin>(stubClosure: Provider<Bin>.immediatelyStub)
        #expect(try await stubbed.request(try Bin("get")).value.metrics == nil)
        // Equal responses whatever their metrics.
        let a = Response(
            statusCode: 200, data: Data(),
            metrics: TransferMetrics(nameLookup: 0, connect: 0, tlsHandshake: nil, requestStart: 0, firstByte: 1, total: 2, reusedConnection: true))
        #expect(a == Response(statusCode: 200, data: Data()))
    }

    @Test func theDescriptionIsOneLineInMilliseconds() {
        let metrics = TransferMetrics(
            nameLookup: 0.0001, connect: 0.0002, tlsHandshake: 0.0011, requestStart: 0.0012, firstByte: 0.0018, total: 0.00192,
            redirectCount: 1, redirectTime: 0.004, reusedConnection: false, remoteAddress: "::1", remotePort: 8443)
        #expect(
            metrics.description
                == "total 1.92 ms (name lookup 0.10, connect 0.20, tls 1.10, first byte 1.80), reused no, 1 redirect in 4.00 ms, [::1]:8443")
    }
}
