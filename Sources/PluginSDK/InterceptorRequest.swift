/// Storage behind an ``InterceptorRequest``.
///
/// The host implements it over its own request state; the plugin side of the C ABI
/// implements it over host callbacks. Plugin authors use ``InterceptorRequest`` instead.
public protocol RequestBackend: AnyObject {
    /// The HTTP method, e.g. `GET`.
    var method: String { get }
    /// Replaces the method.
    func setMethod(_ method: String) throws
    /// The absolute URL as sent.
    var urlString: String { get }
    /// Replaces the URL; throws ``InterceptorError/invalidURL(_:)`` when it is not an absolute http(s) URL.
    func setURL(_ string: String) throws
    /// All header fields in order.
    var headers: [HTTPHeader] { get }
    /// The `index`-th value of the header `name` (case-insensitive), if present.
    func header(named name: String, index: Int) -> String?
    /// Every value of the field `name`, in order (default: ``header(named:index:)`` until nil).
    func headerValues(named name: String) -> [String]
    /// Replaces every field named `name` with one field, or removes them when `value` is nil.
    func setHeader(named name: String, value: String?) throws
    /// Adds a field, keeping the existing ones of the same name.
    func addHeader(named name: String, value: String) throws
    /// The body, if any.
    var body: [UInt8]? { get }
    /// Replaces the body.
    func setBody(_ body: [UInt8]?)
    /// The timeout in seconds.
    var timeout: Double { get }
    /// Replaces the timeout; throws ``InterceptorError/invalidTimeout(_:)`` unless
    /// ``HeaderValidation/isValidTimeout(_:)`` holds, changing nothing.
    func setTimeout(_ seconds: Double) throws
    /// Applies `edits` in order, all or none; throws ``HeaderEditError`` naming the first
    /// refused edit.
    func editHeaders(_ edits: [HeaderEdit]) throws
    /// Asks for this request to be sent once more in the background after the exchange, with
    /// the calling plugin's target option set to `option` (ABI 1.2); throws
    /// ``InterceptorError/backgroundRefused(_:)`` when the host refuses.
    func scheduleBackgroundExchange(option: String) throws
}

extension RequestBackend {
    /// Asks ``header(named:index:)`` for index 0, 1, … until it answers nil.
    public func headerValues(named name: String) -> [String] { HeaderReading.values(named: name, header(named:index:)) }

    /// Refuses: a backend without background exchanges (the default).
    public func scheduleBackgroundExchange(option: String) throws {
        throw InterceptorError.backgroundRefused("this host does not run background exchanges")
    }

    /// Checks every edit, then applies them one by one (backends that can do it in one step
    /// implement their own).
    public func editHeaders(_ edits: [HeaderEdit]) throws {
        try HeaderEdit.check(edits)
        try applyEach(edits)
    }

    /// Applies checked edits through the single-field setters, in order.
    package func applyEach(_ edits: [HeaderEdit]) throws {
        for edit in edits {
            switch edit {
            case .add(let name, let value): try addHeader(named: name, value: value)
            case .set, .remove: try setHeader(named: edit.name, value: edit.value)
            }
        }
    }
}

/// One change to a request's header fields, for ``InterceptorRequest/editHeaders(_:)``.
public enum HeaderEdit: Sendable, Equatable {
    /// Replace every field named `name` with one field.
    case set(String, String)
    /// Add a field, keeping those of the same name.
    case add(String, String)
    /// Remove every field named `name`.
    case remove(String)

    /// The most edits one call takes (`PH_MAX_HEADER_EDITS`).
    public static let maxCount = 256

    /// The field name.
    public var name: String {
        switch self {
        case .set(let name, _), .add(let name, _), .remove(let name): return name
        }
    }

    /// The field value; nil for ``remove(_:)``.
    public var value: String? {
        switch self {
        case .set(_, let value), .add(_, let value): return value
        case .remove: return nil
        }
    }

    /// Throws ``HeaderEditError`` for the first invalid edit, or when there are more than ``maxCount``.
    public static func check(_ edits: [HeaderEdit]) throws(HeaderEditError) {
        guard edits.count <= maxCount else {
            throw HeaderEditError(index: maxCount, reason: "more than \(maxCount) header edits in one call")
        }
        for (index, edit) in edits.enumerated() {
            do {
                try HeaderValidation.check(name: edit.name, value: edit.value)
            } catch {
                throw HeaderEditError(index: index, reason: String(describing: error))
            }
        }
    }
}

/// Why a batch of header edits was refused: none of them was applied.
public struct HeaderEditError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The position of the first refused edit (``HeaderEdit/maxCount`` when there were too many).
    public let index: Int
    /// What is wrong with it.
    public let reason: String

    /// Creates an error.
    public init(index: Int, reason: String) {
        self.index = index
        self.reason = reason
    }

    /// `header edit 2: invalid value for header "X-A"`.
    public var description: String { "header edit \(index): \(reason)" }
}

/// The request an interceptor sees: cheap accessors over host-owned state.
///
/// Setters validate their input: header names must be tokens and values may not contain
/// CR or LF (no header injection); URLs must be absolute http(s) URLs.
public struct InterceptorRequest {
    /// The storage this view reads and writes.
    package private(set) var backend: any RequestBackend

    /// Wraps a backend.
    public init(backend: any RequestBackend) {
        self.backend = backend
    }

    /// Whether nothing but this value holds its backend (checked in place: no reference counted).
    package mutating func holdsBackendAlone() -> Bool { isKnownUniquelyReferenced(&backend) }

    /// The HTTP method, e.g. `GET`.
    public var method: String { backend.method }

    /// Replaces the method (upper-case token, e.g. `PATCH`).
    public func setMethod(_ method: String) throws { try backend.setMethod(method) }

    /// The absolute URL as it will be sent.
    public var url: String { backend.urlString }

    /// Replaces the URL.
    public func setURL(_ url: String) throws { try backend.setURL(url) }

    /// Every header field in order.
    public var headers: [HTTPHeader] { backend.headers }

    /// The first value of the header `name` (case-insensitive).
    public func header(_ name: String) -> String? { backend.header(named: name, index: 0) }

    /// Every value of the header `name`, in order.
    public func headerValues(_ name: String) -> [String] { backend.headerValues(named: name) }

    /// Sets `name` to `value`, replacing earlier values; `nil` removes the header.
    public func setHeader(_ name: String, _ value: String?) throws {
        try backend.setHeader(named: name, value: value)
    }

    /// Adds a value for `name`, keeping earlier ones.
    public func addHeader(_ name: String, _ value: String) throws {
        try backend.addHeader(named: name, value: value)
    }

    /// Removes every field named `name`.
    public func removeHeader(_ name: String) throws {
        try backend.setHeader(named: name, value: nil)
    }

    /// Applies several header edits in order, all or none, in one step (one call across the
    /// plugin ABI, ABI 1.1); throws ``HeaderEditError`` naming the first refused edit.
    ///
    /// ```swift
    /// try request.editHeaders([.set("X-Signature", signature), .set("X-Timestamp", timestamp), .remove("X-Debug")])
    /// ```
    public func editHeaders(_ edits: [HeaderEdit]) throws {
        try backend.editHeaders(edits)
    }

    /// From `prepare` only: when the prepare phase is over, the host sends the same request (as
    /// it was before any `prepare` ran) once more, in the background (concurrently with the rest
    /// of this exchange, under a request ID of its own), through the whole chain, with this
    /// plugin's target option (`context.target.pluginOptions[<plugin name>]`) set to
    /// `option`. Nobody waits for it; its outcome reaches the hooks like any other and is then
    /// dropped. A cache uses it to serve a stale response and revalidate it
    /// (`stale-while-revalidate`):
    ///
    /// ```swift
    /// try request.scheduleBackgroundExchange(option: "revalidate")
    /// return .respond(staleResponse)
    /// ```
    ///
    /// Throws ``InterceptorError/backgroundRefused(_:)`` outside `prepare`, from a background
    /// exchange, when this plugin already asked in this exchange, or on a host older than ABI 1.2.
    public func scheduleBackgroundExchange(option: String) throws {
        try backend.scheduleBackgroundExchange(option: option)
    }

    /// The body bytes, if any.
    public var body: [UInt8]? { backend.body }

    /// Replaces the body.
    public func setBody(_ body: [UInt8]?) { backend.setBody(body) }

    /// The timeout in seconds.
    public var timeout: Double { backend.timeout }

    /// Replaces the timeout in seconds: a positive number, or `.infinity` for none. Throws
    /// ``InterceptorError/invalidTimeout(_:)`` for zero, a negative number or NaN, and changes
    /// nothing then.
    public func setTimeout(_ seconds: Double) throws {
        // Checked here, whatever the backend (a test double's too).
        try HeaderValidation.checkTimeout(seconds)
        try backend.setTimeout(seconds)
    }

    /// The query items of the URL, decoded, in order.
    public var queryItems: [(name: String, value: String)] {
        URLParts(url).queryItems
    }
}

/// Errors the SDK's views raise on invalid edits.
public enum InterceptorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A header name that is not an RFC 9110 token.
    case invalidHeaderName(String)
    /// A header value containing CR, LF or NUL.
    case invalidHeaderValue(name: String)
    /// A URL that is not an absolute http or https URL.
    case invalidURL(String)
    /// A method that is not an RFC 9110 token.
    case invalidMethod(String)
    /// The hook's own failure, with its message.
    case failed(String)
    /// The host refused ``InterceptorRequest/scheduleBackgroundExchange(option:)``, and why.
    case backgroundRefused(String)
    /// A timeout that is not a positive number of seconds (zero, negative, NaN).
    case invalidTimeout(Double)
    /// A status code outside 100...999.
    case invalidStatus(Int)

    /// A sentence naming what was refused and why.
    public var description: String {
        switch self {
        case .invalidHeaderName(let name):
            return "invalid header name \(name.debugDescription): must be a token (letters, digits and !#$%&'*+-.^_`|~)"
        case .invalidHeaderValue(let name):
            return "invalid value for header \(name.debugDescription): CR, LF and NUL are not allowed"
        case .invalidURL(let url):
            return "invalid URL \(url.debugDescription): must be an absolute http or https URL"
        case .invalidMethod(let method):
            return "invalid method \(method.debugDescription): must be a token"
        case .failed(let message):
            return message
        case .backgroundRefused(let why):
            return "no background exchange: \(why)"
        case .invalidTimeout(let seconds):
            return "invalid timeout \(seconds): must be a positive number of seconds (.infinity for none)"
        case .invalidStatus(let code):
            return "invalid status code \(code): must be within 100...999"
        }
    }
}

/// Validation shared by every backend, so the host and plugins refuse the same inputs: header
/// names and values, methods, timeouts and status codes.
public enum HeaderValidation {
    /// Whether `name` is an RFC 9110 token.
    public static func isValidName(_ name: String) -> Bool {
        guard !name.isEmpty else { return false }
        // Over the contiguous bytes when the string has them (native strings do), with two masks.
        return name.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(inToken) } ?? name.utf8.allSatisfy(inToken)
    }

    /// Whether byte `b` may appear in a token (RFC 9110 §5.6.2), from two 64-bit masks of the
    /// token bytes below 64 and below 128 (none above): no table to reach, no branch per class.
    @inline(__always)
    static func inToken(_ b: UInt8) -> Bool {
        if b < 64 { return (0x03ff_6cfa_0000_0000 as UInt64) >> UInt64(b) & 1 != 0 }
        if b < 128 { return (0x57ff_ffff_c7ff_fffe as UInt64) >> UInt64(b - 64) & 1 != 0 }
        return false
    }

    /// Whether `bytes` are an RFC 9110 token (a header name the host receives as bytes, checked
    /// before it is made a string).
    package static func isValidName(_ bytes: UnsafeRawBufferPointer) -> Bool {
        !bytes.isEmpty && bytes.allSatisfy(inToken)
    }

    /// Whether `value` is free of CR, LF and NUL.
    public static func isValidValue(_ value: String) -> Bool {
        value.utf8.withContiguousStorageIfAvailable { isFree(UnsafeRawBufferPointer($0)) } ?? !value.utf8.contains(where: isRefused)
    }

    /// CR, LF or NUL: the bytes a header value may not hold.
    @inline(__always)
    static func isRefused(_ byte: UInt8) -> Bool { byte == 0x0D || byte == 0x0A || byte == 0x00 }

    /// Whether `bytes` hold no CR, LF or NUL: eight bytes at a time (a value is often a token,
    /// a signature or a date, tens of bytes long), the last few one by one.
    package static func isFree(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        if let base = bytes.baseAddress {
            while offset + 8 <= bytes.count {
                let word = base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                if hasByte(word, 0x00) || hasByte(word, 0x0A) || hasByte(word, 0x0D) { return false }
                offset += 8
            }
        }
        return !bytes[offset...].contains(where: isRefused)
    }

    /// Whether one of the eight bytes of `word` is `byte` (the zero-byte test on `word` XOR `byte`
    /// in every lane: no false answer either way).
    @inline(__always)
    static func hasByte(_ word: UInt64, _ byte: UInt8) -> Bool {
        let lanes: UInt64 = 0x0101_0101_0101_0101
        let x = word ^ (lanes &* UInt64(byte))
        return (x &- lanes) & ~x & 0x8080_8080_8080_8080 != 0
    }

    /// Throws unless both name and value are acceptable.
    public static func check(name: String, value: String?) throws {
        guard isValidName(name) else { throw InterceptorError.invalidHeaderName(name) }
        if let value, !isValidValue(value) { throw InterceptorError.invalidHeaderValue(name: name) }
    }

    /// Throws unless `method` is a token.
    public static func checkMethod(_ method: String) throws {
        guard isValidName(method) else { throw InterceptorError.invalidMethod(method) }
    }

    /// Whether a hook may set `seconds` as a request's timeout: a positive number, `.infinity`
    /// meaning none (zero, negative numbers and NaN are refused: each means something else, or
    /// nothing, to each transport).
    public static func isValidTimeout(_ seconds: Double) -> Bool { seconds > 0 }

    /// Throws ``InterceptorError/invalidTimeout(_:)`` unless ``isValidTimeout(_:)``.
    public static func checkTimeout(_ seconds: Double) throws {
        guard isValidTimeout(seconds) else { throw InterceptorError.invalidTimeout(seconds) }
    }

    /// Whether `code` is an HTTP status code a hook may set or answer with: 100...999 (three
    /// digits, RFC 9110 §15).
    public static func isValidStatus(_ code: Int) -> Bool { (100...999).contains(code) }

    /// Throws ``InterceptorError/invalidStatus(_:)`` unless ``isValidStatus(_:)``.
    public static func checkStatus(_ code: Int) throws {
        guard isValidStatus(code) else { throw InterceptorError.invalidStatus(code) }
    }

    /// Throws for the first thing wrong with an answer a hook gives (``PrepareAction/respond(_:)``,
    /// ``ProcessAction/replace(_:)``): its status (``checkStatus(_:)``), then each field in order
    /// (``check(name:value:)``). The host refuses the same answers from a loaded plugin.
    public static func check(_ response: SyntheticResponse) throws {
        try checkStatus(response.statusCode)
        for field in response.headers { try check(name: field.name, value: field.value) }
    }
}
