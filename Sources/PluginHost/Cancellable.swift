import PluginSDK

/// Something that can be cancelled, such as a request started with a completion callback.
public protocol Cancellable: Sendable {
    /// Whether ``cancel()`` was called.
    var isCancelled: Bool { get }
    /// Cancels; the completion is then called once with ``NetworkError/cancelled``
    /// (unless it already ran). Calling it again does nothing.
    func cancel()
}

/// The ``Cancellable`` returned by ``ResponsePipeline/start(on:progress:completion:)``.
public final class CancellableToken: Cancellable {
    private let state = Locked<(cancelled: Bool, action: (@Sendable () -> Void)?)>((false, nil))

    init(action: @escaping @Sendable () -> Void) {
        state.withLock { $0.action = action }
    }

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Cancels the request.
    public func cancel() {
        let action = state.withLock { state -> (@Sendable () -> Void)? in
            defer {
                state.cancelled = true
                state.action = nil
            }
            return state.action
        }
        action?()
    }
}
