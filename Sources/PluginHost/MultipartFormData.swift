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

    /// The `Content-Type` header value for `boundary`.
    public static func contentType(boundary: String) -> String {
        "multipart/form-data; boundary=\(boundary)"
    }

    /// Encodes `parts` with `boundary`; throws ``NetworkError/fileAccess(path:reason:)`` for an
    /// unreadable file, and ``NetworkError/parameterEncoding(_:)`` with ``InvalidMultipartContentType``
    /// for a `mimeType` holding CR, LF or NUL (it would add header fields to the part). A file
    /// part without a file name or type gets the file's last path component and
    /// `application/octet-stream`.
    public static func encode(_ parts: [MultipartFormBodyPart], boundary: String) throws(NetworkError) -> Data {
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
