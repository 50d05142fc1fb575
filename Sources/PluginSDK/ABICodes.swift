import CPluginABI

// The ABI's integer codes and the Swift values they stand for, both ways, for the host and the
// SDK alike (one place, so the two sides cannot drift apart).

extension TransportFailureKind {
    /// The kind a `ph_failure_kind` names; an unknown code (from a newer peer) is ``other``.
    /// `PH_FAILURE_NONE` is not a kind: callers check it first.
    package init(abiCode code: ph_failure_kind) {
        switch code {
        case PH_FAILURE_TIMED_OUT: self = .timedOut
        case PH_FAILURE_CANCELLED: self = .cancelled
        case PH_FAILURE_CANNOT_CONNECT: self = .cannotConnect
        case PH_FAILURE_CONNECTION_LOST: self = .connectionLost
        case PH_FAILURE_BAD_RESPONSE: self = .badResponse
        case PH_FAILURE_INTERCEPTOR_FAILED: self = .interceptorFailed
        case PH_FAILURE_TLS_HANDSHAKE: self = .tlsHandshakeFailed
        case PH_FAILURE_CERTIFICATE_UNTRUSTED: self = .serverCertificateUntrusted
        case PH_FAILURE_PIN_MISMATCH: self = .publicKeyPinMismatch
        case PH_FAILURE_RESPONSE_TOO_LARGE: self = .responseTooLarge
        default: self = .other
        }
    }

    /// The code that crosses the ABI (codes 8 to 11 are ABI 1.1: a 1.0 plugin reads them as
    /// `PH_FAILURE_OTHER`, with the message).
    package var abiCode: ph_failure_kind {
        switch self {
        case .timedOut: return PH_FAILURE_TIMED_OUT
        case .cancelled: return PH_FAILURE_CANCELLED
        case .cannotConnect: return PH_FAILURE_CANNOT_CONNECT
        case .connectionLost: return PH_FAILURE_CONNECTION_LOST
        case .badResponse: return PH_FAILURE_BAD_RESPONSE
        case .interceptorFailed: return PH_FAILURE_INTERCEPTOR_FAILED
        case .tlsHandshakeFailed: return PH_FAILURE_TLS_HANDSHAKE
        case .serverCertificateUntrusted: return PH_FAILURE_CERTIFICATE_UNTRUSTED
        case .publicKeyPinMismatch: return PH_FAILURE_PIN_MISMATCH
        case .responseTooLarge: return PH_FAILURE_RESPONSE_TOO_LARGE
        case .other: return PH_FAILURE_OTHER
        }
    }
}

extension CredentialAnswer {
    /// The answer a `ph_credential_answer` names, with the user and password the plugin wrote
    /// for `PH_CREDENTIAL_USE`; an unknown code is ``performDefault``.
    package init(abiCode code: ph_credential_answer, user: @autoclosure () -> String, password: @autoclosure () -> String) {
        switch code {
        case PH_CREDENTIAL_USE: self = .useCredential(user: user(), password: password())
        case PH_CREDENTIAL_REJECT: self = .rejectProtectionSpace
        case PH_CREDENTIAL_CANCEL: self = .cancel
        default: self = .performDefault
        }
    }

    /// The code that crosses the ABI (the user and password travel in the host's buffers).
    package var abiCode: ph_credential_answer {
        switch self {
        case .performDefault: return PH_CREDENTIAL_DEFAULT
        case .useCredential: return PH_CREDENTIAL_USE
        case .rejectProtectionSpace: return PH_CREDENTIAL_REJECT
        case .cancel: return PH_CREDENTIAL_CANCEL
        }
    }
}

extension LogLevel {
    /// The level a `ph_log_level` names; an unknown code is ``info``.
    package init(abiCode code: ph_log_level) {
        switch code {
        case PH_LOG_DEBUG: self = .debug
        case PH_LOG_WARNING: self = .warning
        case PH_LOG_ERROR: self = .error
        default: self = .info
        }
    }

    /// The code that crosses the ABI.
    package var abiCode: ph_log_level {
        switch self {
        case .debug: return PH_LOG_DEBUG
        case .info: return PH_LOG_INFO
        case .warning: return PH_LOG_WARNING
        case .error: return PH_LOG_ERROR
        }
    }
}
