import Foundation
import PluginSDK
import Testing

@testable import PluginHost

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The kept target URL is the one `appendingPathComponent` makes, for the same bytes only.
@Suite struct TargetURLTests {
    /// A target of any base and path.
    struct Target: TargetType {
        var baseURL: URL
        var path: String
        var method: HTTPMethod { .get }
    }

    static let base = URL(string: "http://127.0.0.1:8080/api")!

    @Test func keptURLsAreTheOnesAppendingMakes() throws {
        let slashed = try #require(URL(string: "http://127.0.0.1:8080/api/"))
        let pairs: [(URL, String)] = [
            (Self.base, "users/7"), (Self.base, "users/8"), (slashed, "users/7"), (Self.base, "a b/c?d#e"),
            // Canonically equal paths of other bytes: other resources (`caf%C3%A9`, `cafe%CC%81`).
            (Self.base, "caf\u{E9}"), (Self.base, "cafe\u{301}"), (Self.base, "/lead"), (Self.base, "trail/"),
        ]
        // Each pair asked twice in a row (the second kept), then the list again in another order.
        for (base, path) in pairs + pairs.reversed() {
            for _ in 0..<2 {
                let url = TargetURL.appending(path, to: base)
                #expect(url == base.appendingPathComponent(path), "\(base) + \(path)")
                #expect(url.absoluteString == base.appendingPathComponent(path).absoluteString)
            }
        }
        #expect(TargetURL.appending("caf\u{E9}", to: Self.base).absoluteString.hasSuffix("/caf%C3%A9"))
        #expect(TargetURL.appending("cafe\u{301}", to: Self.base).absoluteString.hasSuffix("/cafe%CC%81"))
    }

    #if canImport(FoundationNetworking) && compiler(>=6.2)
    /// The joined string is Foundation's for every base it takes, and a path of any bytes; other
    /// bases are left to Foundation. (Linux's from Swift 6.2: where the join is used.)
    @Test func joinedURLsAreTheOnesAppendingMakes() throws {
        let bases = [
            "http://h:9", "http://h:9/", "http://h/api", "http://h/api/", "https://h.example.com/a/b", "HTTP://H/Api", "http://user@h/api",
            "http://h/a%20b", "https://127.0.0.1:8443/v1//", "http://[::1]:8080/v1", "http://user:pw@h/api", "http://h:/", "HtTpS://h",
            "http://h",
        ]
        var paths = [
            "items/1", "/items/1", "items/", "/", "//", "a//b", "a b", "a?b", "a#b", "a%20b", "./a", "a/../b", "..", ".", "~user", "a;b",
            "a+b", "a=b&c", ":a", "a/:b", "@", "a!$'()*,", "caf\u{E9}", "cafe\u{301}", "a|b[c]{d}\"e\\f^g`h<i>", "tab\there", "nul\u{0}x",
            "\u{7F}", "\u{1F600}",
        ]
        // Random paths of every ASCII byte and a few longer characters, the same on every run.
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        let alphabet = (0..<128).map { Character(Unicode.Scalar(UInt8($0))) } + ["\u{E9}", "\u{4E2D}", "\u{1F600}"]
        for _ in 0..<300 {
            var path = ""
            for _ in 0..<12 {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                path.append(alphabet[Int(seed >> 33) % alphabet.count])
            }
            paths.append(path)
        }
        for baseString in bases {
            let base = try #require(URL(string: baseString))
            for path in paths {
                let expected = base.appendingPathComponent(path)
                let joined = try #require(TargetURL.joined(baseString, path), "\(baseString) + \(path.debugDescription)")
                #expect(joined == expected.absoluteString, "\(baseString) + \(path.debugDescription)")
                #expect(URL(string: joined) == expected, "\(baseString) + \(path.debugDescription)")
                #expect(TargetURL.appending(path, to: base) == expected)
            }
        }
        // A query or fragment (appended after the path), another scheme, a byte above 0x7F: Foundation's.
        for baseString in [
            "http://h/api?x=1", "http://h/api#f", "ftp://h/a", "mailto:a@h", "http://h/caf\u{E9}", "http:", "http://", "httpx://h",
            "http:/x", "https:", "https://", "https:/x",
        ] {
            #expect(TargetURL.joined(baseString, "users/7") == nil, "\(baseString)")
            if let base = URL(string: baseString) {
                #expect(TargetURL.appending("users/7", to: base) == base.appendingPathComponent("users/7"), "\(baseString)")
            }
        }
    }
    #endif

    @Test func aBaseRelativeToAnotherKeepsItsBase() throws {
        // The same string as `absolute` once resolved, but a URL of two parts.
        let relative = try #require(URL(string: "api", relativeTo: URL(string: "http://127.0.0.1:8080/")))
        let absolute = try #require(URL(string: "http://127.0.0.1:8080/api"))
        for base in [absolute, relative, absolute, relative] {
            let url = TargetURL.appending("users", to: base)
            #expect(url == base.appendingPathComponent("users"))
            #expect((url.baseURL == nil) == (base.baseURL == nil))
        }
    }

    @Test func aFileURLIsMadeAgainAsTheFileSystemSays() throws {
        // `appendingPathComponent` on a file URL asks the file system whether the path is a
        // directory (a trailing slash): a directory made between two calls shows in the second.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pluginhost-target-url-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let before = TargetURL.appending("sub", to: directory)
        #expect(!before.absoluteString.hasSuffix("/"))
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("sub"), withIntermediateDirectories: false)
        let after = TargetURL.appending("sub", to: directory)
        #expect(after.absoluteString.hasSuffix("/sub/"))
        #expect(after == directory.appendingPathComponent("sub"))
    }

    @Test func fileSchemesAreToldFromTheirBytesAsIsFileURLSays() throws {
        let strings = [
            "file:///tmp/a", "FILE:///tmp/a", "File:/x", "file:", "http://127.0.0.1/file:", "files:///a", "fil:///a",
            "filE:relative", "https://127.0.0.1/", "", "fi", "file", "file;x",
        ]
        for string in strings {
            let expected = URL(string: string)?.isFileURL ?? false
            #expect(TargetURL.isFile(string) == expected, "\(string)")
        }
        #expect(TargetURL.isFile(URL(fileURLWithPath: "/tmp").absoluteString))
    }

    @Test func endpointsRequestsHaveTheTargetsURL() throws {
        let relative = try #require(URL(string: "api", relativeTo: URL(string: "http://127.0.0.1:8080/")))
        let targets = [
            Target(baseURL: Self.base, path: "users/7"), Target(baseURL: Self.base, path: "caf\u{E9}"),
            Target(baseURL: Self.base, path: "cafe\u{301}"), Target(baseURL: relative, path: "users/7"),
            Target(baseURL: Self.base, path: ""),
        ]
        for target in targets + targets {
            let endpoint = Provider<Target>.defaultEndpointMapping(for: target)
            #expect(endpoint.url == target.baseURL.appendingPathComponent(target.path).absoluteString || target.path.isEmpty)
            // The request's URL: the one parsed from the endpoint's string, as without the kept URL.
            let request = try endpoint.urlRequest()
            #expect(request.url == URL(string: endpoint.url), "\(target.path)")
            #expect(request.url?.absoluteString == endpoint.url)
        }
    }
}
