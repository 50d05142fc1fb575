import Foundation
import PluginSDK

/// The library's version, as sent in the default `User-Agent`.
public enum PluginHostVersion {
    /// The semantic version of this library.
    public static let current = "0.1.0"
}

/// The header fields a provider sets on every request before its interceptors run, unless the
/// target, the server layer or the request closure already set them.
///
/// Because they are set before the chain, `prepare` and `willSend` (and the `logger` plugin)
/// see exactly the fields that go on the wire; the transport adds only the fields that belong to
/// the connection (`Host`, `Content-Length`, `Transfer-Encoding`, `Connection`).
///
/// ```swift
/// // Keep the defaults, name the app in User-Agent:
/// var headers = DefaultHeaders.standard(for: transport)
/// headers["User-Agent"] = "Shop/3.1 " + DefaultHeaders.userAgent
/// let provider = Provider<ShopAPI>(transport: transport, defaultHeaders: headers)
/// // Per target: a target's own `headers` win over these.
/// ```
public enum DefaultHeaders {
    /// The default `User-Agent`: `PluginHost/<version> (<OS> <OS version>; <architecture>)`,
    /// for example `PluginHost/0.1.0 (Linux 6.1.0; x86_64)`.
    public static let userAgent: String = {
        let version = ProcessInfo.processInfo.operatingSystemVersion
        return
            "PluginHost/\(PluginHostVersion.current) (\(Platform.system) \(version.majorVersion).\(version.minorVersion).\(version.patchVersion); \(Platform.architecture))"
    }()

    /// The default `Accept-Language`: up to six of the user's preferred languages with
    /// decreasing quality (`en-US;q=1.0, de;q=0.9`), or `en;q=1.0` when none are known.
    public static let acceptLanguage: String = {
        let languages = Locale.preferredLanguages.prefix(6)
        guard !languages.isEmpty else { return "en;q=1.0" }
        return languages.enumerated().map { index, language in
            index == 0 ? "\(language);q=1.0" : "\(language);q=0.\(10 - index)"
        }.joined(separator: ", ")
    }()

    /// The fields a provider on `transport` sets by default: `User-Agent` (``userAgent``),
    /// `Accept: */*`, `Accept-Language` (``acceptLanguage``) and, when the transport decodes
    /// content codings, `Accept-Encoding` with the codings it decodes
    /// (``Transport/acceptEncoding``).
    public static func standard(for transport: any Transport) -> [String: String] {
        var headers = ["User-Agent": userAgent, "Accept": "*/*", "Accept-Language": acceptLanguage]
        if let encodings = transport.acceptEncoding, !encodings.isEmpty { headers["Accept-Encoding"] = encodings }
        return headers
    }
}
