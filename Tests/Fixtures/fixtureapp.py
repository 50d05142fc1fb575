"""The test server: httpbin, plus a few endpoints under /fixture/ that httpbin lacks.

  /fixture/token                  200 for `Authorization: Bearer good...`, else 401 with a Bearer challenge
  /fixture/counted?key=K&...      counts a hit for K and answers with the count; response headers can be
                                  set with h_NAME=value query parameters (e.g. h_Cache-Control=max-age=60)
  /fixture/hits?key=K             how many hits K has had
  /fixture/lastmod/K              counts a hit for its path and query; Last-Modified ten days ago
  /fixture/verify-hmac            recomputes the hmac-sha256 signature of the request as received
  /fixture/verify-md5             recomputes the md5-sorted signature of the request as received
  /fixture/respond?status=N&body=B  answers status N with body B (Content-Type: application/json unless type=),
                                  h_NAME=value header fields; rot13=1: body and h_ values given in ROT13
  /fixture/digest?key=K&...       Digest authentication (RFC 7616) checked independently: algorithm=, qop=,
                                  userhash=1, stale=N (answer N right answers with stale=true), offer=a,b,..
                                  (several challenges), nonce= (a fixed nonce), user=, pass=; moved_once=1:
                                  a right answer gets a 301 to the same URL with &moved=1 (challenged there too)
  /fixture/read-first/PATH        httpbin's /PATH, with the request's body read whole before it answers
  /fixture/encoded/C1,C2?...      a 100 kB text (ENCODED_TEXT) in content codings C1 then C2 (gzip, x-gzip,
                                  deflate, br, zstd, identity), listed so in Content-Encoding; raw=1: deflate
                                  without its zlib wrapper; corrupt=1: the last coding's bytes damaged;
                                  truncated=1: its last 100 bytes left out; trailing=1: bytes after its end;
                                  trailer=N: N zero bytes after its end; bytes=N: the text's first N bytes;
                                  status=N: that status; comment=N: gzip only, with an N-byte header comment;
                                  chunked=1: no Content-Length (sent chunked); split=1: a Content-Encoding
                                  field per coding; location=L: a Location (with status=302); the coding
                                  zstd-window-32m: zstd whose frame asks for a 32 MiB window (listed as zstd);
                                  members=N: gzip alone (the codings listed are not applied), the text in
                                  N (at least 2) gzip members one after another, the last one empty;
                                  tail=HEX: those bytes after its end

The signature checks are an independent implementation (Python's hmac and hashlib) of the schemes in
PluginsContrib/Signature/README.md, with the secret below. Counters live in files (gunicorn runs several
workers) under $FIXTURE_STATE_DIR.
"""
import codecs
import email.parser
import email.policy
import email.utils
import fcntl
import gzip
import hashlib
import hmac
import io
import json
import os
import time
import urllib.parse
import zlib

import brotlicffi
import zstandard

from httpbin import app as httpbin_app

SIGNING_SECRET = b"fixture-signing-secret"
STATE_DIR = os.environ.get("FIXTURE_STATE_DIR", "/tmp/pluginhost-fixture-state")
os.makedirs(STATE_DIR, exist_ok=True)


# /fixture/encoded's body: lines that number themselves, 100 kB in all (several decoder buffers).
ENCODED_TEXT = b"".join(b"line %05d of the encoded body\n" % i for i in range(3500))


def encode(data, coding, raw):
    if coding in ("gzip", "x-gzip"):
        return zlib.compress(data, 6, wbits=31)
    if coding == "deflate":
        return zlib.compress(data, 6, wbits=-15 if raw else 15)
    if coding == "br":
        return brotlicffi.compress(data)
    if coding == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    if coding == "zstd-window-32m":
        # A stream (no content size) whose frame asks for a 32 MiB window, past RFC 9659's 8 MiB.
        params = zstandard.ZstdCompressionParameters.from_level(3, window_log=25)
        compressor = zstandard.ZstdCompressor(compression_params=params).compressobj()
        return compressor.compress(data) + compressor.flush()
    return data


def respond(start_response, status, body, headers=()):
    data = json.dumps(body, sort_keys=True).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))] + list(headers))
    return [data]


def counter_path(key):
    return os.path.join(STATE_DIR, "hits-" + hashlib.sha256(key.encode()).hexdigest())


def bump(key):
    with open(counter_path(key), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        count = int(f.read() or "0") + 1
        f.seek(0)
        f.truncate()
        f.write(str(count))
        return count


def hits(key):
    try:
        with open(counter_path(key)) as f:
            return int(f.read() or "0")
    except FileNotFoundError:
        return 0


def rfc3986(text):
    """RFC 3986 escaping of a text, or of bytes (a query's escapes that are no UTF-8 kept as they are)."""
    return urllib.parse.quote(text, safe="-._~")


def read_body(environ):
    """The request's body, read once and kept in environ (a handler may ask twice)."""
    if "fixture.body" not in environ:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        environ["fixture.body"] = environ["wsgi.input"].read(length) if length else b""
    return environ["fixture.body"]


def raw_query_pairs(query_string):
    """Query pairs decoded to bytes, a literal + read as a space (as parse_qsl and most servers read
    a query): the bytes a server's handler gets, whatever they are (no UTF-8 decoding)."""
    pairs = []
    for part in query_string.split("&") if query_string else []:
        name, _, value = part.partition("=")
        pairs.append((urllib.parse.unquote_to_bytes(name.replace("+", " ")), urllib.parse.unquote_to_bytes(value.replace("+", " "))))
    return pairs


def verify_hmac(environ):
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    query = raw_query_pairs(environ.get("QUERY_STRING", ""))
    signature_names = {b"x-signature", b"x-timestamp", b"x-nonce", b"x-key-id"}
    # Placed in the query when the signature itself is there: a request signed in headers may carry
    # any of the other names as parameters of its own, which are then signed.
    in_query = any(name == b"x-signature" for name, _ in query)
    if not in_query:
        signature_names = set()
    if in_query:
        params = dict((n.decode(), v.decode("utf-8", "replace")) for n, v in query if n in signature_names)
        signature, timestamp, nonce = params.get("x-signature", ""), params.get("x-timestamp", ""), params.get("x-nonce", "")
        key_id = params.get("x-key-id", "")
    else:
        signature, timestamp = headers.get("x-signature", ""), headers.get("x-timestamp", "")
        nonce, key_id = headers.get("x-nonce", ""), headers.get("x-key-id", "")
    canonical_query = "&".join(
        f"{n}={v}" for n, v in sorted((rfc3986(n), rfc3986(v)) for n, v in query if n not in signature_names))
    body = read_body(environ)
    raw_path = environ.get("RAW_URI", environ.get("PATH_INFO", "")).split("?", 1)[0]
    canonical = "\n".join([environ["REQUEST_METHOD"], raw_path, canonical_query, timestamp, nonce,
                           hashlib.sha256(body).hexdigest()])
    expected = hmac.new(SIGNING_SECRET, canonical.encode(), hashlib.sha256).hexdigest()
    return {"valid": hmac.compare_digest(expected, signature), "expected": expected, "signature": signature,
            "canonical": canonical, "keyId": key_id, "timestamp": timestamp, "nonce": nonce, "inQuery": in_query}


def verify_md5(environ):
    # Names and values as bytes (latin-1 maps each byte to one character), sorted and hashed as
    # bytes, as PHP-style servers of this scheme do: a value that is no UTF-8 is its bytes.
    query = urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True, encoding="latin-1")
    body = read_body(environ)
    form = environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded")
    params = urllib.parse.parse_qsl(body.decode("latin-1"), keep_blank_values=True, encoding="latin-1") if form and body else query
    sign = dict(params).get("sign", "")
    text = "".join(k + v for k, v in sorted(params) if k != "sign").encode("latin-1") + SIGNING_SECRET
    expected = hashlib.md5(text).hexdigest().upper()
    return {"valid": expected == sign, "expected": expected, "sign": sign, "params": sorted(params), "fromBody": form}


DIGEST_HASHES = {"MD5": "md5", "SHA-256": "sha256", "SHA-512-256": "sha512_256", "SHA-512": "sha512"}
DIGEST_REALM = "fixture-digest@127.0.0.1"


def digest_hex(algorithm, data):
    base = algorithm[:-5] if algorithm.endswith("-sess") else algorithm
    return hashlib.new(DIGEST_HASHES[base], data if isinstance(data, bytes) else data.encode()).hexdigest()


def parse_digest_params(text):
    """Parameters of a Digest Authorization value, unquoted; username* decoded (RFC 8187)."""
    params, i = {}, 0
    while i < len(text):
        while i < len(text) and text[i] in " ,":
            i += 1
        j = text.find("=", i)
        if j < 0:
            break
        name = text[i:j].strip().lower()
        i = j + 1
        if i < len(text) and text[i] == '"':
            i += 1
            value = ""
            while i < len(text) and text[i] != '"':
                if text[i] == "\\":
                    i += 1
                value += text[i]
                i += 1
            i += 1
        else:
            j = text.find(",", i)
            j = len(text) if j < 0 else j
            value = text[i:j].strip()
            i = j
        params[name] = value
    if "username*" in params:
        charset, _, encoded = params.pop("username*").partition("''")
        params["username"] = urllib.parse.unquote(encoded, encoding=charset or "utf-8")
    return params


def digest(environ, start_response, query):
    key = query.get("key", "")
    count = bump(key)
    algorithm, qop = query.get("algorithm", "MD5"), query.get("qop", "auth")
    user, password = query.get("user", "u"), query.get("pass", "p")
    issued = [hashlib.sha256(f"{key}:{n}".encode()).hexdigest()[:32] for n in range(1, count + 1)]
    nonce = query.get("nonce") or issued[-1]
    opaque = "opaque-" + hashlib.sha256(key.encode()).hexdigest()[:12]
    offers = query.get("offer", algorithm).split(",")

    def challenges(stale=False):
        out = []
        for offer in offers:
            # charset=1: the challenges say charset=UTF-8 (the user and password are expected in NFC).
            charset = ', charset="UTF-8"' if query.get("charset") == "1" else ""
            if offer == "Basic":
                out.append(f'Basic realm="{DIGEST_REALM}"{charset}')
                continue
            parts = [f'realm="{DIGEST_REALM}"', f'nonce="{nonce}"', f'opaque="{opaque}"', f"algorithm={offer}"]
            if qop:
                parts.append(f'qop="{qop}"')
            if stale:
                parts.append("stale=true")
            if query.get("userhash") == "1":
                parts.append("userhash=true")
            if charset:
                parts.append('charset=UTF-8')
            out.append("Digest " + ", ".join(parts))
        return out

    def refuse(reason, stale=False):
        # The body is read first, as a server behind a reading proxy would: answered before the
        # body was sent, libcurl 7.88 may end the request as a broken pipe (README, early answers),
        # which is not what the tests of this endpoint are about.
        read_body(environ)
        data = json.dumps({"count": count, "reason": reason}).encode()
        headers = [("WWW-Authenticate", c) for c in challenges(stale)]
        start_response("401 Unauthorized", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))] + headers)
        return [data]

    auth = environ.get("HTTP_AUTHORIZATION", "")
    if auth.startswith("Basic ") and "Basic" in offers:
        ok = auth[6:] == __import__("base64").b64encode(f"{user}:{password}".encode()).decode()
        return respond(start_response, "200 OK", {"count": count, "scheme": "Basic"}) if ok else refuse("wrong basic")
    if not auth.startswith("Digest "):
        return refuse("no digest credentials")
    p = parse_digest_params(auth[len("Digest "):])
    chosen = p.get("algorithm", "MD5")
    if chosen not in offers:
        return refuse(f"algorithm {chosen} not offered")
    if p.get("nonce") not in issued and p.get("nonce") != query.get("nonce"):
        return refuse("unknown nonce")
    if p.get("opaque") != opaque:
        return refuse("opaque not echoed")
    if p.get("realm") != DIGEST_REALM:
        return refuse("wrong realm")
    userhash = p.get("userhash") == "true"
    expected_user = digest_hex(chosen, f"{user}:{DIGEST_REALM}") if userhash else user
    if p.get("username") != expected_user:
        return refuse("wrong user")
    raw_uri = environ.get("RAW_URI") or (environ.get("PATH_INFO", "") + ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else ""))
    if p.get("uri") != raw_uri:
        return refuse(f"uri {p.get('uri')} is not the request target {raw_uri}")
    a1 = digest_hex(chosen, f"{user}:{DIGEST_REALM}:{password}")
    if chosen.endswith("-sess"):
        a1 = digest_hex(chosen, f"{a1}:{p['nonce']}:{p.get('cnonce', '')}")
    method = environ["REQUEST_METHOD"]
    answered_qop = p.get("qop")
    if answered_qop == "auth-int":
        a2 = digest_hex(chosen, f"{method}:{p['uri']}:{digest_hex(chosen, read_body(environ))}")
    else:
        a2 = digest_hex(chosen, f"{method}:{p['uri']}")
    if answered_qop:
        expected = digest_hex(chosen, f"{a1}:{p['nonce']}:{p.get('nc', '')}:{p.get('cnonce', '')}:{answered_qop}:{a2}")
    else:
        expected = digest_hex(chosen, f"{a1}:{p['nonce']}:{a2}")
    if not hmac.compare_digest(expected, p.get("response", "")):
        return refuse("wrong response")
    if bump(key + ":stale") <= int(query.get("stale", "0")):
        return refuse("stale nonce", stale=True)
    if query.get("moved_once") == "1" and query.get("moved") != "1":
        location = environ.get("PATH_INFO", "") + "?" + environ.get("QUERY_STRING", "") + "&moved=1"
        start_response("301 Moved Permanently", [("Location", location), ("Content-Length", "0")])
        return [b""]
    # answered_status=N: the answered request gets N (a retryable 503, say) instead of 200.
    answered = query.get("answered_status")
    return respond(start_response, f"{answered} X" if answered else "200 OK", {
        "count": count, "scheme": "Digest", "algorithm": chosen, "qop": answered_qop, "nc": p.get("nc"),
        "cnonce": p.get("cnonce"), "userhash": userhash, "username": p.get("username"), "authorization": auth,
        "bodySha256": hashlib.sha256(read_body(environ)).hexdigest()})


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path.startswith("/fixture/read-first/"):
        # httpbin's endpoint after the prefix, its body read whole before it answers (as behind a
        # reading proxy): an early answer to a large body may end as a broken pipe on libcurl 7.88.
        body = read_body(environ)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["PATH_INFO"] = path[len("/fixture/read-first"):]
        return httpbin_app(environ, start_response)
    if not path.startswith("/fixture/"):
        return httpbin_app(environ, start_response)
    query = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
    if path == "/fixture/token":
        auth = environ.get("HTTP_AUTHORIZATION", "")
        if auth.startswith("Bearer good"):
            return respond(start_response, "200 OK", {"token": auth[len("Bearer "):]})
        return respond(start_response, "401 Unauthorized", {"error": "bad token", "got": auth},
                       [("WWW-Authenticate", 'Bearer realm="fixture"')])
    if path == "/fixture/unknown-encoding":
        # A body in an encoding no client asked for: delivered as it is, with its Content-Encoding.
        data = b"opaque-bytes"
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Encoding", "x-custom"),
                                  ("Content-Length", str(len(data)))])
        return [data]
    if path.startswith("/fixture/encoded/"):
        codings = [c for c in path[len("/fixture/encoded/"):].split(",") if c]
        plain = ENCODED_TEXT[:int(query.get("bytes", len(ENCODED_TEXT)))]
        data = plain
        for coding in codings:
            data = encode(data, coding, query.get("raw") == "1")
        if "comment" in query:
            # A gzip member whose header carries a comment (FCOMMENT): bytes that decode to nothing.
            deflated = zlib.compress(plain, 6, wbits=-15)
            data = (b"\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\xff" + b"c" * int(query["comment"]) + b"\x00" + deflated
                    + zlib.crc32(plain).to_bytes(4, "little") + len(plain).to_bytes(4, "little"))
        if "members" in query:
            # `cat a.gz b.gz ...` (RFC 1952 §2.2): N members, the text split among all but the last,
            # which is empty; each member made by Python's gzip, independently of the decoder.
            count = max(2, int(query["members"]))
            step = -(-len(plain) // (count - 1))
            parts = [plain[i:i + step] for i in range(0, len(plain), step)][:count - 1] + [b""]
            data = b"".join(gzip.compress(part, mtime=0) for part in parts)
        if query.get("corrupt") == "1":
            # Damage the middle of the stream (its header is left whole: the decoder starts).
            middle = len(data) // 2
            data = data[:middle] + bytes(b ^ 0x5A for b in data[middle:middle + 64]) + data[middle + 64:]
        if query.get("truncated") == "1":
            data = data[:-100]
        if query.get("trailing") == "1":
            data += b"trailing garbage"
        data += b"\x00" * int(query.get("trailer", "0"))
        data += bytes.fromhex(query.get("tail", ""))
        status = {"200": "200 OK", "206": "206 Partial Content", "302": "302 Found"}[query.get("status", "200")]
        headers = [("Content-Type", "text/plain")]
        # split=1: each coding in a field of its own (the fields' values join in order).
        listed = ["zstd" if c == "zstd-window-32m" else c for c in codings]
        headers += [("Content-Encoding", c) for c in listed] if query.get("split") == "1" else [("Content-Encoding", ", ".join(listed))]
        if "location" in query:
            headers.append(("Location", query["location"]))
        if query.get("chunked") == "1":
            # No Content-Length: the body goes in parts of 16 KiB (chunked), its size undeclared.
            start_response(status, headers)
            return [data[i:i + 16384] for i in range(0, len(data), 16384)]
        start_response(status, headers + [("Content-Length", str(len(data)))])
        return [data]
    if path == "/fixture/no-location":
        # A redirect status without a Location: the client must deliver it with its body.
        return respond(start_response, "302 Found", {"moved": "nowhere"})
    if path == "/fixture/counted":
        # A body is read first (see refuse above): answered before it is read, a large one may end as a broken pipe.
        read_body(environ)
        key = query.get("key", "")
        extra = [(n[2:], v) for n, v in urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")) if n.startswith("h_")]
        status = query.get("status", "200")
        count = bump(key)
        # With etag=V: the response carries ETag "V", and a request with If-None-Match "V" gets a 304.
        etag = query.get("etag")
        if etag is not None:
            extra.append(("ETag", f'"{etag}"'))
            if environ.get("HTTP_IF_NONE_MATCH", "") == f'"{etag}"':
                start_response("304 Not Modified", extra)
                return [b""]
        # The credentials the request carried, so a test can check who a cached answer was for
        # (not with quiet=1).
        body = {"key": key, "count": count}
        if query.get("quiet") != "1":
            body["auth"] = environ.get("HTTP_AUTHORIZATION", "")
        return respond(start_response, f"{status} X", body, extra)
    if path.startswith("/fixture/lastmod/"):
        key = path + "?" + environ.get("QUERY_STRING", "")
        modified = email.utils.formatdate(time.time() - 10 * 86400, usegmt=True)
        return respond(start_response, "200 OK", {"count": bump(key)}, [("Last-Modified", modified)])
    if path == "/fixture/hits":
        return respond(start_response, "200 OK", {"key": query.get("key", ""), "count": hits(query.get("key", ""))})
    if path == "/fixture/verify-hmac":
        return respond(start_response, "200 OK", verify_hmac(environ))
    if path == "/fixture/verify-md5":
        return respond(start_response, "200 OK", verify_md5(environ))
    if path == "/fixture/respond":
        # rot13=1: the body and h_ values come ROT13-encoded (the request never carries them as sent).
        plain = (lambda text: codecs.decode(text, "rot13")) if query.get("rot13") == "1" else (lambda text: text)
        data = plain(query.get("body", "")).encode()
        extra = [(n[2:], plain(v)) for n, v in urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")) if n.startswith("h_")]
        start_response(query.get("status", "200") + " X", [("Content-Type", query.get("type", "application/json")),
                                                            ("Content-Length", str(len(data)))] + extra)
        return [data]
    if path == "/fixture/digest":
        return digest(environ, start_response, query)
    if path == "/fixture/length":
        # The body's length and SHA-256, read a piece at a time (a large upload is never held whole).
        remaining, digest_of_body = int(environ.get("CONTENT_LENGTH") or 0), hashlib.sha256()
        while remaining > 0:
            piece = environ["wsgi.input"].read(min(remaining, 1 << 20))
            if not piece:
                break
            digest_of_body.update(piece)
            remaining -= len(piece)
        return respond(start_response, "200 OK", {"length": int(environ.get("CONTENT_LENGTH") or 0) - remaining,
                                                  "sha256": digest_of_body.hexdigest()})
    if path == "/fixture/multipart":
        # Each part of a multipart/form-data body, read by Python's email parser (not the client's
        # code): its name, file name, type, size and SHA-256; and the body's own length.
        body = read_body(environ)
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + environ.get("CONTENT_TYPE", "").encode("latin-1") + b"\r\n\r\n" + body)
        parts = []
        for part in message.iter_parts():
            data = part.get_payload(decode=True) or b""
            parts.append({"name": part.get_param("name", header="content-disposition"), "filename": part.get_filename(),
                          "type": part.get("Content-Type"), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        return respond(start_response, "200 OK", {"length": len(body), "parts": parts})
    return respond(start_response, "404 Not Found", {"error": "no such fixture"})
