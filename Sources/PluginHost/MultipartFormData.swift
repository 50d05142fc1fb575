import Foundation
import PluginSDK

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
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

    /// Bodies with file parts larger than this many bytes in all (the parts' data and files, with
    /// the parts' headers) are not built in memory on Linux: the provider sends them as a stream
    /// that reads each file as its turn comes, 64 KiB at a time. 10 MB, as Alamofire's
    /// `encodingMemoryThreshold`.
    public static let encodingMemoryThreshold: UInt64 = 10_000_000

    /// Encodes `parts` with `boundary`; throws ``NetworkError/fileAccess(path:reason:)`` for an
    /// unreadable file or a file part whose URL is no `file:` URL, and ``NetworkError/parameterEncoding(_:)`` with ``InvalidMultipartBoundary``
    /// for a `boundary` RFC 2046 does not allow (one with CR or LF would add fields of its own;
    /// the provider's own, ``makeBoundary()``, always is one) or with ``InvalidMultipartContentType``
    /// for a `mimeType` holding CR, LF or NUL (it would add header fields to the part). A file
    /// part without a file name or type gets the file's last path component and
    /// `application/octet-stream`. Files are read whole into the body: ``body(_:boundary:)``
    /// streams a large one.
    public static func encode(_ parts: [MultipartFormBodyPart], boundary: String) throws(NetworkError) -> Data {
        try assemble(try pieces(parts, boundary: boundary))
    }

    /// The body `pieces` make, files read whole.
    private static func assemble(_ pieces: [Piece]) throws(NetworkError) -> Data {
        var body = Data()
        for piece in pieces {
            switch piece {
            case .bytes(let data):
                body.append(data)
            case .file(let url):
                do {
                    body.append(try Data(contentsOf: url))
                } catch {
                    throw .fileAccess(path: url.path, reason: "cannot read multipart file: \(error.localizedDescription)")
                }
            }
        }
        return body
    }

    /// What a request sends for `parts`: the body of ``encode(_:boundary:)``, or on Linux, when
    /// it has files and is larger than ``encodingMemoryThreshold`` in all, a stream of the same
    /// bytes (each file opened now, so an unreadable one fails here, and read when its turn comes).
    /// On Darwin the body is always built in memory: a stream of this package's own is no stream
    /// CFNetwork can schedule, and `Endpoint.urlRequest()` is the app's to send as it likes.
    static func body(_ parts: [MultipartFormBodyPart], boundary: String) throws(NetworkError) -> MultipartBody {
        let pieces = try pieces(parts, boundary: boundary)
        #if canImport(FoundationNetworking)
        if let stream = try stream(pieces) { return .stream(stream) }
        #endif
        return .data(try assemble(pieces))
    }

    /// A stream of `pieces`, when they hold files and are larger than ``encodingMemoryThreshold``
    /// in all; nil otherwise, and when a file is not found or is no regular file (the in-memory
    /// path says why, as it always did).
    private static func stream(_ pieces: [Piece]) throws(NetworkError) -> MultipartBodyStream? {
        var total: UInt64 = 0
        var files: [URL] = []
        for piece in pieces {
            switch piece {
            case .bytes(let data):
                total += UInt64(data.count)
            case .file(let url):
                var status = stat()
                guard stat(url.path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
                total += UInt64(status.st_size)
                files.append(url)
            }
        }
        // Only bytes in memory: a stream of them would save nothing.
        guard !files.isEmpty, total > encodingMemoryThreshold else { return nil }
        var identities: [String: MultipartBodyStream.FileIdentity] = [:]
        for url in files {
            identities[url.path] = try MultipartBodyStream.FileIdentity(opening: url)
        }
        return MultipartBodyStream(pieces, files: identities)
    }

    /// A multipart body as a request carries it: in memory, or a stream.
    enum MultipartBody {
        case data(Data)
        case stream(MultipartBodyStream)
    }

    /// A stretch of a multipart body: bytes (the delimiters and parts' headers, a data part), or
    /// a file's contents. Endpoints compare their multipart bodies as these (a file by its path).
    enum Piece: Hashable {
        case bytes(Data)
        case file(URL)
    }

    /// `parts` with `boundary` as the stretches of their body, checked (see ``encode(_:boundary:)``).
    static func pieces(_ parts: [MultipartFormBodyPart], boundary: String) throws(NetworkError) -> [Piece] {
        if let problem = boundaryProblem(boundary) {
            throw .parameterEncoding(InvalidMultipartBoundary(boundary: boundary, problem: problem))
        }
        var pieces: [Piece] = []
        var head = Data()
        for (index, part) in parts.enumerated() {
            var fileName = part.fileName
            var mimeType = part.mimeType
            if case .file(let url) = part.source {
                // `Data(contentsOf:)` would fetch an http URL here, outside the transport, its
                // limits, timeouts and cancellation, and upload what came.
                guard url.isFileURL else {
                    throw .fileAccess(
                        path: MessageURL.text(url.absoluteString), reason: "multipart part \(index) (\(part.name.debugDescription)) is no file URL")
                }
                fileName = fileName ?? url.lastPathComponent
                mimeType = mimeType ?? "application/octet-stream"
            }
            if let mimeType, !HeaderValidation.isValidValue(mimeType) {
                throw .parameterEncoding(InvalidMultipartContentType(index: index, name: part.name, mimeType: mimeType))
            }
            head.append(Data("--\(boundary)\r\n".utf8))
            var disposition = "Content-Disposition: form-data; name=\"\(quoted(part.name))\""
            if let fileName { disposition += "; filename=\"\(quoted(fileName))\"" }
            head.append(Data("\(disposition)\r\n".utf8))
            if let mimeType { head.append(Data("Content-Type: \(mimeType)\r\n".utf8)) }
            head.append(Data("\r\n".utf8))
            switch part.source {
            case .data(let data):
                head.append(data)
            case .file(let url):
                pieces.append(.bytes(head))
                pieces.append(.file(url))
                head = Data()
            }
            head.append(Data("\r\n".utf8))
        }
        head.append(Data("--\(boundary)--\r\n".utf8))
        pieces.append(.bytes(head))
        return pieces
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

/// A multipart body read from its stretches: bytes in memory, and files opened when their turn
/// comes (one at a time) and read in the reader's buffer, so a large file is never held whole in
/// memory. Read once, by one reader at a time (the transports read a request's body stream into
/// a temporary file, and send that). Not `Sendable`, as no `InputStream` is.
final class MultipartBodyStream: InputStream {
    /// A file as the request was made: its size, and which file it is. The body sends that many
    /// of its bytes, from that file, or fails: a file that grows (a log being written) or was
    /// replaced (by a link to `/dev/zero`, a pipe) is no body of a known length.
    struct FileIdentity {
        let size: Int64
        let device: UInt64
        let inode: UInt64

        /// The identity of the regular file at `url`, opened (and closed) to know it can be read.
        init(opening url: URL) throws(NetworkError) {
            let fd = openFile(url.path)
            guard fd >= 0 else { throw .fileAccess(path: url.path, reason: "cannot read multipart file: \(String(cString: strerror(errno)))") }
            defer { closeFile(fd) }
            guard let identity = FileIdentity(fd) else {
                throw .fileAccess(path: url.path, reason: "cannot read multipart file: it is no regular file")
            }
            self = identity
        }

        /// The identity of the regular file open as `fd`; nil for anything else.
        init?(_ fd: Int32) {
            var status = stat()
            guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
            size = Int64(status.st_size)
            device = UInt64(truncatingIfNeeded: status.st_dev)
            inode = UInt64(truncatingIfNeeded: status.st_ino)
        }

        func isSameFile(as other: FileIdentity) -> Bool { device == other.device && inode == other.inode }
    }

    private let pieces: [MultipartFormData.Piece]
    /// Each file's identity when the request was made, by path.
    private let files: [String: FileIdentity]
    /// The stretch being read, and how far into it (bytes of data, or of the open file).
    private var index = 0
    private var offset = 0
    private var fd: Int32 = -1
    private var status: Stream.Status = .notOpen
    private var failure: (any Error)?

    /// A stream of `pieces`, each file of which `files` holds as the request was made (a file
    /// it does not hold is sent as it is found).
    init(_ pieces: [MultipartFormData.Piece], files: [String: FileIdentity] = [:]) {
        self.pieces = pieces
        self.files = files
        super.init(data: Data())
    }

    deinit {
        if fd >= 0 { closeFile(fd) }
    }

    override func open() {
        if status == .notOpen { status = .open }
    }

    override func close() {
        if fd >= 0 { closeFile(fd) }
        fd = -1
        status = .closed
    }

    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? { failure }
    override var hasBytesAvailable: Bool { status == .open }
    override func getBuffer(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>) -> Bool { false }

    /// Up to `len` bytes of the body; 0 at its end; -1 when a file cannot be read (``streamError``
    /// says which and why).
    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        guard status == .open else { return status == .atEnd ? 0 : -1 }
        // Asked for nothing: nothing given, and the body does not end here.
        guard len > 0 else { return 0 }
        var written = 0
        while written < len, index < pieces.count {
            switch pieces[index] {
            case .bytes(let data):
                let count = min(len - written, data.count - offset)
                if count > 0 {
                    data.withUnsafeBytes { bytes in
                        (buffer + written).update(from: bytes.bindMemory(to: UInt8.self).baseAddress! + offset, count: count)
                    }
                }
                offset += count
                written += count
                if offset == data.count { (index, offset) = (index + 1, 0) }
            case .file(let url):
                let expected = files[url.path]
                if fd < 0 {
                    fd = openFile(url.path)
                    if fd < 0 { return fail(url, "cannot read multipart file: \(String(cString: strerror(errno)))") }
                    if let expected, FileIdentity(fd).map(expected.isSameFile) != true {
                        return fail(url, "the multipart file changed after the request was made: it is another file now")
                    }
                }
                // No more than its size when the request was made; then one byte more, to know it holds none.
                let room = expected.map { Int(min(Int64(len - written), $0.size - Int64(offset))) } ?? len - written
                var probe: UInt8 = 0
                let got = room > 0 ? readFile(fd, buffer + written, room) : readFile(fd, &probe, 1)
                if got < 0 {
                    if errno == EINTR { continue }
                    return fail(url, "cannot read multipart file: \(String(cString: strerror(errno)))")
                }
                if let expected, room == 0, got > 0 {
                    return fail(url, "the multipart file changed after the request was made: it holds more than its \(expected.size) bytes")
                }
                if let expected, room > 0, got == 0 {
                    return fail(url, "the multipart file changed after the request was made: it ended after \(offset) of its \(expected.size) bytes")
                }
                if got == 0 {
                    closeFile(fd)
                    (fd, index, offset) = (-1, index + 1, 0)
                } else {
                    // What the file gave: the reader comes back for more.
                    offset += got
                    return written + got
                }
            }
        }
        if written == 0 { status = .atEnd }
        return written
    }

    private func fail(_ url: URL, _ reason: String) -> Int {
        failure = NetworkError.fileAccess(path: url.path, reason: reason)
        status = .error
        return -1
    }
}

// The POSIX calls the stream makes, by names its own methods (`open`, `read`, `close`) do not hide.
private func openFile(_ path: String) -> Int32 { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }
private func readFile(_ fd: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ count: Int) -> Int { read(fd, buffer, count) }
private func closeFile(_ fd: Int32) { _ = close(fd) }
