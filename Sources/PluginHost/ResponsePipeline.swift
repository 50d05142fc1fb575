import Dispatch
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A lazy, immutable description of a request and the steps applied to its result.
///
/// Building a pipeline sends nothing; every consumption (``value``, ``result``,
/// ``start(on:progress:completion:)``, ``events()``) sends the request once and runs the
/// steps in order. Steps return new pipelines, so one pipeline can be consumed or
/// extended many times.
///
/// ```swift
/// let user = try await provider.request(.user(id: 1))
///     .filterSuccessfulStatusCodes()
///     .map(User.self)
///     .value
/// ```
public struct ResponsePipeline<Value: Sendable>: Sendable {
    /// Receives transfer progress.
    public typealias ProgressHandler = @Sendable (TransferProgress) -> Void

    /// The target's method. ``retry(_:)`` decides on the method each attempt sent instead, when it
    /// knows it: for a response a provider's chain made, the method after the endpoint closure, the
    /// request closure and the interceptors (a target's `GET` an endpoint closure made a `POST` is
    /// not retried), and as much for a transport failure the chain reported; this one otherwise
    /// (a pipeline made from a closure, a failure no chain reported).
    public let method: HTTPMethod?
    /// Where ``start(on:progress:completion:)`` calls back when no queue is given.
    public let callbackQueue: DispatchQueue?
    /// The most seconds one consumption may take, every step and retry included
    /// (``RequestLimits/deadline``); nil: none.
    public let deadline: TimeInterval?
    let body: @Sendable (ProgressHandler?) async throws(NetworkError) -> Value
    /// The provider's registry, for a pipeline a provider built: its ``Provider/cancelAll()``
    /// ends a retry's backoff.
    let registry: RequestRegistry?

    /// Creates a pipeline from a closure that produces the value.
    public init(
        method: HTTPMethod? = nil, callbackQueue: DispatchQueue? = nil, deadline: TimeInterval? = nil,
        _ body: @escaping @Sendable (ProgressHandler?) async throws(NetworkError) -> Value
    ) {
        self.init(method: method, callbackQueue: callbackQueue, deadline: deadline, registry: nil, body)
    }

    init(
        method: HTTPMethod?, callbackQueue: DispatchQueue?, deadline: TimeInterval?, registry: RequestRegistry?,
        _ body: @escaping @Sendable (ProgressHandler?) async throws(NetworkError) -> Value
    ) {
        self.method = method
        self.callbackQueue = callbackQueue
        self.deadline = deadline
        self.registry = registry
        self.body = body
    }

    /// A pipeline with the same method, callback queue, deadline and registry, and a new body.
    func derived<T: Sendable>(_ body: @escaping @Sendable (ProgressHandler?) async throws(NetworkError) -> T) -> ResponsePipeline<T> {
        ResponsePipeline<T>(method: method, callbackQueue: callbackQueue, deadline: deadline, registry: registry, body)
    }

    /// One consumption: the body, within the deadline when there is one. When the deadline
    /// passes, the work in flight is cancelled and the result is a ``TransportFailureKind/timedOut``
    /// failure (the transport, told the same deadline, usually reports it first).
    ///
    /// The body runs in a task of its own that the deadline does not wait for: a stage that does
    /// not stop when cancelled (a request closure waiting on a Dispatch queue) keeps its own task,
    /// not the caller, past the deadline; what it reports after is dropped.
    func execute(_ progress: ProgressHandler?) async throws(NetworkError) -> Value {
        // Within another consumption (a request closure that makes a request of its own, say),
        // the earlier of the two deadlines holds (`ExchangeDeadline.current`), and this one's
        // own still holds if it outlives the other (started in a `Task {}`).
        guard case (let instant, let seconds)? = ExchangeDeadline.starting(deadline) else {
            return try await body(progress)
        }
        let body = self.body
        // A caller cancelled already starts nothing.
        if Task.isCancelled { throw .cancelled }
        // Closed when this consumption returns: a stage still running reports to no one.
        let gate = progress.map(ProgressGate.init)
        let reports = gate?.handler
        defer { gate?.close() }
        // The first of the body's outcome, the deadline (nil) and the caller's cancellation (nil)
        // resumes the caller. The deadline's timer is a task, as the body is: when the machine is
        // busy both wait their turn in the same pool, and an answer that came before the deadline
        // is not overtaken by a timer that fired while it waited.
        let first = Once<Result<Value, NetworkError>?>()
        // The deadline counts for the work until it ends (not for a task started within it that
        // outlives it); ended before the caller is resumed with its outcome.
        let binding = ExchangeDeadline.Binding((instant, seconds), parent: ExchangeDeadline.binding)
        let work = ExchangeDeadline.$binding.withValue(binding) {
            Task {
                let outcome: Result<Value, NetworkError>
                do throws(NetworkError) {
                    outcome = .success(try await body(reports))
                } catch {
                    outcome = .failure(error)
                }
                binding.life.end()
                first.resume(outcome)
            }
        }
        let timer = Task {
            guard (try? await Task.sleep(nanoseconds: seconds.saturatingNanoseconds)) != nil else { return }
            first.resume(nil)
        }
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { first.set($0) }
        } onCancel: {
            first.resume(nil)
            work.cancel()
        }
        timer.cancel()
        if outcome == nil { work.cancel() }
        // Cancelled by the caller (not by the deadline): cancelled, as without a deadline.
        if Task.isCancelled { throw .cancelled }
        guard let outcome else { throw .underlying(LimitFailure.deadline(seconds), nil) }
        return try outcome.get()
    }

    /// Runs the pipeline, reporting progress to `progress`: never after this returns, whatever
    /// the transport does (a report it makes later is dropped).
    public func run(progress: ProgressHandler? = nil) async throws(NetworkError) -> Value {
        guard let progress else { return try await execute(nil) }
        let gate = ProgressGate(progress)
        defer { gate.close() }
        return try await execute(gate.handler)
    }

    /// Sends the request, runs the steps and returns the value; throws ``NetworkError``.
    public var value: Value {
        get async throws(NetworkError) { try await execute(nil) }
    }

    /// Sends the request, runs the steps and returns the outcome.
    public var result: Result<Value, NetworkError> {
        get async {
            do throws(NetworkError) {
                return .success(try await execute(nil))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Sends the request and calls `completion` once on `queue` (default: the provider's
    /// callback queue for pipelines built by a provider, else a global queue).
    ///
    /// `progress` and `completion` run one at a time, in the order the transport reported them,
    /// on a concurrent `queue` too: `completion` comes after the last progress. (A body sent again,
    /// after a `307` or on a retry, reports its upload from 0 again.)
    ///
    /// Cancelling the returned token cancels the request; `completion` then gets
    /// ``NetworkError/cancelled``.
    @discardableResult
    public func start(
        on queue: DispatchQueue? = nil, progress: ProgressHandler? = nil,
        completion: @escaping @Sendable (Result<Value, NetworkError>) -> Void
    ) -> any Cancellable {
        // A serial queue of its own, targeting the one given: a concurrent queue (the global
        // one by default) would run two callbacks at once, or the completion before progress.
        let queue = DispatchQueue(label: "pluginhost.callbacks", target: queue ?? callbackQueue ?? DispatchQueue.global())
        var progressOnQueue: ProgressHandler?
        // Set on the queue with the completion (a report that reaches the queue after it, a
        // shared exchange's racing the caller's leaving, is dropped), and by the token: a
        // cancellation that comes before the completion ran on the queue turns it into
        // `.cancelled`, as the token promises, though the request had ended.
        let state = Locked((delivered: false, cancelled: false))
        if let progress {
            progressOnQueue = { value in
                queue.async { if state.withLock({ !$0.delivered && !$0.cancelled }) { progress(value) } }
            }
        }
        let onQueue = progressOnQueue
        let task = Task {
            let result = await asOwnCaller { () async throws(NetworkError) in try await execute(onQueue) }
            queue.async {
                let cancelled = state.withLock { state -> Bool in
                    state.delivered = true
                    return state.cancelled
                }
                completion(cancelled ? .failure(.cancelled) : result)
            }
        }
        return CancellableToken {
            state.withLock { state in if !state.delivered { state.cancelled = true } }
            task.cancel()
        }
    }

    /// `consume`'s outcome, run as a caller of its own: a consumption started (``start(on:progress:completion:)``,
    /// ``events()``) from within another, in a task that inherits task-locals, does not take
    /// that one's deadline (it ran out when the request that started it ended), its pinned chain
    /// or its cancellation epoch.
    private func asOwnCaller(_ consume: () async throws(NetworkError) -> Value) async -> Result<Value, NetworkError> {
        await ConsumptionScope.leaving {
            do throws(NetworkError) {
                return .success(try await consume())
            } catch {
                return .failure(error)
            }
        }
    }

    /// Progress events followed by one ``PipelineEvent/completed(_:)`` with the value.
    ///
    /// The stream throws ``NetworkError`` on failure. Stopping the iteration cancels the request.
    public func events() -> AsyncThrowingStream<PipelineEvent<Value>, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                switch await asOwnCaller({ () async throws(NetworkError) in try await execute { continuation.yield(.progress($0)) } }) {
                case .success(let value):
                    continuation.yield(.completed(value))
                    continuation.finish()
                case .failure(let error):
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: General steps

    /// Transforms the value.
    public func map<T: Sendable>(_ transform: @escaping @Sendable (Value) -> T) -> ResponsePipeline<T> {
        derived { progress async throws(NetworkError) in transform(try await body(progress)) }
    }

    /// Transforms the value with a step that may throw; a thrown ``NetworkError`` passes
    /// through, any other error becomes ``NetworkError/custom(_:)``.
    public func tryMap<T: Sendable>(_ transform: @escaping @Sendable (Value) throws -> T) -> ResponsePipeline<T> {
        derived { progress async throws(NetworkError) in
            let value = try await body(progress)
            do {
                return try transform(value)
            } catch let error as NetworkError {
                throw error
            } catch {
                throw .custom(error)
            }
        }
    }

    /// Keeps values for which `isIncluded` is true; others fail with ``NetworkError/filtered(_:)``,
    /// which names a rejected number or Boolean (`7`) and only the type of any other value (`a
    /// value of type Session`): a value's description may hold a token, and errors are logged.
    public func filter(_ isIncluded: @escaping @Sendable (Value) -> Bool) -> ResponsePipeline<Value> {
        derived { progress async throws(NetworkError) in
            let value = try await body(progress)
            guard isIncluded(value) else { throw .filtered(Self.shownInErrors(value)) }
            return value
        }
    }

    /// A rejected value as ``NetworkError/filtered(_:)`` names it: a number or a Boolean as it
    /// is, anything else by its type.
    static func shownInErrors(_ value: Value) -> String {
        switch value {
        case let number as any BinaryInteger: return "\(number)"
        case let number as any BinaryFloatingPoint: return "\(number)"
        case let flag as Bool: return "\(flag)"
        default: return "a value of type \(type(of: value))"
        }
    }

    /// Sends the request again, per `policy`, when it fails with a retryable error. Under a
    /// ``RequestLimits/deadline``, not when the wait before it would end at or past the deadline:
    /// the failure is the result, at once.
    public func retry(_ policy: RetryPolicy = .default) -> ResponsePipeline<Value> {
        retrying(policy) { _ in nil as RetryCause? }
    }

    /// The retry loop; `reasonForValue` can ask to retry a successful value (e.g. a 503 response).
    /// Every attempt runs on the chain the first one used (a provider's reload meanwhile does not
    /// change it: ``ChainPin``).
    func retrying(_ policy: RetryPolicy, reasonForValue: @escaping @Sendable (Value) -> RetryCause?) -> ResponsePipeline<Value> {
        let attempts = retryLoop(policy, reasonForValue: reasonForValue)
        return derived { progress async throws(NetworkError) in
            // This consumption's pin (taking an enclosing one's chains), let go when it returns.
            let pin = ChainPin(parent: ChainPin.current)
            defer { pin.end() }
            let outcome: Result<Value, NetworkError> = await ChainPin.$current.withValue(pin) {
                do throws(NetworkError) {
                    return .success(try await attempts(progress))
                } catch {
                    return .failure(error)
                }
            }
            return try outcome.get()
        }
    }

    private func retryLoop(
        _ policy: RetryPolicy, reasonForValue: @escaping @Sendable (Value) -> RetryCause?
    ) -> @Sendable (ProgressHandler?) async throws(NetworkError) -> Value {
        let method = self.method
        let body = self.body
        let registry = self.registry
        return { progress async throws(NetworkError) in
            // The provider's `cancelAll()` calls so far: one after this ends the backoff, and
            // cancels an attempt that starts after it (the attempts compare with this epoch).
            let epoch = registry?.consumptionEpoch ?? 0
            let scope = registry.map { ConsumptionEpoch(registry: $0, epoch: epoch) }
            // Counted in flight between its attempts too (`inflightCount`), from here to its end;
            // without a registry of its own, in the one of the attempt it runs within, if any
            // (as a retried consumption within it: its epoch stays that one's).
            let tally = scope ?? RequestRegistry.attempt.map { ConsumptionEpoch(registry: $0.consumption.registry, epoch: $0.consumption.epoch) }
            if let tally { tally.registry.begin(tally) }
            defer {
                scope?.life.end()
                if let tally { tally.registry.end(tally) }
            }
            var retries = 0
            while true {
                let reason: String
                let delay: Double
                /// The method the attempt sent, as the chain reported it with its response (a
                /// redirect or an authentication round may have sent the last hop with another) or
                /// its transport failure; else (a failure no chain reported) the target's.
                func sentMethod(_ response: Response?, failure: TransportFailure? = nil) -> HTTPMethod? {
                    (response?.attemptMethod ?? failure?.attemptMethod).map(HTTPMethod.init(rawValue:)) ?? method
                }
                do throws(NetworkError) {
                    let claim = tally.map(AttemptClaim.init)
                    let attempt: Result<Value, NetworkError> = await RequestRegistry.$consumption.withValue(scope ?? RequestRegistry.consumption) {
                        await RequestRegistry.$attempt.withValue(claim) {
                            do throws(NetworkError) {
                                return .success(try await body(progress))
                            } catch {
                                return .failure(error)
                            }
                        }
                    }
                    let value = try attempt.get()
                    // A `Retry-After` past the policy's limit: the answer is the result.
                    guard retries < policy.retryLimit, let why = reasonForValue(value),
                        sentMethod(why.response).map(policy.retryableHTTPMethods.contains) ?? false,
                        let wait = policy.delay(beforeRetry: retries + 1, answeredWith: why.response)
                    else { return value }
                    // A wait that would end past the consumption's deadline: this answer is the result.
                    if ExchangeDeadline.reached(after: wait) { return value }
                    (reason, delay) = (why.reason, wait)
                } catch {
                    guard retries < policy.retryLimit,
                        let why = policy.retryReason(for: error, method: sentMethod(error.response, failure: error.underlyingFailure)),
                        let wait = policy.delay(beforeRetry: retries + 1, answeredWith: error.response)
                    else { throw error }
                    // Past the consumption's deadline (the transport reported it first), or a wait
                    // that would end past it: no retry.
                    if ExchangeDeadline.reached(after: wait) { throw error }
                    (reason, delay) = (why, wait)
                }
                // Cancelled meanwhile (the caller's task, or the provider's `cancelAll()`): no
                // retry for observers to hear of.
                if Task.isCancelled || registry.map({ $0.cancellations.value != epoch }) == true { throw .cancelled }
                retries += 1
                policy.onRetry?(RetryPolicy.Attempt(retry: retries, delay: delay, reason: reason))
                // Ends early when the caller's task or the provider's `cancelAll()` cancels.
                if let registry {
                    guard await registry.sleep(nanoseconds: delay.saturatingNanoseconds, unlessCancelledSince: epoch),
                        registry.cancellations.value == epoch
                    else { throw .cancelled }
                } else {
                    do {
                        try await Task.sleep(nanoseconds: delay.saturatingNanoseconds)
                    } catch {
                        throw .cancelled
                    }
                }
            }
        }
    }
}

/// Why a value is retried, and the response that said so (its `Retry-After` counts).
struct RetryCause: Sendable {
    let reason: String
    let response: Response?
}

/// An element of ``ResponsePipeline/events()``.
public enum PipelineEvent<Value: Sendable>: Sendable {
    /// Bytes moved.
    case progress(TransferProgress)
    /// The final value; the last event.
    case completed(Value)
}

extension ResponsePipeline where Value == Response {
    /// Keeps responses whose status code is in `statusCodes`.
    public func filter<R: RangeExpression & Sendable>(statusCodes: R) -> ResponsePipeline<Response> where R.Bound == Int {
        step { response throws(NetworkError) in try response.filter(statusCodes: statusCodes) }
    }

    /// Keeps responses with exactly `statusCode`.
    public func filter(statusCode: Int) -> ResponsePipeline<Response> {
        step { response throws(NetworkError) in try response.filter(statusCode: statusCode) }
    }

    /// Keeps 2xx responses.
    public func filterSuccessfulStatusCodes() -> ResponsePipeline<Response> {
        step { response throws(NetworkError) in try response.filterSuccessfulStatusCodes() }
    }

    /// Keeps 2xx and 3xx responses.
    public func filterSuccessfulStatusAndRedirectCodes() -> ResponsePipeline<Response> {
        step { response throws(NetworkError) in try response.filterSuccessfulStatusAndRedirectCodes() }
    }

    /// Parses the body as JSON.
    public func mapJSON(failsOnEmptyData: Bool = true) -> ResponsePipeline<JSONValue> {
        step { response throws(NetworkError) in try response.mapJSON(failsOnEmptyData: failsOnEmptyData) }
    }

    /// The body as text, or the string at a key path of a JSON body.
    public func mapString(atKeyPath keyPath: String? = nil) -> ResponsePipeline<String> {
        step { response throws(NetworkError) in try response.mapString(atKeyPath: keyPath) }
    }

    /// Decodes the body, or the value at a key path, into `type`.
    public func map<D: Decodable & Sendable>(
        _ type: D.Type, atKeyPath keyPath: String? = nil,
        using decoder: @autoclosure @escaping @Sendable () -> JSONDecoder = JSONDecoder(),
        failsOnEmptyData: Bool = true
    ) -> ResponsePipeline<D> {
        step { response throws(NetworkError) in
            try response.map(type, atKeyPath: keyPath, using: decoder(), failsOnEmptyData: failsOnEmptyData)
        }
    }

    /// Sends the request again, per `policy`, on retryable errors and on responses whose
    /// status code the policy retries (so it works before or after a filter step). Under a
    /// ``RequestLimits/deadline``, not when the wait before it would end at or past the deadline:
    /// the last answer or failure is the result, at once.
    public func retry(_ policy: RetryPolicy = .default) -> ResponsePipeline<Response> {
        retrying(policy) { response in
            policy.retryableStatusCodes.contains(response.statusCode) ? RetryCause(reason: "status \(response.statusCode)", response: response) : nil
        }
    }

    private func step<T: Sendable>(_ transform: @escaping @Sendable (Response) throws(NetworkError) -> T) -> ResponsePipeline<T> {
        derived { progress async throws(NetworkError) in try transform(try await body(progress)) }
    }
}
