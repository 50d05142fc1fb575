import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let base = ProcessInfo.processInfo.environment["HTTPBIN_URL"]!
final class D: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        print("delegate complete", (task.response as? HTTPURLResponse)?.statusCode as Any, error as Any)
    }
}
let mode = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "plain"
if mode == "plain" {
    let (data, response) = try await URLSession.shared.data(from: URL(string: "\(base)/status/401")!)
    print("plain", (response as! HTTPURLResponse).statusCode, data.count)
} else {
    let s = URLSession(configuration: mode == "nostore" ? { let c = URLSessionConfiguration.default; c.urlCredentialStorage = nil; return c }() : .default, delegate: D(), delegateQueue: nil)
    s.dataTask(with: URL(string: "\(base)/status/401")!).resume()
    try await Task.sleep(nanoseconds: 3_000_000_000)
    print("end")
}
