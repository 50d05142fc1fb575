#!/usr/bin/env python3
"""Starts and stops the test suite's HTTP servers: httpbin (plus fixtureapp.py's /fixture/ endpoints)
under gunicorn on 127.0.0.1, over plain HTTP and over TLS, and the fault server.

  testserver.py start VENV STATE_DIR   prints `export NAME=value` lines for the shell
  testserver.py stop STATE_DIR         stops the server started with that state dir

The server listens on two free loopback ports (HTTPBIN_URL and HTTPBIN_URL_2), so tests
can switch servers and redirect across origins; faultserver.py misbehaves on a third (FAULT_URL).

For the TLS tests, `start` makes with openssl, in STATE_DIR/tls: a private CA (TLS_CA_PEM), a server
certificate it signs for 127.0.0.1 (TLS_SERVER_CERT, its key's pin TLS_SERVER_PIN), a client
certificate (TLS_CLIENT_CERT, TLS_CLIENT_KEY), an unrelated CA (TLS_OTHER_CA_PEM) and a self-signed
server certificate (TLS_SELFSIGNED_PEM, pin TLS_SELFSIGNED_PIN); and serves the same app over
HTTPS (HTTPBIN_TLS_URL), over HTTPS asking for a client certificate (HTTPBIN_MTLS_URL), over HTTPS
with the self-signed certificate (HTTPBIN_SELFSIGNED_URL), and over HTTP/2 with TLS under hypercorn
(HTTPBIN_H2_URL). Pins are curl's `sha256//` + base64 of the SPKI's SHA-256.
Every wait is bounded.
"""
import base64
import hashlib
import os
import shutil
import shlex
import signal
import ssl
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_tls(state):
    """Makes the CA, certificates and keys of the TLS tests; returns the exported variables."""
    if shutil.which("openssl") is None:
        sys.exit("error: openssl is missing: the TLS tests make their certificates with it (apt-get install openssl)")
    tls = os.path.join(state, "tls")
    shutil.rmtree(tls, ignore_errors=True)
    os.makedirs(tls, mode=0o700)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", *ec, "-keyout", f"{ca}-key.pem", "-out", f"{ca}.pem", "-days", "3",
                "-subj", f"/CN=PluginHost test {ca}", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=tls)
    for name, usage in (("server", "serverAuth"), ("client", "clientAuth")):
        with open(os.path.join(tls, f"{name}.ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\n"
                    f"extendedKeyUsage={usage}\n"
                    + ("subjectAltName=IP:127.0.0.1,DNS:localhost\n" if name == "server" else ""))
        openssl("req", *ec, "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", "-subj", f"/CN=PluginHost test {name}", cwd=tls)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "3", "-extfile", f"{name}.ext", cwd=tls)
    # The client key encrypted (passphrase s3cret): PKCS #8, and OpenSSL's traditional form (Proc-Type).
    openssl("pkey", "-in", "client-key.pem", "-aes256", "-passout", "pass:s3cret", "-out", "client-key-enc.pem", cwd=tls)
    openssl("ec", "-in", "client-key.pem", "-aes256", "-passout", "pass:s3cret", "-out", "client-key-trad.pem", cwd=tls)
    openssl("req", "-x509", *ec, "-keyout", "selfsigned-key.pem", "-out", "selfsigned.pem", "-days", "3",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-addext", "basicConstraints=critical,CA:FALSE", "-addext", "extendedKeyUsage=serverAuth", cwd=tls)

    def pin(key):
        der = subprocess.run(["openssl", "pkey", "-in", os.path.join(tls, key), "-pubout", "-outform", "DER"],
                             check=True, capture_output=True).stdout
        return "sha256//" + base64.b64encode(hashlib.sha256(der).digest()).decode()

    path = lambda name: os.path.join(tls, name)
    return {
        "TLS_CA_PEM": path("ca.pem"), "TLS_OTHER_CA_PEM": path("other-ca.pem"),
        "TLS_SERVER_CERT": path("server.pem"), "TLS_SERVER_PIN": pin("server-key.pem"),
        "TLS_CLIENT_CERT": path("client.pem"), "TLS_CLIENT_KEY": path("client-key.pem"),
        "TLS_CLIENT_KEY_ENCRYPTED": path("client-key-enc.pem"), "TLS_CLIENT_KEY_TRADITIONAL": path("client-key-trad.pem"),
        "TLS_SELFSIGNED_PEM": path("selfsigned.pem"), "TLS_SELFSIGNED_PIN": pin("selfsigned-key.pem"),
    }


def tls_ready(port, ca, client=None):
    """Whether an HTTPS GET /get on `port`, trusting `ca` (and presenting `client`), answers 200."""
    context = ssl.create_default_context(cafile=ca)
    if client:
        context.load_cert_chain(*client)
    try:
        return urllib.request.urlopen(f"https://127.0.0.1:{port}/get", timeout=2, context=context).status == 200
    except OSError:
        return False


def start_tls_servers(venv, state, log, env):
    """Starts the HTTPS, mTLS, self-signed and HTTP/2 servers; returns (exports, pids)."""
    tls = make_tls(state)
    gunicorn = os.path.join(venv, "bin", "gunicorn")
    hypercorn = os.path.join(venv, "bin", "hypercorn")
    if not os.access(hypercorn, os.X_OK):
        sys.exit(f"error: {hypercorn} is missing: install it with `{venv}/bin/pip install -r Tests/Fixtures/requirements.txt`")
    here = os.path.dirname(os.path.abspath(__file__))
    common = ["--workers", "1", "--worker-class", "gthread", "--threads", "16", "--timeout", "120",
              "--graceful-timeout", "2", "--keep-alive", "30", "--chdir", here]
    server = ["--certfile", tls["TLS_SERVER_CERT"], "--keyfile", tls["TLS_SERVER_CERT"].replace("server.pem", "server-key.pem")]
    ports = {name: free_port() for name in ("tls", "mtls", "selfsigned", "h2")}
    commands = {
        "tls": [gunicorn, *common, *server, "--bind", f"127.0.0.1:{ports['tls']}", "fixtureapp:app"],
        "mtls": [gunicorn, *common, *server, "--cert-reqs", "2", "--ca-certs", tls["TLS_CA_PEM"],
                 "--bind", f"127.0.0.1:{ports['mtls']}", "fixtureapp:app"],
        "selfsigned": [gunicorn, *common, "--certfile", tls["TLS_SELFSIGNED_PEM"],
                       "--keyfile", tls["TLS_SELFSIGNED_PEM"].replace("selfsigned.pem", "selfsigned-key.pem"),
                       "--bind", f"127.0.0.1:{ports['selfsigned']}", "fixtureapp:app"],
        "h2": [hypercorn, *server, "--bind", f"127.0.0.1:{ports['h2']}", "--root-path", "", "wsgi:fixtureapp:app"],
    }
    try:
        procs = {name: subprocess.Popen(command, cwd=here, stdout=log, stderr=log, start_new_session=True, env=env)
                 for name, command in commands.items()}
    except OSError as error:
        sys.exit(f"error: cannot start the TLS test servers: {error}")
    checks = {
        "tls": (tls["TLS_CA_PEM"], None),
        "mtls": (tls["TLS_CA_PEM"], (tls["TLS_CLIENT_CERT"], tls["TLS_CLIENT_KEY"])),
        "selfsigned": (tls["TLS_SELFSIGNED_PEM"], None),
        "h2": (tls["TLS_CA_PEM"], None),
    }
    deadline = time.time() + 30
    waiting = set(procs)
    while waiting and time.time() < deadline:
        for name in list(waiting):
            if procs[name].poll() is not None:
                break
            if tls_ready(ports[name], *checks[name]):
                waiting.discard(name)
        else:
            if waiting:
                time.sleep(0.2)
            continue
        break
    if waiting:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        sys.exit(f"error: the TLS test servers {sorted(waiting)} did not start on 127.0.0.1 within 30 s; see {state}/gunicorn.log")
    exports = dict(tls)
    exports.update({
        "HTTPBIN_TLS_URL": f"https://127.0.0.1:{ports['tls']}",
        "HTTPBIN_MTLS_URL": f"https://127.0.0.1:{ports['mtls']}",
        "HTTPBIN_SELFSIGNED_URL": f"https://127.0.0.1:{ports['selfsigned']}",
        "HTTPBIN_H2_URL": f"https://127.0.0.1:{ports['h2']}",
    })
    return exports, [proc.pid for proc in procs.values()]


def start(venv, state):
    venv = os.path.abspath(venv)
    os.makedirs(state, exist_ok=True)
    gunicorn = os.path.join(venv, "bin", "gunicorn")
    if not os.access(gunicorn, os.X_OK):
        sys.exit(f"error: {gunicorn} is missing: install the test server with "
                 f"`python3 -m venv {venv} && {venv}/bin/pip install -r Tests/Fixtures/requirements.txt` "
                 f"(Tests/test does this for you)")
    for _ in range(5):
        ports = [free_port(), free_port()]
        log = open(os.path.join(state, "gunicorn.log"), "ab")
        proc = subprocess.Popen(
            [gunicorn, "--workers", "2", "--worker-class", "gthread", "--threads", "48",
             "--timeout", "120", "--graceful-timeout", "2", "--keep-alive", "30",
             "--bind", f"127.0.0.1:{ports[0]}", "--bind", f"127.0.0.1:{ports[1]}",
             "--chdir", os.path.dirname(os.path.abspath(__file__)), "fixtureapp:app"],
            stdout=log, stderr=log, start_new_session=True,
            env=dict(os.environ, FIXTURE_STATE_DIR=os.path.join(state, "fixture-state")))
        deadline = time.time() + 30
        while time.time() < deadline and proc.poll() is None:
            try:
                ok = all(urllib.request.urlopen(f"http://127.0.0.1:{p}/get", timeout=2).status == 200 for p in ports)
                if ok:
                    fault_port = free_port()
                    fault = subprocess.Popen(
                        [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "faultserver.py"), str(fault_port)],
                        stdout=log, stderr=log, start_new_session=True)
                    for _ in range(100):
                        try:
                            socket.create_connection(("127.0.0.1", fault_port), timeout=1).close()
                            break
                        except OSError:
                            time.sleep(0.1)
                    with open(os.path.join(state, "pid"), "w") as f:
                        f.write(f"{proc.pid} {fault.pid}")
                    env = dict(os.environ, FIXTURE_STATE_DIR=os.path.join(state, "fixture-state"))
                    tls_exports, tls_pids = start_tls_servers(venv, state, log, env)
                    with open(os.path.join(state, "pid"), "w") as f:
                        f.write(" ".join(str(pid) for pid in [proc.pid, fault.pid, *tls_pids]))
                    # Quoted for the shell that evals them (a checkout path with a space).
                    for name, value in tls_exports.items():
                        print(f"export {name}={shlex.quote(str(value))}")
                    print(f"export HTTPBIN_URL=http://127.0.0.1:{ports[0]}")
                    print(f"export HTTPBIN_URL_2=http://127.0.0.1:{ports[1]}")
                    print(f"export FAULT_URL=http://127.0.0.1:{fault_port}")
                    return
            except OSError:
                time.sleep(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    sys.exit(f"error: httpbin did not start on 127.0.0.1 within 30 s; see {state}/gunicorn.log")


def stop(state):
    path = os.path.join(state, "pid")
    try:
        pids = [int(p) for p in open(path).read().split()]
    except (OSError, ValueError):
        return
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
            for _ in range(50):
                os.killpg(pid, 0)
                time.sleep(0.1)
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "start":
        start(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "stop":
        stop(sys.argv[2])
    else:
        sys.exit(__doc__)
