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
        let resolved = resolve(url)
        let parts = URLParts(resolved)
        let info = TargetInfo(
            method: method.rawValue,
            baseURL: parts.components.flatMap { c in
                c.scheme.map { "\($0)://\(c.host ?? "")\(c.port.map { ":\($0)" } ?? "")" }
            } ?? resolved,
            path: parts.percentEncodedPath, pluginOptions: pluginOptions)
        let task: RequestTask = parameters.isEmpty ? .requestPlain : .requestParameters(parameters: parameters, encoding: encoding)
        let endpoint = Endpoint(
            url: resolved, sampleResponseClosure: { .networkResponse(200, Data()) }, method: method,
            task: task, httpHeaderFields: headers.isEmpty ? nil : headers)
        return pipeline(method: method, info: info, validation: .none, limits: limits ?? self.limits, stub: { .never }, endpoint: { endpoint })
    }

    private func resolve(_ url: String) -> String {
        guard let server, !URLParts.isAbsoluteHTTP(url), !url.contains("://") else { return url }
        let base = server.baseURL.absoluteString
        let trimmedBase = base.hasSuffix("/") ? String(base.dropLast()) : base
        return url.hasPrefix("/") ? trimmedBase + url : trimmedBase + "/" + url
    }
}
