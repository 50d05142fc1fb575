#!/usr/bin/env python3
"""Starts and stops the test suite's HTTP server: httpbin (plus fixtureapp.py's /fixture/ endpoints)
under gunicorn on 127.0.0.1.

  testserver.py start VENV STATE_DIR   prints `export NAME=value` lines for the shell
  testserver.py stop STATE_DIR         stops the server started with that state dir

The server listens on two free loopback ports (HTTPBIN_URL and HTTPBIN_URL_2), so tests
can switch servers and redirect across origins; faultserver.py misbehaves on a third (FAULT_URL).
Every wait is bounded.
"""
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(venv, state):
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
