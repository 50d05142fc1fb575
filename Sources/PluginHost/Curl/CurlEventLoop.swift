import CCurlShim
import Dispatch
import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The thread that drives one libcurl multi handle.
///
/// Other threads only submit and cancel (through a locked inbox, then `curl_multi_wakeup`);
/// every other libcurl call on the multi and easy handles happens on the loop's own thread.
/// The wakeup is made under the inbox's lock, and the loop marks the inbox closed under that
/// lock before it cleans the multi handle up, so no late `cancel` (a cancellation handler that
/// fired as its call finished and the transport was released) wakes a multi handle that is gone.
/// Safe as `@unchecked Sendable`: its mutable state other than `inbox` and `count` is touched
/// only by the loop thread.
final class CurlEventLoop: @unchecked Sendable {
    private struct Inbox {
        var submissions: [CurlCall] = []
        var cancellations: [CurlCall] = []
        var stopping = false
        /// The loop has ended: the multi handle is gone, and nothing may wake it.
        var closed = false
    }

    let settings: CurlSettings
    private let multi: UnsafeMutableRawPointer
    private let inbox = Locked(Inbox())
    private let count = Locked(0)
    private let finished = DispatchSemaphore(value: 0)
    private let threadID = Locked<pthread_t?>(nil)

    // Loop thread only.
    private var active: [UnsafeMutableRawPointer: CurlCall] = [:]
    private var idleHandles: [UnsafeMutableRawPointer] = []

    init(settings: CurlSettings) throws(CurlTransportError) {
        guard let multi = ph_curl_multi_init() else {
            throw CurlTransportError(.libraryUnavailable, "curl_multi_init failed")
        }
        self.settings = settings
        self.multi = multi
        let configuration = settings.configuration
        ph_curl_multi_setopt_long(multi, PH_CURLMOPT_PIPELINING, configuration.http2 ? Int(PH_CURLPIPE_MULTIPLEX) : 0)
        ph_curl_multi_setopt_long(multi, PH_CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
        ph_curl_multi_setopt_long(multi, PH_CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxConnections)
        ph_curl_multi_setopt_long(multi, PH_CURLMOPT_MAXCONNECTS, configuration.maxConnections)
        Self.ignoreSIGPIPE
        let thread = Thread { [self] in run() }
        thread.name = "PluginHost.CurlTransport"
        thread.start()
    }

    /// Ignores `SIGPIPE` once per process (a peer closing a socket must not end the process).
    private static let ignoreSIGPIPE: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()

    /// Calls submitted and not yet finished.
    var callCount: Int { count.withLock { $0 } }

    /// Queues `call` to start on the loop thread; once the loop has ended, finishes it as
    /// released instead.
    func submit(_ call: CurlCall) {
        count.withLock { $0 += 1 }
        let queued = inbox.withLock { inbox -> Bool in
            guard !inbox.closed else { return false }
            inbox.submissions.append(call)
            ph_curl_multi_wakeup(multi)
            return true
        }
        // Never queued, never started: nothing of a transfer to let go of.
        if !queued { call.finish(.failure(Self.released)) }
    }

    /// Asks the loop to stop `call`'s transfer (it then finishes as cancelled); nothing once the
    /// loop has ended (it finished every call it had).
    func cancel(_ call: CurlCall) {
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.cancellations.append(call)
            ph_curl_multi_wakeup(multi)
        }
    }

    /// A call finished: it no longer counts.
    func callEnded() {
        count.withLock { $0 -= 1 }
    }

    /// Stops the loop and waits for it to release every handle and connection (at once when it
    /// has already). Each waiter passes the loop's one signal on to the next.
    func shutdown() {
        inbox.withLock { inbox in
            guard !inbox.closed else { return }
            inbox.stopping = true
            ph_curl_multi_wakeup(multi)
        }
        if let thread = threadID.withLock({ $0 }), pthread_equal(thread, pthread_self()) != 0 { return }
        finished.wait()
        finished.signal()
    }

    private static let released = TransportFailure(kind: .cancelled, message: "the transport was released")

    private func run() {
        threadID.withLock { $0 = pthread_self() }
        var running: Int32 = 0
        while true {
            let (submissions, cancellations, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.submissions.removeAll(keepingCapacity: true)
                    inbox.cancellations.removeAll(keepingCapacity: true)
                }
                return (inbox.submissions, inbox.cancellations, inbox.stopping)
            }
            for call in submissions { start(call) }
            for call in cancellations {
                guard let easy = call.easy, active[easy] === call else { continue }
                end(call, easy: easy, with: .failure(TransportFailure(kind: .cancelled, message: "cancelled")))
            }
            if stopping { break }
            let performed = ph_curl_multi_perform(multi, &running)
            if performed > 0 { multiFailed("curl_multi_perform", status: performed) }
            var easy: UnsafeMutableRawPointer?
            var code: Int32 = 0
            while ph_curl_multi_info_read_done(multi, &easy, &code) != 0 {
                guard let easy, let call = active[easy] else { continue }
                completed(call, easy: easy, code: code)
            }
            let wait = checkIdleTimeouts()
            let polled = ph_curl_multi_poll(multi, wait, nil)
            if polled != 0 {
                multiFailed("curl_multi_poll", status: polled)
                // A failure that lasts (CURLM_UNRECOVERABLE_POLL: poll() itself failed) would
                // otherwise spin the loop: it tries again after a pause.
                usleep(UInt32(min(wait, 100)) * 1000)
            }
        }
        // Closed under the lock the wakeups are made under: none is under way, none comes after.
        let late = inbox.withLock { inbox in
            inbox.closed = true
            // A cancellation that came since is of a call ended below (or already).
            defer {
                inbox.submissions.removeAll()
                inbox.cancellations.removeAll()
            }
            return inbox.submissions
        }
        for call in late {
            call.abandonTransfer()
            call.finish(.failure(Self.released))
        }
        for (easy, call) in active {
            end(call, easy: easy, with: .failure(Self.released))
        }
        for easy in idleHandles { ph_curl_easy_cleanup(easy) }
        idleHandles.removeAll()
        ph_curl_multi_cleanup(multi)
        finished.signal()
    }

    /// libcurl failed the multi handle itself: no transfer on it can go on, and each ends with
    /// libcurl's reason (rather than waiting for its idle timeout, or for ever without one).
    private func multiFailed(_ function: String, status: Int32) {
        let message = ph_curl_multi_strerror(status).map { String(cString: $0) } ?? "error \(status)"
        let failure = TransportFailure(kind: .other, message: "\(function): \(message)")
        for (easy, call) in active { end(call, easy: easy, with: .failure(failure)) }
    }

    /// Configures a handle for `call` and adds it to the multi handle.
    /// A redirect's next hop starts here too: a call that stops before its transfer starts
    /// lets go of what the hop before left open (a download's file), not only of the handle.
    private func start(_ call: CurlCall) {
        if call.isCancelled {
            call.abandonTransfer()
            call.finish(.failure(TransportFailure(kind: .cancelled, message: "cancelled before it started")))
            return
        }
        guard let easy = idleHandles.popLast() ?? ph_curl_easy_init() else {
            call.abandonTransfer()
            call.finish(.failure(TransportFailure(kind: .other, message: "curl_easy_init failed")))
            return
        }
        do {
            try call.configure(easy, settings: settings)
        } catch {
            call.abandonTransfer()
            recycle(easy)
            call.finish(.failure(error))
            return
        }
        active[easy] = call
        let status = ph_curl_multi_add_handle(multi, easy)
        if status != 0 {
            let message = ph_curl_multi_strerror(status).map { String(cString: $0) } ?? "error \(status)"
            end(call, easy: easy, with: .failure(TransportFailure(kind: .other, message: "curl_multi_add_handle: \(message)")), measured: false)
        }
    }

    /// A transfer ended with libcurl's result `code`: finish the call or follow its redirect.
    private func completed(_ call: CurlCall, easy: UnsafeMutableRawPointer, code: Int32) {
        active[easy] = nil
        ph_curl_multi_remove_handle(multi, easy)
        let outcome = call.outcome(code: code, settings: settings)
        call.releaseTransfer()
        recycle(easy)
        switch outcome {
        case .finished(let result):
            call.finish(result)
        case .redirect:
            start(call)
        }
    }

    /// Stops `call`'s transfer and finishes it with `result`, a failure with the transfer's
    /// metrics when it ran (`measured`).
    private func end(
        _ call: CurlCall, easy: UnsafeMutableRawPointer, with result: Result<CurlResponse, TransportFailure>, measured: Bool = true
    ) {
        active[easy] = nil
        ph_curl_multi_remove_handle(multi, easy)
        let result = measured ? result.mapError { call.measured($0, on: easy) } : result
        call.abandonTransfer()
        recycle(easy)
        call.finish(result)
    }

    private func recycle(_ easy: UnsafeMutableRawPointer) {
        ph_curl_easy_reset(easy)
        if idleHandles.count < 256 {
            idleHandles.append(easy)
        } else {
            ph_curl_easy_cleanup(easy)
        }
    }

    /// Ends transfers idle past their timeout; returns how long the loop may wait (ms).
    private func checkIdleTimeouts() -> Int32 {
        guard !active.isEmpty else { return 1000 }
        let now = DispatchTime.now().uptimeNanoseconds
        var wait: UInt64 = 1_000_000_000
        var expired: [(UnsafeMutableRawPointer, CurlCall)] = []
        for (easy, call) in active {
            guard let deadline = call.idleDeadline else { continue }
            if deadline <= now {
                expired.append((easy, call))
            } else {
                wait = min(wait, deadline - now)
            }
        }
        for (easy, call) in expired {
            end(call, easy: easy, with: .failure(call.idleTimeoutFailure))
        }
        return Int32(max(1, (wait + 999_999) / 1_000_000))
    }
}
