import CPluginABI
import Testing

@testable import PluginSDK

/// The ABI's codes map both ways, and unknown codes from a newer peer land on the safe value.
@Suite("ABI codes")
struct ABICodeTests {
    @Test func failureKindsRoundTrip() {
        let withoutCode: Set<TransportFailureKind> = [.tlsHandshakeFailed, .serverCertificateUntrusted, .publicKeyPinMismatch]
        for kind in TransportFailureKind.allCases {
            let back = TransportFailureKind(abiCode: kind.abiCode)
            #expect(back == (withoutCode.contains(kind) ? .other : kind), "\(kind)")
        }
        #expect(TransportFailureKind.timedOut.abiCode == PH_FAILURE_TIMED_OUT)
        #expect(TransportFailureKind.other.abiCode == PH_FAILURE_OTHER)
        #expect(TransportFailureKind(abiCode: 99) == .other)
    }

    @Test func credentialAnswersRoundTrip() {
        let answers: [CredentialAnswer] = [.performDefault, .useCredential(user: "u", password: "p"), .rejectProtectionSpace, .cancel]
        for answer in answers {
            #expect(CredentialAnswer(abiCode: answer.abiCode, user: "u", password: "p") == answer)
        }
        #expect(CredentialAnswer.useCredential(user: "u", password: "p").abiCode == PH_CREDENTIAL_USE)
        #expect(CredentialAnswer(abiCode: 42, user: "u", password: "p") == .performDefault)
    }

    @Test func logLevelsRoundTrip() {
        for level in LogLevel.allCases { #expect(LogLevel(abiCode: level.abiCode) == level) }
        #expect(LogLevel.error.abiCode == PH_LOG_ERROR)
        #expect(LogLevel(abiCode: -1) == .info)
    }
}
