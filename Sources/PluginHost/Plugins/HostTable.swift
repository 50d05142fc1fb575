import CCurlShim
import CPluginABI
import Dispatch
import Foundation
import PluginSDK

/// Copies of byte strings handed to a plugin, bump-allocated in a few chunks that never move;
/// freed when the owner (a hook call's handle) goes away.
final class ByteArena {
    private var chunks: [UnsafeMutableRawPointer] = []
    private var cursor: UnsafeMutableRawPointer?
    private var left = 0
    private static let chunkSize = 2048

    func bytes(_ string: String) -> ph_bytes {
        var string = string
        return string.withUTF8 { bytes($0) }
    }

    func bytes(_ data: Data) -> ph_bytes {
        data.withUnsafeBytes { bytes(UnsafeBufferPointer(start: $0.baseAddress?.assumingMemoryBound(to: UInt8.self), count: $0.count)) }
    }

    func bytes(_ source: UnsafeBufferPointer<UInt8>) -> ph_bytes {
        let count = source.count
        let target: UnsafeMutableRawPointer
        if count > Self.chunkSize / 2 {
            target = UnsafeMutableRawPointer.allocate(byteCount: max(1, count), alignment: 1)
            chunks.append(target)
        } else {
            if count > left || cursor == nil {
                let chunk = UnsafeMutableRawPointer.allocate(byteCount: Self.chunkSize, alignment: 1)
                chunks.append(chunk)
                cursor = chunk
                left = Self.chunkSize
            }
            target = cursor!
            cursor = target + count
            left -= count
        }
        if let base = source.baseAddress, count > 0 { target.copyMemory(from: base, byteCount: count) }
        return ph_bytes(data: target.assumingMemoryBound(to: UInt8.self), len: count)
    }

    deinit {
        for chunk in chunks { chunk.deallocate() }
    }
}

/// The request a plugin hook works on: the host's request state itself, which also keeps what
/// the hook decided (no object of its own: one allocation fewer per request).
typealias RequestHandle = RequestState

extension RequestState {
    /// Ready for the next hook (hooks of one request run one after the other): whether it may
    /// answer, and no answer yet.
    func reset(mayRespond: Bool) {
        self.mayRespond = mayRespond
        answer = nil
    }

    /// Runs `body` on the state `pointer` is the handle of, borrowed for the call: the chain holds
    /// the state through the hook call, so an accessor counts no reference (a retain and a release
    /// on every call, taken as a strong reference).
    /// A NULL handle is none: `body` does not run and the answer is `none`.
    @inline(__always)
    static func with<R>(_ pointer: OpaquePointer?, or none: R, _ body: (RequestHandle) throws -> R) rethrows -> R {
        guard let pointer else { return none }
        return try Unmanaged<RequestHandle>.fromOpaque(UnsafeRawPointer(pointer))._withUnsafeGuaranteedRef(body)
    }

    /// ``with(_:or:_:)`` for a `body` that answers nothing: it does not run for a NULL handle.
    @inline(__always)
    static func with(_ pointer: OpaquePointer?, _ body: (RequestHandle) throws -> Void) rethrows {
        try with(pointer, or: (), body)
    }
}

/// Name/value pairs as C bytes in one allocation: a request's or response's header fields,
/// copied once per version of the list and read by every hook call until the list changes
/// (lookups compare bytes, no string is made for the name asked, and return borrowed pointers
/// into this copy). The slots and bytes are tail-allocated in the object (``PairLayout``).
final class CBytePairs: ManagedBuffer<CBytePairs.Slots, UInt8> {
    /// Where the slots are, in the object's own tail.
    struct Slots {
        var count: Int
        var names: UnsafeMutablePointer<ph_bytes>
        var values: UnsafeMutablePointer<ph_bytes>
    }

    var count: Int { slots.count }

    /// The slots, read through the header's pointer: `header` itself begins a dynamic
    /// exclusivity access on every read (a snapshot made four).
    @inline(__always)
    private var slots: Slots { withUnsafeMutablePointerToHeader { $0.pointee } }

    #if DEBUG
    /// In debug builds the bytes are overwritten as the copy goes: a plugin (or the host) that
    /// reads them after the list changed reads 0xDD bytes in tests, not the old fields by luck.
    /// (A copy of a chain's shared original fields, ``OriginalFieldsMemo``, goes only with the
    /// last request that holds it: a read after the first edit of such a request is caught by the
    /// tests of requests made without the memo.)
    deinit {
        let capacity = capacity
        withUnsafeMutablePointerToElements { $0.update(repeating: 0xDD, count: capacity) }
    }
    #endif

    /// A copy of `headers`.
    static func make(_ headers: [HTTPHeader]) -> CBytePairs {
        // Room to align the slots wherever the tail begins.
        let room = MemoryLayout<ph_bytes>.alignment - 1 + PairLayout.size(of: headers)
        let made = create(minimumCapacity: max(1, room)) { buffer in
            buffer.withUnsafeMutablePointerToElements { tail in
                let (_, names, values) = PairLayout.place(headers, in: UnsafeMutableRawPointer(tail))
                return Slots(count: headers.count, names: names, values: values)
            }
        }
        // `create` on this class makes an instance of it.
        return unsafeDowncast(made, to: CBytePairs.self)
    }

    /// Writes the first `capacity` names and values into the caller's arrays (borrowed: valid
    /// while this copy lives) and returns how many pairs there are: the snapshot calls'
    /// contract (`request_headers`, `result_headers`, `result_request_headers`).
    func snapshot(_ names: UnsafeMutablePointer<ph_bytes>?, _ values: UnsafeMutablePointer<ph_bytes>?, _ capacity: Int) -> Int {
        let slots = slots
        if let names, let values {
            // A capacity past `Int.max` (`size_t` arrives as `Int`) is negative here, and room for all.
            let written = capacity < 0 ? slots.count : min(slots.count, capacity)
            names.update(from: slots.names, count: written)
            values.update(from: slots.values, count: written)
        }
        return slots.count
    }

    /// Writes the `index`-th field's name and value (borrowed: valid while this copy lives): the
    /// contract of `request_header_at` and `result_header_at`. PH_NOT_FOUND past the last field,
    /// or for an index past `Int.max` (`size_t` arrives as `Int`: negative here).
    func pair(at index: Int, _ name: UnsafeMutablePointer<ph_bytes>?, _ value: UnsafeMutablePointer<ph_bytes>?) -> ph_status {
        let slots = slots
        guard index >= 0, index < slots.count else { return PH_NOT_FOUND }
        name?.pointee = slots.names[index]
        value?.pointee = slots.values[index]
        return PH_OK
    }

    /// The `index`-th value (0-based) of the field `name`, compared as ASCII without case.
    func value(named name: ph_bytes, index: Int) -> ph_bytes? {
        let slots = slots
        var seen = 0
        for position in 0..<slots.count where Self.equal(slots.names[position], name) {
            if seen == index { return slots.values[position] }
            seen += 1
        }
        return nil
    }

    private static func equal(_ a: ph_bytes, _ b: ph_bytes) -> Bool {
        guard a.len == b.len else { return false }
        guard a.len > 0 else { return true }
        guard let x = a.data, let y = b.data else { return false }
        for offset in 0..<a.len {
            let l = x[offset]
            let r = y[offset]
            if l == r { continue }
            if HTTPHeader.asciiLowercased(l) != HTTPHeader.asciiLowercased(r) { return false }
        }
        return true
    }
}

/// How name/value pairs are laid out in C bytes.
enum PairLayout {
    /// One block of memory: the slots (names, then values), then the bytes; the caller
    /// deallocates `block`.
    static func allocate(_ pairs: [HTTPHeader]) -> (
        block: UnsafeMutableRawPointer, names: UnsafeMutablePointer<ph_bytes>, values: UnsafeMutablePointer<ph_bytes>
    ) {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(1, size(of: pairs)), alignment: MemoryLayout<ph_bytes>.alignment)
        return place(pairs, in: memory)
    }

    /// The bytes `pairs` take from an aligned start: the slots (names, then values), then the bytes.
    static func size(of pairs: [HTTPHeader]) -> Int {
        MemoryLayout<ph_bytes>.stride * 2 * pairs.count + pairs.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }
    }

    /// Lays out `pairs` in memory at `tail` (``size(of:)`` bytes from `tail` aligned up for
    /// `ph_bytes`): the start of the layout there, and the slots.
    static func place(_ pairs: [HTTPHeader], in tail: UnsafeMutableRawPointer) -> (
        block: UnsafeMutableRawPointer, names: UnsafeMutablePointer<ph_bytes>, values: UnsafeMutablePointer<ph_bytes>
    ) {
        let block = tail.alignedUp(toMultipleOf: MemoryLayout<ph_bytes>.alignment)
        let slots = MemoryLayout<ph_bytes>.stride * 2 * pairs.count
        let names = block.bindMemory(to: ph_bytes.self, capacity: 2 * pairs.count)
        let values = names + pairs.count
        var cursor = (block + slots).assumingMemoryBound(to: UInt8.self)
        func place(_ text: String) -> ph_bytes {
            let start = cursor
            let length = CBytes.copyUTF8(text, to: start)
            cursor += length
            return ph_bytes(data: UnsafePointer(start), len: length)
        }
        for (index, pair) in pairs.enumerated() {
            (names + index).initialize(to: place(pair.name))
            (values + index).initialize(to: place(pair.value))
        }
        return (block, names, values)
    }
}

/// One copy of a byte string handed to plugins (a URL, a method, a body), kept until it changes.
///
/// One allocation: the bytes live in the object itself (tail-allocated; the header is their
/// count), where they stay for the object's lifetime.
final class CByteCopy: ManagedBuffer<Int, UInt8> {
    /// The copy, valid while this object lives.
    var bytes: ph_bytes {
        withUnsafeMutablePointers { count, elements in ph_bytes(data: UnsafePointer(elements), len: count.pointee) }
    }

    /// A copy of `source`.
    static func copying(_ source: UnsafeRawBufferPointer) -> CByteCopy {
        let made = create(minimumCapacity: max(1, source.count)) { _ in source.count }
        if let base = source.baseAddress, source.count > 0 {
            made.withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0).copyMemory(from: base, byteCount: source.count) }
        }
        // `create` on this class makes an instance of it.
        return unsafeDowncast(made, to: CByteCopy.self)
    }

    static func of(_ string: String) -> CByteCopy {
        var string = string
        return string.withUTF8 { copying(UnsafeRawBufferPointer($0)) }
    }

    static func of(_ data: Data) -> CByteCopy {
        data.withUnsafeBytes { copying($0) }
    }

    /// The methods of RFC 9110 §9 and PATCH, copied once for every request that has one.
    // Safe as nonisolated(unsafe): the copies are written once, when the list is made, and only
    // read afterwards (a `ManagedBuffer` cannot be declared `Sendable`).
    nonisolated(unsafe) private static let methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"].map { of($0) }

    /// A copy of `method`: one shared by every request for a standard method (most requests
    /// have one), else a new one.
    static func of(method: String) -> CByteCopy {
        switch method {
        case "GET": return methods[0]
        case "HEAD": return methods[1]
        case "POST": return methods[2]
        case "PUT": return methods[3]
        case "DELETE": return methods[4]
        case "CONNECT": return methods[5]
        case "OPTIONS": return methods[6]
        case "TRACE": return methods[7]
        case "PATCH": return methods[8]
        default: return of(method)
        }
    }
}

/// The result a plugin hook works on: a response state or a failure, plus what the hook decided.
/// A response state is its own handle (a subclass: no object of its own made per response, and
/// one shared by the chain's plugins and both response hooks); a failure gets one of these.
class ResultHandle {
    /// The response (for a response state, itself). Not retained: a handle is only used inside a
    /// hook call, while the state lives.
    unowned(unsafe) var response: ResponseState?
    let failure: TransportFailure?
    lazy var arena = ByteArena()
    /// The failure's message as the plugin reads it, copied into the arena once (each
    /// `result_failure` copied it anew: a plugin that asked in a loop grew the request's memory).
    lazy var failureMessage: ph_bytes = failure.map { arena.bytes($0.message) } ?? ph_bytes()
    /// Whether the hook may replace the result or ask for a retry (`process`); set before each call.
    var mayDecide: Bool
    var replacement: SyntheticResponse?
    var retry: (delay: Double, refresh: CredentialRefresh?)?

    init(response: ResponseState?, failure: TransportFailure?, mayDecide: Bool) {
        self.response = response
        self.failure = failure
        self.mayDecide = mayDecide
    }

    /// Ready for the next hook (hooks of one result run one after the other): whether it may
    /// decide, and nothing decided yet.
    func reset(mayDecide: Bool) {
        self.mayDecide = mayDecide
        replacement = nil
        retry = nil
    }

    /// Runs `body` on the handle `pointer` points at, borrowed for the call (see
    /// `RequestState.with(_:or:_:)`: the chain holds the handle through the hook call).
    /// A NULL handle is none: `body` does not run and the answer is `none`.
    @inline(__always)
    static func with<R>(_ pointer: OpaquePointer?, or none: R, _ body: (ResultHandle) throws -> R) rethrows -> R {
        guard let pointer else { return none }
        return try Unmanaged<ResultHandle>.fromOpaque(UnsafeRawPointer(pointer))._withUnsafeGuaranteedRef(body)
    }
}

/// One plugin instance's host API table; `host_data` points back at this object.
// Safe as @unchecked Sendable: the C table is filled once at init; the services it calls are Sendable.
final class HostTable: @unchecked Sendable {
    let services: BoundServices
    let table: UnsafeMutablePointer<ph_host_api>
    /// What `create` may do: set while it runs (declare_hooks is accepted only then).
    private let creation = Locked<(creating: Bool, declared: UInt32?)>((false, nil))

    /// Runs `body` (the plugin's create) with declare_hooks open; returns its result and the
    /// hooks the instance declared, if it did.
    func creating<R>(_ body: () -> R) -> (R, UInt32?) {
        creation.withLock { $0 = (true, nil) }
        let result = body()
        let declared = creation.withLock { state -> UInt32? in
            state.creating = false
            return state.declared
        }
        return (result, declared)
    }

    /// The hooks the descriptor implements, as bits; set before create.
    var implemented: UInt32 = 0

    init(services: BoundServices) {
        self.services = services
        table = UnsafeMutablePointer<ph_host_api>.allocate(capacity: 1)
        table.initialize(to: HostTable.template)
        table.pointee.host_data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        table.deinitialize(count: 1)
        table.deallocate()
    }

    /// Runs `body` on the table `api` belongs to, borrowed for the call (its plugin holds it).
    /// A NULL table (or one without its host's data) is none: `body` does not run and the
    /// answer is `none`.
    @inline(__always)
    static func with<R>(_ api: UnsafePointer<ph_host_api>?, or none: R, _ body: (HostTable) throws -> R) rethrows -> R {
        guard let data = api?.pointee.host_data else { return none }
        return try Unmanaged<HostTable>.fromOpaque(data)._withUnsafeGuaranteedRef(body)
    }

    /// ``with(_:or:_:)`` for a `body` that answers nothing: it does not run for a NULL table.
    @inline(__always)
    static func with(_ api: UnsafePointer<ph_host_api>?, _ body: (HostTable) throws -> Void) rethrows {
        try with(api, or: (), body)
    }

    /// The callbacks, shared by every table.
    nonisolated(unsafe) static let template: ph_host_api = {
        var api = ph_host_api()
        api.struct_size = UInt32(MemoryLayout<ph_host_api>.size)
        api.abi_major = UInt16(PH_ABI_MAJOR)
        api.abi_minor = UInt16(PH_ABI_MINOR)
        api.log = { api, level, message in
            // The app's handler runs inside the hook: a hook call it makes (a plugin loaded)
            // writes into an error buffer of its own, not the calling hook's.
            ph_thread_error_nest()
            defer { ph_thread_error_unnest() }
            HostTable.with(api) { $0.services.log(LogLevel(abiCode: level), CBytes.string(message)) }
        }
        api.kv_get = { api, key, out, capacity in
            guard CBytes.isBuffer(key), var value = HostTable.with(api, or: nil, { $0.services.value(forKey: key) }) else { return -1 }
            return value.withUTF8 { utf8 -> Int64 in
                // As much as `capacity` holds (the header's out[0..capacity)); a capacity past
                // `Int.max` (negative here) is room for any value.
                let count = capacity < 0 ? utf8.count : min(utf8.count, capacity)
                if count > 0, let out, let base = utf8.baseAddress { out.update(from: base, count: count) }
                return Int64(utf8.count)
            }
        }
        api.declare_hooks = { api, hooks in
            HostTable.with(api, or: PH_INVALID) { table in
                table.creation.withLock { state -> Int32 in
                    guard state.creating else { return PH_INVALID }
                    // A refused declaration stays: a later valid call does not undo it (the host
                    // refuses the plugin, naming the bits).
                    if let declared = state.declared, declared & ~table.implemented != 0 { return PH_INVALID }
                    state.declared = hooks
                    return hooks & ~table.implemented == 0 ? PH_OK : PH_INVALID
                }
            }
        }
        api.has_subscribers = { api in
            HostTable.with(api, or: false) { $0.services.hasSubscribers } ? 1 : 0
        }
        api.kv_set = { api, key, value, remove in _ = HostTable.setValue(api, key, value, remove) }
        api.kv_set_checked = { api, key, value, remove in HostTable.setValue(api, key, value, remove) }
        api.emit = { api, name, keys, values, count in
            var fields: [String: String] = [:]
            if let keys, let values {
                // A count past `Int.max` (`size_t` arrives as `Int`) is negative here: no fields.
                for index in 0..<max(0, count) { fields[CBytes.string(keys[index])] = CBytes.string(values[index]) }
            }
            // As for `log`: the subscribers' code runs inside the hook.
            ph_thread_error_nest()
            defer { ph_thread_error_unnest() }
            HostTable.with(api) { $0.services.emit(CBytes.string(name), fields: fields) }
        }
        api.now = { _ in Date().timeIntervalSince1970 }
        api.monotonic_ns = { _ in DispatchTime.now().uptimeNanoseconds }
        api.random_bytes = { host, out, count in
            // Nothing for a count past `Int.max` (negative here): no buffer is that large; nothing
            // through a NULL host table either (the header's rule for every call).
            RandomBytes.fill(UnsafeMutableBufferPointer(start: out, count: host == nil || out == nil || count < 0 ? 0 : count))
        }

        api.request_method = { request in RequestHandle.with(request, or: ph_bytes()) { $0.cMethod } }
        api.request_set_method = { request, method in
            (try? RequestHandle.with(request, or: nil) { try $0.setMethod(CBytes.string(method)) }) != nil ? PH_OK : PH_INVALID
        }
        api.request_url = { request in RequestHandle.with(request, or: ph_bytes()) { $0.cURL } }
        api.request_set_url = { request, url in
            (try? RequestHandle.with(request, or: nil) { try $0.setURL(CBytes.string(url)) }) != nil ? PH_OK : PH_INVALID
        }
        // Header and body reads borrow the state's C copies (made once per version, not per call).
        api.request_header = { request, name, index, value in
            guard let found = RequestHandle.with(request, or: nil, { $0.cHeaders.value(named: name, index: index) }) else { return PH_NOT_FOUND }
            value?.pointee = found
            return PH_OK
        }
        api.request_header_count = { request in RequestHandle.with(request, or: 0) { $0.cHeaders.count } }
        api.request_header_at = { request, index, name, value in
            RequestHandle.with(request, or: PH_NOT_FOUND) { $0.cHeaders.pair(at: index, name, value) }
        }
        // One edit each, checked and applied as a batch of one (the same byte checks and refusals).
        api.request_set_header = { request, name, value in
            HostTable.editHeaders(request, ph_header_edit(op: PH_EDIT_SET, name: name, value: value))
        }
        api.request_add_header = { request, name, value in
            HostTable.editHeaders(request, ph_header_edit(op: PH_EDIT_ADD, name: name, value: value))
        }
        api.request_remove_header = { request, name in
            HostTable.editHeaders(request, ph_header_edit(op: PH_EDIT_REMOVE, name: name, value: ph_bytes()))
        }
        api.request_headers = { request, names, values, capacity in
            RequestHandle.with(request, or: 0) { $0.cHeaders.snapshot(names, values, capacity) }
        }
        api.request_background = { api, request, option in
            // The state refuses it outside this plugin's prepare (and from a background exchange).
            guard CBytes.isBuffer(option) else { return PH_INVALID }
            guard let plugin = HostTable.with(api, or: nil, { $0.services.plugin }) else { return PH_INVALID }
            return RequestHandle.with(request, or: false) { $0.scheduleBackground(plugin: plugin, option: CBytes.string(option)) }
                ? PH_OK : PH_INVALID
        }
        api.request_edit_headers = { request, edits, count, badIndex in HostTable.editHeaders(request, edits, count, badIndex) }
        api.request_body = { request, body in
            guard let bytes = RequestHandle.with(request, or: nil, { $0.cBody }) else { return PH_NOT_FOUND }
            body?.pointee = bytes
            return PH_OK
        }
        api.request_set_body = { request, body, present in _ = HostTable.setRequestBody(request, body, present) }
        api.request_set_body_checked = { request, body, present in HostTable.setRequestBody(request, body, present) }
        api.request_timeout = { request in RequestHandle.with(request, or: .infinity) { $0.timeout } }
        // A refused timeout or status changes nothing (these setters of 1.0 return nothing: a plugin
        // reads the value back to know).
        api.request_set_timeout = { request, seconds in try? RequestHandle.with(request) { try $0.setTimeout(seconds) } }
        api.request_respond = { request, status, names, values, count, body in
            RequestHandle.with(request, or: PH_INVALID) { handle in
                guard handle.mayRespond, let answer = HostTable.answer(status, names, values, count, body) else { return PH_INVALID }
                handle.answer = answer
                return PH_OK
            }
        }

        api.result_failure = { result, message in
            ResultHandle.with(result, or: PH_FAILURE_OTHER) { handle in
                guard let failure = handle.failure else { return PH_FAILURE_NONE }
                message?.pointee = handle.failureMessage
                return failure.kind.abiCode
            }
        }
        api.result_status = { result in Int32(clamping: ResultHandle.with(result, or: nil) { $0.response?.statusCode } ?? 0) }
        api.result_set_status = { result, status in try? ResultHandle.with(result, or: ()) { try $0.response?.setStatusCode(Int(status)) } }
        api.result_header = { result, name, index, value in
            guard let found = ResultHandle.with(result, or: nil, { $0.response?.cHeaders.value(named: name, index: index) }) else {
                return PH_NOT_FOUND
            }
            value?.pointee = found
            return PH_OK
        }
        api.result_header_count = { result in ResultHandle.with(result, or: nil) { $0.response?.cHeaders.count } ?? 0 }
        api.result_header_at = { result, index, name, value in
            ResultHandle.with(result, or: nil) { $0.response?.cHeaders.pair(at: index, name, value) } ?? PH_NOT_FOUND
        }
        api.result_set_header = { result, name, value in
            guard CBytes.isBuffer(value) else { return PH_INVALID }
            return ResultHandle.with(result, or: PH_INVALID) { handle in
                guard let response = handle.response else { return PH_INVALID }
                return (try? response.setHeader(named: CBytes.string(name), value: CBytes.string(value))) != nil ? PH_OK : PH_INVALID
            }
        }
        api.result_add_header = { result, name, value in
            guard CBytes.isBuffer(value) else { return PH_INVALID }
            return ResultHandle.with(result, or: PH_INVALID) { handle in
                guard let response = handle.response else { return PH_INVALID }
                return (try? response.addHeader(named: CBytes.string(name), value: CBytes.string(value))) != nil ? PH_OK : PH_INVALID
            }
        }
        api.result_remove_header = { result, name in
            ResultHandle.with(result, or: PH_INVALID) { handle in
                guard let response = handle.response else { return PH_INVALID }
                return (try? response.setHeader(named: CBytes.string(name), value: nil)) != nil ? PH_OK : PH_INVALID
            }
        }
        api.result_headers = { result, names, values, capacity in
            ResultHandle.with(result, or: nil) { $0.response?.cHeaders.snapshot(names, values, capacity) } ?? 0
        }
        api.result_request_headers = { result, names, values, capacity in
            ResultHandle.with(result, or: nil) { $0.response?.cRequestHeaders?.snapshot(names, values, capacity) } ?? 0
        }
        api.result_redirected = { result in ResultHandle.with(result, or: 0) { $0.response?.isRedirected == true ? 1 : 0 } }
        api.result_body = { result in ResultHandle.with(result, or: nil) { $0.response?.cBody } ?? ph_bytes() }
        api.result_set_body = { result, body in _ = HostTable.setResultBody(result, body) }
        api.result_set_body_checked = { result, body in HostTable.setResultBody(result, body) }
        api.result_replace = { result, status, names, values, count, body in
            ResultHandle.with(result, or: PH_INVALID) { handle in
                guard handle.mayDecide, let answer = HostTable.answer(status, names, values, count, body) else { return PH_INVALID }
                handle.replacement = answer
                return PH_OK
            }
        }
        api.result_retry = { result, delay, key, stale, hasStale in
            ResultHandle.with(result, or: PH_INVALID) { handle in
                guard handle.mayDecide, delay.isFinite, delay >= 0, CBytes.isBuffer(key), hasStale == 0 || CBytes.isBuffer(stale) else {
                    return PH_INVALID
                }
                let keyString = CBytes.string(key)
                let refresh = keyString.isEmpty ? nil : CredentialRefresh(key: keyString, staleValue: hasStale != 0 ? CBytes.string(stale) : nil)
                handle.retry = (delay, refresh)
                return PH_OK
            }
        }
        return api
    }()

    // The setters that store bytes, for their 1.0 forms (which return nothing) and their checked
    // forms of 1.5 alike: bytes that are no buffer change nothing.

    /// `kv_set`: stores or removes a value; PH_INVALID, the store unchanged, for a key (or the
    /// value of a store) that is no buffer.
    static func setValue(_ api: UnsafePointer<ph_host_api>?, _ key: ph_bytes, _ value: ph_bytes, _ remove: Int32) -> ph_status {
        guard CBytes.isBuffer(key), remove != 0 || CBytes.isBuffer(value) else { return PH_INVALID }
        return HostTable.with(api, or: PH_INVALID) {
            $0.services.setValue(remove != 0 ? nil : CBytes.string(value), forKey: CBytes.string(key))
            return PH_OK
        }
    }

    /// `request_set_body`: PH_INVALID, the body unchanged, for a body that is no buffer.
    static func setRequestBody(_ request: OpaquePointer?, _ body: ph_bytes, _ present: Int32) -> ph_status {
        guard present == 0 || CBytes.isBuffer(body) else { return PH_INVALID }
        return RequestHandle.with(request, or: PH_INVALID) {
            $0.setBodyData(present != 0 ? CBytes.data(body) : nil)
            return PH_OK
        }
    }

    /// The answer of `request_respond` or `result_replace`; nil for a status outside 100...999, a
    /// field that is no field, or a body that is no buffer (what ``HeaderValidation/check(_:)``
    /// refuses of an interceptor compiled in, checked as bytes).
    static func answer(
        _ status: Int32, _ names: UnsafePointer<ph_bytes>?, _ values: UnsafePointer<ph_bytes>?, _ count: Int, _ body: ph_bytes
    ) -> SyntheticResponse? {
        guard HeaderValidation.isValidStatus(Int(status)), CBytes.isBuffer(body), let headers = answerFields(names, values, count) else {
            return nil
        }
        return SyntheticResponse(statusCode: Int(status), headers: headers, body: CBytes.array(body))
    }

    /// The fields of the last accepted answer (`request_respond`, `result_replace`) that had any,
    /// one list for the whole process (every plugin and thread): a cache answers with one stored
    /// entry's fields hit after hit. (A handle tells no plugin, so there is no list per plugin.)
    private static let lastAnswerFields = Locked<[HTTPHeader]>([])

    /// An answer's fields (``CBytes/headers(_:_:_:)``, nil when one is refused): the kept list when
    /// they are its bytes (it was checked when it was made), else made and checked, and kept when
    /// accepted and not empty (in `memo`: the host's one, or a test's). A name matches a kept one
    /// only as a buffer of its bytes (a kept name is never empty); a value that is no buffer
    /// matches an empty one, so such an answer is read without the list, and refused.
    static func answerFields(
        _ names: UnsafePointer<ph_bytes>?, _ values: UnsafePointer<ph_bytes>?, _ count: Int, memo: Locked<[HTTPHeader]> = lastAnswerFields
    ) -> [HTTPHeader]? {
        if count > 0, let names, let values {
            let kept = memo.withLock { $0 }
            if CBytes.same(names, values, count, as: kept), (0..<count).allSatisfy({ CBytes.isBuffer(values[$0]) }) { return kept }
        }
        guard let made = CBytes.headers(names, values, count) else { return nil }
        if !made.isEmpty { memo.withLock { $0 = made } }
        return made
    }

    /// `result_set_body`: PH_INVALID, nothing changed, for a failure or a body that is no buffer.
    static func setResultBody(_ result: OpaquePointer?, _ body: ph_bytes) -> ph_status {
        guard CBytes.isBuffer(body) else { return PH_INVALID }
        return ResultHandle.with(result, or: PH_INVALID) { handle in
            guard let response = handle.response else { return PH_INVALID }
            response.setData(CBytes.data(body))
            return PH_OK
        }
    }
}

extension HostTable {
    /// `request_edit_headers`: every edit checked as bytes first (all or none), then each made
    /// strings as it is applied (no list of edits, no string made for a batch that is refused).
    static func editHeaders(
        _ request: OpaquePointer?, _ edits: UnsafePointer<ph_header_edit>?, _ count: Int, _ badIndex: UnsafeMutablePointer<Int>?
    ) -> ph_status {
        guard request != nil else { return PH_INVALID }
        // `size_t` arrives as `Int`: a count past `Int.max` is negative, and as oversize.
        guard count >= 0, count <= Int(PH_MAX_HEADER_EDITS) else {
            badIndex?.pointee = Int(PH_MAX_HEADER_EDITS)
            return PH_INVALID
        }
        guard count > 0 else { return PH_OK }
        guard let edits else {
            badIndex?.pointee = 0
            return PH_INVALID
        }
        for index in 0..<count where !HeaderEditBytes.isValid(edits[index]) {
            badIndex?.pointee = index
            return PH_INVALID
        }
        return RequestHandle.with(request, or: PH_INVALID) {
            $0.applyChecked(count: count) { HeaderEditBytes.edit(edits[$0]) }
            return PH_OK
        }
    }

    /// One edit of a single setter (`request_set_header`, `request_add_header`,
    /// `request_remove_header`), as a batch of one.
    static func editHeaders(_ request: OpaquePointer?, _ edit: ph_header_edit) -> ph_status {
        withUnsafePointer(to: edit) { editHeaders(request, $0, 1, nil) }
    }
}

/// A loaded plugin's header edit (`ph_header_edit`), checked and read as the host's edits are.
enum HeaderEditBytes {
    /// Whether `edit` has a known operation, a token for its name and, unless it removes, a
    /// value without CR, LF or NUL (what ``HeaderEdit/check(_:)`` asks of the same edit as strings)
    /// that is a buffer (``CBytes/isBuffer(_:)``: not read as an empty value).
    static func isValid(_ edit: ph_header_edit) -> Bool {
        guard edit.op == PH_EDIT_SET || edit.op == PH_EDIT_ADD || edit.op == PH_EDIT_REMOVE,
            HeaderValidation.isValidName(raw(edit.name))
        else { return false }
        return edit.op == PH_EDIT_REMOVE || (CBytes.isBuffer(edit.value) && HeaderValidation.isFree(raw(edit.value)))
    }

    /// The edit as the host's own (its operation checked by ``isValid(_:)``).
    static func edit(_ edit: ph_header_edit) -> HeaderEdit {
        let name = CBytes.string(edit.name)
        switch edit.op {
        case PH_EDIT_SET: return .set(name, CBytes.string(edit.value))
        case PH_EDIT_ADD: return .add(name, CBytes.string(edit.value))
        default: return .remove(name)
        }
    }

    /// The bytes of `bytes`; none without a pointer or with a length past `Int.max` (negative
    /// here: `size_t` arrives as `Int`), refused then as an empty name is.
    private static func raw(_ bytes: ph_bytes) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: bytes.data, count: bytes.data == nil || bytes.len < 0 ? 0 : bytes.len)
    }
}
