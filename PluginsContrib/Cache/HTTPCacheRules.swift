import Foundation
import PluginSDK

/// Cache-Control directives, parsed (RFC 9111 §5.2).
///
/// A repeated directive keeps its first value (§4.2.1), but for `no-cache` and `private`, whose
/// lists add up and whose unqualified form anywhere wins. An argument written with whitespace
/// around `=` is invalid, as is a delta-seconds argument that is not all digits: such a
/// directive is kept, marked invalid, so that a cache treats the response as stale.
struct CacheDirectives {
    /// The directives in the order written, each once: the lower-cased name, the argument (nil:
    /// none), and whether the argument is malformed. A list, not a dictionary: a field holds a
    /// few directives, and looking one up compares a few short strings instead of hashing.
    private var items: [(name: String, argument: String?, invalid: Bool)] = []

    init(_ headerValues: [String]) {
        guard !headerValues.isEmpty else { return }
        for value in headerValues {
            // The field's own bytes (no array of them made), names lower-cased only when they are not.
            var value = value
            value.withUTF8 { bytes in
                Self.forEachListItem(bytes[...]) { part in
                    let item = Self.trimmed(part, also: nil)
                    guard !item.isEmpty else { return }
                    if let equals = item.firstIndex(of: UInt8(ascii: "=")) {
                        let rawName = item[..<equals]
                        let rawArgument = item[(equals + 1)...]
                        let name = Self.lowercasedName(Self.trimmed(rawName, also: nil))
                        let spaced = rawName.last.map(Self.isSpace) == true || rawArgument.first.map(Self.isSpace) == true
                        var argument = Self.trimmed(rawArgument, also: nil)
                        if argument.count >= 2, argument.first == UInt8(ascii: "\""), argument.last == UInt8(ascii: "\"") {
                            argument = argument.dropFirst().dropLast()
                        }
                        let text = String(decoding: argument, as: UTF8.self)
                        guard let existing = index(of: name) else { return items.append((name, text, spaced)) }
                        merge(text, into: existing)
                    } else {
                        let name = Self.lowercasedName(item)
                        guard let existing = index(of: name) else { return items.append((name, nil, false)) }
                        merge(nil, into: existing)
                    }
                }
            }
        }
    }

    /// A repeat of the directive at `index`: the first value stays (§4.2.1), but for `no-cache`
    /// and `private`, whose field lists add up and whose unqualified form, written anywhere,
    /// covers the whole response (§5.2.2.4, §5.2.2.7: `no-cache="X-A", no-cache` is no-cache).
    private mutating func merge(_ argument: String?, into index: Int) {
        guard items[index].name == "no-cache" || items[index].name == "private", let kept = items[index].argument else { return }
        items[index].argument = argument.map { kept + ", " + $0 }
    }

    /// A directive's name as a lower-cased string (Foundation's `lowercased()` only when an ASCII
    /// capital is in it; names are tokens).
    private static func lowercasedName(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        let name = String(decoding: bytes, as: UTF8.self)
        return bytes.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) ? name.lowercased() : name
    }

    private func index(of name: String) -> Int? { items.firstIndex { $0.name == name } }

    /// The directive's argument: nil when the directive is absent, `.some(nil)` when it has none.
    func value(_ name: String) -> String?? { index(of: name).map { items[$0].argument } }

    func has(_ name: String) -> Bool { index(of: name) != nil }

    /// Whether a response to a request with credentials may be shared with other users: `public`
    /// (§5.2.2.9), and no unqualified `private` with it (of two conflicting directives the more
    /// restrictive wins, §4.2.1; a `private="…"` only keeps the fields it lists from being stored).
    var shareable: Bool { has("public") && !hasUnqualified("private") }

    /// Present without an argument: `no-cache`, not `no-cache="Set-Cookie"` (§5.2.2.4, §5.2.2.7).
    func hasUnqualified(_ name: String) -> Bool {
        guard let entry = value(name) else { return false }
        return entry == nil
    }

    /// The field names a qualified `no-cache="…"` or `private="…"` lists (lower-cased).
    func listedFields(_ name: String) -> [String] {
        guard let entry = value(name), let list = entry else { return [] }
        return list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
    }

    /// A delta-seconds argument (§1.2.2): absent, valid, or invalid (not all digits, empty, or
    /// written with spaces around `=`). Values past 2^31 count as 2^31.
    enum Seconds: Equatable {
        case absent
        case valid(Double)
        case invalid
    }

    func delta(_ name: String) -> Seconds {
        guard let index = index(of: name) else { return .absent }
        guard !items[index].invalid, let text = items[index].argument else { return .invalid }
        return DeltaSeconds.parse(text).map { .valid($0) } ?? .invalid
    }

    /// The directive's number of seconds; nil when absent or invalid.
    func seconds(_ name: String) -> Double? {
        if case .valid(let value) = delta(name) { return value }
        return nil
    }

    /// Calls `body` with each part of a comma-separated list, in order (commas inside quoted
    /// strings do not separate), without a list of the parts made.
    static func forEachListItem(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, _ body: (Slice<UnsafeBufferPointer<UInt8>>) -> Void) {
        var start = bytes.startIndex
        var quoted = false
        for index in bytes.indices {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") { quoted.toggle() }
            if byte == UInt8(ascii: ","), !quoted {
                body(bytes[start..<index])
                start = index + 1
            }
        }
        body(bytes[start..<bytes.endIndex])
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// `bytes` without leading and trailing spaces and tabs (and `also`, when given, after them).
    static func trimmed(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, also: UInt8?) -> Slice<UnsafeBufferPointer<UInt8>> {
        var slice = bytes
        while let first = slice.first, isSpace(first) { slice = slice.dropFirst() }
        while let last = slice.last, isSpace(last) { slice = slice.dropLast() }
        if let also {
            while let first = slice.first, first == also { slice = slice.dropFirst() }
            while let last = slice.last, last == also { slice = slice.dropLast() }
        }
        return slice
    }
}

/// One stored response.
///
/// Its parts live in one immutable storage shared by its copies, and a change makes a new one: a
/// copy of an entry is one reference counted, where it was one per string, list and table of it
/// (a hit copies the entry it serves out of the store, and on into the answer), and a part is read
/// where it is (`_read`), with nothing counted.
struct CacheEntry {
    /// The parts of an entry; a change to the fields makes them parsed anew.
    private struct Parts: Sendable {
        var key: String
        var status: Int
        var headerNames: [String] {
            didSet { parsed = ParsedFields() }
        }
        var headerValues: [String] {
            didSet { parsed = ParsedFields() }
        }
        var body: [UInt8]
        var requestTime: Double
        var responseTime: Double
        var vary: [String: String]
        var ttl: Double?
        var hasQuery: Bool
        var parsed: ParsedFields
    }

    /// The parts, shared by the copies of an entry; never changed (a change makes another).
    private final class Storage: Sendable {
        let parts: Parts

        init(_ parts: Parts) { self.parts = parts }
    }

    private var storage: Storage

    /// An entry of these parts.
    init(
        key: String, status: Int, headerNames: [String], headerValues: [String], body: [UInt8], requestTime: Double,
        responseTime: Double, vary: [String: String], ttl: Double?, hasQuery: Bool
    ) {
        storage = Storage(
            Parts(
                key: key, status: status, headerNames: headerNames, headerValues: headerValues, body: body, requestTime: requestTime,
                responseTime: responseTime, vary: vary, ttl: ttl, hasQuery: hasQuery, parsed: ParsedFields()))
    }

    /// Changes a part: a new storage with the change made (entries change only when stored or
    /// revalidated).
    private mutating func change(_ body: (inout Parts) -> Void) {
        var parts = storage.parts
        body(&parts)
        storage = Storage(parts)
    }

    var key: String {
        _read { yield storage.parts.key }
        set { change { $0.key = newValue } }
    }
    var status: Int {
        _read { yield storage.parts.status }
        set { change { $0.status = newValue } }
    }
    /// The stored fields' names; a change makes the fields parsed anew (``facts``).
    var headerNames: [String] {
        _read { yield storage.parts.headerNames }
        set { change { $0.headerNames = newValue } }
    }
    /// The stored fields' values, in the order of ``headerNames``; a change makes the fields
    /// parsed anew (``facts``).
    var headerValues: [String] {
        _read { yield storage.parts.headerValues }
        set { change { $0.headerValues = newValue } }
    }
    var body: [UInt8] {
        _read { yield storage.parts.body }
        set { change { $0.body = newValue } }
    }
    var requestTime: Double {
        _read { yield storage.parts.requestTime }
        set { change { $0.requestTime = newValue } }
    }
    var responseTime: Double {
        _read { yield storage.parts.responseTime }
        set { change { $0.responseTime = newValue } }
    }
    /// Request header values the response varies on (lower-case names).
    var vary: [String: String] {
        _read { yield storage.parts.vary }
        set { change { $0.vary = newValue } }
    }
    /// A freshness lifetime set by the target (`pluginOptions["cache"]`), overriding the headers.
    var ttl: Double? {
        _read { yield storage.parts.ttl }
        set { change { $0.ttl = newValue } }
    }
    /// Whether the response's unqualified `no-cache` has it validated before every use
    /// (§5.2.2.4): not under a target's ``ttl``, which caches a 2xx whatever its headers say but
    /// `no-store`.
    var noCache: Bool { ttl == nil && directives.hasUnqualified("no-cache") }
    /// Whether the URL has a query (heuristic freshness is not used then).
    var hasQuery: Bool {
        _read { yield storage.parts.hasQuery }
        set { change { $0.hasQuery = newValue } }
    }
    /// What the fields say, worked out on first use and shared by the copies of this entry
    /// (a stored entry is read by every request it answers); new when the fields change.
    var parsed: ParsedFields { storage.parts.parsed }

    var headers: [HTTPHeader] { zip(headerNames, headerValues).map { HTTPHeader(name: $0, value: $1) } }

    func header(_ name: String) -> String? {
        zip(headerNames, headerValues).first { HTTPHeader.namesEqual($0.0, name) }?.1
    }

    func headerValues(_ name: String) -> [String] {
        var values: [String] = []
        for (field, value) in zip(headerNames, headerValues) where HTTPHeader.namesEqual(field, name) { values.append(value) }
        return values
    }

    /// What the fields say that every hit reads, worked out on the first read.
    var facts: FieldFacts {
        parsed.facts {
            let directives = CacheDirectives(headerValues("Cache-Control"))
            return FieldFacts(
                directives: directives, maxAge: directives.delta("max-age"), date: header("Date").flatMap { HTTPDate.parse($0) },
                age: DeltaSeconds.age(headerValues("Age")))
        }
    }

    /// The response's `Cache-Control` directives (of ``facts``).
    var directives: CacheDirectives { facts.directives }

    /// RFC 9111 §4.2.1 freshness lifetime.
    var freshnessLifetime: Double {
        if let ttl { return ttl }
        let facts = facts
        switch facts.maxAge {
        case .valid(let maxAge): return maxAge
        case .invalid: return 0  // invalid freshness information: stale (§4.2.1)
        case .absent: break
        }
        let directives = facts.directives
        let date = facts.date ?? responseTime
        if let expires = header("Expires") {
            // An invalid Expires means already expired (§5.3).
            guard let expiry = HTTPDate.parse(expires) else { return 0 }
            return max(0, expiry - date)
        }
        // Heuristic freshness (§4.2.2): heuristically cacheable codes, and any response marked public.
        let heuristic = Self.heuristicallyCacheable.contains(status) || directives.has("public")
        if !hasQuery, heuristic, let modified = header("Last-Modified").flatMap({ HTTPDate.parse($0) }), modified < date {
            return (date - modified) / 10
        }
        return 0
    }

    /// RFC 9111 §4.2.3 current age at `now`.
    func age(at now: Double) -> Double {
        let facts = facts
        let date = facts.date ?? responseTime
        let apparent = max(0, responseTime - date)
        let ageValue = facts.age ?? 0
        let corrected = ageValue + max(0, responseTime - requestTime)
        return max(apparent, corrected) + max(0, now - responseTime)
    }

    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Headers updated from a `304` (or a `HEAD`'s `200`) received at `now` (RFC 9111 §4.3.4):
    /// its fields replace stored ones, except framing. It validates the stored response now: a
    /// stored `Age` it does not repeat goes (it was an upstream cache's when the response first
    /// came, and counted again on top of the new response times), and without a `Date` of its
    /// own the stored one becomes `now` (a recipient with a clock adds one, RFC 9110 §6.6.1).
    mutating func update(from notModified: [HTTPHeader], receivedAt now: Double) {
        let skipped: Set<String> = ["content-length", "content-encoding", "transfer-encoding", "content-range"]
        var fields = headers
        for header in notModified where !skipped.contains(header.name.lowercased()) {
            fields.removeAll { HTTPHeader.namesEqual($0.name, header.name) }
        }
        if !notModified.contains(where: { HTTPHeader.namesEqual($0.name, "Age") }) {
            fields.removeAll { HTTPHeader.namesEqual($0.name, "Age") }
        }
        if !notModified.contains(where: { HTTPHeader.namesEqual($0.name, "Date") }) {
            fields.removeAll { HTTPHeader.namesEqual($0.name, "Date") }
            fields.append(HTTPHeader(name: "Date", value: HTTPDate.format(now)))
        }
        fields += notModified.filter { !skipped.contains($0.name.lowercased()) }
        headerNames = fields.map(\.name)
        headerValues = fields.map(\.value)
    }
}

/// What a ``CacheEntry``'s fields say about its freshness and age (RFC 9111 §4.2), parsed once
/// and read by every request the entry answers (a hit parsed `max-age`, `Date` and `Age` again
/// each time, and `Date` twice without a `max-age`).
struct FieldFacts: Sendable {
    /// The response's `Cache-Control` directives.
    let directives: CacheDirectives
    /// The `max-age` directive: absent, valid or invalid (§4.2.1).
    let maxAge: CacheDirectives.Seconds
    /// The first `Date` field, in seconds since 1970; nil when absent or not an HTTP-date.
    let date: Double?
    /// The `Age` field's seconds; nil when absent or invalid.
    let age: Double?
}

/// The parsed fields of a ``CacheEntry`` (``FieldFacts``), made once. A slot set once, atomically
/// (a lock was two allocations more for every entry decoded from disk, and two lock calls per read).
final class ParsedFields: Sendable {
    private let cached = OnceSlot<FieldFacts>()

    /// The facts, made by `make` the first time (two threads may both make them: the first
    /// stored is kept, and both are the same).
    func facts(_ make: () -> FieldFacts) -> FieldFacts { cached.value(make) }

    deinit { cached.free() }
}
