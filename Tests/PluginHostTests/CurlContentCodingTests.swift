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

    func get(
        _ transport: CurlTransport, _ pathAndQuery: String, headers: [String: String] = [:], limits: RequestLimits = .default
    ) async throws(TransportFailure) -> TransportResponse {
        var request = URLRequest(url: URL(string: (try? TestServer.url())!.absoluteString + "/fixture/encoded/" + pathAndQuery)!)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        var transportRequest = TransportRequest(urlRequest: request)
        transportRequest.limits = limits
        return try await transport.send(transportRequest)
    }

    func failure(_ transport: CurlTransport, _ pathAndQuery: String, limits: RequestLimits = .default) async -> TransportFailure? {
        do {
            let response = try await get(transport, pathAndQuery, limits: limits)
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

    @Test(arguments: [
        "gzip", "x-gzip", "deflate", "deflate?raw=1", "br", "zstd", "identity", "gzip,br", "br,gzip,zstd", "identity,deflate",
        "gzip?members=2", "gzip?members=5",
    ])
    func eachCodingAndStackIsDecoded(_ pathAndQuery: String) async throws {
        let response = try await get(try CurlTransport(), pathAndQuery)
        #expect(response.response.statusCode == 200)
        #expect(response.data == Self.text, "\(pathAndQuery): \(response.data.count) bytes")
        // The field stays as the server sent it, as URL loading keeps it.
        let listed = String(pathAndQuery.prefix { $0 != "?" }).replacingOccurrences(of: ",", with: ", ")
        #expect(response.response.value(forHTTPHeaderField: "Content-Encoding") == listed)
    }

    @Test(arguments: ["gzip", "deflate", "deflate?raw=1", "br", "zstd", "br,gzip"])
    func aBodyThatFillsTheLastOutputBufferEndsWhole(_ coding: String) async throws {
        // 65,536 decoded bytes: four output buffers exactly, the last one drained by a call
        // that gives nothing (zstd, asked then, said a next frame was due).
        let response = try await get(try CurlTransport(), coding + (coding.contains("?") ? "&" : "?") + "bytes=65536")
        #expect(response.data == Self.text.prefix(65536), "\(coding): \(response.data.count) bytes")
    }

    @Test func atMostFiveCodingsAreUndone() async throws {
        let five = try await get(try CurlTransport(), "gzip,identity,gzip,gzip,gzip,gzip")
        #expect(five.data == Self.text)
        let failure = await failure(try CurlTransport(), "gzip,gzip,gzip,gzip,gzip,gzip")
        #expect(
            failure
                == TransportFailure(
                    kind: .badResponse, message: "cannot decode the response body: it lists 6 content codings, and at most 5 are undone"))
    }

    /// A `br` or `zstd` coding listed twice is refused (each stage holds a window the server
    /// sizes); one of each, with others around them, is decoded.
    @Test func brAndZstdAreUndoneOncePerBody() async throws {
        let mixed = try await get(try CurlTransport(), "br,gzip,zstd,gzip")
        #expect(mixed.data == Self.text)
        for (codings, message) in [
            ("br,br", "it lists br 2 times, and br is undone once per body"),
            ("zstd,gzip,zstd,zstd", "it lists zstd 3 times, and zstd is undone once per body"),
        ] {
            let failure = await failure(try CurlTransport(), codings)
            #expect(failure == TransportFailure(kind: .badResponse, message: "cannot decode the response body: " + message), "\(codings)")
        }
    }

    @Test func aPartOfACodedBodyIsDeliveredAsItCame() async throws {
        // A range of a coded body does not decode alone: a 206 goes as it came, byte for byte.
        let transport = try CurlTransport()
        let response = try await get(transport, "gzip?status=206")
        #expect(response.response.statusCode == 206)
        #expect(response.response.value(forHTTPHeaderField: "Content-Encoding") == "gzip")
        #expect(response.data == (try await get(transport, "gzip", headers: ["Accept-Encoding": "*"])).data)
        // A request with its own Range is not given the transport's Accept-Encoding: it asks
        // for the body as it is (without the field, a server may pick any coding).
        func sent(_ headers: [String: String]) async throws -> String? {
            var request = URLRequest(url: try TestServer.url().appendingPathComponent("headers"))
            for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
            let echoed = try await transport.send(TransportRequest(urlRequest: request))
            return ((try JSONSerialization.jsonObject(with: echoed.data) as? [String: Any])?["headers"] as? [String: String])?["Accept-Encoding"]
        }
        #expect(try await sent([:]) == "gzip, deflate, br, zstd")
        #expect(try await sent(["Range": "bytes=0-99"]) == "identity")
        // Nor through a provider, whose default fields carry the transport's list (it was sent,
        // and not decoded); a list of the caller's own is sent.
        let provider = Provider<Bin>(transport: transport)
        #expect(try echo(try await provider.request(try Bin("anything")).value).header("Accept-Encoding") == "gzip, deflate, br, zstd")
        let ranged = try Bin("anything", headers: ["Range": "bytes=0-99"])
        #expect(try echo(try await provider.request(ranged).value).header("Accept-Encoding") == "identity")
        let own = try Bin("anything", headers: ["Range": "bytes=0-99", "Accept-Encoding": "gzip"])
        #expect(try echo(try await provider.request(own).value).header("Accept-Encoding") == "gzip")
    }

    @Test func aRedirectsCodedBodyIsLeftBehind() async throws {
        // A 302 whose gzip body is corrupt: the body is not decoded, and the redirect is followed.
        let response = try await get(try CurlTransport(), "gzip?corrupt=1&status=302&location=/get")
        #expect(response.response.statusCode == 200)
        #expect(response.response.url?.path == "/get")
    }

    @Test func headOfACodedBodyNeedsNoDecoder() async throws {
        var request = URLRequest(url: URL(string: (try TestServer.url()).absoluteString + "/fixture/encoded/gzip,br")!)
        request.httpMethod = "HEAD"
        let response = try await CurlTransport().send(TransportRequest(urlRequest: request))
        #expect(response.response.statusCode == 200)
        #expect(response.response.value(forHTTPHeaderField: "Content-Encoding") == "gzip, br")
        #expect(response.data.isEmpty)
    }

    @Test func codingsInFieldsOfTheirOwnOrFoldedAreAllUndone() async throws {
        let transport = try CurlTransport()
        #expect(try await get(transport, "gzip,br?split=1").data == Self.text)
        var request = URLRequest(url: try TestServer.url("FAULT_URL").appendingPathComponent("folded-encoding"))
        request.timeoutInterval = 10
        let folded = try await transport.send(TransportRequest(urlRequest: request))
        #expect(folded.data == Data("folded and decoded".utf8))
    }

    @Test func aTrailerLineLikeAStatusLineStartsNoResponse() async throws {
        // After a chunked body, "HTTP/1.1 302: Found", a Location and a cookie among the trailer
        // lines: the 200, its fields and its body stand, nothing is followed.
        var configuration = CurlTransport.Configuration()
        configuration.cookies = true
        let transport = try CurlTransport(configuration: configuration)
        let base = try TestServer.url("FAULT_URL")
        var request = URLRequest(url: base.appendingPathComponent("trailer-status-line"))
        request.timeoutInterval = 10
        let response = try await transport.send(TransportRequest(urlRequest: request))
        #expect(response.response.statusCode == 200)
        #expect(response.data == Data("ok".utf8))
        #expect(response.response.value(forHTTPHeaderField: "Location") == nil)
        #expect(response.response.value(forHTTPHeaderField: "Content-Type") == "text/plain")
        #expect(response.response.url?.path == "/trailer-status-line")
    }

    /// libcurl sends a request again, in the same transfer, after a `417` to its `Expect:
    /// 100-continue` (on a connection the `417` leaves open): the response is the second answer,
    /// with its own fields, cookies and coding. The `417`'s were kept (its `X-Hop`, its cookie,
    /// no coding), and the final answer's fields dropped as trailer fields; now the `417`'s cookie
    /// is kept beside the final answer's.
    @Test(arguments: [false, true]) func aSecondAnswerAfterA417IsTheResponse(_ gzip: Bool) async throws {
        var configuration = CurlTransport.Configuration()
        configuration.cookies = true
        let transport = try CurlTransport(configuration: configuration)
        let base = try TestServer.url("FAULT_URL")
        let key = UUID().uuidString
        var request = URLRequest(url: URL(string: base.absoluteString + "/expect-417?key=\(key)&gzip=\(gzip ? 1 : 0)")!)
        request.httpMethod = "POST"
        request.httpBody = Data(repeating: 0x61, count: 2048)
        request.setValue("100-continue", forHTTPHeaderField: "Expect")
        request.timeoutInterval = 10
        let response = try await transport.send(TransportRequest(urlRequest: request))
        let fields = response.response
        #expect(fields.statusCode == 200)
        #expect(fields.value(forHTTPHeaderField: "X-Hop") == "final")
        #expect(fields.value(forHTTPHeaderField: "Set-Cookie") == "a=final")
        #expect(response.data == Data("ok".utf8))
        // The 417's cookie is kept too, as a followed redirect's is.
        #expect(
            transport.loop.settings.cookieJar?.header(for: base)?.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.sorted() == [
                "a=final", "b=417",
            ])
        // A final 417 (to no `Expect` of the request, its body come) keeps a trailer line like a
        // status line a trailer: its body and fields stand.
        var final = URLRequest(url: URL(string: base.absoluteString + "/trailer-status-line?status=417")!)
        final.timeoutInterval = 10
        let refused = try await transport.send(TransportRequest(urlRequest: final))
        #expect(refused.response.statusCode == 417 && refused.data == Data("ok".utf8))
        #expect(refused.response.value(forHTTPHeaderField: "Location") == nil)
        #expect(transport.loop.settings.cookieJar?.header(for: base)?.contains("t=1") == false)
    }

    /// A chunked body's length is its chunks' (RFC 9112 §6.3): a `Content-Length` beside
    /// `Transfer-Encoding: chunked` is no declared length past the limit (the 10 bytes failed as
    /// 999,999,999 declared).
    @Test func aChunkedBodysDeclaredLengthIsIgnored() async throws {
        var limits = RequestLimits.default
        limits.maxResponseBytes = 1 << 20
        let response = try await fault(try CurlTransport(), "chunked-declared", limits: limits)
        #expect(response.response.statusCode == 200)
        #expect(response.data == Data("0123456789".utf8))
    }

    /// Sends `path` of the fault server through `transport`.
    func fault(_ transport: CurlTransport, _ path: String, limits: RequestLimits = .default) async throws(TransportFailure) -> TransportResponse {
        let base = (try? TestServer.url("FAULT_URL"))!
        var request = TransportRequest(urlRequest: URLRequest(url: URL(string: base.absoluteString + "/" + path)!))
        request.limits = limits
        return try await transport.send(request)
    }

    /// Only the first line of a block of fields is a status line: one in the middle of the block
    /// (libcurl passes it on as a field) dropped the fields before it and started their count
    /// anew, and one repeated made a block of fields no limit stopped.
    @Test func aFieldLineLikeAStatusLineStartsNoResponse() async throws {
        let transport = try CurlTransport()
        let response = try await fault(transport, "status-line-field?rounds=1&n=2")
        #expect(response.response.statusCode == 200)
        #expect(response.data == Data("ok".utf8))
        #expect(response.response.value(forHTTPHeaderField: "Content-Type") == "text/plain")
        #expect(response.response.value(forHTTPHeaderField: "X-F-1") == "v")
        do {
            let endless = try await fault(transport, "status-line-field?rounds=50&n=900")
            Issue.record("expected the field limit, got status \(endless.response.statusCode)")
        } catch {
            #expect(error.kind == .badResponse)
            #expect(error.message.hasPrefix("the response has more than maxHeaderFields (1000) header fields: "), "\(error.message)")
        }
    }

    /// Trailer fields, and the fields of interim (1xx) responses, count against the header
    /// limits: an endless trailer section, or endless 103s, each a line within the idle timeout,
    /// ran until the server stopped.
    @Test(arguments: ["endless-trailers", "endless-1xx"])
    func trailersAndInterimResponsesCountAgainstTheHeaderLimits(_ path: String) async throws {
        var limits = RequestLimits.default
        limits.maxHeaderBytes = 16_384
        let transport = try CurlTransport()
        do {
            let response = try await fault(transport, path, limits: limits)
            Issue.record("\(path): expected the header limit, got status \(response.response.statusCode)")
        } catch {
            #expect(error.kind == .badResponse)
            #expect(error.message.hasPrefix("the response's header fields passed maxHeaderBytes (16384 bytes): "), "\(path): \(error.message)")
        }
    }

    /// A redirect whose body ends early (the server closes before the length it declared) is
    /// followed: its fields are whole, and its body is left behind anyway. It failed as a bad
    /// response.
    @Test func aRedirectWhoseBodyEndsEarlyIsFollowed() async throws {
        let transport = try CurlTransport()
        let response = try await fault(transport, "short-body?status=302&location=/ok")
        #expect(response.response.statusCode == 200)
        #expect(response.response.url?.path == "/ok")
        #expect(response.data == Data(#"{"ok":true}"#.utf8))
        // A final response whose body ends early still fails.
        await #expect(throws: TransportFailure.self) { try await fault(transport, "short-body") }
    }

    /// libcurl's own bounds on all the header fields of a response, under larger limits of ours,
    /// are the response's fault: passed, they came as a lost connection (which is retried), or
    /// as one field over 100 KiB.
    @Test func libcurlsBoundOnAllTheFieldsIsABadResponse() async throws {
        var limits = RequestLimits.default
        limits.maxHeaderBytes = 1 << 20
        limits.maxHeaderFields = 100_000
        let transport = try CurlTransport()
        do {
            let response = try await fault(transport, "many-headers?n=20000", limits: limits)
            Issue.record("expected libcurl's bound, got status \(response.response.statusCode)")
        } catch {
            #expect(error.kind == .badResponse)
            // 300 KiB in all (7.88 with its fixes, 8.12), or at most 5,000 fields (8.23).
            let prefix =
                "the response's header fields are more than libcurl accepts, within maxHeaderBytes (1048576 bytes) and maxHeaderFields (100000): "
                + "Too "
            #expect(error.message.hasPrefix(prefix), "\(error.message)")
            // Sent again, it passes the bound again: the default policy does not retry it (it
            // did, as a bad response, twice more).
            #expect(error.limit == (error.message.contains("Too many") ? 5_000 : 300 << 10))
            #expect(RetryPolicy.default.retryReason(for: .underlying(error, nil), method: .get) == nil)
        }
    }

    @Test func rawDeflateMayEndWithAChecksumsFourBytes() async throws {
        #expect(try await get(try CurlTransport(), "deflate?raw=1&trailer=4").data == Self.text)
        let failure = await failure(try CurlTransport(), "deflate?raw=1&trailer=5")
        #expect(
            failure == TransportFailure(kind: .badResponse, message: "cannot decode the response body: 5 bytes follow the end of the deflate body"))
    }

    @Test func codedBytesCountAgainstTheBodyLimit() async throws {
        // A gzip header's comment decodes to nothing: 200,000 bytes of it, their size undeclared,
        // pass a 100,000-byte limit on the coded bytes alone (the body decodes to 50,000 bytes).
        var limits = RequestLimits.default
        limits.maxResponseBytes = 100_000
        let path = "gzip?comment=200000&chunked=1&bytes=50000"
        let failure = await failure(try CurlTransport(), path, limits: limits)
        #expect(failure?.kind == .responseTooLarge)
        #expect(failure?.limit == 100_000)
        #expect(
            failure?.message.hasPrefix("the response body passed maxResponseBytes (100000 bytes) as it came, before decoding: ") == true,
            "\(failure?.message ?? "")")
        #expect((failure?.observedBytes ?? 0) > 100_000)
        // Within the limit, the same body decodes.
        limits.maxResponseBytes = 400_000
        #expect(try await get(try CurlTransport(), path, limits: limits).data == Self.text.prefix(50000))
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
        ("gzip?members=3&trailing=1", "cannot decode the response body: 16 bytes follow the end of the gzip body"),
        // After a gzip member, only another member's magic (1f 8b) may follow.
        ("gzip?tail=1f00", "cannot decode the response body: 2 bytes follow the end of the gzip body"),
        ("gzip?members=2&tail=8b1f", "cannot decode the response body: 2 bytes follow the end of the gzip body"),
        ("gzip?tail=1f", "cannot decode the response body: the gzip body ends before its coded stream does (cut short, or corrupt)"),
        ("gzip?tail=1f8b", "cannot decode the response body: the gzip body ends before its coded stream does (cut short, or corrupt)"),
        ("gzip?tail=1f8b08000000", "cannot decode the response body: the gzip body ends before its coded stream does (cut short, or corrupt)"),
        ("gzip?tail=1f8bff00", "cannot decode the response body: the gzip body is corrupt: "),
        ("br?trailing=1", "cannot decode the response body: "),
        ("zstd?trailing=1", "cannot decode the response body: the zstd body cannot be decoded: "),
        // RFC 9659: at most an 8 MiB window.
        ("zstd-window-32m", "cannot decode the response body: the zstd body cannot be decoded: Frame requires too much memory for decoding"),
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
        for size in [1, 7, 4096, 65536] {
            let (decoded, going, _) = try Self.decode([UInt8](coded.data), codings: codings, inPiecesOf: size)
            #expect(going)
            #expect(decoded == Self.text, "\(pathAndQuery) in pieces of \(size): \(decoded.count) bytes")
        }
    }

    /// `bytes` decoded from `codings` in pieces of `size`: what came out, whether every piece
    /// said to go on, and the coding left unfinished at the end.
    static func decode(_ bytes: [UInt8], codings: [String], inPiecesOf size: Int) throws -> (Data, going: Bool, unfinished: String?) {
        let decoder = try ContentDecoder(codings: codings)
        var decoded = Data()
        var going = true
        for start in stride(from: 0, to: bytes.count, by: size) {
            going =
                try bytes[start..<min(start + size, bytes.count)].withUnsafeBytes { piece in
                    try decoder.decode(
                        piece,
                        into: {
                            decoded.append(contentsOf: $0)
                            return true
                        }, bound: { _ in true })
                } && going
        }
        return (decoded, going, decoder.unfinishedCoding)
    }

    @Test func gzipMembersOneAfterAnotherAreOneBodyHoweverTheyAreSplit() async throws {
        // RFC 1952 §2.2: a gzip body may be several members (`cat a.gz b.gz`); a piece may end
        // between a member's two magic bytes. A body that ends there is unfinished, and a byte
        // that does not begin a member follows the body's end, counted with the one held.
        func decode(_ pathAndQuery: String, inPiecesOf size: Int) async throws -> (decoded: Data, unfinished: String?) {
            let coded = [UInt8](try await get(try CurlTransport(), pathAndQuery, headers: ["Accept-Encoding": "*"]).data)
            let (decoded, _, unfinished) = try Self.decode(coded, codings: ["gzip"], inPiecesOf: size)
            return (decoded, unfinished)
        }
        for size in [1, 2, 3, 7, 4096, 1 << 20] {
            let whole = try await decode("gzip?members=4", inPiecesOf: size)
            #expect(whole.decoded == Self.text, "pieces of \(size): \(whole.decoded.count) bytes")
            #expect(whole.unfinished == nil, "pieces of \(size)")
            let halfMagic = try await decode("gzip?members=2&tail=1f", inPiecesOf: size)
            #expect(halfMagic.decoded == Self.text && halfMagic.unfinished == "gzip", "pieces of \(size)")
            let magicOnly = try await decode("gzip?tail=1f8b", inPiecesOf: size)
            #expect(magicOnly.decoded == Self.text && magicOnly.unfinished == "gzip", "pieces of \(size)")
            await #expect(
                throws: TransportFailure(kind: .badResponse, message: "cannot decode the response body: 2 bytes follow the end of the gzip body")
            ) {
                _ = try await decode("gzip?tail=1f00", inPiecesOf: size)
            }
        }
    }

    /// Decodes `path` (its codings listed so) in one piece, with a sink and a bound that say
    /// `sink` and `bound`; whether the decoding went on, the pieces sunk, the totals asked.
    func decodeOnce(_ path: String, sink: Bool, bound: Bool) async throws -> (going: Bool, pieces: Int, asked: [Int64]) {
        let coded = try await get(try CurlTransport(), path, headers: ["Accept-Encoding": "*"])
        let decoder = try ContentDecoder(codings: path.split(separator: ",").map(String.init))
        var pieces = 0
        var asked: [Int64] = []
        let going = try [UInt8](coded.data).withUnsafeBytes { bytes in
            try decoder.decode(
                bytes,
                into: { _ in
                    pieces += 1
                    return sink
                },
                bound: {
                    asked.append($0)
                    return bound
                })
        }
        return (going, pieces, asked)
    }

    @Test func aSinkThatStopsStopsTheDecoding() async throws {
        let (going, pieces, asked) = try await decodeOnce("gzip", sink: false, bound: true)
        #expect(!going)
        #expect(pieces == 1)
        #expect(asked.isEmpty)
    }

    /// With codings stacked, the bound is asked with all an inner stage has passed on so far,
    /// and stops the decoding as the sink does.
    @Test func aBoundThatStopsStopsTheDecodingBetweenStages() async throws {
        let (going, pieces, asked) = try await decodeOnce("gzip,br", sink: true, bound: false)
        #expect(!going)
        #expect(asked.count == 1)
        #expect(asked.first.map { $0 > 0 && $0 <= ContentDecoder.outputBytes } == true)
        #expect(pieces == 0)
    }

    @Test func aCodingWithoutADecoderIsRefused() {
        #expect(throws: TransportFailure(kind: .badResponse, message: "cannot decode the response body: no decoder of compress")) {
            try ContentDecoder(codings: ["gzip", "compress"])
        }
    }
}
