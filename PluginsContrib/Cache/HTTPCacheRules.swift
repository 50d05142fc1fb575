import Foundation
import PluginSDK

/// Cache-Control directives, parsed.
struct CacheDirectives {
    var values: [String: String?] = [:]

    init(_ headerValues: [String]) {
        guard !headerValues.isEmpty else { return }
        for value in headerValues {
            for part in Array(value.utf8).split(separator: UInt8(ascii: ",")) {
                let item = Self.trimmed(part, also: nil)
                guard !item.isEmpty else { continue }
                if let equals = item.firstIndex(of: UInt8(ascii: "=")) {
                    let name = String(decoding: Self.trimmed(item[..<equals], also: nil), as: UTF8.self).lowercased()
                    let argument = String(decoding: Self.trimmed(item[(equals + 1)...], also: UInt8(ascii: "\"")), as: UTF8.self)
                    values[name] = .some(argument)
                } else {
                    values[String(decoding: item, as: UTF8.self).lowercased()] = .some(nil)
                }
            }
        }
    }

    /// `bytes` without leading and trailing spaces and tabs (and `also`, when given, after them).
    private static func trimmed(_ bytes: ArraySlice<UInt8>, also: UInt8?) -> ArraySlice<UInt8> {
        var slice = bytes
        func isTrimmed(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        while let first = slice.first, isTrimmed(first) { slice = slice.dropFirst() }
        while let last = slice.last, isTrimmed(last) { slice = slice.dropLast() }
        if let also {
            while let first = slice.first, first == also { slice = slice.dropFirst() }
            while let last = slice.last, last == also { slice = slice.dropLast() }
        }
        return slice
    }

    func has(_ name: String) -> Bool { values[name] != nil }

    /// The directive's number of seconds; nil when absent or not a number.
    func seconds(_ name: String) -> Double? {
        guard let entry = values[name], let text = entry, let number = Double(text), number >= 0 else { return nil }
        return number
    }
}

/// HTTP dates (RFC 9110 IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`).
enum HTTPDate {
    static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since 1970, or nil when `text` is not an IMF-fixdate.
    static func parse(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]),
            let month = months.firstIndex(of: parts[2].lowercased()).map({ $0 + 1 })
        else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        guard time.count == 3, (1...31).contains(day), (0...23).contains(time[0]), (0...59).contains(time[1]), (0...60).contains(time[2])
        else { return nil }
        return Double(daysFromCivil(year: year, month: month, day: day) * 86_400 + time[0] * 3600 + time[1] * 60 + time[2])
    }

    /// Formats seconds since 1970 as an IMF-fixdate.
    static func format(_ seconds: Double) -> String {
        let total = Int(seconds.rounded(.down))
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let secondOfDay = total - days * 86_400
        let (year, month, day) = civilFromDays(days)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((days % 7) + 7) % 7]
        return String(
            format: "%@, %02d %@ %04d %02d:%02d:%02d GMT", weekday, day, months[month - 1].capitalized, year,
            secondOfDay / 3600, (secondOfDay % 3600) / 60, secondOfDay % 60)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp + (mp < 10 ? 3 : -9)
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// One stored response.
struct CacheEntry: Codable {
    var key: String
    var status: Int
    var headerNames: [String]
    var headerValues: [String]
    var body: [UInt8]
    var requestTime: Double
    var responseTime: Double
    /// Request header values the response varies on (lower-case names).
    var vary: [String: String]
    /// A freshness lifetime set by the target (`pluginOptions["cache"]`), overriding the headers.
    var ttl: Double?
    /// Whether the URL has a query (heuristic freshness is not used then).
    var hasQuery: Bool

    var headers: [HTTPHeader] { zip(headerNames, headerValues).map { HTTPHeader(name: $0, value: $1) } }

    func header(_ name: String) -> String? {
        zip(headerNames, headerValues).first { HTTPHeader.namesEqual($0.0, name) }?.1
    }

    func headerValues(_ name: String) -> [String] {
        zip(headerNames, headerValues).filter { HTTPHeader.namesEqual($0.0, name) }.map(\.1)
    }

    var directives: CacheDirectives { CacheDirectives(headerValues("Cache-Control")) }

    /// RFC 9111 §4.2.1 freshness lifetime.
    var freshnessLifetime: Double {
        if let ttl { return ttl }
        let directives = self.directives
        if let maxAge = directives.seconds("max-age") { return maxAge }
        let date = header("Date").flatMap(HTTPDate.parse) ?? responseTime
        if let expires = header("Expires") {
            guard let expiry = HTTPDate.parse(expires) else { return 0 }
            return max(0, expiry - date)
        }
        if !hasQuery, Self.heuristicallyCacheable.contains(status), let modified = header("Last-Modified").flatMap(HTTPDate.parse), modified < date {
            return (date - modified) / 10
        }
        return 0
    }

    /// RFC 9111 §4.2.3 current age at `now`.
    func age(at now: Double) -> Double {
        let date = header("Date").flatMap(HTTPDate.parse) ?? responseTime
        let apparent = max(0, responseTime - date)
        let ageValue = header("Age").flatMap { Double($0) } ?? 0
        let corrected = ageValue + max(0, responseTime - requestTime)
        return max(apparent, corrected) + max(0, now - responseTime)
    }

    static let heuristicallyCacheable: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Headers updated from a `304` (RFC 9111 §4.3.4): its fields replace stored ones, except framing.
    mutating func update(from notModified: [HTTPHeader]) {
        let skipped: Set<String> = ["content-length", "content-encoding", "transfer-encoding", "content-range"]
        var fields = headers
        for header in notModified where !skipped.contains(header.name.lowercased()) {
            fields.removeAll { HTTPHeader.namesEqual($0.name, header.name) }
        }
        fields += notModified.filter { !skipped.contains($0.name.lowercased()) }
        headerNames = fields.map(\.name)
        headerValues = fields.map(\.value)
    }
}
