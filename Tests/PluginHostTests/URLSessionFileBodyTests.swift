import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking

/// URL loading on Linux is given an upload file of up to 64 MiB as data read from it, not the
/// file itself: swift-corelibs-foundation reads a file ahead on a queue of its own, and a read
/// that ends after the exchange did (a server that answered before taking the body) resumes a
/// transfer libcurl has let go, which with libcurl 8 stops the process. `Tests/test` runs this
/// suite on libcurl 8 too (on the system's libcurl 7.88 the crash did not show).
@Suite("URL loading: file bodies")
struct URLSessionFileBodyTests {
    @Test func filesAnsweredBeforeTheirBodyWasTakenEndWell() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pluginhost-file-body-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try Data(repeating: 0x61, count: 256 << 10).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let transport = URLSessionTransport()
        // httpbin's /status/401 answers a challenge without reading the body (gunicorn sends
        // `100 Continue` at once, so the answer races the upload). Every call ends, the process
        // goes on; a call may end as a broken pipe, the early answer lost with the connection
        // (README, "URL loading": libcurl 8 under URL loading), which one run of the full suite
        // in six met once.
        var answered = 0
        for _ in 0..<100 {
            var request = URLRequest(url: try TestServer.url().appendingPathComponent("status/401"))
            request.httpMethod = "POST"
            do {
                let response = try await transport.send(TransportRequest(urlRequest: request, body: .file(file)))
                #expect(response.response.statusCode == 401)
                answered += 1
            } catch {
                #expect(error.message.hasPrefix("Send failure: Broken pipe"), "\(error)")
            }
        }
        #expect(answered >= 50, "\(answered) of 100 early answers came through")
        // And a body the server reads goes whole.
        var request = URLRequest(url: try TestServer.url().appendingPathComponent("anything"))
        request.httpMethod = "PUT"
        let echoed = try await transport.send(TransportRequest(urlRequest: request, body: .file(file)))
        let json = try JSONSerialization.jsonObject(with: echoed.data) as? [String: Any]
        #expect((json?["data"] as? String)?.utf8.count == 256 << 10)
    }

    /// Both transports: CurlTransport opened a FIFO blocking (its event loop waited for a
    /// writer) and would have sent it as empty.
    @Test(arguments: TransportKind.allCases) func aFileThatCannotBeReadIsRefusedNamingIt(_ kind: TransportKind) async throws {
        let transport = kind.make()
        let url = try TestServer.url().appendingPathComponent("anything")
        func failure(_ file: URL) async -> TransportFailure? {
            var request = URLRequest(url: url)
            request.httpMethod = "POST"
            do {
                _ = try await transport.send(TransportRequest(urlRequest: request, body: .file(file)))
                Issue.record("\(file.path) was sent")
                return nil
            } catch {
                return error
            }
        }
        #expect(
            await failure(URL(fileURLWithPath: "/nonexistent/upload.bin"))
                == TransportFailure(kind: .other, message: "cannot read the upload file /nonexistent/upload.bin: No such file or directory"))
        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-fifo-\(UUID().uuidString)").path
        try #require(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        #expect(
            await failure(URL(fileURLWithPath: fifo))
                == TransportFailure(kind: .other, message: "cannot read the upload file \(fifo): not a regular file"))
    }

    @Test func anEmptyFileGoesEmptyAndALargeOneAsAFile() async throws {
        let directory = FileManager.default.temporaryDirectory
        let empty = directory.appendingPathComponent("pluginhost-empty-\(UUID().uuidString)")
        try Data().write(to: empty)
        defer { try? FileManager.default.removeItem(at: empty) }
        #expect(try URLSessionTransport.inMemoryUpload(empty) == Data())
        var request = URLRequest(url: try TestServer.url().appendingPathComponent("anything"))
        request.httpMethod = "PUT"
        let echoed = try await URLSessionTransport().send(TransportRequest(urlRequest: request, body: .file(empty)))
        #expect((try JSONSerialization.jsonObject(with: echoed.data) as? [String: Any])?["data"] as? String == "")
        // Past the bound (a sparse file: no disk is written), the file goes as a file.
        let large = directory.appendingPathComponent("pluginhost-large-\(UUID().uuidString)")
        try Data().write(to: large)
        defer { try? FileManager.default.removeItem(at: large) }
        try #require(truncate(large.path, off_t(URLSessionTransport.inMemoryUploadFileBytes + 1)) == 0)
        #expect(try URLSessionTransport.inMemoryUpload(large) == nil)
        try #require(truncate(large.path, off_t(URLSessionTransport.inMemoryUploadFileBytes)) == 0)
        #expect(try URLSessionTransport.inMemoryUpload(large)?.count == URLSessionTransport.inMemoryUploadFileBytes)
    }
}
#endif
