import CPluginABI
import Foundation
import PluginSDK
import Testing

@testable import CachePlugin
@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ABI 1.3: a response's fields in one call (`result_headers`), and the fields of the request it
/// answers, as sent (`result_request_headers`), which lets the cache leave `willSend` out.
@Suite("ABI 1.3: response snapshots and the request as sent")
struct ResponseSnapshotTests {
    typealias Snapshot = (UnsafeMutablePointer<ph_bytes>?, UnsafeMutablePointer<ph_bytes>?, Int) -> Int

    /// The fields a snapshot call gives, read with room for `capacity` (and the count it returns).
    func read(_ call: Snapshot, capacity: Int) -> (count: Int, fields: [HTTPHeader]) {
        var names = [ph_bytes](repeating: ph_bytes(), count: capacity)
        var values = [ph_bytes](repeating: ph_bytes(), count: capacity)
        let count = call(&names, &values, capacity)
        let written = min(count, capacity)
        return (count, (0..<written).map { HTTPHeader(name: CBytes.string(names[$0]), value: CBytes.string(values[$0])) })
    }

    @Test func theHostGivesEveryResponseFieldAndTheSentRequestsInOneCall() throws {
        let api = HostTable.template
        #expect(api.abi_minor >= 3)
        var original = URLRequest(url: URL(string: "http://127.0.0.1:9/a")!)
        original.setValue("kept", forHTTPHeaderField: "X-Before")
        let request = RequestState(original)
        try request.setHeader(named: "Authorization", value: "Bearer late")
        try request.addHeader(named: "X-Twice", value: "1")
        try request.addHeader(named: "X-Twice", value: "2")
        let fields = [
            HTTPHeader(name: "Cache-Control", value: "max-age=60"), HTTPHeader(name: "Vary", value: "Accept"),
            HTTPHeader(name: "Vary", value: "Authorization"),
        ]
        let response = ResponseState(SyntheticResponse(statusCode: 200, headers: fields, body: [1]), url: original.url)
        let pointer = OpaquePointer(Unmanaged.passUnretained(response.handle).toOpaque())

        let all = read({ api.result_headers(pointer, $0, $1, $2) }, capacity: 8)
        #expect(all.count == 3)
        #expect(all.fields == fields)
        // Too little room: what fits, and how many there are; no room at all: the count.
        let some = read({ api.result_headers(pointer, $0, $1, $2) }, capacity: 2)
        #expect(some.count == 3)
        #expect(some.fields == Array(fields.prefix(2)))
        #expect(api.result_headers(pointer, nil, nil, 0) == 3)
        // An edit is seen by the next snapshot.
        try response.setHeader(named: "Vary", value: nil)
        #expect(read({ api.result_headers(pointer, $0, $1, $2) }, capacity: 8).fields == [fields[0]])

        // Without its request, the response tells none; with it, the request as the hooks left it.
        #expect(api.result_request_headers(pointer, nil, nil, 0) == 0)
        #expect(response.requestHeaders == nil)
        response.sentRequest = request
        let sent = read({ api.result_request_headers(pointer, $0, $1, $2) }, capacity: 8)
        #expect(sent.count == 4)
        #expect(sent.fields == request.headers)
        #expect(sent.fields.value(named: "authorization") == "Bearer late")
        #expect(sent.fields.values(named: "X-Twice") == ["1", "2"])
        #expect(response.requestHeaders == request.headers)

        // A failure has neither.
        let failure = ResultHandle(response: nil, failure: TransportFailure(kind: .timedOut, message: "late"), mayDecide: false)
        let failed = OpaquePointer(Unmanaged.passUnretained(failure).toOpaque())
        #expect(api.result_headers(failed, nil, nil, 0) == 0)
        #expect(api.result_request_headers(failed, nil, nil, 0) == 0)
    }

    @Test func theSDKReadsASnapshotPastThirtyTwoFields() throws {
        // The SDK's reader (what CRequestBackend and CResultBackend call) takes up to 32 fields on
        // the stack, and more in a second call.
        let api = HostTable.template
        let many = (0..<40).map { HTTPHeader(name: "X-Field-\($0)", value: String(repeating: "v", count: $0)) }
        let request = RequestState(URLRequest(url: URL(string: "http://127.0.0.1:9/a")!))
        for field in many { try request.addHeader(named: field.name, value: field.value) }
        for count in [0, 1, 32, 33, 40] {
            let fields = Array(many.prefix(count))
            let response = ResponseState(SyntheticResponse(statusCode: 200, headers: fields), url: nil)
            response.sentRequest = request
            let pointer = OpaquePointer(Unmanaged.passUnretained(response.handle).toOpaque())
            #expect(CBytes.snapshot { api.result_headers(pointer, $0, $1, $2) } == fields)
            #expect(CBytes.snapshot { api.result_request_headers(pointer, $0, $1, $2) } == many)
        }
    }

    /// After a redirect to another origin, the hooks read the request as the last hop got it:
    /// without the credentials and without a `Host` field the caller set for the first origin
    /// (the hooks were told that `Host` was sent there).
    @Test(arguments: TransportKind.allCases)
    func theRequestAsSentLeavesWhatAnotherOriginDidNotGet(_ transport: TransportKind) async throws {
        let seen = LockedBox<[String]>([])
        let provider = Provider<Bin>(transport: transport.make(), interceptors: [SentReader(seen: seen, prefix: "")])
        let (first, second) = (try TestServer.url(), try TestServer.second())
        let target = try Bin(
            "redirect-to",
            task: .requestParameters(parameters: ["url": second.appendingPathComponent("get").absoluteString], encoding: URLEncoding.queryString),
            headers: ["Authorization": "Bearer secret", "Host": "\(first.host ?? ""):\(first.port ?? 0)", "X-Kept": "yes"])
        #expect(try await provider.request(target).value.statusCode == 200)
        let names = seen.get().map { $0.prefix { $0 != "=" }.lowercased() }
        #expect(names.contains("x-kept"))
        #expect(!names.contains("authorization"))
        #expect(!names.contains("host"), "\(names)")
    }

    @Test func theChainHandsEachResponseItsRequestAsSentReplacementsToo() async throws {
        let seen = LockedBox<[String]>([])
        let provider = Provider<Bin>(
            stubClosure: Provider<Bin>.immediatelyStub(_:),
            interceptors: [SentReader(seen: seen), Replacer(), LateHeader()])
        let response = try await provider.request(try Bin("get", headers: ["X-Early": "1"])).value
        #expect(response.statusCode == 299)
        // The outer reader ran after the replacement, and still saw the request as sent.
        #expect(seen.get() == ["X-Early=1", "X-Late=added in willSend"])
    }
}

/// Reads the request as sent in `process`.
private struct SentReader: Interceptor {
    var name: String { "sent-reader" }
    let seen: LockedBox<[String]>
    /// The fields kept: those whose names begin so.
    var prefix = "X-"
    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        guard case .response(let response) = result else { return .proceed }
        let fields = response.requestHeaders ?? []
        seen.set(fields.filter { $0.name.hasPrefix(prefix) }.map { "\($0.name)=\($0.value)" }.sorted())
        return .proceed
    }
}

/// Replaces every response.
private struct Replacer: Interceptor {
    var name: String { "replacer" }
    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        .replace(SyntheticResponse(statusCode: 299))
    }
}

/// Adds a field in `willSend`.
private struct LateHeader: Interceptor {
    var name: String { "late-header" }
    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        try request.setHeader("X-Late", "added in willSend")
    }
}

/// The cache on a host whose responses do not tell their request (before ABI 1.3): it keeps every
/// hook, and `willSend` keeps the request as sent.
@Suite("cache plugin: on a host before ABI 1.3")
struct CacheOnAnOlderHostTests {
    /// Services that cannot tell a response's request (the protocol's default).
    struct OlderHost: HostServices {
        let base: any HostServices
        func value(forKey key: String) -> String? { base.value(forKey: key) }
        func setValue(_ value: String?, forKey key: String) { base.setValue(value, forKey: key) }
        func emit(_ name: String, fields: [String: String]) { base.emit(name, fields: fields) }
        func log(_ level: LogLevel, _ message: String) { base.log(level, message) }
        func now() -> Double { base.now() }
        func monotonicNanoseconds() -> UInt64 { base.monotonicNanoseconds() }
        func randomBytes(_ count: Int) -> [UInt8] { base.randomBytes(count) }
    }

    static let url = URL(string: "http://cache.test/older")!

    func context(_ id: UInt64, _ host: any HostServices) -> InterceptorContext {
        InterceptorContext(target: TargetInfo(method: "GET", baseURL: "http://cache.test", path: "/older"), requestID: id, attempt: 1, services: host)
    }

    /// One exchange by hand, as the chain runs it, with a response that does not know its request;
    /// `late` is added to the request between the cache's prepare and its willSend.
    func exchange(_ cache: CachePlugin, _ id: UInt64, _ host: any HostServices, late: HTTPHeader?) throws -> PrepareAction {
        let request = RequestState(URLRequest(url: Self.url))
        let view = InterceptorRequest(backend: request)
        let answer = try cache.prepare(view, context: context(id, host))
        guard answer == .proceed else { return answer }
        if let late { try request.setHeader(named: late.name, value: late.value) }
        try cache.willSend(view, context: context(id, host))
        let response = ResponseState(
            SyntheticResponse(statusCode: 200, headers: [HTTPHeader(name: "Cache-Control", value: "max-age=60")], body: [1]), url: Self.url)
        #expect(InterceptorResponse(backend: response).requestHeaders == nil)
        #expect(try cache.process(.response(InterceptorResponse(backend: response)), context: context(id, host)) == .proceed)
        return answer
    }

    @Test func itKeepsWillSendAndStillNeverStoresCredentialsAddedInsideIt() throws {
        let services = PluginServices()
        let current = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: services.hostServices(for: "cache"))
        #expect(current.activeHooks == [.prepare, .process])
        let host = OlderHost(base: services.hostServices(for: "cache"))
        let cache = try CachePlugin(configuration: PluginConfiguration(plugin: "cache", values: [:]), host: host)
        #expect(cache.activeHooks == nil)

        // Credentials added after the lookup (seen by willSend): not stored; the next one misses.
        _ = try exchange(cache, 1, host, late: HTTPHeader(name: "Authorization", value: "Bearer late"))
        #expect(try exchange(cache, 2, host, late: nil) == .proceed)
        // The same without them: stored by the last exchange, so the next one is a hit.
        guard case .respond(let hit) = try exchange(cache, 3, host, late: nil) else {
            Issue.record("a response to a request without credentials was not stored")
            return
        }
        #expect(hit.headers.value(named: "X-Cache") == "hit")
    }
}
