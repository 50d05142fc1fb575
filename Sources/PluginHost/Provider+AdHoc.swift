import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Provider {
    /// `GET url` without a target; parameters go in the query string.
    ///
    /// A relative `url` (e.g. `/users`) is resolved against the server layer's base URL.
    /// `limits` replaces the provider's ``Provider/limits`` for this call.
    public func get(
        _ url: String, parameters: Parameters = [:], headers: [String: String] = [:],
        pluginOptions: [String: String] = [:], limits: RequestLimits? = nil
    ) -> ResponsePipeline<Response> {
        adHoc(.get, url, parameters: parameters, encoding: URLEncoding.default, headers: headers, pluginOptions: pluginOptions, limits: limits)
    }

    /// `POST url` without a target; parameters go in a JSON body unless `encoding` says otherwise.
    public func post(
        _ url: String, parameters: Parameters = [:], encoding: any ParameterEncoding = JSONEncoding.default,
        headers: [String: String] = [:], pluginOptions: [String: String] = [:], limits: RequestLimits? = nil
    ) -> ResponsePipeline<Response> {
        adHoc(.post, url, parameters: parameters, encoding: encoding, headers: headers, pluginOptions: pluginOptions, limits: limits)
    }

    /// `PUT url` without a target; parameters go in a JSON body unless `encoding` says otherwise.
    public func put(
        _ url: String, parameters: Parameters = [:], encoding: any ParameterEncoding = JSONEncoding.default,
        headers: [String: String] = [:], pluginOptions: [String: String] = [:], limits: RequestLimits? = nil
    ) -> ResponsePipeline<Response> {
        adHoc(.put, url, parameters: parameters, encoding: encoding, headers: headers, pluginOptions: pluginOptions, limits: limits)
    }

    /// `DELETE url` without a target; parameters go in the query string.
    public func delete(
        _ url: String, parameters: Parameters = [:], headers: [String: String] = [:],
        pluginOptions: [String: String] = [:], limits: RequestLimits? = nil
    ) -> ResponsePipeline<Response> {
        adHoc(.delete, url, parameters: parameters, encoding: URLEncoding.default, headers: headers, pluginOptions: pluginOptions, limits: limits)
    }

    private func adHoc(
        _ method: HTTPMethod, _ url: String, parameters: Parameters, encoding: any ParameterEncoding,
        headers: [String: String], pluginOptions: [String: String], limits: RequestLimits?
    ) -> ResponsePipeline<Response> {
        let task: RequestTask = parameters.isEmpty ? .requestPlain : .requestParameters(parameters: parameters, encoding: encoding)
        // Resolved on each consumption, when the server layer's headers are read too: a pipeline
        // built before a switch of server and consumed after it goes to the new server.
        let stub: @Sendable () -> StubBehavior = { .never }
        return pipeline(method: method, validation: .none, limits: limits ?? self.limits, stub: stub) { snapshot in
            // The base URL of the reading the request's default headers come from.
            let resolved = Self.resolve(url, against: snapshot?.baseURL)
            let parts = URLParts(resolved)
            let info = TargetInfo(
                method: method.rawValue,
                baseURL: parts.components.flatMap { c in
                    c.scheme.map { "\($0)://\(c.host ?? "")\(c.port.map { ":\($0)" } ?? "")" }
                } ?? resolved,
                path: parts.percentEncodedPath, pluginOptions: pluginOptions)
            let endpoint = Endpoint(
                url: resolved, sampleResponseClosure: { .networkResponse(200, Data()) }, method: method,
                task: task, httpHeaderFields: headers.isEmpty ? nil : headers)
            return (info, endpoint)
        }
    }

    /// `url` against the server layer's base URL, unless it is absolute (`scheme://…`): the
    /// path after the base's path, the base's query before the URL's own (`/users` on
    /// `https://h/v1?key=K` is `https://h/v1/users?key=K`, as a target's URL is).
    func resolve(_ url: String) -> String {
        Self.resolve(url, against: server?.baseURL)
    }

    /// `url` against `base` (none: as it is), as ``resolve(_:)`` says.
    static func resolve(_ url: String, against base: URL?) -> String {
        guard let base, !URLParts.isAbsoluteHTTP(url), !startsWithScheme(url) else { return url }
        func split(_ text: String) -> (head: Substring, query: Substring?, fragment: Substring?) {
            let fragmentStart = text.firstIndex(of: "#")
            let beforeFragment = text[..<(fragmentStart ?? text.endIndex)]
            let queryStart = beforeFragment.firstIndex(of: "?")
            return (
                beforeFragment[..<(queryStart ?? beforeFragment.endIndex)], queryStart.map { beforeFragment[beforeFragment.index(after: $0)...] },
                fragmentStart.map { text[text.index(after: $0)...] }
            )
        }
        let parts = split(base.absoluteString)
        let relative = split(url)
        var joined = parts.head.hasSuffix("/") ? String(parts.head.dropLast()) : String(parts.head)
        joined += relative.head.hasPrefix("/") ? relative.head : "/" + relative.head
        let queries = [parts.query, relative.query].compactMap { $0 }.filter { !$0.isEmpty }
        if !queries.isEmpty { joined += "?" + queries.joined(separator: "&") }
        if let fragment = relative.fragment { joined += "#" + fragment }
        return joined
    }

    /// Whether `url` starts with a scheme and `://` (RFC 3986 §3.1: a letter, then letters,
    /// digits, `+`, `-`, `.`): an absolute URL, whatever its scheme. A `://` later (in a query,
    /// `?next=https://…`) is not one.
    static func startsWithScheme(_ url: String) -> Bool {
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://"), let first = url.first, first.isASCII, first.isLetter else {
            return false
        }
        return url[..<colon].allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == ".") }
    }
}
