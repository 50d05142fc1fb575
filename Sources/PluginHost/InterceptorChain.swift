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
}

/// Runs requests through an ordered list of interceptors (outermost first).
///
/// Request side: every `prepare` first to last, then every `willSend` first to last.
/// Response side: every `didReceive` last to first, then every `process` last to first.
/// A short-circuit at interceptor k skips the network and the interceptors inside k;
/// `willSend` runs for those outside k, and the response side runs from k outwards.
struct InterceptorChain: Sendable {
    let interceptors: [any Interceptor]
    let bound: [BoundServices]
    let services: PluginServices
    /// How many times `process` may ask to retry one request.
    let maxRetries: Int

    /// Whether any interceptor is a loaded plugin (which reads a C view of the context).
    let hasLoadedPlugins: Bool

    init(interceptors: [any Interceptor], services: PluginServices, maxRetries: Int) {
        self.interceptors = interceptors
        // Loaded plugins read a C view of the context, built once per attempt (a wrapped one builds its own).
        self.hasLoadedPlugins = interceptors.contains { $0 is LoadedPlugin }
        self.bound = interceptors.map { BoundServices(services: services, plugin: $0.name) }
        self.services = services
        self.maxRetries = maxRetries
    }

    private enum Outcome {
        case response(ResponseState)
        case failure(TransportFailure)

        var view: InterceptorResult {
            switch self {
            case .response(let state): return .response(InterceptorResponse(backend: state))
            case .failure(let failure): return .failure(failure)
            }
        }
    }

    /// Runs every attempt of `plan` and returns the validated response or the error.
    func run(
        _ plan: CallPlan, requestID: UInt64, progress: (@Sendable (TransferProgress) -> Void)?,
        cancellation: CancellationSignal
    ) async -> Result<Response, NetworkError> {
        var attempt = 1
        while true {
            if cancellation.isCancelled || Task.isCancelled { return .failure(.cancelled) }
            var contexts = bound.map {
                InterceptorContext(target: plan.target, requestID: requestID, attempt: attempt, services: $0)
            }
            if hasLoadedPlugins, let first = contexts.first {
                let shared = CContext(first)
                for index in contexts.indices { contexts[index].hostAttachment = shared }
            }
            let state = RequestState(plan.request)
            let view = InterceptorRequest(backend: state)
            let started = DispatchTime.now().uptimeNanoseconds

            // Request side: prepare, first to last; stop at a short-circuit.
            var shortCircuit: (index: Int, response: SyntheticResponse)?
            for (index, interceptor) in interceptors.enumerated() {
                do {
                    if case .respond(let response) = try interceptor.prepare(view, context: contexts[index]) {
                        shortCircuit = (index, response)
                        break
                    }
                } catch {
                    return .failure(.interceptor(name: interceptor.name, hook: .prepare, message: Self.message(error)))
                }
            }

            // willSend for every interceptor outside the short-circuit (all of them otherwise).
            let sendingThrough = shortCircuit?.index ?? interceptors.count
            for index in 0..<sendingThrough {
                do {
                    try interceptors[index].willSend(view, context: contexts[index])
                } catch {
                    let failure = NetworkError.interceptor(name: interceptors[index].name, hook: .willSend, message: Self.message(error))
                    // Those that saw willSend still see the end of the attempt.
                    let result = InterceptorResult.failure(TransportFailure(kind: .interceptorFailed, message: failure.description))
                    for outer in stride(from: index - 1, through: 0, by: -1) {
                        try? interceptors[outer].didReceive(result, context: contexts[outer])
                    }
                    return .failure(failure)
                }
            }

            // The network, or the short-circuit's answer. The request's timeout covers the time
            // its hooks took: what is left of it goes to the transport.
            var finalRequest = state.makeURLRequest()
            let spent = Double(DispatchTime.now().uptimeNanoseconds &- started) / 1e9
            if shortCircuit == nil, spent > 0.001, finalRequest.timeoutInterval > 0 {
                let remaining = finalRequest.timeoutInterval - spent
                guard remaining > 0 else {
                    let failure = TransportFailure(
                        kind: .timedOut,
                        message: String(
                            format: "the request's timeout (%.1f s) ran out in interceptor hooks (%.1f s)", finalRequest.timeoutInterval, spent))
                    for index in stride(from: sendingThrough - 1, through: 0, by: -1) {
                        try? interceptors[index].didReceive(.failure(failure), context: contexts[index])
                    }
                    return .failure(.underlying(failure, nil))
                }
                finalRequest.timeoutInterval = remaining
            }
            var outcome: Outcome
            var sentRequest = finalRequest
            if let shortCircuit {
                outcome = .response(ResponseState(shortCircuit.response, url: finalRequest.url))
            } else {
                (outcome, sentRequest) = await sendAuthenticating(
                    TransportRequest(
                        urlRequest: finalRequest, body: plan.body, download: plan.download, progress: progress,
                        cancellation: cancellation, redirects: plan.redirects),
                    transport: plan.transport, contexts: contexts)
            }

            // Response side: didReceive innermost to outermost; every one runs even if one throws.
            let innermost = (shortCircuit?.index ?? interceptors.count - 1)
            var responseError: NetworkError?
            let received = outcome.view
            for index in stride(from: innermost, through: 0, by: -1) {
                do {
                    try interceptors[index].didReceive(received, context: contexts[index])
                } catch {
                    responseError =
                        responseError
                        ?? .interceptor(name: interceptors[index].name, hook: .didReceive, message: Self.message(error))
                }
            }
            if let responseError { return .failure(responseError) }

            // process innermost to outermost; a retry request stops the walk.
            var retry: (delay: Double, refresh: CredentialRefresh?)?
            for index in stride(from: innermost, through: 0, by: -1) {
                let action: ProcessAction
                do {
                    action = try interceptors[index].process(outcome.view, context: contexts[index])
                } catch {
                    return .failure(.interceptor(name: interceptors[index].name, hook: .process, message: Self.message(error)))
                }
                switch action {
                case .proceed:
                    continue
                case .replace(let response):
                    outcome = .response(ResponseState(response, url: finalRequest.url))
                case .retry(let delay, let refresh):
                    retry = (delay, refresh)
                }
                if retry != nil { break }
            }

            if let retry, attempt <= maxRetries, !cancellation.isCancelled, !Task.isCancelled {
                if let refresh = retry.refresh {
                    do {
                        try await services.refresh(key: refresh.key, staleValue: refresh.staleValue)
                    } catch {
                        return .failure(error)
                    }
                }
                if retry.delay > 0, await !cancellation.sleep(seconds: retry.delay) {
                    return .failure(.cancelled)
                }
                attempt += 1
                continue
            }
            return Self.finish(outcome, request: sentRequest, validation: plan.validation)
        }
    }

    /// How many times one attempt answers authentication challenges before giving up.
    static let maxAuthenticationRounds = 3

    /// Sends a request; answers `401`/`407` challenges with the interceptors' `credential`
    /// hooks (asked in order, the first answer other than `performDefault` wins) and sends
    /// again with the credential. Basic is answered; other schemes deliver the challenge
    /// response unanswered.
    private func sendAuthenticating(
        _ request: TransportRequest, transport: any Transport,
        contexts: [InterceptorContext]
    ) async -> (Outcome, URLRequest) {
        var request = request
        var failures = 0
        while true {
            let outcome: Outcome
            do {
                outcome = .response(ResponseState(try await transport.send(request)))
            } catch {
                return (.failure(error), request.urlRequest)
            }
            guard case .response(let response) = outcome, !interceptors.isEmpty, failures < Self.maxAuthenticationRounds,
                let url = request.urlRequest.url,
                let challenge = Self.challenge(in: response, for: url, previousFailureCount: failures)
            else { return (outcome, request.urlRequest) }
            var answer = CredentialAnswer.performDefault
            var answeredBy = ""
            for (index, interceptor) in interceptors.enumerated() {
                answer = interceptor.credential(for: challenge, context: contexts[index])
                answeredBy = interceptor.name
                if answer != .performDefault { break }
            }
            switch answer {
            case .useCredential(let user, let password) where HTTPHeader.namesEqual(challenge.method, "Basic"):
                let field = response.statusCode == 407 ? "Proxy-Authorization" : "Authorization"
                let token = Data("\(user):\(password)".utf8).base64EncodedString()
                request.urlRequest.setValue("Basic \(token)", forHTTPHeaderField: field)
                failures += 1
            case .cancel:
                return (
                    .failure(TransportFailure(kind: .cancelled, message: "\(answeredBy) cancelled the authentication challenge")),
                    request.urlRequest
                )
            default:
                return (outcome, request.urlRequest)
            }
        }
    }

    /// The challenge a `401` (`WWW-Authenticate`) or `407` (`Proxy-Authenticate`) response makes, if any.
    static func challenge(in response: ResponseState, for url: URL, previousFailureCount: Int) -> AuthenticationChallenge? {
        let field: String
        switch response.statusCode {
        case 401: field = "WWW-Authenticate"
        case 407: field = "Proxy-Authenticate"
        default: return nil
        }
        guard let header = response.header(named: field, index: 0), !header.isEmpty else { return nil }
        let scheme = String(header.prefix { !$0.isWhitespace && $0 != "," })
        var realm: String?
        if let range = header.range(of: "realm=\"") {
            realm = String(header[range.upperBound...].prefix { $0 != "\"" })
        }
        let secure = url.scheme?.lowercased() == "https"
        return AuthenticationChallenge(
            host: url.host ?? "", port: url.port ?? (secure ? 443 : 80),
            scheme: url.scheme?.lowercased() ?? "http", realm: realm, method: scheme,
            previousFailureCount: previousFailureCount)
    }

    private static func finish(_ outcome: Outcome, request: URLRequest, validation: ValidationType) -> Result<Response, NetworkError> {
        switch outcome {
        case .failure(let failure):
            return .failure(failure.kind == .cancelled ? .cancelled : .underlying(failure, nil))
        case .response(let state):
            let response = Response(
                statusCode: state.statusCode, data: state.data, request: request,
                response: state.makeHTTPURLResponse(fallbackURL: request.url), fileURL: state.fileURL,
                httpVersion: state.httpVersion)
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
