import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Logs requests and responses: `basic` (method, URL, status, duration, size), `headers`, or
/// `body`, to standard error, a file (appended, created with mode 0600) or the host's log sink,
/// optionally rendering each request as a cURL command.
///
/// Redaction is always on: values of `Authorization`, `Proxy-Authorization`, `Cookie`,
/// `Set-Cookie` and of configured headers and query parameters print as `<redacted>`, in
/// headers, URLs and the cURL form. Every value so redacted (and the values of configured host
/// store keys, e.g. tokens and signing secrets) is also scrubbed from bodies and anything else
/// the logger prints. At level `body`, JSON members, form fields and multipart parts named in `redactFields`
/// (passwords, tokens, client secrets by default) show as `<redacted>` too, and so do such
/// members and `name: value` arguments inside a JSON string value (a stringified payload, a
/// GraphQL query).
public struct LoggerPlugin: ExportablePlugin {
    /// The name manifests and bundles know this plugin by.
    public static var pluginName: String { "logger" }
    /// This plugin's version.
    public static var pluginVersion: String { "1.1.0" }
    /// One line saying what this plugin does (`plugin.json`'s `summary`, `pluginhost list --json`).
    public static var pluginSummary: String { "Logs requests and responses with secrets redacted" }
    /// The hooks this plugin implements (the others are not exported).
    public static var implementedHooks: Set<InterceptorHook> { [.willSend, .didReceive] }

    enum Level: Int {
        case off = 0
        case basic, headers, body
    }
    enum Output {
        case standardError
        case file(Int32)
        case host
    }

    static let alwaysRedacted: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]
    /// The body fields redacted unless `redactFields` says otherwise.
    static let defaultRedactedFields = [
        "password", "passwd", "secret", "client_secret", "token", "access_token", "refresh_token", "id_token", "api_key", "apikey",
        "private_key",
    ]

    let level: Level
    let output: Output
    let curl: Bool
    let redactedHeaders: Set<String>
    /// Names of the query parameters whose values URLs show as `<redacted>`, each as
    /// ``SecretNames/normalized(_:)`` gives it: matched as body fields are (`accessToken` is
    /// `access_token`; `X-Amz-Signature` ends with `signature`).
    let redactedQuery: Set<String>
    /// Names of JSON members and form fields whose values a body shows as `<redacted>`, each as
    /// ``SecretNames/normalized(_:)`` gives it.
    let redactedFields: Set<String>
    let secretKeys: [String]
    let maxBodyBytes: Int
    let host: any HostServices
    private let sink: Sink
    private let started = PerRequestState<(start: UInt64, secrets: [String])>()

    /// The log file's descriptor (closed with the plugin), and the lock that keeps lines whole.
    final class Sink: Sendable {
        private let writing = Locked(())
        let descriptor: Int32?
        init(descriptor: Int32?) { self.descriptor = descriptor }
        deinit { if let descriptor { close(descriptor) } }

        /// Runs `body` while no other line is being written.
        func exclusively(_ body: () -> Void) { writing.withLock { _ in body() } }
    }

    /// Reads the configuration (keys in this plugin's README); an unknown key or a bad value throws
    /// a `PluginConfigurationError` naming it.
    public init(configuration: PluginConfiguration, host: any HostServices) throws {
        try configuration.rejectUnknownKeys([
            "level", "output", "file", "curl", "redactHeaders", "redactQuery", "redactStoreKeys", "redactFields", "maxBodyBytes",
        ])
        switch try configuration.oneOf("level", ["off", "basic", "headers", "body"], default: "basic") {
        case "off": level = .off
        case "headers": level = .headers
        case "body": level = .body
        default: level = .basic
        }
        let output = try configuration.oneOf("output", ["stderr", "file", "host"], default: "stderr")
        if output != "file", try configuration.string("file") != nil {
            throw configuration.error("file is used only with output: file (output is \(output))")
        }
        switch output {
        case "file":
            guard let path = try configuration.string("file"), !path.isEmpty else {
                throw configuration.error("file must name a file when output is file")
            }
            let fd = try Self.openLogFile(path, configuration: configuration)
            self.output = .file(fd)
            sink = Sink(descriptor: fd)
        case "host":
            self.output = .host
            sink = Sink(descriptor: nil)
        default:
            self.output = .standardError
            sink = Sink(descriptor: nil)
        }
        curl = try configuration.bool("curl", default: false)
        let headers = try configuration.strings("redactHeaders")
        // A name that is no field name (`"X-Api-Key "`, `"X-Api-Key:"`) would match nothing.
        if let bad = headers.firstIndex(where: { !HeaderValidation.isValidName($0) }) {
            throw configuration.error("redactHeaders[\(bad)] \(headers[bad].debugDescription) is not a header field name")
        }
        redactedHeaders = Self.alwaysRedacted.union(headers.map { $0.lowercased() })
        // A list replaces the defaults: an entry that can match nothing (empty, white space at an
        // end, a control character anywhere) would turn redaction off unseen.
        func names(_ key: String, default defaults: [String], what: String, usable: (String) -> Bool) throws -> [String] {
            let names = try configuration.strings(key, default: defaults)
            if let bad = names.firstIndex(where: { !usable($0) }) {
                throw configuration.error("\(key)[\(bad)] \(names[bad].debugDescription) is not \(what)")
            }
            return names
        }
        // A name that may be matched: no white space at an end, no control character, and
        // something left once normalized (not only `_` and `-`).
        func matchable(_ name: String) -> Bool {
            guard let first = name.unicodeScalars.first, let last = name.unicodeScalars.last else { return false }
            return !first.properties.isWhitespace && !last.properties.isWhitespace && !name.unicodeScalars.contains { Self.isControl($0) }
                && !SecretNames.normalized(name).isEmpty
        }
        redactedQuery = Set(
            try names(
                "redactQuery",
                default: [
                    "token", "access_token", "refresh_token", "id_token", "client_secret", "api_key", "apikey", "sign", "sig", "signature",
                    "x-signature",
                    "password",
                ], what: "a parameter name", usable: matchable
            ).map(SecretNames.normalized))
        secretKeys = try names("redactStoreKeys", default: ["access_token", "signing_secret"], what: "a store key") { !$0.isEmpty }
        redactedFields = Set(
            try names("redactFields", default: Self.defaultRedactedFields, what: "a field name", usable: matchable).map(SecretNames.normalized))
        maxBodyBytes = try configuration.integer("maxBodyBytes", default: 4096, in: 0...(64 << 20))
        self.host = host
    }

    /// Opens (or creates, mode 0600) the log file for appending. Refuses a symlink (`O_NOFOLLOW`),
    /// and an existing file that is not a regular file, is owned by another user, or is readable
    /// or writable by group or others: a log holds request details another user must not read
    /// or forge.
    static func openLogFile(_ path: String, configuration: PluginConfiguration) throws -> Int32 {
        // O_NONBLOCK: a FIFO without a reader is refused at once (it blocked the plugin's creation
        // for good), one with a reader by the regular-file check below.
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP {
                throw configuration.error("file \(path.debugDescription) is a symbolic link; name the file itself")
            }
            if code == ENXIO {
                throw configuration.error("file \(path.debugDescription) is not a regular file")
            }
            throw configuration.error("file \(path.debugDescription) cannot be opened: \(String(cString: strerror(code)))")
        }
        var info = stat()
        let problem =
            fstat(fd, &info) != 0 ? "cannot be examined: \(String(cString: strerror(errno)))" : FileDescriptor.privacyProblem(info, .file)
        if let problem {
            close(fd)
            throw configuration.error("file \(path.debugDescription) \(problem)")
        }
        // A regular file: blocking writes, as any.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return fd
    }

    // MARK: Hooks

    /// At level `off` no hook runs at all.
    public var activeHooks: Set<InterceptorHook>? { level == .off ? [] : nil }

    /// Logs the request as sent (secrets redacted): its line, its fields and body at the levels
    /// that show them, and a cURL command when `curl` is on.
    public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {
        guard level != .off else { return }
        let headers = request.headers
        var secrets = secretKeys.compactMap { context.services.value(forKey: $0) }.filter { !$0.isEmpty }
        for header in headers where redactedHeaders.contains(header.name.lowercased()) { secrets += Self.secrets(in: header) }
        for item in request.queryItems where !item.value.isEmpty && SecretNames.matches(item.name, redactedQuery) {
            // Escaped too, as a body cut inside it may end with its start (`redactingCutSecret`).
            secrets.append(item.value)
            secrets.append(RFC3986.escape(item.value))
        }
        // A password in the URL goes as Basic credentials (libcurl makes the field itself); a
        // user without one (`https://key@api…`, `https://key:@api…`) is the credential itself.
        if let (user, password) = Self.userInfo(of: request.url) {
            let plain = (password.removingPercentEncoding ?? password, user.removingPercentEncoding ?? user)
            secrets += [Data("\(plain.1):\(plain.0)".utf8).base64EncodedString()]
            secrets += password.isEmpty ? [user, plain.1] : [password, plain.0]
        }
        // A body's redacted fields: shown as `<redacted>`, and their values scrubbed from the rest
        // (a server that echoes the form back).
        var body: String?
        var curlBody: String?
        if level == .body, let bytes = request.body, !bytes.isEmpty {
            let contentType = headers.first { HTTPHeader.namesEqual($0.name, "Content-Type") }?.value
            let shown = Array(bytes.prefix(maxBodyBytes))
            var text = redactedText(shown: shown, count: bytes.count, contentType: contentType, found: &secrets)
            if shown.count < bytes.count { text = text.map { Self.redactingCutSecret($0, secrets: secrets) } }
            body = Self.describe(text, shown: shown.count, count: bytes.count)
            // Whole and text: the cURL form sends it (redacted once, for both).
            if curl, shown.count == bytes.count { curlBody = text }
        }
        // What the URL line shows redacted (a parameter inside another's value, a fragment's, a
        // `+` read as a space) is scrubbed from the rest too: a server may echo the query.
        var inURL: [String] = []
        let url = redact(url: request.url, found: &inURL)
        secrets = Self.ordered(secrets + inURL)
        started.set((context.services.monotonicNanoseconds(), secrets), for: context.requestID)
        var lines = ["→ \(request.method) \(url) #\(context.requestID)" + (context.attempt > 1 ? " attempt \(context.attempt)" : "")]
        if level.rawValue >= Level.headers.rawValue {
            lines += headers.map { "  \($0.name): \(redact(header: $0))" }
        }
        if let body { lines.append("  " + body) }
        if curl { lines.append("  " + curlCommand(request, url: url, body: curlBody, secrets: secrets)) }
        write(lines, secrets: secrets)
    }

    /// Logs the response or failure (secrets redacted), with the time the attempt took.
    public func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {
        guard level != .off else { return }
        let entry = started.remove(context.requestID)
        var secrets = entry?.secrets ?? []
        let elapsed = entry.map { Double(context.services.monotonicNanoseconds() &- $0.start) / 1_000_000 }
        let duration = elapsed.map { String(format: "%.1f ms", $0) } ?? "-"
        let path = context.target.path
        switch result {
        case .failure(let failure):
            write(["← failed \(failure.kind.rawValue) \(path) #\(context.requestID) (\(duration)): \(failure.message)"], secrets: secrets)
        case .response(let response):
            // Only what is shown is copied: a large body is never buffered here.
            let body = response.bodyPrefix(maxBytes: level == .body ? maxBodyBytes : 0)
            var lines = ["← \(response.statusCode) \(path) #\(context.requestID) (\(duration), \(body.count) bytes)"]
            var contentType: String?
            if level.rawValue >= Level.headers.rawValue || level == .body {
                let fields = response.headers
                contentType = fields.first { HTTPHeader.namesEqual($0.name, "Content-Type") }?.value
                // The response's own secrets (a `Set-Cookie` value) are scrubbed from its body too.
                var own = fields.filter { redactedHeaders.contains($0.name.lowercased()) }.flatMap { Self.secrets(in: $0) }
                // And a redacted parameter of the URL it points to (a body that repeats it).
                for field in fields where HTTPHeader.namesEqual(field.name, "Location") || HTTPHeader.namesEqual(field.name, "Content-Location") {
                    _ = redact(url: field.value, found: &own)
                }
                // And what the request carried that no hook saw (the transport's cookie jar's
                // `Cookie`, the host's answer to a challenge): a server may echo it back.
                if level == .body, let sent = response.requestHeaders {
                    for field in sent where redactedHeaders.contains(field.name.lowercased()) { own += Self.secrets(in: field) }
                }
                if !own.isEmpty { secrets = Self.ordered(secrets + own) }
                if level.rawValue >= Level.headers.rawValue { lines += fields.map { "  \($0.name): \(redact(header: $0))" } }
            }
            if level == .body, body.count > 0 {
                // The response's own field values are redacted where they are (scrubbing them from
                // every line again would cost a pass over the body per value, and spare nothing).
                var found: [String] = []
                var text = redactedText(shown: body.bytes, count: body.count, contentType: contentType, found: &found)
                if body.bytes.count < body.count { text = text.map { Self.redactingCutSecret($0, secrets: secrets) } }
                lines.append("  " + Self.describe(text, shown: body.bytes.count, count: body.count))
            }
            write(lines, secrets: secrets)
        }
    }

    // MARK: Rendering

    func redact(header: HTTPHeader) -> String {
        if redactedHeaders.contains(header.name.lowercased()) { return "<redacted>" }
        // A URL a response points to (a redirect's, an OAuth callback's) is redacted as a request's.
        if HTTPHeader.namesEqual(header.name, "Location") || HTTPHeader.namesEqual(header.name, "Content-Location") {
            return redact(url: header.value)
        }
        return header.value
    }

    /// The URL with its password and the values of redacted query parameters replaced, in the
    /// query and in the fragment (an OAuth implicit grant puts `access_token` there).
    func redact(url: String) -> String {
        var found: [String] = []
        return redact(url: url, found: &found)
    }

    /// ``redact(url:)``, appending the values of the redacted parameters to `found` (as written
    /// and decoded: a response's `Location` may be repeated in its body).
    func redact(url: String, found: inout [String]) -> String {
        let url = URLParts.redactingUserInfo(url)
        let fragmentStart = url.firstIndex(of: "#")
        let fragment = fragmentStart.map { url[url.index(after: $0)...] }
        let beforeFragment = fragmentStart.map { url[..<$0] } ?? url[...]
        var result: String
        if let questionMark = beforeFragment.firstIndex(of: "?") {
            result =
                beforeFragment[..<questionMark] + "?"
                + redact(parameters: beforeFragment[beforeFragment.index(after: questionMark)...], found: &found)
        } else {
            result = String(beforeFragment)
        }
        if let fragment { result += "#" + redact(parameters: fragment, found: &found) }
        return result
    }

    /// `name=value&…` with the values of redacted names replaced.
    func redact(parameters: Substring, found: inout [String]) -> String {
        parameters.split(separator: "&", omittingEmptySubsequences: false).map { redact(pair: $0, found: &found) }.joined(separator: "&")
    }

    /// One `name=value`, its value replaced when the name is redacted. A route may come before
    /// the name (a fragment's `/callback?access_token=…`): the name starts after its last `?`. A
    /// value may hold a URL with a query (`next=/home?access_token=…`): its parameter is looked at
    /// too. (A `?` in a value hid every parameter before it.) One pass: each `?` of a value
    /// starts the next parameter looked at (a call within a call per `?` overflowed the stack).
    func redact(pair: Substring, found: inout [String]) -> String {
        var shown = ""
        var rest = pair
        while let equals = rest.firstIndex(of: "=") {
            let head = rest[..<equals]
            let nameStart = head.lastIndex(of: "?").map { head.index(after: $0) } ?? head.startIndex
            let name = String(head[nameStart...])
            let value = rest[rest.index(after: equals)...]
            if SecretNames.matches(name.removingPercentEncoding ?? name, redactedQuery) {
                found += [String(value), value.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(value)]
                return shown + head + "=<redacted>"
            }
            guard let mark = value.firstIndex(of: "?") else { return shown + head + "=" + redact(encoded: value, found: &found) }
            shown += head + "=" + redact(encoded: value[..<mark], found: &found) + "?"
            rest = value[value.index(after: mark)...]
        }
        return shown + rest
    }

    /// A value holding a query percent-encoded, as a redirect URL given as a parameter is
    /// (`next=%2Fcb%3Faccess_token%3D…`): its parameters, separated by an encoded `?`, `&` or `#`,
    /// are looked at as written, and a redacted one's value replaced (it was shown, and not
    /// scrubbed). One pass over the bytes: a server's `Location` of many separators costs its length.
    func redact(encoded value: Substring, found: inout [String]) -> String {
        let bytes = Array(value.utf8)
        /// The encoded byte at `index` (`%XY`, either case), if any.
        func encoded(at index: Int) -> UInt8? {
            guard index + 2 < bytes.count, bytes[index] == UInt8(ascii: "%"),
                let high = URLParts.hexValue(bytes[index + 1]), let low = URLParts.hexValue(bytes[index + 2])
            else { return nil }
            return high << 4 | low
        }
        guard bytes.indices.contains(where: { encoded(at: $0) == UInt8(ascii: "=") }) else { return String(value) }
        var shown: [UInt8] = []
        shown.reserveCapacity(bytes.count)
        var start = 0
        var index = 0
        /// Appends the parameter `bytes[start..<end]`, its value replaced when its name is redacted.
        func segment(to end: Int) {
            var equals = start
            while equals < end, encoded(at: equals) != UInt8(ascii: "=") { equals += 1 }
            if equals < end {
                let name = String(decoding: bytes[start..<equals], as: UTF8.self)
                if SecretNames.matches(name.removingPercentEncoding ?? name, redactedQuery) {
                    let secret = String(decoding: bytes[(equals + 3)..<end], as: UTF8.self)
                    let once = secret.removingPercentEncoding ?? secret
                    found += [secret, once, once.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? once]
                    shown += bytes[start..<(equals + 3)]
                    shown += Array("<redacted>".utf8)
                    return
                }
            }
            shown += bytes[start..<end]
        }
        while index < bytes.count {
            if let byte = encoded(at: index), byte == UInt8(ascii: "?") || byte == UInt8(ascii: "&") || byte == UInt8(ascii: "#") {
                segment(to: index)
                shown += bytes[index..<(index + 3)]
                index += 3
                start = index
            } else {
                index += 1
            }
        }
        segment(to: bytes.count)
        return String(decoding: shown, as: UTF8.self)
    }

    /// The user and password of a URL (`user:password@host`), as written (percent-encoded); the
    /// password empty without one (`key@host`); nil without user information.
    static func userInfo(of url: String) -> (user: String, password: String)? {
        guard let range = URLParts.userInfoRange(of: url), !range.isEmpty else { return nil }
        let info = url[range]
        guard let colon = info.firstIndex(of: ":") else { return (String(info), "") }
        return (String(info[..<colon]), String(info[info.index(after: colon)...]))
    }

    /// The secrets in a redacted field: its value, the credentials after a scheme
    /// (`Bearer …`), and each cookie's value (`Cookie: a=1; b=2`, `Set-Cookie: a=1; Path=/`),
    /// which a server may echo alone.
    static func secrets(in header: HTTPHeader) -> [String] {
        var found = [header.value]
        if let space = header.value.firstIndex(of: " ") { found.append(String(header.value[header.value.index(after: space)...])) }
        let name = header.name.lowercased()
        if name == "cookie" || name == "set-cookie" {
            let pairs = header.value.split(separator: ";")
            for pair in name == "cookie" ? pairs[...] : pairs.prefix(1) {
                // A value of 8 characters or more: a session, not a preference (`dark`, `200`)
                // whose every mention would go.
                guard let equals = pair.firstIndex(of: "=") else { continue }
                let value = String(pair[pair.index(after: equals)...]).trimmingCharacters(in: .whitespaces)
                // A quoted value (RFC 6265's `"…"`): a server that parses the cookie echoes it bare.
                let bare = value.count > 2 && value.hasPrefix("\"") && value.hasSuffix("\"") ? String(value.dropFirst().dropLast()) : value
                if bare.count >= 8 { found += bare == value ? [value] : [value, bare] }
            }
        }
        return found
    }

    /// Secrets worth scrubbing (three characters or more), each also as a JSON string writes it
    /// (a server that echoes a field in JSON escapes its quotes and backslashes, and some its
    /// slashes), longest first.
    static func ordered(_ secrets: [String]) -> [String] {
        var all = Set<String>()
        for secret in secrets where secret.count >= 3 {
            all.insert(secret)
            guard secret.utf8.contains(where: { $0 == 0x22 || $0 == 0x5C || $0 == 0x2F || $0 < 0x20 || $0 >= 0x80 }) else { continue }
            // As a JSON writer escapes it: non-ASCII as `\u…` (Python's json.dumps) or as it is
            // (Node, Go, Foundation); each with `/` escaped too (PHP, Foundation).
            for json in [FieldNames.asciiJSON(secret), FieldNames.escapedJSON(secret)] {
                all.insert(json)
                all.insert(json.replacingOccurrences(of: "/", with: "\\/"))
            }
        }
        return all.sorted { $0.count != $1.count ? $0.count > $1.count : $0 < $1 }
    }

    /// `line` as one line of the log: a line break in it is indented under it (so every line of
    /// the log begins with `→`, `←` or two spaces), a carriage return and other control
    /// characters escaped (`\r`, `\u{1B}`): a body cannot forge a line, or write to a terminal.
    static func oneEntry(_ line: String) -> String {
        guard line.unicodeScalars.contains(where: { $0 != "\t" && isControl($0) }) else { return line }
        var out = ""
        for scalar in line.unicodeScalars {
            switch scalar {
            case "\n": out += "\n  "
            case "\r": out += "\\r"
            case "\t": out.unicodeScalars.append(scalar)
            case _ where isControl(scalar): out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// C0 and C1 controls, DEL, and the Unicode line and paragraph separators: what a terminal
    /// acts on or a viewer breaks a line at.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    /// `shown`, the first bytes of a body of `count` bytes, as text, with the values of
    /// ``redactedFields`` redacted (their values appended to `found`); nil when it is not UTF-8.
    func redactedText(shown: [UInt8], count: Int, contentType: String?, found: inout [String]) -> String? {
        // A cut may split a character: try dropping up to three trailing bytes.
        let candidates = shown.count < count ? (0...3).map { shown.dropLast($0) } : [shown[...]]
        guard let text = candidates.lazy.compactMap({ String(bytes: $0, encoding: .utf8) }).first else { return nil }
        return redactFields(in: text, contentType: contentType, whole: shown.count == count, found: &found)
    }

    /// How a body of `count` bytes shows in the log: the text of its first `shown` bytes
    /// (``redactedText(shown:count:contentType:found:)``), marked when cut, or its size alone.
    static func describe(_ text: String?, shown: Int, count: Int) -> String {
        guard let text else { return "<\(count) bytes, not UTF-8>" }
        return shown < count ? "\(text)… (truncated, \(count) bytes in all)" : text
    }

    /// `text`, a body (or its first part), with the values of ``redactedFields`` as `<redacted>`:
    /// the members of a JSON body at any depth, the fields of a form, the parts of a
    /// `multipart/form-data` body (by its content type's boundary). JSON when the content type
    /// says so (`json`, `+json`) or, with none, when the body begins with `{` or `[`; a form when it
    /// says `application/x-www-form-urlencoded` or, with none, when the body is one line with `=`.
    /// Each whole string value redacted (as written, and decoded) is appended to `found`; not
    /// one the end of a cut `text` (`whole` false) cuts.
    func redactFields(in text: String, contentType: String?, whole: Bool, found: inout [String]) -> String {
        guard !redactedFields.isEmpty else { return text }
        let type = contentType?.lowercased()
        // Read by its media type (a parameter, such as a boundary, may hold `json`).
        let mediaType = type.map { String($0.prefix { $0 != ";" }) }
        if let contentType, mediaType?.hasPrefix("multipart/form-data") == true,
            let boundary = Self.headerParameter("boundary", in: contentType[...]), !boundary.isEmpty
        {
            return Self.redactMultipartParts(in: text, boundary: boundary, names: redactedFields, whole: whole, found: &found)
        }
        let start = text.utf8.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
        if mediaType?.contains("json") ?? (start == UInt8(ascii: "{") || start == UInt8(ascii: "[")) {
            // A GraphQL request's (or its echo's) variables passed as secrets are secrets by any name.
            let names =
                text.utf8.contains(UInt8(ascii: "$")) ? redactedFields.union(Self.secretVariables(in: text, names: redactedFields)) : redactedFields
            return Self.redactJSONMembers(in: text, names: names, found: &found)
        }
        let form =
            mediaType.map { $0.hasPrefix("application/x-www-form-urlencoded") }
            ?? (text.contains("=") && !text.contains(where: { $0 == " " || $0 == "\n" || $0 == "\r" }))
        return form ? Self.redactFormFields(in: text, names: redactedFields, whole: whole, found: &found) : text
    }

    /// A `multipart/form-data` body (RFC 7578) with the contents of the parts `names` names (by
    /// the `name` of their `Content-Disposition`, matched as a form field's is) as `<redacted>`,
    /// their header fields and every other part as they were. A delimiter is `--` and the boundary
    /// at the start of a line (RFC 2046 §5.1.1: a value holding them elsewhere is no delimiter);
    /// lines may end in CRLF or, in a body made by hand, LF. The part a cut text (`whole` false)
    /// ends in is redacted to the end of the text, and its value not collected in `found`. Read as
    /// bytes: Swift's `Character` takes CRLF as one, which a search for LF would not find.
    static func redactMultipartParts(in text: String, boundary: String, names: Set<String>, whole: Bool, found: inout [String]) -> String {
        let bytes = Array(text.utf8)
        let dashBoundary = Array(("--" + boundary).utf8)
        let lf = UInt8(ascii: "\n")
        let cr = UInt8(ascii: "\r")
        func matches(_ pattern: [UInt8], at index: Int) -> Bool {
            index + pattern.count <= bytes.count && bytes[index..<index + pattern.count].elementsEqual(pattern)
        }
        var delimiters: [Int] = []
        for index in bytes.indices where (index == 0 || bytes[index - 1] == lf) && matches(dashBoundary, at: index) {
            delimiters.append(index)
        }
        var out = Array(bytes[0..<(delimiters.first ?? bytes.count)])
        for (number, start) in delimiters.enumerated() {
            let pieceStart = start + dashBoundary.count
            let end = number + 1 < delimiters.count ? delimiters[number + 1] : bytes.count
            out += dashBoundary
            // The part's header fields end at the first empty line.
            var headersEnd: Int?
            var index = pieceStart
            while headersEnd == nil, index < end {
                if bytes[index] == lf {
                    if index + 1 < end, bytes[index + 1] == lf {
                        headersEnd = index + 2
                    } else if index + 2 < end, bytes[index + 1] == cr, bytes[index + 2] == lf {
                        headersEnd = index + 3
                    }
                }
                index += 1
            }
            guard let headersEnd, let name = partName(String(decoding: bytes[pieceStart..<headersEnd], as: UTF8.self)),
                SecretNames.matches(name, names)
            else {
                out += bytes[pieceStart..<end]
                continue
            }
            out += bytes[pieceStart..<headersEnd]
            out += Array("<redacted>".utf8)
            // Cut short: the rest of the text is this part's.
            if !whole, number == delimiters.count - 1 { continue }
            // The line break before the next delimiter is the delimiter's.
            var contentEnd = end
            if contentEnd > headersEnd, bytes[contentEnd - 1] == lf {
                contentEnd -= 1
                if contentEnd > headersEnd, bytes[contentEnd - 1] == cr { contentEnd -= 1 }
            }
            let value = String(decoding: bytes[headersEnd..<contentEnd], as: UTF8.self)
            if !value.isEmpty { found += [value, FieldNames.asciiJSON(value)] }
            out += bytes[contentEnd..<end]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The `name` of a multipart part's `Content-Disposition` (`form-data; name="password"`),
    /// percent-decoded as browsers encode it; nil when the part has none.
    static func partName(_ headers: String) -> String? {
        for line in headers.components(separatedBy: .newlines) {
            guard let colon = line.firstIndex(of: ":"),
                line[..<colon].trimmingCharacters(in: .whitespaces).lowercased() == "content-disposition",
                let name = headerParameter("name", in: line[line.index(after: colon)...])
            else { continue }
            return name.removingPercentEncoding ?? name
        }
        return nil
    }

    /// The value of the parameter `name` (case-insensitive) of a header field's value
    /// (`form-data; name="a;b"; filename=x`), its quotes and quoted-pairs undone (RFC 9110
    /// §5.6.4); nil when it is not there.
    static func headerParameter(_ name: String, in value: Substring) -> String? {
        var index = value.startIndex
        /// Reads up to the next `;` outside quotes; the text read, unquoted.
        func readItem() -> (key: String, value: String?) {
            var key = ""
            var text: String?
            var quoted = false
            while index < value.endIndex {
                let character = value[index]
                index = value.index(after: index)
                if quoted {
                    if character == "\\", index < value.endIndex {
                        text?.append(value[index])
                        index = value.index(after: index)
                    } else if character == "\"" {
                        quoted = false
                    } else {
                        text?.append(character)
                    }
                } else if character == ";" {
                    break
                } else if text == nil, character == "=" {
                    text = ""
                } else if text == nil {
                    key.append(character)
                } else if text?.isEmpty == true, character == " " || character == "\t" {
                    continue  // before the value
                } else if character == "\"", text?.isEmpty == true {
                    quoted = true
                } else {
                    text?.append(character)
                }
            }
            return (key.trimmingCharacters(in: .whitespaces), text.map { quoted ? $0 : $0.trimmingCharacters(in: .whitespaces) })
        }
        _ = readItem()  // the value itself (`multipart/form-data`, `form-data`)
        while index < value.endIndex {
            let item = readItem()
            if item.key.lowercased() == name, let text = item.value { return text }
        }
        return nil
    }

    /// A form body (`a=1&password=x`) with the values of `names` (decoded, case-insensitive) as
    /// `<redacted>`.
    static func redactFormFields(in text: String, names: Set<String>, whole: Bool = true, found: inout [String]) -> String {
        let pairs = text.split(separator: "&", omittingEmptySubsequences: false)
        return pairs.enumerated().map { index, pair -> String in
            guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
            let name = pair[..<equals]
            let decoded = name.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(name)
            guard SecretNames.matches(decoded, names) else { return String(pair) }
            // The last value of a cut body may be cut too: redacted here alone (its start,
            // scrubbed everywhere, would maim the log and leave the rest in an echo).
            if whole || index < pairs.count - 1 {
                let value = String(pair[pair.index(after: equals)...])
                found += [value, value.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? value]
            }
            return name + "=<redacted>"
        }
        .joined(separator: "&")
    }

    /// JSON text (or its first part: a string cut short runs to the end) with the values of the
    /// members named in `names` (case-insensitive, at any depth) as `"<redacted>"`: a string's
    /// or a number's, `true`, `false`, `null`, and an object or an array whole; the members of
    /// other objects are looked at by name in turn.
    static func redactJSONMembers(in text: String, names: Set<String>, found: inout [String], depth: Int = 0) -> String {
        let bytes = Array(text.utf8)
        let quote = UInt8(ascii: "\"")
        let count = bytes.count
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        /// The index past the string that begins at `start` (its closing quote), or `count` when
        /// the text ends first (`closed` false: an escaped quote at the very end closes nothing).
        func stringEnd(_ start: Int) -> (end: Int, closed: Bool) {
            var index = start + 1
            while index < count {
                if bytes[index] == UInt8(ascii: "\\") {
                    index += 2
                } else if bytes[index] == quote {
                    return (index + 1, true)
                } else {
                    index += 1
                }
            }
            return (count, false)
        }
        /// A string's contents, escapes resolved where they can be.
        func decoded(_ raw: ArraySlice<UInt8>) -> String {
            guard raw.contains(UInt8(ascii: "\\")) else { return String(decoding: raw, as: UTF8.self) }
            return FieldNames.unescapedJSON(raw)
        }
        var out: [UInt8] = []
        out.reserveCapacity(count)
        var index = 0
        while index < count {
            guard bytes[index] == quote else {
                out.append(bytes[index])
                index += 1
                continue
            }
            let (end, closed) = stringEnd(index)
            var next = end
            while next < count, isSpace(bytes[next]) { next += 1 }
            guard next < count, bytes[next] == UInt8(ascii: ":"), end - index >= 2 else {
                // A value: one that holds a JSON document (an envelope's stringified payload) or
                // `name: value` arguments (a GraphQL query's) has their secrets redacted too, a
                // string the text's end cuts as far as it goes.
                let contents = decoded(bytes[(index + 1)..<(closed ? end - 1 : end)])
                if end - index > (closed ? 2 : 1), let embedded = redactEmbedded(contents, names: names, found: &found, depth: depth + 1) {
                    // Re-escaped, a redacted string grows by its quotes' escapes, at each level of
                    // nesting again: one that would more than double is redacted whole.
                    let written = "\"" + FieldNames.escapedJSON(embedded) + (closed ? "\"" : "")
                    out += Array((written.utf8.count <= 2 * (end - index) + 64 ? written : (closed ? "\"<redacted>\"" : "\"<redacted>")).utf8)
                } else {
                    out += bytes[index..<end]
                }
                index = end
                continue
            }
            // A member's name: is its value redacted?
            out += bytes[index..<end]
            let name = decoded(bytes[(index + 1)..<(end - 1)])
            out += bytes[end...next]
            next += 1
            while next < count, isSpace(bytes[next]) {
                out.append(bytes[next])
                next += 1
            }
            index = next
            guard SecretNames.matches(name, names), next < count else { continue }
            var valueEnd = next
            if bytes[next] == UInt8(ascii: "{") || bytes[next] == UInt8(ascii: "[") {
                // An object or an array under a secret's name (`"password": {"old": …, "new": …}`,
                // `"password": ["…"]`) is the secret's: redacted whole, its strings scrubbed elsewhere.
                var depth = 0
                var strings: [String] = []
                while valueEnd < count {
                    let byte = bytes[valueEnd]
                    if byte == quote {
                        let string = stringEnd(valueEnd)
                        var after = string.end
                        while after < count, isSpace(bytes[after]) { after += 1 }
                        // A value, not a member's name (names are no secrets: scrubbed, they maim the log).
                        if string.closed, after == count || bytes[after] != UInt8(ascii: ":") {
                            let raw = bytes[(valueEnd + 1)..<(string.end - 1)]
                            let value = decoded(raw)
                            strings += [String(decoding: raw, as: UTF8.self), value, FieldNames.asciiJSON(value)]
                        }
                        valueEnd = string.end
                        continue
                    }
                    valueEnd += 1
                    if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { depth += 1 }
                    if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
                        depth -= 1
                        if depth == 0 { break }
                    }
                }
                // Cut short (the shown part ends inside it): redacted to the end, nothing scrubbed.
                if depth == 0 { found += strings }
            } else if bytes[next] == quote {
                let string = stringEnd(next)
                valueEnd = string.end
                // Only a whole string is a value to scrub elsewhere: a number, `true`, `false` or
                // `null` is redacted here alone (scrubbing `null` everywhere would maim the log),
                // and so is a string the shown part cuts (its start alone would leave the rest).
                if string.closed {
                    let raw = bytes[(next + 1)..<(valueEnd - 1)]
                    let value = decoded(raw)
                    found += [String(decoding: raw, as: UTF8.self), value, FieldNames.asciiJSON(value)]
                }
            } else {
                while valueEnd < count, !isSpace(bytes[valueEnd]),
                    ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]")].contains(bytes[valueEnd])
                {
                    valueEnd += 1
                }
            }
            out += Array("\"<redacted>\"".utf8)
            index = valueEnd
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// How deep strings holding JSON are looked into (a string in a string in a body is 2): a
    /// string deeper than this that holds a `:` is redacted whole (each level is decoded anew,
    /// and a body can nest hundreds).
    static let maxEmbeddingDepth = 8

    /// A JSON string value's text with its secrets redacted, nil when it holds none: a JSON
    /// document in it (`"{\"password\": \"…\"}"`) as a body's (``redactJSONMembers(in:names:found:depth:)``,
    /// at any depth of such nesting up to ``maxEmbeddingDepth``), and `name: value` arguments
    /// in it or around such a document (a GraphQL query's `login(password: "…")`, a shorthand
    /// query `{ me(token: "…") { id } }`: ``redactArguments(in:names:found:)``). Only a text with a
    /// `:` is looked at.
    static func redactEmbedded(_ text: String, names: Set<String>, found: inout [String], depth: Int) -> String? {
        guard text.utf8.contains(UInt8(ascii: ":")) else { return nil }
        guard depth <= maxEmbeddingDepth else { return "<redacted>" }
        var inner: [String] = []
        let first = text.utf8.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
        var redacted = text
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
            redacted = redactJSONMembers(in: text, names: names, found: &inner, depth: depth)
        }
        redacted = redactArguments(in: redacted, names: names, found: &inner)
        guard redacted != text else { return nil }
        found += inner
        return redacted
    }

    /// The width of the space at `index` of `bytes`: 1 for a space, tab or line break, 2 for
    /// `\n`, `\t` or `\r` (a text still JSON-escaped), 0 for anything else.
    static func spaceWidth(in bytes: [UInt8], at index: Int) -> Int {
        let byte = bytes[index]
        if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { return 1 }
        if byte == UInt8(ascii: "\\"), index + 1 < bytes.count,
            [UInt8(ascii: "n"), UInt8(ascii: "t"), UInt8(ascii: "r")].contains(bytes[index + 1])
        {
            return 2
        }
        return 0
    }

    /// The HTTP authentication schemes a secret's bare value may start with (IANA's registry,
    /// and NTLM, MAC, Token and AWS's in common use): the words after the scheme are the secret.
    static let authenticationSchemes: Set<String> = [
        "basic", "bearer", "digest", "dpop", "hoba", "mutual", "negotiate", "ntlm", "oauth", "token", "mac", "aws4-hmac-sha256", "gnap",
        "privatetoken",
        "scram-sha-1", "scram-sha-256", "vapid", "concealed",
    ]

    /// `text` (not JSON: a GraphQL query, a line of a log) with the value after each `name:`
    /// whose name is one of `names` as `"<redacted>"` (not a `$variable`'s definition): a quoted
    /// string (`"…"`, `"""…"""`, `'…'`: one never closed is redacted to the end), an object or a
    /// list whole (`{old: "…", new: "…"}`), or a bare value up to a space or `,`, `)`, `}`, `]`
    /// (`pin: 1234`, `token: ab12/CD+e==`), with the credentials after an authentication scheme
    /// (`token: Bearer eyJ…`) and each `name=value` parameter after a `,` (`Digest
    /// username="ann", response="…"`). A variable the text defines (`password: $pw` beside
    /// `$pw: String!`) is no value and stays; a `$` before no name (`$3cr3t`), before more than
    /// a name (`$pw!x`), or before one not defined (prose's `password: $Hunter2`) is a value. An
    /// escaped quote (`\"`: the text is still JSON-escaped) is left alone. Each whole quoted
    /// string is appended to `found` as written, decoded, and with every character past ASCII
    /// escaped (as a JSON echo writes it).
    static func redactArguments(in text: String, names: Set<String>, found: inout [String]) -> String {
        let bytes = Array(text.utf8)
        let count = bytes.count
        let quote = UInt8(ascii: "\"")
        let apostrophe = UInt8(ascii: "'")
        let backslash = UInt8(ascii: "\\")
        func isNameByte(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        /// The index past the string quoted by `mark` that begins at `start`, and whether it closed.
        func stringEnd(_ start: Int, _ mark: UInt8) -> (end: Int, closed: Bool) {
            if mark == quote, start + 2 < count, bytes[start + 1] == quote, bytes[start + 2] == quote {
                // A block string: to the next `"""` not escaped (`\"""`).
                var index = start + 3
                while index + 2 < count {
                    if bytes[index] == backslash {
                        index += bytes[index + 1] == quote ? 4 : 1
                    } else if bytes[index] == quote, bytes[index + 1] == quote, bytes[index + 2] == quote {
                        return (index + 3, true)
                    } else {
                        index += 1
                    }
                }
                return (count, false)
            }
            var index = start + 1
            while index < count, bytes[index] != mark { index += bytes[index] == backslash ? 2 : 1 }
            return index < count ? (index + 1, true) : (count, false)
        }
        /// Whether `byte` ends a bare value (besides a space).
        func endsValue(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: ",") || byte == UInt8(ascii: ")") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]")
        }
        /// The index past a bare value that begins at `start`: up to a space (`\n`, `\t` too) or
        /// `,`, `)`, `}`, `]`; a quoted string right after a `=` in it (a scheme's parameter,
        /// `response="a b"`, or `response=\"a b\"` while still JSON-escaped) is whole. (A quote
        /// elsewhere is a byte like another: one left unpaired would take the value to the end.)
        func bareEnd(_ start: Int) -> Int {
            var index = start
            while index < count, Self.spaceWidth(in: bytes, at: index) == 0 {
                let byte = bytes[index]
                if endsValue(byte) { break }
                let afterEquals = index > start && bytes[index - 1] == UInt8(ascii: "=")
                if byte == quote, afterEquals {
                    index = stringEnd(index, quote).end
                } else if byte == backslash, afterEquals, index + 1 < count, bytes[index + 1] == quote {
                    // To the next escaped quote, past it.
                    index += 2
                    while index + 1 < count, !(bytes[index] == backslash && bytes[index + 1] == quote) { index += 1 }
                    index = min(index + 2, count)
                } else {
                    index += 1
                }
            }
            return index
        }
        /// The end of the GraphQL name (a letter or `_`, then letters, digits and `_`) after the
        /// `$` at `dollar`, or nil when none follows it.
        func variableNameEnd(_ dollar: Int) -> Int? {
            func isLetter(_ byte: UInt8) -> Bool { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || byte == UInt8(ascii: "_") }
            guard dollar + 1 < count, isLetter(bytes[dollar + 1]) else { return nil }
            var end = dollar + 2
            while end < count, isLetter(bytes[end]) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[end]) { end += 1 }
            return end
        }
        /// The variables the text defines (`($pw: String!)`): one pass, before the scan.
        var defined: Set<ArraySlice<UInt8>> = []
        var search = 0
        while let dollar = bytes[search...].firstIndex(of: UInt8(ascii: "$")) {
            search = dollar + 1
            guard let end = variableNameEnd(dollar) else { continue }
            var colon = end
            while colon < count, isSpace(bytes[colon]) { colon += 1 }
            if colon < count, bytes[colon] == UInt8(ascii: ":") { defined.insert(bytes[(dollar + 1)..<end]) }
            search = end
        }
        /// Whether a variable the text defines (`$pw`) begins at `start` and ends where a value
        /// can: a `$` before no name (`$3cr3t`), one before more than a name (`$pw!x`), or one the
        /// document does not define (prose's `password: $Hunter2`), is a value.
        func isVariable(_ start: Int) -> Bool {
            guard bytes[start] == UInt8(ascii: "$"), let end = variableNameEnd(start), defined.contains(bytes[(start + 1)..<end]) else {
                return false
            }
            return end == count || isSpace(bytes[end]) || bytes[end] == backslash || endsValue(bytes[end])
        }
        func addFound(_ raw: ArraySlice<UInt8>) {
            let written = String(decoding: raw, as: UTF8.self)
            guard !written.isEmpty else { return }
            let value = FieldNames.unescapedJSON(raw)
            found += [written, value, FieldNames.asciiJSON(value)]
        }
        var out: [UInt8] = []
        out.reserveCapacity(count)
        var index = 0
        while index < count {
            guard isNameByte(bytes[index]) else {
                out.append(bytes[index])
                index += 1
                continue
            }
            var nameEnd = index
            while nameEnd < count, isNameByte(bytes[nameEnd]) { nameEnd += 1 }
            out += bytes[index..<nameEnd]
            var valueStart = nameEnd
            while valueStart < count, isSpace(bytes[valueStart]) { valueStart += 1 }
            guard valueStart < count, bytes[valueStart] == UInt8(ascii: ":"), index == 0 || bytes[index - 1] != UInt8(ascii: "$"),
                SecretNames.matches(String(decoding: bytes[index..<nameEnd], as: UTF8.self), names)
            else {
                index = nameEnd
                continue
            }
            valueStart += 1
            while valueStart < count, isSpace(bytes[valueStart]) { valueStart += 1 }
            guard valueStart < count, !isVariable(valueStart), bytes[valueStart] != backslash else {
                index = nameEnd
                continue
            }
            var valueEnd = valueStart
            let first = bytes[valueStart]
            if first == quote || first == apostrophe {
                let string = stringEnd(valueStart, first)
                valueEnd = string.end
                if string.closed {
                    let block = first == quote && valueEnd - valueStart >= 6 && bytes[valueStart + 1] == quote && bytes[valueStart + 2] == quote
                    addFound(block ? bytes[(valueStart + 3)..<(valueEnd - 3)] : bytes[(valueStart + 1)..<(valueEnd - 1)])
                }
            } else if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
                // An object or a list under a secret's name is the secret's, and so are its strings.
                var depth = 0
                while valueEnd < count {
                    let byte = bytes[valueEnd]
                    if byte == quote || byte == apostrophe {
                        let string = stringEnd(valueEnd, byte)
                        if string.closed { addFound(bytes[(valueEnd + 1)..<(string.end - 1)]) }
                        valueEnd = string.end
                        continue
                    }
                    valueEnd += 1
                    if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { depth += 1 }
                    if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
                        depth -= 1
                        if depth == 0 { break }
                    }
                }
            } else {
                valueEnd = bareEnd(valueStart)
                // An authentication scheme (`token: Bearer eyJ…`, `password: Basic dXNlcg==`) is
                // no secret: the credentials after it are, and so are a scheme's parameters that
                // follow (`Digest username="ann", response="6629…"`).
                if Self.authenticationSchemes.contains(String(decoding: bytes[valueStart..<valueEnd], as: UTF8.self).lowercased()) {
                    // Spaces (`\n` and `\t` too, while still JSON-escaped), and at most one `,`.
                    func separator(from start: Int) -> (end: Int, comma: Bool) {
                        var next = start
                        var comma = false
                        while next < count {
                            if case let width = Self.spaceWidth(in: bytes, at: next), width > 0 {
                                next += width
                            } else if bytes[next] == UInt8(ascii: ","), !comma {
                                comma = true
                                next += 1
                            } else {
                                break
                            }
                        }
                        return (next, comma)
                    }
                    var (next, comma) = separator(from: valueEnd)
                    var credentials = true
                    // The credentials, then each `name=value` after a `,` (a space alone ends them:
                    // `Bearer abc status=200`), not a next argument (`user: "ann"`).
                    while next < count, case let end = bareEnd(next), end > next, bytes[end - 1] != UInt8(ascii: ":") {
                        if !credentials {
                            var nameEnd = next
                            while nameEnd < end, isNameByte(bytes[nameEnd]) { nameEnd += 1 }
                            guard nameEnd > next, nameEnd < end, bytes[nameEnd] == UInt8(ascii: "=") else { break }
                        }
                        valueEnd = end
                        credentials = false
                        (next, comma) = separator(from: end)
                        guard comma else { break }
                    }
                }
            }
            // Nothing to redact: the value is a closing bracket or the text's end.
            guard valueEnd > valueStart else {
                index = nameEnd
                continue
            }
            out += bytes[nameEnd..<valueStart]
            out += Array("\"<redacted>\"".utf8)
            index = valueEnd
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The names of the variables a GraphQL document in `text` (a JSON body, its query still
    /// JSON-escaped) passes as secrets, normalized: their values under `variables` are secrets
    /// too, whatever they are called. A variable passed as a secret's value (`login(password:
    /// $pw)` names `pw`), or standing anywhere in a list or input object that is one
    /// (`password: [$a $b]`, `password: {old: $o, new: $n}`); not one defined (`$pw: String!`).
    /// One pass, with a stack of the open brackets; a GraphQL string (`\"…\"`, `\"\"\"…\"\"\"`)
    /// and a comment (`# …`) are skipped whole.
    static func secretVariables(in text: String, names: Set<String>) -> Set<String> {
        let bytes = Array(text.utf8)
        let count = bytes.count
        let backslash = UInt8(ascii: "\\")
        let quote = UInt8(ascii: "\"")
        func isNameByte(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_")
        }
        // The text is JSON-escaped: `\n` and `\t` are spaces too.
        func spaceWidth(at index: Int) -> Int { Self.spaceWidth(in: bytes, at: index) }
        func skippingSpaces(from index: Int) -> Int {
            var index = index
            while index < count, case let width = spaceWidth(at: index), width > 0 { index += width }
            return index
        }
        /// The index past the GraphQL string whose `\"` begins at `start`: to the next `\"` the
        /// string's own escape (`\\\"`, a `\"` in GraphQL) does not take, or to the JSON string's end.
        func graphQLStringEnd(_ start: Int) -> Int {
            let blockQuotes: [UInt8] = [backslash, quote, backslash, quote, backslash, quote]
            if start + 6 <= count, bytes[start..<(start + 6)].elementsEqual(blockQuotes) {
                // A block string: to the next `\"\"\"` its own escape (`\\\"\"\"`) does not take.
                var index = start + 6
                while index < count, bytes[index] != quote {
                    if index + 6 <= count, bytes[index..<(index + 6)].elementsEqual(blockQuotes) {
                        let escaped = index >= 2 && bytes[index - 2] == backslash && bytes[index - 1] == backslash
                        if !escaped { return index + 6 }
                        index += 6
                    } else {
                        index += bytes[index] == backslash ? 2 : 1
                    }
                }
                return min(index, count)
            }
            var index = start + 2
            var escaped = false
            while index < count {
                if bytes[index] == quote { return index }
                guard bytes[index] == backslash, index + 1 < count else {
                    escaped = false
                    index += 1
                    continue
                }
                let next = bytes[index + 1]
                index += 2
                if next == quote, !escaped { return index }
                escaped = next == backslash ? !escaped : false
            }
            return count
        }
        var variables: Set<String> = []
        // Per open bracket: whether what it holds is a secret's (a list or an input object under a
        // secret's name, or inside one); an argument list's `(` never is.
        var open: [Bool] = []
        // Whether the value about to come is a secret name's: set by `name:`, taken by the next value.
        var secretValue = false
        var index = 0
        while index < count {
            if case let width = spaceWidth(at: index), width > 0 {
                index += width
                continue
            }
            let byte = bytes[index]
            let inSecret = open.last ?? false
            switch byte {
            case UInt8(ascii: "$"):
                var end = index + 1
                while end < count, isNameByte(bytes[end]) { end += 1 }
                let after = skippingSpaces(from: end)
                let definition = after < count && bytes[after] == UInt8(ascii: ":")
                if end > index + 1, !definition, secretValue || inSecret {
                    // As `SecretNames.matches` reads a member's name: normalized, without the digits it ends with.
                    variables.insert(SecretNames.unnumbered(SecretNames.normalized(String(decoding: bytes[(index + 1)..<end], as: UTF8.self))))
                }
                secretValue = false
                index = definition ? after + 1 : end
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                open.append(secretValue || inSecret)
                secretValue = false
                index += 1
            case UInt8(ascii: "("):
                open.append(false)
                secretValue = false
                index += 1
            case UInt8(ascii: "]"), UInt8(ascii: "}"), UInt8(ascii: ")"):
                if !open.isEmpty { open.removeLast() }
                secretValue = false
                index += 1
            case backslash where index + 1 < count && bytes[index + 1] == quote:
                index = graphQLStringEnd(index)
                secretValue = false
            case UInt8(ascii: "#"):
                // A comment (`# a 5" screen`): to the line's end, or the JSON string's.
                while index < count, bytes[index] != quote, bytes[index] != 0x0A, bytes[index] != 0x0D,
                    !(bytes[index] == backslash && index + 1 < count && [UInt8(ascii: "n"), UInt8(ascii: "r")].contains(bytes[index + 1]))
                {
                    index += bytes[index] == backslash ? 2 : 1
                }
            case _ where isNameByte(byte):
                var end = index
                while end < count, isNameByte(bytes[end]) { end += 1 }
                let after = skippingSpaces(from: end)
                if after < count, bytes[after] == UInt8(ascii: ":") {
                    secretValue = SecretNames.matches(String(decoding: bytes[index..<end], as: UTF8.self), names)
                    index = after + 1
                } else {
                    secretValue = false
                    index = end
                }
            default:
                // A JSON string's quote, a `,`, an escape: no value of a name.
                if byte == backslash { index += 1 }
                secretValue = false
                index += 1
            }
        }
        return variables
    }

    /// The request as a cURL command that sends the same bytes: secrets scrubbed before the
    /// quoting (quoting rewrites `'`, `\\` and non-ASCII bytes, and a scrub after it missed
    /// them); the body as `--data-raw` (`--data-binary` reads a body starting with `@` as a file
    /// to upload); `--globoff` (a URL's `[]` or `{}` are no ranges or lists); a method quoted
    /// when it holds more than letters, digits, `-`, `_` and `.`.
    func curlCommand(_ request: InterceptorRequest, url: String, body text: String?, secrets: [String]) -> String {
        func quoted(_ text: String) -> String { shellQuote(Self.scrub(text, secrets: secrets)) }
        let plainMethod = request.method.utf8.allSatisfy { byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: ".")
        }
        var parts = ["curl", "-X", plainMethod ? request.method : quoted(request.method)]
        for header in request.headers { parts += ["-H", quoted("\(header.name): \(redact(header: header))")] }
        // A body the log does not show is not sent either: a placeholder sent as data (it was
        // `--data-raw '<7 bytes>'`) is another request. A comment says what is missing.
        var missing: String?
        if let count = request.body?.count, count > 0 {
            if let text {
                parts += ["--data-raw", quoted(text)]
            } else {
                missing = "# the body (\(count) bytes) is not shown: " + (level == .body ? "over maxBodyBytes, or not text" : "level body shows it")
            }
        }
        parts += ["--globoff", quoted(url)]
        if let missing { parts.append(missing) }
        return parts.joined(separator: " ")
    }

    /// `text`, a body cut at ``maxBodyBytes``, with its end redacted when it is the start of a
    /// secret (4 characters or more of it): the cut left the secret whole nowhere, and scrubbing,
    /// which replaces whole secrets, would have shown its start.
    static func redactingCutSecret(_ text: String, secrets: [String]) -> String {
        var longest = 0
        for secret in secrets where secret.count > 4 {
            for length in stride(from: min(secret.count - 1, text.count), through: max(4, longest + 1), by: -1)
            where text.hasSuffix(secret.prefix(length)) {
                longest = length
                break
            }
        }
        guard longest > 0 else { return text }
        return text.dropLast(longest) + "<redacted>"
    }

    /// `text` with every secret replaced by `<redacted>` (longest first: `ordered`); a secret
    /// with a byte a URL escapes, also where it stands percent-encoded (``scrubbingEncoded(_:secret:)``).
    static func scrub(_ text: String, secrets: [String]) -> String {
        var text = text
        for secret in secrets {
            if secret.utf8.allSatisfy(RFC3986.isUnreserved) {
                text = text.replacingOccurrences(of: secret, with: "<redacted>")
            } else {
                text = scrubbingEncoded(text, secret: Array(secret.utf8))
            }
        }
        return text
    }

    /// `text` with `secret` replaced by `<redacted>` wherever it stands with any of its bytes
    /// percent-encoded (either case of hex) and a space also as `+`: a URL, a form body and a
    /// server's echo of them each encode it their own way (`tok+en/x=` as `tok%2Ben%2Fx%3D`,
    /// `tok%2ben%2fx%3d`, or `tok%2Ben/x%3D`), and it was scrubbed only as it is.
    static func scrubbingEncoded(_ text: String, secret: [UInt8]) -> String {
        guard let first = secret.first else { return text }
        var text = text
        // The line's own bytes (no copy); a new string only where the secret stands.
        let scrubbed = text.withUTF8 { bytes -> String? in
            func hex(_ byte: UInt8) -> UInt8? {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
                default: nil
                }
            }
            // Where the secret read from `start` ends, or nil.
            func end(from start: Int) -> Int? {
                var index = start
                for wanted in secret {
                    guard index < bytes.count else { return nil }
                    let byte = bytes[index]
                    if byte == wanted || (wanted == 0x20 && byte == UInt8(ascii: "+")) {
                        index += 1
                    } else if byte == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hex(bytes[index + 1]),
                        let low = hex(bytes[index + 2]), high << 4 | low == wanted
                    {
                        index += 3
                    } else {
                        return nil
                    }
                }
                return index
            }
            var found: [Range<Int>] = []
            var index = 0
            while index < bytes.count {
                let byte = bytes[index]
                if byte == first || byte == UInt8(ascii: "%") || byte == UInt8(ascii: "+"), let stop = end(from: index) {
                    found.append(index..<stop)
                    index = stop
                } else {
                    index += 1
                }
            }
            guard !found.isEmpty else { return nil }
            var out: [UInt8] = []
            out.reserveCapacity(bytes.count)
            var copied = 0
            for range in found {
                out += bytes[copied..<range.lowerBound]
                out += "<redacted>".utf8
                copied = range.upperBound
            }
            out += bytes[copied...]
            return String(decoding: out, as: UTF8.self)
        }
        return scrubbed ?? text
    }

    /// `text` quoted for a POSIX shell: in single quotes; in `$'…'` with escapes when it holds
    /// a control character (a line break), so the command stays one line of the log and sends
    /// the same bytes.
    func shellQuote(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: Self.isControl) else { return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        var out = "$'"
        for byte in text.utf8 {
            switch byte {
            case 0x5C: out += "\\\\"
            case 0x27: out += "\\'"
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0x20...0x7E: out.unicodeScalars.append(Unicode.Scalar(byte))
            default: out += "\\x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16)
            }
        }
        return out + "'"
    }

    func write(_ lines: [String], secrets: [String]) {
        let text = lines.map { Self.oneEntry(Self.scrub($0, secrets: secrets)) }
            .joined(separator: "\n")
        switch output {
        case .host:
            host.log(.info, text)
        case .standardError:
            sink.exclusively { _ = FileDescriptor.writeAll(2, text + "\n") }
        case .file(let fd):
            let data = Array((text + "\n").utf8)
            sink.exclusively { _ = data.withUnsafeBytes { FileDescriptor.writeAll(fd, $0) } }
        }
    }
}

/// How the logger writes the names and values it redacts back into JSON (matching names is
/// ``SecretNames``'s).
enum FieldNames {
    /// `value` as a JSON string's contents with only what JSON requires escaped (`"`, `\`, C0
    /// controls): how a redacted string nested in a body is written back.
    static func escapedJSON(_ value: String) -> String { JSONValue.escaped(value) }

    /// A JSON string's contents (without its quotes) decoded whatever they hold: a lone
    /// surrogate (`\ud83d`, as a string cut inside an emoji carries) as U+FFFD, an unknown escape
    /// as it is written, an escape cut by the text's end left out. (Foundation's decoder refuses
    /// the first two, and a text scanned undecoded hid its secrets behind `\"`.)
    static func unescapedJSON(_ raw: ArraySlice<UInt8>) -> String {
        var units: [UInt16] = []
        var bytes: [UInt8] = []
        func flushBytes() {
            units += String(decoding: bytes, as: UTF8.self).utf16
            bytes.removeAll(keepingCapacity: true)
        }
        var index = raw.startIndex
        while index < raw.endIndex {
            let byte = raw[index]
            guard byte == UInt8(ascii: "\\") else {
                bytes.append(byte)
                index += 1
                continue
            }
            guard index + 1 < raw.endIndex else { break }
            let escape = raw[index + 1]
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(escape)
            case UInt8(ascii: "n"): bytes.append(0x0A)
            case UInt8(ascii: "r"): bytes.append(0x0D)
            case UInt8(ascii: "t"): bytes.append(0x09)
            case UInt8(ascii: "b"): bytes.append(0x08)
            case UInt8(ascii: "f"): bytes.append(0x0C)
            case UInt8(ascii: "u"):
                guard index + 6 <= raw.endIndex else {
                    index = raw.endIndex
                    continue
                }
                guard let digits = String(bytes: raw[(index + 2)..<(index + 6)], encoding: .ascii), let unit = UInt16(digits, radix: 16) else {
                    bytes += raw[index..<(index + 2)]
                    index += 2
                    continue
                }
                flushBytes()
                units.append(unit)
                index += 6
                continue
            default: bytes += raw[index..<(index + 2)]
            }
            index += 2
        }
        flushBytes()
        // A pair decodes; a lone surrogate becomes U+FFFD.
        return String(decoding: units, as: UTF16.self)
    }

    /// `value` as JSON writes it with every character past ASCII escaped (`\u00e4`), as many
    /// servers echo a body back (Python's `json.dumps`): the form an echo carries it in.
    static func asciiJSON(_ value: String) -> String {
        var out = ""
        for unit in value.utf16 {
            switch unit {
            case 0x22: out += "\\\""
            case 0x5C: out += "\\\\"
            // The short escapes, as `json.dumps` writes them.
            case 0x08: out += "\\b"
            case 0x09: out += "\\t"
            case 0x0A: out += "\\n"
            case 0x0C: out += "\\f"
            case 0x0D: out += "\\r"
            case 0x20..<0x7F: out.unicodeScalars.append(Unicode.Scalar(UInt8(unit)))
            default:
                let hex = String(unit, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
        }
        return out
    }
}
