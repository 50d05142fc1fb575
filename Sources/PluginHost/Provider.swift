import Dispatch
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends requests for targets of type `Target` through an interceptor chain and a transport.
///
/// ```swift
/// let provider = Provider<GitHub>(interceptors: [MyLogger()])
/// let user = try await provider.request(.user("octocat")).filterSuccessfulStatusCodes().map(User.self).value
/// ```
///
/// Every request goes target → ``Endpoint`` (endpoint closure) → server defaults →
/// `URLRequest` (request closure) → interceptors → transport (or stub) → interceptors →
/// validation → ``Response``.
public final class Provider<Target: TargetType>: Sendable {
    /// Maps a target to an endpoint.
    public typealias EndpointClosure = @Sendable (Target) -> Endpoint
    /// The last chance to edit the `URLRequest` (e.g. its timeout); may suspend.
    public typealias RequestClosure = @Sendable (Endpoint, URLRequest) async throws -> URLRequest
    /// Decides whether a target is stubbed.
    public typealias StubClosure = @Sendable (Target) -> StubBehavior

    /// The endpoint closure.
    public let endpointClosure: EndpointClosure
    /// The request closure.
    public let requestClosure: RequestClosure
    /// The stub closure.
    public let stubClosure: StubClosure
    /// Where callback-style completions run; `nil` means a global queue.
    public let callbackQueue: DispatchQueue?
    /// The transport for requests that are not stubbed.
    public let transport: any Transport
    /// The interceptors of the current chain, outermost first (a reload replaces them:
    /// ``reloadPlugins()``).
    public var interceptors: [any Interceptor] { current.chain.interceptors }
    /// The server layer, if any.
    public let server: ServerConfiguration?
    /// Whether identical in-flight requests share one network call.
    public let trackInflights: Bool
    /// The services interceptors use: key/value store, events, log, credential refreshers.
    public let services: PluginServices
    /// The header fields set on every request before the chain runs, unless already set
    /// (``DefaultHeaders``).
    public let defaultHeaders: [String: String]
    /// Why a field of ``defaultHeaders`` cannot be sent (checked once): every request fails with it.
    private let defaultHeadersRefusal: NetworkError?
    /// What a response may cost and how long an exchange may take, unless a target or an
    /// ad-hoc call gives its own (``RequestLimits``).
    public let limits: RequestLimits

    /// The chain new requests use, and what a reload needs; swapped whole by a reload.
    let generations: Locked<ChainGeneration>
    /// Held by a reload from reading the manifest to swapping the chain: one reload at a time.
    let reloading = NSLock()
    let registry = RequestRegistry()

    /// The chain generation new requests start on.
    var current: ChainGeneration { generations.withLock { $0 } }

    /// Creates a provider.
    ///
    /// - Parameters:
    ///   - endpointClosure: target → endpoint; default ``defaultEndpointMapping(for:)``.
    ///   - requestClosure: last edit of the `URLRequest`; default returns it unchanged.
    ///   - stubClosure: default ``neverStub(_:)``.
    ///   - callbackQueue: where completion callbacks run; default a global queue.
    ///   - configuration: when given (and no `transport`), requests go through a
    ///     ``URLSessionTransport`` with this configuration.
    ///   - transport: the transport; by default ``Provider/defaultTransport(services:)``: a
    ///     ``CurlTransport`` on Linux, a ``URLSessionTransport`` on Darwin.
    ///   - interceptors: the chain, outermost first.
    ///   - server: default headers, parameters, timeout and a switchable base URL.
    ///   - trackInflights: share identical in-flight requests (one network call, every caller gets the result).
    ///   - services: the services interceptors see; a new set by default.
    ///   - maxInterceptorRetries: how often `process` may ask to retry one request; default 2.
    ///   - defaultHeaders: fields set on every request before the chain runs unless the target,
    ///     the server layer or the request closure set them; nil (the default):
    ///     ``DefaultHeaders/standard(for:)`` of the transport; `[:]`: none. A field that cannot
    ///     be sent fails every request with ``NetworkError/invalidHeader(name:reason:)``.
    ///   - limits: response size, header and deadline limits (``RequestLimits/default``).
    public init(
        endpointClosure: @escaping EndpointClosure = Provider.defaultEndpointMapping(for:),
        requestClosure: @escaping RequestClosure = Provider.defaultRequestMapping(for:request:),
        stubClosure: @escaping StubClosure = Provider.neverStub(_:),
        callbackQueue: DispatchQueue? = nil,
        configuration: URLSessionConfiguration? = nil,
        transport: (any Transport)? = nil,
        interceptors: [any Interceptor] = [],
        server: ServerConfiguration? = nil,
        trackInflights: Bool = false,
        services: PluginServices = PluginServices(),
        maxInterceptorRetries: Int = 2,
        defaultHeaders: [String: String]? = nil,
        limits: RequestLimits = .default
    ) {
        self.endpointClosure = endpointClosure
        self.requestClosure = requestClosure
        self.stubClosure = stubClosure
        self.callbackQueue = callbackQueue
        if let transport {
            self.transport = transport
        } else if let configuration {
            self.transport = URLSessionTransport(configuration: configuration)
        } else {
            self.transport = Self.defaultTransport(services: services)
        }
        self.server = server
        self.trackInflights = trackInflights
        self.services = services
        self.generations = Locked(
            ChainGeneration(
                chain: InterceptorChain(interceptors: interceptors, services: services, maxRetries: maxInterceptorRetries),
                number: 1, source: nil))
        self.defaultHeaders = defaultHeaders ?? DefaultHeaders.standard(for: self.transport)
        // Two spellings of one name (`h["accept"]` beside the standard `Accept`) went out as two
        // fields, in the dictionary's order: refused, as a target's own are.
        self.defaultHeadersRefusal = Endpoint.refusal(of: self.defaultHeaders) ?? Endpoint.repetition(in: self.defaultHeaders)
        self.limits = limits
    }

    /// The transport a provider uses when given none: on Linux a ``CurlTransport`` (URLSession
    /// there is a slow layer over the same libcurl, and cannot trust a private CA), falling back
    /// to a ``URLSessionTransport`` when libcurl cannot be loaded, which is said once through
    /// `services`' log sink; on Darwin a ``URLSessionTransport``.
    public static func defaultTransport(services: PluginServices) -> any Transport {
        #if os(Linux)
        return defaultTransport(services: services) { () throws(CurlTransportError) in try CurlTransport() }
        #else
        return URLSessionTransport()
        #endif
    }

    /// The Linux choice, with the libcurl transport made by `makeCurl`.
    static func defaultTransport(
        services: PluginServices,
        makeCurl: () throws(CurlTransportError) -> CurlTransport
    ) -> any Transport {
        do {
            return try makeCurl()
        } catch {
            services.log(.warning, plugin: "pluginhost", "CurlTransport unavailable (\(error)); using URLSessionTransport")
            return URLSessionTransport()
        }
    }

    /// A pipeline for `target`. Nothing is sent until the pipeline is consumed.
    public func request(_ target: Target) -> ResponsePipeline<Response> {
        pipeline(
            method: target.method, validation: target.validationType, redirects: target.redirectPolicy,
            limits: target.limits ?? limits,
            stub: { [stubClosure] in stubClosure(target) },
            endpoint: { [endpointClosure] _ in
                // Read on each consumption, as the endpoint is: a base URL that follows a server
                // layer is the one the request goes to.
                let info = TargetInfo(
                    method: target.method.rawValue, baseURL: target.baseURL.absoluteString, path: target.path,
                    pluginOptions: target.pluginOptions)
                return (info, endpointClosure(target))
            })
    }

    /// Cancels every request of this provider that is under way: being sent, in its request
    /// closure (it is not sent when the closure returns), or waiting out a ``RetryPolicy``
    /// backoff; each caller gets ``NetworkError/cancelled``.
    public func cancelAll() {
        registry.cancelAll()
    }

    /// How many distinct requests are in flight: being prepared (their endpoint and request
    /// closure running), being sent (identical ones shared count once), or waiting out a
    /// ``RetryPolicy`` backoff before they are sent again. A request counts from its start, its
    /// request closure included, to its end; a retried one also between its attempts (while the
    /// retry is decided on, its backoff, the next attempt's start), with no gap.
    public var inflightCount: Int { registry.runningCount }

    /// Builds the lazy pipeline shared by targets and ad-hoc calls. `endpoint` runs on each
    /// consumption, given the server layer's values read once for it (the request's defaults
    /// come from the same reading): what interceptors are told of the target, and the endpoint.
    func pipeline(
        method: HTTPMethod, validation: ValidationType, redirects: RedirectPolicy? = nil, limits: RequestLimits,
        stub: @escaping @Sendable () -> StubBehavior,
        endpoint: @escaping @Sendable (ServerConfiguration.Snapshot?) -> (info: TargetInfo, endpoint: Endpoint)
    ) -> ResponsePipeline<Response> {
        ResponsePipeline(method: method, callbackQueue: callbackQueue, deadline: limits.deadline, registry: registry) {
            [self] progress async throws(NetworkError) -> Response in
            // A `cancelAll()` from here on, while the request closure runs too, cancels this
            // request when it is registered (`registry.run`): what the closure made is not sent.
            let epoch = registry.consumptionEpoch
            // A caller cancelled already runs neither the endpoint nor the request closure.
            if Task.isCancelled { throw .cancelled }
            // Counted in flight from here (`inflightCount`), while the request closure runs too.
            let preparation = registry.beginPreparation()
            var made: CallPlan
            do throws(NetworkError) {
                let snapshot = server?.snapshot
                let (info, endpoint) = endpoint(snapshot)
                made = try await makePlan(
                    info: info, validation: validation, redirects: redirects, stub: stub(), endpoint: endpoint, snapshot: snapshot)
            } catch {
                registry.endPreparation(preparation)
                throw error
            }
            made.limits = limits
            made.deadline = ExchangeDeadline.current
            let sharable = trackInflights && Self.mayShare(made) ? Self.sharingKey(made) : nil
            // A shared exchange runs without the first caller's deadline: each caller's own ends
            // its wait (`ResponsePipeline.execute`), and the exchange goes on for the others.
            if sharable != nil { made.deadline = nil }
            let plan = made
            // One chain for the whole consumption, pipeline retries included: a reload meanwhile
            // does not mix generations within it.
            let generation = ChainPin.generation(for: self) { current }
            let chain = generation.chain
            // Shared calls are shared within one generation only.
            let key = sharable.map { "\(generation.number)\n\($0)" }
            let requestID = registry.makeRequestID()
            return try await registry.run(sharingKey: key, epoch: epoch, progress: progress, prepared: preparation) { signal, progress in
                await chain.run(plan, requestID: requestID, progress: progress, cancellation: signal, registry: self.registry)
            }.get()
        }
    }

    private func makePlan(
        info: TargetInfo, validation: ValidationType, redirects: RedirectPolicy?, stub: StubBehavior, endpoint: Endpoint,
        snapshot: ServerConfiguration.Snapshot?
    ) async throws(NetworkError) -> CallPlan {
        var endpoint = endpoint
        var timeout: TimeInterval?
        if let snapshot {
            endpoint = endpoint.merging(defaultHeaders: snapshot.headers, defaultParameters: snapshot.parameters)
            timeout = snapshot.timeout
        }
        if let defaultHeadersRefusal { throw defaultHeadersRefusal }
        // A stub reads no file (as Moya's): see `uploadFile` below.
        if stub != .never { endpoint = endpoint.readingNoFile() }
        var request = try endpoint.urlRequest(defaultHeaders: defaultHeaders)
        if let timeout {
            request.timeoutInterval = timeout
        } else if stub == .never, let given = transport.requestTimeout, given != request.timeoutInterval {
            request.timeoutInterval = given
        }
        do {
            request = try await requestClosure(endpoint, request)
        } catch let error as NetworkError {
            throw error
        } catch is CancellationError {
            // Cancelled while the request closure ran: like a cancellation at any other stage.
            throw .cancelled
        } catch {
            throw Task.isCancelled ? .cancelled : .custom(error)
        }
        if Task.isCancelled { throw .cancelled }
        // A body the request closure set is labelled as the endpoint's is (hooks see the field).
        Endpoint.labelForm(&request)
        let body: TransportRequest.Body
        switch endpoint.task {
        case .uploadFile(let url):
            guard url.isFileURL else {
                throw .fileAccess(path: MessageURL.text(url.absoluteString), reason: "the file to upload is no file URL")
            }
            // A stub reads no file (as Moya's): a fixture path need not exist where tests run.
            guard stub != .never || FileManager.default.isReadableFile(atPath: url.path) else {
                throw .fileAccess(path: url.path, reason: "the file to upload does not exist or cannot be read")
            }
            body = .file(url)
        case .uploadMultipart, .uploadCompositeMultipart:
            body = .upload
        default:
            body = .inline
        }
        let transport: any Transport
        let mapped = endpoint
        switch stub {
        case .never:
            transport = self.transport
        case .immediate:
            transport = StubTransport(delay: 0, answer: mapped.sampleResponseClosure)
        case .delayed(let seconds):
            transport = StubTransport(delay: seconds, answer: mapped.sampleResponseClosure)
        }
        return CallPlan(
            target: info, request: request, body: body, download: endpoint.task.downloadDestination,
            transport: transport, validation: validation, redirects: redirects)
    }

    /// Whether a call may share another's exchange: not a download or an upload, not a body
    /// stream (read once, and by one exchange), and not a stub (each target answers its own sample).
    private static func mayShare(_ plan: CallPlan) -> Bool {
        plan.download == nil && !plan.request.isUploadLike(plan.body) && plan.request.httpBodyStream == nil
            && !(plan.transport is StubTransport)
    }

    /// What two calls must have in common to share one exchange: the request (method, URL, fields,
    /// body, timeout, and what URL loading reads of it: cookie handling, cache policy, cellular
    /// access, service type), and everything else that shapes its outcome: the target as
    /// interceptors see it (its options pick a token, a cache policy, a signature), the
    /// validation, the redirect policy and the limits.
    private static func sharingKey(_ plan: CallPlan) -> String {
        let request = plan.request
        let headers = (request.allHTTPHeaderFields ?? [:]).sorted { $0.key.lowercased() < $1.key.lowercased() }
            .map { "\($0.key.lowercased()):\($0.value)" }.joined(separator: "\n")
        let body = request.httpBody.map { $0.base64EncodedString() } ?? ""
        let options = plan.target.pluginOptions.sorted { $0.key < $1.key }.map { "\($0.key.debugDescription)=\($0.value.debugDescription)" }
        let shape = [
            "\(plan.target.method) \(plan.target.baseURL.debugDescription) \(plan.target.path.debugDescription)", options.joined(separator: ","),
            "\(plan.validation)", "\(plan.redirects.map { "\($0)" } ?? "-")", "\(plan.limits)", "\(request.timeoutInterval)",
            "\(request.httpShouldHandleCookies) \(request.cachePolicy.rawValue) \(request.allowsCellularAccess) \(request.networkServiceType.rawValue)",
        ]
        return "\(request.httpMethod ?? "GET") \(request.url?.absoluteString ?? "")\n\(headers)\n\(body)\n\(shape.joined(separator: "\n"))"
    }
}

extension URLRequest {
    fileprivate func isUploadLike(_ body: TransportRequest.Body) -> Bool {
        if case .inline = body { return false }
        return true
    }
}

extension Provider {
    /// The default mapping: the target's URL, method, task and headers, and its sample response.
    public static func defaultEndpointMapping(for target: Target) -> Endpoint {
        let url = target.url
        // On Linux a URL `appendingPathComponent` made (a path given) is the one its string parses
        // to: the request takes it as it is. The base URL itself, and other platforms, parse again.
        #if canImport(FoundationNetworking)
        let madeURL = !target.path.isEmpty && url.baseURL == nil ? url : nil
        #else
        let madeURL: URL? = nil
        #endif
        return Endpoint(
            url: url.absoluteString, sampleResponseClosure: { target.sampleResponse },
            method: target.method, task: target.task, httpHeaderFields: target.headers, extraQueryParameters: [:],
            madeURL: madeURL)
    }

    /// The default request mapping: the request unchanged.
    @Sendable public static func defaultRequestMapping(for endpoint: Endpoint, request: URLRequest) async throws -> URLRequest {
        request
    }

    /// Never stub.
    public static func neverStub(_ target: Target) -> StubBehavior { .never }

    /// Stub every target at once.
    public static func immediatelyStub(_ target: Target) -> StubBehavior { .immediate }

    /// Stub every target after `seconds`.
    public static func delayedStub(_ seconds: Double) -> StubClosure {
        { _ in .delayed(seconds: seconds) }
    }
}
