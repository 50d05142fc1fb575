import Foundation

/// One flag of a command.
struct FlagSpec {
    /// `--name`.
    let name: String
    /// The value's placeholder (`FILE`), or nil for a switch.
    let value: String?
    /// Whether it may be given more than once.
    let repeatable: Bool
    /// One line of help.
    let help: String
}

/// One command: its flags and positional arguments, all the parser needs.
struct CommandSpec {
    let name: String
    let summary: String
    let positionals: [(name: String, help: String)]
    let flags: [FlagSpec]
    let details: String
    var hidden = false

    var usage: String {
        let flagPart = flags.map { flag in
            let body = flag.value.map { "--\(flag.name) \($0)" } ?? "--\(flag.name)"
            return "[\(body)]" + (flag.repeatable ? "..." : "")
        }
        return (["pluginhost", name] + positionals.map(\.name) + flagPart).joined(separator: " ")
    }

    var help: String {
        var lines = ["\(summary)", "", "usage: \(usage)"]
        if !positionals.isEmpty {
            lines.append("")
            lines += positionals.map { "  \($0.name.padding(toLength: 20, withPad: " ", startingAt: 0)) \($0.help)" }
        }
        lines.append("")
        lines.append("options:")
        for flag in flags + [FlagSpec(name: "help", value: nil, repeatable: false, help: "show this help")] {
            let left = flag.value.map { "--\(flag.name) \($0)" } ?? "--\(flag.name)"
            lines.append("  \(left.padding(toLength: 20, withPad: " ", startingAt: 0)) \(flag.help)")
        }
        if !details.isEmpty { lines += ["", details] }
        return lines.joined(separator: "\n")
    }
}

/// What the parser found.
struct ParsedArguments {
    let command: CommandSpec
    var values: [String: [String]] = [:]
    var switches: Set<String> = []
    var positionals: [String] = []

    func value(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }
    func has(_ name: String) -> Bool { switches.contains(name) }
}

/// A command line that cannot be understood; exit code 1.
struct UsageError: Error, CustomStringConvertible {
    let description: String
}

/// Parses `arguments` (without the program name) against `commands`.
enum ArgumentParser {
    static func parse(_ arguments: [String], commands: [CommandSpec]) throws -> ParsedArguments {
        guard let first = arguments.first else { throw UsageError(description: "missing command; try pluginhost --help") }
        guard let command = commands.first(where: { $0.name == first }) else {
            let visible = commands.filter { !$0.hidden }.map(\.name)
            let hint = suggestion(for: first, among: visible).map { "; did you mean '\($0)'?" } ?? ""
            throw UsageError(description: "unknown command '\(first)'\(hint) (commands: \(visible.joined(separator: ", ")))")
        }
        var parsed = ParsedArguments(command: command)
        var index = 1
        var flagsEnded = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if flagsEnded || !argument.hasPrefix("--") || argument == "-" {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" {
                flagsEnded = true
                continue
            }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if name == "help" {
                parsed.switches.insert("help")
                continue
            }
            guard let flag = command.flags.first(where: { $0.name == name }) else {
                let hint = suggestion(for: name, among: command.flags.map(\.name) + ["help"]).map { "; did you mean '--\($0)'?" } ?? ""
                throw UsageError(description: "unknown option '--\(name)' for '\(command.name)'\(hint)")
            }
            if flag.value == nil {
                if inline != nil { throw UsageError(description: "option '--\(name)' takes no value") }
                parsed.switches.insert(name)
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                    throw UsageError(description: "option '--\(name)' needs a value (\(flag.value!))")
                }
                value = arguments[index]
                index += 1
            }
            // No option takes an empty value: `--out="$DIR"` with DIR unset meant the current directory.
            if value.isEmpty { throw UsageError(description: "option '--\(name)' needs a value (\(flag.value!)), not an empty one") }
            if !flag.repeatable, parsed.values[name] != nil {
                throw UsageError(description: "option '--\(name)' may be given only once")
            }
            parsed.values[name, default: []].append(value)
        }
        if parsed.has("help") { return parsed }
        if parsed.positionals.count > command.positionals.count {
            throw UsageError(description: "unexpected argument '\(parsed.positionals[command.positionals.count])' for '\(command.name)'")
        }
        if parsed.positionals.count < command.positionals.count {
            throw UsageError(description: "'\(command.name)' needs \(command.positionals[parsed.positionals.count].name)")
        }
        return parsed
    }

    /// The closest candidate within an edit distance of 2 (or one that `word` is a prefix of).
    static func suggestion(for word: String, among candidates: [String]) -> String? {
        if let prefixed = candidates.first(where: { $0.hasPrefix(word) && !word.isEmpty }) { return prefixed }
        let scored = candidates.map { ($0, distance(word, $0)) }.filter { $0.1 <= 2 }
        return scored.min { $0.1 < $1.1 }?.0
    }

    /// Levenshtein distance.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
