import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every contrib plugin refuses invalid configuration at create, naming the key and the expected form.
@Suite("contrib plugin configuration errors")
struct ContribConfigTests {
    @Test(arguments: [
        ("access-token", #"{"required": "yes"}"#, "access-token: required must be true or false, not a string"),
        ("access-token", #"{"maxRefreshes": 0}"#, "access-token: maxRefreshes must be between 1 and 1000, not 0"),
        ("access-token", #"{"origins": "https://api.example.com"}"#, "access-token: origins must be a list of strings"),
        (
            "access-token", #"{"origins": ["https://api.example.com", "https://api.example.com/v1"]}"#,
            "access-token: origins[1]: \"https://api.example.com/v1\" is not an origin: write scheme (http or https), host and an optional port, "
                + "such as \"https://api.example.com\" or \"https://*.example.com:8443\" (no user, path, query or fragment)"
        ),
        (
            // Percent-encoded: `%2A` is no wildcard, nor an escape of a name.
            "access-token", #"{"origins": ["https://%2A.example.com"]}"#,
            "access-token: origins[0]: \"https://%2A.example.com\" is not an origin: write scheme (http or https), host and an optional port, "
                + "such as \"https://api.example.com\" or \"https://*.example.com:8443\" (no user, path, query or fragment)"
        ),
        (
            "access-token", #"{"origins": ["ftp://files.example.com"]}"#,
            "access-token: origins[0]: \"ftp://files.example.com\" is not an origin: write scheme (http or https), host and an optional port, "
                + "such as \"https://api.example.com\" or \"https://*.example.com:8443\" (no user, path, query or fragment)"
        ),
        (
            "credentials", #"{"credentials": [{"host": "h", "user": "u"}]}"#,
            "credentials: credentials[0] needs password, passwordKey (host store) or passwordEnv"
        ),
        (
            "credentials", #"{"credentials": [{"host": "h", "user": "u", "password": "p", "port": 70000}]}"#,
            "credentials: credentials[0].port must be between 1 and 65535, not 70000"
        ),
        ("credentials", #"{"rounds": 4}"#, "credentials: rounds must be between 1 and 3, not 4"),
        (
            "credentials", #"{"credentials": [{"host": "h", "password": "p"}]}"#,
            "credentials: credentials[0].user is required: the user name to answer with"
        ),
        ("credentials", #"{"credentials": {"host": "h"}}"#, "credentials: credentials must be a list of objects"),
        ("credentials", #"{"rounds": 1.5}"#, "credentials: rounds must be a whole number, not 1.5"),
        (
            "credentials", #"{"credentials": [{"host": "h", "user": "u", "password": "p", "proxy": true, "preemptive": true}]}"#,
            "credentials: credentials[0]: a proxy entry is not preemptive (its credentials answer the proxy's 407); leave out one of the two"
        ),
        ("activity", #"{"defaultVisibility": "blink"}"#, #"activity: defaultVisibility must be one of show, hide, not "blink""#),
        ("logger", #"{"level": "verbose"}"#, #"logger: level must be one of off, basic, headers, body, not "verbose""#),
        ("logger", #"{"output": "file"}"#, "logger: file must name a file when output is file"),
        ("logger", #"{"level": "body", "file": "/var/log/app/http.log"}"#, "logger: file is used only with output: file (output is stderr)"),
        ("logger", #"{"redactHeaders": ["X-Api-Key", 7]}"#, "logger: redactHeaders[1] must be a string, not 7"),
        ("logger", #"{"redactHeaders": ["X-Api-Key "]}"#, #"logger: redactHeaders[0] "X-Api-Key " is not a header field name"#),
        ("logger", #"{"redactHeaders": ["X-Token:"]}"#, #"logger: redactHeaders[0] "X-Token:" is not a header field name"#),
        // A list that replaces the defaults: an entry that matches nothing turned redaction off.
        ("logger", #"{"redactQuery": ["token", "sig "]}"#, #"logger: redactQuery[1] "sig " is not a parameter name"#),
        ("logger", #"{"redactQuery": [""]}"#, #"logger: redactQuery[0] "" is not a parameter name"#),
        ("logger", #"{"redactQuery": ["_-"]}"#, #"logger: redactQuery[0] "_-" is not a parameter name"#),
        ("logger", #"{"redactFields": ["-_"]}"#, #"logger: redactFields[0] "-_" is not a field name"#),
        ("logger", #"{"redactFields": ["token", " password"]}"#, #"logger: redactFields[1] " password" is not a field name"#),
        ("logger", #"{"redactStoreKeys": ["access_token", ""]}"#, #"logger: redactStoreKeys[1] "" is not a store key"#),
        ("access-token", #"{"origins": []}"#, "access-token: origins must list at least one origin (leave it out for https and loopback)"),
        (
            "credentials", #"{"credentials": [{"host": "https://api.example.com", "user": "u", "password": "p"}]}"#,
            "credentials: credentials[0].host \"https://api.example.com\" is not a host name: write the host alone (no scheme, port, path "
                + "or trailing dot); the port goes in port"
        ),
        (
            "credentials", #"{"credentials": [{"host": "api.example.com:443", "user": "u", "password": "p"}]}"#,
            "credentials: credentials[0].host \"api.example.com:443\" is not a host name: write the host alone (no scheme, port, path "
                + "or trailing dot); the port goes in port"
        ),
        (
            // An ideographic full stop is IDNA's dot: a trailing one too.
            "credentials", #"{"credentials": [{"host": "bücher.example。", "user": "u", "password": "p"}]}"#,
            "credentials: credentials[0].host \"bücher.example。\" is not a host name: write the host alone (no scheme, port, path "
                + "or trailing dot); the port goes in port"
        ),
        // User information, a pattern, brackets round a name, or an IPv6 address that is none:
        // no request's host is ever any of them (they were kept, and never answered).
        (
            "credentials", #"{"credentials": [{"host": "svc@api.example.com", "user": "u", "password": "p"}]}"#,
            "credentials: credentials[0].host \"svc@api.example.com\" is not a host name: write the host alone (no scheme, port, path "
                + "or trailing dot); the port goes in port"
        ),
        (
            "credentials", #"{"credentials": [{"host": "*.example.com", "user": "u", "password": "p"}]}"#,
            "credentials: credentials[0].host \"*.example.com\" is not a host name: write the host alone (no scheme, port, path "
                + "or trailing dot); the port goes in port"
        ),
        (
            "credentials", #"{"credentials": [{"host": "[api.example.com]", "user": "u", "password": "p"}]}"#,
            "credentials: credentials[0].host \"[api.example.com]\" is not a host name: write the host alone (no scheme, port, path "
                + "or trailing dot); the port goes in port"
        ),
        (
            "credentials", #"{"credentials": [{"host": "1:2:3", "user": "u", "password": "p"}]}"#,
            "credentials: credentials[0].host \"1:2:3\" is not a host name: write the host alone (no scheme, port, path "
                + "or trailing dot); the port goes in port"
        ),
        (
            "credentials", #"{"credentials": [{"host": "api.example.com.", "user": "u", "password": "p"}]}"#,
            "credentials: credentials[0].host \"api.example.com.\" is not a host name: write the host alone (no scheme, port, path "
                + "or trailing dot); the port goes in port"
        ),
        (
            "credentials", #"{"credentials": [{"host": "h", "user": "u:x", "password": "p"}]}"#,
            "credentials: credentials[0].user must not hold a colon: Basic credentials are split at the first one"
        ),
        (
            "credentials", #"{"credentials": [{"host": "h", "user": "u", "password": "p", "realm": ""}]}"#,
            "credentials: credentials[0].realm must not be empty: leave it out to answer any realm"
        ),
        ("signature", #"{"scheme": "sha1"}"#, #"signature: scheme must be one of hmac-sha256, md5-sorted, not "sha1""#),
        ("signature", #"{"placement": "body"}"#, #"signature: placement must be one of header, query, not "body""#),
        ("signature", #"{"keyId": ""}"#, "signature: keyId must not be empty"),
        ("signature", #"{"secretEnv": ""}"#, #"signature: secretEnv must name an environment variable, not """#),
        ("signature", #"{"secretFile": ""}"#, #"signature: secretFile must name a file, not """#),
        (
            "signature", #"{"scheme": "md5-sorted", "placement": "query"}"#,
            "signature: placement query applies to hmac-sha256 only: md5-sorted adds sign where the parameters came from"
        ),
        ("cache", #"{"staleIfError": -1}"#, "cache: staleIfError must be between 0 and 31536000, not -1"),
        ("cache", #"{"directory": "relative/dir"}"#, "cache: directory must be an absolute path"),
        ("cache", #"{"maxMemoryEntries": -1}"#, "cache: maxMemoryEntries must be between 0 and 1000000, not -1"),
        (
            "cache", #"{"maxMemoryEntries": 0}"#,
            "cache: maxMemoryEntries 0 keeps nothing in memory and needs a directory to keep responses in"
        ),
        ("cache", #"{"authorized": "share"}"#, #"cache: authorized must be one of partition, refuse, not "share""#),
        (
            "cache", #"{"colour": "red"}"#,
            "cache: unknown key \"colour\"; known keys: authorized, directory, maxDiskBytes, maxMemoryBytes, maxMemoryEntries, staleIfError"
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

extension ContribConfigTests {
    /// `null` is an absent key for the logger's `file` too, as for every other key: it was
    /// refused as a file named with another output.
    /// `"credentials": null` is no entries, as an absent key (every other key reads `null` so).
    @Test func theCredentialsNullListIsNoEntries() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let provider: Provider<Bin> = try f.provider([("credentials", ["credentials": NSNull()])])
        #expect(provider.interceptors.count == 1)
    }

    @Test func theLoggersNullFileIsNoFile() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        #expect(throws: Never.self) { _ = try f.provider([("logger", ["output": "stderr", "file": NSNull()])]) as Provider<Bin> }
    }
}

/// The logger's file and the cache's directory are refused when another user could read, forge
/// or redirect them; nothing found on disk is `chmod`ed into shape.
@Suite("contrib plugins refuse unsafe files and directories")
struct ContribFileSafetyTests {
    func refusal(_ f: PluginFixtures, _ plugin: String, _ config: [String: Any]) -> String? {
        let error = loadError { _ = try f.provider([(plugin, config)]) as Provider<Bin> }
        #expect(error?.kind == .createFailed)
        #expect(error?.plugin == plugin)
        return error?.reason
    }

    @Test func theLoggerRefusesASymlinkAndAFileOthersCanReadOrOwn() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let target = f.root + "/target.log"
        #expect(FileManager.default.createFile(atPath: target, contents: nil, attributes: [.posixPermissions: 0o600]))
        let link = f.root + "/link.log"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(
            refusal(f, "logger", ["output": "file", "file": link])
                == "logger: file \(link.debugDescription) is a symbolic link; name the file itself")
        let shared = f.root + "/shared.log"
        #expect(FileManager.default.createFile(atPath: shared, contents: nil, attributes: [.posixPermissions: 0o644]))
        chmod(shared, 0o644)
        #expect(
            refusal(f, "logger", ["output": "file", "file": shared])
                == "logger: file \(shared.debugDescription) has mode 644: group or others may read or write it; chmod 600 it")
        var info = stat()
        #expect(stat(shared, &info) == 0 && info.st_mode & 0o777 == 0o644)
        if geteuid() == 0 {
            let foreign = f.root + "/foreign.log"
            #expect(FileManager.default.createFile(atPath: foreign, contents: nil, attributes: [.posixPermissions: 0o600]))
            #expect(chown(foreign, 4242, 4242) == 0)
            #expect(
                refusal(f, "logger", ["output": "file", "file": foreign])
                    == "logger: file \(foreign.debugDescription) is owned by uid 4242, not the current user (uid 0)")
        }
        // A FIFO is refused at once, with no reader too (its open blocked the creation for good).
        let fifo = f.root + "/fifo.log"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(refusal(f, "logger", ["output": "file", "file": fifo]) == "logger: file \(fifo.debugDescription) is not a regular file")
        // A new file is created 0600 and accepted.
        let fresh = f.root + "/fresh.log"
        _ = try f.provider([("logger", ["output": "file", "file": fresh])]) as Provider<Bin>
        #expect(stat(fresh, &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    /// A configuration refused for a value read after the directory (`authorized`,
    /// `staleIfError`) leaves no directory and no `partition.key` behind.
    @Test func aRefusedCacheConfigurationMakesNoDirectory() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        for (key, value) in [("authorized", "bogus") as (String, Any), ("staleIfError", -1), ("maxDiskBytes", 0)] {
            let directory = f.root + "/cache-\(key)"
            #expect(refusal(f, "cache", ["directory": directory, key: value]) != nil)
            #expect(!FileManager.default.fileExists(atPath: directory), "\(key)")
        }
    }

    @Test func theCacheRefusesADirectoryOthersCanEnterOrOwnAndLeavesItAlone() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let open = f.root + "/open-cache"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: false)
        chmod(open, 0o755)
        #expect(
            refusal(f, "cache", ["directory": open])
                == "cache: directory \(open) is refused: it has mode 755: group or others may enter it; chmod 700 it")
        var info = stat()
        #expect(stat(open, &info) == 0 && info.st_mode & 0o777 == 0o755)
        let link = f.root + "/linked-cache"
        let real = f.root + "/real-cache"
        try FileManager.default.createDirectory(atPath: real, withIntermediateDirectories: false)
        chmod(real, 0o700)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        #expect(refusal(f, "cache", ["directory": link]) == "cache: directory \(link) is refused: it is a symbolic link; name the directory itself")
        if geteuid() == 0 {
            let foreign = f.root + "/foreign-cache"
            try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: false)
            chmod(foreign, 0o700)
            #expect(chown(foreign, 4242, 4242) == 0)
            #expect(
                refusal(f, "cache", ["directory": foreign])
                    == "cache: directory \(foreign) is refused: it is owned by uid 4242, not the current user (uid 0)")
        }
        // A new directory is created 0700 and accepted.
        let fresh = f.root + "/fresh-cache/sub"
        _ = try f.provider([("cache", ["directory": fresh])]) as Provider<Bin>
        #expect(stat(fresh, &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    @Test func theCacheRefusesAPartitionKeyOthersCanReadOrOwnOrOfTheWrongSize() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let directory = f.root + "/cache"
        _ = try f.provider([("cache", ["directory": directory])]) as Provider<Bin>
        let key = directory + "/partition.key"
        var info = stat()
        #expect(stat(key, &info) == 0 && info.st_mode & 0o777 == 0o600 && info.st_size == 32)
        // The same words as the logger's file and the cache's directory checks.
        chmod(key, 0o644)
        #expect(
            refusal(f, "cache", ["directory": directory])
                == "cache: directory \(directory) is refused: partition.key has mode 644: group or others may read or write it; chmod 600 it")
        #expect(stat(key, &info) == 0 && info.st_mode & 0o777 == 0o644)
        chmod(key, 0o600)
        if geteuid() == 0 {
            #expect(chown(key, 4242, 4242) == 0)
            #expect(
                refusal(f, "cache", ["directory": directory])
                    == "cache: directory \(directory) is refused: partition.key is owned by uid 4242, not the current user (uid 0)")
            #expect(chown(key, 0, 0) == 0)
        }
        #expect(truncate(key, 16) == 0)
        #expect(
            refusal(f, "cache", ["directory": directory])
                == "cache: directory \(directory) is refused: partition.key has 16 bytes; a partition key has 32 (remove the file to make a new one)")
        // Removed, a new key is made and the directory accepted again.
        #expect(unlink(key) == 0)
        _ = try f.provider([("cache", ["directory": directory])]) as Provider<Bin>
        #expect(stat(key, &info) == 0 && info.st_size == 32)
    }
}
