import CPluginABI
import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The host's mutable request during one attempt; what ``InterceptorRequest`` views.
final class RequestState: RequestBackend {
    private(set) var method: String {
        didSet { cMethodCopy = nil }
    }
    private(set) var bodyData: Data? {
        didSet { cBodyCopy = nil }
    }
    /// The timeout the request is sent with.
    private var sendingTimeout: Double
    private let original: URLRequest
    private var changedURL: String? {
        didSet { cURLCopy = nil }
    }
    private var changedHeaders: [HTTPHeader]? {
        didSet { cHeaderPairs = nil }
    }
    /// What loaded plugins read, as C bytes: made on first read, dropped when the value changes.
    private var cMethodCopy: CByteCopy?
    private var cURLCopy: CByteCopy?
    private var cBodyCopy: CByteCopy?
    private var cHeaderPairs: CBytePairs?
    /// The original header fields sorted by name, made the first time a hook walks them.
    private var originalHeaders: [HTTPHeader]?
    /// Whether two of the fields may share a name (as `namesEqual` compares them): false when the
    /// original fields share none and no hook added a field (a field set replaces every field of
    /// its name). The sent list is folded only when true (folding looked for repeats, every pair
    /// of names, for every request a hook changed).
    private var namesMayRepeat = true
    /// Where the chain keeps the last original field list its requests had (nil: made per request).
    private let fieldsMemo: OriginalFieldsMemo?
    /// This request's original field list as the chain keeps it, once a hook read the fields.
    private(set) var originalEntry: OriginalFieldsMemo.Entry?
    /// Which of method, body and timeout a hook changed (the others are not set again: setting
    /// `httpMethod` on a URLRequest normalises it each time).
    private var methodChanged = false
    private var bodyChanged = false
    private var timeoutChanged = false
    /// Whether a hook changed anything.
    private var changed: Bool { methodChanged || bodyChanged || timeoutChanged || changedURL != nil || changedHeaders != nil }

    /// Background exchanges asked for in `prepare` (ABI 1.2), in the order asked: plugin and option.
    private(set) var backgroundRequests: [(plugin: String, option: String)] = []
    /// Whether this exchange is itself a background one (which may not ask for another).
    var isBackground = false
    /// The names of the chain's interceptors and the position of the one whose `prepare` runs
    /// now (set by the chain; -1 outside `prepare`): a position per hook call, not a name (a
    /// name set for every interceptor was a retain and a release each).
    var chainNames: [String] = []
    var preparingIndex = -1
    /// The interceptor whose `prepare` runs now; nil outside `prepare`.
    var preparing: String? { chainNames.indices.contains(preparingIndex) ? chainNames[preparingIndex] : nil }

    /// Records a background exchange for `plugin`; false when refused (outside `prepare`, from a
    /// background exchange, or asked twice by one plugin).
    func scheduleBackground(plugin: String, option: String) -> Bool {
        guard preparing == plugin, !isBackground, !backgroundRequests.contains(where: { $0.plugin == plugin }) else { return false }
        backgroundRequests.append((plugin, option))
        return true
    }

    func scheduleBackgroundExchange(option: String) throws {
        guard let preparing, scheduleBackground(plugin: preparing, option: option) else {
            throw InterceptorError.backgroundRefused("only from prepare, once per plugin and exchange, and never from a background exchange")
        }
    }

    /// The handle loaded plugins' hooks receive: this state itself (see ``RequestHandle``).
    var handle: RequestHandle { self }
    /// Whether the hook running on the handle may answer the request itself (`prepare`); set
    /// before each call.
    var mayRespond = false
    /// The response the hook running on the handle answered with, if any.
    var answer: SyntheticResponse?

    /// A state for `request`; with `fieldsMemo`, its original fields are read from the chain's
    /// last list when they are the same (see ``OriginalFieldsMemo``).
    init(_ request: URLRequest, fieldsMemo: OriginalFieldsMemo? = nil) {
        original = request
        self.fieldsMemo = fieldsMemo
        method = request.httpMethod ?? "GET"
        bodyData = request.httpBody
        sendingTimeout = request.timeoutInterval
    }

    /// The timeout hooks read: the request's, or `.infinity` when it is no positive number (0,
    /// negative, NaN: none, as the transports read it), so that a hook may set what it read.
    var timeout: Double { sendingTimeout > 0 ? sendingTimeout : .infinity }

    var urlString: String {
        if let changedURL { return changedURL }
        if let originalURLString { return originalURLString }
        let string = original.url?.absoluteString ?? ""
        originalURLString = string
        return string
    }
    /// The original URL as a string, made the first time a hook asks (Foundation makes it anew each time).
    private var originalURLString: String?

    /// The method as C bytes, valid until it changes.
    var cMethod: ph_bytes {
        if let cMethodCopy { return cMethodCopy.bytes }
        let copy = CByteCopy.of(method: method)
        cMethodCopy = copy
        return copy.bytes
    }

    /// The URL as C bytes, valid until it changes.
    var cURL: ph_bytes {
        if let cURLCopy { return cURLCopy.bytes }
        let copy = CByteCopy.of(urlString)
        cURLCopy = copy
        return copy.bytes
    }

    /// The body as C bytes (nil without one), valid until it changes.
    var cBody: ph_bytes? {
        guard let bodyData else { return nil }
        if let cBodyCopy { return cBodyCopy.bytes }
        let copy = CByteCopy.of(bodyData)
        cBodyCopy = copy
        return copy.bytes
    }

    /// The header fields as C bytes, valid until they change.
    var cHeaders: CBytePairs {
        if let cHeaderPairs { return cHeaderPairs }
        // The original fields: the chain's copy, when it keeps one.
        if changedHeaders == nil {
            if originalHeaders == nil { _ = headers }
            if let originalEntry {
                let pairs = originalEntry.pairs
                cHeaderPairs = pairs
                return pairs
            }
        }
        let view = CBytePairs.make(headers)
        cHeaderPairs = view
        return view
    }

    /// Header fields, read from the original request until a hook changes them.
    var headers: [HTTPHeader] {
        if let changedHeaders { return changedHeaders }
        if let originalHeaders { return originalHeaders }
        let given = original.allHTTPHeaderFields ?? [:]
        if let entry = fieldsMemo?.entry(for: given) {
            originalEntry = entry
            originalHeaders = entry.sorted
            namesMayRepeat = entry.namesRepeat
            return entry.sorted
        }
        // The request's own list, with room for the fields hooks add: the first edit changes it
        // where it is.
        let sorted = Self.sortedFields(given, room: Self.roomForAddedFields)
        originalHeaders = sorted
        namesMayRepeat = sorted.count > 1
        return sorted
    }

    /// The fields of `given` in one array sorted by name, with room for `room` more (a request
    /// without fields allocates nothing).
    static func sortedFields(_ given: [String: String], room: Int) -> [HTTPHeader] {
        var sorted: [HTTPHeader] = []
        if !given.isEmpty {
            sorted.reserveCapacity(given.count + room)
            for (name, value) in given { sorted.append(HTTPHeader(name: name, value: value)) }
        }
        sorted.sortByName()
        return sorted
    }

    func setMethod(_ method: String) throws {
        try HeaderValidation.checkMethod(method)
        self.method = method
        methodChanged = true
    }

    func setURL(_ string: String) throws {
        guard URLParts.isAbsoluteHTTP(string), URL(string: string) != nil else { throw InterceptorError.invalidURL(string) }
        changedURL = string
    }

    func header(named name: String, index: Int) -> String? {
        // Our own list (made once): Foundation's lookup lower-cases every field name on each call.
        headers.value(named: name, index: index)
    }

    func headerValues(named name: String) -> [String] { headers.values(named: name) }

    func setHeader(named name: String, value: String?) throws {
        try HeaderValidation.check(name: name, value: value)
        editFields { $0.set(named: name, value: value) }
    }

    func addHeader(named name: String, value: String) throws {
        try HeaderValidation.check(name: name, value: value)
        editFields { $0.append(HTTPHeader(name: name, value: value)) }
        namesMayRepeat = true
    }

    /// Checks every edit, then applies them all: all or none.
    func applyEdits(_ edits: [HeaderEdit]) throws(HeaderEditError) {
        try HeaderEdit.check(edits)
        applyChecked(count: edits.count) { edits[$0] }
    }

    /// Applies `count` edits, given by position, that were checked (all of them, before the first
    /// is applied): a loaded plugin's batch, checked as bytes and made strings one at a time.
    ///
    /// `edit` may read bytes the plugin borrowed from this request's fields (``cHeaders``: a
    /// field removed by the name it read): that copy is kept alive until every edit is made,
    /// though the change of the list drops it from the request.
    func applyChecked(count: Int, _ edit: (Int) -> HeaderEdit) {
        var added = false
        withExtendedLifetime(cHeaderPairs) {
            editFields { fields in
                for index in 0..<count {
                    switch edit(index) {
                    case .add(let name, let value):
                        fields.append(HTTPHeader(name: name, value: value))
                        added = true
                    case .set(let name, let value): fields.set(named: name, value: value)
                    case .remove(let name): fields.set(named: name, value: nil)
                    }
                }
            }
        }
        if added { namesMayRepeat = true }
    }

    /// Changes the fields in place: the list of changes is the original fields' list at the
    /// first change, and is changed where it is after that (no copy per edit).
    private func editFields(_ change: (inout [HTTPHeader]) -> Void) {
        // Taken out of the observed property while it changes, so that it is the list's only
        // reference (changed in place, within its capacity), then put back.
        // (`take()`, not `if let`: a bound copy would hold a second reference while the list
        // changes, and its first change would copy it.)
        var fields: [HTTPHeader]
        if let taken = changedHeaders.take() {
            fields = taken
        } else {
            // The original fields' list, read now if no hook read it, with room for the fields
            // hooks add: changed where it is (copied only when a hook still holds it).
            if originalHeaders == nil { _ = headers }
            fields = originalHeaders.take() ?? []
            // The chain's list is shared: copied here once, with the room a request's own list has.
            if originalEntry != nil { fields.reserveCapacity(fields.count + Self.roomForAddedFields) }
        }
        change(&fields)
        changedHeaders = fields
    }

    /// How many fields a list made for edits has room for beyond the ones it starts with (a
    /// token; a signature with its key, timestamp and nonce; a cache's `X-Cache`, …), so that
    /// adding them allocates nothing (a few hundred bytes more per edited request or response).
    static let roomForAddedFields = 8

    func editHeaders(_ edits: [HeaderEdit]) throws {
        try applyEdits(edits)
    }

    var body: [UInt8]? { bodyData.map { [UInt8]($0) } }

    func setBody(_ body: [UInt8]?) {
        bodyData = body.map { Data($0) }
        bodyChanged = true
    }

    func setBodyData(_ data: Data?) {
        bodyData = data
        bodyChanged = true
    }

    func setTimeout(_ seconds: Double) throws {
        try HeaderValidation.checkTimeout(seconds)
        sendingTimeout = seconds
        timeoutChanged = true
    }

    /// The request to send: the original itself when no hook changed anything, else a copy
    /// with the changes (keeping what the views cannot change: cache policy, …).
    ///
    /// `remake`: the request may be made anew rather than copied (on Linux, for the transports of
    /// this package that read nothing but its public properties; see ``sending(deferring:)``).
    func makeURLRequest(remake: Bool = false) -> URLRequest {
        let (request, deferred) = sending(deferring: remake)
        return deferred?.request ?? request
    }

    /// The request to send, as ``makeURLRequest(remake:)`` makes it; with `deferring`, a changed
    /// request may instead come as its parts (`deferred`, with `request` the original), its
    /// `URLRequest` made only if someone reads it.
    ///
    /// swift-corelibs-foundation: the first change to a copy of `original` copies the whole
    /// NSMutableURLRequest and normalises its method with Unicode case-insensitive compares, and
    /// setting its fields builds a dictionary. A request made anew from the parts is the same
    /// request to `CurlTransport` and `StubTransport`, which read only the parts; but not to
    /// URLSession, which also reads whether the timeout was ever set (a flag of the struct no one
    /// else can read); nor the same URL object when it is relative to a base; and it does not carry
    /// the deprecated pipelining flag (which neither transport reads). Copied still: those, a
    /// changed URL that does not parse (the copy sends it as it did, without a URL), a request with
    /// a body stream, and every request on Darwin.
    func sending(deferring: Bool) -> (request: URLRequest, deferred: DeferredURLRequest?) {
        guard changed else { return (original, nil) }
        #if canImport(FoundationNetworking)
        guard deferring, let url = changedURL.map({ URL(string: $0) }) ?? original.url, url.baseURL == nil,
            bodyChanged || original.httpBodyStream == nil
        else {
            return (copyWithChanges(), nil)
        }
        let fields: [HTTPHeader]
        let hasFields: Bool
        if let changedHeaders {
            fields = namesMayRepeat ? changedHeaders.foldedFields() : changedHeaders
            hasFields = true
        } else {
            let given = original.allHTTPHeaderFields
            fields = given.map { $0.map { HTTPHeader(name: $0.key, value: $0.value) } } ?? []
            hasFields = given != nil
        }
        let deferred = DeferredURLRequest(
            url: url, method: method, fields: fields, hasFields: hasFields, body: bodyData, timeout: sendingTimeout, original: original)
        return (original, deferred)
        #else
        return (copyWithChanges(), nil)
        #endif
    }

    /// `original` with the changes set on a copy (every property the platform's request has kept).
    private func copyWithChanges() -> URLRequest {
        var request = original
        if let changedURL { request.url = URL(string: changedURL) }
        if methodChanged { request.httpMethod = method }
        if bodyChanged { request.httpBody = bodyData }
        if timeoutChanged { request.timeoutInterval = sendingTimeout }
        guard let changedHeaders else { return request }
        // Repeated fields are joined as RFC 9110 §5.3 says: ", ".
        request.allHTTPHeaderFields = changedHeaders.folded()
        return request
    }
}

/// The host's mutable response during the response side of one attempt.
final class ResponseState: ResultHandle, ResponseBackend {
    private(set) var statusCode: Int
    private var fields: [HTTPHeader]? {
        didSet { cHeaderPairs = nil }
    }
    private(set) var data: Data {
        didSet { cBodyCopy = nil }
    }
    /// What loaded plugins read, as C bytes: made on first read, dropped when the value changes.
    private var cHeaderPairs: CBytePairs?
    private var cBodyCopy: CByteCopy?
    let fileURL: URL?
    /// The protocol of the transport's response, when known.
    let httpVersion: String?
    /// How the transport's exchange went, when it measured it (none for a response a hook made).
    let metrics: TransferMetrics?
    private let url: URL?
    /// Whether the transport followed a redirect to get it (``InterceptorResponse/isRedirected``).
    let isRedirected: Bool
    /// The transport's response (or the parts it is made from on first read, with the fields it
    /// received), kept as long as no hook edits status or headers.
    private var original: ResponseSource?

    /// The handle loaded plugins' hooks receive: this state itself.
    var handle: ResultHandle { self }

    /// The request this response answers, as the request phase left it (the chain sets it): what
    /// ``requestHeaders`` reads.
    var sentRequest: RequestState?

    /// Whether a redirect led to another origin than the request's, on the way or at the end:
    /// the transports left the request's credentials (`Authorization`, `Cookie`) and a `Host` field
    /// of the caller's behind, and the
    /// last hop, which this response answers, went without them (the transport says so; the
    /// chain also compares the request's URL with the last).
    var credentialsLeftBehind = false

    /// The request's header fields as sent (to the last hop, when redirected); nil when the
    /// response does not know its request.
    var requestHeaders: [HTTPHeader]? {
        guard var sent = sentRequest?.headers else { return nil }
        if credentialsLeftBehind {
            sent.removeAll { field in SessionRouter.fieldsOfTheFirstOrigin.contains { HTTPHeader.namesEqual($0, field.name) } }
        }
        if let challengeAnswer {
            sent.removeAll { HTTPHeader.namesEqual($0.name, challengeAnswer.name) }
            sent.append(challengeAnswer)
        }
        if let jarCookie, !sent.contains(where: { HTTPHeader.namesEqual($0.name, "Cookie") }) {
            sent.append(HTTPHeader(name: "Cookie", value: jarCookie))
        }
        return sent
    }

    /// The `Cookie` the transport's jar added to the request this response answers
    /// (``TransportResponse/jarCookie``): part of ``requestHeaders``.
    var jarCookie: String? {
        didSet { cLastHopHeaders = nil }
    }

    /// The answer to the origin's challenge the host sent with the request this response answers
    /// (an `Authorization` no hook saw), when the response came from that origin: part of
    /// ``requestHeaders``, so that a response to a request the host authenticated is not taken for
    /// an anonymous one (the cache stored such a response shared). A proxy's answer is not: it
    /// goes to the proxy alone.
    var challengeAnswer: HTTPHeader? {
        didSet { cLastHopHeaders = nil }
    }

    /// ``requestHeaders`` as C bytes, for loaded plugins (ABI 1.3 `result_request_headers`).
    var cRequestHeaders: CBytePairs? {
        guard let sentRequest else { return nil }
        guard credentialsLeftBehind || challengeAnswer != nil || jarCookie != nil else { return sentRequest.cHeaders }
        if let cLastHopHeaders { return cLastHopHeaders }
        let view = CBytePairs.make(requestHeaders ?? [])
        cLastHopHeaders = view
        return view
    }
    private var cLastHopHeaders: CBytePairs?

    /// The URL the response came from (the last hop's).
    var finalURL: URL? { url }

    init(_ response: TransportResponse) {
        original = response.source
        statusCode = response.statusCode
        data = response.data
        fileURL = response.fileURL
        httpVersion = response.httpVersion
        metrics = response.metrics
        url = response.url
        isRedirected = response.redirected
        credentialsLeftBehind = response.credentialsLeftBehind
        jarCookie = response.jarCookie
        super.init(response: nil, failure: nil, mayDecide: false)
        self.response = self
    }

    init(_ synthetic: SyntheticResponse, url: URL?) {
        original = nil
        statusCode = synthetic.statusCode
        fields = synthetic.headers
        data = Data(synthetic.body)
        fileURL = nil
        httpVersion = nil
        metrics = nil
        isRedirected = false
        self.url = url
        super.init(response: nil, failure: nil, mayDecide: false)
        self.response = self
    }

    /// Header fields, read from the transport's response the first time a hook asks.
    var headers: [HTTPHeader] {
        if let fields { return fields }
        // Read before a hook edits status or fields (`original` is dropped after the list is made).
        if let received = original?.receivedFields, let listed = FoundationFieldNames.listed(received) {
            fields = listed
            return listed
        }
        var parsed = (original?.response?.allHeaderFields ?? [:]).compactMap { key, value -> HTTPHeader? in
            guard let name = key.base as? String else { return nil }
            return HTTPHeader(name: name, value: value as? String ?? "\(value)")
        }
        parsed.sortByName()
        fields = parsed
        return parsed
    }

    /// The header fields as C bytes, valid until they change.
    var cHeaders: CBytePairs {
        if let cHeaderPairs { return cHeaderPairs }
        let view = CBytePairs.make(headers)
        cHeaderPairs = view
        return view
    }

    /// The body as C bytes, valid until it changes.
    var cBody: ph_bytes {
        if let cBodyCopy { return cBodyCopy.bytes }
        let copy = CByteCopy.of(data)
        cBodyCopy = copy
        return copy.bytes
    }

    func setStatusCode(_ code: Int) throws {
        try HeaderValidation.checkStatus(code)
        _ = headers
        statusCode = code
        original = nil
    }

    func header(named name: String, index: Int) -> String? {
        // Our own list (made once): Foundation's lookup compares every name with
        // `caseInsensitiveCompare`, on each call.
        headers.value(named: name, index: index)
    }

    func headerValues(named name: String) -> [String] { headers.values(named: name) }

    func setHeader(named name: String, value: String?) throws {
        try HeaderValidation.check(name: name, value: value)
        editFields { $0.set(named: name, value: value) }
    }

    func addHeader(named name: String, value: String) throws {
        try HeaderValidation.check(name: name, value: value)
        editFields { $0.append(HTTPHeader(name: name, value: value)) }
    }

    /// Changes the fields in place (read from the transport's response first, if no hook had
    /// read them) and leaves the transport's response behind.
    private func editFields(_ change: (inout [HTTPHeader]) -> Void) {
        // Taken out of the observed property while it changes, as `RequestState.editFields` does.
        var edited = headers
        fields = nil
        if edited.capacity == edited.count { edited.reserveCapacity(edited.count + RequestState.roomForAddedFields) }
        change(&edited)
        fields = edited
        original = nil
    }

    var body: [UInt8] { [UInt8](data) }

    func bodyPrefix(_ maxBytes: Int) -> (bytes: [UInt8], count: Int) { ([UInt8](data.prefix(max(0, maxBytes))), data.count) }

    func setBody(_ body: [UInt8]) { data = Data(body) }

    func setData(_ data: Data) { self.data = data }

    /// The app's ``Response``: with the transport's `HTTPURLResponse` (or its parts) unless a hook
    /// edited status or fields, else with one made from the edited fields when the app first reads it.
    func makeResponse(request: TransportRequest) -> Response {
        let source: ResponseSource
        if let original {
            source = original
        } else if let url = url ?? request.url {
            source = .deferred(DeferredHTTPResponse(url: url, statusCode: statusCode, httpVersion: "HTTP/1.1", fields: .edited(headers)))
        } else {
            source = .given(nil)
        }
        return Response(
            statusCode: statusCode, data: data, sent: request.sent, response: source, fileURL: fileURL, httpVersion: httpVersion, metrics: metrics)
    }
}

extension Array where Element == HTTPHeader {
    /// Sorts the fields by name, stably (fields of one name keep their order), as `sort` by name
    /// would: a request or response has a few fields, which an insertion sort puts in order in
    /// less time than the general sort takes to start (it looks for runs to merge).
    mutating func sortByName() {
        guard count > 16 else {
            // Through the buffer: the names are compared where they are (the array's subscript
            // copied each name it compared, a retain and a release per name).
            withUnsafeMutableBufferPointer { fields in
                for index in fields.indices.dropFirst() {
                    var position = index
                    while position > 0, fields[position].name < fields[position - 1].name {
                        fields.swapAt(position, position - 1)
                        position -= 1
                    }
                }
            }
            return
        }
        sort { $0.name < $1.name }
    }
}

/// The last original field list a chain's requests started with, sorted, and its C copy for
/// loaded plugins. An app's requests mostly carry the same fields (the provider's): the first hook
/// to read a request's fields then reads this list, not one made and sorted for every request, and
/// loaded plugins read one C copy. The lists are compared byte for byte (`==` on strings holds
/// canonically equivalent ones equal, and a request's bytes are what it sends), at once when they
/// are one dictionary (on Linux; field by field, hashed, otherwise); a list of other
/// fields takes the place of the last (a few allocations more than without the memo, for the first
/// read of such a request's fields). A request without fields shares nothing.
///
/// The kept list holds the last such request's field values (an `Authorization` the app sets among
/// them) until another list replaces it or the chain goes.
final class OriginalFieldsMemo: Sendable {
    /// One original field list; never changed once made, shared by the requests that carry it
    /// (an edit copies it into the request's own list).
    // Safe as @unchecked Sendable: `given` and `sorted` are constants, and the C copy is made once
    // (its slot set with a compare-exchange) and only read after.
    final class Entry: @unchecked Sendable {
        /// The request's fields as Foundation gives them.
        let given: [String: String]
        /// The same sorted by name (``RequestState/sortedFields(_:room:)``, no room: never edited).
        let sorted: [HTTPHeader]
        /// Whether two of them share a name as `namesEqual` compares them (case-insensitively: a
        /// dictionary may hold `X-A` and `x-a`), worked out once for the requests that share them.
        let namesRepeat: Bool
        private let pairsSlot = OnceSlot<CBytePairs>()

        init(_ given: [String: String]) {
            self.given = given
            sorted = RequestState.sortedFields(given, room: 0)
            namesRepeat = sorted.foldedFields().count != sorted.count
        }

        /// Their C copy, made when a loaded plugin first reads them.
        var pairs: CBytePairs { pairsSlot.value { CBytePairs.make(sorted) } }

        deinit { pairsSlot.free() }
    }

    /// The entry the last request that read its fields made or found.
    private let last = Locked<Entry?>(nil)

    /// An empty memo.
    init() {}

    /// The entry of `given`: the last one when its fields are `given`'s bytes, else a new one,
    /// kept; nil without fields.
    func entry(for given: [String: String]) -> Entry? {
        guard !given.isEmpty else { return nil }
        if let kept = last.withLock({ $0 }), Self.sameBytes(kept.given, given) { return kept }
        let made = Entry(given)
        last.withLock { $0 = made }
        return made
    }

    /// Whether `a` and `b` hold the same names and values, byte for byte.
    static func sameBytes(_ a: [String: String], _ b: [String: String]) -> Bool {
        #if canImport(FoundationNetworking)
        // One dictionary (the provider's, kept by every `URLRequest` made with it): the same
        // representation, bit for bit, is the same storage, which no one changes while two hold it.
        // (Darwin's may be a bridged Foundation dictionary: compared field by field.)
        if withUnsafeBytes(of: a, { x in withUnsafeBytes(of: b) { y in x.elementsEqual(y) } }) { return true }
        #endif
        return UTF8Bytes.equal(a, b)
    }
}
