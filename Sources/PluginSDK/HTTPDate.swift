import Foundation

/// HTTP dates (RFC 9110 IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`): the cache plugin's
/// `Date`, `Expires` and `Last-Modified`, the host's `Retry-After`.
package enum HTTPDate {
    package static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    package static let shortDays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    package static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    package static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since 1970, or nil when `text` is not an HTTP-date (RFC 9110 §5.6.7): the
    /// IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, and the obsolete forms recipients must
    /// accept, rfc850 `Sunday, 06-Nov-94 08:49:37 GMT` and asctime `Sun Nov  6 08:49:37 1994`.
    /// Exactly those shapes: one space where one belongs, two-digit fields, a comma after the day.
    package static func parse(_ text: String, now: Double = Date().timeIntervalSince1970) -> Double? {
        let b = Array(text.utf8)
        func digits(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= b.count else { return nil }
            var value = 0
            for i in range {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                value = value * 10 + Int(b[i] - 48)
            }
            return value
        }
        func word(_ range: Range<Int>) -> String? {
            guard range.upperBound <= b.count else { return nil }
            return String(decoding: b[range], as: UTF8.self)
        }
        func time(at i: Int) -> (Int, Int, Int)? {
            guard i + 8 <= b.count, b[i + 2] == 58, b[i + 5] == 58, let h = digits(i..<i + 2), let m = digits(i + 3..<i + 5),
                let sec = digits(i + 6..<i + 8)
            else { return nil }
            return (h, m, sec)
        }
        func month(_ name: String?) -> Int? { name.flatMap { monthNames.firstIndex(of: $0) }.map { $0 + 1 } }
        var parts: (year: Int, month: Int, day: Int, time: (Int, Int, Int))?
        if b.count == 29, let day = word(0..<3), shortDays.contains(day), b[3] == 44, b[4] == 32 {
            // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
            if let d = digits(5..<7), b[7] == 32, let m = month(word(8..<11)), b[11] == 32, let y = digits(12..<16), b[16] == 32,
                let t = time(at: 17), word(25..<29) == " GMT"
            {
                parts = (y, m, d, t)
            }
        } else if b.count == 24, let day = word(0..<3), shortDays.contains(day), b[3] == 32 {
            // asctime: "Sun Nov  6 08:49:37 1994"
            if let m = month(word(4..<7)), b[7] == 32, b[10] == 32, let t = time(at: 11), b[19] == 32, let y = digits(20..<24) {
                let d = b[8] == 32 ? digits(9..<10) : digits(8..<10)
                if let d { parts = (y, m, d, t) }
            }
        } else if let comma = b.firstIndex(of: 44), let day = word(0..<comma), longDays.contains(day), b.count == comma + 24,
            b[comma + 1] == 32
        {
            // rfc850: "Sunday, 06-Nov-94 08:49:37 GMT"; a two-digit year more than 50 years ahead is the last century's.
            let i = comma + 2
            if let d = digits(i..<i + 2), b[i + 2] == 45, let m = month(word(i + 3..<i + 6)), b[i + 6] == 45, let yy = digits(i + 7..<i + 9),
                b[i + 9] == 32, let t = time(at: i + 10), word(i + 18..<i + 22) == " GMT"
            {
                let thisYear = civilFromDays(Int(now) / 86_400).0
                var year = thisYear / 100 * 100 + yy
                if year > thisYear + 50 { year -= 100 }
                parts = (year, m, d, t)
            }
        }
        // A day the month has (31 February was read as 3 March), an hour, minute and second.
        guard let parts, (1...daysIn(month: parts.month, of: parts.year)).contains(parts.day), (0...23).contains(parts.time.0),
            (0...59).contains(parts.time.1), (0...60).contains(parts.time.2)
        else { return nil }
        return Double(
            daysFromCivil(year: parts.year, month: parts.month, day: parts.day) * 86_400 + parts.time.0 * 3600 + parts.time.1 * 60 + parts.time.2)
    }

    /// The days of `month` (1–12) in `year` (proleptic Gregorian).
    package static func daysIn(month: Int, of year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Formats seconds since 1970 as an IMF-fixdate.
    package static func format(_ seconds: Double) -> String {
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
    package static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    package static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
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
