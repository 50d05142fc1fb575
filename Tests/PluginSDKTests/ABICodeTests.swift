import CPluginABI
import Testing

@testable import PluginSDK

/// The ABI's codes map both ways, and unknown codes from a newer peer land on the safe value.
@Suite("ABI codes")
struct ABICodeTests {
    /// A header edit the host answers with any status but `PH_OK` was not made: the setter
    /// throws (it took only `PH_INVALID` for a refusal, and lost the edit without a word on another).
    @Test func aHeaderEditAnsweredWithAnyStatusButOKThrows() {
        #expect(throws: Never.self) { try HeaderValidation.explain(PH_OK, name: "X-A", value: "v") }
        for status in [PH_ERROR, PH_INVALID, PH_NOT_FOUND, 99] {
            #expect(throws: InterceptorError.invalidHeaderValue(name: "X-A"), "status \(status)") {
                try HeaderValidation.explain(status, name: "X-A", value: "v")
            }
            #expect(throws: InterceptorError.invalidHeaderName("X A"), "status \(status)") {
                try HeaderValidation.explain(status, name: "X A", value: "v")
            }
        }
    }

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

/// The plugin side keeps one view per kind of handle and points it at the next handle only when
/// nothing else holds it: a view a plugin kept past its hook keeps the handle it was made for.
@Suite("Handle views")
struct HandleViewReuseTests {
    /// Fake handles: the views never dereference them here.
    let first = OpaquePointer(bitPattern: 0x1000)!
    let second = OpaquePointer(bitPattern: 0x2000)!
    let third = OpaquePointer(bitPattern: 0x3000)!

    /// The slot's view after pointing it at `handle`.
    static func view<View: HandleView>(_ slot: inout View?, _ handle: OpaquePointer, _ api: UnsafePointer<ph_host_api>) -> View {
        slot.point(to: handle, api: api, memo: nil)
        return slot!
    }

    @Test func aViewNoOneElseHoldsIsPointedAtTheNextHandle() {
        var api = ph_host_api()
        withUnsafePointer(to: &api) { api in
            var slot: CRequestBackend?
            let made = Self.view(&slot, first, api)
            let madeID = ObjectIdentifier(made)
            // The same handle again: the same view.
            #expect(Self.view(&slot, first, api) === made)
            _ = consume made
            // Nothing but the slot holds it: moved to the next handle, no new object.
            let moved = Self.view(&slot, second, api)
            #expect(ObjectIdentifier(moved) == madeID)
            #expect(moved.handle == second)
        }
    }

    @Test func aViewSomeoneKeptIsNeverMoved() {
        var api = ph_host_api()
        withUnsafePointer(to: &api) { api in
            var slot: CResultBackend?
            let kept = Self.view(&slot, first, api)
            let next = Self.view(&slot, second, api)
            #expect(next !== kept)
            #expect(kept.handle == first)
            #expect(next.handle == second)
            // The new view is the one kept for reuse now.
            #expect(slot === next)
            withExtendedLifetime(next) {
                let another = Self.view(&slot, third, api)
                #expect(another !== next && next.handle == second && another.handle == third)
            }
        }
    }

    /// The request value hooks receive is kept with its view and lent to each call: the same
    /// value for the same handle, its view moved to the next handle when no hook kept the value,
    /// and a new view when one did (the kept value still reads its own handle).
    @Test func aLentRequestIsMovedOnlyWhenNoHookKeptIt() {
        var api = ph_host_api()
        withUnsafePointer(to: &api) { api in
            var lent: InterceptorRequest?
            lent.lend(first, api: api, memo: nil)
            let firstView = ObjectIdentifier(lent!.backend)
            lent.lend(first, api: api, memo: nil)
            #expect(ObjectIdentifier(lent!.backend) == firstView)
            // No one kept it: the same view, now of the second handle.
            lent.lend(second, api: api, memo: nil)
            #expect(ObjectIdentifier(lent!.backend) == firstView)
            #expect((lent!.backend as? CRequestBackend)?.handle == second)
            // A hook kept the value: it keeps its handle, and the next handle gets a view of its own.
            let kept = lent!
            lent.lend(third, api: api, memo: nil)
            #expect(ObjectIdentifier(lent!.backend) != firstView)
            #expect((kept.backend as? CRequestBackend)?.handle == second)
            #expect((lent!.backend as? CRequestBackend)?.handle == third)
        }
    }

    /// A handle at the address of the last one, in another request (the last request's state
    /// freed and its memory given to the next), gets a view of its own when a hook kept the last
    /// view: the kept value never shows the new request. Not kept, the view is lent again.
    @Test func aKeptViewIsNotLentToAnotherRequestAtTheSameAddress() {
        var api = ph_host_api()
        withUnsafePointer(to: &api) { api in
            var lent: InterceptorRequest?
            lent.lend(first, api: api, memo: nil)
            let view = ObjectIdentifier(lent!.backend)
            lent.lend(first, api: api, memo: nil, fresh: true)
            #expect(ObjectIdentifier(lent!.backend) == view)
            let kept = lent!
            lent.lend(first, api: api, memo: nil, fresh: true)
            #expect(ObjectIdentifier(lent!.backend) != ObjectIdentifier(kept.backend))
            #expect((lent!.backend as? CRequestBackend)?.handle == first)

            var result: InterceptorResult?
            result.lend(second, api: api, memo: nil)
            let keptResponse = result!.response!
            result.lend(second, api: api, memo: nil, fresh: true)
            #expect(ObjectIdentifier(result!.response!.backend) != ObjectIdentifier(keptResponse.backend))
        }
    }

    /// The same for the response value of result hooks.
    @Test func aLentResponseIsMovedOnlyWhenNoHookKeptIt() {
        var api = ph_host_api()
        withUnsafePointer(to: &api) { api in
            var lent: InterceptorResult?
            lent.lend(first, api: api, memo: nil)
            let firstView = ObjectIdentifier(lent!.response!.backend)
            lent.lend(second, api: api, memo: nil)
            #expect(ObjectIdentifier(lent!.response!.backend) == firstView)
            #expect((lent!.response!.backend as? CResultBackend)?.handle == second)
            let kept = lent!.response!
            lent.lend(third, api: api, memo: nil)
            #expect(ObjectIdentifier(lent!.response!.backend) != firstView)
            #expect((kept.backend as? CResultBackend)?.handle == second)
            #expect((lent!.response!.backend as? CResultBackend)?.handle == third)
        }
    }
}
