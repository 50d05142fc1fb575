#!/usr/bin/env python3
"""A misbehaving HTTP server for fault-injection tests, on 127.0.0.1 (raw sockets, threaded).

  /reset-before-headers      reads the request, then resets the connection (RST, no response)
  /reset-mid-body            sends headers promising 100000 bytes, 1000 of them, then resets
  /short-body                sends headers promising 1000 bytes, 10 of them, then closes
  /silence                   sends headers, then nothing for 30 s
  /drip?n=N&gap=S            sends an N-byte body one byte every S seconds, then completes
  /burst?key=K&fail=N        503 for the first N requests of K, then 200 with the attempt number
  /ok                        200 {"ok":true}

usage: faultserver.py PORT
"""
import json
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse

counts = {}
lock = threading.Lock()


def reset(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        sock.settimeout(35)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
        except OSError:
            return
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        target = line.split(" ")[1] if len(line.split(" ")) > 1 else "/"
        parsed = urllib.parse.urlsplit(target)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        path = parsed.path
        try:
            if path == "/reset-before-headers":
                reset(sock)
            elif path == "/reset-mid-body":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nContent-Type: application/octet-stream\r\n\r\n" + b"x" * 1000)
                time.sleep(0.1)
                reset(sock)
            elif path == "/short-body":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n" + b"y" * 10)
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            elif path == "/silence":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
                time.sleep(30)
                sock.close()
            elif path == "/drip":
                n, gap = int(query.get("n", "10")), float(query.get("gap", "0.1"))
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % n)
                for _ in range(n):
                    time.sleep(gap)
                    sock.sendall(b"z")
                sock.close()
            elif path == "/burst":
                key, fail = query.get("key", ""), int(query.get("fail", "2"))
                with lock:
                    counts[key] = counts.get(key, 0) + 1
                    attempt = counts[key]
                status = b"503 Service Unavailable" if attempt <= fail else b"200 OK"
                body = json.dumps({"attempt": attempt}).encode()
                sock.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                sock.close()
            else:
                body = b'{"ok":true}'
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                sock.close()
        except OSError:
            pass


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with Server(("127.0.0.1", int(sys.argv[1])), Handler) as server:
        server.serve_forever()
