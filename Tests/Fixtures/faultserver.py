#!/usr/bin/env python3
"""A misbehaving HTTP server for fault-injection tests, on 127.0.0.1 (raw sockets, threaded).

  /reset-before-headers      reads the request, then resets the connection (RST, no response)
  /reset-mid-body            sends headers promising 100000 bytes, 1000 of them, then resets
  /short-body                sends headers promising 1000 bytes, 10 of them, then closes (status=S, location=U
                             as for /sized)
  /silence                   sends headers, then nothing for 30 s
  /drip?n=N&gap=S            sends an N-byte body one byte every S seconds, then completes
  /burst?key=K&fail=N        503 for the first N requests of K, then 200 with the attempt number
  /endless?declare=N         200 with Content-Length N (none when absent), then zeros until the client
                             closes (at most 4 GiB or 60 s)
  /endless-chunked           200, chunked, zeros until the client closes (same bounds)
  /sized?n=N                 200 with a body of exactly N bytes
                             (/endless and /sized: status=S answers S instead, location=U adds Location: U)
  /gzip-bomb                 200, Content-Encoding: gzip, a gzip stream of zeros that inflates to
                             10 GiB (about 10 MiB on the wire), sent until the client closes
  /nested-bomb               200, "Content-Encoding: deflate, gzip": a gzip body (about 30 KB) of a deflate
                             stream of 20 MB that decodes to nothing (empty stored blocks)
  /many-headers?n=N          200 with N header fields
  /big-header?kb=K           200 with one header field of K KiB
  /slow-upload?rate=R        reads the request's body (its Content-Length) at about R bytes a second,
                             then 200 {"received":N}; with extra=1 it then reads what else comes within
                             0.5 s (bytes past the declared length) and answers {"received":N,"extra":M}
  /early-answer?mode=M       413 with a JSON body and Connection: close before the request's body is read;
                             then stops writing and reads the body away for up to 3 s, as nginx does, or
                             with mode=close closes at once (the unread body makes that a reset)
  /trailers                  200, chunked, body "ok", then the trailer fields X-Checksum and Set-Cookie
  /trailer-status-line       200 (status=S: S), chunked, body "ok", then trailer lines "HTTP/1.1 302: Found", Location, Set-Cookie
  /status-line-field?rounds=R&n=N
                             200, Content-Type: text/plain, then R times (N fields and a field line
                             "HTTP/1.1 200: x"), then Content-Length: 2 and the body "ok"
  /endless-trailers          200, chunked, body "ok", then a 1 KiB trailer field every 5 ms until the
                             client closes (at most 20 s)
  /endless-1xx               a "103 Early Hints" response every 5 ms until the client closes (at most 20 s)
  /folded-encoding           200, "Content-Encoding: identity," folded onto " gzip", a gzip body ("folded and decoded")
  /expect-417?key=K&gzip=G   the first request of K: 417 (X-Hop: first, Set-Cookie: b=417), kept open; the next:
                             100 Continue when it expects one, its body read, then 200 (X-Hop: final,
                             Set-Cookie: a=final) with the body "ok" (gzip-coded with gzip=1)
  /chunked-declared          200, chunked, with Content-Length: 999999999 beside it, body "0123456789"
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
import zlib

_nested_bomb = []


def nested_bomb():
    """gzip of a zlib stream of 4 million empty stored blocks and an empty final one: each
    stage ends cleanly, and the deflate stage turns 20 MB into no byte at all."""
    with lock:
        if not _nested_bomb:
            inner = b"\x78\x9c" + b"\x00\x00\x00\xff\xff" * 4_000_000 + b"\x01\x00\x00\xff\xff" + struct.pack(">I", zlib.adler32(b""))
            assert zlib.decompress(inner) == b""
            compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
            _nested_bomb.append(compressor.compress(inner) + compressor.flush())
        return _nested_bomb[0]


counts = {}
lock = threading.Lock()


def status_head(query):
    """The status line (status=S, default 200) and a Location field when location=U is asked."""
    head = b"HTTP/1.1 %d X\r\n" % int(query.get("status", "200"))
    if "location" in query:
        head += b"Location: " + query["location"].encode() + b"\r\n"
    return head


def read_head(sock):
    """Reads a request up to the end of its header fields (and what came after); None when the
    connection closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    return data


def head_fields(data):
    """The header fields of a request read by read_head (lowercased names), and the bytes after them."""
    head, _, received = data.partition(b"\r\n\r\n")
    fields = {}
    for field in head.split(b"\r\n")[1:]:
        name, _, value = field.partition(b":")
        fields[name.strip().lower()] = value.strip()
    return fields, received


def reset(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        sock.settimeout(35)
        # A small receive buffer: a slow reader (/slow-upload) holds the client back at once.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        try:
            data = read_head(sock)
        except OSError:
            return
        if data is None:
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
                sock.sendall(status_head(query) + b"Content-Length: 1000\r\nConnection: close\r\n\r\n" + b"y" * 10)
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
            elif path in ("/endless", "/endless-chunked"):
                chunked = path == "/endless-chunked"
                head = status_head(query) + b"Content-Type: application/octet-stream\r\nConnection: close\r\n"
                if chunked:
                    head += b"Transfer-Encoding: chunked\r\n"
                elif "declare" in query:
                    head += b"Content-Length: %d\r\n" % int(query["declare"])
                sock.sendall(head + b"\r\n")
                block = b"\0" * 65536
                frame = (b"%x\r\n" % len(block)) + block + b"\r\n" if chunked else block
                started, sent = time.time(), 0
                while sent < (4 << 30) and time.time() - started < 60:
                    sock.sendall(frame)
                    sent += len(block)
                sock.close()
            elif path == "/sized":
                n = int(query.get("n", "0"))
                sock.sendall(status_head(query) + b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % n)
                remaining = n
                while remaining > 0:
                    step = min(remaining, 1 << 20)
                    sock.sendall(b"s" * step)
                    remaining -= step
                sock.close()
            elif path == "/gzip-bomb":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Encoding: gzip\r\n"
                             b"Connection: close\r\n\r\n")
                compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
                zeros = b"\0" * (1 << 20)
                started = time.time()
                for _ in range(10 * 1024):
                    if time.time() - started > 60:
                        break
                    out = compressor.compress(zeros)
                    if out:
                        sock.sendall(out)
                sock.sendall(compressor.flush())
                sock.close()
            elif path == "/nested-bomb":
                body = nested_bomb()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Encoding: deflate, gzip\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
                sock.close()
            elif path == "/many-headers":
                n = int(query.get("n", "2000"))
                fields = b"".join(b"X-Field-%d: value-%d\r\n" % (i, i) for i in range(n))
                sock.sendall(b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 2\r\n\r\nok")
                sock.close()
            elif path == "/big-header":
                size = int(query.get("kb", "1024")) * 1024
                sock.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"b" * size + b"\r\nContent-Length: 2\r\n\r\nok")
                sock.close()
            elif path == "/slow-upload":
                rate = int(query.get("rate", str(1 << 20)))
                fields, received = head_fields(data)
                length = int(fields.get(b"content-length", b"0"))
                got = len(received)
                step = max(1, rate // 8)
                while got < length:
                    chunk = sock.recv(min(step, length - got))
                    if not chunk:
                        return
                    got += len(chunk)
                    time.sleep(len(chunk) / rate)
                answer = {"received": min(got, length)}
                if query.get("extra") == "1":
                    extra = max(0, got - length)
                    sock.settimeout(0.1)
                    until = time.time() + 0.5
                    while time.time() < until:
                        try:
                            chunk = sock.recv(65536)
                        except socket.timeout:
                            continue
                        except OSError:
                            break
                        if not chunk:
                            break
                        extra += len(chunk)
                    sock.settimeout(None)
                    answer["extra"] = extra
                body = json.dumps(answer).encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                sock.close()
            elif path == "/early-answer":
                # A 413 before the request's body is read, as a server with a body limit answers.
                body = b'{"error":"too large"}'
                sock.sendall(b"HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
                if query.get("mode") != "close":
                    # As nginx does: no more writing, and the rest of the body read and dropped a while.
                    sock.shutdown(socket.SHUT_WR)
                    end = time.time() + 3
                    sock.settimeout(0.5)
                    while time.time() < end:
                        try:
                            if not sock.recv(1 << 20):
                                break
                        except socket.timeout:
                            continue
                sock.close()
            elif path == "/expect-417":
                # A server that refuses Expect: libcurl sends the request again, in the same
                # transfer, after the 417.
                key = "417:" + query.get("key", "")
                with lock:
                    counts[key] = counts.get(key, 0) + 1
                    attempt = counts[key]
                fields, received = head_fields(data)
                if attempt == 1:
                    # The connection stays open (libcurl does not send again on one the 417 closes):
                    # the request sent again comes on it, or on a new one.
                    sock.sendall(b"HTTP/1.1 417 Expectation Failed\r\nX-Hop: first\r\nSet-Cookie: b=417\r\n"
                                 b"Content-Length: 0\r\n\r\n")
                    data = read_head(sock)
                    if data is None:
                        return
                    with lock:
                        counts[key] += 1
                    fields, received = head_fields(data)
                length = int(fields.get(b"content-length", b"0"))
                if fields.get(b"expect", b"").lower() == b"100-continue":
                    sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                got = len(received)
                while got < length:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    got += len(chunk)
                body, coding = b"ok", b""
                if query.get("gzip") == "1":
                    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
                    body, coding = compressor.compress(b"ok") + compressor.flush(), b"Content-Encoding: gzip\r\n"
                sock.sendall(b"HTTP/1.1 200 OK\r\nX-Hop: final\r\nSet-Cookie: a=final\r\n" + coding
                             + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
                sock.close()
            elif path == "/chunked-declared":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                             b"Content-Length: 999999999\r\nConnection: close\r\n\r\na\r\n0123456789\r\n0\r\n\r\n")
                sock.close()
            elif path == "/trailers":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                             b"Trailer: X-Checksum, Set-Cookie\r\nConnection: close\r\n\r\n"
                             b"2\r\nok\r\n0\r\nX-Checksum: abc\r\nSet-Cookie: t=1\r\n\r\n")
                sock.close()
            elif path == "/trailer-status-line":
                # A trailer field whose name begins like a status line (with a colon, which libcurl
                # asks of a trailer), then a Location and a cookie: none of it starts a new response.
                sock.sendall(status_head(query) + b"Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                             b"2\r\nok\r\n0\r\nHTTP/1.1 302: Found\r\nLocation: /ok\r\nSet-Cookie: t=1\r\n\r\n")
                sock.close()
            elif path == "/status-line-field":
                # Lines that begin like a status line inside one block of fields (libcurl passes
                # them on as fields): only a block's first line is a status line.
                rounds, n = int(query.get("rounds", "1")), int(query.get("n", "1"))
                fields = b"".join(b"X-F-%d: v\r\n" % i for i in range(n)) + b"HTTP/1.1 200: x\r\n"
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + fields * rounds
                             + b"Content-Length: 2\r\nConnection: close\r\n\r\nok")
                sock.close()
            elif path in ("/endless-trailers", "/endless-1xx"):
                if path == "/endless-trailers":
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                                 b"Connection: close\r\n\r\n2\r\nok\r\n0\r\n")
                started, index = time.time(), 0
                while time.time() - started < 20:
                    if path == "/endless-trailers":
                        sock.sendall(b"X-T-%d: " % index + b"t" * 1024 + b"\r\n")
                    else:
                        sock.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n")
                    index += 1
                    time.sleep(0.005)
                sock.close()
            elif path == "/folded-encoding":
                # Content-Encoding folded onto a second line (obsolete line folding): identity, gzip.
                body = zlib.compress(b"folded and decoded", 6, wbits=31)
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: identity,\r\n gzip\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
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
