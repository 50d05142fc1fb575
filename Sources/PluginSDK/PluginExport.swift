import CPluginABI
import Foundation

/// An interceptor that can be exported from a shared library as a plugin.
///
/// ```swift
/// import PluginSDK
///
/// struct Stamp: ExportablePlugin {
///     static let pluginName = "stamp"
///     static let pluginVersion = "1.0.0"
///     static let pluginSummary = "Adds X-Stamp to every request"
///     let value: String
///     init(configuration: PluginConfiguration, host: any HostServices) throws {
///         value = try configuration.string("value", default: "on") ?? "on"
///     }
///     func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
///         try request.setHeader("X-Stamp", value)
///         return .proceed
///     }
/// }
///
/// @_cdecl("pluginhost_plugin_v1")
/// public func pluginhostPlugin() -> UnsafeRawPointer { PluginExport.descriptor(for: Stamp.self) }
/// ```
public protocol ExportablePlugin: Interceptor {
    /// The name in manifests and bundles, e.g. `logger`.
    static var pluginName: String { get }
    /// The plugin's version, e.g. `1.0.0`.
    static var pluginVersion: String { get }
    /// One line saying what the plugin does.
    static var pluginSummary: String { get }
    /// An SPDX license identifier; default `MIT`.
    static var pluginLicense: String { get }
    /// The hooks the plugin implements; only these are exported (the others are NULL in the
    /// descriptor, so the host never calls across the ABI for them). Default: all five.
    static var implementedHooks: Set<InterceptorHook> { get }
    /// Creates an instance; throw (ideally a ``PluginConfigurationError``) to refuse the configuration.
    init(configuration: PluginConfiguration, host: any HostServices) throws
    /// The hooks this instance needs, a subset of ``implementedHooks``: the host never calls the
    /// others on it (ABI 1.1 `declare_hooks`), e.g. a logger configured `off` needs none. Default
    /// nil: every implemented hook.
    var activeHooks: Set<InterceptorHook>? { get }
}

extension ExportablePlugin {
    /// Default: `MIT`.
    public static var pluginLicense: String { "MIT" }
    /// Default: every hook.
    public static var implementedHooks: Set<InterceptorHook> { Set(InterceptorHook.allCases) }
    /// Default: nil, every implemented hook.
    public var activeHooks: Set<InterceptorHook>? { nil }
    /// The plugin name.
    public var name: String { Self.pluginName }
}

/// The machine this code was built for, shared by the build signature and the host's default
/// `User-Agent`.
package enum Platform {
    /// `x86_64`, `arm64` or `unknown`.
    package static var architecture: String {
        #if arch(x86_64)
        return "x86_64"
        #elseif arch(arm64)
        return "arm64"
        #else
        return "unknown"
        #endif
    }

    /// `Linux`, `macOS`, `iOS` or `Darwin`.
    package static var system: String {
        #if os(Linux)
        return "Linux"
        #elseif os(macOS)
        return "macOS"
        #elseif os(iOS)
        return "iOS"
        #else
        return "Darwin"
        #endif
    }
}

/// Builds the C descriptor behind a library's one entry point.
public enum PluginExport {
    /// The compiler and target this SDK was built with, e.g. `swift-6.3 x86_64-linux`.
    public static let buildSignature: String = {
        #if compiler(>=6.3)
        let compiler = "swift-6.3"
        #elseif compiler(>=6.2)
        let compiler = "swift-6.2"
        #elseif compiler(>=6.1)
        let compiler = "swift-6.1"
        #else
        let compiler = "swift-6.0"
        #endif
        return "\(compiler) \(Platform.architecture)-\(Platform.system.lowercased())"
    }()

    /// The `PH_HOOK_*` bits of `hooks`.
    public static func hookBits(_ hooks: Set<InterceptorHook>) -> UInt32 {
        var bits: UInt32 = 0
        for hook in hooks {
            switch hook {
            case .prepare: bits |= PH_HOOK_PREPARE
            case .willSend: bits |= PH_HOOK_WILL_SEND
            case .didReceive: bits |= PH_HOOK_DID_RECEIVE
            case .process: bits |= PH_HOOK_PROCESS
            case .credential: bits |= PH_HOOK_CREDENTIAL
            }
        }
        return bits
    }

    /// The ABI version this SDK speaks.
    public static let abiVersion = (major: Int(PH_ABI_MAJOR), minor: Int(PH_ABI_MINOR))

    /// The static descriptor for `type`. Call it from the library's `pluginhost_plugin_v1`
    /// entry point; it allocates once and runs no plugin code.
    public static func descriptor<P: ExportablePlugin>(for type: P.Type) -> UnsafeRawPointer {
        exportState.withLock { state in
            if let existing = state.descriptor, let pointer = UnsafeRawPointer(bitPattern: existing) { return pointer }
            state.name = P.pluginName
            state.factory = { configuration, host in
                let plugin = try P(configuration: configuration, host: host)
                return (plugin, plugin.activeHooks)
            }
            state.hooks = P.implementedHooks
            let descriptor = makeDescriptor(for: P.self)
            state.descriptor = UInt(bitPattern: descriptor)
            return UnsafeRawPointer(descriptor)
        }
    }

    /// Allocates the descriptor of `P` (once per library).
    private static func makeDescriptor<P: ExportablePlugin>(for type: P.Type) -> UnsafeMutablePointer<ph_plugin_descriptor> {
        let hooks = P.implementedHooks
        let descriptor = UnsafeMutablePointer<ph_plugin_descriptor>.allocate(capacity: 1)
        descriptor.initialize(
            to: ph_plugin_descriptor(
                struct_size: UInt32(MemoryLayout<ph_plugin_descriptor>.size),
                abi_major: UInt16(PH_ABI_MAJOR), abi_minor: UInt16(PH_ABI_MINOR),
                name: strdup(P.pluginName), version: strdup(P.pluginVersion), summary: strdup(P.pluginSummary),
                license: strdup(P.pluginLicense), build_signature: strdup(buildSignature),
                create: sdkCreate, destroy: sdkDestroy,
                prepare: hooks.contains(.prepare) ? sdkPrepare : nil, will_send: hooks.contains(.willSend) ? sdkWillSend : nil,
                did_receive: hooks.contains(.didReceive) ? sdkDidReceive : nil, process: hooks.contains(.process) ? sdkProcess : nil,
                credential: hooks.contains(.credential) ? sdkCredential : nil))
        return descriptor
    }
}

/// The one plugin type of this library and its descriptor (kept as an address: it is allocated
/// once and never freed).
private struct ExportState: Sendable {
    var descriptor: UInt?
    var factory: (@Sendable (PluginConfiguration, any HostServices) throws -> (any Interceptor, Set<InterceptorHook>?))?
    var name = ""
    /// The hooks the descriptor exports.
    var hooks: Set<InterceptorHook> = []
    /// Whether an instance was checked for hooks left out of `hooks`.
    var probed = false
}

private let exportState = Locked(ExportState())

/// A created instance: the interceptor and the host table it talks to.
private final class ExportedInstance {
    let interceptor: any Interceptor
    let api: UnsafePointer<ph_host_api>
    let services: CHostServices

    init(interceptor: any Interceptor, api: UnsafePointer<ph_host_api>, services: CHostServices) {
        self.interceptor = interceptor
        self.api = api
        self.services = services
        let blank = Self.blankContext(services)
        self.blank = blank
        recent = TakenSlot({ Recent(context: blank) }, spare: { Recent(context: blank) })
    }

    static func from(_ pointer: UnsafeMutableRawPointer?) -> ExportedInstance {
        Unmanaged<ExportedInstance>.fromOpaque(pointer!).takeUnretainedValue()
    }

    /// What the last hooks used: the context built, reused while hooks of the same attempt follow
    /// each other, and the views of the last request and result handles (they hold nothing but the
    /// handle: a view of a handle is as good as a new one, and one no one else holds is pointed at
    /// the next handle instead of a view made per plugin and request).
    private struct Recent {
        /// The last context (a blank one until a hook gets a C context), the C context it was read
        /// from, and its target's options in the C context's order. Most requests of an app go to a
        /// few targets: the context for a target equal to the last one's is that context with the
        /// request's number and attempt (no allocation, no strings or options decoded again for
        /// every plugin and request).
        var context: InterceptorContext
        /// The C context `context` was read from; nil while it is the blank one.
        var pointer: UnsafePointer<ph_context>?
        var options: [(key: String, value: String)] = []
        /// The `target_serial` of the context the last one was built from (ABI 1.4; 0: none): a
        /// context with the same serial has the same target bytes, and is not compared.
        var serial: UInt64 = 0
        /// The last request hooks received, and the last response (never a failure).
        var request: InterceptorRequest?
        var result: InterceptorResult?
        /// The handles `request` and `result` were lent for last (nil: not known). A hook on the
        /// handle of the hook before it finds its view here, without reading the view's own slot
        /// (memory of its own, a load that waited on the cache in every hook call). Only a lend
        /// here points these views at another handle: a view a plugin kept is never moved.
        var requestHandle: OpaquePointer?
        var resultHandle: OpaquePointer?
        /// The request each was lent for: a handle at the same address in another request is
        /// another request's state (the last one's freed), and is lent anew.
        var requestLentFor: UInt64 = 0
        var resultLentFor: UInt64 = 0
    }

    /// One per hook call that may run at the same moment, each taken by one call at a time, which
    /// passes its context on borrowed (a call that finds them all taken starts from a blank one and
    /// keeps nothing).
    private let recent: TakenSlot<Recent>
    /// The context of a hook called without one, and the context a value starts with.
    private let blank: InterceptorContext
    /// The header lists this instance's views read last.
    private let headerMemo = HeaderMemo()

    /// Runs `body` with the context of `pointer` and a view of a request handle.
    @inline(__always)
    func withRequest<R>(
        _ handle: OpaquePointer, _ pointer: UnsafePointer<ph_context>?, _ body: (InterceptorRequest, InterceptorContext) throws -> R
    ) rethrows -> R {
        try recent.withTaken { recent in
            update(&recent, pointer)
            let id = recent.context.requestID
            if recent.requestHandle != handle || recent.request == nil || recent.requestLentFor != id {
                recent.request.lend(handle, api: api, memo: headerMemo, fresh: recent.requestLentFor != id)
                recent.requestHandle = handle
                recent.requestLentFor = id
            }
            // A request the plugin kept would reach the handle's state after it is freed. (Checked
            // after the call's statement, which holds the request until it ends: not in a defer.)
            do {
                let outcome = try body(recent.request!, recent.context)
                if recent.request.retireIfKept() { recent.requestHandle = nil }
                return outcome
            } catch {
                if recent.request.retireIfKept() { recent.requestHandle = nil }
                throw error
            }
        }
    }

    /// Runs `body` with the context of `pointer` and a view of a result handle.
    @inline(__always)
    func withResult<R>(
        _ handle: OpaquePointer, _ pointer: UnsafePointer<ph_context>?, _ body: (InterceptorResult, InterceptorContext) throws -> R
    ) rethrows -> R {
        var message = ph_bytes()
        let kind = api.pointee.result_failure(handle, &message)
        return try recent.withTaken { recent in
            update(&recent, pointer)
            guard kind == PH_FAILURE_NONE else {
                let failure = TransportFailure(kind: TransportFailureKind(abiCode: kind), message: CBytes.string(message))
                return try body(.failure(failure), recent.context)
            }
            let id = recent.context.requestID
            if recent.resultHandle != handle || recent.result == nil || recent.resultLentFor != id {
                recent.result.lend(handle, api: api, memo: headerMemo, fresh: recent.resultLentFor != id)
                recent.resultHandle = handle
                recent.resultLentFor = id
            }
            do {
                let outcome = try body(recent.result!, recent.context)
                if recent.result.retireIfKept() { recent.resultHandle = nil }
                return outcome
            } catch {
                if recent.result.retireIfKept() { recent.resultHandle = nil }
                throw error
            }
        }
    }

    /// The context of `pointer` alone.
    func context(_ pointer: UnsafePointer<ph_context>?) -> InterceptorContext {
        recent.withTaken { recent in
            update(&recent, pointer)
            return recent.context
        }
    }

    /// Makes `recent.context` the context of `pointer`: kept as it is for the attempt of the hook
    /// before (most calls: no call made for it), else ``change(_:_:)``. The serial is compared
    /// too: a host may free a context and make the next, of another target, at the same address.
    @inline(__always)
    private func update(_ recent: inout Recent, _ pointer: UnsafePointer<ph_context>?) {
        if let pointer, recent.pointer == pointer, recent.context.requestID == pointer.pointee.request_id,
            recent.context.attempt == Int(pointer.pointee.attempt), Self.serial(pointer) == recent.serial
        {
            return
        }
        change(&recent, pointer)
    }

    /// Makes `recent.context` the context of `pointer`: changed in place (no copy of the context)
    /// when it is of the same target.
    @inline(never)
    private func change(_ recent: inout Recent, _ pointer: UnsafePointer<ph_context>?) {
        guard let pointer else {
            // The blank context, everything read from a C context with it; the views stay.
            if recent.pointer != nil { recent = Recent(context: blank, request: recent.request.take(), result: recent.result.take()) }
            return
        }
        let requestID = pointer.pointee.request_id
        let attempt = Int(pointer.pointee.attempt)
        let serial = Self.serial(pointer)
        if recent.pointer != nil {
            if recent.pointer == pointer, recent.context.requestID == requestID, recent.context.attempt == attempt, serial == recent.serial {
                return
            }
            if serial != 0 ? serial == recent.serial : Self.target(pointer, equals: recent.context.target, options: recent.options) {
                recent.context.requestID = requestID
                recent.context.attempt = attempt
                recent.pointer = pointer
                return
            }
        }
        // Field by field, never the whole struct: an older host's context is shorter than this one.
        let c = pointer
        let options = (0..<c.pointee.option_count).map {
            (key: CBytes.string(c.pointee.option_keys[$0]), value: CBytes.string(c.pointee.option_values[$0]))
        }
        let target = TargetInfo(
            method: CBytes.string(c.pointee.target_method), baseURL: CBytes.string(c.pointee.target_base_url),
            path: CBytes.string(c.pointee.target_path),
            pluginOptions: Dictionary(options, uniquingKeysWith: { _, last in last }))
        recent.context = InterceptorContext(target: target, requestID: requestID, attempt: attempt, services: services)
        recent.pointer = pointer
        recent.options = options
        recent.serial = serial
    }

    /// The context's `target_serial`, when its host gives one (ABI 1.4: the struct reaches it);
    /// else 0, and targets are compared byte for byte.
    @inline(__always)
    static func serial(_ pointer: UnsafePointer<ph_context>) -> UInt64 {
        Int(pointer.pointee.struct_size) >= contextSizeWithSerial ? pointer.pointee.target_serial : 0
    }

    /// `PH_CONTEXT_SIZE_V1_4`: the size of a context that carries `target_serial`.
    /// (Computed where it is read: a stored `static let` was a lazily made global, checked on every
    /// hook call.)
    @inline(__always)
    static var contextSizeWithSerial: Int { MemoryLayout<ph_context>.offset(of: \ph_context.target_serial)! + MemoryLayout<UInt64>.size }

    /// Whether the target of a C context is `target`, whose options were read from a C context in
    /// the order `options` lists them: byte for byte, options in that same order (the host lays
    /// them out sorted by key; a host that does not is only decoded more often).
    private static func target(_ pointer: UnsafePointer<ph_context>, equals target: TargetInfo, options: [(key: String, value: String)]) -> Bool {
        let c = pointer
        guard c.pointee.option_count == options.count, CBytes.equal(c.pointee.target_method, target.method),
            CBytes.equal(c.pointee.target_path, target.path), CBytes.equal(c.pointee.target_base_url, target.baseURL)
        else { return false }
        for index in options.indices {
            guard CBytes.equal(c.pointee.option_keys[index], options[index].key), CBytes.equal(c.pointee.option_values[index], options[index].value)
            else {
                return false
            }
        }
        return true
    }

    /// The context of a hook called without one (a host that breaks the ABI), and the one a kept
    /// value starts with: an empty target.
    private static func blankContext(_ services: CHostServices) -> InterceptorContext {
        InterceptorContext(target: TargetInfo(method: "", baseURL: "", path: ""), requestID: 0, attempt: 1, services: services)
    }
}

/// The message for an error thrown by plugin code.
private func message(of error: any Error) -> String {
    if let error = error as? InterceptorError { return error.description }
    return String(describing: error)
}

private let sdkCreate: @convention(c) (ph_bytes, UnsafePointer<ph_host_api>?, UnsafeMutablePointer<ph_error_buf>?) -> UnsafeMutableRawPointer? = {
    config, api, errorBuffer in
    // The probe is marked done only once it ran and passed (below): a `create` that failed
    // before it (a configuration refused) or ran beside it leaves it to the next.
    let (factory, name, hooks, probed) = exportState.withLock { state in (state.factory, state.name, state.hooks, state.probed) }
    guard let api, let factory else {
        CBytes.write("the plugin was created without a host table or before its descriptor was read", to: errorBuffer)
        return nil
    }
    let services = CHostServices(api: api)
    do {
        let configuration = try PluginConfiguration(plugin: name, json: CBytes.array(config))
        let (interceptor, active) = try factory(configuration, services)
        // Once per library: a hook the plugin implements but does not export would silently never run.
        if !probed {
            let unlisted = HookProbe.unlistedHooks(of: interceptor, listed: hooks)
            guard unlisted.isEmpty else {
                let names = unlisted.map(\.rawValue).joined(separator: ", ")
                throw InterceptorError.failed(
                    "plugin \(name) implements \(names) but its implementedHooks leaves "
                        + "\(unlisted.count == 1 ? "it" : "them") out: loaded, \(unlisted.count == 1 ? "it" : "they") "
                        + "would never run; add \(unlisted.count == 1 ? "it" : "them") to implementedHooks")
            }
            exportState.withLock { $0.probed = true }
        }
        // Hooks this configuration makes inert are not called at all (ABI 1.1).
        if let active, api.pointee.abi_minor >= 1, let declare = api.pointee.declare_hooks {
            guard declare(api, PluginExport.hookBits(active)) == PH_OK else {
                throw InterceptorError.failed("the host refused the hooks this instance declared: \(active.map(\.rawValue).sorted())")
            }
        }
        return Unmanaged.passRetained(ExportedInstance(interceptor: interceptor, api: api, services: services)).toOpaque()
    } catch {
        CBytes.write(message(of: error), to: errorBuffer)
        // No instance: the host frees the table when this returns, and no destroy follows.
        services.gate.close()
        return nil
    }
}

private let sdkDestroy: @convention(c) (UnsafeMutableRawPointer?) -> Void = { instance in
    guard let instance else { return }
    let exported = Unmanaged<ExportedInstance>.fromOpaque(instance)
    let services = exported.takeUnretainedValue().services
    // The plugin's own deinit may still call the host; its tasks may hold the services longer.
    exported.release()
    services.gate.close()
}

// The hooks' entry points: the instance is borrowed for the call (the host holds it until
// destroy), so no reference count is taken per call.

private let sdkPrepare:
    @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<ph_context>?, UnsafeMutablePointer<ph_error_buf>?) -> Int32 = {
        pointer, handle, context, errorBuffer in
        ExportedInstance.enter(pointer, handle, errorBuffer) { instance, request in try instance.prepare(request, context) }
    }

private let sdkWillSend:
    @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<ph_context>?, UnsafeMutablePointer<ph_error_buf>?) -> Int32 = {
        pointer, handle, context, errorBuffer in
        ExportedInstance.enter(pointer, handle, errorBuffer) { instance, request in try instance.willSend(request, context) }
    }

private let sdkDidReceive:
    @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<ph_context>?, UnsafeMutablePointer<ph_error_buf>?) -> Int32 = {
        pointer, handle, context, errorBuffer in
        ExportedInstance.enter(pointer, handle, errorBuffer) { instance, result in try instance.didReceive(result, context) }
    }

private let sdkProcess:
    @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<ph_context>?, UnsafeMutablePointer<ph_error_buf>?) -> Int32 = {
        pointer, handle, context, errorBuffer in
        ExportedInstance.enter(pointer, handle, errorBuffer) { instance, result in try instance.process(result, context) }
    }

extension ExportedInstance {
    /// Runs a hook on the instance at `pointer`, borrowed for the call, with its request or result
    /// handle; a call without either fails, and an error the plugin throws goes into the host's
    /// buffer.
    @inline(__always)
    fileprivate static func enter(
        _ pointer: UnsafeMutableRawPointer?, _ handle: OpaquePointer?, _ errorBuffer: UnsafeMutablePointer<ph_error_buf>?,
        _ body: (ExportedInstance, OpaquePointer) throws -> Int32
    ) -> Int32 {
        guard let pointer, let handle else { return PH_ERROR }
        return Unmanaged<ExportedInstance>.fromOpaque(pointer)._withUnsafeGuaranteedRef { instance in
            do {
                return try body(instance, handle)
            } catch {
                CBytes.write(message(of: error), to: errorBuffer)
                return PH_ERROR
            }
        }
    }

    /// Hands `response` to the host through `send` (status, fields and body as borrowed C bytes).
    /// The host checks the answer; when it refuses one, this throws what is wrong with it
    /// (``HeaderValidation/check(_:)``), as the chain does for an interceptor compiled in (checked
    /// here first, every answer was checked twice).
    private static func handOver(
        _ response: SyntheticResponse,
        _ send: (Int32, UnsafePointer<ph_bytes>?, UnsafePointer<ph_bytes>?, Int, ph_bytes) -> Int32
    ) throws -> Int32 {
        let headers = response.headers
        // By index: no list of name and value pairs made for the call.
        let status = CBytes.withPairs(
            count: headers.count, { (headers[$0].name, headers[$0].value) },
            { names, values, count in
                CBytes.with(response.body) { send(Int32(clamping: response.statusCode), names, values, count, $0) }
            })
        if status == PH_INVALID { try HeaderValidation.check(response) }
        // A hook returns PH_OK, or PH_ERROR with a message (pluginhost.h): a refusal the checks
        // here do not explain is still one, said so.
        guard status == PH_OK else { throw InterceptorError.failed("the host refused the response (status \(status))") }
        return status
    }

    /// `prepare`: the plugin's answer goes to the host as the request's response.
    fileprivate func prepare(_ request: OpaquePointer, _ context: UnsafePointer<ph_context>?) throws -> Int32 {
        let action = try withRequest(request, context) { try interceptor.prepare($0, context: $1) }
        guard case .respond(let response) = action else { return PH_OK }
        return try Self.handOver(response) { api.pointee.request_respond(request, $0, $1, $2, $3, $4) }
    }

    fileprivate func willSend(_ request: OpaquePointer, _ context: UnsafePointer<ph_context>?) throws -> Int32 {
        try withRequest(request, context) { try interceptor.willSend($0, context: $1) }
        return PH_OK
    }

    fileprivate func didReceive(_ result: OpaquePointer, _ context: UnsafePointer<ph_context>?) throws -> Int32 {
        try withResult(result, context) { try interceptor.didReceive($0, context: $1) }
        return PH_OK
    }

    /// `process`: a replacement or a retry goes to the host.
    fileprivate func process(_ result: OpaquePointer, _ context: UnsafePointer<ph_context>?) throws -> Int32 {
        switch try withResult(result, context, { try interceptor.process($0, context: $1) }) {
        case .proceed:
            return PH_OK
        case .replace(let response):
            return try Self.handOver(response) { api.pointee.result_replace(result, $0, $1, $2, $3, $4) }
        case .retry(let delay, let refresh):
            try ProcessAction.checkRetryDelay(delay)
            let status = CBytes.with(refresh?.key ?? "") { key in
                CBytes.with(refresh?.staleValue ?? "") { stale in
                    api.pointee.result_retry(result, delay, key, stale, refresh?.staleValue == nil ? 0 : 1)
                }
            }
            guard status == PH_OK else { throw InterceptorError.failed("the host refused the retry (status \(status))") }
            return status
        }
    }
}

/// A host's `ph_challenge` as an ``AuthenticationChallenge``, read field by field. `is_proxy`
/// (ABI 1.6) is read only from a host of 1.6 or later: it sits in what was a 1.5 challenge's tail
/// padding, and `struct_size` is the same on a 64-bit host of either minor.
enum ChallengeReading {
    static func field<T>(_ challenge: UnsafePointer<ph_challenge>, _ offset: Int?, as type: T.Type) -> T {
        UnsafeRawPointer(challenge).load(fromByteOffset: offset!, as: type)
    }

    static func question(_ c: UnsafePointer<ph_challenge>, hostMinor: UInt16) -> AuthenticationChallenge {
        let layout = MemoryLayout<ph_challenge>.self
        let size = Int(field(c, layout.offset(of: \.struct_size), as: UInt32.self))
        let proxyOffset = layout.offset(of: \.is_proxy)!
        let isProxy =
            hostMinor >= 6 && size >= proxyOffset + MemoryLayout<Int32>.size && field(c, proxyOffset, as: Int32.self) != 0
        func text(_ path: KeyPath<ph_challenge, ph_bytes>) -> String { CBytes.string(field(c, layout.offset(of: path), as: ph_bytes.self)) }
        func number(_ path: KeyPath<ph_challenge, Int32>) -> Int { Int(field(c, layout.offset(of: path), as: Int32.self)) }
        let realm = text(\.realm)
        return AuthenticationChallenge(
            host: text(\.host), port: number(\.port), scheme: text(\.scheme), realm: realm.isEmpty ? nil : realm, method: text(\.method),
            previousFailureCount: number(\.previous_failure_count), isProxy: isProxy)
    }
}

private let sdkCredential:
    @convention(c) (
        UnsafeMutableRawPointer?, UnsafePointer<ph_challenge>?, UnsafePointer<ph_context>?,
        UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<UInt8>?,
        UnsafeMutablePointer<Int>?, Int
    ) -> Int32 = { instance, challenge, context, user, userLength, password, passwordLength, capacity in
        guard let instance, let challenge else { return PH_CREDENTIAL_DEFAULT }
        let box = ExportedInstance.from(instance)
        let question = ChallengeReading.question(challenge, hostMinor: box.api.pointee.abi_minor)
        let answer = box.interceptor.credential(for: question, context: box.context(context))
        guard case .useCredential(let name, let secret) = answer else { return answer.abiCode }
        let nameBytes = Array(name.utf8)
        let secretBytes = Array(secret.utf8)
        guard nameBytes.count <= capacity, secretBytes.count <= capacity, let user, let password else {
            // Not silently: the same plugin compiled in would have answered.
            box.services.log(
                .error,
                "credential: the answer does not fit the host's buffers (\(capacity) bytes each; user \(nameBytes.count), "
                    + "password \(secretBytes.count) bytes): the challenge is rejected")
            return CredentialAnswer.rejectProtectionSpace.abiCode
        }
        nameBytes.withUnsafeBufferPointer { if !$0.isEmpty { user.update(from: $0.baseAddress!, count: $0.count) } }
        secretBytes.withUnsafeBufferPointer { if !$0.isEmpty { password.update(from: $0.baseAddress!, count: $0.count) } }
        userLength?.pointee = nameBytes.count
        passwordLength?.pointee = secretBytes.count
        return answer.abiCode
    }
