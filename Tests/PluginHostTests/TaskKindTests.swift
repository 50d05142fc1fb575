import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

struct Greeting: Codable, Sendable, Equatable {
    var firstName: String
    var count: Int
}

@Suite("Every task kind against httpbin")
struct TaskKindTests {
    func send(_ target: Bin, on transport: TransportKind) async throws -> Echo {
        try echo(try await transport.provider().request(target).filterSuccessfulStatusCodes().value)
    }

    @Test(arguments: TransportKind.allCases) func plain(_ transport: TransportKind) async throws {
        let e = try await send(try Bin("anything"), on: transport)
        #expect(e.method == "GET")
        #expect(e.data == "")
        #expect(e.args?.isEmpty == true)
    }

    @Test(arguments: TransportKind.allCases) func rawData(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin("anything", method: .post, task: .requestData(Data("raw-bytes".utf8)), headers: ["Content-Type": "text/plain"]), on: transport)
        #expect(e.data == "raw-bytes")
    }

    @Test(arguments: TransportKind.allCases) func encodableAsJSON(_ transport: TransportKind) async throws {
        let e = try await send(try Bin("anything", method: .post, task: .requestJSONEncodable(Greeting(firstName: "Ann", count: 2))), on: transport)
        #expect(e.json == .object(["firstName": .string("Ann"), "count": .number(2)]))
        #expect(e.header("Content-Type") == "application/json")
    }

    @Test(arguments: TransportKind.allCases) func encodableWithCustomEncoder(_ transport: TransportKind) async throws {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let e = try await send(
            try Bin(
                "anything", method: .post,
                task: .requestCustomJSONEncodable(Greeting(firstName: "Ann", count: 2), encoder: encoder)), on: transport)
        #expect(e.json == .object(["first_name": .string("Ann"), "count": .number(2)]))
    }

    @Test(arguments: TransportKind.allCases) func urlEncodedGETGoesToTheQuery(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin("anything", task: .requestParameters(parameters: ["q": "a b", "n": 3], encoding: URLEncoding.default)), on: transport)
        #expect(e.args?["q"] == .string("a b"))
        #expect(e.args?["n"] == .string("3"))
        #expect(e.url.contains("n=3&q=a%20b"))
    }

    @Test(arguments: [HTTPMethod.get, .head, .delete], TransportKind.allCases)
    func methodDependentUsesQueryFor(method: HTTPMethod, transport: TransportKind) async throws {
        let response = try await transport.provider().request(
            try Bin("anything", method: method, task: .requestParameters(parameters: ["k": "v"], encoding: URLEncoding.default))
        ).value
        #expect(response.statusCode == 200)
        #expect(response.request?.url?.query == "k=v")
        #expect(response.request?.httpBody == nil)
    }

    @Test(arguments: TransportKind.allCases) func urlEncodedPOSTGoesToTheFormBody(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin(
                "anything", method: .post,
                task: .requestParameters(parameters: ["name": "Zoë", "tags": ["a", "b"]], encoding: URLEncoding.default)), on: transport)
        #expect(e.form?["name"] == .string("Zoë"))
        #expect(e.form?["tags[]"]?.strings == ["a", "b"])
        #expect(e.header("Content-Type") == "application/x-www-form-urlencoded; charset=utf-8")
        #expect(e.args?.isEmpty == true)
    }

    @Test(arguments: TransportKind.allCases) func forcedQueryStringForPOST(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin("anything", method: .post, task: .requestParameters(parameters: ["k": "v"], encoding: URLEncoding.queryString)), on: transport)
        #expect(e.args?["k"] == .string("v"))
        #expect(e.form?.isEmpty == true)
    }

    @Test(arguments: TransportKind.allCases) func forcedBodyForDELETE(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin("anything", method: .delete, task: .requestParameters(parameters: ["k": "v"], encoding: URLEncoding.httpBody)), on: transport)
        #expect(e.form?["k"] == .string("v"))
        #expect(e.args?.isEmpty == true)
    }

    @Test(arguments: TransportKind.allCases) func jsonEncodedParameters(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin("anything", method: .put, task: .requestParameters(parameters: ["a": 1, "b": ["c": true]], encoding: JSONEncoding.default)),
            on: transport)
        #expect(e.json == .object(["a": .number(1), "b": .object(["c": .bool(true)])]))
        #expect(e.method == "PUT")
    }

    @Test(arguments: TransportKind.allCases) func compositeDataAndQuery(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin(
                "anything", method: .post, task: .requestCompositeData(bodyData: Data("body!".utf8), urlParameters: ["page": 2]),
                headers: ["Content-Type": "text/plain"]), on: transport)
        #expect(e.data == "body!")
        #expect(e.args?["page"] == .string("2"))
    }

    @Test(arguments: TransportKind.allCases) func compositeParametersJSONBodyAndQuery(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin(
                "anything", method: .post,
                task: .requestCompositeParameters(
                    bodyParameters: ["x": "y"], bodyEncoding: JSONEncoding.default, urlParameters: ["page": 2])), on: transport)
        #expect(e.json == .object(["x": .string("y")]))
        #expect(e.args?["page"] == .string("2"))
    }

    @Test(arguments: TransportKind.allCases) func uploadFile(_ transport: TransportKind) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("upload-\(UUID().uuidString).txt")
        try Data("file contents here".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let e = try await send(try Bin("anything", method: .post, task: .uploadFile(file)), on: transport)
        #expect(e.data == "file contents here")
    }

    @Test(arguments: TransportKind.allCases) func multipartTextAndFileParts(_ transport: TransportKind) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("photo-\(UUID().uuidString).txt")
        try Data("pretend image".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let parts: [MultipartFormBodyPart] = [
            .text("Ann", name: "user"),
            .file(file, name: "avatar", fileName: "me.png", mimeType: "image/png"),
            MultipartFormBodyPart(source: .data(Data("{\"a\":1}".utf8)), name: "meta", fileName: "meta.json", mimeType: "application/json"),
        ]
        let response = try await transport.provider().request(try Bin("anything", method: .post, task: .uploadMultipart(parts)))
            .filterSuccessfulStatusCodes().value
        let e = try echo(response)
        #expect(e.form?["user"] == .string("Ann"))
        #expect(e.files?["avatar"] == "pretend image")
        #expect(e.files?["meta"] == "{\"a\":1}")
        let contentType = try #require(e.header("Content-Type"))
        #expect(contentType.hasPrefix("multipart/form-data; boundary=pluginhost.boundary."))
        let boundary = String(contentType.split(separator: "=").last!)
        let body = String(decoding: try #require(response.request?.httpBody), as: UTF8.self)
        #expect(body.hasSuffix("--\(boundary)--\r\n"))
        #expect(
            body.contains("Content-Disposition: form-data; name=\"avatar\"; filename=\"me.png\"\r\nContent-Type: image/png\r\n\r\npretend image\r\n"))
    }

    @Test(arguments: TransportKind.allCases) func compositeMultipartWithQuery(_ transport: TransportKind) async throws {
        let e = try await send(
            try Bin("anything", method: .post, task: .uploadCompositeMultipart([.text("v", name: "k")], urlParameters: ["page": 3])), on: transport)
        #expect(e.form?["k"] == .string("v"))
        #expect(e.args?["page"] == .string("3"))
    }

    @Test(arguments: TransportKind.allCases) func downloadToDestinationWithProgress(_ transport: TransportKind) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dl-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("nested/bytes.bin")
        let pipeline = transport.provider().request(try Bin("bytes/100000", task: .downloadDestination(.file(destination))))
        var progress: [TransferProgress] = []
        var final: Response?
        for try await event in pipeline.events() {
            switch event {
            case .progress(let p): progress.append(p)
            case .completed(let response): final = response
            }
        }
        let response = try #require(final)
        #expect(response.statusCode == 200)
        #expect(response.fileURL == destination)
        #expect(try Data(contentsOf: destination).count == 100_000)
        #expect(!progress.isEmpty)
        #expect(progress.last?.completedBytes == 100_000)
        #expect(progress.allSatisfy { $0.direction == .download })
    }

    /// Refuses every challenge (the request is cancelled).
    struct CancellingCredentials: Interceptor {
        var name: String { "cancelling-credentials" }
        func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer { .cancel }
    }

    /// A challenge's body is no download: the chain answers the challenge and the download comes
    /// then, saved once, where a destination that replaces no file is (CurlTransport saved the
    /// `401`'s body there first, and the answer's download then failed: the file existed); and a
    /// challenge the chain cancels leaves the file that was there as it was.
    @Test(arguments: TransportKind.allCases) func aChallengedDownloadSavesOnlyTheAnswer(_ transport: TransportKind) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dl-auth-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("auth.json")
        let keeping = DownloadDestination { _, _ in (destination, [.createIntermediateDirectories]) }
        let target = try Bin("basic-auth/u/p", task: .downloadDestination(keeping))
        let answered = try await Provider<Bin>(transport: transport.make(), interceptors: [CountingCredentials()]).request(target).value
        #expect(answered.statusCode == 200)
        #expect(answered.fileURL == destination)
        #expect(String(decoding: try Data(contentsOf: destination), as: UTF8.self).contains(#""authenticated": true"#))
        try Data("previous".utf8).write(to: destination)
        let cancelled = await Provider<Bin>(transport: transport.make(), interceptors: [CancellingCredentials()]).request(target).result
        guard case .failure(.cancelled) = cancelled else {
            Issue.record("a cancelled challenge: \(cancelled)")
            return
        }
        #expect(try Data(contentsOf: destination) == Data("previous".utf8))
    }

    /// `.directory` names the file by the server's `Content-Disposition` only when it is one
    /// plain file name, else by the URL: a server cannot reach outside the directory, replace a
    /// directory, or (Foundation on Linux suggesting "Unknown" when told nothing) make two
    /// downloads overwrite each other.
    @Test func aDownloadDirectoryTakesOnlyPlainFileNames() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("dld-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("a/b")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("photos"), withIntermediateDirectories: true)
        let keep = root.appendingPathComponent("a/keep")
        try Data("keep".utf8).write(to: keep)
        func download(_ path: String, disposition: String?) async throws -> Result<Response, NetworkError> {
            var target = try Bin(path, task: .downloadDestination(.directory(directory)))
            target.sample = .networkResponseWithHeaders(200, disposition.map { ["Content-Disposition": $0] } ?? [:], Data("x".utf8))
            return await Provider<Bin>(stubClosure: Provider<Bin>.immediatelyStub(_:)).request(target).result
        }
        let named = try await download("files/a.pdf", disposition: #"attachment; filename="report.pdf""#).get()
        #expect(named.fileURL?.lastPathComponent == "report.pdf")
        for hostile in [#"attachment; filename="..""#, #"attachment; filename=".""#] {
            let saved = try await download("files/b.pdf", disposition: hostile).get()
            #expect(saved.fileURL?.standardizedFileURL.path == directory.appendingPathComponent("b.pdf").path, "\(hostile)")
        }
        #expect(FileManager.default.fileExists(atPath: keep.path))
        let first = try await download("files/c.pdf", disposition: nil).get()
        let second = try await download("files/d.pdf", disposition: nil).get()
        #expect([first.fileURL?.lastPathComponent, second.fileURL?.lastPathComponent] == ["c.pdf", "d.pdf"])
        // A name that is a directory there is not replaced, and the stub's temporary file goes.
        let stubFiles = {
            Set((try? FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()))?.filter { $0.hasPrefix("pluginhost-stub-") } ?? [])
        }
        let before = stubFiles()
        guard case .failure = try await download("files/e.pdf", disposition: #"attachment; filename="photos""#) else {
            Issue.record("a download replaced the directory photos")
            return
        }
        // Other suites' stub downloads come and go in the same directory meanwhile: theirs are
        // placed within milliseconds, a leaked one stays.
        var left = stubFiles().subtracting(before)
        for _ in 0..<50 where !left.isEmpty {
            try await Task.sleep(nanoseconds: 100_000_000)
            left = stubFiles().subtracting(before)
        }
        #expect(left.isEmpty, "left in the temporary directory: \(left)")
        var isDirectory: ObjCBool = false
        let photos = directory.appendingPathComponent("photos").path
        #expect(FileManager.default.fileExists(atPath: photos, isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    @Test(arguments: TransportKind.allCases) func downloadWithParameters(_ transport: TransportKind) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dlp-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let response = try await transport.provider().request(
            try Bin(
                "get",
                task: .downloadParameters(
                    parameters: ["who": "me"], encoding: URLEncoding.default, destination: .directory(directory)))
        ).value
        let saved = try #require(response.fileURL)
        let body = try JSONDecoder().decode(Echo.self, from: Data(contentsOf: saved))
        #expect(body.args?["who"] == .string("me"))
        #expect(saved.deletingLastPathComponent().path == directory.path)
    }
}
