import Foundation

extension ResponsePipeline where Value == Response {
    /// Turns the error body a server sends (`{"code": 1042, "message": "…"}`) into a typed error.
    ///
    /// For a response `when` calls an error (by default status `400` or above), whether it arrives
    /// as a value or as the ``NetworkError/statusCode(_:)`` of validation or an earlier filter step,
    /// the body (or the value at `keyPath`) is decoded as `E` and the pipeline fails with
    /// ``NetworkError/server(_:_:)`` carrying it and the response. When the body does not decode
    /// (empty, not JSON, another shape, no such key path), the pipeline fails with
    /// ``NetworkError/statusCode(_:)`` as before, and its description says why
    /// (``Response/serverErrorDecodingFailure``).
    ///
    /// For servers that answer errors with `200` and an envelope (`200 {"code": 401, …}`), give
    /// `envelope`: a response that is not an error by `when` but whose body decodes as `E` and
    /// satisfies `envelope` fails the same way; any other passes through unchanged.
    ///
    /// ```swift
    /// struct APIError: Decodable, Error, Sendable { let code: Int; let message: String }
    /// do {
    ///     let user = try await provider.request(.user(id: 1))
    ///         .mapServerError(APIError.self, envelope: { $0.code != 0 })
    ///         .map(User.self)
    ///         .value
    /// } catch NetworkError.server(let error as APIError, let response) {
    ///     print(error.code, error.message, response.statusCode)
    /// }
    /// ```
    public func mapServerError<E: Decodable & Error & Sendable>(
        _ type: E.Type,
        when isError: @escaping @Sendable (Response) -> Bool = { $0.statusCode >= 400 },
        atKeyPath keyPath: String? = nil,
        using decoder: @autoclosure @escaping @Sendable () -> JSONDecoder = JSONDecoder(),
        envelope: (@Sendable (E) -> Bool)? = nil
    ) -> ResponsePipeline<Response> {
        derived { progress async throws(NetworkError) in
            let response: Response
            do throws(NetworkError) {
                response = try await body(progress)
            } catch {
                guard case .statusCode(let rejected) = error, isError(rejected) else { throw error }
                throw Self.serverError(type, in: rejected, keyPath: keyPath, decoder: decoder())
            }
            if isError(response) { throw Self.serverError(type, in: response, keyPath: keyPath, decoder: decoder()) }
            if let envelope, let decoded = try? response.map(type, atKeyPath: keyPath, using: decoder()), envelope(decoded) {
                throw .server(decoded, response)
            }
            return response
        }
    }

    /// `.server` with the decoded error, or `.statusCode` saying why the body did not decode.
    private static func serverError<E: Decodable & Error>(
        _ type: E.Type, in response: Response, keyPath: String?, decoder: JSONDecoder
    ) -> NetworkError {
        do throws(NetworkError) {
            return .server(try response.map(type, atKeyPath: keyPath, using: decoder), response)
        } catch {
            var kept = response
            kept.serverErrorDecodingFailure = "the body is not a \(E.self): " + Self.reason(error, response: response)
            return .statusCode(kept)
        }
    }

    /// Why a body did not decode, in a few words.
    private static func reason(_ error: NetworkError, response: Response) -> String {
        switch error {
        case .jsonMapping:
            return response.data.isEmpty ? "it is empty" : "it is not JSON (\(response.data.count) bytes)"
        case .keyPathNotFound(let keyPath, _):
            return "key path \(keyPath.debugDescription) is not in it"
        case .objectMapping(let cause, _):
            if response.data.isEmpty { return "it is empty" }
            if (try? JSONSerialization.jsonObject(with: response.data, options: [.fragmentsAllowed])) == nil {
                return "it is not JSON (\(response.data.count) bytes)"
            }
            if let cause = cause as? DecodingError { return DecodingFailure.describe(cause) }
            return "\(cause)"
        default:
            return error.description
        }
    }
}

/// Short descriptions of `DecodingError`s: what was wrong, and where.
enum DecodingFailure {
    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
            return keys.isEmpty ? "at the top level" : "at " + keys.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "key \(key.stringValue.debugDescription) is missing \(path(context))"
        case .typeMismatch(let type, let context):
            return "expected \(type) \(path(context))"
        case .valueNotFound(let type, let context):
            return "expected \(type), found null \(path(context))"
        case .dataCorrupted(let context):
            return "\(context.debugDescription) \(path(context))"
        @unknown default:
            return "\(error)"
        }
    }
}
