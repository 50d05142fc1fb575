import CPluginABI
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request, fully mapped, ready for the chain.
struct CallPlan: Sendable {
    var target: TargetInfo
    var request: URLRequest
    var body: TransportRequest.Body
    var download: DownloadDestination?
    var transport: any Transport
    var validation: ValidationType
    /// The target's redirect policy, if it has one.
    var redirects: RedirectPolicy? = nil
    /// The limits of this call (the target's or the provider's).
    var limits: RequestLimits = .default
    /// The exchange's deadline, if it has one.
    var deadline: (instant: DispatchTime, seconds: TimeInterval)? = nil
}

/// Runs requests through an ordered list of interceptors (outermost first).
///
/// Request side: every `prepare` first to last, then every `willSend` first to last.
/// Response side: every `didReceive` last to first, then every `process` last to first.
/// A short-circuit at interceptor k skips the network and the interceptors inside k;
/// `willSend` runs for those outside k, and the response side runs from k outwards.
///
/// A class: every request takes the chain of its provider's current generation, and a struct of
/// eight references was eight retains and releases per request.
final class InterceptorChain: Sendable {
    let interceptors: [any Interceptor]
    let bound: [BoundServices]
    let services: PluginServices
    /// How many times `process` may ask to retry one request.
    let maxRetries: Int

    /// Per interceptor, the hooks to call: a plugin compiled in declares through
    /// `ExportablePlugin.activeHooks` what its configuration needs, as a loaded one does at create.
    /// Bits, not a `Set`: they are tested for every interceptor, hook and request.
    let runs: [HookMask]
    /// Per interceptor, the loaded plugin it is: the phases call its hooks directly, with the
    /// request's or result's handle and the attempt's C context resolved once per phase. Not
    /// retained (`interceptors` holds them): no reference count taken per hook call.
    let loaded: [Unmanaged<LoadedPlugin>?]
    /// The first loaded plugin with a hook called for every request: its context carries the
    /// attempt's C view.
    let firstLoaded: Int?
    /// Whether any loaded plugin has a hook called for every request (they read a C view of the
    /// context, made once per attempt). A plugin whose only hook is `credential` gets one made
    /// when a challenge comes, and the requests without one pay nothing for it.
    var hasLoadedPlugins: Bool { firstLoaded != nil }
    /// Per interceptor, its name (read once: it is a protocol requirement).
    let names: [String]
    /// Per interceptor, the box the phases call it through (``InterceptorBox``), not retained
    /// (`boxes` holds them).
    private let called: [Unmanaged<InterceptorBox>]
    private let boxes: [InterceptorBox]
    /// The last original field list the chain's requests had (see ``OriginalFieldsMemo``).
    let originalFields: OriginalFieldsMemo
    /// Digest `nc` per nonce, shared by the chain's requests.
    let digestNonces = DigestNonceCounts()
    /// The last target the chain ran, its contexts and its C layout (see
    /// ``makeContexts(target:requestID:attempt:)``).
    /// Not an optional (`made` says whether it holds a target): the kept target is compared where
    /// it is, where unwrapping an optional first copied it (a retain of each of its strings).
    let contextTemplates = Locked<(made: Bool, target: TargetInfo, contexts: [InterceptorContext], layout: CTargetLayout?)>(
        (false, TargetInfo(method: "", baseURL: "", path: ""), [], nil))

    init(interceptors: [any Interceptor], services: PluginServices, maxRetries: Int) {
        self.interceptors = interceptors
        self.names = interceptors.map(\.name)
        let boxes = interceptors.map(InterceptorBox.init)
        self.boxes = boxes
        self.called = boxes.map(Unmanaged.passUnretained)
        let loaded = interceptors.map { ($0 as? LoadedPlugin).map(Unmanaged.passUnretained) }
        let runs = interceptors.indices.map { index in
            if let plugin = loaded[index] { return HookMask(rawValue: plugin.takeUnretainedValue().activeHooks) }
            guard let plugin = interceptors[index] as? any ExportablePlugin else { return HookMask(Set(InterceptorHook.allCases)) }
            return HookMask(Self.hooks(of: plugin))
        }
        self.runs = runs
        self.loaded = loaded
        // Loaded plugins with a hook called for every request read a C view of the context, built
        // once per attempt (a wrapped one, or one asked only for credentials, builds its own).
        self.firstLoaded = runs.indices.first { loaded[$0] != nil && !runs[$0].isDisjoint(with: .perRequest) }
        self.originalFields = OriginalFieldsMemo()
        self.bound = interceptors.map { BoundServices(services: services, plugin: $0.name) }
        self.services = services
        self.maxRetries = maxRetries
    }

    /// The hooks the chain calls on a plugin compiled in: those its instance declares active, else
    /// those its type implements, as a loaded one's descriptor exports them (the SDK's default
    /// hooks, which do nothing, are not called for every request). A hook the plugin implements but
    /// leaves out of `implementedHooks` (found by the SDK's probe, which calls the unlisted hooks
    /// once) still runs, as it always did in process; loaded, such a plugin is refused at create.
    static func hooks(of plugin: any ExportablePlugin) -> Set<InterceptorHook> {
        if let active = plugin.activeHooks { return active }
        let implemented = type(of: plugin).implementedHooks
        return implemented.union(HookProbe.unlistedHooks(of: plugin, listed: implemented))
    }

    enum Outcome {
        case response(ResponseState)
        case failure(TransportFailure)

        var view: InterceptorResult {
            switch self {
            case .response(let state): return .response(InterceptorResponse(backend: state))
            case .failure(let failure): return .failure(failure)
            }
        }

        /// The response's state; nil for a failure.
        var response: ResponseState? {
            if case .response(let state) = self { return state }
            return nil
        }

        /// The handle loaded plugins' hooks receive: the response state's own, or a new one for a failure.
        var handle: ResultHandle {
            switch self {
            case .response(let state): return state.handle
            case .failure(let failure): return ResultHandle(response: nil, failure: failure, mayDecide: false)
            }
        }
    }

    /// The attempt's C context for loaded plugins, from `contexts` (which keeps it alive while a
    /// phase runs); nil without loaded plugins.
    func cContext(_ contexts: AttemptContexts) -> UnsafePointer<ph_context>? {
        contexts.shared.map { UnsafePointer($0.pointer) }
    }

    /// What loaded plugins' request hooks receive: the request's handle and the attempt's C
    /// context; nil without loaded plugins, or for a request the host did not make (each plugin
    /// then refuses it with its error). The handle is not retained: it is the request's state,
    /// which `request` holds while the phase runs (a strong reference bound per hook call was a
    /// retain and a release around every loaded hook).
    func directRequest(_ request: InterceptorRequest, _ contexts: AttemptContexts) -> (
        handle: Unmanaged<RequestHandle>, context: UnsafePointer<ph_context>
    )? {
        guard let context = cContext(contexts), let handle = try? LoadedPlugin.requestHandle(request) else { return nil }
        return (.passUnretained(handle), context)
    }

    /// Whether `transport` is one of this package's, which read only a request's parts (see
    /// ``RequestState/sending(deferring:)``): its type compared, not cast (`is` on an existential
    /// is a call into the runtime's general cast, on every attempt). Both types are final.
    static func readsParts(_ transport: any Transport) -> Bool {
        let type = Swift.type(of: transport)
        return type == CurlTransport.self || type == StubTransport.self
    }

    /// What `process` asked for: a retry after `delay`, optionally refreshing a credential first.
    typealias RetryRequest = (delay: Double, refresh: CredentialRefresh?)

    /// Runs every attempt of `plan` and returns the validated response or the error.
    func run(
        _ plan: CallPlan, requestID: UInt64, progress: (@Sendable (TransferProgress) -> Void)?,
        cancellation: CancellationSignal, registry: RequestRegistry? = nil, background: Bool = false
    ) async -> Result<Response, NetworkError> {
        var attempt = 1
        // A body stream is read once: the call's sends share what the first read of it kept.
        let bodySpool = plan.request.httpBodyStream == nil ? nil : BodySpool()
        // The plugins that asked for a background exchange in this exchange, whatever the attempt.
        var scheduledBackground: Set<String> = []
        while true {
            if cancellation.isCancelled || Task.isCancelled { return .failure(.cancelled) }
            let contexts = makeContexts(target: plan.target, requestID: requestID, attempt: attempt)
            let state = RequestState(plan.request, fieldsMemo: originalFields)
            state.isBackground = background
            let view = InterceptorRequest(backend: state)
            let started = DispatchTime.now().uptimeNanoseconds

            // Who answered in `prepare`, and the answer: taken apart from the phase's result where
            // it is (a copy of the result, answer and all, went through the runtime's generic
            // value witnesses, and its destruction too).
            let answeredBy: Int?
            let answer: SyntheticResponse?
            let prepared = prepare(view, state: state, contexts: contexts)
            switch consume prepared {
            case .failure(let error): return .failure(error)
            case .success(.none): (answeredBy, answer) = (nil, nil)
            case .success(.some(let short)): (answeredBy, answer) = (short.index, short.response)
            }
            if !state.backgroundRequests.isEmpty {
                // Once the phase is over and none of it failed; once per plugin and exchange (a
                // retry's attempt that asks again sends nothing more).
                let fresh = state.backgroundRequests.filter { scheduledBackground.insert($0.plugin).inserted }
                startBackgroundExchanges(fresh, of: plan, registry: registry, cancellation: cancellation)
            }
            let sendingThrough = answeredBy ?? interceptors.count
            if let error = willSend(view, contexts: contexts, through: sendingThrough) { return .failure(error) }

            // The package's own transports read the parts of a changed request: its URLRequest is
            // made only if someone reads it.
            let (finalRequest, deferred) = state.sending(deferring: Self.readsParts(plan.transport))
            var sending = TransportRequest(
                urlRequest: finalRequest, body: plan.body, download: plan.download, progress: progress,
                cancellation: cancellation, redirects: plan.redirects, limits: plan.limits, deadline: plan.deadline)
            sending.deferred = deferred
            sending.bodySpool = bodySpool
            if answeredBy == nil {
                let spent = Double(DispatchTime.now().uptimeNanoseconds &- started) / 1e9
                switch Self.timeoutBudget(timeout: sending.timeoutInterval, spentInHooks: spent) {
                case .unchanged:
                    break
                case .remaining(let seconds):
                    sending.timeoutInterval = seconds
                case .exhausted(var failure):
                    _ = didReceive(.failure(failure), contexts: contexts, from: sendingThrough - 1)
                    // Its method, as a transport's failure carries it: a retry policy judges by it.
                    failure.attemptMethod = state.method
                    return .failure(.underlying(failure, nil))
                }
            }

            var outcome: Outcome
            var sentRequest = sending
            if let answer {
                outcome = .response(ResponseState(answer, url: sending.url))
            } else {
                (outcome, sentRequest) = await sendAuthenticating(sending, transport: plan.transport, contexts: contexts)
            }

            // The response hooks may read the request as sent (ABI 1.3 `result_request_headers`),
            // to the last hop: a redirect to another origin left its credentials behind.
            if let response = outcome.response {
                response.sentRequest = state
                if response.isRedirected, let from = sending.url, let to = response.finalURL, !SessionRouter.sameOrigin(from, to) {
                    response.credentialsLeftBehind = true
                }
            }
            let innermost = answeredBy ?? interceptors.count - 1
            if let error = didReceive(outcome.view, contexts: contexts, from: innermost) { return .failure(error) }
            let retry: RetryRequest?
            switch process(&outcome, contexts: contexts, from: innermost, url: sending.url, request: state) {
            case .failure(let error): return .failure(error)
            case .success(let request): retry = request
            }

            if let retry, Self.shouldRetry(attempt: attempt, maxRetries: maxRetries, cancelled: cancellation.isCancelled || Task.isCancelled) {
                if let error = await prepareRetry(retry, cancellation: cancellation) { return .failure(error) }
                attempt += 1
                continue
            }
            // A cancelled request ends cancelled, whatever its `process` hooks made of the
            // cancellation (a cache's stale answer for a failure, say): its caller asked for nothing more.
            if cancellation.isCancelled || Task.isCancelled { return .failure(.cancelled) }
            return Self.finish(outcome, request: sentRequest, method: state.method, validation: plan.validation)
        }
    }

    // MARK: Phases of one attempt

    /// One context per interceptor; loaded plugins share one C view of it. The contexts are
    /// copies of the last target's (``contextTemplates``) with this attempt's number and view.
    func makeContexts(target: TargetInfo, requestID: UInt64, attempt: Int) -> AttemptContexts {
        let (templates, layout) = templates(for: target)
        // Loaded plugins share one C view of the attempt, made before the contexts that carry it.
        let shared = layout.map { CContext(target: $0, requestID: requestID, attempt: attempt) }
        return AttemptContexts(templates: templates, requestID: requestID, attempt: attempt, shared: shared)
    }

    /// The contexts of `target`, one per interceptor, and its C layout when loaded plugins read
    /// one: the last target's again when `target` is equal to it (most requests of an app go to a
    /// few targets), else made and kept in its place. A context's target and services are one
    /// shared storage: made anew for every interceptor and attempt, with the target copied into
    /// each, they cost more than the hooks of a plugin that does nothing.
    private func templates(for target: TargetInfo) -> (contexts: [InterceptorContext], layout: CTargetLayout?) {
        guard !bound.isEmpty else { return ([], nil) }
        // Compared where it is kept (no copy of the kept target made to compare it), byte for byte:
        // the contexts and the C layout carry the kept target's bytes.
        let kept = contextTemplates.withLock { last -> (contexts: [InterceptorContext], layout: CTargetLayout?)? in
            guard last.made, TargetInfo.sameBytes(last.target, target) else { return nil }
            return (last.contexts, last.layout)
        }
        if let kept { return kept }
        // An interceptor the chain never calls (no active hook) gets no context of its own, nor
        // does a loaded plugin: it reads only the C view (its services are its own host table).
        var unused: InterceptorContext?
        var loaded: InterceptorContext?
        let made = bound.indices.map { index in
            if runs[index].isEmpty, let unused { return unused }
            if self.loaded[index] != nil, let loaded { return loaded }
            let context = InterceptorContext(target: target, requestID: 0, attempt: 1, services: bound[index])
            if runs[index].isEmpty {
                unused = context
            } else if self.loaded[index] != nil {
                loaded = context
            }
            return context
        }
        let layout = hasLoadedPlugins ? CTargetLayout(target) : nil
        contextTemplates.withLock { $0 = (true, target, made, layout) }
        return (made, layout)
    }

    /// `prepare`, first to last, stopping at a short-circuit (returned with its position).
    /// `state` (the request's, when the caller has it) learns whose `prepare` runs, for background exchanges.
    func prepare(
        _ request: InterceptorRequest, state: RequestState? = nil, contexts: AttemptContexts
    ) -> Result<(index: Int, response: SyntheticResponse)?, NetworkError> {
        state?.chainNames = names
        defer { state?.preparingIndex = -1 }
        let direct = directRequest(request, contexts)
        for index in interceptors.indices where runs[index].contains(.prepare) {
            state?.preparingIndex = index
            do {
                if let plugin = loaded[index], let direct {
                    if let response = try Self.call(plugin, direct.handle, { try $0.prepare($1, direct.context) }) {
                        return .success((index, response))
                    }
                } else if case .respond(let response) = try called[index]._withUnsafeGuaranteedRef({
                    try $0.interceptor.prepare(request, context: contexts[index])
                }) {
                    // What a loaded plugin's answer must be (the host refuses it there).
                    try HeaderValidation.check(response)
                    return .success((index, response))
                }
            } catch {
                return .failure(.interceptor(name: names[index], hook: .prepare, message: Self.message(error)))
            }
        }
        return .success(nil)
    }

    /// Starts the background exchanges `prepare` asked for (ABI 1.2): the plan's request once
    /// more through this chain, with the asking plugin's target option set, unawaited, under a
    /// request ID of its own. They start when the prepare phase is over, concurrently with the
    /// rest of the exchange that asked (usually a short-circuit answered from a cache).
    ///
    /// Each is one of the provider's requests (`registry`), registered before this returns:
    /// counted by `inflightCount`, ended by `cancelAll()`, within a ``RequestLimits/deadline`` of
    /// its own from its start. None goes for a request already cancelled (`cancellation`), nor for
    /// a request with a body stream: the stream is read once, by the exchange that asked.
    func startBackgroundExchanges(
        _ requests: [(plugin: String, option: String)], of plan: CallPlan, registry: RequestRegistry?, cancellation: CancellationSignal
    ) {
        // Read before the check: a `cancelAll()` after it cancels the reservations below.
        let epoch = registry?.cancellations.value
        guard plan.request.httpBodyStream == nil, !cancellation.isCancelled else { return }
        for (plugin, option) in requests {
            var copy = plan
            copy.target.pluginOptions[plugin] = option
            copy.download = nil
            copy.deadline = ExchangeDeadline.starting(plan.limits.deadline)
            let chain = self
            let id = Self.backgroundRequestIDs.withLock {
                $0 += 1
                return $0
            }
            let work: RequestRegistry.Work = { [copy] signal, _ in
                // The deadline ends every stage (a plugin's retry delay too), not only the sends.
                let timer = copy.deadline.map { signal.cancel(at: $0.instant) }
                defer { timer?.cancel() }
                return await chain.run(copy, requestID: id, progress: nil, cancellation: signal, background: true)
            }
            let reservation = registry?.reserve(epoch: epoch)
            Task.detached {
                if let registry, let reservation {
                    _ = await registry.run(reservation, work: work)
                } else {
                    _ = await work(CancellationSignal(), nil)
                }
            }
        }
    }

    /// Request IDs of background exchanges: from 2^62 up, apart from the provider's (which count from 1).
    static let backgroundRequestIDs = Locked(UInt64(1) << 62)

    /// `willSend` for the first `count` interceptors. When one throws, those before it still see
    /// the end of the attempt (`didReceive` with an `interceptorFailed` failure).
    func willSend(_ request: InterceptorRequest, contexts: AttemptContexts, through count: Int) -> NetworkError? {
        let direct = directRequest(request, contexts)
        for index in 0..<count where runs[index].contains(.willSend) {
            do {
                if let plugin = loaded[index], let direct {
                    try Self.call(plugin, direct.handle) { try $0.willSend($1, direct.context) }
                } else {
                    try called[index]._withUnsafeGuaranteedRef { try $0.interceptor.willSend(request, context: contexts[index]) }
                }
            } catch {
                let failure = NetworkError.interceptor(name: names[index], hook: .willSend, message: Self.message(error))
                _ = didReceive(
                    .failure(TransportFailure(kind: .interceptorFailed, message: failure.description)), contexts: contexts, from: index - 1)
                return failure
            }
        }
        return nil
    }

    /// What is left of a request's timeout after its hooks ran.
    enum TimeoutBudget: Equatable {
        /// No timeout, or the hooks took no time worth counting (≤ 1 ms).
        case unchanged
        /// The transport gets this many seconds.
        case remaining(Double)
        /// The hooks used it all.
        case exhausted(TransportFailure)
    }

    /// The request's timeout covers the time its hooks took: what is left goes to the transport.
    static func timeoutBudget(timeout: Double, spentInHooks spent: Double) -> TimeoutBudget {
        guard spent > 0.001, timeout > 0 else { return .unchanged }
        let remaining = timeout - spent
        guard remaining > 0 else {
            return .exhausted(
                TransportFailure(
                    kind: .timedOut,
                    message: String(format: "the request's timeout (%.1f s) ran out in interceptor hooks (%.1f s)", timeout, spent)))
        }
        return .remaining(remaining)
    }

    /// `didReceive` from `innermost` outwards; every one runs even if one throws, and the first
    /// error is returned.
    func didReceive(_ result: InterceptorResult, contexts: AttemptContexts, from innermost: Int) -> NetworkError? {
        var firstError: NetworkError?
        let context = cContext(contexts)
        var handle = KeptHandle()
        defer { handle.end() }
        for index in stride(from: innermost, through: 0, by: -1) where runs[index].contains(.didReceive) {
            do {
                if let plugin = loaded[index], let context {
                    let shared = handle.get { LoadedPlugin.resultHandle(result) }
                    try Self.call(plugin, shared) { try $0.didReceive($1, context) }
                } else {
                    try called[index]._withUnsafeGuaranteedRef { try $0.interceptor.didReceive(result, context: contexts[index]) }
                }
            } catch {
                firstError = firstError ?? .interceptor(name: names[index], hook: .didReceive, message: Self.message(error))
            }
        }
        return firstError
    }

    /// `process` from `innermost` outwards: replacements apply to `outcome`; a retry request
    /// stops the walk and is returned. A replacement answers `request` (the request phase's
    /// state), a replaced failure's too: the hooks outside it read that request's fields.
    func process(
        _ outcome: inout Outcome, contexts: AttemptContexts, from innermost: Int, url: URL?, request: RequestState? = nil
    ) -> Result<RetryRequest?, NetworkError> {
        let context = cContext(contexts)
        // The views of the outcome, made when first needed and again only after a replacement.
        var view: InterceptorResult?
        var handle = KeptHandle()
        defer { handle.end() }
        for index in stride(from: innermost, through: 0, by: -1) where runs[index].contains(.process) {
            let action: ProcessAction
            do {
                if let plugin = loaded[index], let context {
                    let shared = handle.get { outcome.handle }
                    action = try Self.call(plugin, shared) { try $0.process($1, context) }
                } else {
                    let shared = view ?? outcome.view
                    view = shared
                    action = try called[index]._withUnsafeGuaranteedRef { try $0.interceptor.process(shared, context: contexts[index]) }
                    switch action {
                    case .replace(let response): try HeaderValidation.check(response)
                    case .retry(let delay, _): try ProcessAction.checkRetryDelay(delay)
                    case .proceed: break
                    }
                }
            } catch {
                return .failure(.interceptor(name: names[index], hook: .process, message: Self.message(error)))
            }
            switch action {
            case .proceed:
                continue
            case .replace(let response):
                // A replacement answers the same request (a failure's too: it had no response to
                // carry the request, and the hooks outside read no fields where the request had some).
                let replaced = outcome.response
                outcome = .response(ResponseState(response, url: url))
                outcome.response?.sentRequest = replaced?.sentRequest ?? request
                outcome.response?.credentialsLeftBehind = replaced?.credentialsLeftBehind ?? false
                outcome.response?.challengeAnswer = replaced?.challengeAnswer
                outcome.response?.jarCookie = replaced?.jarCookie
                view = nil
                handle.end()
            case .retry(let delay, let refresh):
                return .success((delay, refresh))
            }
        }
        return .success(nil)
    }

    /// Calls a loaded plugin's hook on `handle`, both borrowed for the call: the chain holds the
    /// plugin (``interceptors``) and the handle (the request's state, or the phase's
    /// ``KeptHandle``), so no reference is counted per hook call.
    @inline(__always)
    static func call<Handle: AnyObject, R>(
        _ plugin: Unmanaged<LoadedPlugin>, _ handle: Unmanaged<Handle>, _ body: (LoadedPlugin, Handle) throws -> R
    ) rethrows -> R {
        try handle._withUnsafeGuaranteedRef { handle in try plugin._withUnsafeGuaranteedRef { try body($0, handle) } }
    }

    /// Whether a retry `process` asked for is made: within `maxRetries`, and not once cancelled.
    static func shouldRetry(attempt: Int, maxRetries: Int, cancelled: Bool) -> Bool {
        attempt <= maxRetries && !cancelled
    }

    /// Refreshes the credential a retry asked for and waits its delay; the error that stops it, if any.
    func prepareRetry(_ retry: RetryRequest, cancellation: CancellationSignal) async -> NetworkError? {
        if let refresh = retry.refresh {
            do {
                try await services.refresh(key: refresh.key, staleValue: refresh.staleValue, cancellation: cancellation)
            } catch {
                return error
            }
        }
        if retry.delay > 0, await !cancellation.sleep(seconds: retry.delay) { return .cancelled }
        return nil
    }

    /// How many times one attempt answers authentication challenges of one protection space
    /// (the proxy, or an origin) before giving up.
    static let maxAuthenticationRounds = 3

    /// How many answers one attempt sends in all, whatever their spaces (redirects between
    /// origins that each challenge end too).
    static let maxAnswersPerAttempt = 10

    /// Sends a request; answers `401`/`407` challenges with the interceptors' `credential`
    /// hooks (asked in order, the first answer other than `performDefault` wins) and sends
    /// again with the credential: `Digest` (RFC 7616, the strongest algorithm offered) or
    /// `Basic`. A Digest answer refused with `stale=true` is sent once more with the new nonce,
    /// without asking the hooks again. Other schemes deliver the challenge response unanswered.
    /// A challenge of a response the transport got through redirects is the last request's: its
    /// protection space is the last URL's, and the answer goes there (``TransportRequest/redirected(to:method:)``).
    /// The hooks are asked with that space's host, port and scheme: answering only the hosts meant
    /// is theirs to do, as for any challenge (the `credentials` plugin answers listed hosts only).
    func sendAuthenticating(
        _ request: TransportRequest, transport: any Transport,
        contexts: AttemptContexts
    ) async -> (Outcome, TransportRequest) {
        var request = request
        // Per protection space (the proxy's, and each origin's: `scheme://host:port`), the rounds
        // answered so far and whether a `stale` answer went: a proxy answered first leaves the
        // origin's first challenge a first, and so does an origin answered before a redirect.
        var rounds: [String: Int] = [:]
        var staleAnswered: Set<String> = []
        // Answers sent in all, whatever the space: redirects between origins end too.
        var answers = 0
        // Per space, the last Digest answer: a `stale` challenge of the same space, field and realm reuses it.
        var digestAnswers: [String: (field: String, realm: String, user: String, password: String)] = [:]
        // Whether `request` is the last request of a redirected exchange, sent with an answer:
        // its response still answers the app's request through a redirect.
        var afterRedirect = false
        // The last answer to the origin's challenge sent: the responses after it were sent with
        // it. (A proxy's answer goes to the proxy alone.)
        var answered: HTTPHeader?
        while true {
            var received: TransportResponse
            do {
                received = try await transport.send(request)
            } catch {
                return (.failure(error), request)
            }
            // A redirected response's challenge is for the last request the transport sent, to
            // another URL or with another method (a `303`): it is answered there.
            let redirected = received.redirected
            if afterRedirect { received.redirected = true }
            let response = ResponseState(received)
            // The origin's answer, unless a redirect to another origin left it behind.
            if let answered, !received.credentialsLeftBehind { response.challengeAnswer = answered }
            guard !interceptors.isEmpty, let found = Self.challenge(in: response) else { return (.response(response), request) }
            var challenged = request
            if redirected {
                // Where the redirects led, or nothing to answer: another server's challenge is not the first URL's.
                guard let last = received.url else { return (.response(response), request) }
                challenged = request.redirected(to: last, method: received.finalMethod)
                if request.url?.scheme?.lowercased() != last.scheme?.lowercased() {
                    // Another scheme may go through another proxy (the environment names one per
                    // scheme, as both transports read it): the proxy's answer, its rounds and its
                    // Digest answer stay behind, as the transports left them on the redirect.
                    challenged.urlRequest.setValue(nil, forHTTPHeaderField: "Proxy-Authorization")
                    rounds["proxy"] = nil
                    digestAnswers["proxy"] = nil
                    staleAnswered.remove("proxy")
                }
            }
            guard let url = challenged.url, answers < Self.maxAnswersPerAttempt else { return (.response(response), request) }
            let (field, chosen) = (found.field, found.chosen)
            let isProxy = HTTPHeader.namesEqual(field, "Proxy-Authorization")
            let port = url.port ?? URLParts.defaultPort(forScheme: url.scheme)
            let scheme = url.scheme?.lowercased() ?? "http"
            let space = isProxy ? "proxy" : "\(scheme)://\(url.host?.lowercased() ?? ""):\(port)"
            /// Sends `challenged` with `value` in the answer field next.
            func answer(_ value: String) {
                challenged.urlRequest.setValue(value, forHTTPHeaderField: field)
                if !isProxy { answered = HTTPHeader(name: field, value: value) }
                afterRedirect = afterRedirect || redirected
                request = challenged
                answers += 1
            }
            if let digest = chosen.digest, digest.stale, let last = digestAnswers[space], last.field == field, last.realm == digest.realm {
                // The credentials were right and the nonce had expired (RFC 7616 §3.3): once more with
                // the new nonce, without asking the hooks; a second `stale` is the server's loop, delivered.
                guard !staleAnswered.contains(space),
                    let (_, value) = firstDigestAnswer(
                        chosen, user: last.user, password: last.password, request: challenged, tunnel: isProxy ? received.tunnelTarget : nil)
                else { return (.response(response), request) }
                staleAnswered.insert(space)
                answer(value)
                continue
            }
            // Rounds count per request target too: a right answer redirected on the same origin
            // (libcurl keeps `Authorization` there) meets a new challenge for its new target,
            // which is no failed round (a Digest answer covers its own target only).
            // (A Basic answer covers the whole origin: its rounds count per space.)
            let target = isProxy || chosen.digest == nil ? space : space + DigestChallenge.requestURI(url)
            let failed = rounds[target] ?? 0
            guard failed < Self.maxAuthenticationRounds else { return (.response(response), request) }
            let challenge = AuthenticationChallenge(
                host: url.host ?? "", port: port, scheme: scheme, realm: chosen.realm, method: chosen.scheme,
                previousFailureCount: failed, isProxy: isProxy)
            var credential = CredentialAnswer.performDefault
            var answeredBy = ""
            for (index, interceptor) in interceptors.enumerated() where runs[index].contains(.credential) {
                credential = interceptor.credential(for: challenge, context: contexts[index])
                answeredBy = interceptor.name
                if credential != .performDefault { break }
            }
            switch credential {
            case .useCredential(let user, let password) where chosen.digest != nil:
                guard
                    let (digest, value) = firstDigestAnswer(
                        chosen, user: user, password: password, request: challenged, tunnel: isProxy ? received.tunnelTarget : nil)
                else { return (.response(response), request) }
                answer(value)
                digestAnswers[space] = (field, digest.realm, user, password)
            case .useCredential(let user, let password) where HTTPHeader.namesEqual(chosen.scheme, "Basic"):
                answer(chosen.basicAnswer(user: user, password: password))
                digestAnswers[space] = nil
            case .cancel:
                return (
                    .failure(TransportFailure(kind: .cancelled, message: "\(answeredBy) cancelled the authentication challenge")),
                    request
                )
            default:
                return (.response(response), request)
            }
            rounds[target] = failed + 1
        }
    }

    /// The `Authorization` value answering `digest` for `request`, with a fresh `cnonce` and the nonce's next `nc`.
    /// The answer to the strongest of `chosen`'s Digest challenges the request can be answered
    /// for (of the realm the hooks were asked for), and that challenge; nil when none can be.
    /// (A loop: a lazy `compactMap(…).first` would compute the first answer twice, and count
    /// its nonce twice.)
    func firstDigestAnswer(
        _ chosen: ChosenChallenge, user: String, password: String, request: TransportRequest, tunnel: String?
    ) -> (DigestChallenge, String)? {
        for digest in [chosen.digest].compactMap({ $0 }) + chosen.weakerDigests {
            if let value = digestAnswer(digest, user: user, password: password, request: request, tunnel: tunnel) { return (digest, value) }
        }
        return nil
    }

    /// For a proxy's `407` to a tunnel (`tunnel`: the `CONNECT` target, `host:port`), the request
    /// answered is the `CONNECT`: its method and target, no body (RFC 7616 `A2`, RFC 9110 §9.3.6).
    func digestAnswer(_ digest: DigestChallenge, user: String, password: String, request: TransportRequest, tunnel: String? = nil) -> String? {
        guard let url = request.urlRequest.url else { return nil }
        let facts =
            tunnel.map { DigestChallenge.RequestFacts(method: "CONNECT", uri: $0, body: .bytes([])) }
            ?? DigestChallenge.RequestFacts(
                method: request.urlRequest.httpMethod ?? "GET", uri: DigestChallenge.requestURI(url), body: Self.bodySource(of: request))
        return digest.authorization(
            user: user, password: password, request: facts, cnonce: SHA256.hex(RandomBytes.make(16)),
            nonceCount: digestNonces.next(for: digest.nonce))
    }

    /// Where what `request` sends as its body is, for a Digest `auth-int` answer: the bytes in
    /// memory; a file's contents, read again (a file the first send read, and the re-send reads
    /// once more); a body stream's, from the file its first send read it into (``BodySpool``).
    /// Unavailable for a stream no send of the call has read whole. Reading stops when the
    /// request is cancelled or its deadline passes.
    static func bodySource(of request: TransportRequest) -> DigestChallenge.RequestFacts.Body {
        let stopped = {
            request.cancellation?.isCancelled == true || Task.isCancelled
                || request.deadline.map { DispatchTime.now() >= $0.instant } == true
        }
        switch request.body {
        case .file(let file):
            return .reread { algorithm in
                let fd = open(file.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
                guard fd >= 0 else { return nil }
                defer { close(fd) }
                return algorithm.hex(readingFrom: fd, stopped: stopped)
            }
        case .inline, .upload:
            guard let stream = request.urlRequest.httpBodyStream else { return .bytes(request.urlRequest.httpBody.map { [UInt8]($0) } ?? []) }
            guard case .read(let spooled) = request.bodySpool?.state(of: stream) else { return .unavailable }
            // Read where it is, by offset: the file's own descriptor, which transfers share.
            return .reread { algorithm in withExtendedLifetime(spooled) { algorithm.hex(readingFrom: spooled.fd, stopped: stopped) } }
        }
    }

    /// The header field to answer in and the challenge to answer, for a `401` (`WWW-Authenticate`
    /// → `Authorization`) or a `407` (`Proxy-Authenticate` → `Proxy-Authorization`).
    static func challenge(in response: ResponseState) -> (field: String, chosen: ChosenChallenge)? {
        guard let fields = challengeFields(status: response.statusCode) else { return nil }
        var values: [String] = []
        while let value = response.header(named: fields.challenge, index: values.count) { values.append(value) }
        guard let chosen = ChosenChallenge.choose(from: values.joined(separator: ", ")) else { return nil }
        return (fields.answer, chosen)
    }

    /// The field a `401` (`WWW-Authenticate`) or a `407` (`Proxy-Authenticate`) challenges in,
    /// and the field its answer goes in; nil for another status.
    static func challengeFields(status: Int) -> (challenge: String, answer: String)? {
        switch status {
        case 401: ("WWW-Authenticate", "Authorization")
        case 407: ("Proxy-Authenticate", "Proxy-Authorization")
        default: nil
        }
    }

    /// The call's result: `outcome`, answering `request` (the last hop's), for a request the chain
    /// sent with `method` (after its interceptors, before a redirect or an authentication round).
    private static func finish(_ outcome: Outcome, request: TransportRequest, method: String, validation: ValidationType)
        -> Result<Response, NetworkError>
    {
        switch outcome {
        case .failure(var failure):
            if failure.kind == .cancelled { return .failure(.cancelled) }
            failure.attemptMethod = method
            return .failure(.underlying(failure, nil))
        case .response(let state):
            var response = state.makeResponse(request: request)
            response.attemptMethod = method
            guard validation.accepts(state.statusCode) else { return .failure(.statusCode(response)) }
            return .success(response)
        }
    }

    /// The message of an error thrown by a hook.
    static func message(_ error: any Error) -> String {
        if let error = error as? InterceptorError { return error.description }
        return String(describing: error)
    }
}

/// An interceptor behind a class reference: the chain calls it through an unretained reference
/// to the box, whose `let` existential is opened where it is (called through the array, the
/// existential was copied for each hook call: a retain and a release of a boxed plugin, and the
/// value witness calls to copy and destroy it).
final class InterceptorBox: Sendable {
    let interceptor: any Interceptor

    init(_ interceptor: any Interceptor) { self.interceptor = interceptor }
}

/// One attempt's contexts, one per interceptor: the kept templates of its target, each read with
/// the attempt's number and C view. A collection, not an array: a copy of the templates with
/// the attempt's fields set in each was an allocation and a retain per interceptor for every
/// attempt, and loaded plugins never read theirs (they read the C view).
struct AttemptContexts: RandomAccessCollection {
    let templates: [InterceptorContext]
    let requestID: UInt64
    let attempt: Int
    /// The attempt's C view, shared by the chain's loaded plugins; nil without them.
    let shared: CContext?

    var startIndex: Int { 0 }
    var endIndex: Int { templates.count }

    /// The context interceptor `index` sees in this attempt.
    subscript(index: Int) -> InterceptorContext {
        var context = templates[index]
        context.requestID = requestID
        context.attempt = attempt
        context.hostAttachment = shared
        return context
    }
}

/// A result's handle for a phase's loaded plugins: made when the first one is called, held until
/// ``end()``, and lent to each hook call unretained (a strong reference bound per call was a retain
/// and a release around every loaded hook).
struct KeptHandle: ~Copyable {
    private var held: ResultHandle?

    /// The handle, made by `make` when none is held yet.
    @inline(__always)
    mutating func get(_ make: () -> ResultHandle) -> Unmanaged<ResultHandle> {
        if let held { return .passUnretained(held) }
        let made = make()
        held = made
        return .passUnretained(made)
    }

    /// Lets the handle go (a replaced result gets its own).
    mutating func end() { held = nil }
}

/// Hooks as bits, for the chain's per-request checks: the ABI's `PH_HOOK_*` bits, which loaded
/// plugins declare and `PluginExport.hookBits` makes from a set.
struct HookMask: OptionSet, Sendable {
    let rawValue: UInt32

    static let prepare = HookMask(rawValue: PH_HOOK_PREPARE)
    static let willSend = HookMask(rawValue: PH_HOOK_WILL_SEND)
    static let didReceive = HookMask(rawValue: PH_HOOK_DID_RECEIVE)
    static let process = HookMask(rawValue: PH_HOOK_PROCESS)
    static let credential = HookMask(rawValue: PH_HOOK_CREDENTIAL)
    /// The hooks called for every request (`credential` is called on a challenge only).
    static let perRequest: HookMask = [.prepare, .willSend, .didReceive, .process]

    init(rawValue: UInt32) { self.rawValue = rawValue }

    init(_ hooks: Set<InterceptorHook>) { self.init(rawValue: PluginExport.hookBits(hooks)) }
}
