import Foundation
import PluginSDK

/// Adds `Authorization: <Scheme> <token>` to requests and refreshes the token on a `401`.
///
/// Per target, `pluginOptions["auth"]` picks the scheme: `bearer` (the default), `basic`,
/// `custom:<Scheme>`, or `none`. The header replaces any earlier `Authorization` value. The token
/// comes from the host store (key `key`, default `access_token`), else the environment variable
/// `env`, else the file `file`. Without a token the request goes unauthenticated, unless
/// `required` is true: then it fails with a clear error.
///
/// The token goes to https origins and to loopback hosts, or, when `origins` lists some, to those
/// only; a request with a token over plain http to another host fails before it is sent.
///
/// On a `401` to a request that carried a token, the request is retried once: at once when the
/// store already holds a newer token (another request refreshed it), otherwise after the host
/// refreshes the token with the refresher the app registered (`provider.services
/// .registerRefresher(forKey: "access_token")`). Concurrent `401`s share one refresh. More than
/// `maxRefreshes` refreshes within `refreshWindow` seconds fail the request as excessive.
public struct AccessTokenPlugin: ExportablePlugin {
    /// The name manifests and bundles know this plugin by.
    public static var pluginName: String { "access-token" }
    /// This plugin's version.
    public static var pluginVersion: String { "1.1.0" }
    /// One line saying what this plugin does (`plugin.json`'s `summary`, `pluginhost list --json`).
    public static var pluginSummary: String { "Adds Authorization from the host store and refreshes it on 401" }
    /// The hooks this plugin implements (the others are not exported).
    public static var implementedHooks: Set<InterceptorHook> { [.prepare, .process] }

    let key: String
    let environmentVariable: String?
    let file: String?
    let required: Bool
    let refreshOnUnauthorized: Bool
    let maxRefreshes: Int
    let refreshWindow: Double
    /// The origins the token goes to (`origins`); nil: every https origin and plain http to a
    /// loopback host, and a request over plain http to any other host fails.
    let origins: [Origin]?
    /// Where the last origin asked for lets the token go: an app's requests go to a few origins.
    private let lastDestination = Locked<(origin: [UInt8], destination: Destination)?>(nil)
    /// Per request, what a `401` needs to know. On a host whose responses tell their request (in
    /// process, ABI 1.3 and later) the token sent is read back from the request at the `401`, and
    /// only the requests this plugin retried, or that went without its token, keep an entry (most
    /// keep none, and asking an empty table takes no lock); on an older host every request keeps
    /// the token it carried.
    private let carried = PerRequestState<Carried>()
    /// The last `Authorization` value and the scheme and token it was made of: the same token
    /// is sent with request after request, and its field value is made once.
    private let lastAuthorization = LastAnswer<SchemeAndToken, String>()

    /// What an `Authorization` value is made of; the same only as the same bytes (the value sent
    /// is made of them).
    struct SchemeAndToken: Equatable {
        /// The scheme, e.g. `Bearer`.
        let scheme: String
        /// The token.
        let token: String

        static func == (a: Self, b: Self) -> Bool { UTF8Bytes.equal(a.scheme, b.scheme) && UTF8Bytes.equal(a.token, b.token) }
    }
    /// Recent refreshes: the token each replaced, when, and whether it is over with that token
    /// unchanged (a request retried after it still got a `401` with it): a later `401` with that
    /// token asks for a refresh of its own, which counts.
    private let refreshes = Locked<[(token: String, time: Double, settled: Bool)]>([])

    struct Carried {
        /// The token sent; nil: the request went without this plugin's token.
        var token: String?
        var retried = false
        /// The token whose refresh this request's retry waited for, and when that refresh was
        /// asked for (nil: retried without one).
        var refreshed: (token: String, time: Double)?
    }

    /// Reads the configuration (keys in this plugin's README); an unknown key or a bad value throws
    /// a `PluginConfigurationError` naming it.
    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["key", "env", "file", "required", "refreshOn401", "maxRefreshes", "refreshWindow", "origins"])
        key = try configuration.string("key", default: "access_token") ?? "access_token"
        environmentVariable = try configuration.string("env")
        file = try configuration.string("file")
        required = try configuration.bool("required", default: false)
        refreshOnUnauthorized = try configuration.bool("refreshOn401", default: true)
        maxRefreshes = try configuration.integer("maxRefreshes", default: 3, in: 1...1000)
        refreshWindow = try configuration.number("refreshWindow", default: 30, in: 0.001...86_400)
        if key.isEmpty { throw configuration.error("key must not be empty") }
        // Absent or null: the default (https and loopback). An empty list would send the token
        // nowhere, silently, `required` or not: refused.
        if configuration.values["origins"] == nil || configuration.values["origins"] == .null {
            origins = nil
        } else {
            let listed = try configuration.strings("origins")
            if listed.isEmpty {
                throw configuration.error("origins must list at least one origin (leave it out for https and loopback)")
            }
            origins = try listed.enumerated().map { index, text in
                guard let origin = Origin(text) else {
                    throw configuration.error(
                        "origins[\(index)]: \(text.debugDescription) is not an origin: write scheme (http or https), host and an optional port, "
                            + "such as \"https://api.example.com\" or \"https://*.example.com:8443\" (no user, path, query or fragment)")
                }
                return origin
            }
        }
    }

    /// An origin the token may go to: a scheme, a host (or, written `*.example.com`, any host
    /// under one) and a port (the scheme's own when not written).
    struct Origin: Equatable {
        /// `http` or `https`.
        let scheme: String
        /// The host in lower case; for a wildcard, what follows `*.`.
        let host: String
        /// Whether any host ending in `.` + ``host`` is meant (not ``host`` itself).
        let subdomains: Bool
        let port: Int

        /// Reads `"https://api.example.com"`, `"http://127.0.0.1:8080"` or
        /// `"https://*.example.com"`; nil for anything else (a user, a path other than `/`, a
        /// query, a fragment, another scheme, a port out of range). A host past ASCII is kept in
        /// the form DNS is asked for (IDNA: `bücher.example` and `xn--bcher-kva.example` are one).
        init?(_ text: String) {
            guard let parts = URLComponents(string: text), let scheme = parts.scheme?.lowercased(), scheme == "http" || scheme == "https",
                var host = parts.encodedHost?.lowercased(), !host.isEmpty, !host.contains("%"),
                parts.user == nil, parts.password == nil, parts.path.isEmpty || parts.path == "/", parts.query == nil, parts.fragment == nil
            else { return nil }
            let port = parts.port ?? URLParts.defaultPort(forScheme: scheme)
            guard (1...65_535).contains(port) else { return nil }
            subdomains = host.hasPrefix("*.")
            if subdomains { host.removeFirst(2) }
            guard !host.isEmpty, !host.contains("*") else { return nil }
            self.scheme = scheme
            self.host = host
            self.port = port
        }

        /// Whether a request to `scheme://host:port` (scheme and host in lower case) is to this origin.
        func admits(scheme: String, host: String, port: Int) -> Bool {
            guard scheme == self.scheme, port == self.port else { return false }
            return subdomains ? host.hasSuffix("." + self.host) : host == self.host
        }
    }

    /// Whether a request's token goes where it is sent.
    enum Destination: Equatable {
        /// The token goes there.
        case send
        /// Not one of `origins`: the request goes without this plugin's token.
        case skip
        /// Plain http to a host that is not loopback, and no `origins`: the request fails (this message).
        case refuse(String)
    }

    /// Where the token of a request to `url` may go (see ``origins``).
    func destination(_ url: String) -> Destination {
        var url = url
        return url.withUTF8 { bytes in
            // The origin is all before the path: requests to one origin share an answer, compared
            // as bytes where it is kept (no string made for a request to the last origin).
            let origin = UnsafeBufferPointer(rebasing: bytes[..<Self.originEnd(bytes)])
            if let kept = lastDestination.withLock({ kept -> Destination? in
                guard let kept, kept.origin.count == origin.count, kept.origin.elementsEqual(origin) else { return nil }
                return kept.destination
            }) {
                return kept
            }
            let computed = Self.destination(of: String(decoding: origin, as: UTF8.self), origins: origins)
            lastDestination.withLock { $0 = (Array(origin), computed) }
            return computed
        }
    }

    /// Where the origin of a URL's bytes ends: at the `/`, `?` or `#` after `scheme://`, or at
    /// the end (a string without `//` is taken whole, and parsed as such).
    static func originEnd(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        guard let slash = bytes.firstIndex(of: UInt8(ascii: "/")), slash + 1 < bytes.count, bytes[slash + 1] == UInt8(ascii: "/") else {
            return bytes.count
        }
        var index = slash + 2
        while index < bytes.count, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: "?"), bytes[index] != UInt8(ascii: "#") {
            index += 1
        }
        return index
    }

    /// Where the token may go for a URL that is an origin (or that this parses as one).
    static func destination(of url: String, origins: [Origin]?) -> Destination {
        guard let parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(), let host = parts.percentEncodedHost?.lowercased(),
            !host.isEmpty
        else { return origins == nil ? .refuse("access-token: the token is not sent to a URL whose host cannot be read") : .skip }
        let port = parts.port ?? URLParts.defaultPort(forScheme: scheme)
        if let origins {
            // A host that does not read as a name (a percent-encoded delimiter) goes to no origin.
            guard let ascii = asciiHost(parts), !ascii.contains("%") else { return .skip }
            return origins.contains { $0.admits(scheme: scheme, host: ascii, port: port) } ? .send : .skip
        }
        if scheme == "https" || (scheme == "http" && URLParts.isLoopback(host)) { return .send }
        guard scheme == "http" else { return .refuse("access-token: the token is not sent over \(scheme): only http and https requests carry it") }
        let named = "\(scheme)://\(host)" + (parts.port.map { ":\($0)" } ?? "")
        return .refuse(
            "access-token: the token is not sent over \(scheme) to \(named) (without origins, it goes to https and to loopback hosts only; "
                + "list \"\(named)\" in origins to send it there)")
    }

    /// The host of `parts` in lower case as DNS is asked for it: IDNA's ASCII form for a name past
    /// ASCII (`xn--…`, which a URL's own host already is), and a host percent-encoded in the URL
    /// decoded when it decodes to a name (no delimiter, space or control character); one that
    /// does not stays as written, `%` and all, and one IDNA cannot convert stays in its own form:
    /// neither is any origin's. (`percentEncodedHost` reads an `xn--` label back as
    /// percent-encoded UTF-8.)
    static func asciiHost(_ parts: URLComponents) -> String? {
        guard let host = parts.encodedHost?.lowercased(), !host.isEmpty else { return nil }
        guard host.contains("%"), !host.hasPrefix("["), let decoded = host.removingPercentEncoding, !decoded.isEmpty,
            URLParts.holdsNoDelimiter(decoded)
        else { return host }
        return URLParts.lookupHost(decoded)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The current token: host store, then environment, then file; the last two trimmed (a
    /// variable made from a file, as a Kubernetes secret is, ends with a line break).
    func token(_ services: any HostServices) -> String? {
        if let stored = services.value(forKey: key), !stored.isEmpty { return stored }
        if let name = environmentVariable, let value = ProcessInfo.processInfo.environment[name] {
            let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
            if !trimmed.isEmpty { return trimmed }
        }
        if let file, let text = try? String(contentsOfFile: file, encoding: .utf8) {
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if !trimmed.isEmpty { return trimmed }
        }
        return nil
    }

    /// The scheme for a target, or nil for `none`.
    func scheme(_ context: InterceptorContext) throws -> String? {
        let option = context.target.pluginOptions["auth"] ?? "bearer"
        switch option {
        case "bearer": return "Bearer"
        case "basic": return "Basic"
        case "none": return nil
        default:
            guard option.hasPrefix("custom:"), HeaderValidation.isValidName(String(option.dropFirst(7))) else {
                throw Failure(
                    description:
                        "access-token: pluginOptions[\"auth\"] must be bearer, basic, custom:<Scheme> or none, not \(option.debugDescription)")
            }
            return String(option.dropFirst(7))
        }
    }

    /// Sets `Authorization` from the current token (per the target's scheme), or fails the
    /// request when a token is `required` and there is none.
    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        let readsBack = context.services.responsesCarryRequestHeaders
        guard let scheme = try scheme(context) else {
            carried.remove(context.requestID)
            return .proceed
        }
        let destination = destination(request.url)
        if destination == .skip {
            // Not this plugin's origin: an `Authorization` there is the app's, not a token to refresh.
            if readsBack && refreshOnUnauthorized {
                carried.set(Carried(token: nil), for: context.requestID)
            } else {
                carried.remove(context.requestID)
            }
            return .proceed
        }
        guard let token = token(context.services) else {
            // An `Authorization` the app set itself is not this plugin's token to refresh.
            if readsBack && refreshOnUnauthorized { carried.set(Carried(token: nil), for: context.requestID) }
            if required {
                var places = ["host store key \(key.debugDescription)"]
                if let environmentVariable { places.append("environment variable \(environmentVariable)") }
                if let file { places.append("file \(file)") }
                throw Failure(description: "access-token: no token (looked in \(places.joined(separator: ", ")))")
            }
            return .proceed
        }
        if case .refuse(let message) = destination {
            carried.remove(context.requestID)
            throw Failure(description: message)
        }
        let value = lastAuthorization.answer(for: SchemeAndToken(scheme: scheme, token: token)) { $0.scheme + " " + $0.token }
        try request.setHeader("Authorization", value)
        // Kept where the response cannot tell the token sent; where it can, only a retry's entry
        // (whether it was retried) gets the token, in place of none for an attempt without one.
        if refreshOnUnauthorized && (!readsBack || context.attempt > 1) {
            carried.update(context.requestID, initial: Carried(token: token)) { $0.token = token }
        }
        return .proceed
    }

    /// What a request that got a `401` carried: the token after this target's scheme in the
    /// `Authorization` it was sent with, where responses tell their request (none when the field
    /// is not this plugin's), else what `prepare` kept; and whether this plugin retried it already.
    func sent(_ result: InterceptorResult, context: InterceptorContext) throws -> (token: String, retried: Bool)? {
        let kept = carried.get(context.requestID)
        guard context.services.responsesCarryRequestHeaders else { return kept?.token.map { ($0, kept!.retried) } }
        guard kept == nil || kept?.token != nil, let scheme = try scheme(context),
            let value = result.response?.requestHeaders?.value(named: "Authorization"),
            value.utf8.count > scheme.utf8.count + 1, value.utf8.starts(with: scheme.utf8),
            value.utf8.dropFirst(scheme.utf8.count).first == UInt8(ascii: " ")
        else { return nil }
        return (String(decoding: value.utf8.dropFirst(scheme.utf8.count + 1), as: UTF8.self), kept?.retried ?? false)
    }

    /// On a `401` to a request that carried a token (unless `refreshOn401` is false): one retry,
    /// after a refresh unless another request already refreshed the token; excessive refreshes
    /// fail the request.
    public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
        guard refreshOnUnauthorized, result.response?.statusCode == 401, let sent = try sent(result, context: context) else {
            carried.remove(context.requestID)
            return .proceed
        }
        guard !sent.retried else {
            // Refused again with the token whose refresh it waited for: that refresh is over and
            // left the token as it was (the refresher gave it back): 401s with it share it no more.
            // Only that refresh: a later one of the same token may still run.
            if let refreshed = carried.remove(context.requestID)?.refreshed, UTF8Bytes.equal(refreshed.token, sent.token) {
                refreshes.withLock { times in
                    for index in times.indices where times[index].time == refreshed.time && UTF8Bytes.equal(times[index].token, refreshed.token) {
                        times[index].settled = true
                    }
                }
            }
            return .proceed
        }
        carried.update(context.requestID, initial: Carried(token: sent.token)) { $0.retried = true }
        // No token now (the app logged out while the request was in flight): the 401 is the
        // answer; a refresh would put a token back into a store the app emptied.
        guard let current = token(context.services) else {
            carried.remove(context.requestID)
            return .proceed
        }
        // Compared as bytes: a token of other bytes is another token, though equal as a string.
        if !UTF8Bytes.equal(current, sent.token) { return .retry() }
        // Count refreshes, not requests asking for one: 401s carrying the same token share a refresh.
        // On the monotonic clock: a wall clock set back kept every refresh "recent", and each
        // later one failed as excessive until it caught up.
        let now = Double(context.services.monotonicNanoseconds()) / 1e9
        let (allowed, recent, asked) = refreshes.withLock { times -> (Bool, Int, Double) in
            times = times.filter { now - $0.time < refreshWindow }
            let shared = times.last { !$0.settled && UTF8Bytes.equal($0.token, sent.token) }
            let allowed = shared != nil || times.count < maxRefreshes
            let recent = times.count
            if allowed && shared == nil { times.append((sent.token, now, false)) }
            return (allowed, recent, shared?.time ?? now)
        }
        guard allowed else {
            carried.remove(context.requestID)
            throw Failure(
                description: "access-token: excessive refresh: \(recent) refreshes within \(refreshWindow) s (maxRefreshes \(maxRefreshes))")
        }
        carried.update(context.requestID, initial: Carried(token: sent.token, retried: true)) { $0.refreshed = (sent.token, asked) }
        return .retry(refresh: CredentialRefresh(key: key, staleValue: sent.token))
    }
}
