import Foundation
import PluginHost
import PluginSDK

/// What `list` reports for one bundle.
struct BundleReport {
    var position: Int?
    var name: String
    var directory: String?
    var version: String?
    var abi: (major: Int, minor: Int)?
    var hooks: [String] = []
    var library: String?
    var size: Int?
    var sha256: String?
    var verdict = "unknown"
    var enabled: Bool
    var summary: String?
    var problems: [String] = []
    var loaded: PluginLibrary?
    var config = Data("{}".utf8)

    var json: [String: Any] {
        var object: [String: Any] = [
            "name": name, "enabled": enabled, "hooks": hooks, "sha256Verdict": verdict, "problems": problems,
            "hostAbi": ["major": PluginLibrary.hostABI.major, "minor": PluginLibrary.hostABI.minor],
        ]
        object["position"] = position ?? NSNull()
        object["version"] = version ?? NSNull()
        object["abi"] = abi.map { ["major": $0.major, "minor": $0.minor] } ?? NSNull()
        object["library"] = library ?? NSNull()
        object["size"] = size ?? NSNull()
        object["sha256"] = sha256 ?? NSNull()
        object["bundle"] = directory ?? NSNull()
        object["summary"] = summary ?? NSNull()
        return object
    }
}

/// Finds every bundle of a manifest and extra directories, and checks each one without
/// creating any plugin: `plugin.json`, paths, permissions, digest, descriptor.
enum Inventory {
    /// - Parameter forProbes: only the manifest's enabled entries, each checked without loading
    ///   its library (no code of it runs here: `pluginhost test`'s child probes load them, and
    ///   a library that crashes takes only its probe down; a bundle the manifest does not enable
    ///   is never loaded).
    static func collect(manifest: PluginManifest?, directories extra: [String], forProbes: Bool = false) -> [BundleReport] {
        var directories = manifest?.pluginDirectories ?? []
        for directory in extra where !directories.contains(directory) { directories.append(directory) }
        var reports: [BundleReport] = []
        var seen = Set<String>()
        // A manifest's entries are looked for where the app's load looks: in its own directories
        // (one found only in `--dir` was listed as fine, and the app's load failed).
        let manifestDirectories = manifest?.pluginDirectories ?? []
        // Positions in the chain: enabled entries only (a disabled one has none).
        var position = 0
        for entry in manifest?.entries ?? [] {
            if forProbes && !entry.enabled { continue }
            if entry.enabled { position += 1 }
            var report = BundleReport(position: entry.enabled ? position : nil, name: entry.name, enabled: entry.enabled)
            if let (bundle, root) = PluginManifest.bundleDirectory(for: entry.name, in: manifestDirectories) {
                seen.insert(entry.name)
                inspect(&report, bundle: bundle, root: root, pin: entry.sha256.map { ($0, entry.index) }, load: !forProbes)
                report.config = PluginLoader.mergedConfig(defaults: report.config, overrides: entry.configJSON)
            } else if entry.enabled {
                // The app's load looks for enabled entries only: a disabled one may be absent. One
                // in a `--dir` only is named here, not listed again below as another, usable, bundle.
                let elsewhere = PluginManifest.bundleDirectory(for: entry.name, in: extra).map {
                    " (one is in \($0.pluginDirectory), where the manifest does not look)"
                }
                report.problems.append("reject: no \(entry.name).plugin in \(manifestDirectories.joined(separator: ", "))\(elsewhere ?? "")")
            }
            // One report per name: a bundle of this name in another directory is not the enabled
            // entry's (a disabled one's is listed below, as it was: the entry names no bundle).
            if entry.enabled { seen.insert(entry.name) }
            reports.append(report)
        }
        for directory in directories where !forProbes {
            // Bundles as the app's load finds them: a plugin name (one that starts with `.` is
            // none), a directory (or a link to one) of that name.
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter {
                $0.hasSuffix(".plugin") && !$0.hasPrefix(".")
            }.sorted()
            for name in names {
                let pluginName = String(name.dropLast(".plugin".count))
                guard !seen.contains(pluginName), let (bundle, root) = PluginManifest.bundleDirectory(for: pluginName, in: [directory]) else {
                    continue
                }
                seen.insert(pluginName)
                var report = BundleReport(position: nil, name: pluginName, enabled: false)
                inspect(&report, bundle: bundle, root: root, pin: nil)
                reports.append(report)
            }
        }
        return reports
    }

    static func inspect(_ report: inout BundleReport, bundle directory: String, root: String, pin: (String, Int)?, load: Bool = true) {
        report.directory = directory
        let bundle: PluginBundle
        do {
            bundle = try PluginBundle.read(directory: directory, pluginDirectory: root)
        } catch {
            report.problems.append("reject: \(error.description)")
            return
        }
        report.version = bundle.version
        report.abi = bundle.abi
        report.library = bundle.libraryPath
        report.summary = bundle.summary
        report.config = bundle.defaultConfigJSON
        if let attributes = try? FileManager.default.attributesOfItem(atPath: bundle.libraryPath) {
            report.size = (attributes[.size] as? NSNumber)?.intValue
        }
        var info = stat()
        // Only a regular file is read (a FIFO would block; the loader refuses it below).
        if stat(bundle.libraryPath, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
            let data = FileManager.default.contents(atPath: bundle.libraryPath)
        {
            report.sha256 = data.withUnsafeBytes { raw in
                var hasher = SHA256()
                hasher.update(raw)
                return SHA256.hex(hasher.finalize())
            }
        }
        do {
            let digests = bundle.expectedDigests(pin: pin.map { (sha256: $0.0, index: $0.1) })
            // The digest and size shown are those of the bytes verified (the file read above may
            // have changed since: "ok" beside a digest that was not the one checked).
            guard load else {
                (report.sha256, report.size) = try PluginLibrary.verify(path: bundle.libraryPath, expectedDigests: digests)
                report.verdict = "ok"
                return
            }
            let library = try PluginLibrary.open(path: bundle.libraryPath, expectedDigests: digests)
            report.verdict = "ok"
            (report.sha256, report.size) = (library.sha256, library.size)
            report.loaded = library
            report.version = library.info.version
            report.abi = (library.info.abiMajor, library.info.abiMinor)
            report.hooks = library.info.hooks.map(\.rawValue)
            report.summary = library.info.summary
            if let mismatch = bundle.nameMismatch(library) { report.problems.append("reject: \(mismatch.reason)") }
        } catch {
            if error.kind == .digestMismatch {
                report.verdict = "mismatch"
                report.problems.append("reject: sha256 mismatch (\(error.reason))")
            } else {
                // A permission problem may be a directory above the library: name it.
                report.problems.append("reject: \(error.kind == .insecurePermissions ? error.description : error.reason)")
            }
        }
    }
}
