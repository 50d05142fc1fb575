import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// nginx on a free 127.0.0.1 port serving a ~50-byte JSON file and a 1 MiB file, keep-alive on.
final class NginxServer {
    let directory: String
    let port: Int
    private let process = Process()

    init(binary: String) throws {
        directory = NSTemporaryDirectory() + "pluginhost-bench-nginx-" + UUID().uuidString
        let www = directory + "/www"
        try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
        try Data(#"{"id":1,"name":"pluginhost","ok":true,"n":42}"#.utf8).write(to: URL(fileURLWithPath: www + "/small.json"))
        try Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: www + "/big.bin"))
        port = NginxServer.freePort()
        let config = """
            worker_processes 1;
            daemon off;
            pid \(directory)/nginx.pid;
            error_log \(directory)/error.log warn;
            events { worker_connections 4096; }
            http {
                access_log off;
                keepalive_timeout 120s;
                keepalive_requests 1000000;
                client_body_temp_path \(directory)/body;
                proxy_temp_path \(directory)/proxy;
                fastcgi_temp_path \(directory)/fastcgi;
                uwsgi_temp_path \(directory)/uwsgi;
                scgi_temp_path \(directory)/scgi;
                types { application/json json; application/octet-stream bin; }
                server {
                    listen 127.0.0.1:\(port);
                    root \(www);
                    add_header Cache-Control "no-store";
                    location / { }
                }
            }
            """
        try config.write(toFile: directory + "/nginx.conf", atomically: true, encoding: .utf8)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["-c", directory + "/nginx.conf", "-p", directory]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<100 {
            if NginxServer.answers(port: port) { return }
            usleep(50_000)
        }
        stop()
        throw CocoaError(
            .fileReadUnknown,
            userInfo: [NSLocalizedDescriptionKey: "nginx did not answer on 127.0.0.1:\(port) within 5 s; see \(directory)/error.log"])
    }

    var base: String { "http://127.0.0.1:\(port)" }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                _ = bind(fd, $0, length)
                _ = getsockname(fd, $0, &length)
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func answers(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
