import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Request parameters: string keys, values of JSON-like types (String, numbers, Bool,
/// arrays and dictionaries of these, `NSNull`).
public typealias Parameters = [String: any Sendable]

/// What a request carries. The cases follow Moya's `Task`.
public enum RequestTask: Sendable {
    /// No body, no parameters.
    case requestPlain
    /// Raw body bytes.
    case requestData(Data)
    /// A value encoded as JSON with a default `JSONEncoder`.
    case requestJSONEncodable(any Encodable & Sendable)
    /// A value encoded as JSON with the given encoder.
    case requestCustomJSONEncodable(any Encodable & Sendable, encoder: JSONEncoder)
    /// Parameters encoded by `encoding` (query string, form body or JSON body).
    case requestParameters(parameters: Parameters, encoding: any ParameterEncoding)
    /// Raw body bytes plus query parameters.
    case requestCompositeData(bodyData: Data, urlParameters: Parameters)
    /// Body parameters encoded by `bodyEncoding`, plus query parameters.
    case requestCompositeParameters(bodyParameters: Parameters, bodyEncoding: any ParameterEncoding, urlParameters: Parameters)
    /// The body streamed from a file.
    case uploadFile(URL)
    /// A `multipart/form-data` body.
    case uploadMultipart([MultipartFormBodyPart])
    /// A `multipart/form-data` body plus query parameters.
    case uploadCompositeMultipart([MultipartFormBodyPart], urlParameters: Parameters)
    /// Downloads the body into a file chosen by `destination`.
    case downloadDestination(DownloadDestination)
    /// Downloads with parameters encoded by `encoding`.
    case downloadParameters(parameters: Parameters, encoding: any ParameterEncoding, destination: DownloadDestination)
}

extension RequestTask {
    /// The download destination, for download tasks.
    var downloadDestination: DownloadDestination? {
        switch self {
        case .downloadDestination(let destination), .downloadParameters(_, _, let destination):
            return destination
        default:
            return nil
        }
    }

    /// Whether the body is sent as an upload (file or multipart), which reports upload progress.
    var isUpload: Bool {
        switch self {
        case .uploadFile, .uploadMultipart, .uploadCompositeMultipart: return true
        default: return false
        }
    }
}

/// Where a download is saved, decided once the response headers are known.
public struct DownloadDestination: Sendable {
    /// Options for saving a downloaded file.
    public struct Options: OptionSet, Sendable {
        /// The raw bits.
        public let rawValue: Int
        /// Creates options from raw bits.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Create missing parent directories.
        public static let createIntermediateDirectories = Options(rawValue: 1 << 0)
        /// Replace an existing file.
        public static let removePreviousFile = Options(rawValue: 1 << 1)
    }

    /// Picks the file URL and options from the temporary file and the response.
    public let decide: @Sendable (_ temporaryURL: URL, _ response: HTTPURLResponse) -> (URL, Options)

    /// Creates a destination from a closure.
    public init(_ decide: @escaping @Sendable (_ temporaryURL: URL, _ response: HTTPURLResponse) -> (URL, Options)) {
        self.decide = decide
    }

    /// Always saves to `url`, creating directories and replacing an earlier file.
    public static func file(_ url: URL) -> DownloadDestination {
        DownloadDestination { _, _ in (url, [.createIntermediateDirectories, .removePreviousFile]) }
    }

    /// Saves into `directory` under the name the server's `Content-Disposition` suggests, else the
    /// URL's last path component, else the temporary file's name: the first that is one plain
    /// file name (not empty, `.` or `..`, without `/`), so a server never names a file outside
    /// `directory`, nor the directory itself.
    public static func directory(_ directory: URL) -> DownloadDestination {
        DownloadDestination { temporary, response in
            // Foundation on Linux suggests "Unknown" when the response says nothing: only a name
            // the server gave counts as suggested.
            let suggested = response.value(forHTTPHeaderField: "Content-Disposition") != nil ? response.suggestedFilename : nil
            let name = [suggested, response.url?.lastPathComponent].compactMap { $0 }.first(where: isPlainFileName) ?? temporary.lastPathComponent
            return (directory.appendingPathComponent(name), [.createIntermediateDirectories, .removePreviousFile])
        }
    }

    /// One path component naming a file: not empty, `.` or `..`, and without `/` or NUL.
    static func isPlainFileName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.utf8.contains(UInt8(ascii: "/")) && !name.utf8.contains(0)
    }

    /// Moves the downloaded temporary file to its destination; returns the final URL.
    func place(_ temporaryURL: URL, response: HTTPURLResponse) throws -> URL {
        let (destination, options) = decide(temporaryURL, response)
        let files = FileManager.default
        if options.contains(.createIntermediateDirectories) {
            try files.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        }
        var isDirectory: ObjCBool = false
        if options.contains(.removePreviousFile), files.fileExists(atPath: destination.path, isDirectory: &isDirectory) {
            // A file is replaced; a directory never is (nor what is in it).
            guard !isDirectory.boolValue else {
                let reason = "\(destination.path) is a directory; a download does not replace one"
                throw CocoaError(.fileWriteFileExists, userInfo: [NSLocalizedDescriptionKey: reason])
            }
            try files.removeItem(at: destination)
        }
        try files.moveItem(at: temporaryURL, to: destination)
        return destination
    }
}
