import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Stubs")
struct StubTests {
    func target(_ sample: EndpointSampleResponse, validation: ValidationType = .none) throws -> Bin {
        var target = try Bin("anything", validation: validation)
        target.sample = sample
        return target
    }

    @Test func immediateStubAnswersWithStatusHeadersAndBody() async throws {
        let transport = CountingTransport()
        let provider = Provider<Bin>(stubClosure: Provider.immediatelyStub, transport: transport)
        let response = try await provider.request(try target(.networkResponseWithHeaders(201, ["X-Stub": "yes"], Data("hello".utf8)))).value
        #expect(response.statusCode == 201)
        #expect(response.value(forHTTPHeaderField: "X-Stub") == "yes")
        #expect(response.data == Data("hello".utf8))
        #expect(transport.count == 0)
    }

    @Test func delayedStubWaits() async throws {
        let provider = Provider<Bin>(stubClosure: Provider.delayedStub(0.3))
        let started = Date()
        let response = try await provider.request(try target(.networkResponse(200, Data("late".utf8)))).value
        #expect(Date().timeIntervalSince(started) >= 0.3)
        #expect(response.data == Data("late".utf8))
    }

    @Test func neverStubSendsForReal() async throws {
        let provider = Provider<Bin>(stubClosure: Provider.neverStub)
        let response = try await provider.request(try target(.networkResponse(299, Data()))).value
        #expect(response.statusCode == 200)
        #expect(try echo(response).method == "GET")
    }

    @Test func stubbedNetworkErrorIsUnderlying() async throws {
        let provider = Provider<Bin>(stubClosure: Provider.immediatelyStub)
        let result = await provider.request(try target(.networkError(TransportFailure(kind: .connectionLost, message: "stubbed loss")))).result
        guard case .failure(.underlying(let failure, _)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure == TransportFailure(kind: .connectionLost, message: "stubbed loss"))
    }

    @Test func stubsGoThroughInterceptorsAndValidation() async throws {
        let log = LockedCounter()
        let provider = Provider<Bin>(stubClosure: Provider.immediatelyStub, interceptors: [Recorder("A", log: log)])
        let result = await provider.request(try target(.networkResponse(500, Data()), validation: .successCodes)).result
        guard case .failure(.statusCode(let response)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(response.statusCode == 500)
        #expect(response.value(forHTTPHeaderField: "X-Response-Order") == "A")
        #expect(log.log == ["A.prepare", "A.willSend", "A.didReceive", "A.process"])
    }

    @Test func stubbedDownloadIsWrittenToItsDestination() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("stub-\(UUID().uuidString)/f.bin")
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        var t = try Bin("x", task: .downloadDestination(.file(file)))
        t.sample = .networkResponse(200, Data("saved".utf8))
        let response = try await Provider<Bin>(stubClosure: Provider.immediatelyStub).request(t).value
        #expect(response.fileURL == file)
        #expect(try Data(contentsOf: file) == Data("saved".utf8))
    }
}
