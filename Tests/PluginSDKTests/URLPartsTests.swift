import Foundation
import PluginSDK
import Testing

/// The byte-level URL reader gives what URLComponents gives, on ordinary and awkward URLs.
@Suite("URLParts")
struct URLPartsTests {
    static let pieces = (
        bases: ["http://h", "https://api.example.com:8443", "http://u:p@h", "HTTP://H.example"],
        paths: ["", "/", "/a/b", "/a%20b/c", "/%E2%82%AC", "/a;b=c", "/a/./b/../c"],
        queries: [
            nil, "", "a=1", "a=1&b=2", "b=2&a=1&a=0", "a", "a=", "=v", "a=1&&b", "q=%2Fx%3Fy", "q=a+b", "q=%E2%82%AC", "k=v=w", "&",
            "a[]=1&a[]=2",
        ],
        fragments: [nil, "", "frag", "f?x=1"]
    )

    @Test func pathAndQueryMatchURLComponents() {
        var checked = 0
        for base in Self.pieces.bases {
            for path in Self.pieces.paths {
                for query in Self.pieces.queries {
                    for fragment in Self.pieces.fragments {
                        let url = base + path + (query.map { "?" + $0 } ?? "") + (fragment.map { "#" + $0 } ?? "")
                        let parts = URLParts(url)
                        let components = URLComponents(string: url)
                        #expect(parts.percentEncodedPath == (components?.percentEncodedPath ?? ""), "\(url)")
                        let expected = (components?.queryItems ?? []).map { "\($0.name)=\($0.value ?? "")" }
                        #expect(parts.queryItems.map { "\($0.name)=\($0.value)" } == expected, "\(url)")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked == 4 * 7 * 15 * 4)
    }

    @Test func awkwardStringsFallBackToURLComponents() {
        for url in ["not a url", "http://h/a b?c=d", "http://h/?q=%zz", "http://h/?q=%E", "/relative?a=1", "http://h/?q=<x>", "mailto:a@b?subject=x"]
        {
            let components = URLComponents(string: url)
            #expect(URLParts(url).percentEncodedPath == (components?.percentEncodedPath ?? ""), "\(url)")
            #expect(
                URLParts(url).queryItems.map { "\($0.name)=\($0.value)" } == (components?.queryItems ?? []).map { "\($0.name)=\($0.value ?? "")" },
                "\(url)")
        }
    }

    /// The query as spelled, from the bytes, awkward strings too (a signature covers what goes).
    @Test func percentEncodedQueryBytesAreTheQueryAsSpelled() {
        let cases: [(String, String)] = [
            ("https://h/p?a=1&b=%zz#frag", "a=1&b=%zz"), ("http://h/a b?c=d e", "c=d e"), ("https://h/p#x?y", ""), ("https://h/p?", ""),
            ("/relative?x=%2B+1", "x=%2B+1"), ("https://h?q", "q"),
        ]
        for (url, query) in cases {
            #expect(String(decoding: URLParts(url).percentEncodedQueryBytes, as: UTF8.self) == query, "\(url)")
        }
    }

    /// Escapes decode to bytes and are spelled again upper-case; a `%` without two hex digits is
    /// a `%` (`%25`), `+` is `%2B`, bytes that are no UTF-8 stay themselves.
    @Test func escapedQueryItemsSpellBytes() {
        let items = URLParts("https://h/p?a%7e=%ff%FE&b=%4&c+d=~").escapedQueryItems.map { "\($0.name)=\($0.value)" }
        #expect(items == ["a~=%FF%FE", "b=%254", "c%2Bd=~"])
    }
}
