import Foundation

/// `pluginhost new`: writes a ready-to-build plugin project (Swift package or C source).
enum NewCommand {
    static let spec = CommandSpec(
        name: "new", summary: "Write a ready-to-build plugin project: a Swift package on PluginSDK, or C source on pluginhost.h.",
        positionals: [("NAME", "the plugin's name: a lower-case letter, then lower-case letters, digits and '-'")],
        flags: [
            FlagSpec(name: "lang", value: "swift|c", repeatable: false, help: "the language (default: swift)"),
            FlagSpec(name: "out", value: "DIR", repeatable: false, help: "where to write it; must not exist or be empty (default: ./NAME)"),
            FlagSpec(
                name: "sdk", value: "PATH", repeatable: false,
                help:
                    "a PluginHost checkout holding PluginSDK (default: the checkout around the current directory, else the one pluginhost was built in)"
            ),
        ],
        details: """
            The project's README says how to build it, bundle it (pluginhost bundle) and load it (pluginhost test).

            Exit codes: 0 written; 1 usage (bad name or language, --sdk without PluginSDK, no checkout found);
            6 the output directory is not empty or cannot be written.
            """)

    /// What `new` needs, checked.
    struct Plan {
        var name: String
        var language: String
        var output: URL
        var sdk: URL
    }

    /// A refusal and its exit code.
    struct Refusal: Error {
        let message: String
        let code: ExitCode
    }

    static func run(_ arguments: ParsedArguments) -> ExitCode {
        do {
            let plan = try check(arguments)
            try write(plan)
            Terminal.out(
                "wrote \(plan.output.path) (\(plan.language == "c" ? "C" : "Swift") plugin \"\(plan.name)\"); next: see \(plan.output.path)/README.md"
            )
            return .ok
        } catch let refusal as Refusal {
            Terminal.error(refusal.message)
            return refusal.code
        } catch {
            Terminal.error("\(error)")
            return .cannotWrite
        }
    }

    static func check(_ arguments: ParsedArguments) throws -> Plan {
        let name = arguments.positionals[0]
        guard isValidName(name) else {
            throw Refusal(
                message:
                    "\(name.debugDescription) is not a plugin name: use a lower-case letter, then lower-case letters, digits and '-' (e.g. my-plugin)",
                code: .usage)
        }
        let language = arguments.value("lang") ?? "swift"
        guard language == "swift" || language == "c" else {
            throw Refusal(message: "--lang must be swift or c, not \(language.debugDescription)", code: .usage)
        }
        let current = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        let output = URL(fileURLWithPath: arguments.value("out") ?? name, relativeTo: current).standardizedFileURL
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: output.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw Refusal(message: "\(output.path) exists and is not a directory", code: .cannotWrite)
            }
            // A directory that cannot be listed is not taken for an empty one (its files would be
            // written over).
            let entries: [String]
            do {
                entries = try FileManager.default.contentsOfDirectory(atPath: output.path)
            } catch {
                throw Refusal(message: "\(output.path) cannot be listed (\(Self.reason(error))); choose another --out", code: .cannotWrite)
            }
            guard entries.isEmpty else {
                throw Refusal(
                    message:
                        "\(output.path) is not empty (\(entries.count) \(entries.count == 1 ? "entry" : "entries")); choose another --out or remove it",
                    code: .cannotWrite)
            }
        }
        let sdk: URL
        if let given = arguments.value("sdk") {
            sdk = URL(fileURLWithPath: given, relativeTo: current).standardizedFileURL
            guard hasPluginSDK(sdk) else {
                throw Refusal(
                    message: "--sdk \(sdk.path) holds no PluginSDK (expected Package.swift and Sources/PluginSDK/, a PluginHost checkout)",
                    code: .usage)
            }
        } else {
            guard let found = defaultSDK(from: current) else {
                throw Refusal(message: "no PluginHost checkout found here or where pluginhost was built: pass --sdk PATH", code: .usage)
            }
            sdk = found
        }
        if language == "c", !FileManager.default.isReadableFile(atPath: sdk.appendingPathComponent(abiHeaderPath).path) {
            throw Refusal(message: "the SDK at \(sdk.path) has no readable \(abiHeaderPath) (a C plugin copies it)", code: .usage)
        }
        // The module a Swift plugin is (`<Type>Plugin`) must be none the SDK's package declares
        // (SwiftPM refuses two modules of one name in a build), nor a type of PluginSDK itself.
        let module = typeName(name) + "Plugin"
        if let taken = takenNames(in: sdk)[module] {
            throw Refusal(
                message: "\(name.debugDescription) would make the module \(module), which the SDK already has (\(taken)); choose another name",
                code: .usage)
        }
        return Plan(name: name, language: language, output: output, sdk: sdk)
    }

    /// Where the C ABI's header is in an SDK checkout.
    static let abiHeaderPath = "Sources/CPluginABI/include/pluginhost.h"

    /// The names a plugin's module may not take, with where each is taken: the targets the SDK's
    /// `Package.swift` declares (`name: "…"`), and the public types of its PluginSDK sources.
    static func takenNames(in sdk: URL) -> [String: String] {
        var taken: [String: String] = [:]
        func collect(_ text: String, _ pattern: String, _ place: String) {
            guard let expression = try? NSRegularExpression(pattern: pattern) else { return }
            for match in expression.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                if let range = Range(match.range(at: 1), in: text), taken[String(text[range])] == nil { taken[String(text[range])] = place }
            }
        }
        if let package = try? String(contentsOf: sdk.appendingPathComponent("Package.swift"), encoding: .utf8) {
            collect(package, #"\bname:\s*"([A-Za-z0-9_]+)""#, "a module of its Package.swift")
        }
        // The modules its Package.swift names by folder: `Sources/<M>`, the contrib plugins'
        // `PluginsContrib/<D>` (`<D>Plugin`, `<D>PluginEntry`), the fixtures' `<D>TestPlugin`.
        let folders: [(String, [String], String)] = [
            ("Sources", [""], "a module of its Sources"), ("PluginsContrib", ["Plugin", "PluginEntry"], "a contrib plugin's module"),
            ("Tests/Fixtures/Plugins", ["TestPlugin"], "a test plugin's module"),
        ]
        for (folder, suffixes, place) in folders {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: sdk.appendingPathComponent(folder).path)) ?? [] {
                for suffix in suffixes where taken[entry + suffix] == nil { taken[entry + suffix] = place }
            }
        }
        let sources = sdk.appendingPathComponent("Sources/PluginSDK")
        for file in (try? FileManager.default.contentsOfDirectory(atPath: sources.path)) ?? [] where file.hasSuffix(".swift") {
            guard let text = try? String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8) else { continue }
            collect(text, #"\bpublic\s+(?:final\s+)?(?:protocol|struct|enum|class|actor|typealias)\s+([A-Za-z0-9_]+)"#, "a type of PluginSDK")
        }
        return taken
    }

    /// A file system error's reason, without Foundation's wrapping.
    static func reason(_ error: any Error) -> String {
        let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
        if let underlying, underlying.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(underlying.code))) }
        return (error as NSError).localizedDescription
    }

    /// `[a-z][a-z0-9-]*`, at most 64 characters.
    static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, name.unicodeScalars.count <= 64, ("a"..."z").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
    }

    static func hasPluginSDK(_ directory: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path)
            && FileManager.default.fileExists(atPath: directory.appendingPathComponent("Sources/PluginSDK").path, isDirectory: &isDirectory)
            && isDirectory.boolValue
    }

    /// The checkout holding the current directory, else the one this executable was built in
    /// (`<checkout>/.build/<triple>/<configuration>/pluginhost`).
    static func defaultSDK(from current: URL) -> URL? {
        var candidates: [URL] = []
        var directory = current
        while directory.path != "/" {
            candidates.append(directory)
            directory.deleteLastPathComponent()
        }
        var executable = executablePath()
        while executable.path != "/" {
            executable.deleteLastPathComponent()
            candidates.append(executable)
        }
        return candidates.first(where: hasPluginSDK)
    }

    /// This executable's own file (`argv[0]` is only a name when it was found on `PATH`).
    static func executablePath() -> URL {
        #if os(Linux)
        return URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
        return (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])).resolvingSymlinksInPath()
        #endif
    }

    /// `my-stamp` → `MyStamp`.
    static func typeName(_ name: String) -> String {
        name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    static func write(_ plan: Plan) throws {
        let files = plan.language == "c" ? try cFiles(plan) : swiftFiles(plan)
        // Modes set, not left to the umask: the loader refuses a manifest that group or others may
        // write, or one in a directory they may (a umask of 002, common for users, made both).
        try makeDirectories(plan.output)
        for (path, contents) in files {
            let url = plan.output.appendingPathComponent(path)
            try makeDirectories(url.deletingLastPathComponent())
            try contents.write(to: url, atomically: true, encoding: .utf8)
            chmod(url.path, 0o644)
        }
    }

    /// Makes `directory` and each missing folder above it, mode 0755 whatever the umask (the
    /// folders above were left at the umask's mode, and the loader refuses a manifest below a
    /// folder group or others may write). An output folder that exists loses only the group's
    /// and others' write permission (an empty `--out` made 0700 by its owner was opened to
    /// everyone; one made 0775 under a umask of 002 is refused by the loader as it is).
    static func makeDirectories(_ directory: URL) throws {
        var missing: [String] = []
        var path = directory.standardizedFileURL.path
        while !FileManager.default.fileExists(atPath: path), path != "/" {
            missing.append(path)
            path = (path as NSString).deletingLastPathComponent
        }
        if missing.isEmpty {
            var info = stat()
            if stat(path, &info) == 0, info.st_mode & 0o022 != 0 { chmod(path, info.st_mode & 0o7755) }
        }
        for path in missing.reversed() {
            // One made meanwhile by another process is as good (its mode is set all the same).
            if mkdir(path, 0o755) != 0, errno != EEXIST {
                throw Refusal(message: "cannot make the folder \(path): \(String(cString: strerror(errno)))", code: .cannotWrite)
            }
            chmod(path, 0o755)
        }
    }

    // MARK: Templates

    static func manifest(_ plan: Plan) -> String {
        let config = plan.language == "swift" ? #", "config": { "value": "hello" }"# : ""
        return """
            {
              "comment": "Loads \(plan.name) from ./plugins (pluginhost bundle writes it there).",
              "pluginDirectories": ["plugins"],
              "plugins": [
                { "name": "\(plan.name)"\(config) }
              ]
            }

            """
    }

    /// The README section both templates share: the three commands, and what they do.
    static func buildSection(_ plan: Plan, build: String, library: String) -> String {
        """
        ## Build, bundle, load

        ```sh
        \(build)
        pluginhost bundle \(library) --out plugins
        pluginhost test --manifest manifest.json
        ```

        `pluginhost bundle` writes `plugins/\(plan.name).plugin/` (the library and `plugin.json` with its
        SHA-256); `pluginhost test` loads `manifest.json` as an app would, probes the plugin in a child
        process and runs one request through it (add `--url http://127.0.0.1:8080/get` for a real server).
        Copy the bundle into an app's plugin directory and name it in the app's manifest.
        """
    }

    static func swiftFiles(_ plan: Plan) -> [(String, String)] {
        let type = typeName(plan.name)
        let product = "\(type)Plugin"
        let identity = plan.sdk.lastPathComponent.lowercased()
        let header = "X-\(type)"
        let package = """
            // swift-tools-version: 6.0
            import PackageDescription

            // The \(plan.name) plugin: one dynamic library that depends on PluginSDK only.
            let package = Package(
                name: "\(product)",
                platforms: [.macOS(.v13)],
                products: [.library(name: "\(product)", type: .dynamic, targets: ["\(product)"])],
                dependencies: [
                    // A PluginHost checkout; for a released version use instead:
                    // .package(url: "<PluginHost repository URL>", from: "\(Version.tool)")
                    .package(path: \(plan.sdk.path.debugDescription))
                ],
                targets: [
                    .target(name: "\(product)", dependencies: [.product(name: "PluginSDK", package: "\(identity)")])
                ],
                swiftLanguageModes: [.v6]
            )

            """
        let source = """
            import PluginSDK

            /// The \(plan.name) plugin. Configuration: `value` (string, default "hello"), sent as `\(header)`.
            ///
            /// Every hook is here with what it may do; delete the ones you do not need and list the
            /// rest in `implementedHooks` (the host calls only those).
            public struct \(product): ExportablePlugin {
                public static var pluginName: String { "\(plan.name)" }
                public static var pluginVersion: String { "0.1.0" }
                public static var pluginSummary: String { "Sends \(header) on every request" }
                public static var pluginLicense: String { "MIT" }
                public static var implementedHooks: Set<InterceptorHook> { [.prepare, .willSend, .didReceive, .process, .credential] }

                let value: String

                /// Reads the configuration (the bundle's defaultConfig with the manifest's config over it).
                /// Throw `configuration.error("…")` to refuse it: the loader reports the plugin and the message.
                public init(configuration: PluginConfiguration, host: any HostServices) throws {
                    try configuration.rejectUnknownKeys(["value"])
                    value = try configuration.string("value") ?? "hello"
                }

                /// The hooks this instance needs, given its configuration (nil: all of implementedHooks).
                public var activeHooks: Set<InterceptorHook>? { nil }

                /// Before the request is sent, first to last: edit it, or answer it yourself
                /// (`return .respond(SyntheticResponse(…))` skips the network and the plugins after this one).
                public func prepare(_ request: InterceptorRequest, context: InterceptorContext) throws -> PrepareAction {
                    try request.setHeader("\(header)", value)
                    return .proceed
                }

                /// Just before sending, after every prepare: see the final request (log it, sign it).
                public func willSend(_ request: InterceptorRequest, context: InterceptorContext) throws {}

                /// After the response (or failure), last to first: observe it (`result.response?.statusCode`).
                public func didReceive(_ result: InterceptorResult, context: InterceptorContext) throws {}

                /// After every didReceive, last to first: `.proceed`, `.replace(SyntheticResponse(…))`,
                /// or `.retry(delay:refresh:)` (for example after refreshing a token on a 401).
                public func process(_ result: InterceptorResult, context: InterceptorContext) throws -> ProcessAction {
                    .proceed
                }

                /// A 401/407 challenge: `.useCredential(user:password:)` (the host answers Basic or Digest),
                /// `.rejectProtectionSpace`, `.cancel`, or `.performDefault` to let the next plugin answer.
                public func credential(for challenge: AuthenticationChallenge, context: InterceptorContext) -> CredentialAnswer {
                    .performDefault
                }
            }

            /// The one symbol the host looks up: the plugin's descriptor.
            @_cdecl("pluginhost_plugin_v1")
            public func pluginhostPlugin() -> UnsafeRawPointer {
                PluginExport.descriptor(for: \(product).self)
            }

            """
        let readme = """
            # \(plan.name)

            A PluginHost plugin written in Swift: `Sources/\(product)/\(product).swift`. It sends
            `\(header): <value>` on every request; every other hook is stubbed with a comment.

            \(buildSection(plan, build: "swift build -c release", library: ".build/release/lib\(product).\(librarySuffix)"))
            ## The SDK

            `Package.swift` depends on the PluginHost checkout at `\(plan.sdk.path)`. For a released version,
            replace that dependency with:

            ```swift
            .package(url: "<PluginHost repository URL>", from: "\(Version.tool)")
            ```

            and use `package: "pluginhost"` (the repository's name, lower-cased) in the target's dependency.

            """
        return [
            ("Package.swift", package), ("Sources/\(product)/\(product).swift", source), ("manifest.json", manifest(plan)),
            ("README.md", readme), (".gitignore", ".build/\nplugins/\n"),
        ]
    }

    static func cFiles(_ plan: Plan) throws -> [(String, String)] {
        let symbol = plan.name.replacingOccurrences(of: "-", with: "_")
        let header = "X-\(typeName(plan.name))"
        let abiHeader = try String(contentsOf: plan.sdk.appendingPathComponent(abiHeaderPath), encoding: .utf8)
        let build = "cc -std=c11 -O2 -shared -fPIC -I. -o lib\(symbol).\(librarySuffix) \(symbol).c"
        let source = """
            /* The \(plan.name) plugin, in C against pluginhost.h (the ABI, copied here).
             * It sends \(header): hello on every request; every other hook is stubbed with a comment.
             * Delete the hooks you do not need and set their descriptor entries to NULL (the host
             * calls only the ones that are set).
             * Build: \(build) */
            #include <stdlib.h>
            #include <string.h>
            #include "pluginhost.h"

            typedef struct {
                const ph_host_api *host;
            } instance_t;

            static ph_bytes text(const char *s) {
                ph_bytes b = {(const uint8_t *)s, strlen(s)};
                return b;
            }

            /* Creates an instance from its JSON configuration (this one reads none). To refuse a
             * configuration, copy a message into error->data (at most error->capacity bytes), set
             * error->len and return NULL: the loader reports the plugin and the message. */
            static void *create(ph_bytes config_json, const ph_host_api *host, ph_error_buf *error) {
                (void)config_json;
                (void)error;
                instance_t *instance = malloc(sizeof *instance);
                if (instance) instance->host = host;
                return instance;
            }

            static void destroy(void *instance) { free(instance); }

            /* Before the request is sent, first to last: edit it (host->request_set_header, …), or
             * answer it yourself with host->request_respond. */
            static ph_status prepare(void *self, ph_request *request, const ph_context *context, ph_error_buf *error) {
                instance_t *instance = self;
                (void)context;
                if (instance->host->request_set_header(request, text("\(header)"), text("hello")) == PH_OK) return PH_OK;
                const char *message = "cannot set \(header)";
                size_t n = strlen(message) < error->capacity ? strlen(message) : error->capacity;
                memcpy(error->data, message, n);
                error->len = n;
                return PH_ERROR;
            }

            /* Just before sending, after every prepare: see the final request. */
            static ph_status will_send(void *self, ph_request *request, const ph_context *context, ph_error_buf *error) {
                (void)self, (void)request, (void)context, (void)error;
                return PH_OK;
            }

            /* After the response (or failure), last to first: observe it (host->result_status). */
            static ph_status did_receive(void *self, ph_result *result, const ph_context *context, ph_error_buf *error) {
                (void)self, (void)result, (void)context, (void)error;
                return PH_OK;
            }

            /* After every did_receive, last to first: host->result_replace or host->result_retry, or nothing. */
            static ph_status process(void *self, ph_result *result, const ph_context *context, ph_error_buf *error) {
                (void)self, (void)result, (void)context, (void)error;
                return PH_OK;
            }

            /* A 401/407 challenge: PH_CREDENTIAL_USE (write user and password into the buffers), _REJECT,
             * _CANCEL, or _DEFAULT to let the next plugin answer. */
            static ph_credential_answer credential(void *self, const ph_challenge *challenge, const ph_context *context,
                                                   uint8_t *user, size_t *user_len, uint8_t *password, size_t *password_len,
                                                   size_t capacity) {
                (void)self, (void)challenge, (void)context, (void)user, (void)user_len, (void)password, (void)password_len,
                    (void)capacity;
                return PH_CREDENTIAL_DEFAULT;
            }

            static const ph_plugin_descriptor descriptor = {
                .struct_size = sizeof(ph_plugin_descriptor),
                .abi_major = PH_ABI_MAJOR,
                .abi_minor = PH_ABI_MINOR,
                .name = "\(plan.name)",
                .version = "0.1.0",
                .summary = "Sends \(header) on every request",
                .license = "MIT",
                .build_signature = "c11",
                .create = create,
                .destroy = destroy,
                .prepare = prepare,
                .will_send = will_send,
                .did_receive = did_receive,
                .process = process,
                .credential = credential,
            };

            /* The one symbol the host looks up. */
            const ph_plugin_descriptor *pluginhost_plugin_v1(void) { return &descriptor; }

            """
        let readme = """
            # \(plan.name)

            A PluginHost plugin written in C: `\(symbol).c`, against `pluginhost.h` (the versioned ABI,
            copied from the PluginHost checkout at `\(plan.sdk.path)`). It sends `\(header): hello` on every
            request; every other hook is stubbed with a comment.

            \(buildSection(plan, build: build, library: "lib\(symbol).\(librarySuffix)"))
            """
        return [
            ("\(symbol).c", source), ("pluginhost.h", abiHeader), ("manifest.json", manifest(plan)), ("README.md", readme),
            (".gitignore", "*.\(librarySuffix)\nplugins/\n"),
        ]
    }

    #if canImport(Darwin)
    static let librarySuffix = "dylib"
    #else
    static let librarySuffix = "so"
    #endif
}
