import Foundation
import PluginSDK

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Output: results to standard output, errors to standard error, colour only on a terminal
/// and never when `NO_COLOR` is set.
enum Terminal {
    static let colour: Bool = isatty(STDOUT_FILENO) != 0 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil

    /// Why standard output could not be written, once it could not (results lost: the command
    /// must not exit 0).
    static let outputFailure = Locked<String?>(nil)

    static func out(_ text: String = "") {
        if !FileDescriptor.writeAll(STDOUT_FILENO, text + "\n") {
            let reason = String(cString: strerror(errno))
            outputFailure.withLock { if $0 == nil { $0 = reason } }
        }
    }

    static func error(_ text: String) {
        FileDescriptor.writeAll(STDERR_FILENO, "pluginhost: " + text + "\n")
    }

    /// A number of seconds as written: `2`, `0.5`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    static func green(_ text: String) -> String { paint(text, "32") }
    static func red(_ text: String) -> String { paint(text, "31") }
    static func yellow(_ text: String) -> String { paint(text, "33") }
    static func bold(_ text: String) -> String { paint(text, "1") }
    static func dim(_ text: String) -> String { paint(text, "2") }

    private static func paint(_ text: String, _ code: String) -> String {
        colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// Pretty, sorted JSON.
    static func json(_ object: Any) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]) else { return "{}" }
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\\/", with: "/")
    }
}

/// The documented exit codes.
enum ExitCode: Int32 {
    case ok = 0
    case usage = 1
    case manifest = 2
    case refused = 3
    case crashed = 4
    case requestFailed = 5
    case cannotWrite = 6
}
