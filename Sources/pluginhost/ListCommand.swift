import Foundation
import PluginHost
import PluginSDK

/// `pluginhost list`: every bundle, from static descriptors only.
enum ListCommand {
    static let spec = CommandSpec(
        name: "list", summary: "List plugin bundles from their static descriptors (no plugin is created, no hook runs).",
        positionals: [],
        flags: [
            FlagSpec(name: "manifest", value: "FILE", repeatable: false, help: "the app's manifest: its directories, order and enabled plugins"),
            FlagSpec(name: "dir", value: "DIR", repeatable: true, help: "another plugin directory to search"),
            FlagSpec(name: "json", value: nil, repeatable: false, help: "print a JSON document (keys documented in the README)"),
        ],
        details: """
            Bundles in manifest order come first, then installed bundles the manifest does not enable.
            Exit codes: 0 all bundles usable; 1 usage; 2 manifest error; 3 a bundle is rejected or none was found.
            """)

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        let manifestPath = arguments.value("manifest")
        // Absolute, as the libraries are printed (a relative one from the working directory).
        let directories = arguments.all("dir").map { given -> String in
            let expanded = (given as NSString).expandingTildeInPath
            let absolute = expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
            return (absolute as NSString).standardizingPath
        }
        guard manifestPath != nil || !directories.isEmpty else {
            Terminal.error("list needs --manifest FILE or --dir DIR")
            return .usage
        }
        var manifest: PluginManifest?
        if let manifestPath {
            do {
                manifest = try PluginManifest.read(URL(fileURLWithPath: manifestPath))
            } catch {
                // Every problem of the file, as `test` reports them (the first, if it changed since).
                let url = URL(fileURLWithPath: manifestPath)
                let found = PluginManifest.problems(in: url).map(\.description)
                let problems = found.isEmpty ? [error.description] : found
                for problem in problems { Terminal.error(problem) }
                // The JSON form says so too, as `test --json` does (its output was empty), with
                // the manifest's path as a manifest read names it (absolute).
                if arguments.has("json") { Terminal.out(Terminal.json(document(manifest: url.path, plugins: [], problems: problems))) }
                return .manifest
            }
        }
        // Each plugin directory as the app's load checks it, those without a bundle too: the
        // app refuses the manifest for any of them.
        let directoryRefusals = manifest.map { PluginLoader.directoryRefusals(of: $0) } ?? []
        for refusal in directoryRefusals { Terminal.error(refusal.description) }
        let reports = Inventory.collect(manifest: manifest, directories: directories)
        if reports.isEmpty {
            let searched = (manifest?.pluginDirectories ?? []) + directories
            Terminal.error("no plugin bundles (NAME.plugin) in \(searched.joined(separator: ", "))")
            // The JSON form still says what was refused.
            guard arguments.has("json") else { return .refused }
        }
        if arguments.has("json") {
            Terminal.out(
                Terminal.json(document(manifest: manifest?.file, plugins: reports.map(\.json), problems: directoryRefusals.map(\.description))))
        } else {
            print(reports)
        }
        return reports.isEmpty || reports.contains { !$0.problems.isEmpty } || !directoryRefusals.isEmpty ? .refused : .ok
    }

    /// The `--json` document: the host, the manifest's path, the bundles, and the problems
    /// (left out when there are none).
    static func document(manifest: String?, plugins: [[String: Any]], problems: [String]) -> [String: Any] {
        var document: [String: Any] = [
            "host": [
                "tool": Version.tool, "abi": ["major": PluginLibrary.hostABI.major, "minor": PluginLibrary.hostABI.minor],
                "buildSignature": PluginExport.buildSignature,
            ],
            "manifest": manifest ?? NSNull(),
            "plugins": plugins,
        ]
        if !problems.isEmpty { document["problems"] = problems }
        return document
    }

    static func print(_ reports: [BundleReport]) {
        let host = "\(PluginLibrary.hostABI.major).\(PluginLibrary.hostABI.minor)"
        Terminal.out(Terminal.bold("#  NAME            VERSION  ABI (host \(host))  ENABLED  SHA256    HOOKS"))
        for report in reports {
            let position = Terminal.pad(report.position.map(String.init) ?? "-", 2)
            let abi = report.abi.map { "\($0.major).\($0.minor)" } ?? "?"
            let verdict =
                report.verdict == "ok" ? Terminal.green("ok") : report.verdict == "mismatch" ? Terminal.red("mismatch") : Terminal.yellow("unknown")
            let line =
                "\(position) \(Terminal.pad(report.name, 15)) \(Terminal.pad(report.version ?? "?", 8)) \(Terminal.pad(abi, 15)) "
                + "\(Terminal.pad(report.enabled ? "yes" : "no", 8)) \(Terminal.pad(verdict, Terminal.colour ? 17 : 8)) "
                + (report.hooks.isEmpty ? "-" : report.hooks.joined(separator: ","))
            Terminal.out(line)
            if let library = report.library {
                Terminal.out("   library \(library) (\(report.size.map { "\($0) bytes" } ?? "size unknown"))")
            }
            for problem in report.problems { Terminal.out("   " + Terminal.red(problem)) }
        }
    }
}

/// `pluginhost bundle`: turns a built library into NAME.plugin/.
enum BundleCommand {
    static let spec = CommandSpec(
        name: "bundle", summary: "Write NAME.plugin/ (the library and plugin.json) from a built plugin library.",
        positionals: [("LIBRARY", "the shared library, e.g. .build/release/libLoggerPlugin.so")],
        flags: [
            FlagSpec(name: "out", value: "DIR", repeatable: false, help: "where to write the bundle (default: the current directory)"),
            FlagSpec(name: "config", value: "FILE", repeatable: false, help: "a JSON object to store as the bundle's defaultConfig"),
        ],
        details: """
            Exit codes: 0 written; 1 usage (a --config that is no JSON object, or repeats a key); 3 the library has no
            valid descriptor (the reason is printed); 6 the bundle cannot be written.
            """)

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        let library = arguments.positionals[0]
        var config: [String: Any] = [:]
        if let path = arguments.value("config") {
            guard let data = FileManager.default.contents(atPath: path) else {
                Terminal.error("\(path): cannot read the configuration file")
                return .usage
            }
            do {
                config = try PluginBundle.readConfig(data, file: path)
            } catch {
                Terminal.error(error.description)
                return .usage
            }
        }
        let opened: (library: PluginLibrary, bytes: Data)
        do {
            opened = try PluginBundle.open(library)
        } catch {
            Terminal.error("refusing \(library): \(error.reason)")
            return .refused
        }
        let out = arguments.value("out") ?? FileManager.default.currentDirectoryPath
        do {
            let bundle = try PluginBundle.write(opened.library, bytes: opened.bytes, from: library, in: out, defaultConfig: config)
            Terminal.out("wrote \(bundle)")
            return .ok
        } catch {
            // The library is fine: where it goes is not.
            Terminal.error("\(error.file): \(error.reason)")
            return .cannotWrite
        }
    }
}

enum Version {
    static let tool = PluginHostVersion.current
}
