import Foundation

/// delta-seconds (RFC 9111 §1.2.2) and the `Age` field (§5.1), as the cache reads them and a
/// `RetryPolicy` reads `Retry-After` seconds and `Age`.
package enum DeltaSeconds {
    /// The most a delta-seconds value counts for.
    package static let cap: Double = 2_147_483_648

    /// 1*DIGIT, capped; nil for anything else (`7200.0`, `-1`, `1e3`, empty).
    package static func parse(_ text: String) -> Double? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        var value: Double = 0
        for byte in text.utf8 {
            value = value * 10 + Double(byte - UInt8(ascii: "0"))
            if value >= cap { return cap }
        }
        return value
    }

    /// The `Age` of a response: the first member of the first field line (a list keeps its
    /// first member, §5.1); nil (ignored) when that member is not delta-seconds.
    package static func age(_ values: [String]) -> Double? {
        guard let first = values.first?.split(separator: ",", omittingEmptySubsequences: false).first else { return nil }
        return parse(first.trimmingCharacters(in: .whitespaces))
    }
}
