import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Answers HTTP authentication challenges with a user and password per host (and realm),
/// and can send Basic credentials preemptively.
///
/// `Basic` and `Digest` challenges are answered: the plugin gives the user and password, the host
/// computes the answer (for Digest: RFC 7616, the strongest algorithm the server offers).
/// Credentials go only to the hosts listed: a challenge from any other host is not answered, nor
/// one that follows `rounds` failed answers for the same request (default 1). A proxy's `407` is
/// answered only from an entry marked `proxy: true` (for requests to its `host`), and a server's
/// `401` never from one: a server's password never goes to a proxy.
/// On a redirect to another scheme, host or port the transport drops `Authorization`. An entry
/// that names no scheme answers over https, and over plain http for a loopback host only.
public struct CredentialsPlugin: ExportablePlugin {
    /// The name manifests and bundles know this plugin by.
    public static var pluginName: String { "credentials" }
    /// This plugin's version.
    public static var pluginVersion: String { "1.3.0" }
    /// One line saying what this plugin does (`plugin.json`'s `summary`, `pluginhost list --json`).
    public static var pluginSummary: String { "Answers Basic and Digest authentication challenges for listed hosts" }
    /// The hooks this plugin implements (the others are not exported).
    public static var implementedHooks: Set<InterceptorHook> { [.prepare, .credential] }

    struct Entry {
        /// As ``CredentialsPlugin/comparable(_:)`` gives it.
        let host: String
        let port: Int?
        let scheme: String?
        let realm: String?
        let user: String
        let password: String?
        let passwordKey: String?
        let passwordEnv: String?
        let preemptive: Bool
        /// Answers a proxy's `407` for requests to `host`, and no server's `401`.
        let proxy: Bool

        func password(_ services: any HostServices) -> String? {
            if let password { return password }
            if let passwordKey, let stored = services.value(forKey: passwordKey) { return stored }
            if let passwordEnv, var value = ProcessInfo.processInfo.environment[passwordEnv] {
                // A variable made from a file (a Kubernetes secret) ends with a line break, which
                // is no part of the password; an empty one names none.
                // By scalars: `\r\n` is one character, which neither `\n` nor `\r` ends.
                while let last = value.unicodeScalars.last, last == "\n" || last == "\r" { value.unicodeScalars.removeLast() }
                return value.isEmpty ? nil : value
            }
            return nil
        }

        /// Whether the entry is for `scheme://host:port` (a name past ASCII in either form:
        /// `bücher.example` is `xn--bcher-kva.example`, the form a URL's host reads in). An entry
        /// that names no scheme is for https, and for plain http to a loopback host only: its
        /// password does not cross a network in clear (Basic) or open to offline guessing (Digest)
        /// unless the entry says `"scheme": "http"`. A proxy entry is for any scheme (the proxy
        /// is reached as it is configured).
        func matches(host: String, port: Int, scheme: String) -> Bool {
            let host = CredentialsPlugin.comparable(host)
            guard self.host == host, self.port == nil || self.port == port else { return false }
            let scheme = scheme.lowercased()
            if let named = self.scheme { return named == scheme }
            return proxy || scheme == "https" || URLParts.isLoopback(host)
        }

        /// Whether the entry answers a challenge of `realm`: any, unless the entry names one; then
        /// only that one (a challenge without a realm, or an empty one, is not it).
        func answers(realm: String?) -> Bool {
            self.realm == nil || self.realm == realm
        }
    }

    let entries: [Entry]
    /// How many answers one request gets before its `401` is delivered.
    let rounds: Int

    /// Reads the configuration (keys in this plugin's README); an unknown key or a bad value throws
    /// a `PluginConfigurationError` naming it.
    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys(["credentials", "rounds"])
        rounds = try configuration.integer("rounds", default: 1, in: 1...3)
        guard let list = configuration.values["credentials"]?.arrayValue else {
            // `null` is no list, as an absent key (the manifest's way to drop a bundle's default).
            if configuration.values["credentials"] == nil || configuration.values["credentials"] == .null {
                entries = []
                return
            }
            throw configuration.error("credentials must be a list of objects")
        }
        let allowed: Set<String> = ["host", "port", "scheme", "realm", "user", "password", "passwordKey", "passwordEnv", "preemptive", "proxy"]
        entries = try list.enumerated().map { index, item in
            guard let object = item.objectValue else { throw configuration.error("credentials[\(index)] must be an object") }
            let entry = PluginConfiguration(plugin: configuration.plugin, values: object)
            if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw configuration.error(
                    "credentials[\(index)]: unknown key \(unknown.debugDescription); known keys: \(allowed.sorted().joined(separator: ", "))")
            }
            func field<T>(_ read: () throws -> T) throws -> T {
                do { return try read() } catch let error as PluginConfigurationError {
                    throw configuration.error("credentials[\(index)].\(error.message)")
                }
            }
            guard let host = try field({ try entry.string("host") }), !host.isEmpty else {
                throw configuration.error("credentials[\(index)].host must name a host")
            }
            // A URL, a port, user information, a pattern or a trailing dot never matches a
            // challenge's host: refused, not kept as an entry that never answers. (An IPv6
            // address, with or without brackets, is one in any of its forms. A full stop of
            // another script, `。`, is IDNA's dot: read in IDNA's form.)
            let lookedUp = Self.comparable(host)
            let address = lookedUp.contains(":")
            if host.contains(where: { "/@*?#\\".contains($0) || $0.isWhitespace }) || lookedUp.hasSuffix(".")
                || (address ? Self.ipv6(lookedUp) == nil : host.contains(where: { "[]".contains($0) }))
            {
                throw configuration.error(
                    "credentials[\(index)].host \(host.debugDescription) is not a host name: write the host alone (no scheme, port, path "
                        + "or trailing dot); the port goes in port")
            }
            guard let user = try field({ try entry.string("user") }) else {
                throw configuration.error("credentials[\(index)].user is required: the user name to answer with")
            }
            if user.contains(":") {
                throw configuration.error("credentials[\(index)].user must not hold a colon: Basic credentials are split at the first one")
            }
            let password = try field { try entry.string("password") }
            let passwordKey = try field { try entry.string("passwordKey") }
            let passwordEnv = try field { try entry.string("passwordEnv") }
            if password == nil && passwordKey == nil && passwordEnv == nil {
                throw configuration.error("credentials[\(index)] needs password, passwordKey (host store) or passwordEnv")
            }
            // Absent or null: any port.
            let port = object["port"] == nil || object["port"] == .null ? nil : try field { try entry.integer("port", default: 0, in: 1...65535) }
            let scheme = try field { try entry.string("scheme") }?.lowercased()
            if let scheme, scheme != "http", scheme != "https" { throw configuration.error("credentials[\(index)].scheme must be http or https") }
            let realm = try field { try entry.string("realm") }
            if realm?.isEmpty == true {
                throw configuration.error("credentials[\(index)].realm must not be empty: leave it out to answer any realm")
            }
            let preemptive = try field { try entry.bool("preemptive", default: false) }
            let proxy = try field { try entry.bool("proxy", default: false) }
            if preemptive && proxy {
                // Nothing is sent to a proxy up front: it was accepted, and did nothing.
                throw configuration.error(
                    "credentials[\(index)]: a proxy entry is not preemptive (its credentials answer the proxy's 407); leave out one of the two")
            }
            return Entry(
                host: lookedUp, port: port, scheme: scheme, realm: realm, user: user,
                password: password, passwordKey: passwordKey, passwordEnv: passwordEnv, preemptive: preemptive, proxy: proxy)
        }
    }

    /// `host` (an entry's, a request's or a challenge's) as the plugin compares hosts: lower case,
    /// a name past ASCII in IDNA's form (``URLParts/lookupHost(_:)``), an IPv6 address without
    /// brackets in its shortest form (`[0:0::1]` is `::1`: a URL's host keeps the brackets, a
    /// challenge's has none).
    static func comparable(_ host: String) -> String {
        var bare = Substring(host)
        if bare.hasPrefix("["), bare.hasSuffix("]") { bare = bare.dropFirst().dropLast() }
        guard bare.contains(":") else { return URLParts.lookupHost(String(bare)) }
        return ipv6(String(bare)) ?? bare.lowercased()
    }

    /// An IPv6 address in its shortest form (RFC 5952), or nil when `text` is none.
    static func ipv6(_ text: String) -> String? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        var buffer = [CChar](repeating: 0, count: 64)
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return String(cString: buffer)
    }

    /// No credentials: no hook; none preemptive: only challenges are answered.
    public var activeHooks: Set<InterceptorHook>? {
        if entries.isEmpty { return [] }
        return entries.contains(where: \.preemptive) ? nil : [.credential]
    }

    /// The requests to an origin a preemptive entry covers that carried the app's own
    /// `Authorization` (the entry's went up front to none of them). Rare: an empty table is asked
    /// without a lock.
    private let appAuthorized = PerRequestState<Bool>()

    /// Sends Basic credentials up front to a host whose entry is `preemptive`, unless the request
    /// already carries `Authorization`.
    public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
        guard entries.contains(where: \.preemptive), let (host, port, scheme) = Self.origin(request.url) else { return .proceed }
        guard let index = upFront(host: host, port: port, scheme: scheme) else { return .proceed }
        if request.header("Authorization") != nil {
            // The app's own goes instead: a challenge to it has had none of the entry's answers.
            appAuthorized.set(true, for: context.requestID)
            return .proceed
        }
        // An attempt before this one may have carried the app's (the same request id).
        _ = appAuthorized.remove(context.requestID)
        guard let password = entries[index].password(context.services) else { return .proceed }
        let entry = entries[index]
        try request.setHeader("Authorization", "Basic " + Data("\(entry.user):\(password)".utf8).base64EncodedString())
        return .proceed
    }

    /// Answers a Basic or Digest challenge from a host (port, scheme, realm) credentials are
    /// configured for, up to `rounds` answers per request; otherwise the default handling. A
    /// server's Basic challenge that the entry `prepare` sent up front would answer again has had
    /// one answer already: that `Authorization` (to the target's origin, not a redirect's).
    public func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
        let basic = HTTPHeader.namesEqual(challenge.method, "Basic")
        guard basic || HTTPHeader.namesEqual(challenge.method, "Digest"),
            let index = entries.firstIndex(where: {
                $0.proxy == challenge.isProxy
                    && $0.matches(host: challenge.host, port: challenge.port, scheme: challenge.scheme) && $0.answers(realm: challenge.realm)
            })
        else { return .performDefault }
        let entry = entries[index]
        let sentUpFront =
            basic && upFront(host: challenge.host, port: challenge.port, scheme: challenge.scheme) == index
            && Self.isOrigin(of: context.target, challenge) && appAuthorized.get(context.requestID) == nil
        guard challenge.previousFailureCount + (sentUpFront ? 1 : 0) < rounds, let password = entry.password(context.services) else {
            return .performDefault
        }
        return .useCredential(user: entry.user, password: password)
    }

    /// The index of the entry `prepare` sends up front to an origin, if any.
    func upFront(host: String, port: Int, scheme: String) -> Int? {
        entries.firstIndex { $0.preemptive && !$0.proxy && $0.matches(host: host, port: port, scheme: scheme) }
    }

    /// A URL's host, port (the scheme's default when none is written) and lower-case scheme.
    static func origin(_ url: String) -> (host: String, port: Int, scheme: String)? {
        guard let url = URLComponents(string: url), let host = url.host else { return nil }
        let scheme = url.scheme?.lowercased() ?? "http"
        return (host, url.port ?? URLParts.defaultPort(forScheme: scheme), scheme)
    }

    /// Whether the challenge comes from the target's own origin (a redirect elsewhere dropped the
    /// `Authorization` sent up front).
    static func isOrigin(of target: TargetInfo, _ challenge: AuthenticationChallenge) -> Bool {
        guard let (host, port, scheme) = origin(target.baseURL) else { return false }
        return comparable(host) == comparable(challenge.host) && port == challenge.port && scheme == challenge.scheme.lowercased()
    }
}
