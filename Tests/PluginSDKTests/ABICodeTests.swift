import CPluginABI
import Testing

@testable import PluginSDK

/// The ABI's codes map both ways, and unknown codes from a newer peer land on the safe value.
@Suite("ABI codes")
struct ABICodeTests {
    @Test func failureKindsRoundTrip() {
        // Since ABI 1.1 every kind has its own code.
        for kind in TransportFailureKind.allCases {
            #expect(TransportFailureKind(abiCode: kind.abiCode) == kind, "\(kind)")
        }
        #expect(Set(TransportFailureKind.allCases.map(\.abiCode)).count == TransportFailureKind.allCases.count)
        #expect(TransportFailureKind.responseTooLarge.abiCode == PH_FAILURE_RESPONSE_TOO_LARGE)
        #expect(PH_FAILURE_RESPONSE_TOO_LARGE == 11)
        #expect(TransportFailureKind.publicKeyPinMismatch.abiCode == 10)
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
