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
/// `max-stale`, `min-fresh`, `only-if-cached` (a `504` when nothing usable is stored); `Vary` (one
/// variant per URL; `Vary: *` is never stored). `POST`, `PUT`, `PATCH` and `DELETE` invalidate
/// the entry of their URL. Per target, `pluginOptions["cache"]` is a TTL in seconds, `no-store`,
/// or `only-if-cached`. A response to a request with `Authorization` is stored only when it is
/// `public` (or `must-revalidate`), or when `storeAuthorized` is true.
public struct CachePlugin: ExportablePlugin {
    public static var pluginName: String { "cache" }
    public static var pluginVersion: String { "1.0.0" }
    public static var pluginSummary: String { "Private HTTP cache (RFC 9111), memory LRU plus disk" }
    public static var implementedHooks: Set<InterceptorHook> { [.prepare, .willSend, .process] }

    let store: CacheStore
    let staleIfError: Double
    let storeAuthorized: Bool
    private let pending = PerRequestState<Pending>()

    struct Pending {
        var key: String
        var method: String
        var entry: CacheEntry?
        var revalidating = false
        var served = false
        var noStore = false
        var ttl: Double?
        var requestTime: Double
        var authorized = false
        var requestHeaders: [HTTPHeader] = []
        var hasQuery = false
    }

    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["directory", "maxMemoryEntries", "maxMemoryBytes", "maxDiskBytes", "staleIfError", "storeAuthorized"])
        let directory = try configuration.string("directory")
        if let directory, !directory.hasPrefix("/") { throw configuration.error("directory must be an absolute path") }
        do {
            store = try CacheStore(
                maxMemoryEntries: try configuration.integer("maxMemoryEntries", default: 256, in: 1...1_000_000),
                maxMemoryBytes: try configuration.integer("maxMemoryBytes", default: 16 << 20, in: 1...(1 << 40)),
                directory: directory,
                maxDiskBytes: try configuration.integer("maxDiskBytes", default: 64 << 20, in: 1...(1 << 50)))
        } catch let error as PluginConfigurationError {
            throw error
        } catch let error as CacheStore.DirectoryError {
            throw configuration.error("directory \(directory ?? "") is refused: \(error.description)")
        } catch {
            throw configuration.error("directory \(directory ?? "") cannot be created: \(error.localizedDescription)")
        }
        staleIfError = try configuration.number("staleIfError", default: 0, in: 0...(365 * 86_400))
        storeAuthorized = try configuration.bool("storeAuthorized", default: false)
    }

    static let unsafeMethods: Set<String> = ["POST", "PUT", "PATCH", "DELETE"]

    // MARK: Request side

    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        let method = request.method.uppercased()
        let option = context.target.pluginOptions["cache"]?.lowercased()
        let now = context.services.now()
        if Self.unsafeMethods.contains(method) {
            pending.set(Pending(key: "GET " + request.url, method: method, requestTime: now), for: context.requestID)
            return .proceed
        }
        guard method == "GET" || method == "HEAD", option != "no-store" else { return .proceed }
        let requestDirectives = CacheDirectives(request.headerValues("Cache-Control"))
        var noCache = requestDirectives.has("no-cache")
        if request.headerValues("Cache-Control").isEmpty, request.headerValues("Pragma").contains(where: { $0.lowercased().contains("no-cache") }) {
            noCache = true
        }
        let onlyIfCached = requestDirectives.has("only-if-cached") || option == "only-if-cached"
        var state = Pending(key: "GET " + request.url, method: method, requestTime: now)
        state.noStore = requestDirectives.has("no-store")
        state.ttl = option.flatMap(Double.init).flatMap { $0 >= 0 ? $0 : nil }
        state.hasQuery = request.url.contains("?")
        if state.noStore && !onlyIfCached { return .proceed }

        if let entry = store.get(state.key), matchesVary(entry, request) {
            let age = entry.age(at: now)
            let lifetime = entry.freshnessLifetime
            let responseDirectives = entry.directives
            let mustRevalidate = responseDirectives.has("must-revalidate") || responseDirectives.has("no-cache")
            var usable = !noCache && !responseDirectives.has("no-cache")
            if let maxAge = requestDirectives.seconds("max-age"), age > maxAge { usable = false }
            if let minFresh = requestDirectives.seconds("min-fresh"), lifetime - age < minFresh { usable = false }
            if age >= lifetime {
                // Stale: usable only within the request's max-stale, and never past must-revalidate.
                if let entryValue = requestDirectives.values["max-stale"], !mustRevalidate {
                    if let limit = entryValue.flatMap(Double.init), age - lifetime > limit { usable = false }
                } else {
                    usable = false
                }
            }
            if usable {
                pending.set(
                    {
                        var s = state
                        s.served = true
                        return s
                    }(), for: context.requestID)
                return .respond(served(entry, cacheStatus: "hit", age: age, headOnly: method == "HEAD"))
            }
            if onlyIfCached { return .respond(Self.gatewayTimeout) }
            state.entry = entry
            if request.header("If-None-Match") == nil && request.header("If-Modified-Since") == nil {
                if let etag = entry.header("ETag") {
                    try request.setHeader("If-None-Match", etag)
                    state.revalidating = true
                } else if let modified = entry.header("Last-Modified") {
                    try request.setHeader("If-Modified-Since", modified)
                    state.revalidating = true
                }
            }
        } else if onlyIfCached {
            return .respond(Self.gatewayTimeout)
        }
        pending.set(state, for: context.requestID)
        return .proceed
    }

    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        guard let state = pending.get(context.requestID), state.method == "GET" || state.method == "HEAD" else { return }
        // The request as sent: whether it carries credentials, and its headers (for Vary).
        let headers = request.headers
        let authorized = headers.contains { HTTPHeader.namesEqual($0.name, "Authorization") }
        pending.update(context.requestID, initial: state) {
            $0.authorized = authorized
            $0.requestHeaders = headers
        }
    }

    // MARK: Response side

    public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        guard let state = pending.remove(context.requestID), !state.served else { return .proceed }
        let now = context.services.now()
        if Self.unsafeMethods.contains(state.method) {
            if let status = result.response?.statusCode, status < 400 { store.remove(state.key) }
            return .proceed
        }
        guard let response = result.response else {
            return staleReplacement(state, now: now) ?? .proceed
        }
        let status = response.statusCode
        if status >= 500, let stale = staleReplacement(state, now: now) { return stale }
        if status == 304, state.revalidating, var entry = state.entry {
            entry.update(from: response.headers)
            entry.requestTime = state.requestTime
            entry.responseTime = now
            if state.ttl != nil { entry.ttl = state.ttl }
            store.put(entry)
            return .replace(served(entry, cacheStatus: "revalidated", age: entry.age(at: now), headOnly: state.method == "HEAD"))
        }
        if state.method == "GET", let entry = storable(response, state: state, now: now) {
            store.put(entry)
        }
        try response.setHeader("X-Cache", "miss")
        return .proceed
    }

    // MARK: Rules

    static let gatewayTimeout = SyntheticResponse(
        statusCode: 504, headers: [HTTPHeader(name: "X-Cache", value: "miss"), HTTPHeader(name: "Content-Length", value: "0")])

    func matchesVary(_ entry: CacheEntry, _ request: InterceptorRequest) -> Bool {
        for (name, value) in entry.vary where (request.headerValues(name).joined(separator: ", ")) != value {
            return false
        }
        return true
    }

    /// The entry to store for `response`, or nil when it must not be stored.
    func storable(_ response: InterceptorResponse, state: Pending, now: Double) -> CacheEntry? {
        guard !state.noStore else { return nil }
        let directives = CacheDirectives(response.headerValues("Cache-Control"))
        if directives.has("no-store") { return nil }
        let varyNames = response.headerValues("Vary").flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        if varyNames.contains("*") { return nil }
        if state.authorized && !storeAuthorized && !directives.has("public") && !directives.has("must-revalidate") && !directives.has("s-maxage") {
            return nil
        }
        let status = response.statusCode
        let explicit = directives.has("max-age") || response.header("Expires") != nil || directives.has("public") || directives.has("private")
        guard state.ttl != nil ? (200..<300).contains(status) : (explicit || CacheEntry.heuristicallyCacheable.contains(status)),
            status != 206, status != 304
        else { return nil }
        var vary: [String: String] = [:]
        for name in varyNames where !name.isEmpty {
            vary[name] = state.requestHeaders.filter { HTTPHeader.namesEqual($0.name, name) }.map(\.value).joined(separator: ", ")
        }
        let headers = response.headers.filter { !HTTPHeader.namesEqual($0.name, "X-Cache") }
        return CacheEntry(
            key: state.key, status: status, headerNames: headers.map(\.name), headerValues: headers.map(\.value),
            body: response.body, requestTime: state.requestTime, responseTime: now, vary: vary, ttl: state.ttl,
            hasQuery: state.hasQuery)
    }

    /// A stale entry to serve after an error, when allowed.
    func staleReplacement(_ state: Pending, now: Double) -> ProcessAction? {
        guard state.method == "GET", let entry = state.entry ?? store.get(state.key) else { return nil }
        let directives = entry.directives
        let allowance = max(staleIfError, directives.seconds("stale-if-error") ?? 0)
        let staleness = entry.age(at: now) - entry.freshnessLifetime
        guard allowance > 0, !directives.has("must-revalidate"), staleness <= allowance else { return nil }
        var response = served(entry, cacheStatus: "stale", age: entry.age(at: now), headOnly: false)
        response.headers.append(HTTPHeader(name: "Warning", value: "110 - \"Response is Stale\""))
        return .replace(response)
    }

    func served(_ entry: CacheEntry, cacheStatus: String, age: Double, headOnly: Bool) -> SyntheticResponse {
        var headers = entry.headers.filter {
            let name = $0.name.lowercased()
            return name != "age" && name != "x-cache" && !(headOnly && name == "content-length")
        }
        headers.append(HTTPHeader(name: "Age", value: String(Int(max(0, age)))))
        headers.append(HTTPHeader(name: "X-Cache", value: cacheStatus))
        return SyntheticResponse(statusCode: entry.status, headers: headers, body: headOnly ? [] : entry.body)
    }
}
