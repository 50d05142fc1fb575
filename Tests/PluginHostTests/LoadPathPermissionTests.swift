import Foundation
import PluginHost
import PluginSDK
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The StrictModes rule on everything that decides which code runs: the manifest, plugin
/// directories, bundle directories, `plugin.json`, libraries, and every directory above them.
@Suite("Load path permissions")
struct LoadPathPermissionTests {
    /// How the refusals name the current user as an owner.
    static var me: String { geteuid() == 0 ? "root" : "uid \(geteuid())" }
    static let chmodHint = "remove group and other write access (chmod go-w)"

    func load(_ url: URL) -> PluginLoadError? {
        loadError { _ = try PluginLoader.load(manifest: url, services: PluginServices()) }
    }

    /// A FIFO as a bundle's `plugin.json` is refused before anything reads it (the read blocked
    /// for good, and a reload with it).
    @Test func aFIFOAsTheBundleDescriptorIsRefusedUnread() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let descriptor = f.plugins + "/alpha.plugin/plugin.json"
        try FileManager.default.removeItem(atPath: descriptor)
        #expect(mkfifo(descriptor, 0o644) == 0)
        #expect(
            load(try f.manifest([["name": "alpha"]])) == PluginLoadError(.unreadable, file: descriptor, plugin: "alpha", reason: "not a regular file")
        )
    }

    @Test func aManifestWritableByOthersIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let url = try f.manifest([["name": "alpha"]])
        chmod(url.path, 0o666)
        let expected = PluginLoadError(
            .insecurePermissions, file: url.path,
            reason: "mode 0666 (writable by group and others), owner \(Self.me), is the manifest; \(Self.chmodHint)")
        #expect(load(url) == expected)
        #expect(throws: expected) { try Provider<Bin>(manifest: url) }
        #expect(PluginManifest.problems(in: url).first == expected)
    }

    @Test func aWorldWritablePluginDirectoryIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        chmod(f.plugins, 0o777)
        #expect(
            load(try f.manifest([["name": "alpha"]]))
                == PluginLoadError(
                    .insecurePermissions, file: f.plugins,
                    reason: "mode 0777 (writable by group and others), owner \(Self.me), is the plugin directory; \(Self.chmodHint)"))
    }

    /// A plugin directory that does not exist is judged by the nearest directory above it that
    /// does: in a directory others may write to (sticky or not), whoever made it first would
    /// decide every later load (refused from then on).
    @Test func aMissingPluginDirectoryOthersMayMakeIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let shared = f.root + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        chmod(shared, 0o1777)
        let missing = shared + "/later/plugins"
        let url = try f.manifest([["name": "alpha"]], extra: ["pluginDirectories": ["plugins", missing]])
        let expected = PluginLoadError(
            .insecurePermissions, file: shared,
            reason: "mode 1777 (writable by group and others), owner \(Self.me), is the nearest directory above the plugin directory "
                + "\(missing) (which does not exist: who may write here may make it); \(Self.chmodHint)")
        #expect(load(url) == expected)
        #expect(PluginLoader.directoryRefusals(of: try PluginManifest.read(url)) == [expected])
        // Above a directory only its owner may write to, a missing one is no concern.
        chmod(shared, 0o755)
        #expect(try PluginLoader.load(manifest: url, services: PluginServices()).map(\.name) == ["alpha"])
        #expect(PluginLoader.directoryRefusals(of: try PluginManifest.read(url)).isEmpty)
    }

    /// A plugin directory that is a symbolic link to nothing is refused: whoever makes its target
    /// decides what is loaded.
    @Test func aPluginDirectoryLinkedToNothingIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let link = f.root + "/elsewhere"
        #expect(symlink(f.root + "/not-yet", link) == 0)
        let url = try f.manifest([["name": "alpha"]], extra: ["pluginDirectories": ["plugins", "elsewhere/plugins"]])
        #expect(
            load(url)
                == PluginLoadError(
                    .insecurePermissions, file: link,
                    reason: "a symbolic link to nothing on the path of the plugin directory \(link)/plugins; whoever may make its "
                        + "target decides what is loaded: remove it or make its target"))
    }

    @Test func aPluginJSONWritableByOthersIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.bundle("AlphaTestPlugin")
        chmod(bundle + "/plugin.json", 0o666)
        #expect(
            load(try f.manifest([["name": "alpha"]]))
                == PluginLoadError(
                    .insecurePermissions, file: bundle + "/plugin.json", plugin: "alpha",
                    reason: "mode 0666 (writable by group and others), owner \(Self.me), is the bundle descriptor; \(Self.chmodHint)"))
    }

    @Test func aWorldWritableDirectoryHoldingTheManifestIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let url = try f.manifest([["name": "alpha"]])
        chmod(f.root, 0o777)
        #expect(
            load(url)
                == PluginLoadError(
                    .insecurePermissions, file: f.root,
                    reason:
                        "mode 0777 (writable by group and others), owner \(Self.me), is an ancestor of the manifest \(url.path); \(Self.chmodHint)"))
    }

    @Test func anAncestorThreeLevelsUpIsChecked() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let deep = f.root + "/a/b/c"
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        for directory in ["/a", "/a/b", "/a/b/c"] { chmod(f.root + directory, 0o755) }
        let url = try f.manifest(
            raw: JSONSerialization.data(withJSONObject: ["pluginDirectories": [f.plugins], "plugins": [["name": "alpha"]]]),
            file: "a/b/c/manifest.json")
        #expect(throws: Never.self) { try PluginLoader.load(manifest: url, services: PluginServices()) }
        chmod(f.root + "/a", 0o775)
        #expect(
            load(url)
                == PluginLoadError(
                    .insecurePermissions, file: f.root + "/a",
                    reason: "mode 0775 (writable by group), owner \(Self.me), is an ancestor of the manifest \(url.path); \(Self.chmodHint)"))
    }

    @Test func aSymlinkedPluginDirectoryIsJudgedByItsTarget() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let target = try PluginFixtures()
        defer { target.remove() }
        try target.bundle("AlphaTestPlugin")
        let link = f.root + "/linked"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target.plugins)
        let url = try f.manifest(raw: JSONSerialization.data(withJSONObject: ["pluginDirectories": ["linked"], "plugins": [["name": "alpha"]]]))
        #expect(throws: Never.self) { try PluginLoader.load(manifest: url, services: PluginServices()) }
        chmod(target.plugins, 0o777)
        let real = FileManager.default.destinationOrSelf(target.plugins)
        #expect(
            load(url)
                == PluginLoadError(
                    .insecurePermissions, file: real,
                    reason: "mode 0777 (writable by group and others), owner \(Self.me), is the target of the plugin directory \(link) "
                        + "(a symbolic link); \(Self.chmodHint)"))
    }

    /// `conf/../plugins` where `conf` is a symlink: the kernel finds the directory beside the
    /// link's target, not `plugins` beside the link (which the fixture has, and which is fine);
    /// the check judges what the kernel finds.
    @Test func aPluginDirectoryThroughASymlinkAndDotDotIsJudgedWhereTheKernelFindsIt() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let deep = f.root + "/deep"
        try FileManager.default.createDirectory(atPath: deep + "/conf", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: deep + "/plugins", withIntermediateDirectories: true)
        chmod(deep, 0o755)
        chmod(deep + "/conf", 0o755)
        chmod(deep + "/plugins", 0o777)
        try FileManager.default.createSymbolicLink(atPath: f.root + "/conf", withDestinationPath: deep + "/conf")
        let url = try f.manifest(
            raw: JSONSerialization.data(withJSONObject: ["pluginDirectories": ["conf/../plugins"], "plugins": [["name": "alpha"]]]))
        let real = FileManager.default.destinationOrSelf(deep + "/plugins")
        #expect(
            load(url)
                == PluginLoadError(
                    .insecurePermissions, file: real,
                    reason: "mode 0777 (writable by group and others), owner \(Self.me), is the target of the plugin directory "
                        + "\(f.root)/conf/../plugins (a symbolic link); \(Self.chmodHint)"))
    }

    /// The same, with a sound directory where the kernel finds it and none beside the link: the
    /// plugins load. The directories above the path with its `..` folded away (`plugins` beside the
    /// link, which the kernel never visits) were judged too, and a missing one refused the load.
    @Test func aPluginDirectoryThroughASymlinkAndDotDotIsNotJudgedWhereTheKernelDoesNotGo() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let deep = f.root + "/deep"
        try FileManager.default.createDirectory(atPath: deep + "/conf", withIntermediateDirectories: true)
        chmod(deep, 0o755)
        chmod(deep + "/conf", 0o755)
        try FileManager.default.moveItem(atPath: f.plugins, toPath: deep + "/plugins")
        try FileManager.default.createSymbolicLink(atPath: f.root + "/conf", withDestinationPath: deep + "/conf")
        let url = try f.manifest(
            raw: JSONSerialization.data(withJSONObject: ["pluginDirectories": ["conf/../plugins"], "plugins": [["name": "alpha"]]]))
        let plugins = try PluginLoader.load(manifest: url, services: PluginServices())
        #expect(plugins.map(\.name) == ["alpha"])
    }

    /// `app -> deploy/current -> releases/7`: `deploy`, which holds the link `current`, is on
    /// neither the path as written nor the path resolved, and whoever may write in it may point
    /// `current` elsewhere. It is judged too.
    @Test func aDirectoryHoldingALinkOnTheWayIsJudged() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let manager = FileManager.default
        try manager.createDirectory(atPath: f.root + "/releases/7", withIntermediateDirectories: true)
        try manager.createDirectory(atPath: f.root + "/deploy", withIntermediateDirectories: true)
        for directory in ["/releases", "/releases/7", "/deploy"] { chmod(f.root + directory, 0o755) }
        try manager.moveItem(atPath: f.plugins, toPath: f.root + "/releases/7/plugins")
        try manager.createSymbolicLink(atPath: f.root + "/deploy/current", withDestinationPath: f.root + "/releases/7")
        try manager.createSymbolicLink(atPath: f.root + "/app", withDestinationPath: f.root + "/deploy/current")
        let url = try f.manifest(raw: JSONSerialization.data(withJSONObject: ["pluginDirectories": ["app/plugins"], "plugins": [["name": "alpha"]]]))
        #expect(throws: Never.self) { try PluginLoader.load(manifest: url, services: PluginServices()) }
        chmod(f.root + "/deploy", 0o775)
        #expect(
            load(url)
                == PluginLoadError(
                    .insecurePermissions, file: f.root + "/deploy",
                    reason: "mode 0775 (writable by group), owner \(Self.me), holds the symbolic link \(f.root)/deploy/current on the path of "
                        + "the plugin directory \(f.root)/app/plugins; \(Self.chmodHint)"))
    }

    /// `app -> shared/cfg/current -> releases/7`: `shared`, passed through on the way `app`
    /// leads before the link `current` is found, is on neither chain, nor does it hold a link;
    /// whoever may write in it may put another `cfg` in its place between the check and the
    /// read. It is judged too.
    @Test func aDirectoryPassedThroughOnTheWayToALinkIsJudged() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        try f.bundle("AlphaTestPlugin")
        let manager = FileManager.default
        try manager.createDirectory(atPath: f.root + "/releases/7", withIntermediateDirectories: true)
        try manager.createDirectory(atPath: f.root + "/shared/cfg", withIntermediateDirectories: true)
        for directory in ["/releases", "/releases/7", "/shared", "/shared/cfg"] { chmod(f.root + directory, 0o755) }
        try manager.moveItem(atPath: f.plugins, toPath: f.root + "/releases/7/plugins")
        try manager.createSymbolicLink(atPath: f.root + "/shared/cfg/current", withDestinationPath: f.root + "/releases/7")
        try manager.createSymbolicLink(atPath: f.root + "/app", withDestinationPath: f.root + "/shared/cfg/current")
        let url = try f.manifest(raw: JSONSerialization.data(withJSONObject: ["pluginDirectories": ["app/plugins"], "plugins": [["name": "alpha"]]]))
        #expect(throws: Never.self) { try PluginLoader.load(manifest: url, services: PluginServices()) }
        chmod(f.root + "/shared", 0o777)
        #expect(
            load(url)
                == PluginLoadError(
                    .insecurePermissions, file: f.root + "/shared",
                    reason: "mode 0777 (writable by group and others), owner \(Self.me), is passed through on the way the symbolic link "
                        + "\(f.root)/app leads, on the path of the plugin directory \(f.root)/app/plugins; \(Self.chmodHint)"))
    }

    @Test func aRootOwnedStickyAncestorIsAccepted() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        if geteuid() == 0 {
            // Like /tmp: writable by all, but nobody can replace what others put in it.
            let shared = f.root + "/shared"
            let app = shared + "/app"
            try FileManager.default.createDirectory(atPath: app + "/plugins", withIntermediateDirectories: true)
            chmod(shared, 0o1777)
            chmod(app, 0o755)
            chmod(app + "/plugins", 0o755)
            try PluginBundle.create(fromLibrary: try PluginFixtures.library("AlphaTestPlugin"), in: app + "/plugins")
            let url = try f.manifest(
                raw: JSONSerialization.data(withJSONObject: ["pluginDirectories": ["plugins"], "plugins": [["name": "alpha"]]]),
                file: "shared/app/manifest.json")
            #expect(try PluginLoader.load(manifest: url, services: PluginServices()).map(\.name) == ["alpha"])
            chmod(shared, 0o777)
            #expect(load(url)?.file == shared)
        } else {
            // Not root: the fixtures already live under a root-owned sticky directory.
            var info = stat()
            #expect(stat(NSTemporaryDirectory(), &info) == 0 && info.st_uid == 0 && info.st_mode & S_ISVTX != 0)
            try f.bundle("AlphaTestPlugin")
            #expect(try PluginLoader.load(manifest: try f.manifest([["name": "alpha"]]), services: PluginServices()).map(\.name) == ["alpha"])
        }
    }

    @Test func aFileOwnedByAnotherUserIsRefused() throws {
        let f = try PluginFixtures()
        defer { f.remove() }
        let bundle = try f.bundle("AlphaTestPlugin")
        let url = try f.manifest([["name": "alpha"]])
        if geteuid() == 0 {
            let library = bundle + "/libAlphaTestPlugin.so"
            #expect(chown(library, 4242, 4242) == 0)
            #expect(
                load(url)
                    == PluginLoadError(
                        .insecurePermissions, file: library, plugin: "alpha",
                        reason: "mode 0755, owner uid 4242 (neither root nor the current user, uid 0), is the library; "
                            + "give it to root or the current user (chown)"))
        } else {
            // Not root: no file of another user can be made; root-owned ancestors are accepted.
            #expect(try PluginLoader.load(manifest: url, services: PluginServices()).map(\.name) == ["alpha"])
        }
    }
}
