import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Replaces whatever result reaches `process` with a `200`.
private struct Rescuer: Interceptor {
    let sawStatus: LockedBox<Int?>
    var name: String { "rescuer" }

    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        sawStatus.set(result.response?.statusCode)
        return .replace(SyntheticResponse(statusCode: 200, body: Array("rescued".utf8)))
    }
}

/// One test per deliberate difference named in the README's "Coming from Moya" section.
@Suite("Coming from Moya: deliberate differences")
struct MigrationGuideTests {
    static func stubbed(_ interceptors: [any Interceptor] = [], callbackQueue: DispatchQueue? = nil) -> Provider<Bin> {
        Provider<Bin>(stubClosure: Provider<Bin>.immediatelyStub(_:), callbackQueue: callbackQueue, interceptors: interceptors)
    }

    /// `mapJSON()` is a `JSONValue`, read by subscript, not a Foundation dictionary.
    @Test func mapJSONIsAJSONValue() throws {
        let json = try Response(statusCode: 200, data: Data(#"{"login":"octocat","ids":[1,2]}"#.utf8)).mapJSON()
        #expect(json["login"]?.stringValue == "octocat")
        #expect(json["ids"]?[1]?.intValue == 2)
        #expect((json as Any) as? [String: Any] == nil)
    }

    /// Ad-hoc calls are never stubbed: on a stubbing provider they go to the network (here a
    /// closed port, which refuses).
    @Test func adHocCallsAreNeverStubbed() async throws {
        let provider = Provider<Bin>(
            stubClosure: Provider<Bin>.immediatelyStub(_:), server: ServerConfiguration(baseURL: closedPortURL()))
        let result = await provider.get("/x").result
        guard case .failure(.underlying(let failure, _)) = result else {
            Issue.record("not sent: \(result)")
            return
        }
        #expect(failure.kind == .cannotConnect)
    }

    /// A header field added by an endpoint closure that cannot be sent fails the request by name
    /// before any hook runs; it is not dropped, and the provider's own `User-Agent` does not take
    /// its place.
    @Test func aHeaderFieldThatCannotBeSentFailsTheRequest() async throws {
        let log = LockedCounter()
        let provider = Provider<Bin>(
            endpointClosure: { Provider.defaultEndpointMapping(for: $0).adding(newHTTPHeaderFields: ["User-Agent": "app\u{0}1"]) },
            stubClosure: Provider<Bin>.immediatelyStub(_:), interceptors: [Recorder("r", log: log)])
        let result = await provider.request(try Bin("get")).result
        guard case .failure(.invalidHeader(let name, let reason)) = result else {
            Issue.record("sent: \(result)")
            return
        }
        #expect(name == "User-Agent" && reason == "has a value holding CR, LF or NUL")
        #expect(log.log.isEmpty)
    }

    /// A stubbed `uploadFile` target reads no file: its fixture path need not exist.
    @Test func aStubbedUploadNeedsNoFile() async throws {
        let missing = URL(fileURLWithPath: "/nonexistent/pluginhost-fixture.bin")
        let target = try Bin("upload", method: .post, task: .uploadFile(missing))
        let response = try await Self.stubbed().request(target).value
        #expect(response.statusCode == 200)
        let sent = await Provider<Bin>().request(target).result
        guard case .failure(.fileAccess(let path, _)) = sent else {
            Issue.record("a missing file was sent: \(sent)")
            return
        }
        #expect(path == missing.path)
    }

    /// A stubbed multipart upload reads no file either (as Moya's): its file parts go with their
    /// headers and no content, and a fixture path need not exist. It failed with `fileAccess`
    /// (the form was encoded, every file read, before the stub was chosen). Sent, a missing file
    /// fails as before.
    @Test(arguments: [false, true]) func aStubbedMultipartUploadNeedsNoFile(_ composite: Bool) async throws {
        let missing = URL(fileURLWithPath: "/nonexistent/avatar.png")
        // A file part made without a type gets the default a sent one has (it went without any).
        let untyped = MultipartFormBodyPart(source: .file(URL(fileURLWithPath: "/nonexistent/notes.bin")), name: "g")
        let parts: [MultipartFormBodyPart] = [.text("x", name: "a"), .file(missing, name: "f", mimeType: "image/png"), untyped]
        let task: RequestTask = composite ? .uploadCompositeMultipart(parts, urlParameters: ["q": "1"]) : .uploadMultipart(parts)
        var target = try Bin("anything", method: .post, task: task)
        target.sample = .networkResponse(201, Data("ok".utf8))
        for stub in [Provider<Bin>.immediatelyStub, Provider<Bin>.delayedStub(0.01)] {
            let response = try await Provider<Bin>(stubClosure: stub).request(target).value
            #expect(response.statusCode == 201)
            #expect(response.data == Data("ok".utf8))
            let body = String(decoding: response.request?.httpBody ?? Data(), as: UTF8.self)
            #expect(body.contains(#"Content-Disposition: form-data; name="f"; filename="avatar.png""#), "\(body)")
            #expect(body.contains("Content-Type: image/png"))
            #expect(body.contains(#"name="a""#))
            #expect(
                body.contains("Content-Disposition: form-data; name=\"g\"; filename=\"notes.bin\"\r\nContent-Type: application/octet-stream\r\n"),
                "\(body)")
        }
        let sent = await Provider<Bin>().request(target).result
        guard case .failure(.fileAccess(let path, _)) = sent else {
            Issue.record("a missing file was sent: \(sent)")
            return
        }
        #expect(path == missing.path)
    }

    @Test func completionsRunOnAGlobalQueueUnlessACallbackQueueIsGiven() async throws {
        let target = try Bin("get")
        let onMain: Bool = await withCheckedContinuation { continuation in
            Self.stubbed().request(target).start { _ in continuation.resume(returning: Thread.isMainThread) }
        }
        #expect(!onMain)
        let key = DispatchSpecificKey<Int>()
        let queue = DispatchQueue(label: "ui")
        queue.setSpecific(key: key, value: 7)
        let onQueue: Int? = await withCheckedContinuation { continuation in
            Self.stubbed(callbackQueue: queue).request(target).start { _ in continuation.resume(returning: DispatchQueue.getSpecific(key: key)) }
        }
        #expect(onQueue == 7)
    }

    @Test func anImmediateStubStillCompletesAsynchronously() async throws {
        // Started on the queue its completion is delivered on: a completion called from inside
        // `start` would come first; an asynchronous one runs after the current block.
        let queue = DispatchQueue(label: "caller")
        let log = LockedCounter()
        let provider = Self.stubbed(callbackQueue: queue)
        let target = try Bin("get")
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                _ = provider.request(target).start { _ in
                    log.append("completion")
                    continuation.resume()
                }
                log.append("start returned")
            }
        }
        #expect(log.log == ["start returned", "completion"])
    }

    @Test func validationRunsAfterProcess() async throws {
        let saw = LockedBox<Int?>(nil)
        var target = try Bin("status/500", validation: .successCodes)
        target.sample = .networkResponse(500, Data("broken".utf8))
        let rescued = try await Self.stubbed([Rescuer(sawStatus: saw)]).request(target).value
        #expect(saw.get() == 500)
        #expect(rescued.statusCode == 200)
        #expect(rescued.data == Data("rescued".utf8))
        let plain = await Self.stubbed().request(target).result
        guard case .failure(.statusCode(let response)) = plain else {
            Issue.record("got \(plain)")
            return
        }
        #expect(response.statusCode == 500)
    }

    @Test func responseSideHooksRunInReverseOrder() async throws {
        let log = LockedCounter()
        _ = try await Self.stubbed([Recorder("A", log: log), Recorder("B", log: log)]).request(try Bin("get")).value
        #expect(log.log == ["A.prepare", "B.prepare", "A.willSend", "B.willSend", "B.didReceive", "A.didReceive", "B.process", "A.process"])
    }

    @Test func aRequestCancelledBeforeItIsSentReachesNoHook() async throws {
        let log = LockedCounter()
        let provider = Self.stubbed([Recorder("A", log: log)])
        let target = try Bin("get")
        let task = Task { () -> Result<Response, NetworkError> in
            while !Task.isCancelled { await Task.yield() }
            return await provider.request(target).result
        }
        task.cancel()
        guard case .failure(.cancelled) = await task.value else {
            Issue.record("not cancelled")
            return
        }
        #expect(log.log == [])
    }

    @Test func aMissingKeyPathIsKeyPathNotFound() throws {
        let response = Response(statusCode: 200, data: Data(#"{"user":{"name":"ada"}}"#.utf8))
        #expect(try response.map(String.self, atKeyPath: "user.name") == "ada")
        do {
            _ = try response.map(String.self, atKeyPath: "user.email")
            Issue.record("decoded a missing key path")
        } catch {
            guard case .keyPathNotFound("user.email", _) = error else {
                Issue.record("got \(error)")
                return
            }
        }
    }

    /// An empty body read with `failsOnEmptyData: false` decodes from `null`, then `{}`, then
    /// `[]`: an optional is nil and an array empty (Moya tries `{}`, then `[{}]`: an optional
    /// model came out as a model of nils, an array as one empty element).
    @Test func anEmptyBodyIsNilForAnOptionalAndEmptyForAnArray() throws {
        struct Profile: Decodable, Equatable {
            var name: String?
        }
        let empty = Response(statusCode: 204, data: Data())
        #expect(try empty.map(Profile?.self, failsOnEmptyData: false) == nil)
        #expect(try empty.map([Profile].self, failsOnEmptyData: false) == [])
        #expect(try empty.map(Profile.self, failsOnEmptyData: false) == Profile())
    }

    @Test func urlEncodingEscapesSlashAndQuestionMarkInValues() {
        #expect(URLEncoding.default.query(["next": "/cart?step=2"]) == "next=%2Fcart%3Fstep%3D2")
    }

    @Test func urlRequestOfAMultipartTaskCarriesItsBody() throws {
        let endpoint = Endpoint(
            url: "https://api.example.invalid/upload", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .post,
            task: .uploadMultipart([.text("hello", name: "greeting")]), httpHeaderFields: nil)
        let request = try endpoint.urlRequest()
        let body = String(decoding: request.httpBody ?? Data(), as: UTF8.self)
        #expect(body.contains("Content-Disposition: form-data; name=\"greeting\"\r\n\r\nhello\r\n"))
        #expect(request.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("multipart/form-data; boundary=") == true)
    }

    @Test func accessTokenDefaultsToBearer() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider = try f.provider([("access-token", [:])])
        provider.services.setValue("t0k3n", forKey: "access_token")
        let echoed = try echo(try await provider.request(try Bin("anything")).value)
        #expect(echoed.header("Authorization") == "Bearer t0k3n")
    }
}
