// pluginhost: see and verify the plugins an app will load, without writing code.
import Foundation
import PluginHost
import PluginSDK

let commands = [ListCommand.spec, TestCommand.spec, BundleCommand.spec, NewCommand.spec, TestCommand.probeSpec]

let usage = """
    pluginhost \(Version.tool): list, test and bundle PluginHost plugins.

    usage: pluginhost <command> [options]

    commands:
      list     list plugin bundles from their static descriptors (no plugin is created, no hook runs)
      test     test a manifest: validate, probe each plugin in a child process, run one request
      bundle   write NAME.plugin/ from a built plugin library
      new      write a ready-to-build plugin project (Swift or C)

    options:
      --help      show this help (also: pluginhost <command> --help)
      --version   show the tool, ABI and build versions

    exit codes: 0 ok; 1 usage; 2 manifest error; 3 plugin refused; 4 plugin crashed; 5 request failed.
    `new` also exits 6 when it cannot write its output directory.
    Colour is used only on a terminal and never when NO_COLOR is set.
    """

func main() -> Int32 {
    let arguments = Array(CommandLine.arguments.dropFirst())
    switch arguments.first {
    case nil, "--help", "-h", "help":
        Terminal.out(usage)
        return arguments.isEmpty ? ExitCode.usage.rawValue : ExitCode.ok.rawValue
    case "--version":
        Terminal.out("pluginhost \(Version.tool) (ABI \(PluginLibrary.hostABI.major).\(PluginLibrary.hostABI.minor), \(PluginExport.buildSignature))")
        return ExitCode.ok.rawValue
    default:
        break
    }
    let parsed: ParsedArguments
    do {
        parsed = try ArgumentParser.parse(arguments, commands: commands)
    } catch {
        Terminal.error("\(error)")
        return ExitCode.usage.rawValue
    }
    if parsed.has("help") {
        Terminal.out(parsed.command.help)
        return ExitCode.ok.rawValue
    }
    switch parsed.command.name {
    case "list": return ListCommand.run(parsed).rawValue
    case "test": return TestCommand.run(parsed).rawValue
    case "bundle": return BundleCommand.run(parsed).rawValue
    case "new": return NewCommand.run(parsed).rawValue
    case "__probe": return TestCommand.probe(parsed).rawValue
    default: return ExitCode.usage.rawValue
    }
}

let code = main()
// Results that could not be written are a failure whatever the command found (log lines
// written to standard error are dropped instead).
if let reason = Terminal.outputFailure.withLock({ $0 }) {
    Terminal.error("cannot write to standard output: \(reason)")
    exit(code == ExitCode.ok.rawValue ? ExitCode.cannotWrite.rawValue : code)
}
exit(code)
