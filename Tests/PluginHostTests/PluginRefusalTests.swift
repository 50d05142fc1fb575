import Dispatch
import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every refusal of the loader, each with its own fixture, asserting kind, file, JSON path and reason.
@Suite("Plugin loader refusals")
struct PluginRefusalTests {
    func load(_ f: PluginFixtures, _ url: URL) -> PluginLoadError? {
        loadError { _ = try PluginLoader.load(manifest: url, services: PluginServices()) }
    }

    // MARK: Manifest

    @Test func manifestThatIsNotJSON() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let url = try f.manifest(raw: Data("{ plugins: [".utf8))
        let error = load(f, url)
        #expect(error?.kind == .notJSON)
        #expect(error?.file == url.path)
        #expect(error?.reason.hasPrefix("not valid JSON") == true)
    }

    @Test func manifestThatDoesNotExist() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let error = load(f, URL(fileURLWithPath: f.root + "/missing.json"))
        #expect(error == PluginLoadError(.unreadable, file: f.root + "/missing.json", reason: "no such file"))
    }

    /// A key that is no identifier is named in brackets (`["a.b"]`): written after a dot, the
    /// path read as member `b` of member `a`.
    @Test func aKeyThatIsNoIdentifierIsQuotedInThePath() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let root = try f.manifest([["name": "alpha"]], extra: ["a.b": 1])
        #expect(load(f, root)?.jsonPath == #"["a.b"]"#)
        let entry = try f.manifest([["name": "alpha", "col our": "red"]])
        #expect(load(f, entry)?.jsonPath == #"plugins[0]["col our"]"#)
        let quoted = try f.manifest([["name": "alpha", #"say "hi"\"#: 1]])
        #expect(load(f, quoted)?.jsonPath == #"plugins[0]["say \"hi\"\\"]"#)
        let repeated = try f.manifest(raw: Data(#"{"pluginDirectories": [], "plugins": [], "x.y": 1, "x.y": 2}"#.utf8))
        #expect(load(f, repeated)?.jsonPath == #"["x.y"]"#)
        // An identifier stays dotted.
        #expect(load(f, try f.manifest([["name": "alpha", "colour_2": "red"]]))?.jsonPath == "plugins[0].colour_2")
    }

    @Test func manifestWithAnUnknownKey() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let url = try f.manifest([["name": "alpha", "colour": "red"]])
        let error = load(f, url)
        #expect(
            error
                == PluginLoadError(
                    .schema, file: url.path, jsonPath: "plugins[0].colour",
                    reason: "unknown key \"colour\"; expected one of comment, config, enabled, name, sha256"))
        #expect(
            error?.description == "\(url.path): plugins[0].colour: unknown key \"colour\"; expected one of comment, config, enabled, name, sha256")
    }

    @Test func manifestWithAConfigThatIsNotAnObject() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let url = try f.manifest([["name": "a"], ["name": "b"], ["name": "c", "config": "level=basic"]])
        #expect(load(f, url) == PluginLoadError(.schema, file: url.path, jsonPath: "plugins[2].config", reason: "must be an object"))
    }

    @Test func manifestWithWrongTypes() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let enabled = try f.manifest([["name": "a", "enabled": "yes"]], file: "enabled.json")
        #expect(load(f, enabled) == PluginLoadError(.schema, file: enabled.path, jsonPath: "plugins[0].enabled", reason: "must be true or false"))
        let directories = try f.manifest([], extra: ["pluginDirectories": "plugins"], file: "dirs.json")
        #expect(load(f, directories) == PluginLoadError(.schema, file: directories.path, jsonPath: "pluginDirectories", reason: "must be an array"))
        let pin = try f.manifest([["name": "a", "sha256": "abc"]], file: "pin.json")
        #expect(
            load(f, pin)
                == PluginLoadError(.schema, file: pin.path, jsonPath: "plugins[0].sha256", reason: "must be 64 hexadecimal digits (a SHA-256)"))
    }

    @Test func manifestWithAnEmptyName() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let url = try f.manifest([["name": "alpha"], ["name": "  "]])
        #expect(load(f, url) == PluginLoadError(.schema, file: url.path, jsonPath: "plugins[1].name", reason: "must not be empty"))
    }

    @Test func manifestWithANameThatIsAPath() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        // `./alpha` and `x/../alpha` would reach alpha.plugin under another name: past
        // `enabled: false` on alpha's own entry, or as a second instance of it.
        let reason = "must be a plugin name: one path component, without \"/\" and not starting with \".\""
        for (index, name) in ["./alpha", "x/../alpha", "..", ".alpha", "sub/alpha"].enumerated() {
            let url = try f.manifest([["name": "alpha", "enabled": false], ["name": name]], file: "path\(index).json")
            #expect(load(f, url) == PluginLoadError(.schema, file: url.path, jsonPath: "plugins[1].name", reason: reason), "\(name)")
        }
    }

    @Test func manifestPinOfFullwidthDigits() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        // `Character.isHexDigit` is true of the fullwidth forms (U+FF41 is ａ): a pin is ASCII.
        let url = try f.manifest([["name": "alpha", "sha256": String(repeating: "\u{FF41}", count: 64)]])
        #expect(
            load(f, url)
                == PluginLoadError(.schema, file: url.path, jsonPath: "plugins[0].sha256", reason: "must be 64 hexadecimal digits (a SHA-256)"))
    }

    /// A retry after a negative delay fails the request with one message, whether the plugin
    /// asking is loaded (the SDK checks before the host refuses it) or compiled in.
    @Test func aRetryAfterANegativeDelayIsRefusedLoadedAndCompiledIn() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let message = "process asked for a retry after -1.0 s; a delay is a finite number of seconds, 0 or more"
        let loaded = try PluginLoader.load(manifest: try f.manifest([["name": "alpha", "config": ["retryAfter": -1]]]), services: PluginServices())
        struct Negative: Interceptor {
            func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction { .retry(delay: -1) }
        }
        for (name, interceptors) in [("alpha", loaded as [any Interceptor]), ("Negative", [Negative()])] {
            let provider = Provider<Bin>(transport: StubTransport(sample: { _ in .networkResponse(200, Data()) }), interceptors: interceptors)
            let result = await provider.request(try Bin("anything")).result
            guard case .failure(.interceptor(let failing, .process, let text)) = result else {
                Issue.record("expected a process failure, got \(result)")
                continue
            }
            #expect(failing == name)
            #expect(text == message)
        }
    }

    /// A key an object repeats is refused with its path: a reader of the file takes the first
    /// value, where Foundation keeps the last (`enabled` false, then true, loaded the plugin).
    @Test func aKeyRepeatedInAnObjectIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let cases: [(String, String, String)] = [
            (
                #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "alpha", "enabled": false, "enabled": true}]}"#,
                "plugins[0].enabled", "enabled"
            ),
            (#"{"plugins": [{"name": "alpha"}], "pluginDirectories": ["plugins"], "plugins": []}"#, "plugins", "plugins"),
            (
                #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "a"}, {"name": "b", "config": {"level": 1, "lev\u0065l": 2}}]}"#,
                "plugins[1].config.level", "level"
            ),
        ]
        for (index, (json, path, key)) in cases.enumerated() {
            let url = try f.manifest(raw: Data(json.utf8), file: "duplicate\(index).json")
            #expect(
                load(f, url) == PluginLoadError(.schema, file: url.path, jsonPath: path, reason: "duplicate key \(key.debugDescription)"), "\(json)")
        }
        // In UTF-16 or UTF-32 (which Foundation reads), the repetition would not be seen: refused as not UTF-8.
        let repeated = #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "alpha", "enabled": false, "enabled": true}]}"#
        for (index, encoding) in [String.Encoding.utf16BigEndian, .utf16LittleEndian, .utf16, .utf32].enumerated() {
            let url = try f.manifest(raw: try #require(repeated.data(using: encoding)), file: "wide\(index).json")
            let reason = "not UTF-8 (a NUL byte or a UTF-16/UTF-32 byte order mark); save it as UTF-8"
            #expect(load(f, url) == PluginLoadError(.notJSON, file: url.path, reason: reason), "\(encoding)")
        }
        // The same key in two objects is no repetition.
        let twoObjects = #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "a"}, {"name": "b"}]}"#
        let fine = try f.manifest(raw: Data(twoObjects.utf8), file: "fine.json")
        #expect(PluginManifest.problems(in: fine).isEmpty)
    }

    /// A comma after the last element or member is refused as JSON refuses it, naming where:
    /// Foundation's parser took it, where `jq` and Python do not, and the file passed as valid.
    @Test func aTrailingCommaIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let cases: [(String, String, String)] = [
            (#"{"pluginDirectories": ["plugins",], "plugins": []}"#, "pluginDirectories", "element of an array"),
            (#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "alpha" , }]}"#, "plugins[0]", "member of an object"),
            (#"{"pluginDirectories": ["plugins"], "plugins": [{"name": "alpha"}],}"#, "$", "member of an object"),
            (
                #"{"pluginDirectories": ["plugins"], "plugins": [{"name": "a", "config": {"k": [1, 2 ,]}}]}"#, "plugins[0].config.k",
                "element of an array"
            ),
        ]
        for (index, (json, path, what)) in cases.enumerated() {
            let url = try f.manifest(raw: Data(json.utf8), file: "trailing\(index).json")
            #expect(
                PluginManifest.problems(in: url)
                    == [PluginLoadError(.notJSON, file: url.path, jsonPath: path, reason: "not valid JSON (a comma after the last \(what))")],
                "\(json)")
        }
        // In `plugin.json` too.
        let bundle = try f.handBundle(name: "alpha", source: try PluginFixtures.library("AlphaTestPlugin"))
        let pluginJSON = bundle + "/plugin.json"
        var text = try String(contentsOfFile: pluginJSON, encoding: .utf8)
        text = String(text.dropLast(text.hasSuffix("\n") ? 2 : 1)) + ", }"
        try text.write(toFile: pluginJSON, atomically: false, encoding: .utf8)
        #expect(
            load(f, try f.manifest([["name": "alpha"]]))
                == PluginLoadError(
                    .notJSON, file: pluginJSON, jsonPath: "$", plugin: "alpha", reason: "not valid JSON (a comma after the last member of an object)")
        )
    }

    /// A manifest's `comment`, at the top and in an entry, is a string: another value is a schema
    /// error naming where (it was accepted unread).
    @Test func aManifestCommentOfAnotherTypeIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let url = try f.manifest([["name": "alpha", "comment": 42]], extra: ["comment": [1]])
        #expect(
            PluginManifest.problems(in: url) == [
                PluginLoadError(.schema, file: url.path, jsonPath: "comment", reason: "must be a string"),
                PluginLoadError(.schema, file: url.path, jsonPath: "plugins[0].comment", reason: "must be a string"),
            ])
        let fine = try f.manifest([["name": "alpha", "comment": "the first"]], extra: ["comment": "ours"], file: "fine.json")
        #expect(PluginManifest.problems(in: fine).isEmpty)
    }

    /// `abi` numbers are read exactly: a whole number past `Double`'s precision is not rounded,
    /// one past `Int` is out of range, and a fraction hidden past 17 digits is no whole number.
    @Test func pluginJSONNumbersAreReadExactly() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        func bundle(major number: String) throws -> String {
            let directory = try f.handBundle(name: "alpha", source: try PluginFixtures.library("AlphaTestPlugin"))
            let pluginJSON = directory + "/plugin.json"
            var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: pluginJSON))) as? [String: Any])
            object["abi"] = ["major": "MAJOR", "minor": 0]
            var text = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
            text = text.replacingOccurrences(of: #""MAJOR""#, with: number)
            try text.write(toFile: pluginJSON, atomically: false, encoding: .utf8)
            return directory
        }
        let exact = try PluginBundle.read(directory: try bundle(major: "9007199254740993"), pluginDirectory: f.plugins)
        #expect(exact.abi.major == 9_007_199_254_740_993)
        #expect(try PluginBundle.read(directory: try bundle(major: "1.0e0"), pluginDirectory: f.plugins).abi.major == 1)
        let range = "must be a whole number from \(Int.min) to \(Int.max) (it is out of range)"
        for (number, reason) in [
            ("9223372036854775808", range), ("1e19", range), ("1.00000000000000000001", "must be a whole number"), ("1.5", "must be a whole number"),
        ] {
            let directory = try bundle(major: number)
            #expect(
                loadError { _ = try PluginBundle.read(directory: directory, pluginDirectory: f.plugins) }
                    == PluginLoadError(.schema, file: directory + "/plugin.json", jsonPath: "abi.major", reason: reason), "\(number)")
        }
    }

    /// A manifest path that names no regular file (a FIFO would block the read) is refused
    /// before anything reads it.
    @Test func aManifestThatIsNoRegularFileIsRefusedUnread() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let fifo = f.root + "/fifo.json"
        #expect(mkfifo(fifo, 0o644) == 0)
        let url = URL(fileURLWithPath: fifo)
        #expect(load(f, url) == PluginLoadError(.unreadable, file: fifo, reason: "not a regular file"))
        #expect(PluginManifest.problems(in: url) == [PluginLoadError(.unreadable, file: fifo, reason: "not a regular file")])
    }

    @Test func manifestWithADuplicateName() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let url = try f.manifest([["name": "alpha"], ["name": "beta"], ["name": "alpha"]])
        #expect(
            load(f, url)
                == PluginLoadError(
                    .duplicateName, file: url.path, jsonPath: "plugins[2].name", plugin: "alpha",
                    reason: "duplicate plugin name (also at plugins[0].name)"))
    }

    @Test func pluginNotFoundInAnyDirectory() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let url = try f.manifest([["name": "ghost"]])
        #expect(
            load(f, url)
                == PluginLoadError(
                    .pluginNotFound, file: url.path, jsonPath: "plugins[0].name", plugin: "ghost",
                    reason: "no ghost.plugin in \(f.plugins)"))
    }

    @Test func configThePluginRejects() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        try f.bundle("BetaTestPlugin")
        // The error points at the entry to edit: the manifest and the entry's `config`.
        let url = try f.manifest([["name": "beta"], ["name": "alpha", "config": ["throwIn": "nowhere"]]])
        #expect(
            load(f, url)
                == PluginLoadError(
                    .createFailed, file: url.path, jsonPath: "plugins[1].config", plugin: "alpha",
                    reason: #"alpha: throwIn must be one of prepare, willSend, didReceive, process, not "nowhere""#))
        let unknown = try f.manifest([["name": "alpha", "config": ["colour": 1]]], file: "unknown.json")
        #expect(
            load(f, unknown)?.reason
                == "alpha: unknown key \"colour\"; known keys: answerField, event, keep, replace, respond, retryAfter, throwIn")
    }

    @Test func aHookLeftOutOfImplementedHooksIsRefusedAtCreate() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("ForgetfulTestPlugin")
        let url = try f.manifest([["name": "forgetful"]])
        #expect(
            load(f, url)
                == PluginLoadError(
                    .createFailed, file: url.path, jsonPath: "plugins[0].config", plugin: "forgetful",
                    reason: "plugin forgetful implements willSend but its implementedHooks leaves it out: loaded, "
                        + "it would never run; add it to implementedHooks"))
    }

    /// A `create` that fails before the check (its configuration refused) leaves the check to
    /// the next: it was marked done at once, and the fixed manifest then loaded a plugin whose
    /// `willSend` would never run.
    @Test func aConfigurationRefusedFirstStillLeavesTheHookCheckToTheNextLoad() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("ForgetfulTestPlugin")
        let refusing = try f.manifest([["name": "forgetful", "config": ["refuse": true]]], file: "refusing.json")
        #expect(
            load(f, refusing)
                == PluginLoadError(
                    .createFailed, file: refusing.path, jsonPath: "plugins[0].config", plugin: "forgetful",
                    reason: "forgetful: refused as asked"))
        let fixed = try f.manifest([["name": "forgetful"]], file: "fixed.json")
        #expect(
            load(f, fixed)
                == PluginLoadError(
                    .createFailed, file: fixed.path, jsonPath: "plugins[0].config", plugin: "forgetful",
                    reason: "plugin forgetful implements willSend but its implementedHooks leaves it out: loaded, "
                        + "it would never run; add it to implementedHooks"))
    }

    @Test func loadingIsAllOrNothing() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        try f.bundle("BetaTestPlugin")
        let url = try f.manifest([["name": "alpha"], ["name": "beta", "config": ["respond": 7]]])
        let error = loadError { _ = try Provider<Bin>(manifest: url) }
        #expect(error?.kind == .createFailed)
        #expect(error?.plugin == "beta")
        #expect(error?.reason == "beta: respond must be between 100 and 599, not 7")
    }

    // MARK: Libraries

    @Test func libraryFileMissing() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "alpha", bytes: Data("x".utf8), libraryName: "libalpha.so")
        unlink(bundle + "/libalpha.so")
        let url = try f.manifest([["name": "alpha"]])
        #expect(load(f, url) == PluginLoadError(.libraryMissing, file: bundle + "/libalpha.so", plugin: "alpha", reason: "no such file"))
    }

    @Test func garbageBytesAreNotASharedObject() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let garbage = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let bundle = try f.handBundle(name: "x", bytes: garbage, libraryName: "libx.so")
        let error = load(f, try f.manifest([["name": "x"]]))
        #expect(error?.kind == .notSharedObject)
        #expect(error?.file == bundle + "/libx.so")
        #expect(error?.reason.contains("invalid ELF header") == true)
    }

    @Test func libraryWithoutTheEntrySymbol() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "noentry", source: try PluginFixtures.library("NoEntryTestPlugin"))
        let error = load(f, try f.manifest([["name": "noentry"]]))
        #expect(error?.kind == .missingEntrySymbol)
        #expect(error?.file == bundle + "/libplugin.so")
        #expect(error?.reason.hasPrefix("no pluginhost_plugin_v1 symbol: ") == true)
        #expect(error?.reason.contains("undefined symbol") == true)
    }

    @Test func descriptorWithAnotherABIMajor() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "badmajor", source: try PluginFixtures.library("BadMajorTestPlugin"))
        #expect(
            load(f, try f.manifest([["name": "badmajor"]]))
                == PluginLoadError(
                    .abiMismatch, file: bundle + "/libplugin.so", plugin: "badmajor",
                    reason: "the plugin speaks ABI 2.0, the host speaks 1.6 (majors differ)"))
    }

    /// Bytes opened and refused are refused again unopened: a retried load (a reload retried on a
    /// bad bundle) mapped another copy of the library, kept another descriptor and ran its
    /// constructors again, each time.
    @Test func aLibraryRefusedAfterOpeningIsNotOpenedAgain() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let name = "libbadmajor-\(UUID().uuidString).so"
        let bundle = try f.handBundle(name: "badmajor", source: try PluginFixtures.library("BadMajorTestPlugin"), libraryName: name)
        let url = try f.manifest([["name": "badmajor"]])
        for _ in 0..<20 {
            #expect(
                load(f, url)
                    == PluginLoadError(
                        .abiMismatch, file: bundle + "/" + name, plugin: "badmajor",
                        reason: "the plugin speaks ABI 2.0, the host speaks 1.6 (majors differ)"))
        }
        // The memory files this library was mapped from (one per dlopen), by inode.
        let maps = try processMaps()
        let images = Set(maps.split(separator: "\n").filter { $0.contains("pluginhost:" + name) }.map { $0.split(separator: " ")[4] })
        #expect(images.count <= 1)
    }

    /// Loads of new bytes at once map them once: each load mapped its own copy and ran the
    /// library's constructors again (the table of loaded libraries was looked at before, and
    /// filled after, an unserialized `dlopen`).
    @Test func concurrentLoadsOfNewBytesMapThemOnce() async throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let name = "libgamma-\(UUID().uuidString).so"
        // Bytes new to the process: the library with a few random bytes after it.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: try PluginFixtures.library("GammaTestPlugin")))
        bytes.append(contentsOf: RandomBytes.make(16))
        _ = try f.handBundle(name: "gamma", bytes: bytes, libraryName: name)
        let url = try f.manifest([["name": "gamma"]])
        let failures = LockedCounter()
        // On threads of their own, awaited without blocking: loads wait for one another, and a
        // test that held a thread of the concurrency pool or of the global queue meanwhile
        // stalled the timers of every other test running beside it.
        let loads = 4
        let done = LockedCounter()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            for _ in 0..<loads {
                Thread {
                    do {
                        _ = try PluginLoader.load(manifest: url, services: PluginServices())
                    } catch {
                        failures.append(String(describing: error))
                    }
                    if done.increment() == loads { continuation.resume() }
                }.start()
            }
        }
        #expect(failures.log == [])
        // Mapped from a memory file labelled with the library's name, or (where none can be made)
        // from a private copy whose name ends with it: either way, one inode.
        let maps = try processMaps()
        let images = Set(maps.split(separator: "\n").filter { $0.contains(name) }.map { $0.split(separator: " ")[4] })
        #expect(images.count == 1, "\(maps.split(separator: "\n").filter { $0.contains(name) })")
    }

    @Test func descriptorNameThatIsNoPluginName() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "evil", source: try PluginFixtures.library("BadNameTestPlugin"))
        #expect(
            load(f, try f.manifest([["name": "evil"]]))
                == PluginLoadError(
                    .descriptorInvalid, file: bundle + "/libplugin.so", plugin: "evil",
                    reason: #"the descriptor's name "../evil" is not a plugin name (one path component, without "/" and not starting with ".")"#))
    }

    /// A descriptor without a version is refused (a bundle of it would have a `plugin.json`
    /// every load refuses); so is a name of white space only.
    @Test func descriptorWithoutAVersion() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "noversion", source: try PluginFixtures.library("NoVersionTestPlugin"))
        #expect(
            load(f, try f.manifest([["name": "noversion"]]))
                == PluginLoadError(.descriptorInvalid, file: bundle + "/libplugin.so", plugin: "noversion", reason: "the descriptor has no version"))
    }

    @Test func descriptorWithANewerMinor() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "newerminor", source: try PluginFixtures.library("NewerMinorTestPlugin"))
        #expect(
            load(f, try f.manifest([["name": "newerminor"]]))
                == PluginLoadError(
                    .abiMismatch, file: bundle + "/libplugin.so", plugin: "newerminor",
                    reason: "the plugin needs ABI 1.7, newer than the host's 1.6"))
    }

    @Test func descriptorStructTooSmall() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "smalldescriptor", source: try PluginFixtures.library("SmallDescriptorTestPlugin"))
        let error = load(f, try f.manifest([["name": "smalldescriptor"]]))
        #expect(error?.kind == .descriptorInvalid)
        #expect(error?.file == bundle + "/libplugin.so")
        #expect(error?.reason.hasPrefix("descriptor is 16 bytes; the smallest (ABI 1.0) is ") == true)
    }

    @Test func descriptorNameDiffersFromTheBundle() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "beta", source: try PluginFixtures.library("AlphaTestPlugin"))
        #expect(
            load(f, try f.manifest([["name": "beta"]]))
                == PluginLoadError(
                    .nameMismatch, file: bundle + "/libplugin.so", plugin: "beta",
                    reason: "the library's descriptor names \"alpha\", the bundle is beta.plugin"))
    }

    @Test func pluginJSONNameDiffersFromTheDirectory() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "alpha", source: try PluginFixtures.library("AlphaTestPlugin"), overrides: ["name": "other"])
        #expect(
            load(f, try f.manifest([["name": "alpha"]]))
                == PluginLoadError(
                    .nameMismatch, file: bundle + "/plugin.json", jsonPath: "name", plugin: "alpha",
                    reason: "plugin.json names \"other\" but the bundle is alpha.plugin"))
    }

    /// `license`, `buildSignature` and `comment` are strings: another type is a schema error
    /// naming the key (they were accepted unread).
    @Test(arguments: ["license", "buildSignature", "comment"]) func pluginJSONStringKeysOfAnotherType(_ key: String) throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "alpha", source: try PluginFixtures.library("AlphaTestPlugin"), overrides: [key: 42])
        #expect(
            load(f, try f.manifest([["name": "alpha"]]))
                == PluginLoadError(.schema, file: bundle + "/plugin.json", jsonPath: key, plugin: "alpha", reason: "must be a string"))
    }

    @Test func createFailingWithAMessage() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("CPluginTestPlugin")
        let url = try f.manifest([["name": "cplugin", "config": ["fail": "disk on fire"]]])
        #expect(
            load(f, url)
                == PluginLoadError(.createFailed, file: url.path, jsonPath: "plugins[0].config", plugin: "cplugin", reason: "disk on fire"))
    }

    @Test func sha256MismatchWithPluginJSON() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let wrong = String(repeating: "0", count: 64)
        let library = try PluginFixtures.library("AlphaTestPlugin")
        let actual = SHA256.hex(SHA256.hash(try Data(contentsOf: URL(fileURLWithPath: library))))
        let bundle = try f.handBundle(name: "alpha", source: library, overrides: ["sha256": wrong])
        #expect(
            load(f, try f.manifest([["name": "alpha"]]))
                == PluginLoadError(
                    .digestMismatch, file: bundle + "/libplugin.so", plugin: "alpha",
                    reason: "sha256 mismatch: the file is \(actual), plugin.json says \(wrong)"))
    }

    @Test func sha256MismatchWithTheManifestPin() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.bundle("AlphaTestPlugin")
        let pin = String(repeating: "ab", count: 32)
        let error = load(f, try f.manifest([["name": "alpha", "sha256": pin]]))
        #expect(error?.kind == .digestMismatch)
        #expect(error?.file == bundle + "/libAlphaTestPlugin.so")
        #expect(error?.reason.hasSuffix("the manifest (plugins[0].sha256) says \(pin)") == true)
    }

    @Test func groupWritableLibraryIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.bundle("AlphaTestPlugin")
        chmod(bundle + "/libAlphaTestPlugin.so", 0o775)
        #expect(
            load(f, try f.manifest([["name": "alpha"]]))
                == PluginLoadError(
                    .insecurePermissions, file: bundle + "/libAlphaTestPlugin.so", plugin: "alpha",
                    reason: "mode 0775 (writable by group), owner \(LoadPathPermissionTests.me), is the library; "
                        + "remove group and other write access (chmod go-w)"))
    }

    @Test func worldWritableBundleDirectoryIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.bundle("AlphaTestPlugin")
        chmod(bundle, 0o777)
        #expect(
            load(f, try f.manifest([["name": "alpha"]]))
                == PluginLoadError(
                    .insecurePermissions, file: bundle, plugin: "alpha",
                    reason: "mode 0777 (writable by group and others), owner \(LoadPathPermissionTests.me), is the bundle directory; "
                        + "remove group and other write access (chmod go-w)"))
    }

    @Test func libraryPathWithDotDotEscapes() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "alpha", bytes: Data(), libraryName: "../../evil.so")
        #expect(
            load(f, try f.manifest([["name": "alpha"]]))
                == PluginLoadError(
                    .pathEscape, file: bundle + "/plugin.json", jsonPath: "library", plugin: "alpha",
                    reason: "library must be a file name inside the bundle, not \"../../evil.so\""))
    }

    @Test func bundleSymlinkPointingOutsideEscapes() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let outside = try PluginFixtures()
        defer { outside.remove() }
        let real = try outside.bundle("AlphaTestPlugin")
        try FileManager.default.createSymbolicLink(atPath: f.plugins + "/alpha.plugin", withDestinationPath: real)
        let error = load(f, try f.manifest([["name": "alpha"]]))
        #expect(error?.kind == .pathEscape)
        #expect(error?.file == f.plugins + "/alpha.plugin")
        #expect(error?.reason.hasSuffix("outside the plugin directory \(FileManager.default.destinationOrSelf(f.plugins))") == true)
    }

    @Test func librarySymlinkPointingOutsideEscapes() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.handBundle(name: "alpha", source: try PluginFixtures.library("AlphaTestPlugin"), libraryName: "liblink.so")
        unlink(bundle + "/liblink.so")
        try FileManager.default.createSymbolicLink(atPath: bundle + "/liblink.so", withDestinationPath: try PluginFixtures.library("AlphaTestPlugin"))
        let error = load(f, try f.manifest([["name": "alpha"]]))
        #expect(error?.kind == .pathEscape)
        #expect(error?.file == bundle + "/liblink.so")
        #expect(error?.reason.hasSuffix("outside its bundle") == true)
    }

    @Test func everyKindDescribesItself() {
        let error = PluginLoadError(.schema, file: "/m.json", jsonPath: "plugins[2].config", plugin: "logger", reason: "must be an object")
        #expect(error.description == "/m.json: plugins[2].config: plugin \"logger\": must be an object")
        #expect(PluginLoadError(.libraryMissing, file: "/x.so", reason: "no such file").description == "/x.so: no such file")
    }
}

extension FileManager {
    /// The path with symlinks resolved.
    func destinationOrSelf(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    }
}

/// `/proc/self/maps` whole, read to its end (its size reads as 0: a read by size stopped short once
/// the process had many mappings, and a library mapped late was not in it).
func processMaps() throws -> String {
    let fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CocoaError(.fileReadUnknown) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        bytes += chunk[0..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}
