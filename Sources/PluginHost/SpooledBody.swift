import CCurlShim
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A request body given as a stream (`URLRequest.httpBodyStream`, which a request closure may
/// set), read once into a temporary file: libcurl sends it with its length like an upload file,
/// and again after a redirect that keeps the body, without holding it in memory. For libcurl no
/// name reaches the file (``unnamedFile()``); URL loading is given the file mapped by its path,
/// so for it the file has one (``path``, mode 0600, removed with the file). The file goes when the last
/// transfer using it ends.
// Safe as @unchecked Sendable: `fd` and `path` are set once; the file is read through `dup`ed descriptors.
final class SpooledBody: @unchecked Sendable {
    /// The open file holding the body.
    let fd: Int32
    /// The file's name, when it has one (``reading(_:named:)``).
    let path: String?

    private init(fd: Int32, path: String?) {
        self.fd = fd
        self.path = path
    }

    deinit {
        close(fd)
        if let path { unlink(path) }
    }

    /// The stream of `request`'s body read into a file; nil when its body is data, a file, or none.
    ///
    /// A stream is read once: the call's earlier send read it into its ``BodySpool``
    /// (``TransportRequest/bodySpool``), whose file is sent again; a stream opened already
    /// otherwise (by an earlier call, or by anyone else) is refused rather than sent short.
    /// The stream is read on a thread of its own: a read may block (a pipe, a socket, a slow
    /// producer), and the concurrency pool has only as many threads as the machine has cores.
    ///
    /// `named` gives the file a name (URLSessionTransport maps it by name): a call's later sends get the file
    /// its first send made.
    static func reading(_ request: TransportRequest, named: Bool = false) async throws(TransportFailure) -> SpooledBody? {
        switch request.body {
        case .file: return nil
        case .inline, .upload: break
        }
        // A changed request is deferred only when its body is data (`RequestChanges.sending`).
        guard request.deferred == nil, let stream = request.urlRequest.httpBodyStream else { return nil }
        switch request.bodySpool?.state(of: stream) {
        case .read(let kept): return kept
        case .refused(let failure): throw failure
        case .abandoned:
            // Its reader may still be in a read: the stream is not touched again.
            throw TransportFailure(
                kind: .other, message: "the request's body stream is still in a read an earlier send of this call stopped waiting for")
        case .none: break
        }
        // Neither a thread nor a file for a request that has ended already.
        if request.cancellation?.isCancelled == true || Task.isCancelled {
            throw TransportFailure(kind: .cancelled, message: "cancelled while reading the request's body stream")
        }
        if let deadline = request.deadline, DispatchTime.now() >= deadline.instant { throw LimitFailure.deadline(deadline.seconds) }
        guard stream.streamStatus == .notOpen else {
            throw TransportFailure(
                kind: .other,
                message: "the request's body stream was read already "
                    + "(a stream is read once per call: give a body another call sends again as data or a file)")
        }
        let source = StreamSource(stream: stream)
        // Fires when the request is cancelled (its signal, or its task) or its deadline passes:
        // the wait ends then, even while a read blocks, and the reader stops after that read.
        let stop = CancellationSignal()
        let forwarded = request.cancellation?.onCancel { stop.cancel() }
        defer { request.cancellation?.removeHandler(forwarded) }
        let timer = request.deadline.map { stop.cancel(at: $0.instant) }
        defer { timer?.cancel() }
        // A runaway producer's bound; a multipart body of files (``MultipartBodyStream``) sends
        // each file's size when the request was made, or fails, and is an upload as a file is.
        let limit = stream is MultipartBodyStream ? nil : request.limits.maxStreamedBodyBytes
        // This task waits for the reader's thread without holding a thread of the pool.
        let reading = Task<Result<SpooledBody, TransportFailure>, Never> {
            await withCheckedContinuation { continuation in
                let reader = Thread {
                    continuation.resume(
                        returning: Result { () throws(TransportFailure) in try fill(from: source, named: named, limit: limit) { stop.isCancelled } })
                }
                reader.name = "pluginhost-body-stream"
                reader.start()
            }
        }
        guard let read = await stop.value(of: reading) else {
            // The reader stops at the end of the read it is in; the file it filled goes with it.
            stop.cancel()
            request.bodySpool?.abandon(stream)
            if let deadline = request.deadline, DispatchTime.now() >= deadline.instant { throw LimitFailure.deadline(deadline.seconds) }
            throw TransportFailure(kind: .cancelled, message: "cancelled while reading the request's body stream")
        }
        let spooled: SpooledBody
        do {
            spooled = try read.get()
        } catch {
            // Read in part (past a limit, or up to a failed read): later sends fail alike.
            request.bodySpool?.refuse(error, of: stream)
            throw error
        }
        request.bodySpool?.keep(spooled, of: stream)
        return spooled
    }

    /// A stream handed to the thread that reads it, which alone touches it until the read ends.
    private struct StreamSource: @unchecked Sendable {
        let stream: InputStream
    }

    /// Reads `source` to its end into a new file (named when `named`); stops when `stopped` says so (the
    /// caller's signal, fired by the request's cancellation and its deadline), or when more than
    /// `limit` bytes came (``RequestLimits/maxStreamedBodyBytes``; the last read takes one byte past it).
    private static func fill(
        from source: StreamSource, named: Bool, limit: Int64?, stopped: () -> Bool
    ) throws(TransportFailure) -> SpooledBody {
        let stream = source.stream
        let spooled = named ? try namedFile() : SpooledBody(fd: try unnamedFile(), path: nil)
        stream.open()
        defer { stream.close() }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var total: Int64 = 0
        while true {
            // The waiter has gone already: which of them it was is its to say.
            if stopped() { throw TransportFailure(kind: .cancelled, message: "cancelled while reading the request's body stream") }
            // Never more than one byte past the limit: enough to know the stream goes on.
            let room = limit.map { $0 < total ? 1 : $0 - total >= Int64(buffer.count) ? buffer.count : Int($0 - total) + 1 } ?? buffer.count
            let got = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: room) }
            if got == 0 { break }
            guard got > 0 else {
                let reason = stream.streamError.map { ": \($0.localizedDescription)" } ?? ""
                throw TransportFailure(kind: .other, message: "cannot read the request's body stream\(reason)")
            }
            total += Int64(got)
            if let limit, total > limit { throw LimitFailure.streamedBody(total, limit: limit) }
            errno = 0
            guard buffer.withUnsafeBytes({ FileDescriptor.writeAll(spooled.fd, UnsafeRawBufferPointer(rebasing: $0[..<got])) }) else {
                // No error number when the disk took no byte: it is full.
                throw TransportFailure(
                    kind: .other, message: "cannot hold the request's body stream: \(String(cString: strerror(errno != 0 ? errno : ENOSPC)))")
            }
        }
        return spooled
    }

    /// A new file in the temporary directory that no name reaches, closed on `exec`: made without
    /// a name on Linux (`O_TMPFILE`), else made and unlinked at once.
    private static func unnamedFile() throws(TransportFailure) -> Int32 {
        #if os(Linux)
        // O_TMPFILE (`__O_TMPFILE | O_DIRECTORY`), which the C library's headers hide from Swift:
        // `__O_TMPFILE` is 0o20_000_000 on every Linux architecture, `O_DIRECTORY` is not
        // (0o200_000 on x86-64, 0o40_000 on arm64), so it is the C library's own.
        let unnamed = open(NSTemporaryDirectory(), O_RDWR | O_CLOEXEC | 0o20_000_000 | O_DIRECTORY, 0o600)
        if unnamed >= 0 { return unnamed }
        #endif
        let (fd, path) = try temporaryFile()
        unlink(path)
        return fd
    }

    /// A new file in the temporary directory, `pluginhost-body-` and six random characters,
    /// mode 0600, closed on `exec`.
    private static func namedFile() throws(TransportFailure) -> SpooledBody {
        let (fd, path) = try temporaryFile()
        return SpooledBody(fd: fd, path: path)
    }

    private static func temporaryFile() throws(TransportFailure) -> (fd: Int32, path: String) {
        var template = Array((NSTemporaryDirectory() + "/pluginhost-body-XXXXXX").utf8CString)
        // Closed on `exec` from the start: a child another thread starts meanwhile inherits no
        // descriptor of the body.
        let made = template.withUnsafeMutableBufferPointer { ph_mkostemp($0.baseAddress!, O_CLOEXEC) }
        guard made >= 0 else {
            throw TransportFailure(kind: .other, message: "cannot hold the request's body stream: \(String(cString: strerror(errno)))")
        }
        return (made, template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }

    /// A descriptor of the file for one transfer, at its start (closed by the transfer); -1 when
    /// none could be made (`errno` says why).
    func descriptor() -> Int32 {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { return -1 }
        // A duplicate shares the offset: each transfer starts it anew.
        guard lseek(copy, 0, SEEK_SET) == 0 else {
            close(copy)
            return -1
        }
        return copy
    }
}

/// The body stream of one call once read into a ``SpooledBody``: every send of the call (again
/// with an answer to an authentication challenge, or a retry) sends the bytes read the first
/// time, where the stream itself could be read once only. The chain makes one per call whose
/// request has a body stream; the file goes with the call.
final class BodySpool: Sendable {
    /// What an earlier send of the call left of a stream.
    enum State {
        /// Read whole, into this file.
        case read(SpooledBody)
        /// Left in a read that send stopped waiting for (cancelled, or out of time).
        case abandoned
        /// Read in part, and refused with this failure (a limit passed, a read failed).
        case refused(TransportFailure)
    }

    /// The stream and what became of it. The stream is kept only to be told apart by identity.
    private struct Held: @unchecked Sendable {
        let stream: InputStream
        /// What became of it: nil while it is left in a read.
        let state: State?
    }

    private let held = Locked<Held?>(nil)

    /// What an earlier send of this call left of `stream`; nil when none read it.
    func state(of stream: InputStream) -> State? {
        held.withLock { held in
            guard let held, held.stream === stream else { return nil }
            return held.state ?? .abandoned
        }
    }

    /// Keeps `body`, the contents of `stream`, for the call's later sends.
    func keep(_ body: SpooledBody, of stream: InputStream) {
        held.withLock { $0 = Held(stream: stream, state: .read(body)) }
    }

    /// Marks `stream` as read in part and refused with `failure`: later sends of the call fail with it.
    func refuse(_ failure: TransportFailure, of stream: InputStream) {
        held.withLock { $0 = Held(stream: stream, state: .refused(failure)) }
    }

    /// Marks `stream` as left in a read: later sends of the call do not touch it.
    func abandon(_ stream: InputStream) {
        held.withLock { $0 = Held(stream: stream, state: nil) }
    }
}
