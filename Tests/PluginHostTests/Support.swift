import Dispatch
import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The httpbin server started by `Tests/test`.
enum TestServer {
    struct Missing: Error, CustomStringConvertible {
        let variable: String
        var description: String {
            "\(variable) is not set: the suite needs its test servers (httpbin and the fault server) on loopback. Run `Tests/test` (it installs httpbin and "
                + "gunicorn from PyPI into .build/test-venv, starts them and runs swift test), or start one yourself: "
                + "`python3 -m venv .build/test-venv && .build/test-venv/bin/pip install -r Tests/Fixtures/requirements.txt && "
                + "eval \"$(python3 Tests/Fixtures/testserver.py start .build/test-venv .build/test-server)\"`"
        }
    }

    static func url(_ variable: String = "HTTPBIN_URL") throws -> URL {
        guard let value = ProcessInfo.processInfo.environment[variable], let url = URL(string: value) else {
            throw Missing(variable: variable)
        }
        return url
    }

    static func second() throws -> URL { try url("HTTPBIN_URL_2") }
}

/// A target whose every property a test can set.
struct Bin: TargetType {
    var baseURL: URL
    var path: String
    var method: HTTPMethod = .get
    var task: RequestTask = .requestPlain
    var headers: [String: String]?
    var sample: EndpointSampleResponse = .networkResponse(200, Data())
    var validationType: ValidationType = .none
    var pluginOptions: [String: String] = [:]
    var limits: RequestLimits?
    var sampleResponse: EndpointSampleResponse { sample }

    init(
        _ path: String, method: HTTPMethod = .get, task: RequestTask = .requestPlain, headers: [String: String]? = nil,
        validation: ValidationType = .none, options: [String: String] = [:], base: URL? = nil
    ) throws {
        self.baseURL = try base ?? TestServer.url()
        self.path = path
        self.method = method
        self.task = task
        self.headers = headers
        self.validationType = validation
        self.pluginOptions = options
    }
}

/// A transport that counts the requests it forwards.
final class CountingTransport: Transport {
    let inner: any Transport
    private let counter = LockedCounter()
    init(_ inner: any Transport = URLSessionTransport()) { self.inner = inner }
    var count: Int { counter.value }
    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        counter.increment()
        return try await inner.send(request)
    }
}

/// A transport that records how each call ended (`200`, `cancelled`, `timedOut`, …).
final class RecordingTransport: Transport {
    let inner: any Transport
    let outcomes = LockedCounter()
    let started = LockedCounter()
    init(_ inner: any Transport = URLSessionTransport()) { self.inner = inner }
    func send(_ request: TransportRequest) async throws(TransportFailure) -> TransportResponse {
        started.increment()
        do {
            let response = try await inner.send(request)
            outcomes.append(String(response.response.statusCode))
            return response
        } catch {
            outcomes.append(error.kind.rawValue)
            throw error
        }
    }
}

/// A thread-safe counter and log for tests.
final class LockedCounter: Sendable {
    private let state = Locked((count: 0, items: [String]()))
    var value: Int { state.withLock { $0.count } }
    var log: [String] { state.withLock { $0.items } }
    @discardableResult func increment() -> Int {
        state.withLock {
            $0.count += 1
            return $0.count
        }
    }
    func append(_ item: String) { state.withLock { $0.items.append(item) } }
}

/// A TCP socket bound to a free port of 127.0.0.1, and the port; nil when none could be bound.
func boundLoopbackSocket() -> (fd: Int32, port: Int)? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else {
        close(fd)
        return nil
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A loopback port with nothing listening on it.
func closedPortURL() -> URL {
    let (fd, port) = boundLoopbackSocket()!
    close(fd)
    return URL(string: "http://127.0.0.1:\(port)")!
}

/// httpbin's echo of a request (`/anything`, `/get`, `/post`, …).
struct Echo: Decodable, Sendable {
    let args: [String: JSONAny]?
    let data: String?
    let form: [String: JSONAny]?
    let files: [String: String]?
    let headers: [String: String]
    let json: JSONAny?
    let method: String?
    let url: String

    func header(_ name: String) -> String? {
        headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
}

/// Any JSON value, decodable, for echoes whose fields vary in type.
enum JSONAny: Decodable, Sendable, Equatable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([JSONAny])
    case object([String: JSONAny])
    case null
    init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONAny].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONAny].self))
        }
    }
    var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    var strings: [String]? {
        switch self {
        case .string(let s): return [s]
        case .array(let a): return a.compactMap(\.string)
        default: return nil
        }
    }
}

/// Records the hooks called on it, in order, into a shared log as `name.hook`.
struct Recorder: Interceptor {
    let name: String
    let log: LockedCounter
    var respondInPrepare: SyntheticResponse?
    var throwIn: InterceptorHook?

    init(_ name: String, log: LockedCounter, respond: SyntheticResponse? = nil, throwIn: InterceptorHook? = nil) {
        self.name = name
        self.log = log
        self.respondInPrepare = respond
        self.throwIn = throwIn
    }

    struct Boom: Error, CustomStringConvertible {
        let hook: InterceptorHook
        var description: String { "boom in \(hook)" }
    }

    func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        log.append("\(name).prepare")
        if throwIn == .prepare { throw Boom(hook: .prepare) }
        try request.setHeader("X-Order", [request.header("X-Order"), name].compactMap { $0 }.joined(separator: ","))
        if let respondInPrepare { return .respond(respondInPrepare) }
        return .proceed
    }

    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        log.append("\(name).willSend")
        if throwIn == .willSend { throw Boom(hook: .willSend) }
    }

    func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        log.append("\(name).didReceive")
        if throwIn == .didReceive { throw Boom(hook: .didReceive) }
    }

    func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        log.append("\(name).process")
        if throwIn == .process { throw Boom(hook: .process) }
        if let response = result.response {
            try response.setHeader("X-Response-Order", [response.header("X-Response-Order"), name].compactMap { $0 }.joined(separator: ","))
        }
        return .proceed
    }
}

/// Decodes httpbin's echo from a response.
func echo(_ response: Response) throws -> Echo {
    try JSONDecoder().decode(Echo.self, from: response.data)
}

/// Waits until `condition` holds, polling, for at most `seconds`. The default bound is generous:
/// in the parallel run the first half minute keeps both cores busy (debug builds hashing plugin
/// libraries, child processes), and a condition that holds at once returns at once anyway.
func eventually(_ seconds: Double = 60, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: 10_000_000)
    }
    return condition()
}

/// A value shared between a test and its callbacks.
final class LockedBox<Value: Sendable>: Sendable {
    private let value: Locked<Value>
    init(_ value: Value) { self.value = Locked(value) }
    func get() -> Value { value.withLock { $0 } }
    func set(_ newValue: Value) { value.withLock { $0 = newValue } }
}

/// Runs long synchronous work on a Dispatch thread, so it never holds one of the few threads of
/// Swift's cooperative pool (which would starve every other test running in parallel).
///
/// The result crosses threads through a lock, not as the continuation's value: when the work ends
/// before the awaiting task has suspended, the task goes on without a synchronisation
/// ThreadSanitizer can see, and it would report the result's fields as a race.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let handoff = Locked<Result<T, any Error>?>(nil)
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            let result = Result { try body() }
            handoff.withLock { $0 = result }
            continuation.resume()
        }
    }
    return try handoff.withLock { $0 }!.get()
}

/// The two network transports: suites that talk to real servers run against both.
enum TransportKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case curl
    case urlSession

    /// A new transport of this kind.
    func make() -> any Transport {
        switch self {
        case .curl:
            do {
                return try CurlTransport()
            } catch {
                fatalError("CurlTransport cannot be created here: \(error)")
            }
        case .urlSession:
            return URLSessionTransport()
        }
    }

    /// A provider on a new transport of this kind.
    func provider(
        requestClosure: @escaping Provider<Bin>.RequestClosure = Provider<Bin>.defaultRequestMapping(for:request:),
        trackInflights: Bool = false
    ) -> Provider<Bin> {
        Provider<Bin>(requestClosure: requestClosure, transport: make(), trackInflights: trackInflights)
    }

    var testDescription: String { rawValue }
}

/// A response of `status` to `request`, with no fields and no body: what the transports tests make
/// answer.
func answer(_ request: TransportRequest, status: Int = 200) -> TransportResponse {
    let url = request.urlRequest.url!
    return TransportResponse(response: HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!, data: Data())
}

/// Waits until `flag` is set, at most 20 s, polling with no thread held.
func waitFor(_ flag: LockedBox<Bool>) async {
    for _ in 0..<400 where !flag.get() { try? await Task.sleep(nanoseconds: 50_000_000) }
}
