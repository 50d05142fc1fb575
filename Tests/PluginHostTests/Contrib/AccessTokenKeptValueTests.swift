import AccessTokenPlugin
import Foundation
import PluginHost
import PluginSDK
import Testing

/// The `Authorization` value access-token keeps (made once per scheme and token) is the one the
/// current token's bytes make, also when a new token is equal to the old one as a string.
@Suite("access-token: the kept Authorization value")
struct AccessTokenKeptValueTests {
    @Test func aTokenOfOtherBytesIsSentAsItsOwnBytes() async throws {
        let recorder = AuthorizationRecorder()
        let provider = Provider<KeptValueTarget>(
            transport: StubTransport { _ in .networkResponse(200, Data("ok".utf8)) },
            interceptors: [
                try AccessTokenPlugin(
                    configuration: PluginConfiguration(plugin: "access-token", values: [:]), host: PluginServices().hostServices(for: "access-token")),
                recorder,
            ])
        // "é" precomposed, then as e + combining accent (`==` holds them equal), then back.
        let tokens = ["caf\u{E9}-token", "cafe\u{301}-token", "cafe\u{301}-token", "caf\u{E9}-token"]
        for token in tokens {
            provider.services.setValue(token, forKey: "access_token")
            _ = try await provider.request(KeptValueTarget()).value
        }
        #expect(recorder.seen.withLock { $0 } == tokens.map { Array("Bearer \($0)".utf8) })
    }
}

/// Records the bytes of each request's `Authorization` value as sent.
private final class AuthorizationRecorder: Interceptor, Sendable {
    let seen = Locked<[[UInt8]]>([])

    func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        let value = request.header("Authorization") ?? ""
        seen.withLock { $0.append(Array(value.utf8)) }
    }
}

/// A target for ``AccessTokenKeptValueTests``.
private struct KeptValueTarget: TargetType {
    var baseURL: URL { URL(string: "http://127.0.0.1")! }
    var path: String { "kept" }
    var method: HTTPMethod { .get }
}
