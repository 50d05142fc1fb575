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
