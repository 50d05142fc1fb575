import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A multipart body with files, larger than `MultipartFormData.encodingMemoryThreshold`, is sent
/// as a stream that reads each file when its turn comes, never held whole in memory; a smaller
/// one, or one of data parts alone, is built in memory.
@Suite("Multipart bodies streamed from their files")
struct MultipartStreamingTests {
    /// 1 MiB of a pattern in which no two 64 KiB reads are alike.
    static let pattern = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 16) })

    /// A file of `count` bytes of ``pattern`` over and over, removed by the caller (written a MiB at
    /// a time: no test holds a cooperative thread making bytes one by one).
    static func file(_ count: Int) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-multipart-\(UUID().uuidString).bin")
        FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        var left = count
        while left > 0 {
            let piece = min(left, pattern.count)
            handle.write(pattern.prefix(piece))
            left -= piece
        }
        return url
    }

    /// The SHA-256 of `data`, in hex (hashed from its buffer, not element by element).
    static func sha256(_ data: Data) -> String {
        var hasher = SHA256()
        data.withUnsafeBytes { hasher.update($0) }
        return SHA256.hex(hasher.finalize())
    }

    /// Reads `stream` to its end `chunk` bytes at a time.
    static func readAll(_ stream: InputStream, chunk: Int) -> (Data, Int) {
        stream.open()
        defer { stream.close() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: chunk)
        while true {
            let got = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: chunk) }
            guard got > 0 else { return (data, got) }
            data.append(contentsOf: buffer[0..<got])
        }
    }

    /// The stream gives exactly the bytes `encode` builds in memory, whatever the reader's buffer:
    /// data parts (an empty one), files (an empty one, one read twice), one after another.
    @Test(arguments: [1, 7, 100, 4096, 65536, 1 << 20]) func theStreamIsTheEncodedBody(_ chunk: Int) throws {
        // More than one 64 KiB read.
        let big = try Self.file(70_000)
        let empty = try Self.file(0)
        defer {
            try? FileManager.default.removeItem(at: big)
            try? FileManager.default.removeItem(at: empty)
        }
        let whole = Data("0123456789".utf8)
        let parts: [MultipartFormBodyPart] = [
            .text("Ann", name: "user"), .file(big, name: "photo", mimeType: "image/png"),
            MultipartFormBodyPart(source: .data(Data()), name: "none"), .file(empty, name: "nothing"),
            MultipartFormBodyPart(source: .data(whole[3..<7]), name: "slice", fileName: "s.txt"), .file(big, name: "again"),
        ]
        let expected = try MultipartFormData.encode(parts, boundary: "b0undary")
        // Each file held to its size (as a request's stream is), and not.
        let files = [big.path: try MultipartBodyStream.FileIdentity(opening: big), empty.path: try MultipartBodyStream.FileIdentity(opening: empty)]
        let pieces = try MultipartFormData.pieces(parts, boundary: "b0undary")
        let (held, heldLast) = Self.readAll(MultipartBodyStream(pieces, files: files), chunk: chunk)
        #expect(heldLast == 0)
        #expect(held == expected)
        let (streamed, last) = Self.readAll(MultipartBodyStream(pieces), chunk: chunk)
        #expect(last == 0)
        #expect(streamed.count == expected.count)
        #expect(streamed == expected)
    }

    /// Stretches read as they are, whatever the buffer: a slice of a larger `Data` (its indices not
    /// from 0), empty stretches before, between and after, and a read of 0 bytes, which neither
    /// gives anything nor ends the body.
    @Test(arguments: [1, 3, 64]) func stretchesAreReadAsTheyAre(_ chunk: Int) throws {
        let small = try Self.file(10)
        defer { try? FileManager.default.removeItem(at: small) }
        let whole = Data("0123456789".utf8)
        let stream = MultipartBodyStream([.bytes(Data()), .bytes(whole[3..<7]), .bytes(Data()), .file(small), .bytes(Data("!".utf8)), .bytes(Data())])
        stream.open()
        var zero: UInt8 = 0
        #expect(stream.read(&zero, maxLength: 0) == 0)
        #expect(stream.streamStatus == .open)
        stream.close()
        let again = MultipartBodyStream(
            [.bytes(Data()), .bytes(whole[3..<7]), .bytes(Data()), .file(small), .bytes(Data("!".utf8)), .bytes(Data())],
            files: [small.path: try MultipartBodyStream.FileIdentity(opening: small)])
        let (read, last) = Self.readAll(again, chunk: chunk)
        #expect(last == 0)
        #expect(read == Data("3456".utf8) + Self.pattern.prefix(10) + Data("!".utf8))
    }

    /// The provider's request: a body with a file, over the threshold, is a stream (no body in
    /// memory); one at most the threshold is data, and so is one over it of data parts alone (a
    /// stream of bytes in memory would save nothing).
    /// A file part, or a file to upload, whose URL is no `file:` URL is refused before anything
    /// is read: `Data(contentsOf:)` fetched an http URL while the request was made, outside the
    /// transport and its limits, and uploaded what came.
    @Test func aFilePartThatIsNoFileURLIsRefused() async throws {
        let counting = CountingTransport()
        let provider = Provider<Bin>(transport: counting)
        let remote = try TestServer.url().appendingPathComponent("bytes/16")
        let parts = [MultipartFormBodyPart(source: .file(remote), name: "f")]
        for task in [RequestTask.uploadMultipart(parts), .uploadFile(remote)] {
            let result = await provider.request(try Bin("post", method: .post, task: task)).result
            guard case .failure(.fileAccess(let path, let reason)) = result else {
                Issue.record("got \(result)")
                continue
            }
            #expect(path == remote.absoluteString)
            #expect(reason == #"multipart part 0 ("f") is no file URL"# || reason == "the file to upload is no file URL")
        }
        #expect(counting.count == 0)
        // The URL the refusal names keeps its secrets out, as errors' URLs do.
        let signed = try #require(URL(string: "https://u:pw123@h.example/x?X-Amz-Signature=SIG123"))
        let refusal = await provider.request(try Bin("post", method: .post, task: .uploadFile(signed))).result
        guard case .failure(let error) = refusal, case .fileAccess(let path, _) = error else {
            Issue.record("got \(refusal)")
            return
        }
        #expect(path == "https://h.example/x?X-Amz-Signature=<redacted>")
        #expect(!error.description.contains("pw123") && !error.description.contains("SIG123"))
    }

    @Test func overTheThresholdTheRequestCarriesAStream() throws {
        let threshold = Int(MultipartFormData.encodingMemoryThreshold)
        let large = try Self.file(threshold)
        let small = try Self.file(threshold - 1000)
        defer {
            try? FileManager.default.removeItem(at: large)
            try? FileManager.default.removeItem(at: small)
        }
        let streamed = try Bin("post", method: .post, task: .uploadMultipart([.file(large, name: "f")]))
        let request = try Provider<Bin>.defaultEndpointMapping(for: streamed).urlRequest()
        #expect(request.httpBody == nil)
        let stream = try #require(request.httpBodyStream)
        #expect(stream is MultipartBodyStream)
        let (body, _) = Self.readAll(stream, chunk: 65536)
        let parts = [MultipartFormBodyPart.file(large, name: "f")]
        let type = try #require(request.value(forHTTPHeaderField: "Content-Type"))
        let boundary = String(type.dropFirst("multipart/form-data; boundary=".count))
        #expect(body == (try MultipartFormData.encode(parts, boundary: boundary)))

        let inMemory = try Bin("post", method: .post, task: .uploadMultipart([.file(small, name: "f")]))
        let made = try Provider<Bin>.defaultEndpointMapping(for: inMemory).urlRequest()
        #expect(made.httpBodyStream == nil)
        #expect(made.httpBody?.count ?? 0 > threshold - 1000)

        let data = try Bin(
            "post", method: .post, task: .uploadMultipart([MultipartFormBodyPart(source: .data(Data(count: threshold + 1)), name: "d")]))
        let dataOnly = try Provider<Bin>.defaultEndpointMapping(for: data).urlRequest()
        #expect(dataOnly.httpBodyStream == nil)
        #expect(dataOnly.httpBody?.count ?? 0 > threshold)
    }

    /// Sent over both transports: the server (Python's email parser) reads every part whole, the
    /// 12 MB file's bytes and the fields around it. A `maxStreamedBodyBytes` (a bound for the
    /// streams a request closure sets) does not hold back an upload of files.
    @Test(arguments: TransportKind.allCases) func aLargeBodyArrivesWhole(_ transport: TransportKind) async throws {
        let large = try Self.file(12_000_000)
        defer { try? FileManager.default.removeItem(at: large) }
        let parts: [MultipartFormBodyPart] = [
            .text("Ann", name: "user"), .file(large, name: "video", fileName: "clip.bin", mimeType: "video/mp4"),
            MultipartFormBodyPart(source: .data(Data("{\"a\":1}".utf8)), name: "meta", mimeType: "application/json"),
        ]
        let provider = Provider<Bin>(transport: transport.make(), limits: RequestLimits(maxStreamedBodyBytes: 1 << 20))
        let response = try await provider.request(try Bin("fixture/multipart", method: .post, task: .uploadMultipart(parts)))
            .filterSuccessfulStatusCodes().value
        struct Part: Decodable, Equatable {
            var name: String?
            var filename: String?
            var type: String?
            var size: Int
            var sha256: String
        }
        struct Parsed: Decodable {
            var length: Int
            var parts: [Part]
        }
        let parsed = try JSONDecoder().decode(Parsed.self, from: response.data)
        let bytes = try Data(contentsOf: large)
        #expect(
            parsed.parts == [
                Part(name: "user", filename: nil, type: nil, size: 3, sha256: Self.sha256(Data("Ann".utf8))),
                Part(name: "video", filename: "clip.bin", type: "video/mp4", size: bytes.count, sha256: Self.sha256(bytes)),
                Part(name: "meta", filename: nil, type: "application/json", size: 7, sha256: Self.sha256(Data("{\"a\":1}".utf8))),
            ])
        #expect(parsed.length > 12_000_000)
    }

    /// A file that cannot be opened when the request is made fails it at once, naming the file;
    /// one removed before the body is read fails the read, saying which and why.
    @Test func anUnreadableFileIsAFileAccessError() throws {
        let large = try Self.file(Int(MultipartFormData.encodingMemoryThreshold) + 1)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-multipart-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: large)
            try? FileManager.default.removeItem(at: directory)
        }
        let parts = [MultipartFormBodyPart.file(large, name: "f")]
        guard case .stream(let stream) = try MultipartFormData.body(parts, boundary: "b") else {
            Issue.record("not streamed")
            return
        }
        try FileManager.default.removeItem(at: large)
        let (_, last) = Self.readAll(stream, chunk: 65536)
        #expect(last == -1)
        let error = try #require(stream.streamError as? NetworkError)
        guard case .fileAccess(let path, let reason) = error else {
            Issue.record("got \(error)")
            return
        }
        #expect(path == large.path)
        #expect(reason == "cannot read multipart file: No such file or directory")

        // A directory where a file should be: refused when the request is made, as a body in memory is.
        #expect(throws: NetworkError.self) { try MultipartFormData.body([.file(directory, name: "d")], boundary: "b") }
    }

    /// A file that changed after the request was made fails it, saying how: one that grew (the body
    /// is no longer of a known length: a log being written), shrank, or is another file now (a
    /// path replaced, by a link to `/dev/zero` say). Each was sent as it was found.
    @Test(arguments: ["grew", "shrank", "replaced"]) func aFileThatChangedAfterTheRequestWasMadeFailsIt(_ change: String) throws {
        let size = Int(MultipartFormData.encodingMemoryThreshold) + 1
        let file = try Self.file(size)
        defer { try? FileManager.default.removeItem(at: file) }
        guard case .stream(let stream) = try MultipartFormData.body([.text("x", name: "t"), .file(file, name: "f")], boundary: "b") else {
            Issue.record("not streamed")
            return
        }
        let reason: String
        switch change {
        case "grew":
            let handle = try FileHandle(forWritingTo: file)
            try handle.seekToEnd()
            handle.write(Data("more".utf8))
            try handle.close()
            reason = "it holds more than its \(size) bytes"
        case "shrank":
            #expect(truncate(file.path, 100) == 0)
            reason = "it ended after 100 of its \(size) bytes"
        default:
            // Made beside it, then renamed over it: another file (inode) of the same size.
            let other = try Self.file(size)
            #expect(rename(other.path, file.path) == 0)
            reason = "it is another file now"
        }
        let (_, last) = Self.readAll(stream, chunk: 65536)
        #expect(last == -1)
        guard case .fileAccess(let path, let said) = stream.streamError as? NetworkError else {
            Issue.record("got \(String(describing: stream.streamError))")
            return
        }
        #expect(path == file.path)
        #expect(said == "the multipart file changed after the request was made: " + reason)
    }

    /// Endpoints with a multipart body compare by their parts' files, none of them read: the
    /// same file is the same endpoint (and hash), another path with the same bytes is another;
    /// files that do not exist (none is read) compare by their paths too. (Made by reading the
    /// files, two endpoints with missing files compared as requests that cannot be made: equal.)
    @Test func multipartEndpointsCompareByTheirFiles() throws {
        let large = try Self.file(Int(MultipartFormData.encodingMemoryThreshold) + 1)
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-multipart-\(UUID().uuidString).bin")
        try FileManager.default.copyItem(at: large, to: copy)
        defer {
            try? FileManager.default.removeItem(at: large)
            try? FileManager.default.removeItem(at: copy)
        }
        func endpoint(_ file: URL) -> Endpoint {
            Endpoint(
                url: "https://api.example.invalid/upload", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .post,
                task: .uploadMultipart([.text("x", name: "t"), .file(file, name: "f")]), httpHeaderFields: nil)
        }
        #expect(endpoint(large) == endpoint(large))
        #expect(endpoint(large).hashValue == endpoint(large).hashValue)
        #expect(endpoint(large) != endpoint(copy))
        #expect(Set([endpoint(large), endpoint(large), endpoint(copy)]).count == 2)
        let missing = URL(fileURLWithPath: "/nonexistent/a.bin")
        #expect(endpoint(missing) == endpoint(missing))
        #expect(endpoint(missing).hashValue == endpoint(missing).hashValue)
        #expect(endpoint(missing) != endpoint(URL(fileURLWithPath: "/nonexistent/b.bin")))
        // A data part and a file part with the same headers are other parts.
        let asData = Endpoint(
            url: "https://api.example.invalid/upload", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .post,
            task: .uploadMultipart([
                .text("x", name: "t"),
                MultipartFormBodyPart(source: .data(Data()), name: "f", fileName: "a.bin", mimeType: "application/octet-stream"),
            ]), httpHeaderFields: nil)
        #expect(asData != endpoint(missing))
        // The endpoint's own fields count as they are: a `Content-Type` that cannot be sent (the
        // body's replaces it) makes an endpoint whose request cannot be made.
        let badType = Endpoint(
            url: "https://api.example.invalid/upload", sampleResponseClosure: { .networkResponse(200, Data()) }, method: .post,
            task: .uploadMultipart([.text("x", name: "t"), .file(missing, name: "f")]), httpHeaderFields: ["Content-Type": "a\r\nb"])
        #expect(badType != endpoint(missing))
    }
}
