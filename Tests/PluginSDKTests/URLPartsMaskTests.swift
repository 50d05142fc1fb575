import Testing

@testable import PluginSDK

/// The byte mask the URL reader scans with says what its byte rules say, for every byte.
@Suite("URLParts: the special-byte mask")
struct URLPartsMaskTests {
    @Test func theMaskIsEscapingOrPercentForEveryByte() {
        for value in 0...255 {
            let byte = UInt8(value)
            #expect(URLParts.isSpecial(byte) == (URLParts.needsEscaping(byte) || byte == UInt8(ascii: "%")), "byte \(value)")
        }
    }

    @Test func aBadPercentOrAByteToEscapeLeavesItToURLComponents() {
        for url in ["http://h/a%2", "http://h/a%zz", "http://h/a b", "http://h/a\"b", "http://h/a{b}", "http://h/\u{e9}"] {
            var copy = url
            #expect(copy.withUTF8 { URLParts.pathAndQuery($0) } == nil, "\(url)")
        }
        var good = "http://h/a%20b?q=%2F"
        let ranges = good.withUTF8 { URLParts.pathAndQuery($0) }
        #expect(ranges?.path == 8..<14)
        #expect(ranges?.query == 15..<20)
    }
}
