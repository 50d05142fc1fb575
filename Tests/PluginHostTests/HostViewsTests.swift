import CPluginABI
import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The host's own views of Foundation's requests and responses (made for speed) say what
/// Foundation says.
@Suite struct HostViewsTests {
    /// `allHeaderFields` as a list sorted by name, the way `ResponseState` read it before.
    static func parsed(_ response: HTTPURLResponse) -> [HTTPHeader] {
        response.allHeaderFields.compactMap { key, value -> HTTPHeader? in
            guard let name = key.base as? String else { return nil }
            return HTTPHeader(name: name, value: value as? String ?? "\(value)")
        }.sorted { $0.name < $1.name }
    }

    static let url = URL(string: "http://127.0.0.1/views")!

    @Test func aMethodsCBytesAreItsOwnWhetherSharedOrNot() throws {
        func text(_ copy: CByteCopy) -> String {
            let bytes = copy.bytes
            return String(decoding: UnsafeBufferPointer(start: bytes.data, count: bytes.len), as: UTF8.self)
        }
        for method in ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"] {
            #expect(text(CByteCopy.of(method: method)) == method)
            // The standard ones are shared: the same copy every time.
            #expect(CByteCopy.of(method: method) === CByteCopy.of(method: method))
        }
        for method in ["PROPFIND", "get", "X"] {
            #expect(text(CByteCopy.of(method: method)) == method)
            #expect(CByteCopy.of(method: method) !== CByteCopy.of(method: method))
        }
        // A request's method as loaded plugins read it, before and after a hook changes it.
        let state = RequestState(URLRequest(url: Self.url))
        #expect(String(decoding: UnsafeBufferPointer(start: state.cMethod.data, count: state.cMethod.len), as: UTF8.self) == "GET")
        try state.setMethod("PROPFIND")
        #expect(String(decoding: UnsafeBufferPointer(start: state.cMethod.data, count: state.cMethod.len), as: UTF8.self) == "PROPFIND")
    }

    @Test func listedFieldNamesAreFoundations() throws {
        let fields = [
            "content-type": "text/plain", "x-lower": "1", "X-Upper": "2", "www-authenticate": "Basic realm=\"a\"",
            "ETAG": "\"t\"", "content-md5": "m", "cache-control": "no-store", "a_b": "u", "x5y": "d", "Set-Cookie": "c=1",
            "last-modified": "Mon, 02 Jan 2006 15:04:05 GMT", "SERVER": "s", "": "empty name",
            // Around the `X-` rule: the prefix alone, a lone X, another byte after it.
            "x-": "p", "X": "x", "x_y": "u2", "y-x": "o",
        ]
        let response = try #require(HTTPURLResponse(url: Self.url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: fields))
        #if canImport(FoundationNetworking)
        let listed = try #require(FoundationFieldNames.listed(fields))
        #expect(listed == Self.parsed(response))
        // A second time, from the table of names already worked out.
        #expect(FoundationFieldNames.listed(fields) == listed)
        #else
        #expect(FoundationFieldNames.listed(fields) == nil)
        #endif
    }

    @Test func namesOfLettersAndHyphensAreCapitalizedAsFoundationDoes() {
        // Worked out from the bytes: the same as Foundation's `capitalized`, for names of every
        // case, hyphens first, last and doubled; nil for any other byte.
        for name in ["content-type", "ETAG", "Content-Type", "-a", "a-", "a--b", "-", "--", "cONTENT-lENGTH", "A", "z", "Zz-zZ"] {
            #expect(FoundationFieldNames.capitalizedWords(name) == name.capitalized, "\(name)")
        }
        var seed: UInt64 = 0x2545_F491_4F6C_DD1D
        let alphabet = Array("aAbZzyY-mQ".utf8)
        for _ in 0..<2_000 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let length = Int(seed >> 59) + 1
            let name = String(decoding: (0..<length).map { alphabet[Int((seed >> UInt64(4 * $0 % 56)) % UInt64(alphabet.count))] }, as: UTF8.self)
            #expect(FoundationFieldNames.capitalizedWords(name) == name.capitalized, "\(name)")
        }
        for name in ["", "a_b", "x5y", "caf\u{e9}", "a b", "a@b", "a[b", "a`b", "a{b"] {
            #expect(FoundationFieldNames.capitalizedWords(name) == nil, "\(name)")
        }
    }

    @Test func namesThatBecomeOneOrAreNotASCIIAreLeftToFoundation() {
        #expect(FoundationFieldNames.listed(["content-type": "a", "Content-Type": "b"]) == nil)
        #expect(FoundationFieldNames.listed(["caf\u{e9}": "a"]) == nil)
        // Also an `X-` name (kept as it is when ASCII) and beside names of letters and hyphens.
        #expect(FoundationFieldNames.listed(["x-caf\u{e9}": "a"]) == nil)
        #expect(FoundationFieldNames.listed(["content-type": "text/plain", "X-Caf\u{e9}": "a"]) == nil)
    }

    @Test func responsesPluginsReadCarryFoundationsFields() async throws {
        // Through the stub transport (which says which fields it made the response from) and the
        // chain, a plugin reads what the app's `HTTPURLResponse` lists.
        let fields = ["etag": "\"v1\"", "x-request-id": "r", "www-authenticate": "Basic", "content-type": "text/plain"]
        let reader = FieldReader()
        let transport = StubTransport { _ in .networkResponseWithHeaders(200, fields, Data("ok".utf8)) }
        let provider = Provider<ViewsTarget>(transport: transport, interceptors: [reader])
        let response = try await provider.request(ViewsTarget()).value
        let seen = reader.seen
        let httpResponse = try #require(response.response)
        #expect(seen.withLock { $0 } == Self.parsed(httpResponse))
        #expect(seen.withLock { $0 }.map(\.name) == ["Content-Length", "Content-Type", "Etag", "WWW-Authenticate", "x-request-id"])
    }

    /// What an app reads of a response Foundation made from `fields` at once.
    static func reading(_ response: HTTPURLResponse?) -> [String] {
        guard let response else { return ["none"] }
        let names = ["content-type", "Content-Length", "ETAG", "x-a", "x-b", "X-Missing"]
        return [
            "\(response.statusCode)", response.url?.absoluteString ?? "-", response.mimeType ?? "-", response.textEncodingName ?? "-",
            "\(response.expectedContentLength)", response.suggestedFilename ?? "-",
        ] + parsed(response).map { "\($0.name)=\($0.value)" } + names.map { response.value(forHTTPHeaderField: $0) ?? "-" }
    }

    @Test func aReceivedResponseIsMadeOnFirstReadAsFoundationMakesItAtOnce() async throws {
        // Names in several spellings (a name repeated in another case Foundation keeps one of, in
        // no fixed order: not compared here).
        let fields = ["content-type": "text/html; charset=UTF-8", "Content-Length": "2", "etag": "\"v\"", "x-a": "1", "X-B": "2"]
        let eager = try #require(HTTPURLResponse(url: Self.url, statusCode: 203, httpVersion: "HTTP/1.1", headerFields: fields))
        var made = try #require(TransportResponse.made(url: Self.url, statusCode: 203, httpVersion: "HTTP/1.1", fields: fields, data: Data()))
        // Status, URL and fields are read from the parts; the response, once made, is the same object.
        #expect(made.statusCode == 203 && made.url == Self.url)
        #if canImport(FoundationNetworking)
        #expect(made.source.receivedFields == fields)
        #else
        // Elsewhere the response is made at once, and the fields are Foundation's only.
        #expect(made.source.receivedFields == nil)
        #endif
        #expect(Self.reading(made.response) == Self.reading(eager))
        #expect(made.response === made.response)
        // A response set in its place replaces the parts.
        made.response = try #require(HTTPURLResponse(url: Self.url, statusCode: 404, httpVersion: nil, headerFields: ["x-b": "3"]))
        #expect(made.statusCode == 404 && made.source.receivedFields == nil)
        #expect(made.response.value(forHTTPHeaderField: "x-b") == "3")

        // Through a provider, with no interceptor and with one that only reads the fields, the app
        // reads what Foundation's response at once says (the response itself and the field lookup).
        let transport = StubTransport { _ in .networkResponseWithHeaders(203, fields, Data("ok".utf8)) }
        for interceptors in [[], [FieldReader()]] as [[any Interceptor]] {
            let response = try await Provider<ViewsTarget>(transport: transport, interceptors: interceptors).request(ViewsTarget()).value
            let stubbed = try #require(
                HTTPURLResponse(url: URL(string: "http://127.0.0.1/views")!, statusCode: 203, httpVersion: "HTTP/1.1", headerFields: fields))
            #expect(Self.reading(response.response) == Self.reading(stubbed), "\(interceptors.count) interceptors")
            for name in ["content-type", "CONTENT-LENGTH", "x-a", "X-Missing"] {
                #expect(response.value(forHTTPHeaderField: name) == stubbed.value(forHTTPHeaderField: name), "\(name)")
            }
            #expect(response.statusCode == 203 && response.response === response.response)
        }
    }

    /// A transport that only counts (another type than the package's).
    struct CountingTransport: Transport {
        func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
            throw TransportFailure(kind: .other, message: "not sent")
        }
    }

    @Test func fieldsAreSortedByNameAsTheGeneralSortWould() {
        // Lists of 0 to 40 fields (the short ones by insertion, the long ones by `sort`), names
        // repeated and in mixed case: the same order as a stable sort by name, every time.
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        let names = ["Accept", "accept", "X-Id", "Content-Type", "A", "b", "Accept-Language", "x-id", "Z"]
        for count in 0...40 {
            var fields: [HTTPHeader] = []
            for index in 0..<count {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                fields.append(HTTPHeader(name: names[Int(seed >> 33) % names.count], value: String(index)))
            }
            var sorted = fields
            sorted.sortByName()
            let expected = fields.enumerated().sorted {
                $0.element.name != $1.element.name ? $0.element.name < $1.element.name : $0.offset < $1.offset
            }
            #expect(sorted.map { [$0.name, $0.value] } == expected.map { [$0.element.name, $0.element.value] }, "\(count) fields")
        }
    }

    @Test func onlyThisPackagesTransportsGetTheParts() throws {
        #expect(InterceptorChain.readsParts(StubTransport { _ in .networkResponse(200, Data()) }))
        #expect(InterceptorChain.readsParts(try CurlTransport(configuration: CurlTransport.Configuration())))
        #expect(!InterceptorChain.readsParts(URLSessionTransport()))
        #expect(!InterceptorChain.readsParts(CountingTransport()))
    }

    /// Requests of one chain with the same original fields read one kept list and one C copy; a
    /// hook's edit changes its own request only; other fields, or the same in other bytes, get a
    /// list of their own.
    @Test func requestsWithTheSameFieldsShareTheChainsListAndEditTheirOwn() throws {
        let memo = OriginalFieldsMemo()
        let fields = ["Accept": "text/plain", "X-One": "1", "accept-language": "en"]
        func request(_ fields: [String: String]) -> URLRequest {
            var request = URLRequest(url: Self.url)
            request.allHTTPHeaderFields = fields
            return request
        }
        func pairs(_ state: RequestState) -> [String] {
            let c = state.cHeaders
            return (0..<c.count).map { index in
                var name = ph_bytes()
                var value = ph_bytes()
                _ = c.pair(at: index, &name, &value)
                return CBytes.string(name) + ": " + CBytes.string(value)
            }
        }
        let sorted = ["Accept: text/plain", "X-One: 1", "accept-language: en"]
        let first = RequestState(request(fields), fieldsMemo: memo)
        // The C copy read first: the list behind it is found on the way.
        #expect(pairs(first) == sorted)
        let second = RequestState(request(fields), fieldsMemo: memo)
        #expect(second.headers.map { "\($0.name): \($0.value)" } == sorted)
        #expect(second.originalEntry === first.originalEntry)
        #expect(second.cHeaders === first.cHeaders)
        // Equal fields in another dictionary: the same entry.
        let equal = RequestState(request(Dictionary(uniqueKeysWithValues: fields.map { ($0.key, $0.value) })), fieldsMemo: memo)
        #expect(equal.cHeaders === first.cHeaders)

        // An edit: this request's list and C copy change; the others' and the kept ones do not.
        try second.setHeader(named: "X-Two", value: "2")
        try second.setHeader(named: "X-One", value: nil)
        #expect(second.headers.map(\.name) == ["Accept", "accept-language", "X-Two"])
        #expect(pairs(second) == ["Accept: text/plain", "accept-language: en", "X-Two: 2"])
        #expect(pairs(first) == sorted)
        let third = RequestState(request(fields), fieldsMemo: memo)
        #expect(pairs(third) == sorted)
        #expect(third.cHeaders === first.cHeaders)
        #expect(second.makeURLRequest().allHTTPHeaderFields == ["Accept": "text/plain", "accept-language": "en", "X-Two": "2"])

        // Other fields: a list of their own, kept in place of the last.
        let other = RequestState(request(["X-Other": "o"]), fieldsMemo: memo)
        #expect(pairs(other) == ["X-Other: o"])
        #expect(other.cHeaders !== first.cHeaders)
        #expect(RequestState(request(["X-Other": "o"]), fieldsMemo: memo).cHeaders === other.cHeaders)

        // The same fields as strings but not as bytes (`==` holds canonically equivalent strings
        // equal): each request reads, and sends, its own bytes.
        let composed = RequestState(request(["X-Name": "caf\u{E9}"]), fieldsMemo: memo)
        let decomposed = RequestState(request(["X-Name": "cafe\u{301}"]), fieldsMemo: memo)
        #expect(composed.headers.map { Array($0.value.utf8) } == [Array("caf\u{E9}".utf8)])
        #expect(decomposed.headers.map { Array($0.value.utf8) } == [Array("cafe\u{301}".utf8)])
        #expect(composed.originalEntry !== decomposed.originalEntry)
        let kelvin = RequestState(request(["X-Unit": "\u{212A}"]), fieldsMemo: memo)
        let k = RequestState(request(["X-Unit": "K"]), fieldsMemo: memo)
        #expect(pairs(kelvin) == ["X-Unit: \u{212A}"] && pairs(k) == ["X-Unit: K"])
        #expect(kelvin.cHeaders !== k.cHeaders)
        try k.setHeader(named: "X-Added", value: "1")
        #expect(k.makeURLRequest().allHTTPHeaderFields?["X-Unit"].map { Array($0.utf8) } == Array("K".utf8))

        // No fields: nothing shared, nothing kept.
        let none = RequestState(URLRequest(url: Self.url), fieldsMemo: memo)
        #expect(none.headers.isEmpty && none.originalEntry == nil)
    }

    /// A provider's requests with the same fields share the chain's list.
    @Test func aChainsRequestsShareTheirOriginalFields() async throws {
        final class Reader: Interceptor, @unchecked Sendable {
            let seen = Locked<[ObjectIdentifier?]>([])
            var name: String { "reader" }
            func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                _ = request.headers
                let state = request.backend as? RequestState
                seen.withLock { $0.append(state?.originalEntry.map(ObjectIdentifier.init)) }
                return .respond(SyntheticResponse(statusCode: 204, headers: []))
            }
        }
        let reader = Reader()
        let provider = Provider<Bin>(interceptors: [reader])
        for _ in 0..<3 { _ = try await provider.request(try Bin("get", headers: ["X-Same": "1"])).value }
        let seen = reader.seen.withLock { $0 }
        #expect(seen.count == 3 && seen[0] != nil && Set(seen).count == 1)
    }

    /// Concurrent requests with two alternating field lists through a loaded plugin that reads
    /// and edits them (`alpha` appends itself to `X-Order`): each sends its own fields and its own
    /// edit, whichever list the chain keeps at the time (the suite also runs under the thread
    /// sanitizer).
    @Test func concurrentRequestsKeepTheirOwnFieldsThroughALoadedPlugin() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let plugins = try PluginLoader.load(manifest: try f.manifest([["name": "alpha"]]), services: PluginServices())
        let provider = Provider<Bin>(interceptors: plugins)
        let echoed = try await withThrowingTaskGroup(of: (String, String?, String?).self) { group in
            for index in 0..<48 {
                let set = index % 2 == 0 ? "a" : "b"
                let target = try Bin("anything", headers: ["X-Set": set, "X-Order": set])
                group.addTask {
                    let sent = try echo(try await provider.request(target).value)
                    return (set, sent.header("X-Set"), sent.header("X-Order"))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(echoed.count == 48)
        for (set, sentSet, order) in echoed {
            #expect(sentSet == set && order == set + ",alpha")
        }
    }

    @Test func aRequestRemadeKeepsWhatTheCopyKept() throws {
        var original = URLRequest(url: URL(string: "http://127.0.0.1/a?b=c")!, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 7)
        original.httpMethod = "PUT"
        original.allHTTPHeaderFields = ["Accept": "text/plain", "X-One": "1"]
        original.httpBody = Data("body".utf8)
        original.mainDocumentURL = URL(string: "http://127.0.0.1/main")
        original.allowsCellularAccess = false
        original.httpShouldHandleCookies = false
        original.networkServiceType = .background
        let state = RequestState(original)
        try state.setHeader(named: "X-Two", value: "2")
        let copied = state.makeURLRequest()
        for made in [state.makeURLRequest(remake: true), copied] {
            #expect(made.url == original.url)
            #expect(made.httpMethod == "PUT")
            #expect(made.cachePolicy == .reloadIgnoringLocalCacheData)
            #expect(made.timeoutInterval == 7)
            #expect(made.allHTTPHeaderFields == ["Accept": "text/plain", "X-One": "1", "X-Two": "2"])
            #expect(made.httpBody == Data("body".utf8))
            #expect(made.mainDocumentURL == URL(string: "http://127.0.0.1/main"))
            #expect(made.allowsCellularAccess == false)
            #expect(made.httpShouldHandleCookies == false)
            #expect(made.networkServiceType == .background)
        }

        // A GET stays a GET; a changed URL and timeout are the new ones; a removed body is gone.
        let get = RequestState(URLRequest(url: URL(string: "http://127.0.0.1/g")!))
        try get.setURL("http://127.0.0.1/h?i=j")
        try get.setTimeout(3)
        for remade in [get.makeURLRequest(remake: true), get.makeURLRequest()] {
            #expect(remade.httpMethod == "GET")
            #expect(remade.url?.absoluteString == "http://127.0.0.1/h?i=j")
            #expect(remade.timeoutInterval == 3)
        }
        state.setBodyData(nil)
        #expect(state.makeURLRequest(remake: true).httpBody == nil)

        // A URL relative to a base (set after the request was made, so it is kept so): the same URL
        // as the copy's.
        var relativeRequest = URLRequest(url: URL(string: "http://127.0.0.1/")!)
        relativeRequest.url = URL(string: "p?q=1", relativeTo: URL(string: "http://127.0.0.1/base/")!)
        let based = RequestState(relativeRequest)
        try based.setHeader(named: "X-Three", value: "3")
        #expect(based.makeURLRequest(remake: true).url == based.makeURLRequest().url)
        #expect(based.makeURLRequest(remake: true).url?.absoluteString == "http://127.0.0.1/base/p?q=1")
    }

    /// The list sent is folded exactly when two of its fields may share a name: original fields
    /// that repeat a name in another case, or a field a hook added (one by one or in a batch); a
    /// field set replaces every field of its name, and needs no folding.
    @Test func aSentListIsFoldedWhenItsNamesMayRepeat() throws {
        func sent(_ fields: [String: String], memo: OriginalFieldsMemo?, _ edit: (RequestState) throws -> Void) throws -> [String] {
            var original = URLRequest(url: Self.url)
            original.allHTTPHeaderFields = fields
            let state = RequestState(original, fieldsMemo: memo)
            try edit(state)
            #if canImport(FoundationNetworking)
            let parts = try #require(state.sending(deferring: true).deferred)
            return parts.fields.map { "\($0.name): \($0.value)" }.sorted()
            #else
            return (state.makeURLRequest().allHTTPHeaderFields ?? [:]).map { "\($0.key): \($0.value)" }.sorted()
            #endif
        }
        let memo = OriginalFieldsMemo()
        // Set only: one field per name, with the chain's list or without.
        for shared in [memo, nil] {
            #expect(
                try sent(["Accept": "a", "X-A": "0"], memo: shared) {
                    try $0.setHeader(named: "x-a", value: "1")
                    try $0.setHeader(named: "X-B", value: "2")
                    try $0.applyEdits([.set("X-B", "3"), .set("X-C", "4"), .remove("accept")])
                } == ["X-B: 3", "X-C: 4", "x-a: 1"])
            // Added one by one, or in a batch: folded under the first spelling.
            #expect(
                try sent(["Accept": "a"], memo: shared) {
                    try $0.addHeader(named: "X-Twice", value: "1")
                    try $0.addHeader(named: "x-twice", value: "2")
                } == ["Accept: a", "X-Twice: 1, 2"])
            #expect(
                try sent(["Accept": "a"], memo: shared) { try $0.applyEdits([.set("X-A", "1"), .add("x-a", "2")]) } == [
                    "Accept: a", "X-A: 1, 2",
                ])
        }
        // Original fields that repeat a name in another case: folded, though the hook only set a field.
        let repeating = ["X-Dup": "1", "x-dup": "2", "Accept": "a"]
        var original = URLRequest(url: Self.url)
        original.allHTTPHeaderFields = repeating
        try #require(original.allHTTPHeaderFields?.count == 3)
        for shared in [memo, nil] {
            // Sorted by name first (`X-Dup` before `x-dup`): folded under `X-Dup`, its value first.
            #expect(try sent(repeating, memo: shared) { try $0.setHeader(named: "X-New", value: "n") } == ["Accept: a", "X-Dup: 1, 2", "X-New: n"])
        }
    }

    @Test func aChangedRequestGoesAsItsPartsAndIsBuiltOnlyWhenRead() throws {
        var original = URLRequest(url: URL(string: "http://127.0.0.1/a")!, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 7)
        original.allHTTPHeaderFields = ["Accept": "text/plain"]
        original.networkServiceType = .background
        let state = RequestState(original)
        try state.setMethod("POST")
        try state.addHeader(named: "X-Twice", value: "a")
        try state.addHeader(named: "x-twice", value: "b")
        state.setBody([0x68, 0x69])
        let (request, deferred) = state.sending(deferring: true)
        // The copy, for transports that read the URLRequest itself: the same request as built.
        let copied = state.makeURLRequest()
        #expect(copied.allHTTPHeaderFields == ["Accept": "text/plain", "X-Twice": "a, b"])
        #if canImport(FoundationNetworking)
        let parts = try #require(deferred)
        #expect(request == original)
        #expect(parts.url == original.url)
        #expect(parts.method == "POST")
        // Repeated names folded under the first spelling, as the built request has them.
        #expect(
            parts.fields.sorted { $0.name < $1.name } == [
                HTTPHeader(name: "Accept", value: "text/plain"), HTTPHeader(name: "X-Twice", value: "a, b"),
            ])
        #expect(parts.body == Data("hi".utf8))
        #expect(parts.timeout == 7)

        var sending = TransportRequest(urlRequest: request)
        sending.deferred = parts
        #expect(sending.method == "POST")
        #expect(sending.url == original.url)
        #expect(sending.httpBody == Data("hi".utf8))
        #expect(Dictionary(uniqueKeysWithValues: sending.headerFields.map { ($0.name, $0.value) }) == copied.allHTTPHeaderFields)
        // A budgeted timeout changes the parts, not the request they were taken from.
        sending.timeoutInterval = 2
        #expect(sending.timeoutInterval == 2)
        #expect(parts.timeout == 7)
        // Read, the request is built with everything the copy has (once: a second read is the same).
        let built = sending.urlRequest
        #expect(built.httpMethod == "POST")
        #expect(built.url == copied.url)
        #expect(built.allHTTPHeaderFields == copied.allHTTPHeaderFields)
        #expect(built.httpBody == copied.httpBody)
        #expect(built.cachePolicy == .reloadIgnoringLocalCacheData)
        #expect(built.networkServiceType == .background)
        #expect(built.timeoutInterval == 2)
        #expect(sending.urlRequest == built)
        // Replaced, the request is the one given.
        var replaced = built
        replaced.setValue("3", forHTTPHeaderField: "X-Three")
        sending.urlRequest = replaced
        #expect(sending.deferred == nil)
        #expect(sending.urlRequest.value(forHTTPHeaderField: "X-Three") == "3")
        #expect(sending.headerFields.contains { $0.name == "X-Three" && $0.value == "3" })

        // A request with a body stream the hooks left alone is copied (the stream goes with it).
        var streamed = URLRequest(url: URL(string: "http://127.0.0.1/s")!)
        streamed.httpBodyStream = InputStream(data: Data("s".utf8))
        let streaming = RequestState(streamed)
        try streaming.setHeader(named: "X-Edited", value: "1")
        let (streamRequest, streamParts) = streaming.sending(deferring: true)
        #expect(streamParts == nil)
        #expect(streamRequest.httpBodyStream != nil)
        #expect(streamRequest.value(forHTTPHeaderField: "X-Edited") == "1")
        #else
        #expect(deferred == nil)
        #expect(request == copied)
        #endif
        // Unchanged, a request goes as it is.
        let unchanged = RequestState(original).sending(deferring: true)
        #expect(unchanged.request == original)
        #expect(unchanged.deferred == nil)
    }

    @Test func aChangedRequestReachesTheServerThroughCurlAndTheResponseRecordsIt() async throws {
        // httpbin's /anything echoes what it got: the method, the body and the fields (repeated
        // names folded into one line).
        let provider = Provider<Bin>(transport: try CurlTransport(), interceptors: [Rewriter()])
        let response = try await provider.request(try Bin("anything")).value
        let echoed = try #require(try JSONSerialization.jsonObject(with: response.data) as? [String: Any])
        let fields = try #require(echoed["headers"] as? [String: String])
        #expect(echoed["method"] as? String == "POST")
        #expect(echoed["data"] as? String == "hi")
        #expect(fields["X-Twice"] == "a, b")
        #expect(fields["X-Edited"] == "1")
        let sent = try #require(response.request)
        #expect(sent.httpMethod == "POST")
        #expect(sent.value(forHTTPHeaderField: "X-Twice") == "a, b")
        #expect(sent.httpBody == Data("hi".utf8))
        #expect(sent.url == response.response?.url)
    }

    @Test func aStubbedChangedRequestIsRecordedOnTheResponse() async throws {
        let provider = Provider<ViewsTarget>(stubClosure: { _ in .immediate }, interceptors: [Rewriter()])
        let response = try await provider.request(ViewsTarget()).value
        let sent = try #require(response.request)
        #expect(sent.httpMethod == "POST")
        #expect(sent.value(forHTTPHeaderField: "X-Edited") == "1")
        #expect(sent.value(forHTTPHeaderField: "X-Twice") == "a, b")
        #expect(sent.url?.absoluteString == "http://127.0.0.1/views")
        #expect(response.requestLine == "POST http://127.0.0.1/views")
    }

    @Test func aRequestsOwnTimeoutStillHoldsOnURLSessionAfterAHeaderEdit() async throws {
        // URLSession (on Linux) uses its session's timeout unless the request's was set; a plugin's
        // header edit must not lose that it was (the session's here is the default 60 s).
        let provider = Provider<Bin>(
            requestClosure: { _, request in
                var request = request
                request.timeoutInterval = 1
                return request
            }, transport: URLSessionTransport(), interceptors: [HeaderSetter()])
        let result = await provider.request(try Bin("delay/4")).result
        guard case .failure(.underlying(let failure, nil)) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(failure.kind == .timedOut)
    }

    @Test func stubbedResponsesSayNoProtocol() async throws {
        // The stub transport has no protocol to report (as before the fields were remembered).
        let transport = StubTransport { _ in .networkResponseWithHeaders(200, ["etag": "\"v\""], Data()) }
        let response = try await Provider<ViewsTarget>(transport: transport, interceptors: [FieldReader()]).request(ViewsTarget()).value
        #expect(response.httpVersion == nil)
    }
}

/// A target for ``HostViewsTests``.
private struct ViewsTarget: TargetType {
    var baseURL: URL { URL(string: "http://127.0.0.1")! }
    var path: String { "views" }
    var method: HTTPMethod { .get }
}

/// Sets a request field in `prepare` (what signing or a token does).
private struct HeaderSetter: Interceptor {
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.setHeader("X-Edited", "1")
        return .proceed
    }
}

/// Changes the method, the body and the fields (one field twice) in `prepare`.
private struct Rewriter: Interceptor {
    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        try request.setMethod("POST")
        request.setBody(Array("hi".utf8))
        try request.setHeader("X-Edited", "1")
        try request.setHeader("Content-Type", "text/plain")
        try request.addHeader("X-Twice", "a")
        try request.addHeader("X-Twice", "b")
        return .proceed
    }
}

/// Keeps the response fields its `process` reads.
private struct FieldReader: Interceptor {
    let seen = Locked<[HTTPHeader]>([])

    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        seen.withLock { $0 = result.response?.headers ?? [] }
        return .proceed
    }
}
