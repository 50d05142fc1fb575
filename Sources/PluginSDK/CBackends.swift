import CPluginABI
import Foundation

/// ``HostServices`` over the host's C API table (the plugin side of the ABI).
///
/// The table is valid until the instance's `destroy` returns; the services may outlive it (a task
/// the plugin started holds them). Past `destroy` they reach no host: values are nil, events and
/// log lines go nowhere, clocks and random bytes come from the system.
// Safe as @unchecked Sendable: it only holds the host's table pointer, valid and thread-safe until
// `destroy` by the ABI's contract, and read only through `gate` (closed by `destroy`).
final class CHostServices: HostServices, @unchecked Sendable {
    let api: UnsafePointer<ph_host_api>
    /// Counts the calls through `api` under way; closed when the instance is destroyed.
    let gate = CallGate()

    /// Whether a 1.3 host answers `result_request_headers`: read from the table once, at create
    /// (a constant of the host, asked by every 401 of access-token: no call through the gate).
    let responsesCarryRequestHeaders: Bool

    init(api: UnsafePointer<ph_host_api>) {
        self.api = api
        responsesCarryRequestHeaders = api.pointee.abi_minor >= 3 && api.pointee.result_request_headers != nil
    }

    /// The last value read and its key: a plugin reads the same key (its token, its secret) for
    /// every request, and while the host's value stays the same its string is not made again.
    private let lastValue = Locked<(key: String, value: String)?>(nil)

    func value(forKey key: String) -> String? {
        gate.pass(closed: nil) { readValue(forKey: key) }
    }

    private func readValue(forKey key: String) -> String? {
        CBytes.with(key) { keyBytes -> String? in
            // Most values (tokens, secrets) fit the stack buffer: no allocation but the string.
            let first = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 512) { buffer -> (String?, Int64) in
                let length = api.pointee.kv_get(api, keyBytes, buffer.baseAddress, buffer.count)
                guard length >= 0, Int(length) <= buffer.count else { return (nil, length) }
                let bytes = ph_bytes(data: UnsafePointer(buffer.baseAddress), len: Int(length))
                return (CBytes.string(bytes, key: key, memo: lastValue), length)
            }
            if let value = first.0 { return value }
            var capacity = Int(first.1)
            guard capacity >= 0 else { return nil }
            while true {
                var buffer = [UInt8](repeating: 0, count: capacity)
                let length = buffer.withUnsafeMutableBufferPointer { api.pointee.kv_get(api, keyBytes, $0.baseAddress, capacity) }
                if length < 0 { return nil }
                if Int(length) <= capacity { return String(decoding: buffer[0..<Int(length)], as: UTF8.self) }
                capacity = Int(length)
            }
        }
    }

    func setValue(_ value: String?, forKey key: String) {
        gate.pass(closed: ()) {
            CBytes.with(key) { keyBytes in
                CBytes.with(value ?? "") { api.pointee.kv_set(api, keyBytes, $0, value == nil ? 1 : 0) }
            }
        }
    }

    func emit(_ name: String, fields: [String: String]) {
        let pairs = fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        gate.pass(closed: ()) {
            CBytes.with(name) { nameBytes in
                CBytes.withPairs(pairs) { keys, values, count in api.pointee.emit(api, nameBytes, keys, values, count) }
            }
        }
    }

    func log(_ level: LogLevel, _ message: String) {
        gate.pass(closed: ()) { CBytes.with(message) { api.pointee.log(api, level.abiCode, $0) } }
    }

    /// Asks the host (ABI 1.1); a 1.0 host cannot tell, so every event is built.
    var hasSubscribers: Bool {
        gate.pass(closed: false) {
            guard api.pointee.abi_minor >= 1, let ask = api.pointee.has_subscribers else { return true }
            return ask(api) != 0
        }
    }

    func now() -> Double { gate.pass(closed: Date().timeIntervalSince1970) { api.pointee.now(api) } }

    func monotonicNanoseconds() -> UInt64 { gate.pass(closed: DispatchTime.now().uptimeNanoseconds) { api.pointee.monotonic_ns(api) } }

    func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: max(0, count))
        bytes.withUnsafeMutableBytes { randomBytes(into: $0) }
        return bytes
    }

    func randomBytes(into buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        gate.pass(closed: RandomBytes.fill(UnsafeMutableBufferPointer(start: bytes, count: buffer.count))) {
            api.pointee.random_bytes(api, bytes, buffer.count)
        }
    }
}

/// A view of a host handle: holds nothing but the handle, the host table and the instance's
/// header memo, so a view of a handle is as good as a new one, and a view no one else holds may be
/// pointed at another handle.
protocol HandleView: AnyObject {
    /// Points the view at `handle` (only when nothing but the instance's slot holds it).
    func point(at handle: OpaquePointer)
    /// Points the view at no handle, for good (a plugin kept it past its hook).
    func retire()
    /// Whether the view is pointed at `handle`.
    func isView(of handle: OpaquePointer) -> Bool
    init(handle: OpaquePointer, api: UnsafePointer<ph_host_api>, memo: HeaderMemo?)
}

/// The header lists one plugin instance read last, one per kind, and the last request URL, each
/// behind its own lock: the next list (or URL) of the same bytes is the same list (or string),
/// without a string made (``CBytes/snapshot(_:memo:)``).
final class HeaderMemo: Sendable {
    /// A request's fields (`request_headers`).
    let request = Locked<[HTTPHeader]>([])
    /// A response's fields (`result_headers`).
    let response = Locked<[HTTPHeader]>([])
    /// The fields of the request a response answers (`result_request_headers`).
    let sent = Locked<[HTTPHeader]>([])
    /// A request's URL (`request_url`): most requests of an app go to a few URLs.
    let url = Locked<String>("")
}

extension HeaderValidation {
    /// Nothing for `PH_OK`; for the host's refusal of a field (`PH_INVALID`, or any other code a
    /// host answers: the edit was not made), the error a plugin compiled in gets for it (a bad
    /// name, a bad value), or an invalid value when the check finds nothing wrong.
    static func explain(_ status: Int32, name: String, value: String?) throws {
        guard status != PH_OK else { return }
        try check(name: name, value: value)
        throw InterceptorError.invalidHeaderValue(name: name)
    }
}

extension Optional where Wrapped: HandleView {
    /// Makes the view kept here a view of `handle`: kept as it is when it already is one; else
    /// pointed at `handle` when nothing but this slot holds it (the hooks that used it are over: a
    /// view a plugin kept is never moved); else a new one, kept here. Called by the hook call that
    /// holds the instance's ``TakenSlot`` value this slot is part of (or on its spare).
    ///
    /// `fresh`: `handle` is another request's, though it may be at the address of the last one
    /// (its state freed, and its memory given to the next): a view a plugin kept is then not
    /// lent again, which would show the kept value the new request.
    mutating func point(to handle: OpaquePointer, api: UnsafePointer<ph_host_api>, memo: HeaderMemo?, fresh: Bool = false) {
        if !fresh, let last = self, last.isView(of: handle) { return }
        if self != nil, isKnownUniquelyReferenced(&self!) {
            self!.point(at: handle)
            return
        }
        self = Wrapped(handle: handle, api: api, memo: memo)
    }
}

// The request and result values a hook receives, kept with their views: made again only with a new
// view, and lent to each hook call where they are kept (a value made per call retained and
// released its view around every hook). The views are taken out of them to be pointed at the next
// handle, so the value kept here is not a second holder when the view's uniqueness is checked.

extension Optional where Wrapped == InterceptorRequest {
    /// Makes the request kept here a view of `handle` (see ``Optional/point(to:api:memo:fresh:)``).
    @inline(__always)
    mutating func lend(_ handle: OpaquePointer, api: UnsafePointer<ph_host_api>, memo: HeaderMemo?, fresh: Bool = false) {
        if !fresh, self != nil, Self.view(of: self!).isView(of: handle) { return }
        var view = take().map(Self.view(of:))
        view.point(to: handle, api: api, memo: memo, fresh: fresh)
        self = InterceptorRequest(backend: view.unsafelyUnwrapped)
    }

    /// At the end of the hook it was lent to: when the plugin kept the request (its view is held
    /// elsewhere too), retires the view and keeps nothing here; returns whether it did.
    @inline(__always)
    mutating func retireIfKept() -> Bool {
        guard var request = take() else { return false }
        guard request.holdsBackendAlone() else {
            Self.view(of: request).retire()
            return true
        }
        self = request
        return false
    }

    /// The view inside a request this extension made.
    @inline(__always)
    private static func view(of request: InterceptorRequest) -> CRequestBackend {
        unsafeDowncast(request.backend, to: CRequestBackend.self)
    }
}

extension Optional where Wrapped == InterceptorResult {
    /// Makes the response kept here a view of `handle` (see ``Optional/point(to:api:memo:fresh:)``).
    @inline(__always)
    mutating func lend(_ handle: OpaquePointer, api: UnsafePointer<ph_host_api>, memo: HeaderMemo?, fresh: Bool = false) {
        if !fresh, case .response(let kept)? = self, Self.view(of: kept).isView(of: handle) { return }
        var view: CResultBackend?
        if case .response(let kept)? = take() { view = Self.view(of: kept) }
        view.point(to: handle, api: api, memo: memo, fresh: fresh)
        self = .response(InterceptorResponse(backend: view.unsafelyUnwrapped))
    }

    /// At the end of the hook it was lent to: when the plugin kept the response (its view is held
    /// elsewhere too), retires the view and keeps nothing here; returns whether it did.
    @inline(__always)
    mutating func retireIfKept() -> Bool {
        guard case .response(var response)? = take() else { return false }
        guard response.holdsBackendAlone() else {
            Self.view(of: response).retire()
            return true
        }
        self = .response(response)
        return false
    }

    /// The view inside a response this extension made.
    @inline(__always)
    private static func view(of response: InterceptorResponse) -> CResultBackend {
        unsafeDowncast(response.backend, to: CResultBackend.self)
    }
}

/// ``RequestBackend`` over a host request handle.
final class CRequestBackend: RequestBackend, HandleView {
    private let slot: HandleSlot
    let api: UnsafePointer<ph_host_api>
    /// The instance's last header lists (nil: every list read is made anew).
    private let memo: HeaderMemo?

    init(handle: OpaquePointer, api: UnsafePointer<ph_host_api>, memo: HeaderMemo? = nil) {
        slot = HandleSlot(handle)
        self.api = api
        self.memo = memo
    }

    deinit { slot.free() }

    var handle: OpaquePointer? { slot.handle }

    /// The handle, for a setter; throws when the view is retired.
    private func live() throws -> OpaquePointer {
        guard let handle = slot.handle else { throw HandleSlot.retired }
        return handle
    }

    func point(at handle: OpaquePointer) { slot.set(handle) }

    func retire() { slot.retire() }

    func isView(of handle: OpaquePointer) -> Bool { slot.holds(handle) }

    // A retired view (a NULL handle) reads nothing without asking the host: a host older than the
    // rule that a NULL handle is none would not survive being asked.

    var method: String {
        guard let handle else { return "" }
        return CBytes.string(api.pointee.request_method(handle))
    }

    func setMethod(_ method: String) throws {
        try HeaderValidation.checkMethod(method)
        let handle = try live()
        let status = CBytes.with(method) { api.pointee.request_set_method(handle, $0) }
        if status != PH_OK { throw InterceptorError.invalidMethod(method) }
    }

    var urlString: String {
        guard let handle else { return "" }
        return CBytes.string(api.pointee.request_url(handle), memo: memo?.url)
    }

    func setURL(_ string: String) throws {
        guard URLParts.isAbsoluteHTTP(string) else { throw InterceptorError.invalidURL(string) }
        let handle = try live()
        let status = CBytes.with(string) { api.pointee.request_set_url(handle, $0) }
        if status != PH_OK { throw InterceptorError.invalidURL(string) }
    }

    var headers: [HTTPHeader] {
        guard let handle else { return [] }
        if api.pointee.abi_minor >= 1, let all = api.pointee.request_headers {
            return CBytes.snapshot({ all(handle, $0, $1, $2) }, memo: memo?.request)
        }
        return (0..<api.pointee.request_header_count(handle)).compactMap { index in
            var name = ph_bytes()
            var value = ph_bytes()
            guard api.pointee.request_header_at(handle, index, &name, &value) == PH_OK else { return nil }
            return HTTPHeader(name: CBytes.string(name), value: CBytes.string(value))
        }
    }

    func header(named name: String, index: Int) -> String? {
        guard let handle else { return nil }
        var value = ph_bytes()
        let status = CBytes.with(name) { api.pointee.request_header(handle, $0, index, &value) }
        return status == PH_OK ? CBytes.string(value) : nil
    }

    // The host checks the field (it trusts no plugin); a refusal is explained by the same check here.
    func setHeader(named name: String, value: String?) throws {
        let handle = try live()
        let status = CBytes.with(name) { nameBytes -> Int32 in
            guard let value else { return api.pointee.request_remove_header(handle, nameBytes) }
            return CBytes.with(value) { api.pointee.request_set_header(handle, nameBytes, $0) }
        }
        try HeaderValidation.explain(status, name: name, value: value)
    }

    func addHeader(named name: String, value: String) throws {
        let handle = try live()
        let status = CBytes.with(name) { nameBytes in CBytes.with(value) { api.pointee.request_add_header(handle, nameBytes, $0) } }
        try HeaderValidation.explain(status, name: name, value: value)
    }

    /// One call across the ABI for the whole batch (ABI 1.1), laid out on the stack. The host
    /// checks every edit (it trusts no plugin); when it refuses the batch, the same check here
    /// names the first bad edit and why, the error a plugin compiled in gets.
    func editHeaders(_ edits: [HeaderEdit]) throws {
        guard api.pointee.abi_minor >= 1, let edit = api.pointee.request_edit_headers, edits.count <= HeaderEdit.maxCount else {
            try HeaderEdit.check(edits)
            try applyEach(edits)
            return
        }
        let handle = try live()
        var badIndex = 0
        // The batch is laid out inside the call (a closure kept in a variable first would be
        // allocated, with `badIndex` boxed, on every call), each edit read in place once.
        let status = edits.withUnsafeBufferPointer { list in
            CBytes.withPairs(
                count: list.count,
                { index -> (name: String, value: String) in
                    switch list[index] {
                    case .set(let name, let value), .add(let name, let value): return (name, value)
                    case .remove(let name): return (name, "")
                    }
                },
                { names, values, count in
                    withUnsafeTemporaryAllocation(of: ph_header_edit.self, capacity: max(1, count)) { batch -> Int32 in
                        for index in 0..<count {
                            let op: Int32
                            switch list[index] {
                            case .set: op = PH_EDIT_SET
                            case .add: op = PH_EDIT_ADD
                            case .remove: op = PH_EDIT_REMOVE
                            }
                            batch[index] = ph_header_edit(op: op, name: names![index], value: values![index])
                        }
                        return edit(handle, batch.baseAddress, count, &badIndex)
                    }
                })
        }
        guard status == PH_OK else {
            try HeaderEdit.check(edits)
            throw HeaderEditError(index: badIndex, reason: "refused by the host")
        }
    }

    /// One call across the ABI (1.2).
    func scheduleBackgroundExchange(option: String) throws {
        guard api.pointee.abi_minor >= 2, let schedule = api.pointee.request_background else {
            throw InterceptorError.backgroundRefused("the host speaks ABI 1.\(api.pointee.abi_minor); background exchanges need 1.2")
        }
        let handle = try live()
        let status = CBytes.with(option) { schedule(api, handle, $0) }
        if status != PH_OK {
            throw InterceptorError.backgroundRefused("only from prepare, once per plugin and exchange, and never from a background exchange")
        }
    }

    var body: [UInt8]? {
        guard let handle else { return nil }
        var bytes = ph_bytes()
        return api.pointee.request_body(handle, &bytes) == PH_OK ? CBytes.array(bytes) : nil
    }

    func setBody(_ body: [UInt8]?) {
        guard let handle else { return }
        CBytes.with(body ?? []) { api.pointee.request_set_body(handle, $0, body == nil ? 0 : 1) }
    }

    var timeout: Double {
        guard let handle else { return .infinity }
        return api.pointee.request_timeout(handle)
    }

    /// Checked by the view (``InterceptorRequest/setTimeout(_:)``): a host changes nothing for a
    /// refused value, and says nothing.
    func setTimeout(_ seconds: Double) throws { api.pointee.request_set_timeout(try live(), seconds) }
}

/// ``ResponseBackend`` over a host result handle.
final class CResultBackend: ResponseBackend, HandleView {
    private let slot: HandleSlot
    let api: UnsafePointer<ph_host_api>
    /// The instance's last header lists (nil: every list read is made anew).
    private let memo: HeaderMemo?

    init(handle: OpaquePointer, api: UnsafePointer<ph_host_api>, memo: HeaderMemo? = nil) {
        slot = HandleSlot(handle)
        self.api = api
        self.memo = memo
    }

    deinit { slot.free() }

    var handle: OpaquePointer? { slot.handle }

    /// The handle, for a setter; throws when the view is retired.
    private func live() throws -> OpaquePointer {
        guard let handle = slot.handle else { throw HandleSlot.retired }
        return handle
    }

    func point(at handle: OpaquePointer) { slot.set(handle) }

    func retire() { slot.retire() }

    func isView(of handle: OpaquePointer) -> Bool { slot.holds(handle) }

    // A retired view reads nothing without asking the host (see the request's).

    var statusCode: Int {
        guard let handle else { return 0 }
        return Int(api.pointee.result_status(handle))
    }

    /// Checked by the view (``InterceptorResponse/setStatusCode(_:)``): a host changes nothing for
    /// a refused code, and says nothing.
    func setStatusCode(_ code: Int) throws { api.pointee.result_set_status(try live(), Int32(clamping: code)) }

    var headers: [HTTPHeader] {
        guard let handle else { return [] }
        if api.pointee.abi_minor >= 3, let all = api.pointee.result_headers {
            return CBytes.snapshot({ all(handle, $0, $1, $2) }, memo: memo?.response)
        }
        return (0..<api.pointee.result_header_count(handle)).compactMap { index in
            var name = ph_bytes()
            var value = ph_bytes()
            guard api.pointee.result_header_at(handle, index, &name, &value) == PH_OK else { return nil }
            return HTTPHeader(name: CBytes.string(name), value: CBytes.string(value))
        }
    }

    /// One call (ABI 1.3); nil on an older host.
    var requestHeaders: [HTTPHeader]? {
        // A retired view knows nothing of the request (nil: unknown, not "no fields").
        guard let handle else { return nil }
        guard api.pointee.abi_minor >= 3, let all = api.pointee.result_request_headers else { return nil }
        return CBytes.snapshot({ all(handle, $0, $1, $2) }, memo: memo?.sent)
    }

    /// One call (ABI 1.6); false on an older host.
    var isRedirected: Bool {
        guard let handle, api.pointee.abi_minor >= 6, let redirected = api.pointee.result_redirected else { return false }
        return redirected(handle) != 0
    }

    func header(named name: String, index: Int) -> String? {
        guard let handle else { return nil }
        var value = ph_bytes()
        let status = CBytes.with(name) { api.pointee.result_header(handle, $0, index, &value) }
        return status == PH_OK ? CBytes.string(value) : nil
    }

    // The host checks the field (it trusts no plugin); a refusal is explained by the same check here.
    func setHeader(named name: String, value: String?) throws {
        let handle = try live()
        let status = CBytes.with(name) { nameBytes -> Int32 in
            guard let value else { return api.pointee.result_remove_header(handle, nameBytes) }
            return CBytes.with(value) { api.pointee.result_set_header(handle, nameBytes, $0) }
        }
        try HeaderValidation.explain(status, name: name, value: value)
    }

    func addHeader(named name: String, value: String) throws {
        let handle = try live()
        let status = CBytes.with(name) { nameBytes in CBytes.with(value) { api.pointee.result_add_header(handle, nameBytes, $0) } }
        try HeaderValidation.explain(status, name: name, value: value)
    }

    var body: [UInt8] {
        guard let handle else { return [] }
        return CBytes.array(api.pointee.result_body(handle))
    }

    func bodyPrefix(_ maxBytes: Int) -> (bytes: [UInt8], count: Int) {
        guard let handle else { return ([], 0) }
        let bytes = api.pointee.result_body(handle)
        guard let data = bytes.data, bytes.len > 0 else { return ([], 0) }
        return (Array(UnsafeBufferPointer(start: data, count: min(bytes.len, max(0, maxBytes)))), bytes.len)
    }

    func setBody(_ body: [UInt8]) {
        guard let handle else { return }
        CBytes.with(body) { api.pointee.result_set_body(handle, $0) }
    }
}
