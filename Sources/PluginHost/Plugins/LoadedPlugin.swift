import CCurlShim
import CPluginABI
import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A plugin created from a shared library, seen by the provider as an ordinary ``Interceptor``.
///
/// Only C data crosses into the library: the hooks receive handles to the host's request and
/// result, and host callbacks read and edit them.
// Safe as @unchecked Sendable: it holds C pointers (instance, descriptor) that never change after init;
// the plugin's hooks are thread-safe by the ABI's contract.
public final class LoadedPlugin: Interceptor, @unchecked Sendable {
    /// The plugin's name (from its descriptor).
    public let name: String
    /// The library it came from.
    public let library: PluginLibrary
    /// The configuration it was created with (JSON, the bundle's defaults merged with the manifest's);
    /// not public: it may hold secrets.
    let configuration: Data
    private let descriptor: UnsafePointer<ph_plugin_descriptor>
    private let instance: UnsafeMutableRawPointer
    private let table: HostTable
    /// The hooks called on this instance (`PH_HOOK_*` bits): those the descriptor implements,
    /// narrowed by what the instance declared at create (ABI 1.1).
    public let activeHooks: UInt32
    /// Error messages longer than this are truncated (4096 bytes: `PH_THREAD_ERROR_BUFFER_SIZE`).
    static var errorCapacity: Int { Int(PH_THREAD_ERROR_BUFFER_SIZE) }

    /// The `PH_HOOK_*` bits of the hooks `descriptor` implements.
    static func implementedBits(_ d: ph_plugin_descriptor) -> UInt32 {
        var bits: UInt32 = 0
        if d.prepare != nil { bits |= PH_HOOK_PREPARE }
        if d.will_send != nil { bits |= PH_HOOK_WILL_SEND }
        if d.did_receive != nil { bits |= PH_HOOK_DID_RECEIVE }
        if d.process != nil { bits |= PH_HOOK_PROCESS }
        if d.credential != nil { bits |= PH_HOOK_CREDENTIAL }
        return bits
    }

    /// Creates an instance of `library`'s plugin with `configJSON`, its services bound to `services`.
    ///
    /// Throws ``PluginLoadError`` of kind ``PluginLoadError/Kind/createFailed`` with the plugin's message.
    public init(library: PluginLibrary, configJSON: Data, services: PluginServices) throws(PluginLoadError) {
        self.library = library
        self.configuration = configJSON
        self.name = library.info.name
        self.descriptor = library.descriptor
        let table = HostTable(services: BoundServices(services: services, plugin: library.info.name))
        self.table = table
        let implemented = Self.implementedBits(library.descriptor.pointee)
        table.implemented = implemented
        let ((created, message), declared) = table.creating {
            Self.withErrorBuffer { error in
                configJSON.withUnsafeBytes { config in
                    library.descriptor.pointee.create(
                        ph_bytes(data: config.baseAddress?.assumingMemoryBound(to: UInt8.self), len: config.count),
                        UnsafePointer(table.table), error)
                }
            }
        }
        if let declared, declared & ~implemented != 0 {
            if let created { library.descriptor.pointee.destroy?(created) }
            throw PluginLoadError(
                .descriptorInvalid, file: library.path, plugin: library.info.name,
                reason: String(
                    format: "create declared hooks 0x%02x, but the descriptor implements only 0x%02x (extra bits 0x%02x)", declared,
                    implemented, declared & ~implemented))
        }
        guard let created else {
            throw PluginLoadError(
                .createFailed, file: library.path, plugin: library.info.name,
                reason: message.isEmpty ? "create failed without a message" : message)
        }
        instance = created
        activeHooks = declared ?? implemented
    }

    deinit {
        descriptor.pointee.destroy?(instance)
    }

    // MARK: Hooks

    /// Calls the library's `prepare` on the host's request (a request the host did not make is refused).
    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        guard activeHooks & PH_HOOK_PREPARE != 0 else { return .proceed }
        let handle = try Self.requestHandle(request)
        let response = try withContext(context) { try prepare(handle, $0) }
        return response.map { .respond($0) } ?? .proceed
    }

    /// Calls the library's `will_send` on the host's request (a request the host did not make is refused).
    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        guard activeHooks & PH_HOOK_WILL_SEND != 0 else { return }
        let handle = try Self.requestHandle(request)
        try withContext(context) { try willSend(handle, $0) }
    }

    /// Calls the library's `did_receive`.
    public func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        guard activeHooks & PH_HOOK_DID_RECEIVE != 0 else { return }
        let handle = try Self.checkedResultHandle(result)
        try withContext(context) { try didReceive(handle, $0) }
    }

    /// Calls the library's `process`: a replacement or a retry comes back as the action.
    public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        guard activeHooks & PH_HOOK_PROCESS != 0 else { return .proceed }
        let handle = try Self.checkedResultHandle(result)
        return try withContext(context) { try process(handle, $0) }
    }

    // MARK: The chain's direct calls
    // The chain resolves a request's or result's handle and the attempt's C context once per
    // phase and calls these: no views unpacked, no protocol dispatch per hook call.

    /// `prepare` on `handle`'s request; the response the plugin answered with, if any.
    func prepare(_ handle: RequestHandle, _ context: UnsafePointer<ph_context>) throws -> SyntheticResponse? {
        guard activeHooks & PH_HOOK_PREPARE != 0, let hook = descriptor.pointee.prepare else { return nil }
        handle.reset(mayRespond: true)
        try call(.prepare, hook, Self.opaque(handle), context)
        return handle.answer
    }

    /// `willSend` on `handle`'s request.
    func willSend(_ handle: RequestHandle, _ context: UnsafePointer<ph_context>) throws {
        guard activeHooks & PH_HOOK_WILL_SEND != 0, let hook = descriptor.pointee.will_send else { return }
        handle.reset(mayRespond: false)
        try call(.willSend, hook, Self.opaque(handle), context)
    }

    /// `didReceive` on `handle`'s result.
    func didReceive(_ handle: ResultHandle, _ context: UnsafePointer<ph_context>) throws {
        guard activeHooks & PH_HOOK_DID_RECEIVE != 0, let hook = descriptor.pointee.did_receive else { return }
        handle.reset(mayDecide: false)
        try call(.didReceive, hook, Self.opaque(handle), context)
    }

    /// `process` on `handle`'s result: what the plugin decided.
    func process(_ handle: ResultHandle, _ context: UnsafePointer<ph_context>) throws -> ProcessAction {
        guard activeHooks & PH_HOOK_PROCESS != 0, let hook = descriptor.pointee.process else { return .proceed }
        handle.reset(mayDecide: true)
        try call(.process, hook, Self.opaque(handle), context)
        if let retry = handle.retry { return .retry(delay: retry.delay, refresh: retry.refresh) }
        if let replacement = handle.replacement { return .replace(replacement) }
        return .proceed
    }

    /// Calls the library's `credential` for a challenge.
    /// A plugin built before ABI 1.6 is not asked about a proxy's `407`: its challenge cannot
    /// say it is a proxy's (host, port and scheme are the request's), and a plugin that answers
    /// the server would give the proxy the server's password.
    public func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
        guard activeHooks & PH_HOOK_CREDENTIAL != 0, let hook = descriptor.pointee.credential else { return .performDefault }
        if challenge.isProxy && library.info.abiMinor < 6 { return .performDefault }
        let arena = ByteArena()
        var c = ph_challenge()
        c.struct_size = UInt32(MemoryLayout<ph_challenge>.size)
        c.host = arena.bytes(challenge.host)
        c.port = Int32(clamping: challenge.port)
        c.scheme = arena.bytes(challenge.scheme)
        c.realm = arena.bytes(challenge.realm ?? "")
        c.method = arena.bytes(challenge.method)
        c.previous_failure_count = Int32(clamping: challenge.previousFailureCount)
        c.is_proxy = challenge.isProxy ? 1 : 0
        // Room for a long secret (a token used as a Basic password); it was 1,024 bytes.
        let capacity = Self.credentialCapacity
        var user = [UInt8](repeating: 0, count: capacity)
        var password = [UInt8](repeating: 0, count: capacity)
        var userLength = 0
        var passwordLength = 0
        // The arena owns the challenge's bytes: kept alive across the call, whatever the optimiser sees.
        let answer = withExtendedLifetime(arena) {
            withContext(context) { ctx in
                user.withUnsafeMutableBufferPointer { u in
                    password.withUnsafeMutableBufferPointer { p in
                        hook(instance, &c, ctx, u.baseAddress, &userLength, p.baseAddress, &passwordLength, capacity)
                    }
                }
            }
        }
        return CredentialAnswer(abiCode: answer, user: Self.text(user, length: userLength), password: Self.text(password, length: passwordLength))
    }

    /// The bytes the host gives a plugin's `credential` for the user and for the password, each.
    static let credentialCapacity = 64 << 10

    /// The text a plugin wrote into `buffer`, `length` bytes of it clamped to the buffer: a
    /// length past it reads the whole buffer, one past `Int.max` (`size_t` arrives as `Int`,
    /// negative here) none.
    static func text(_ buffer: [UInt8], length: Int) -> String {
        String(decoding: buffer[0..<max(0, min(length, buffer.count))], as: UTF8.self)
    }

    // MARK: Plumbing

    private static func opaque(_ object: AnyObject) -> OpaquePointer {
        OpaquePointer(Unmanaged.passUnretained(object).toOpaque())
    }

    /// The handle of a request the host made (one per request state, shared by the chain's
    /// loaded plugins and both request hooks, which run one after the other).
    static func requestHandle(_ request: InterceptorRequest) throws -> RequestHandle {
        guard let state = exactly(request.backend, RequestState.self) else {
            throw InterceptorError.failed("a loaded plugin can only work on requests made by the host")
        }
        return state.handle
    }

    /// The handle of a result an app hands a loaded plugin (wrapped in an interceptor of its own):
    /// as ``resultHandle(_:)``, but a response the host did not make (an app's own
    /// `ResponseBackend`) is refused, as such a request is: the plugin would read it as status 0
    /// with no fields, and its edits would go nowhere.
    static func checkedResultHandle(_ result: InterceptorResult) throws -> ResultHandle {
        if let response = result.response, exactly(response.backend, ResponseState.self) == nil {
            throw InterceptorError.failed("a loaded plugin can only work on responses made by the host")
        }
        return resultHandle(result)
    }

    /// The handle of a result: the response state's own (shared like a request's), or a new one
    /// for a failure or a response the host did not make.
    static func resultHandle(_ result: InterceptorResult) -> ResultHandle {
        switch result {
        case .response(let response):
            guard let state = exactly(response.backend, ResponseState.self) else {
                return ResultHandle(response: nil, failure: nil, mayDecide: false)
            }
            return state.handle
        case .failure(let failure):
            return ResultHandle(response: nil, failure: failure, mayDecide: false)
        }
    }

    /// Calls a request or result hook with this thread's error buffer (no closure: nothing is
    /// captured, so nothing is retained per call); a non-OK status throws the plugin's message.
    @inline(__always)
    private func call(
        _ name: InterceptorHook,
        _ hook: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<ph_context>?, UnsafeMutablePointer<ph_error_buf>?) -> Int32,
        _ handle: OpaquePointer, _ context: UnsafePointer<ph_context>
    ) throws {
        var error = ph_error_buf(data: ph_thread_error_buffer(), capacity: Self.errorCapacity, len: 0)
        let status = hook(instance, handle, context, &error)
        guard status != PH_OK else { return }
        guard let message = Self.message(in: error) else {
            throw InterceptorError.failed("\(name) failed with status \(status); its message was not written into the host's buffer")
        }
        throw InterceptorError.failed(message.isEmpty ? "\(name) failed with status \(status) and no message" : message)
    }

    /// Runs `body` with a host-provided error buffer and returns its result with the message
    /// written, clamped to the buffer. The buffer is this thread's own, in thread-local storage
    /// (`ph_thread.h`): a 4 KiB temporary per hook call would be a heap allocation (or a
    /// stack-bounds check) each time. A hook call nested in another on one thread (through the
    /// app's log or event handler) gets the next buffer (`HostTable`'s `log` and `emit`).
    private static func withErrorBuffer<R>(_ body: (UnsafeMutablePointer<ph_error_buf>) -> R) -> (R, String) {
        var error = ph_error_buf(data: ph_thread_error_buffer(), capacity: errorCapacity, len: 0)
        let result = body(&error)
        return (result, message(in: error) ?? "its message was not written into the host's buffer")
    }

    /// What a plugin wrote into `error` (this thread's buffer), clamped to the buffer; nil when
    /// the plugin pointed `error->data` elsewhere (its own buffer, a dead stack frame): the host
    /// reads only its own buffer, never memory a plugin points it at.
    private static func message(in error: ph_error_buf) -> String? {
        let buffer = ph_thread_error_buffer()
        guard error.data == buffer else { return nil }
        let length = min(error.len, errorCapacity)
        guard length > 0, let buffer else { return "" }
        return String(decoding: UnsafeBufferPointer(start: buffer, count: length), as: UTF8.self)
    }

    private func withContext<R>(_ context: InterceptorContext, _ body: (UnsafePointer<ph_context>) throws -> R) rethrows -> R {
        let cContext = CContext.of(context)
        return try withExtendedLifetime(cContext) { try body(cContext.pointer) }
    }
}

/// The C view of an ``InterceptorContext``, built once per attempt and shared by every
/// loaded plugin of the chain: the attempt's `ph_context`, pointing into its target's C layout
/// (which the chain keeps for the attempts of an equal target).
// Safe as @unchecked Sendable: its C memory is written once at init and only read afterwards.
final class CContext: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<ph_context>
    /// Where the context's target bytes live (kept alive as long as the context).
    let target: CTargetLayout

    convenience init(_ context: InterceptorContext) {
        self.init(target: CTargetLayout(context.target), requestID: context.requestID, attempt: context.attempt)
    }

    /// The C view `context` carries (the chain's shared one), else one made for it. A context an
    /// interceptor changed (its target, number or attempt set) carries none: a loaded plugin it
    /// hands that context to reads the context as changed.
    static func of(_ context: InterceptorContext) -> CContext {
        exactly(context.hostAttachment, CContext.self) ?? CContext(context)
    }

    init(target: CTargetLayout, requestID: UInt64, attempt: Int) {
        self.target = target
        pointer = .allocate(capacity: 1)
        pointer.initialize(
            to: ph_context(
                struct_size: UInt32(MemoryLayout<ph_context>.size), request_id: requestID,
                attempt: Int32(clamping: attempt), target_method: target.names[0],
                target_base_url: target.values[0], target_path: target.names[1],
                option_count: target.optionCount, option_keys: UnsafePointer(target.names + 2),
                option_values: UnsafePointer(target.values + 2), target_serial: target.serial))
    }

    deinit {
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }
}

/// A target laid out in C bytes for `ph_context`: method, base URL and path, then the plugin
/// options sorted by key; one block of memory (``PairLayout``), made once for the attempts of a
/// target (the chain keeps the last one) and never changed.
// Safe as @unchecked Sendable: its C memory is written once at init and only read afterwards.
final class CTargetLayout: @unchecked Sendable {
    let names: UnsafeMutablePointer<ph_bytes>
    let values: UnsafeMutablePointer<ph_bytes>
    let optionCount: Int
    /// This layout's `ph_context.target_serial` (ABI 1.4): unique in the process, never 0. A
    /// plugin that sees the serial of the target it decoded last reuses what it decoded.
    let serial: UInt64
    private let block: UnsafeMutableRawPointer

    /// The last serial given; layouts are made once per target the chain changes to, not per request.
    private static let serials = Locked(UInt64(0))

    init(_ target: TargetInfo) {
        serial = Self.serials.withLock {
            $0 += 1
            return $0
        }
        optionCount = target.pluginOptions.count
        // Method and base URL, path and nothing, then the options sorted by key.
        let options = target.pluginOptions.sorted { $0.key < $1.key }.map { HTTPHeader(name: $0.key, value: $0.value) }
        (block, names, values) = PairLayout.allocate(
            [HTTPHeader(name: target.method, value: target.baseURL), HTTPHeader(name: target.path, value: "")] + options)
    }

    deinit {
        block.deallocate()
    }
}

/// `object` as a `T` when its class is exactly `T` (a final class): a compare of two type
/// pointers, where `as?` is a call into the runtime's general cast on every hook call.
@inline(__always)
func exactly<T: AnyObject>(_ object: AnyObject?, _ type: T.Type) -> T? {
    guard let object, ObjectIdentifier(Swift.type(of: object)) == ObjectIdentifier(T.self) else { return nil }
    return unsafeDowncast(object, to: T.self)
}
