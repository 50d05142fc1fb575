import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The server layer: a base URL switchable at run time, default headers, default
/// parameters and a default timeout, shared by every request of the providers that use it.
///
/// Safe to change while requests run: each request reads one consistent snapshot when it
/// starts, so a change applies to requests started afterwards.
///
/// ```swift
/// let server = ServerConfiguration(baseURL: URL(string: "https://dev.example.com")!,
///                                  environments: ["dev": devURL, "prod": prodURL])
/// try server.use(environment: "prod")
/// ```
public final class ServerConfiguration: Sendable {
    /// One consistent view of the configuration.
    public struct Snapshot: Sendable {
        /// The current base URL.
        public var baseURL: URL
        /// Headers added to every request (a target's own headers win).
        public var headers: [String: String]
        /// Parameters added to every request (a target's own parameters win).
        public var parameters: Parameters
        /// The request timeout in seconds.
        public var timeout: TimeInterval
        /// The name of the current environment, if chosen by name.
        public var environment: String?
    }

    /// Why an environment switch was refused.
    public enum ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
        /// No environment of that name is configured; `known` lists the configured names, sorted.
        case unknownEnvironment(String, known: [String])

        /// A sentence naming the environment and the known ones.
        public var description: String {
            switch self {
            case .unknownEnvironment(let name, let known):
                return "unknown environment \(name.debugDescription); known: \(known.sorted().joined(separator: ", "))"
            }
        }
    }

    private let state: Locked<Snapshot>
    /// Named base URLs, e.g. `dev`, `test`, `prod`.
    public let environments: [String: URL]

    /// Creates a configuration.
    public init(
        baseURL: URL, headers: [String: String] = [:], parameters: Parameters = [:], timeout: TimeInterval = 60,
        environments: [String: URL] = [:]
    ) {
        state = Locked(Snapshot(baseURL: baseURL, headers: headers, parameters: parameters, timeout: timeout, environment: nil))
        self.environments = environments
    }

    /// The current values, read atomically.
    public var snapshot: Snapshot { state.withLock { $0 } }

    /// The base URL for requests started from now on.
    public var baseURL: URL {
        get { state.withLock { $0.baseURL } }
        set {
            state.withLock {
                $0.baseURL = newValue
                $0.environment = nil
            }
        }
    }

    /// Default headers for requests started from now on.
    public var headers: [String: String] {
        get { state.withLock { $0.headers } }
        set { state.withLock { $0.headers = newValue } }
    }

    /// Default parameters for requests started from now on.
    public var parameters: Parameters {
        get { state.withLock { $0.parameters } }
        set { state.withLock { $0.parameters = newValue } }
    }

    /// Default timeout in seconds for requests started from now on.
    public var timeout: TimeInterval {
        get { state.withLock { $0.timeout } }
        set { state.withLock { $0.timeout = newValue } }
    }

    /// Sets or (with `nil`) removes one default header. Names are compared without case, as
    /// HTTP compares them: the field of any spelling of `name` is replaced or removed.
    public func setHeader(_ name: String, _ value: String?) {
        state.withLock { state in
            for key in state.headers.keys where HTTPHeader.namesEqual(key, name) { state.headers[key] = nil }
            state.headers[name] = value
        }
    }

    /// Switches the base URL to a named environment.
    public func use(environment name: String) throws(ConfigurationError) {
        guard let url = environments[name] else {
            throw .unknownEnvironment(name, known: environments.keys.sorted())
        }
        state.withLock {
            $0.baseURL = url
            $0.environment = name
        }
    }
}
