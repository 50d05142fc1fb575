import Foundation
import PluginHost
import PluginSDK
import Testing

/// Every contrib plugin refuses invalid configuration at create, naming the key and the expected form.
@Suite("contrib plugin configuration errors")
struct ContribConfigTests {
    @Test(arguments: [
        ("access-token", #"{"required": "yes"}"#, "access-token: required must be true or false"),
        ("access-token", #"{"maxRefreshes": 0}"#, "access-token: maxRefreshes must be between 1 and 1000"),
        (
            "credentials", #"{"credentials": [{"host": "h", "user": "u"}]}"#,
            "credentials: credentials[0] needs password, passwordKey (host store) or passwordEnv"
        ),
        (
            "credentials", #"{"credentials": [{"host": "h", "user": "u", "password": "p", "port": 70000}]}"#,
            "credentials: credentials[0].port must be between 1 and 65535"
        ),
        ("activity", #"{"defaultVisibility": "blink"}"#, "activity: defaultVisibility must be one of show, hide"),
        ("logger", #"{"level": "verbose"}"#, "logger: level must be one of off, basic, headers, body"),
        ("logger", #"{"output": "file"}"#, "logger: file must name a file when output is file"),
        ("signature", #"{"scheme": "sha1"}"#, "signature: scheme must be one of hmac-sha256, md5-sorted"),
        ("signature", #"{"placement": "body"}"#, "signature: placement must be one of header, query"),
        ("cache", #"{"staleIfError": -1}"#, "cache: staleIfError must be between 0 and 31536000"),
        ("cache", #"{"directory": "relative/dir"}"#, "cache: directory must be an absolute path"),
        (
            "cache", #"{"colour": "red"}"#,
            "cache: unknown key \"colour\"; known keys: directory, maxDiskBytes, maxMemoryBytes, maxMemoryEntries, staleIfError, storeAuthorized"
        ),
    ])
    func invalidConfigIsRefusedWithTheKey(plugin: String, config: String, message: String) throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let object = try JSONSerialization.jsonObject(with: Data(config.utf8)) as? [String: Any] ?? [:]
        let error = loadError { _ = try f.provider([(plugin, object)]) as Provider<Bin> }
        #expect(error?.kind == .createFailed)
        #expect(error?.plugin == plugin)
        #expect(error?.reason == message)
    }
}
