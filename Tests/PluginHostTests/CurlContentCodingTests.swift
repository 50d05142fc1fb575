import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The libcurl transport decodes response bodies itself (gzip, deflate, br, zstd, and stacks of
/// them), whatever libcurl's version: from 8.5 on libcurl fails a body in a coding nobody asked
/// for, where the transport hands it over as it came.
@Suite("Curl transport: content codings")
struct CurlContentCodingTests {
    /// The fixture's `/fixture/encoded/` text: 3,500 numbered lines, 108,500 bytes.
    static let text = Data((0..<3500).map { String(format: "line %05d of the encoded body\n", $0) }.joined().utf8)

    func get(_ transport: CurlTransport, _ pathAndQuery: String, headers: [String: String] = [:]) async throws(TransportFailure) -> TransportResponse
    {
        var request = URLRequest(url: URL(string: (try? TestServer.url())!.absoluteString + "/fixture/encoded/" + pathAndQuery)!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return try await transport.send(TransportRequest(urlRequest: request))
    }

    func failure(_ transport: CurlTransport, _ pathAndQuery: String) async -> TransportFailure? {
        do {
            let response = try await get(transport, pathAndQuery)
            Issue.record("\(pathAndQuery): expected a failure, got status \(response.response.statusCode) and \(response.data.count) bytes")
            return nil
        } catch {
            return error
        }
    }

    @Test func theTransportAsksForEveryCodingTheSystemDecodes() throws {
        // zlib, brotli and zstd are libraries libcurl itself links on Debian and Ubuntu.
        #expect(
            try CurlTransport().acceptEncoding == "gzip, deflate, br, zstd",
            "the system's libbrotlidec.so.1 and libzstd.so.1 are missing: apt-get install libbrotli1 libzstd1")
    }

    @Test(arguments: ["gzip", "x-gzip", "deflate", "deflate?raw=1", "br", "zstd", "identity", "gzip,br", "br,gzip,zstd", "identity,deflate"])
    func eachCodingAndStackIsDecoded(_ pathAndQuery: String) async throws {
        let response = try await get(try CurlTransport(), pathAndQuery)
        #expect(response.response.statusCode == 200)
        #expect(response.data == Self.text, "\(pathAndQuery): \(response.data.count) bytes")
        // The field stays as the server sent it, as URL loading keeps it.
        let listed = String(pathAndQuery.prefix { $0 != "?" }).replacingOccurrences(of: ",", with: ", ")
        #expect(response.response.value(forHTTPHeaderField: "Content-Encoding") == listed)
    }

    @Test func aStackWithACodingNobodyAskedForIsDeliveredAsItCame() async throws {
        // x-custom is not known: nothing is decoded, not even the gzip below it.
        let response = try await get(try CurlTransport(), "gzip,x-custom")
        #expect(response.response.value(forHTTPHeaderField: "Content-Encoding") == "gzip, x-custom")
        #expect(Array(response.data.prefix(2)) == [0x1F, 0x8B])
    }

    @Test(arguments: [
        ("gzip?corrupt=1", "cannot decode the response body: the gzip body is corrupt: "),
        // Damaged in the middle, this deflate stream reads as one cut short (as Python's zlib reads it).
        ("deflate?corrupt=1", "cannot decode the response body: the deflate body ends before its coded stream does (cut short, or corrupt)"),
        ("gzip?truncated=1", "cannot decode the response body: the gzip body ends before its coded stream does (cut short, or corrupt)"),
        ("deflate?truncated=1", "cannot decode the response body: the deflate body ends before its coded stream does (cut short, or corrupt)"),
        ("br?truncated=1", "cannot decode the response body: the br body ends before its coded stream does (cut short, or corrupt)"),
        ("zstd?truncated=1", "cannot decode the response body: the zstd body ends before its coded stream does (cut short, or corrupt)"),
        ("gzip,br?truncated=1", "cannot decode the response body: the br body ends before its coded stream does (cut short, or corrupt)"),
        ("gzip?trailing=1", "cannot decode the response body: 16 bytes follow the end of the gzip body"),
        ("br?trailing=1", "cannot decode the response body: "),
        ("zstd?trailing=1", "cannot decode the response body: the zstd body is corrupt: "),
    ])
    func aBodyNotInItsCodingFailsSayingWhy(_ pathAndQuery: String, _ message: String) async throws {
        let failure = await failure(try CurlTransport(), pathAndQuery)
        #expect(failure?.kind == .badResponse)
        #expect(failure?.message.hasPrefix(message) == true, "\(pathAndQuery): \(failure?.message ?? "no failure")")
    }

    @Test(arguments: ["gzip", "deflate", "deflate?raw=1", "br", "zstd", "gzip,br,zstd"])
    func theDecoderTakesTheBodyInPiecesOfAnySize(_ pathAndQuery: String) async throws {
        // The coded bytes as they came (the caller's own Accept-Encoding: nothing decoded), then
        // decoded here in pieces of 1, 7, 4096 and 65536 bytes: a piece may end anywhere, in a
        // header or a block, and a piece may give out more than one output buffer.
        let path = String(pathAndQuery.prefix { $0 != "?" })
        let coded = try await get(try CurlTransport(), pathAndQuery, headers: ["Accept-Encoding": "*"])
        #expect(coded.data != Self.text)
        let codings = path.split(separator: ",").map(String.init)
        let bytes = [UInt8](coded.data)
        for size in [1, 7, 4096, 65536] {
            let decoder = try ContentDecoder(codings: codings)
            var decoded = Data()
            for start in stride(from: 0, to: bytes.count, by: size) {
                let going = try bytes[start..<min(start + size, bytes.count)].withUnsafeBytes { piece in
                    try decoder.decode(piece) {
                        decoded.append(contentsOf: $0)
                        return true
                    }
                }
                #expect(going)
            }
            #expect(decoded == Self.text, "\(pathAndQuery) in pieces of \(size): \(decoded.count) bytes")
        }
    }

    @Test func aSinkThatStopsStopsTheDecoding() async throws {
        let coded = try await get(try CurlTransport(), "gzip", headers: ["Accept-Encoding": "*"])
        let decoder = try ContentDecoder(codings: ["gzip"])
        var pieces = 0
        let going = try [UInt8](coded.data).withUnsafeBytes { bytes in
            try decoder.decode(bytes) { _ in
                pieces += 1
                return false
            }
        }
        #expect(!going)
        #expect(pieces == 1)
    }

    @Test func aCodingWithoutADecoderIsRefused() {
        #expect(throws: TransportFailure(kind: .badResponse, message: "cannot decode the response body: no decoder of compress")) {
            try ContentDecoder(codings: ["gzip", "compress"])
        }
    }
}
