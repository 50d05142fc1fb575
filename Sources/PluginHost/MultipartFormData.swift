import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One part of a `multipart/form-data` body.
public struct MultipartFormBodyPart: Sendable {
    /// Where the part's bytes come from.
    public enum Source: Sendable {
        /// Bytes in memory.
        case data(Data)
        /// The contents of a file.
        case file(URL)
    }

    /// The bytes.
    public var source: Source
    /// The form field name.
    public var name: String
    /// The file name sent with the part (files default to their last path component).
    public var fileName: String?
    /// The part's `Content-Type` (files default to `application/octet-stream`).
    public var mimeType: String?

    /// Creates a part.
    public init(source: Source, name: String, fileName: String? = nil, mimeType: String? = nil) {
        self.source = source
        self.name = name
        self.fileName = fileName
        self.mimeType = mimeType
    }

    /// A text field.
    public static func text(_ value: String, name: String) -> MultipartFormBodyPart {
        MultipartFormBodyPart(source: .data(Data(value.utf8)), name: name)
    }

    /// A file field read from disk.
    public static func file(_ url: URL, name: String, fileName: String? = nil, mimeType: String? = nil) -> MultipartFormBodyPart {
        MultipartFormBodyPart(
            source: .file(url), name: name, fileName: fileName ?? url.lastPathComponent,
            mimeType: mimeType ?? "application/octet-stream")
    }
}

/// Builds `multipart/form-data` bodies (RFC 7578).
public enum MultipartFormData {
    /// A fresh random boundary.
    public static func makeBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        return "pluginhost.boundary.\(hex)"
    }

    /// The `Content-Type` header value for `boundary`: quoted when it is no token (RFC 2046
    /// allows `'()+,/:=?` and inner spaces in a boundary; `boundary=a:b` would end the value at
    /// the colon for some parsers). Meant for a boundary ``encode(_:boundary:)`` accepts; of any
    /// other, a quote or backslash is escaped (RFC 9110 quoted-pair), and a CR, LF or NUL makes a
    /// value the provider refuses to send (``NetworkError/invalidHeader(name:reason:)``).
    public static func contentType(boundary: String) -> String {
        if HeaderValidation.isValidName(boundary) { return "multipart/form-data; boundary=\(boundary)" }
        let escaped = boundary.replacingOccurrences(of: "\\", with: "\\\\", options: .literal)
            .replacingOccurrences(of: "\"", with: "\\\"", options: .literal)
        return "multipart/form-data; boundary=\"\(escaped)\""
    }

    /// Why `boundary` is no RFC 2046 boundary (1 to 70 of `A-Z a-z 0-9 '()+_,-./:=?` and space,
    /// not ending in a space); nil when it is one.
    static func boundaryProblem(_ boundary: String) -> String? {
        let scalars = boundary.unicodeScalars
        guard (1...70).contains(scalars.count) else { return "must be 1 to 70 characters, not \(scalars.count)" }
        if let bad = scalars.first(where: { !$0.isASCII || !isBoundaryByte(UInt8($0.value)) }) {
            return "holds \(String(bad).debugDescription), which RFC 2046 does not allow"
        }
        if scalars.last == " " { return "ends with a space" }
        return nil
    }

    private static func isBoundaryByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"): return true
        default: return "'()+_,-./:=? ".utf8.contains(byte)
        }
    }

    /// Encodes `parts` with `boundary`; throws ``NetworkError/fileAccess(path:reason:)`` for an
    /// unreadable file, and ``NetworkError/parameterEncoding(_:)`` with ``InvalidMultipartBoundary``
    /// for a `boundary` RFC 2046 does not allow (one with CR or LF would add fields of its own;
    /// the provider's own, ``makeBoundary()``, always is one) or with ``InvalidMultipartContentType``
    /// for a `mimeType` holding CR, LF or NUL (it would add header fields to the part). A file
    /// part without a file name or type gets the file's last path component and
    /// `application/octet-stream`.
    public static func encode(_ parts: [MultipartFormBodyPart], boundary: String) throws(NetworkError) -> Data {
        if let problem = boundaryProblem(boundary) {
            throw .parameterEncoding(InvalidMultipartBoundary(boundary: boundary, problem: problem))
        }
        var body = Data()
        for (index, part) in parts.enumerated() {
            var fileName = part.fileName
            var mimeType = part.mimeType
            if case .file(let url) = part.source {
                fileName = fileName ?? url.lastPathComponent
                mimeType = mimeType ?? "application/octet-stream"
            }
            if let mimeType, !HeaderValidation.isValidValue(mimeType) {
                throw .parameterEncoding(InvalidMultipartContentType(index: index, name: part.name, mimeType: mimeType))
            }
            body.append(Data("--\(boundary)\r\n".utf8))
            var disposition = "Content-Disposition: form-data; name=\"\(quoted(part.name))\""
            if let fileName { disposition += "; filename=\"\(quoted(fileName))\"" }
            body.append(Data("\(disposition)\r\n".utf8))
            if let mimeType { body.append(Data("Content-Type: \(mimeType)\r\n".utf8)) }
            body.append(Data("\r\n".utf8))
            switch part.source {
            case .data(let data):
                body.append(data)
            case .file(let url):
                do {
                    body.append(try Data(contentsOf: url))
                } catch {
                    throw .fileAccess(path: url.path, reason: "cannot read multipart file: \(error.localizedDescription)")
                }
            }
            body.append(Data("\r\n".utf8))
        }
        body.append(Data("--\(boundary)--\r\n".utf8))
        return body
    }

    /// Escapes a quoted-string parameter: quotes, CR and LF percent-encoded, as browsers do, and
    /// a backslash too (a server that reads quoted-string escapes would take `name="a\"` as
    /// an unclosed string, and lose the field or its file name), and NUL (a C parser ends the
    /// name there: `avatar\0.php` read as `avatar`).
    static func quoted(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "%5C", options: .literal)
            .replacingOccurrences(of: "\"", with: "%22", options: .literal)
            .replacingOccurrences(of: "\r", with: "%0D", options: .literal)
            .replacingOccurrences(of: "\n", with: "%0A", options: .literal)
            .replacingOccurrences(of: "\u{0}", with: "%00", options: .literal)
    }
}

/// A multipart part's `mimeType` holds CR, LF or NUL: written as is, it would add header fields
/// to the part (or end its header early).
public struct InvalidMultipartContentType: Error, Sendable, Equatable, CustomStringConvertible {
    /// The part's position in the list, from 0.
    public var index: Int
    /// The part's field name.
    public var name: String
    /// The refused value.
    public var mimeType: String

    /// The error for part `index`, named `name`, whose content type is `mimeType`.
    public init(index: Int, name: String, mimeType: String) {
        self.index = index
        self.name = name
        self.mimeType = mimeType
    }

    /// What is wrong.
    public var description: String {
        "multipart part \(index) (\(name.debugDescription)): the content type \(mimeType.debugDescription) holds CR, LF or NUL"
    }
}

/// A multipart boundary RFC 2046 does not allow (§5.1.1), given to
/// ``MultipartFormData/encode(_:boundary:)``.
public struct InvalidMultipartBoundary: Error, Sendable, Equatable, CustomStringConvertible {
    /// The refused boundary.
    public var boundary: String
    /// What is wrong with it.
    public var problem: String

    /// The error for `boundary`, with what is wrong with it.
    public init(boundary: String, problem: String) {
        self.boundary = boundary
        self.problem = problem
    }

    /// What is wrong.
    public var description: String { "the multipart boundary \(boundary.debugDescription) \(problem)" }
}
