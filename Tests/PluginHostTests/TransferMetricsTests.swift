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

    // MARK: Failures

    /// A provider over `transport` whose requests time out after `seconds` without a byte.
    func timingOut(after seconds: TimeInterval, over transport: CurlTransport) -> Provider<Bin> {
        Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                request.timeoutInterval = seconds
                return request
            }, transport: transport)
    }

    /// The error `target` fails with (nil, and an issue recorded, when it does not).
    func error(of target: Bin, through provider: Provider<Bin>) async -> NetworkError? {
        do {
            let response = try await provider.request(target).value
            Issue.record("expected a failure, got status \(response.statusCode)")
            return nil
        } catch {
            return error
        }
    }

    /// A timeout says how far the exchange got: connected and sent, no byte of an answer.
    @Test func aTimeoutSaysWhichStageItReached() async throws {
        let base = try TestServer.url()
        let transport = try CurlTransport()
        let provider = timingOut(after: 0.5, over: transport)
        let started = DispatchTime.now().uptimeNanoseconds
        let fresh = await error(of: try Bin("delay/3"), through: provider)
        let waited = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        #expect(fresh?.isTimeout == true, "\(String(describing: fresh))")
        let metrics = try #require(fresh?.metrics, "a transfer that started and failed is measured")
        #expect(!metrics.reusedConnection)
        #expect(metrics.connect > 0 && metrics.connect <= metrics.requestStart, "\(metrics)")
        #expect(metrics.firstByte == 0 && metrics.responseBodyBytes == 0, "\(metrics)")
        // The timeout less what the chain's hooks took of it (none here, but a busy machine's pauses).
        #expect(metrics.total >= 0.4 && metrics.total <= waited, "\(metrics), \(waited) s in all")
        #expect(metrics.remoteAddress == "127.0.0.1" && metrics.remotePort == base.port)
        #expect(metrics.description.contains("first byte 0.00"), "\(metrics)")
        // Over a connection a request before it made (sent without the timeout, through the same
        // transport): nothing connected, the request sent.
        #expect(try await Provider<Bin>(transport: transport).request(try Bin("get")).value.statusCode == 200)
        let overKeptConnection = try #require(await error(of: try Bin("delay/3"), through: provider)?.metrics)
        #expect(overKeptConnection.reusedConnection, "\(overKeptConnection)")
        #expect(overKeptConnection.connect == 0 && overKeptConnection.requestStart > 0 && overKeptConnection.firstByte == 0)
    }

    /// A body sent to a server that never answers: its bytes counted, no first byte (libcurl 7
    /// counts the start of an upload as one).
    @Test func aTimeoutAfterABodyWentOutSaysNoAnswerCame() async throws {
        let provider = timingOut(after: 0.5, over: try CurlTransport())
        let body = Data(repeating: 0x62, count: 100_000)
        let failed = await error(of: try Bin("delay/3", method: .post, task: .requestData(body)), through: provider)
        #expect(failed?.isTimeout == true, "\(String(describing: failed))")
        let metrics = try #require(failed?.metrics)
        #expect(metrics.requestStart > 0 && metrics.requestBodyBytes > 0, "\(metrics)")
        #expect(metrics.firstByte == 0 && metrics.responseBodyBytes == 0, "\(metrics)")
    }

    /// A connection refused: no connection and nothing sent, reused or not.
    @Test func aRefusedConnectionSaysNothingWasConnected() async throws {
        let provider = Provider<Bin>(transport: try CurlTransport())
        let failed = await error(of: try Bin("get", base: closedPortURL()), through: provider)
        guard case .underlying(let failure, nil)? = failed else {
            Issue.record("expected a transport failure, got \(String(describing: failed))")
            return
        }
        #expect(failure.kind == .cannotConnect)
        let metrics = try #require(failure.metrics)
        #expect(failed?.metrics == metrics)
        #expect(!metrics.reusedConnection)
        #expect(metrics.connect == 0 && metrics.requestStart == 0 && metrics.firstByte == 0, "\(metrics)")
        #expect(metrics.total > 0, "\(metrics)")
        // Connected nowhere: no address, though a socket was opened to one.
        #expect(metrics.remoteAddress == nil && metrics.remotePort == nil, "\(metrics)")
    }

    /// A certificate the client does not trust: no handshake done, nothing sent. (Whether the
    /// TCP connection counts as made depends on libcurl: 8 says when it was, 7.88 counts an https
    /// connection only once its handshake is done.)
    @Test func anUntrustedCertificateSaysTheConnectionWasMadeAndNothingSent() async throws {
        var configuration = CurlTransport.Configuration()
        configuration.tls = TLSConfiguration(trustRoots: .only([.file(try CurlTLSTests.env("TLS_OTHER_CA_PEM"))]))
        let base = try #require(URL(string: try CurlTLSTests.env("HTTPBIN_TLS_URL")))
        let provider = Provider<Bin>(transport: try CurlTransport(configuration: configuration))
        let failed = await error(of: try Bin("get", base: base), through: provider)
        guard case .underlying(let failure, nil)? = failed else {
            Issue.record("expected a transport failure, got \(String(describing: failed))")
            return
        }
        #expect(failure.kind == .serverCertificateUntrusted)
        let metrics = try #require(failure.metrics)
        #expect(!metrics.reusedConnection, "\(metrics)")
        #expect(metrics.tlsHandshake == nil && metrics.requestStart == 0 && metrics.firstByte == 0, "\(metrics)")
        #expect(metrics.requestBodyBytes == 0 && metrics.remotePort == base.port, "\(metrics)")
    }

    /// A response stopped by a limit: its first bytes came.
    @Test func aResponseStoppedByALimitSaysItsFirstByteCame() async throws {
        var target = try Bin("bytes/20000")
        target.limits = RequestLimits(maxResponseBytes: 100)
        let failed = await error(of: target, through: Provider<Bin>(transport: try CurlTransport()))
        guard case .underlying(let failure, nil)? = failed else {
            Issue.record("expected a transport failure, got \(String(describing: failed))")
            return
        }
        #expect(failure.kind == .responseTooLarge && failure.limit == 100)
        let metrics = try #require(failure.metrics)
        #expect(metrics.firstByte > 0 && metrics.firstByte <= metrics.total, "\(metrics)")
        #expect(stagesInOrder(metrics), "\(metrics)")
    }

    /// A request refused before it is sent was not measured; a status validation refuses
    /// carries the response's metrics; two failures are equal whatever their metrics.
    @Test func whatWasNotSentHasNoMetrics() async throws {
        var request = URLRequest(url: try TestServer.url().appendingPathComponent("get"))
        request.httpMethod = "GET /"
        let transport = try CurlTransport()
        do throws(TransportFailure) {
            _ = try await transport.send(TransportRequest(urlRequest: request))
            Issue.record("a method that is no token was sent")
        } catch {
            #expect(error.message.hasPrefix("refused to send a request with an invalid method"), "\(error)")
            #expect(error.metrics == nil)
        }
        let provider = Provider<Bin>(transport: try CurlTransport())
        let refused = await error(of: try Bin("status/404", validation: .successCodes), through: provider)
        guard case .statusCode(let response)? = refused else {
            Issue.record("expected a status code error, got \(String(describing: refused))")
            return
        }
        #expect(refused?.metrics != nil && refused?.metrics == response.metrics)
        let metrics = TransferMetrics(
            nameLookup: 0, connect: 0.1, tlsHandshake: nil, requestStart: 0.1, firstByte: 0, total: 5, reusedConnection: false)
        #expect(TransportFailure(kind: .timedOut, message: "m", metrics: metrics) == TransportFailure(kind: .timedOut, message: "m"))
        #expect(
            TransportFailure(kind: .timedOut, message: "m", metrics: metrics) != TransportFailure(kind: .timedOut, message: "n", metrics: metrics))
    }
}
