import Foundation
import PluginSDK

/// A private HTTP cache (RFC 9111) for `GET` (and `HEAD`, served from stored `GET`s).
///
/// A fresh hit short-circuits the chain: no network, `X-Cache: hit`. A stale entry is
/// revalidated with `If-None-Match` / `If-Modified-Since`; a `304` serves the stored body with
/// merged headers (`X-Cache: revalidated`). Everything else is `X-Cache: miss`, or `stale` when
/// `staleIfError` (or the response's `stale-if-error`) serves a stale entry after a transport
/// error or a `5xx` (with `Warning: 110 - "Response is Stale"`).
///
/// Honoured: response `max-age`, `no-store`, `no-cache`, `must-revalidate`, `private`, `public`,
/// `Expires` − `Date`, `Age`, heuristic freshness (10% of `Date` − `Last-Modified`, only for URLs
/// without a query); request `no-cache` (and `Pragma: no-cache`), `no-store`, `max-age`,
/// `max-stale`, `min-fresh`, `only-if-cached` (a `504` when nothing usable is stored); `Vary` (up
/// to eight variants per URL; `Vary: *` is never stored). Any unsafe method invalidates the entry of its URL
/// and of its same-origin `Location` / `Content-Location`; a fresh entry answers the client's own
/// `If-None-Match` / `If-Modified-Since` with `304`; within a response's `stale-while-revalidate`
/// (RFC 5861) a stale entry is served (`X-Cache: stale`) and revalidated in a background exchange
/// the host runs, one per entry at a time. A `206` with one range and a strong `ETag` is stored
/// and combined with other spans of the same representation (a complete entry once they cover
/// it); `Range` requests within it are answered from it (RFC 9111 coverage: the plugin's README). Per target,
/// `pluginOptions["cache"]` is a TTL in seconds, `no-store`, `only-if-cached`, `purge` (drop the
/// request's partition), or `revalidate` (always ask the origin; what background revalidations use).
///
/// Credentials: a response to a request that carried `Authorization`, `Cookie` or
/// `Proxy-Authorization` is stored in a partition named by an HMAC of those values (under a
/// secret of this cache; the credentials are never stored) and served only to requests with the
/// same values; a `public` one is shared with everyone. With `authorized: "refuse"` only
/// `public` responses to such requests are stored.
public struct CachePlugin: ExportablePlugin {
    /// The name manifests and bundles know this plugin by.
    public static var pluginName: String { "cache" }
    /// This plugin's version.
    public static var pluginVersion: String { "1.1.0" }
    /// One line saying what this plugin does (`plugin.json`'s `summary`, `pluginhost list --json`).
    public static var pluginSummary: String { "Private HTTP cache (RFC 9111), memory LRU plus disk" }
    /// The hooks this plugin implements (the others are not exported).
    public static var implementedHooks: Set<InterceptorHook> { [.prepare, .willSend, .process] }

    let store: CacheStore
    let staleIfError: Double
    let authorized: AuthorizedMode
    /// Keys partition names (see ``partition(_:)``): HMAC-SHA256 under a secret of this cache.
    let partitionKey: HMACSHA256.Key
    private let pending = PerRequestState<Pending>()
    /// Entries being revalidated in the background (stale-while-revalidate), by partition and
    /// key, with when it began: one revalidation per entry at a time.
    private let revalidations = Locked(Revalidations())
    /// Held by each change made of several store calls (a read, then writes: invalidation, a
    /// variant's index, a `304`'s update, partial content), so that two never interleave: a
    /// `304`'s update checked the entry, an invalidation removed it, and the update stored it
    /// again (§4.4); two variants stored at once each rewrote the index without the other.
    /// Recursive: a change may make another (a store that replaces an index removes it first).
    /// Lookups do not take it.
    private let changes = NSRecursiveLock()
    /// After this many seconds a background revalidation that never reported back no longer
    /// holds its entry.
    static let revalidationTimeout: Double = 60

    /// What happens to responses to requests that carry credentials.
    enum AuthorizedMode: String {
        /// Stored in the credentials' partition; `public` ones shared.
        case partition
        /// Only `public` ones stored (and shared).
        case refuse
    }

    /// The request headers that carry credentials, in the order they are hashed (``credentialParts(of:_:)``
    /// spells them out in this order).
    static let credentialHeaders = ["authorization", "cookie", "proxy-authorization"]

    /// What a request's `prepare` found, kept for its response. A reference, not a value: it is
    /// handed from `prepare` to `process` through the per-request table, and a value this size
    /// was copied into the table and out of it for every request.
    // Safe as @unchecked Sendable: one request's hooks never run concurrently (the ABI's
    // contract, and the chain's), so its state is changed by one hook at a time, and it passes
    // between them through the table's lock.
    final class Pending: @unchecked Sendable {
        /// The shared key, `GET <url>`.
        var key: String
        /// The partition of the request's credentials (nil: none).
        var partition: String?
        /// The credential header values the partition was computed from (a response to a
        /// request sent with others, added inside the cache after its lookup, is not stored).
        var credentials = ""
        var method: String
        var entry: CacheEntry?
        var revalidating = false
        var noStore = false
        /// Whether the request lets a stale entry answer an error (``staleReplacement(_:now:)``).
        var staleOnError = true
        /// The request's own bound on that entry's staleness, in seconds: its `max-stale=N`
        /// (§5.2.1.2; 0 for an argument that is no delta-seconds), else none.
        var staleLimit = Double.infinity
        var ttl: Double?
        var requestTime: Double
        /// The request's fields as prepare saw them; as sent, once willSend ran (on a host whose
        /// responses do not tell their request).
        var requestHeaders: [HTTPHeader] = []
        var hasQuery = false

        init(key: String, partition: String?, method: String, requestTime: Double) {
            self.key = key
            self.partition = partition
            self.method = method
            self.requestTime = requestTime
        }
    }

    /// Whether a response tells the request as sent (ABI 1.3, or in process): then `willSend` is
    /// not needed and the instance leaves it out of its active hooks.
    let responsesCarryRequestHeaders: Bool

    /// `prepare` and `process`, when responses tell their request; else every hook.
    public var activeHooks: Set<InterceptorHook>? { responsesCarryRequestHeaders ? [.prepare, .process] : nil }

    /// Reads the configuration (keys in this plugin's README); an unknown key or a bad value throws
    /// a `PluginConfigurationError` naming it.
    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["directory", "maxMemoryEntries", "maxMemoryBytes", "maxDiskBytes", "staleIfError", "authorized"])
        let directory = try configuration.string("directory")
        if let directory, !directory.hasPrefix("/") { throw configuration.error("directory must be an absolute path") }
        // 0: no memory tier, every hit read from the directory (a cache of large responses, or of
        // many processes that should not each keep copies in memory).
        let maxMemoryEntries = try configuration.integer("maxMemoryEntries", default: 256, in: 0...1_000_000)
        if maxMemoryEntries == 0, directory == nil {
            throw configuration.error("maxMemoryEntries 0 keeps nothing in memory and needs a directory to keep responses in")
        }
        // Every value is read before the directory is made: a configuration refused leaves nothing behind.
        let maxMemoryBytes = try configuration.integer("maxMemoryBytes", default: 16 << 20, in: 1...(1 << 40))
        let maxDiskBytes = try configuration.integer("maxDiskBytes", default: 64 << 20, in: 1...(1 << 50))
        staleIfError = try configuration.number("staleIfError", default: 0, in: 0...(365 * 86_400))
        authorized = AuthorizedMode(rawValue: try configuration.oneOf("authorized", ["partition", "refuse"], default: "partition")) ?? .partition
        do {
            store = try CacheStore(
                maxMemoryEntries: maxMemoryEntries, maxMemoryBytes: maxMemoryBytes, directory: directory, maxDiskBytes: maxDiskBytes)
            partitionKey = HMACSHA256.Key(try CacheStore.partitionSecret(directory: directory) { host.randomBytes(32) })
        } catch let error as PluginConfigurationError {
            throw error
        } catch let error as CacheStore.DirectoryError {
            throw configuration.error("directory \(directory ?? "") is refused: \(error.description)")
        } catch {
            throw configuration.error("directory \(directory ?? "") cannot be created: \(error.localizedDescription)")
        }
        responsesCarryRequestHeaders = host.responsesCarryRequestHeaders
    }

    /// The partition of a request with these credentials (``credentials(of:)``): the first 16
    /// bytes of an HMAC-SHA256 under this cache's secret, in hex; nil when there are none.
    func partition(_ credentials: String) -> String? {
        guard !credentials.isEmpty else { return nil }
        // One user's requests follow each other: the last answer is kept (one HMAC per change).
        // The key alone is captured (a method of this struct as the closure copied all of it,
        // on every request with credentials or without).
        let key = partitionKey
        return lastPartition.answer(for: credentials) { Self.partition($0, key: key) }
    }

    /// The last credentials seen and their partition.
    private let lastPartition = LastAnswer<String, String>()

    /// The shared key of a GET or HEAD of `url`: `GET <url>`. The last one is kept: an app's
    /// requests repeat a few URLs, and a URL read from the host is the same string while its bytes
    /// are.
    func sharedKey(_ url: String) -> String {
        lastKey.answer(for: url, Self.getKey)
    }

    /// `GET <url>`, the shared key of `url`, with its bytes above 0x7F percent-encoded as the
    /// request goes out: keys are compared as strings, and two URLs of other bytes can be equal
    /// as strings (`é`, and `e` + U+0301), which two ASCII strings cannot.
    /// The URL's user information (`user:password@`) is left out: it is a credential, which keys
    /// never hold (it names the partition instead: ``withUserinfo(_:of:)``).
    static func getKey(_ url: String) -> String {
        var url = url
        if let userinfo = URLParts.userInfoRange(of: url) { url.removeSubrange(userinfo.lowerBound...userinfo.upperBound) }
        if url.utf8.allSatisfy({ $0 < 0x80 }) { return "GET " + url }
        return "GET " + RFC3986.escape(url) { $0 < 0x80 }
    }

    /// The credentials message `credentials` of a request to `url`, with the URL's user
    /// information when it has some (the transport sends it as `Authorization`, which no hook
    /// sees): a response to such a URL goes to the partition of its user, as any with credentials.
    static func withUserinfo(_ credentials: String, of url: String) -> String {
        guard let userinfo = URLParts.userInfoRange(of: url) else { return credentials }
        return credentials + "userinfo\u{0}" + url[userinfo] + "\n"
    }

    private let lastKey = LastAnswer<String, String>()

    /// The directives of a response's `Cache-Control`. A response with one such field (most) is
    /// parsed once per value: the last value and its directives are kept (an origin sends the same
    /// field with most of its responses, and parsing it made three allocations per response).
    func responseDirectives(_ fields: [HTTPHeader]) -> CacheDirectives {
        var value: String?
        var count = 0
        for field in fields where HTTPHeader.namesEqual(field.name, "Cache-Control") {
            value = field.value
            count += 1
        }
        guard count == 1, let value else { return CacheDirectives(fields.values(named: "Cache-Control")) }
        return lastDirectives.answer(for: value) { CacheDirectives([$0]) }
    }

    private let lastDirectives = LastAnswer<String, CacheDirectives>()

    private static func partition(_ credentials: String, key: HMACSHA256.Key) -> String {
        var mac = HMACSHA256.Authenticator(key: key)
        mac.update(credentials.utf8)
        return withUnsafeTemporaryAllocation(byteCount: 32, alignment: 4) { digest in
            mac.finalize(into: digest)
            return SHA256.hex(UnsafeRawBufferPointer(rebasing: digest[0..<16]))
        }
    }

    /// The request's credential header values, as the partition's HMAC message: for each name
    /// of ``credentialHeaders`` in that order, each of its values in field order, as
    /// `name NUL value LF`. Empty when there are none (nothing allocated: most requests carry
    /// none of these names). One string: a nested list per name was two allocations per request.
    static func credentials(of headers: [HTTPHeader]) -> String {
        var count = 0
        _ = credentialParts(of: headers) { part in
            count += part.utf8.count
            return true
        }
        guard count > 0 else { return "" }
        var message = ""
        message.reserveCapacity(count)
        _ = credentialParts(of: headers) { part in
            message += part
            return true
        }
        return message
    }

    func partition(of request: InterceptorRequest) -> String? {
        partition(Self.withUserinfo(Self.credentials(of: request.headers), of: request.url))
    }

    /// ``credentials(of:)`` of `headers`: the last message made when `headers` make the same one
    /// (compared with it piece by piece, nothing allocated: one user's requests carry the same
    /// credentials), else a new one, kept in its place.
    func keptCredentials(of headers: [HTTPHeader]) -> String {
        lastCredentials.withLock { last in
            var offset = 0
            let same = last.utf8.withContiguousStorageIfAvailable { kept in
                Self.credentialParts(of: headers) { part in
                    part.utf8.withContiguousStorageIfAvailable { bytes in
                        guard offset + bytes.count <= kept.count,
                            bytes.isEmpty || memcmp(kept.baseAddress! + offset, bytes.baseAddress!, bytes.count) == 0
                        else { return false }
                        offset += bytes.count
                        return true
                    } ?? false
                } && offset == kept.count
            }
            if same == true { return last }
            last = Self.credentials(of: headers)
            return last
        }
    }

    /// The last credentials message ``keptCredentials(of:)`` made.
    private let lastCredentials = Locked("")

    /// Calls `part` with the pieces of the credentials message of `headers`, in order (name,
    /// NUL, value, LF for each credential field, as ``credentials(of:)`` joins them), until it
    /// returns false; whether it never did.
    @inline(__always)
    static func credentialParts(of headers: [HTTPHeader], _ part: (String) -> Bool) -> Bool {
        // The names of ``credentialHeaders`` as literals, in its order, and the fields read where
        // they are: no list of names (a lazily made global) walked, no field copied to look at its name.
        headers.withUnsafeBufferPointer { fields in
            for slot in 0..<3 {
                let name = slot == 0 ? "authorization" : slot == 1 ? "cookie" : "proxy-authorization"
                let length = name.utf8.count
                for index in fields.indices where fields[index].name.utf8.count == length && HTTPHeader.namesEqual(fields[index].name, name) {
                    guard part(name), part("\u{0}"), part(fields[index].value), part("\n") else { return false }
                }
            }
            return true
        }
    }

    /// The stored entry a request may be served, for its shared key `key` (`GET <url>`) in
    /// `partition` (nil: no credentials): its partition's, else a shared one (which must be
    /// `public` when the request carries credentials). With `suffix` ``partialSuffix``: the stored
    /// partial content, by the same rule.
    func lookup(_ key: String, partition: String?, _ fields: [HTTPHeader]? = nil, suffix: String = "") -> CacheEntry? {
        let key = suffix.isEmpty ? key : key + suffix
        guard let partition else { return fetch(key, fields) }
        if authorized == .partition, let own = fetch(partitionedKey(key, in: partition), fields) { return own }
        guard let shared = fetch(key, fields), shared.directives.shareable else { return nil }
        return shared
    }

    /// The key of `key` within a credentials partition: `<partition> <key>`, made in one
    /// allocation (a lookup with credentials makes it on every request).
    static func key(_ key: String, in partition: String) -> String {
        var joined = ""
        joined.reserveCapacity(partition.utf8.count + 1 + key.utf8.count)
        joined += partition
        joined += " "
        joined += key
        return joined
    }

    /// ``key(_:in:)``, the last one kept: one user's requests to one URL look up the same key
    /// (the key and partition compared are the kept strings themselves, see ``sharedKey(_:)``
    /// and ``partition(_:)``).
    func partitionedKey(_ key: String, in partition: String) -> String {
        lastPartitionedKey.answer(for: PartitionedKey(key: key, partition: partition)) { Self.key($0.key, in: $0.partition) }
    }

    /// The last shared key and partition ``partitionedKey(_:in:)`` was asked for, and its answer.
    private let lastPartitionedKey = LastAnswer<PartitionedKey, String>()

    /// A shared key and a credentials partition; the same only as the same bytes.
    struct PartitionedKey: Equatable {
        /// The shared key (`GET <url>`).
        let key: String
        /// The partition (hex of the credentials' HMAC).
        let partition: String

        static func == (a: Self, b: Self) -> Bool { UTF8Bytes.equal(a.key, b.key) && UTF8Bytes.equal(a.partition, b.partition) }
    }

    /// The cache answered this request itself: nothing is kept for it, so its response side
    /// finds no state and leaves the response alone.
    func markServed(_ context: InterceptorContext) {
        _ = pending.remove(context.requestID)
    }

    // MARK: Variants (§4.1)

    /// The most variants kept per URL; the least recently stored goes first.
    static let maxVariants = 8

    /// Whether `entry` only lists a URL's variants: status 0, `vary` holding the names the
    /// response varies on, `headerNames` the variants' keys (newest first).
    static func isVariantIndex(_ entry: CacheEntry) -> Bool { entry.status == 0 }

    /// The key of the variant of `base` selected by these (normalised) header values.
    func variantKey(_ base: String, names: [String], value: (String) -> String) -> String {
        let selection = names.sorted().map { $0 + "=" + value($0) }.joined(separator: "\n")
        return base + Self.variantSeparator + SHA256.hex(SHA256.hash(Array(selection.utf8)))
    }

    /// What stands between a URL's key and a variant's selection in the variant's key.
    static let variantSeparator = "\u{1}"

    /// Whether `key` is `base`'s own entry or one of its variants.
    static func isEntry(_ key: String, of base: String) -> Bool { key == base || key.hasPrefix(base + variantSeparator) }

    /// The entry stored for `base`, through its variant index when it has one, selected by the
    /// request's `fields` (nil: no request, no variant).
    ///
    /// A variant the index does not list is not served (and goes): the index is what an
    /// invalidation removes variants by (§4.4), and one evicted or written over by a concurrent
    /// store before its variants left them behind, to be served after the URL was invalidated.
    func fetch(_ base: String, _ fields: [HTTPHeader]?) -> CacheEntry? {
        guard let found = store.get(base) else { return nil }
        guard Self.isVariantIndex(found) else { return found }
        guard let fields else { return nil }
        let key = variantKey(base, names: Array(found.vary.keys)) { self.varyValue($0, fields.values(named: $0)) }
        guard found.headerNames.contains(key) else {
            store.remove(key)
            return nil
        }
        return store.get(key)
    }

    /// Removes `entry` (and the variants it lists) while it is the one stored under its key: not
    /// a newer response another request stored meanwhile.
    func removeIfUnchanged(_ entry: CacheEntry) {
        changes.lock()
        defer { changes.unlock() }
        guard let current = store.get(entry.key), current.responseTime == entry.responseTime, current.header("ETag") == entry.header("ETag")
        else { return }
        removeAll(entry.key)
    }

    /// Removes `base` and every variant it lists (invalidation takes them together, §4.4).
    func removeAll(_ base: String) {
        changes.lock()
        defer { changes.unlock() }
        if let found = store.get(base), Self.isVariantIndex(found) {
            for key in found.headerNames { store.remove(key) }
        }
        store.remove(base)
        store.remove(base + Self.partialSuffix)
    }

    // MARK: Partial content (§3.3, §3.4)

    /// Where a URL's stored partial content lives: beside its complete entry.
    static let partialSuffix = "\u{2}partial"

    /// A single `Content-Range: bytes first-last/complete` with a known complete length.
    struct ContentRange: Equatable {
        var first: Int
        var last: Int
        var complete: Int

        init?(_ value: String?) {
            guard let value, value.lowercased().hasPrefix("bytes ") else { return nil }
            let parts = value.dropFirst(6).split(separator: "/", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let complete = Int(parts[1]), complete > 0 else { return nil }
            let bounds = parts[0].split(separator: "-", maxSplits: 1).map { Int($0) }
            guard bounds.count == 2, let first = bounds[0], let last = bounds[1], first >= 0, first <= last, last < complete else {
                return nil
            }
            (self.first, self.last, self.complete) = (first, last, complete)
        }
    }

    /// Stores a `206` (§3.3) when it has one byte range of a known length and a strong entity
    /// tag, combined with the stored partial content of the same URL when their tags match and
    /// the ranges meet or overlap (§3.4); content that covers the whole representation becomes a
    /// complete `200` entry. Anything else (several ranges, a weak or no tag, `Vary`) is not stored.
    func storePartial(_ response: InterceptorResponse, _ fields: [HTTPHeader], state: Pending, now: Double, sent: () -> [HTTPHeader]) {
        changes.lock()
        defer { changes.unlock() }
        let body = response.body
        guard let range = ContentRange(fields.value(named: "Content-Range")), body.count == range.last - range.first + 1,
            let etag = fields.value(named: "ETag"), !etag.hasPrefix("W/"), fields.values(named: "Vary").isEmpty,
            var entry = storable(response, fields, state: state, now: now, partial: true, sent: sent)
        else { return }
        let key = entry.key + Self.partialSuffix
        var first = range.first
        var bytes = body
        if let stored = store.get(key), stored.header("ETag") == etag, let have = ContentRange(stored.header("Content-Range")),
            have.complete == range.complete, have.first <= range.last + 1, range.first <= have.last + 1
        {
            // Same representation, ranges that meet: one span, the newer bytes where they overlap.
            let start = min(have.first, range.first)
            let end = max(have.last, range.last)
            var merged = [UInt8](repeating: 0, count: end - start + 1)
            merged.replaceSubrange((have.first - start)...(have.last - start), with: stored.body)
            merged.replaceSubrange((range.first - start)...(range.last - start), with: body)
            first = start
            bytes = merged
        }
        // Everything: a complete response, as if the origin had sent a 200 (§3.4); else the span.
        let whole = first == 0 && bytes.count == range.complete
        var headers = entry.headers.filter { !["content-range", "content-length"].contains($0.name.lowercased()) }
        headers.append(
            whole
                ? HTTPHeader(name: "Content-Length", value: String(bytes.count))
                : HTTPHeader(name: "Content-Range", value: "bytes \(first)-\(first + bytes.count - 1)/\(range.complete)"))
        entry.headerNames = headers.map(\.name)
        entry.headerValues = headers.map(\.value)
        entry.body = bytes
        if whole {
            entry.status = 200
            store.remove(key)
            put(entry, base: entry.key)
        } else {
            entry.key = key
            store.put(entry)
        }
    }

    /// Stores `entry` under `base`: as it is, or, when it varies, as one variant in the base's index.
    func put(_ entry: CacheEntry, base: String) {
        changes.lock()
        defer { changes.unlock() }
        let existing = store.get(base)
        guard !entry.vary.isEmpty else {
            if let existing, Self.isVariantIndex(existing) { removeAll(base) }
            store.put(entry)
            return
        }
        let names = entry.vary.keys.sorted()
        var keys: [String] = []
        if let existing, Self.isVariantIndex(existing), existing.vary.keys.sorted() == names {
            keys = existing.headerNames
        } else if existing != nil {
            removeAll(base)
        }
        var variant = entry
        variant.key = variantKey(base, names: names) { entry.vary[$0] ?? "" }
        keys = [variant.key] + keys.filter { $0 != variant.key }
        for dropped in keys.dropFirst(Self.maxVariants) { store.remove(dropped) }
        keys = Array(keys.prefix(Self.maxVariants))
        let index = CacheEntry(
            key: base, status: 0, headerNames: keys, headerValues: keys.map { _ in "" }, body: [], requestTime: 0, responseTime: 0,
            vary: Dictionary(uniqueKeysWithValues: names.map { ($0, "") }), ttl: nil, hasQuery: false)
        store.put(variant)
        store.put(index)
    }

    /// Whether `method` invalidates: every method but the safe ones (RFC 9110 §9.2.1), unknown
    /// ones included (RFC 9111 §4.4).
    static func isUnsafe(_ method: String) -> Bool {
        // Compared, not hashed: each is a small string, compared as two words.
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE": return false
        default: return true
        }
    }

    /// Whether `url` has a `?`: `memchr` over its bytes (the generic `contains` went byte by byte
    /// through the string's view, on every request).
    static func hasQuery(_ url: String) -> Bool {
        url.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.baseAddress.map { memchr($0, Int32(UInt8(ascii: "?")), bytes.count) != nil } ?? false
        } ?? url.utf8.contains(UInt8(ascii: "?"))
    }

    /// `method` in capitals (as it is already, nearly always: then no new string is made).
    static func upper(_ method: String) -> String {
        method.utf8.contains(where: { $0 &- UInt8(ascii: "a") < 26 || $0 >= 0x80 }) ? method.uppercased() : method
    }

    // MARK: Request side

    /// Answers from a usable stored entry (`X-Cache: hit`, `stale`, a `304` or a range), with a
    /// `504` for `only-if-cached` when nothing is usable, or makes the request conditional to
    /// revalidate an entry it cannot serve; remembers what the response side needs.
    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        let method = Self.upper(request.method)
        let option = context.target.pluginOptions["cache"]?.lowercased()
        let now = context.services.now()
        // Read once: each read of a loaded plugin's request crosses into the host.
        let url = request.url
        if option == "purge" {
            // Drops everything stored for these credentials (a logout, often a `POST`); the
            // request itself is not stored, and an unsafe one still invalidates (§4.4).
            // Without credentials, nothing: the shared entries are everyone's.
            if let partition = partition(of: request) { store.removePartition(partition) }
            if !Self.isUnsafe(method) { return .proceed }
        }
        if Self.isUnsafe(method) {
            pending.set(Pending(key: Self.getKey(url), partition: partition(of: request), method: method, requestTime: now), for: context.requestID)
            return .proceed
        }
        guard method == "GET" || method == "HEAD", option != "no-store" else { return .proceed }
        // Every field at once: a loaded plugin's reads cross into the host one by one.
        let fields = request.headers
        let cacheControl = fields.values(named: "Cache-Control")
        let requestDirectives = CacheDirectives(cacheControl)
        var noCache = requestDirectives.has("no-cache")
        if cacheControl.isEmpty, fields.values(named: "Pragma").contains(where: { $0.lowercased().contains("no-cache") }) {
            noCache = true
        }
        // A request that asked for a validated or a fresher answer is not given a stale one for
        // an error, unless it says it takes staleness (RFC 9111 §4.2.4, RFC 5861 §4).
        let staleOnError =
            (!noCache && requestDirectives.value("max-age") == nil && requestDirectives.value("min-fresh") == nil)
            || requestDirectives.has("stale-if-error") || requestDirectives.has("max-stale")
        // A background revalidation (stale-while-revalidate) always asks the origin.
        if option == "revalidate" { noCache = true }
        let onlyIfCached = requestDirectives.has("only-if-cached") || option == "only-if-cached"
        let credentials = keptCredentials(of: fields)
        let key = sharedKey(url)
        let partition = partition(Self.withUserinfo(credentials, of: url))
        let noStore = requestDirectives.has("no-store")
        if noStore && !onlyIfCached { return .proceed }

        let found = lookup(key, partition: partition, fields)
        // The stored entry found but not served, for the response side (a `304` that revalidates
        // it, or `stale-if-error`).
        var unserved: CacheEntry?
        if method == "GET", option != "revalidate", let range = fields.value(named: "Range"), found == nil,
            let stored = lookup(key, partition: partition, suffix: Self.partialSuffix), case let age = stored.age(at: now),
            age < stored.freshnessLifetime, !stored.noCache,
            // immutable (RFC 8246), as for a complete entry: while fresh, a reload does not revalidate it.
            case let immutable = stored.directives.has("immutable"), !noCache || immutable,
            Self.freshEnough(age: age, lifetime: stored.freshnessLifetime, for: requestDirectives, immutable: immutable)
        {
            // The client's own condition first (RFC 9110 §13.2.2: If-None-Match before Range).
            if let notModified = Self.notModified(stored, fields, age: age) {
                markServed(context)
                return .respond(notModified)
            }
            if let partial = Self.partial(stored, range: range, ifRange: fields.value(named: "If-Range"), age: age),
                partial.statusCode == 206
            {
                // A Range request within the stored partial content of the same representation (§3.4).
                markServed(context)
                return .respond(partial)
            }
        }
        if let entry = found, matchesVary(entry, fields) {
            let age = entry.age(at: now)
            let responseDirectives = entry.directives
            let lifetime = entry.freshnessLifetime
            // A qualified no-cache="field" only keeps the field out of the cache (§5.2.2.4).
            let mustRevalidate = responseDirectives.has("must-revalidate") || entry.noCache
            // immutable (RFC 8246): while fresh, a reload's no-cache / max-age=0 does not revalidate it.
            // The target's `revalidate` option always asks the origin, immutable or not.
            let immutable = responseDirectives.has("immutable") && age < lifetime && option != "revalidate"
            var usable = (!noCache || immutable) && !entry.noCache
            if !Self.freshEnough(age: age, lifetime: lifetime, for: requestDirectives, immutable: immutable) { usable = false }
            if age >= lifetime {
                // Stale: usable only within the request's max-stale, and never past must-revalidate.
                // A bare max-stale takes any staleness; an argument that is no delta-seconds
                // (`max-stale=abc`) takes none, rather than any (§5.2.1.2, §1.2.2).
                let tolerated: Bool
                switch requestDirectives.value("max-stale") {
                case .none: tolerated = false
                case .some(.none): tolerated = true
                case .some(.some):
                    if case .valid(let limit) = requestDirectives.delta("max-stale") {
                        tolerated = age - lifetime <= limit
                    } else {
                        tolerated = false
                    }
                }
                if !tolerated || mustRevalidate { usable = false }
            }
            if usable, let notModified = Self.notModified(entry, fields, age: age) {
                // The client's own conditional request, answered from the fresh entry (§4.3.2).
                markServed(context)
                return .respond(notModified)
            }
            if usable, method == "GET", entry.status == 200, let range = fields.value(named: "Range"),
                let partial = Self.partial(entry, range: range, ifRange: fields.value(named: "If-Range"), age: age)
            {
                // A Range request answered from a stored complete response (§3.4; RFC 9110 §14.2).
                markServed(context)
                return .respond(partial)
            }
            if usable {
                markServed(context)
                return .respond(served(entry, cacheStatus: "hit", age: age, headOnly: method == "HEAD"))
            }
            // RFC 5861 §3: within stale-while-revalidate, serve the stale entry now and revalidate
            // it in a background exchange (the host runs it; its result is stored as usual).
            // only-if-cached asks the origin nothing (§5.2.1.7), in the background either: the
            // stale entry the window allows is served as it is.
            if option != "revalidate", !noCache, !mustRevalidate, age >= lifetime,
                let window = responseDirectives.seconds("stale-while-revalidate"), age - lifetime <= window,
                requestDirectives.value("max-age") == nil, requestDirectives.value("min-fresh") == nil,
                fields.value(named: "If-None-Match") == nil, fields.value(named: "If-Modified-Since") == nil, fields.value(named: "Range") == nil,
                onlyIfCached || revalidateInBackground(Self.revalidationKey(key, in: partition), request, now: now)
            {
                markServed(context)
                return .respond(served(entry, cacheStatus: "stale", age: age, headOnly: method == "HEAD"))
            }
            if onlyIfCached { return .respond(Self.gatewayTimeout) }
            unserved = entry
        } else if onlyIfCached {
            return .respond(Self.gatewayTimeout)
        }
        // What the response side needs is made only here, when the cache does not answer (a hit
        // allocated it, and counted a reference to each of its strings, for nothing).
        let state = Pending(key: key, partition: partition, method: method, requestTime: now)
        state.credentials = credentials
        // Kept for process only on a host whose responses do not tell their request: a list kept
        // here is one more reference to the host's, which an edit after this hook then copies.
        if !responsesCarryRequestHeaders { state.requestHeaders = fields }
        state.noStore = noStore
        state.staleOnError = staleOnError
        if case .some(.some) = requestDirectives.value("max-stale") {
            if case .valid(let limit) = requestDirectives.delta("max-stale") { state.staleLimit = limit } else { state.staleLimit = 0 }
        }
        // The background revalidation's option is "revalidate": the target's time to live is the
        // stored entry's (its `200` was stored by its headers again).
        state.ttl = option == "revalidate" ? unserved?.ttl : option.flatMap(Double.init).flatMap { $0 >= 0 ? $0 : nil }
        state.hasQuery = Self.hasQuery(url)
        if let entry = unserved {
            state.entry = entry
            if fields.value(named: "If-None-Match") == nil && fields.value(named: "If-Modified-Since") == nil {
                // Both validators the stored response has (§4.3.1: Last-Modified too beside an
                // entity tag, for an origin that compares dates only).
                if let etag = entry.header("ETag") {
                    try request.setHeader("If-None-Match", etag)
                    state.revalidating = true
                }
                if let modified = entry.header("Last-Modified") {
                    try request.setHeader("If-Modified-Since", modified)
                    state.revalidating = true
                }
            }
        }
        pending.set(state, for: context.requestID)
        return .proceed
    }

    /// Starts (or finds under way) the background revalidation under `key`; false when the
    /// host runs no background exchanges (ABI before 1.2), and the entry is then revalidated in
    /// the foreground as without stale-while-revalidate.
    func revalidateInBackground(_ key: String, _ request: InterceptorRequest, now: Double) -> Bool {
        guard revalidations.withLock({ Self.claim(key, in: &$0, now: now) }) else { return true }
        do {
            try request.scheduleBackgroundExchange(option: "revalidate")
            return true
        } catch {
            revalidations.withLock { $0.started[key] = nil }
            return false
        }
    }

    /// The background revalidations under way, by key, with when each began.
    struct Revalidations {
        var started: [String: Double] = [:]
        /// The count at which the timed-out marks are swept next: twice what the last sweep left
        /// (at least ``CachePlugin/revalidationSweep``), so sweeps cost a constant per mark.
        var sweepAt = CachePlugin.revalidationSweep
    }

    /// Marks `key` as being revalidated from `now` in `table`; false when a revalidation of it
    /// began less than ``revalidationTimeout`` ago. A revalidation that never reports back (its
    /// exchange never started, an outer plugin failed it, the cache answered it itself) is
    /// forgotten once timed out: the table is swept of those as it grows (they stayed for good,
    /// one per URL).
    static func claim(_ key: String, in table: inout Revalidations, now: Double) -> Bool {
        if let started = table.started[key], now - started < revalidationTimeout { return false }
        if table.started.count >= table.sweepAt {
            table.started = table.started.filter { now - $0.value < revalidationTimeout }
            table.sweepAt = max(revalidationSweep, 2 * table.started.count)
        }
        table.started[key] = now
        return true
    }

    /// How many revalidations may be marked before the timed-out ones are swept first.
    static let revalidationSweep = 64

    /// The key a background revalidation of the entry of `key` in `partition` runs under.
    static func revalidationKey(_ key: String, in partition: String?) -> String { Self.key(key, in: partition ?? "") }

    /// Called only on a host whose responses do not tell their request (before ABI 1.3): keeps
    /// the request as sent for `process` (whether it carries other credentials, and for `Vary`).
    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        guard let state = pending.get(context.requestID), state.method == "GET" || state.method == "HEAD" else { return }
        let headers = request.headers
        pending.update(context.requestID, initial: state) { $0.requestHeaders = headers }
    }

    // MARK: Response side

    /// Stores a storable response, serves the stored body on a `304` to its own revalidation
    /// (`revalidated`) or a stale entry on an error (`stale-if-error`), invalidates on unsafe
    /// methods, and marks the rest `miss`.
    public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        guard let state = pending.remove(context.requestID) else { return .proceed }
        // A background revalidation reporting back, whatever its outcome: the entry is free again
        // once this is done, after its answer is stored (a request in between still finds the
        // revalidation under way, not a stale entry to revalidate once more).
        let revalidating = context.target.pluginOptions["cache"]?.lowercased() == "revalidate"
        let revalidation = revalidating ? Self.revalidationKey(state.key, in: state.partition) : nil
        defer {
            if let revalidation { revalidations.withLock { _ = $0.started.removeValue(forKey: revalidation) } }
        }
        let now = context.services.now()
        if Self.isUnsafe(state.method) {
            // A non-error answer to an unsafe method invalidates the URL, and the Location and
            // Content-Location URLs of the same origin (§4.4).
            if let response = result.response, (200..<400).contains(response.statusCode) {
                var keys = [state.key]
                let target = String(state.key.dropFirst(4))
                for name in ["Location", "Content-Location"] {
                    if let value = response.header(name) { keys += Self.sameOrigin(value, as: target).map(Self.getKey) }
                }
                for key in keys {
                    removeAll(key)
                    if let partition = state.partition { removeAll(Self.key(key, in: partition)) }
                }
            }
            return .proceed
        }
        guard let response = result.response else {
            return staleReplacement(state, now: now) ?? .proceed
        }
        let status = response.statusCode
        // The errors stale-if-error covers (RFC 5861 §4): 500, 502, 503 and 504.
        if Self.staleIfErrorStatus.contains(status), let stale = staleReplacement(state, now: now) { return stale }
        if status == 304, state.revalidating, !response.isRedirected, let original = state.entry, Self.contradicts(response.headers, original) {
            // A `304` whose validator is not the stored response's selects nothing to update
            // (§4.3.4: the stored body would go on under another tag). The client asked for no
            // condition: the entry goes, and the request is asked again, without one.
            removeAll(original.key)
            return .retry()
        }
        if status == 304, state.revalidating, !response.isRedirected, let original = state.entry {
            var entry = original
            let fields = response.headers
            entry.update(from: Self.storedFields(fields, responseDirectives(fields)), receivedAt: now)
            entry.requestTime = state.requestTime
            entry.responseTime = now
            if state.ttl != nil { entry.ttl = state.ttl }
            putUpdated(entry, validated: original, state: state, sent: { response.requestHeaders ?? state.requestHeaders })
            // The client gets the fields a qualified no-cache="…" or private="…" names, which are
            // not stored: they must not be reused without a validation (§5.2.2.4, §5.2.2.7), and
            // this answer is one (a rotated `Set-Cookie` was lost).
            var answer = entry
            answer.update(from: Self.storedFields(fields, CacheDirectives([])), receivedAt: now)
            return .replace(served(answer, cacheStatus: "revalidated", age: entry.age(at: now), headOnly: state.method == "HEAD"))
        }
        if status == 304, state.revalidating, response.isRedirected {
            // The cache's condition followed a redirect, and the place it led to answered it: the
            // client asked for no condition, and the stored response is another URL's. The stale
            // entry goes (the URL redirects now), and the request is asked again, without it,
            // so without a condition (§4.3.3, RFC 9110 §15.4.5).
            if let entry = state.entry { removeAll(entry.key) }
            removeAll(state.key)
            return .retry()
        }
        if status == 304, !state.revalidating, !response.isRedirected, let original = state.entry {
            // The client's own conditional request (the entry was stale): the `304` goes to the
            // client as it asked, and freshens the stored response it validates (§4.3.4).
            let fields = response.headers
            if Self.validates(fields, original) {
                var entry = original
                entry.update(from: Self.storedFields(fields, responseDirectives(fields)), receivedAt: now)
                entry.requestTime = state.requestTime
                entry.responseTime = now
                if state.ttl != nil { entry.ttl = state.ttl }
                putUpdated(entry, validated: original, state: state, sent: { response.requestHeaders ?? state.requestHeaders })
            }
        }
        if state.method == "HEAD", !response.isRedirected { freshen(fromHead: response, state: state, now: now) }
        // Every field in one read: a loaded plugin's reads cross into the host one by one.
        let fields = response.headers
        if state.method == "GET" {
            // The request as sent: the response tells it (ABI 1.3, in process); else what
            // willSend kept. Read only when something would be stored.
            let sent = { response.requestHeaders ?? state.requestHeaders }
            if response.statusCode == 206 {
                storePartial(response, fields, state: state, now: now, sent: sent)
            } else if let entry = storable(response, fields, state: state, now: now, sent: sent) {
                put(entry, base: entry.key)
                // Stored shared (`public`): the requester's own older entry, which a lookup
                // finds first, is no longer the most recent response (§4).
                if let partition = state.partition, entry.key == state.key { removeAll(partitionedKey(state.key, in: partition)) }
            } else if let stale = state.entry, status != 304, status < 500, !response.isRedirected,
                Self.credentials(of: sent()) == state.credentials,
                !(state.partition != nil && Self.isEntry(stale.key, of: state.key)
                    && !responseDirectives(fields).shareable)
            {
                // A full response to a request the stored one could not answer (stale, or
                // `no-cache`) says it is no longer suitable (§4.3.3); not stored itself (`no-store`,
                // `Vary: *`), it left the stored one to be served as a hit, or by `max-stale` or
                // stale-if-error, after the origin sent another. (A `5xx` says nothing of it:
                // stale-if-error may still need it. Nor does an answer to other credentials than
                // the entry's, or a requester's own answer not stored for being its own, beside
                // the shared entry others use.)
                removeIfUnchanged(stale)
            }
        }
        // Age on what the cache hands on too (§4.2.3): an origin whose Date lags behind, or an
        // upstream cache's Age, make a fresh-from-the-network response already old.
        let date = fields.value(named: "Date").flatMap { HTTPDate.parse($0) } ?? now
        let current = max(max(0, now - date), (DeltaSeconds.age(fields.values(named: "Age")) ?? 0) + max(0, now - state.requestTime))
        if current >= 1 { try response.setHeader("Age", String(Int(current))) }
        try response.setHeader("X-Cache", "miss")
        return .proceed
    }

    // MARK: Rules

    /// Whether a `304` to the cache's own condition names another response than `entry`: an
    /// entity tag not the stored one, or (without a tag) another `Last-Modified`. A `304` with no
    /// validator is taken as the answer to the condition sent (servers leave them out, httpbin
    /// among them, though RFC 9110 §15.4.5 asks for them), as other caches take it.
    static func contradicts(_ fields: [HTTPHeader], _ entry: CacheEntry) -> Bool {
        if let tag = fields.value(named: "ETag") { return entry.header("ETag") != tag }
        if let modified = fields.value(named: "Last-Modified"), let stored = entry.header("Last-Modified") { return stored != modified }
        return false
    }

    /// Whether a `304` with `fields` validates `entry` (§4.3.4): the same entity tag, strong, or
    /// weak on both sides (`W/"1"` is not `"1"`); else, without one, the same `Last-Modified`;
    /// else, with neither on either side, the entry.
    static func validates(_ fields: [HTTPHeader], _ entry: CacheEntry) -> Bool {
        if let tag = fields.value(named: "ETag") { return entry.header("ETag") == tag }
        if let modified = fields.value(named: "Last-Modified") { return entry.header("Last-Modified") == modified }
        return entry.header("ETag") == nil && entry.header("Last-Modified") == nil
    }

    static let gatewayTimeout = SyntheticResponse(
        statusCode: 504, headers: [HTTPHeader(name: "X-Cache", value: "miss"), HTTPHeader(name: "Content-Length", value: "0")])

    /// `value` resolved against `target`, when it has the same scheme, host and port (a default
    /// port written out or not; a host in any case, or written percent-encoded or past ASCII: it
    /// is one host in IDNA's form), spelled without a default port: as written, and with its host
    /// as requests' URLs hold it (lower case, IDNA's form), when that differs. Empty for another
    /// origin.
    static func sameOrigin(_ value: String, as target: String) -> [String] {
        // A scheme's default port written out is the same origin (`https://h:443` is `https://h`).
        func defaultPort(_ url: URL) -> Int { URLParts.defaultPort(forScheme: url.scheme) }
        func port(_ url: URL) -> Int { url.port ?? defaultPort(url) }
        guard let base = URL(string: target), let url = URL(string: value, relativeTo: base)?.absoluteURL,
            url.scheme?.lowercased() == base.scheme?.lowercased(), let host = url.host,
            URLParts.lookupHost(host) == base.host.map(URLParts.lookupHost), port(url) == port(base)
        else { return [] }
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return [url.absoluteString] }
        // A fragment is no part of what is requested (`/items/5#top` is `/items/5`'s entry).
        parts.fragment = nil
        // The key is the URL as requests spell it: without a default port written out (any
        // other port stays).
        if url.port != nil, url.port == defaultPort(url) { parts.port = nil }
        guard let written = parts.url?.absoluteString else { return [url.absoluteString] }
        guard let name = URLParts.hostName(host), parts.encodedHost != name else { return [written] }
        parts.encodedHost = name
        return [written] + (parts.url.map { [$0.absoluteString] } ?? [])
    }

    /// Whether an entry of `age` and freshness `lifetime` is within what the request's
    /// `max-age` and `min-fresh` ask (§5.2.1.1, §5.2.1.3); an `immutable` one (RFC 8246, fresh)
    /// is not held to `max-age`, which a reload sends.
    static func freshEnough(age: Double, lifetime: Double, for request: CacheDirectives, immutable: Bool = false) -> Bool {
        if let maxAge = request.seconds("max-age"), age > maxAge, !immutable { return false }
        if let minFresh = request.seconds("min-fresh"), lifetime - age < minFresh { return false }
        return true
    }

    /// A `304` for a request whose own `If-None-Match` or `If-Modified-Since` the stored
    /// response satisfies (§4.3.2; RFC 9110 §13.1.2 and §13.1.3, If-None-Match first, weak
    /// comparison); nil when the request has no condition, the condition does not hold, or the
    /// stored response is no 2xx.
    static func notModified(_ entry: CacheEntry, _ fields: [HTTPHeader], age: Double) -> SyntheticResponse? {
        // Preconditions hold only where the response without them would be a 2xx (RFC 9110
        // §13.2.1): a stored 404 answers as a 404, whatever its validators.
        guard (200..<300).contains(entry.status) else { return nil }
        let noneMatch = fields.values(named: "If-None-Match")
        let modifiedSince = fields.value(named: "If-Modified-Since")
        guard !noneMatch.isEmpty || modifiedSince != nil else { return nil }
        if !noneMatch.isEmpty {
            // A list of tags, a comma inside one (`"a,b"`) not separating; `*` holds for any
            // stored response, one without a tag too (RFC 9110 §13.1.2).
            var tags: [String] = []
            for var value in noneMatch {
                value.withUTF8 { bytes in
                    CacheDirectives.forEachListItem(bytes[...]) { item in
                        tags.append(String(decoding: CacheDirectives.trimmed(item, also: nil), as: UTF8.self))
                    }
                }
            }
            func weak(_ tag: String) -> String { tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag }
            let etag = entry.header("ETag")
            guard tags.contains(where: { $0 == "*" || etag.map(weak) == weak($0) }) else { return nil }
        } else if let modifiedSince {
            // Against Last-Modified, else the response's Date, else when it was received (RFC
            // 9111 §4.3.2).
            let modified = entry.header("Last-Modified").flatMap { HTTPDate.parse($0) } ?? entry.facts.date ?? entry.responseTime
            guard let since = HTTPDate.parse(modifiedSince), modified <= since else { return nil }
        }
        // The fields a 304 carries (RFC 9110 §15.4.5).
        let kept: Set<String> = ["cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified"]
        var headers = entry.headers.filter { kept.contains($0.name.lowercased()) }
        headers.append(HTTPHeader(name: "Age", value: String(Int(max(0, age)))))
        headers.append(HTTPHeader(name: "X-Cache", value: "hit"))
        return SyntheticResponse(statusCode: 304, headers: headers, body: [])
    }

    func matchesVary(_ entry: CacheEntry, _ fields: [HTTPHeader]) -> Bool {
        for (name, value) in entry.vary where varyValue(name, fields.values(named: name)) != value {
            return false
        }
        return true
    }

    /// What ``varyValue(_:_:)`` gives for a header the request lacks: a NUL, which no header value holds.
    static let absentValue = "\u{0}"

    /// Headers whose members are compared without regard to case and order (§4.1 allows
    /// normalising what the field's semantics say is equivalent).
    static let unorderedFields: Set<String> = ["accept", "accept-charset", "accept-encoding", "accept-language"]

    /// What an entry keeps of a request header it varies on, normalised (§4.1): list members
    /// trimmed with inner whitespace collapsed, and for the `Accept*` fields lower-cased and
    /// sorted; for a credential header a keyed hash (credentials are never stored). A header the
    /// request lacks is ``absentValue``, which no header's value is: absent matches only absent
    /// (§4.1; `Accept-Encoding` empty asks for no coding, absent for any).
    func varyValue(_ name: String, _ values: [String]) -> String {
        guard !values.isEmpty else { return Self.absentValue }
        let lowered = name.lowercased()
        guard !Self.credentialHeaders.contains(lowered) else {
            let joined = values.joined(separator: ", ")
            return "hmac:" + SHA256.hex(HMACSHA256.authenticate(Array(joined.utf8), key: partitionKey))
        }
        var members = values.flatMap { $0.split(separator: ",") }.map { member in
            member.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
        }.filter { !$0.isEmpty }
        if Self.unorderedFields.contains(lowered) { members = members.map { $0.lowercased() }.sorted() }
        return members.joined(separator: ",")
    }

    /// A `HEAD` response from the origin (§4.3.5): a `410`, or validators or a `Content-Length`
    /// other than the stored `GET`'s, invalidate it; a response whose validators (and length)
    /// all match the stored one's freshens it (headers and times).
    func freshen(fromHead response: InterceptorResponse, state: Pending, now: Double) {
        let key = state.entry?.key ?? (state.partition.map { Self.key(state.key, in: $0) } ?? state.key)
        if response.statusCode == 410 {
            removeAll(key)
            if key != state.key { removeAll(state.key) }
            return
        }
        // A URL's variant list is no stored response: a `HEAD` that selected no variant
        // touches none of them (only the response it would have selected, §4.3.5).
        // Only a 200 tells of the representation (another 2xx, a 203 or 204, does not).
        guard response.statusCode == 200, var entry = state.entry ?? store.get(key).flatMap({ Self.isVariantIndex($0) ? nil : $0 })
        else { return }
        let etag = response.header("ETag")
        let modified = response.header("Last-Modified")
        // Every validator received matches the stored response's, and so does a `Content-Length`
        // (§4.3.5): an entity tag alone matching let another length or date freshen the body.
        let length = response.header("Content-Length")
        let matches =
            (etag != nil || modified != nil) && (etag == nil || etag == entry.header("ETag"))
            && (modified == nil || modified == entry.header("Last-Modified"))
            && (length == nil || length == (entry.header("Content-Length") ?? String(entry.body.count)))
        guard matches else {
            // Another representation: the stored one is out of date (§4.3.5).
            if etag != nil || modified != nil || length != nil { removeAll(key) }
            return
        }
        let original = entry
        let fields = response.headers
        entry.update(from: Self.storedFields(fields, responseDirectives(fields)), receivedAt: now)
        entry.requestTime = state.requestTime
        entry.responseTime = now
        putUpdated(entry, validated: original, state: state, sent: { response.requestHeaders ?? state.requestHeaders })
    }

    /// The status codes a stale entry may answer for (RFC 5861 §4), besides a transport failure.
    static let staleIfErrorStatus: Set<Int> = [500, 502, 503, 504]

    /// Status codes whose caching rules this cache implements, for `must-understand` (§5.2.2.3).
    static let understoodStatus: Set<Int> = [200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501]

    /// The entry to store for `response` (whose fields are `fields`), or nil when it must not be
    /// stored; `sent` gives the request's fields as sent, read only when needed: a request sent
    /// with other credentials than the cache's lookup saw (added inside the cache) stores nothing.
    func storable(
        _ response: InterceptorResponse, _ fields: [HTTPHeader], state: Pending, now: Double, partial: Bool = false, sent: () -> [HTTPHeader]
    ) -> CacheEntry? {
        // A response the transport reached by a redirect answers another URL (§2): it is not
        // the response to this request's, and is not stored under it.
        guard !state.noStore, !response.isRedirected else { return nil }
        let directives = responseDirectives(fields)
        // must-understand: stored only for a status code this cache understands, and then in
        // spite of no-store, which a sender adds for caches that do not understand it (§5.2.2.3).
        if directives.has("must-understand") {
            guard Self.understoodStatus.contains(response.statusCode) else { return nil }
        } else if directives.has("no-store") {
            return nil
        }
        let varyNames = fields.values(named: "Vary").flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        if varyNames.contains("*") { return nil }
        // Where it goes: shared without credentials or when public; else the partition, or nowhere.
        var key = state.key
        if let partition = state.partition, !directives.shareable {
            guard authorized == .partition else { return nil }
            key = Self.key(state.key, in: partition)
        }
        let status = response.statusCode
        let explicit = directives.has("max-age") || fields.value(named: "Expires") != nil || directives.has("public") || directives.has("private")
        guard state.ttl != nil ? (200..<300).contains(status) : (explicit || CacheEntry.heuristicallyCacheable.contains(status)),
            status != 206 || partial, status != 304
        else { return nil }
        let requestHeaders = sent()
        guard Self.credentials(of: requestHeaders) == state.credentials else { return nil }
        var vary: [String: String] = [:]
        for name in varyNames where !name.isEmpty {
            vary[name] = varyValue(name, requestHeaders.values(named: name))
        }
        var headers = Self.storedFields(fields, directives)
        // A response without a Date is stored with one, the time it came (RFC 9110 §6.6.1: a
        // recipient with a clock that caches it MUST add one); its age counts from then anyway.
        if !headers.contains(where: { HTTPHeader.namesEqual($0.name, "Date") }) {
            headers.append(HTTPHeader(name: "Date", value: HTTPDate.format(now)))
        }
        return CacheEntry(
            key: key, status: status, headerNames: headers.map(\.name), headerValues: headers.map(\.value),
            body: response.body, requestTime: state.requestTime, responseTime: now, vary: vary, ttl: state.ttl,
            hasQuery: state.hasQuery)
    }

    /// The fields of a response that may be stored, or update a stored one (§3.1, §3.2): not
    /// the hop-by-hop fields, those the Connection field lists, a proxy's authentication fields,
    /// nor those a qualified no-cache="…" or private="…" names (§5.2.2.4, §5.2.2.7).
    static func storedFields(_ fields: [HTTPHeader], _ directives: CacheDirectives) -> [HTTPHeader] {
        // A proxy's authentication fields are the proxy's, never stored (§3.1: this cache's key
        // holds no proxy).
        var omitted: Set<String> = [
            "x-cache", "connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "proxy-authenticate",
            "proxy-authentication-info",
        ]
        for value in fields.values(named: "Connection") {
            for name in value.split(separator: ",") { omitted.insert(name.trimmingCharacters(in: .whitespaces).lowercased()) }
        }
        omitted.formUnion(directives.listedFields("no-cache"))
        omitted.formUnion(directives.listedFields("private"))
        return fields.filter { !omitted.contains($0.name.lowercased()) }
    }

    /// Stores `entry`, updated from a `304` or a `HEAD`, unless the update says `no-store`
    /// (then the entry goes: the origin no longer lets it be kept), or another response was
    /// stored under its key meanwhile, with other validators (§4.3.4: a `304` updates only the
    /// stored response its validator selects; an older one must not come back over it), or the
    /// entry went meanwhile (an unsafe method invalidated it, §4.4: it must not come back).
    ///
    /// A shared entry (others' requests get it) is updated by the answer to a request of
    /// `state`, `sent` as its fields, only when that request carried the credentials its lookup
    /// saw (none added on the way: the answer may be a user's) and, when it carried any, the
    /// updated response is still `public` (§3.5, §5.2.2.7: a `private` answer to a user, with
    /// its `Set-Cookie`, went to every other requester).
    func putUpdated(_ entry: CacheEntry, validated original: CacheEntry, state: Pending, sent: () -> [HTTPHeader]) {
        let directives = entry.directives
        // no-store, unless must-understand for a status this cache understands, which stored
        // the response in spite of it (§5.2.2.3); whoever's answer says so: the entry goes.
        if directives.has("no-store") && !(directives.has("must-understand") && Self.understoodStatus.contains(entry.status)) {
            changes.lock()
            defer { changes.unlock() }
            removeAll(entry.key)
            return
        }
        // The request's fields as sent are read only for a shared entry, outside the lock (a
        // loaded plugin's read crosses into the host).
        if Self.isEntry(entry.key, of: state.key) {
            guard state.partition == nil || directives.shareable, Self.credentials(of: sent()) == state.credentials else { return }
        }
        changes.lock()
        defer { changes.unlock() }
        // A variant index has no validators either: one stored under the key meanwhile (a response
        // that varies) is no stored response a `304` selects (§4.3.4); written over, its variants
        // were left without an index, and the plain entry served whatever the request's values.
        guard let current = store.get(entry.key), !Self.isVariantIndex(current),
            current.header("ETag") == original.header("ETag") && current.header("Last-Modified") == original.header("Last-Modified")
        else { return }
        // Stored fields the update's own directives name (a `304` that adds no-cache="X-A") go
        // too: they must not be sent again without a validation (§5.2.2.4).
        let kept = Self.storedFields(entry.headers, directives)
        guard kept.count != entry.headerNames.count else { return store.put(entry) }
        var trimmed = entry
        trimmed.headerNames = kept.map(\.name)
        trimmed.headerValues = kept.map(\.value)
        store.put(trimmed)
    }

    /// A stale entry to serve after an error, when allowed.
    func staleReplacement(_ state: Pending, now: Double) -> ProcessAction? {
        guard state.method == "GET", state.staleOnError, let entry = state.entry ?? lookup(state.key, partition: state.partition) else {
            return nil
        }
        let directives = entry.directives
        let allowance = max(staleIfError, directives.seconds("stale-if-error") ?? 0)
        let staleness = entry.age(at: now) - entry.freshnessLifetime
        // Never past must-revalidate or an unqualified no-cache: both forbid a stale answer (§4.2.4);
        // nor past the staleness the request accepts (its `max-stale=5` was given one 300 s stale).
        guard allowance > 0, !directives.has("must-revalidate"), !entry.noCache, staleness <= min(allowance, state.staleLimit) else {
            return nil
        }
        var response = served(entry, cacheStatus: "stale", age: entry.age(at: now), headOnly: false)
        response.headers.append(HTTPHeader(name: "Warning", value: "110 - \"Response is Stale\""))
        return .replace(response)
    }

    /// A `206` (or `416`) for a single-range `Range: bytes=…` request from a stored `200`; nil
    /// for anything else (several ranges, another unit, an `If-Range` that does not match the
    /// stored validator), which is then answered with the whole response, as RFC 9110 allows.
    static func partial(_ entry: CacheEntry, range: String, ifRange: String?, age: Double) -> SyntheticResponse? {
        let span = ContentRange(entry.header("Content-Range"))
        return partial(entry, offset: span?.first ?? 0, size: span?.complete ?? entry.body.count, range: range, ifRange: ifRange, age: age)
    }

    /// The same from stored bytes starting at `offset` of a representation of `size` bytes
    /// (partial content, §3.4); nil too when the range asked for is not all stored.
    static func partial(
        _ entry: CacheEntry, offset: Int, size: Int, range: String, ifRange: String?, age: Double
    ) -> SyntheticResponse? {
        if let ifRange {
            // A strong entity tag, or the Last-Modified date when it is strong: the same, and one
            // second or more before the stored response's Date (RFC 9110 §13.1.5, §8.8.2.2: within
            // the second it was made, the representation may have changed again, and a resumed
            // download would mix two of them).
            let tag = ifRange == entry.header("ETag") && !ifRange.hasPrefix("W/")
            let date =
                ifRange == entry.header("Last-Modified")
                && HTTPDate.parse(ifRange).map { modified in
                    entry.header("Date").flatMap { HTTPDate.parse($0) }.map { $0 - modified >= 1 } ?? false
                } ?? false
            guard tag || date else { return nil }
        }
        let spec = range.trimmingCharacters(in: .whitespaces)
        guard spec.lowercased().hasPrefix("bytes="), !spec.contains(",") else { return nil }
        let bounds = spec.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard bounds.count == 2 else { return nil }
        let first: Int
        let last: Int
        if bounds[0].isEmpty {
            // bytes=-N: the last N bytes.
            guard let suffix = Int(bounds[1]), suffix > 0 else { return nil }
            first = max(0, size - suffix)
            last = size - 1
        } else {
            guard let start = Int(bounds[0]), start >= 0 else { return nil }
            let end = bounds[1].isEmpty ? size - 1 : Int(bounds[1]) ?? -1
            guard end >= start || bounds[1].isEmpty else { return nil }
            first = start
            last = min(end, size - 1)
        }
        var headers = entry.headers.filter {
            let name = $0.name.lowercased()
            return name != "age" && name != "x-cache" && name != "content-length" && name != "content-range"
        }
        headers.append(HTTPHeader(name: "Age", value: String(Int(max(0, age)))))
        headers.append(HTTPHeader(name: "X-Cache", value: "hit"))
        guard first < size, first <= last else {
            headers.append(HTTPHeader(name: "Content-Range", value: "bytes */\(size)"))
            return SyntheticResponse(statusCode: 416, headers: headers, body: [])
        }
        guard first >= offset, last < offset + entry.body.count else { return nil }
        headers.append(HTTPHeader(name: "Content-Range", value: "bytes \(first)-\(last)/\(size)"))
        return SyntheticResponse(statusCode: 206, headers: headers, body: Array(entry.body[(first - offset)...(last - offset)]))
    }

    func served(_ entry: CacheEntry, cacheStatus: String, age: Double, headOnly: Bool) -> SyntheticResponse {
        // One array of the right size, filled in one pass over the stored fields.
        var headers: [HTTPHeader] = []
        headers.reserveCapacity(entry.headerNames.count + 2)
        for (name, value) in zip(entry.headerNames, entry.headerValues)
        where !HTTPHeader.namesEqual(name, "Age") && !HTTPHeader.namesEqual(name, "X-Cache")
            && !(headOnly && HTTPHeader.namesEqual(name, "Content-Length"))
        {
            headers.append(HTTPHeader(name: name, value: value))
        }
        headers.append(HTTPHeader(name: "Age", value: String(Int(max(0, age)))))
        headers.append(HTTPHeader(name: "X-Cache", value: cacheStatus))
        return SyntheticResponse(statusCode: entry.status, headers: headers, body: headOnly ? [] : entry.body)
    }
}
