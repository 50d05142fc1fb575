import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds hooks an interceptor implements but leaves out of ``ExportablePlugin/implementedHooks``.
///
/// Loaded from a library, such a hook would never run (the descriptor does not export it) while
/// it runs in-process: the same plugin would behave differently. The SDK's default hook
/// implementations note, on the probing thread only, that they ran; a hook that runs without
/// noting it is the plugin's own.
package enum HookProbe {
    /// Collects the default hooks that ran on the probing thread.
    private final class Recorder {
        var defaults: Set<InterceptorHook> = []
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Called by the SDK's default hooks: cheap (one thread-specific read) when no probe runs.
    @inline(__always)
    static func noteDefault(_ hook: InterceptorHook) {
        guard let recorder = pthread_getspecific(key) else { return }
        Unmanaged<Recorder>.fromOpaque(recorder).takeUnretainedValue().defaults.insert(hook)
    }

    /// The hooks of `interceptor` not in `listed` that are its own, not the SDK's defaults.
    ///
    /// Each unlisted hook is called once with a probe request, result and challenge and with
    /// services that store, emit and log nothing; errors it throws are ignored.
    package static func unlistedHooks(of interceptor: any Interceptor, listed: Set<InterceptorHook>) -> [InterceptorHook] {
        let recorder = Recorder()
        let pointer = Unmanaged.passRetained(recorder)
        pthread_setspecific(key, pointer.toOpaque())
        defer {
            pthread_setspecific(key, nil)
            pointer.release()
        }
        let context = InterceptorContext(
            target: TargetInfo(method: "GET", baseURL: "http://probe.pluginhost.invalid", path: "probe"),
            requestID: 0, attempt: 1, services: ProbeServices())
        let request = InterceptorRequest(backend: ProbeRequest())
        let result = InterceptorResult.response(InterceptorResponse(backend: ProbeResponse()))
        let probed = InterceptorHook.allCases.filter { !listed.contains($0) }
        for hook in probed {
            switch hook {
            case .prepare: _ = try? interceptor.prepare(request, context: context)
            case .willSend: try? interceptor.willSend(request, context: context)
            case .didReceive: try? interceptor.didReceive(result, context: context)
            case .process: _ = try? interceptor.process(result, context: context)
            case .credential:
                _ = interceptor.credential(
                    for: AuthenticationChallenge(
                        host: "probe.pluginhost.invalid", port: 80, scheme: "http", realm: nil,
                        method: "Basic", previousFailureCount: 0), context: context)
            }
        }
        return probed.filter { !recorder.defaults.contains($0) }
    }

    private final class ProbeRequest: RequestBackend {
        var method = "GET"
        var urlString = "http://probe.pluginhost.invalid/probe"
        var headers: [HTTPHeader] = []
        var body: [UInt8]?
        var timeout = 60.0
        func setMethod(_ method: String) throws {}
        func setURL(_ string: String) throws {}
        func header(named name: String, index: Int) -> String? { nil }
        func setHeader(named name: String, value: String?) throws {}
        func addHeader(named name: String, value: String) throws {}
        func setBody(_ body: [UInt8]?) {}
        func setTimeout(_ seconds: Double) throws {}
    }

    private final class ProbeResponse: ResponseBackend {
        var statusCode = 200
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
        func setStatusCode(_ code: Int) throws {}
        func header(named name: String, index: Int) -> String? { nil }
        func setHeader(named name: String, value: String?) throws {}
        func addHeader(named name: String, value: String) throws {}
        func setBody(_ body: [UInt8]) {}
    }

    private struct ProbeServices: HostServices {
        func value(forKey key: String) -> String? { nil }
        func setValue(_ value: String?, forKey key: String) {}
        func emit(_ name: String, fields: [String: String]) {}
        func log(_ level: LogLevel, _ message: String) {}
        func now() -> Double { 0 }
        func monotonicNanoseconds() -> UInt64 { 0 }
        func randomBytes(_ count: Int) -> [UInt8] { Array(repeating: 0, count: count) }
    }
}
