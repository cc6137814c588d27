#!/usr/bin/env python3
"""spoold end to end: the real binary on a free loopback port, driven by
real clients (curl for REST and SSE, promtool for /metrics, raw sockets for
bad input), with a local HTTP endpoint for http.post.

  spoold_test.py SPOOLD [unittest args]
  spoold_test.py --hook   (the http.post target alone: serve_hook)

Every wait is bounded. Needs curl and promtool (scripts/install-deps).
"""

import http.server
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SPOOLD = None
TOKEN = "t0k3n-" + "ab" * 16
READ_TOKEN = "r3ad-" + "cd" * 16


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hook(http.server.BaseHTTPRequestHandler):
    """The http.post target: /ok, /later and /elsewhere answer 200, /down
    503, /gone 404, /busy 429 with Retry-After: 4, any other path 500."""
    received = []
    # (path, time.monotonic()) of each request, in order.
    times = []
    # path -> (status, body[, headers]); a subclass may add paths.
    routes = {"/ok": (200, b"fine"), "/down": (503, b"down for maintenance"),
              "/gone": (404, b"no such hook here"),
              "/later": (200, b"fine"), "/elsewhere": (200, b"fine"),
              "/busy": (429, b"slow down", {"Retry-After": "4"})}
    # With --hook: print each request as a JSON line (serve_hook).
    echo = False
    echo_lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Hook.received.append((self.path, body))
        Hook.times.append((self.path, time.monotonic()))
        if Hook.echo:
            line = json.dumps({"path": self.path,
                               "body": body.decode("utf-8", "replace")})
            with Hook.echo_lock:
                print(line, flush=True)
        route = self.routes.get(self.path, (500, b"?"))
        code, text = route[0], route[1]
        self.send_response(code)
        for name, value in (route[2] if len(route) > 2 else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, *args):
        pass


def write_token(directory):
    """DIRECTORY/token holding TOKEN and DIRECTORY/read_token holding
    READ_TOKEN, mode 0600 as spoold demands."""
    for name, token in (("token", TOKEN), ("read_token", READ_TOKEN)):
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write(token + "\n")
        os.chmod(path, 0o600)


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


class Spoold:
    def __init__(self, directory, port, hook_port, settings=()):
        """settings: more KEY=VALUE for --set, after (and so over) these."""
        self.directory, self.port, self.hook_port = directory, port, hook_port
        self.settings = settings
        self.process = None

    def start(self):
        args = [SPOOLD,
                "--set", "storage.path=" + os.path.join(self.directory, "data"),
                "--set", "server.listen=127.0.0.1:%d" % self.port,
                "--set", "server.token_file=" + os.path.join(self.directory, "token"),
                "--set", "server.read_token_file=" + os.path.join(self.directory, "read_token"),
                "--set", "server.max_body_bytes=4096",
                "--set", "server.max_connections=16",
                "--set", "server.header_timeout_ms=800",
                "--set", "server.body_timeout_ms=800",
                "--set", "server.sse_keepalive_ms=300",
                "--set", "runtime.close_timeout_ms=3000",
                "--set", "handlers.http.post.allow=http://127.0.0.1:*/**",
                "--set", "handlers.http.post.host_rate_limit=1000",
                "--set", "handlers.http.post.max_attempts=2",
                "--set", "handlers.http.post.timeout_ms=2000"]
        for setting in self.settings:
            args += ["--set", setting]
        self.log = open(os.path.join(self.directory, "spoold.log"), "ab")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=self.log)
        wait_for(lambda: self.ready(), 30, "spoold /readyz")

    def ready(self):
        if self.process.poll() is not None:
            raise AssertionError("spoold exited with %s" % self.process.returncode)
        try:
            return curl(self, "/readyz")[0] == 200
        except Exception:
            return False

    def stop(self, sig=signal.SIGTERM, timeout=20):
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        finally:
            self.log.close()


def curl(server, path, method="GET", body=None, token=TOKEN, headers=(), timeout=10):
    """(status, parsed JSON or text) through the curl binary."""
    args = ["curl", "-s", "-S", "-X", method, "-o", "-", "-w", "\n%{http_code}",
            "--max-time", str(timeout), "http://127.0.0.1:%d%s" % (server.port, path)]
    if token:
        args += ["-H", "Authorization: Bearer " + token]
    for h in headers:
        args += ["-H", h]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    out = subprocess.run(args, input=data, capture_output=True, timeout=timeout + 5)
    text, _, code = out.stdout.decode().rpartition("\n")
    try:
        return int(code), json.loads(text)
    except ValueError:
        return int(code), text


class SpooldTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="spoold-test-")
        write_token(cls.dir)
        cls.hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
        threading.Thread(target=cls.hook.serve_forever, daemon=True).start()
        cls.server = Spoold(cls.dir, free_port(), cls.hook.server_address[1])
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        if cls.server.process.poll() is None:
            cls.server.stop(signal.SIGKILL)
        cls.hook.shutdown()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def enqueue(self, task):
        code, body = curl(self.server, "/v1/tasks", "POST", task)
        self.assertEqual(code, 201, body)
        return body["id"]

    def wait_status(self, task_id, statuses, timeout=15):
        def check():
            code, task = curl(self.server, "/v1/tasks/%d" % task_id)
            return task if code == 200 and task["status"] in statuses else None
        return wait_for(check, timeout, "task %d to be %s" % (task_id, statuses))

    def assertError(self, result, code, error_code, mentions=None):
        status, body = result
        self.assertEqual(status, code, body)
        self.assertEqual(set(body), {"error"}, body)
        self.assertEqual(body["error"]["code"], error_code, body)
        if mentions:
            self.assertIn(mentions, body["error"]["message"])

    def test_00_config_and_token_checks(self):
        def run(*args):
            out = subprocess.run([SPOOLD] + list(args), capture_output=True, timeout=30)
            return out.returncode, out.stdout.decode() + out.stderr.decode()
        bad = os.path.join(self.dir, "bad.toml")
        with open(bad, "w") as f:
            f.write('[server]\nlisten = "127.0.0.1:1"\nmax_conections = 5\n')
        rc, text = run("--config", bad)
        self.assertEqual(rc, 2)
        self.assertIn("server.max_conections: unknown key", text)
        self.assertIn("(line 3)", text)
        with open(bad, "w") as f:
            f.write('[handlers."http.pots"]\nallow = []\n')
        rc, text = run("--config", bad)
        self.assertIn('handlers."http.pots": unknown handler', text)
        rc, text = run("--set", "runtime.workerz=1")
        self.assertIn("runtime.workerz", text)
        printed = os.path.join(self.dir, "printed.toml")
        rc, text = run("--set", "server.threads=2", "--print-config")
        self.assertEqual(rc, 0, text)
        with open(printed, "w") as f:
            f.write(text)
        # Each value names its source: --set, or the default.
        self.assertIn("threads = 2  # Source: --set\n", text)
        self.assertIn("# Source: default.\nworkers = ", text)
        # Printed back, the values are the same; the file is now their source.
        again = run("--config", printed, "--print-config")[1]
        self.assertIn("threads = 2  # Source: %s:" % printed, again)

        def values(t):
            return [re.sub(r"  # Source: .*", "", line) for line in t.splitlines()
                    if not line.startswith("# Source: ")]
        self.assertEqual(values(again), values(text))
        loose = os.path.join(self.dir, "loose-token")
        with open(loose, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(loose, 0o644)
        rc, text = run("--set", "server.token_file=" + loose,
                       "--set", "storage.path=" + os.path.join(self.dir, "unused"),
                       "--set", "server.listen=127.0.0.1:0")
        self.assertEqual(rc, 1)
        self.assertIn("mode 0644", text)
        self.assertIn("chmod 600", text)

    def test_01_health_and_page(self):
        self.assertEqual(curl(self.server, "/healthz")[0], 200)
        self.assertEqual(curl(self.server, "/readyz")[1],
                         {"status": "ready", "role": "primary"})
        code, page = curl(self.server, "/")
        self.assertEqual(code, 200)
        self.assertIn("<title>spoold</title>", page)

    def test_02_rest(self):
        s = self.server
        first = self.enqueue({"type": "noop", "payload": "hello", "group": "g1"})
        self.wait_status(first, {"succeeded"})
        code, task = curl(s, "/v1/tasks/%d" % first)
        self.assertEqual((code, task["type"], task["group"]), (200, "noop", "g1"))
        # Dedup: 200 with the active task's id.
        held = self.enqueue({"type": "sleep", "payload": "1", "delay_ms": 600000,
                             "dedup_key": "k1", "priority": 5})
        code, again = curl(s, "/v1/tasks", "POST", {"type": "sleep", "dedup_key": "k1"})
        self.assertEqual((code, again["id"]), (200, held), again)
        # A duplicate may replace the unstarted holder's payload.
        code, again = curl(s, "/v1/tasks", "POST", {"type": "sleep", "dedup_key": "k1",
                                                    "payload": "2", "on_duplicate": "replace_payload"})
        self.assertEqual((code, again["id"]), (200, held), again)
        self.assertEqual(curl(s, "/v1/tasks/%d" % held)[1]["payload_base64"], "Mg==")
        # A uniqueness window keeps the key reserved after the task ends.
        unique = self.enqueue({"type": "noop", "dedup_key": "u1", "unique_for_ms": 600000})
        self.wait_status(unique, {"succeeded"})
        code, again = curl(s, "/v1/tasks", "POST", {"type": "noop", "dedup_key": "u1"})
        self.assertEqual((code, again["id"]), (200, unique), again)
        self.assertError(curl(s, "/v1/tasks", "POST", {"type": "noop", "on_duplicate": "merge"}),
                         400, "invalid_argument", "on_duplicate")
        self.assertError(curl(s, "/v1/tasks", "POST", {"type": "noop", "depends_on": [first] * 1001}),
                         400, "invalid_argument", "depends_on has 1001 entries")
        # Batch: atomic, all or none.
        code, batch = curl(s, "/v1/tasks:batch", "POST",
                           {"tasks": [{"type": "noop"}, {"type": "sleep", "payload": 5}]})
        self.assertEqual(code, 201, batch)
        self.assertEqual(len(batch["ids"]), 2)
        code, refused = curl(s, "/v1/tasks:batch", "POST",
                             {"tasks": [{"type": "noop"}, {"type": "missing"}]})
        self.assertEqual(code, 404, refused)
        # Listing: the stored JSON bytes, filters, limit and cursor.
        code, page = curl(s, "/v1/tasks?type=noop&limit=1")
        self.assertEqual(code, 200, page)
        self.assertEqual(len(page["tasks"]), 1)
        self.assertTrue(page["next_cursor"])
        code, page2 = curl(s, "/v1/tasks?type=noop&limit=1&cursor=" + page["next_cursor"])
        self.assertEqual(code, 200, page2)
        self.assertGreater(page2["tasks"][0]["id"], page["tasks"][0]["id"])
        code, pending = curl(s, "/v1/tasks?status=pending&group=")
        self.assertIn(held, [t["id"] for t in pending["tasks"]])
        # Newest first, a created-time range and no payloads.
        code, oldest = curl(s, "/v1/tasks?type=noop&limit=1000")
        code, newest = curl(s, "/v1/tasks?type=noop&limit=1000&order=newest&payload=false")
        self.assertEqual(code, 200, newest)
        self.assertEqual([t["id"] for t in newest["tasks"]],
                         [t["id"] for t in reversed(oldest["tasks"])])
        self.assertTrue(all("payload" not in t and "payload_base64" not in t
                            for t in newest["tasks"]), newest)
        code, none = curl(s, "/v1/tasks?type=noop&created_from=2000-01-01T00:00:00Z"
                             "&created_before=2000-01-02T00:00:00Z")
        self.assertEqual((code, none["tasks"]), (200, []), none)
        code, since = curl(s, "/v1/tasks?type=noop&limit=1000&created_from=2000-01-01T00:00:00Z")
        self.assertEqual(len(since["tasks"]), len(oldest["tasks"]))
        # Counts.
        code, counts = curl(s, "/v1/counts")
        self.assertEqual(code, 200)
        self.assertEqual(set(counts), {"by_status", "by_type"})
        self.assertGreaterEqual(counts["by_status"]["pending"], 1)
        self.assertGreaterEqual(counts["by_type"]["noop"]["succeeded"], 1)
        # Cancel, history, retry.
        code, cancelled = curl(s, "/v1/tasks/%d/cancel" % held, "POST")
        self.assertEqual((code, cancelled["status"]), (200, "cancelled"), cancelled)
        code, history = curl(s, "/v1/tasks/%d/history" % held)
        self.assertEqual((code, history["status"]), (200, "cancelled"), history)
        code, retried = curl(s, "/v1/tasks/%d/retry" % held, "POST",
                             {"retry": {"kind": "fixed", "max_attempts": 2,
                                        "initial_delay_ms": 10, "max_delay_ms": 10}})
        self.assertEqual(code, 200, retried)
        self.assertError(curl(s, "/v1/tasks/%d/retry" % first, "POST"), 409,
                         "failed_precondition")
        # Pause and resume a type.
        self.assertEqual(curl(s, "/v1/types/noop/pause", "POST")[1],
                         {"type": "noop", "paused": True})
        paused = self.enqueue({"type": "noop"})
        time.sleep(0.3)
        self.assertEqual(curl(s, "/v1/tasks/%d" % paused)[1]["status"], "pending")
        self.assertEqual(curl(s, "/v1/types/noop/resume", "POST")[0], 200)
        self.wait_status(paused, {"succeeded"})
        # Purge.
        code, purged = curl(s, "/v1/purge", "POST", {"statuses": ["succeeded"], "types": ["noop"]})
        self.assertEqual(code, 200, purged)
        self.assertGreaterEqual(purged["deleted"], 2)
        self.assertError(curl(s, "/v1/tasks/%d" % first), 404, "not_found")

    def test_03_bad_requests(self):
        s = self.server
        self.assertError(curl(s, "/v1/tasks", "POST", {"type": "noop"}, token=None), 401,
                         "unauthorized")
        self.assertError(curl(s, "/v1/tasks", "POST", {"type": "noop"}, token="x" * 38), 401,
                         "unauthorized")
        self.assertError(curl(s, "/v1/purge", "POST", token=None), 401, "unauthorized")
        self.assertError(curl(s, "/v1/tasks", "POST", {"type": "noop", "payload": "x" * 5000}),
                         413, "payload_too_large")
        self.assertError(curl(s, "/v1/tasks", "POST", b'{"type": "noop",'), 400,
                         "invalid_argument", "malformed JSON")
        self.assertError(curl(s, "/v1/tasks", "POST", {"type": "noop", "colour": "red"}), 400,
                         "invalid_argument", "colour")
        self.assertError(curl(s, "/v1/tasks", "POST", {"type": "noop", "priority": "high"}),
                         400, "invalid_argument", "priority")
        self.assertError(curl(s, "/v1/tasks:batch", "POST",
                              {"tasks": [{"type": "noop"}, {"type": "noop", "delay": 1}]}),
                         400, "invalid_argument", "tasks[1].delay")
        self.assertError(curl(s, "/v1/tasks", "POST", {"payload": "x"}), 400,
                         "invalid_argument", "type")
        self.assertError(curl(s, "/v1/tasks", "POST", {"type": "no.such.type"}), 404,
                         "not_found", "no.such.type")
        self.assertError(curl(s, "/v1/tasks/987654321"), 404, "not_found")
        self.assertError(curl(s, "/v1/tasks/abc"), 400, "invalid_argument")
        self.assertError(curl(s, "/v1/tasks?status=sleepy"), 400, "invalid_argument", "status")
        self.assertError(curl(s, "/v1/tasks?colour=red"), 400, "invalid_argument", "colour")
        self.assertError(curl(s, "/v1/tasks?order=sideways"), 400, "invalid_argument", "order")
        self.assertError(curl(s, "/v1/tasks?created_from=yesterday"), 400, "invalid_argument",
                         "created_from")
        self.assertError(curl(s, "/v1/tasks?created_from=2001-01-01T00:00:00Z"
                                 "&created_before=2000-01-01T00:00:00Z"), 400,
                         "invalid_argument", "created_before")
        self.assertError(curl(s, "/v1/tasks?payload=maybe"), 400, "invalid_argument", "payload")
        self.assertError(curl(s, "/v1/nowhere"), 404, "not_found")
        self.assertError(curl(s, "/v1/counts", "DELETE"), 405, "method_not_allowed")

    def test_04_max_connections(self):
        s = self.server
        sockets = []
        try:
            for _ in range(16):
                sockets.append(socket.create_connection(("127.0.0.1", s.port), timeout=5))
            time.sleep(0.2)
            self.assertError(curl(s, "/v1/counts"), 503, "too_many_connections")
        finally:
            for sock in sockets:
                sock.close()
        wait_for(lambda: curl(s, "/v1/counts")[0] == 200, 10, "a free connection slot")

    def test_05_events(self):
        s = self.server
        args = ["curl", "-s", "-N", "--max-time", "20",
                "-H", "Authorization: Bearer " + READ_TOKEN,
                "http://127.0.0.1:%d/v1/events" % s.port]
        stream = subprocess.Popen(args, stdout=subprocess.PIPE)
        lines = []

        def reader():
            for line in stream.stdout:
                lines.append(line.decode().rstrip("\n"))
        threading.Thread(target=reader, daemon=True).start()
        try:
            def events(name):
                out = []
                for i, line in enumerate(lines):
                    if line == "event: " + name and i + 1 < len(lines):
                        self.assertTrue(lines[i - 1].startswith("id: "), lines[i - 1])
                        out.append(json.loads(lines[i + 1][len("data: "):]))
                return out
            first = wait_for(lambda: events("counts"), 10, "event: counts")[0]
            self.assertEqual(set(first), {"by_status", "by_type"})
            self.assertEqual(first, curl(s, "/v1/counts")[1])
            task = self.enqueue({"type": "noop", "payload": "sse"})
            kinds = wait_for(
                lambda: {e["kind"] for e in events("task") if e["id"] == task} >=
                {"enqueued", "started", "succeeded"} and events("task"), 10, "task events")
            mine = [e for e in kinds if e["id"] == task]
            self.assertEqual(mine[0]["type"], "noop")
            self.assertIn("at", mine[0])
            wait_for(lambda: any(c != first for c in events("counts")), 10, "a counts change")
            wait_for(lambda: ": keep-alive" in lines, 5, "a keep-alive comment")
        finally:
            stream.kill()
            stream.wait(5)
        # Resume: the events after a Last-Event-ID come again.
        ids = [l[4:] for l in lines if l.startswith("id: ")]
        task_ids = [lines[i - 1][4:] for i, l in enumerate(lines) if l == "event: task"]
        out = subprocess.run(["curl", "-s", "-N", "-H", "Authorization: Bearer " + READ_TOKEN, "--max-time", "2", "-H",
                              "Last-Event-ID: " + task_ids[0],
                              "http://127.0.0.1:%d/v1/events" % s.port],
                             capture_output=True, timeout=10).stdout.decode()
        self.assertIn("id: " + task_ids[1] + "\nevent: task", out)
        self.assertNotIn("id: " + task_ids[0] + "\nevent: task", out)
        out = subprocess.run(["curl", "-s", "-N", "-H", "Authorization: Bearer " + READ_TOKEN, "--max-time", "2", "-H",
                              "Last-Event-ID: 00000000-5",
                              "http://127.0.0.1:%d/v1/events" % s.port],
                             capture_output=True, timeout=10).stdout.decode()
        self.assertIn("event: reset", out)
        self.assertTrue(ids)
        # A live task and a live listing.
        task = self.enqueue({"type": "sleep", "payload": "300"})
        out = subprocess.run(["curl", "-s", "-N", "-H", "Authorization: Bearer " + READ_TOKEN, "--max-time", "3",
                              "http://127.0.0.1:%d/v1/events?task=%d&status=running&type=sleep"
                              % (s.port, task)],
                             capture_output=True, timeout=10).stdout.decode()
        self.assertIn("event: task_state", out)
        self.assertIn("event: list", out)
        self.assertIn('"status":"succeeded"', out)

    def test_06_metrics(self):
        code, text = curl(self.server, "/metrics")
        self.assertEqual(code, 200)
        check = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                               capture_output=True, timeout=30)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertIn("spoold_http_requests_total", text)

    def test_07_raw_socket_abuse(self):
        s = self.server
        kept = self.enqueue({"type": "sleep", "payload": "1", "delay_ms": 600000})

        def exchange(data, wait=2.0):
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            try:
                try:
                    sock.sendall(data)
                    sock.shutdown(socket.SHUT_WR)
                except OSError:
                    pass  # the server answered and closed before all was sent
                sock.settimeout(wait)
                out = b""
                while True:
                    try:
                        chunk = sock.recv(4096)
                    except ConnectionResetError:
                        return out
                    if not chunk:
                        return out
                    out += chunk
            except socket.timeout:
                return out
            finally:
                sock.close()
        self.assertIn(b"400", exchange(b"GARBAGE\r\n\r\n"))
        self.assertIn(b"400", exchange(b"GET / HTTP/1.1\r\nHost x\r\n\r\n"))
        exchange(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"ty")
        exchange(b"GET /v1/counts HTTP/1.1\r\nHo")
        exchange(bytes(range(256)) * 8)
        self.assertIn(b"413", exchange(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\n"
                                       b"Content-Length: 999999\r\n\r\n"))
        self.assertIn(b"400", exchange(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X: " +
                                       b"a" * 20000 + b"\r\n\r\n"))
        # Slow loris: a header that never ends is cut off at header_timeout.
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        start = time.monotonic()
        sock.sendall(b"GET /v1/counts HTTP/1.1\r\n")
        try:
            for _ in range(20):
                sock.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.2)
                if time.monotonic() - start > 4:
                    break
        except OSError:
            pass
        sock.settimeout(5)
        try:
            self.assertEqual(sock.recv(100), b"")
        except ConnectionResetError:
            pass
        self.assertLess(time.monotonic() - start, 4)
        sock.close()
        # A slow body too.
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
        sock.sendall(b"POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
        sock.settimeout(5)
        start = time.monotonic()
        try:
            self.assertEqual(sock.recv(100), b"")
        except ConnectionResetError:
            pass
        self.assertLess(time.monotonic() - start, 3)
        sock.close()
        # Still serving, nothing lost.
        code, task = curl(s, "/v1/tasks/%d" % kept)
        self.assertEqual((code, task["status"]), (200, "pending"))
        self.assertEqual(curl(s, "/readyz")[0], 200)

    def test_08_http_post(self):
        base = "http://127.0.0.1:%d" % self.hook.server_address[1]
        ok = self.enqueue({"type": "http.post",
                           "payload": {"url": base + "/ok", "body": {"n": 1}}})
        down = self.enqueue({"type": "http.post",
                             "payload": {"url": base + "/down", "body": "x"},
                             "retry": {"kind": "fixed", "max_attempts": 2,
                                       "initial_delay_ms": 50, "max_delay_ms": 50}})
        gone = self.enqueue({"type": "http.post", "payload": {"url": base + "/gone"}})
        outside = self.enqueue({"type": "http.post",
                                "payload": {"url": "http://127.0.0.2:1/ok"}})
        self.wait_status(ok, {"succeeded"})
        self.assertIn(("/ok", b'{"n":1}'), Hook.received)
        task = self.wait_status(down, {"failed"})
        self.assertEqual(task["attempts"], 2)
        self.assertIn("HTTP 503", task["last_error"])
        self.assertIn("down for maintenance", task["last_error"])
        task = self.wait_status(gone, {"failed"})
        self.assertEqual(task["attempts"], 1)
        self.assertIn("HTTP 404", task["last_error"])
        self.assertIn("no such hook here", task["last_error"])
        history = curl(self.server, "/v1/tasks/%d/history" % gone)[1]
        self.assertIn("no such hook", history["failures"][0]["error"])
        task = self.wait_status(outside, {"failed"})
        self.assertEqual(task["attempts"], 1)
        self.assertIn("allow", task["last_error"])

    def test_08b_retry_after_holds_the_host(self):
        """A 429 with Retry-After: 4 is retried 4 s later, not at the
        policy's 50 ms, and holds its host's bucket (host_rate_limit) as
        long: a request to the same host waits, its attempt unspent, while
        one to another host goes at once."""
        base = "http://127.0.0.1:%d" % self.hook.server_address[1]
        other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        try:
            elsewhere = "http://127.0.0.1:%d" % other.server_address[1]
            fast_retry = {"kind": "fixed", "max_attempts": 2,
                          "initial_delay_ms": 50, "max_delay_ms": 50}
            busy = self.enqueue({"type": "http.post", "retry": fast_retry,
                                 "payload": {"url": base + "/busy"}})
            first = wait_for(lambda: [t for p, t in Hook.times if p == "/busy"],
                             15, "the first 429")[0]
            later = self.enqueue({"type": "http.post",
                                  "payload": {"url": base + "/later"}})
            away = self.enqueue({"type": "http.post",
                                 "payload": {"url": elsewhere + "/elsewhere"}})
            self.wait_status(away, {"succeeded"})
            self.wait_status(later, {"succeeded"})
            task = self.wait_status(busy, {"failed"})
            self.assertEqual(task["attempts"], 2)
            self.assertIn("HTTP 429", task["last_error"])
            at = {p: [t - first for q, t in Hook.times if q == p]
                  for p in ("/busy", "/later", "/elsewhere")}
            self.assertLess(at["/elsewhere"][0], 3.0, at)
            self.assertGreaterEqual(at["/later"][0], 3.5, at)
            self.assertGreaterEqual(at["/busy"][1], 3.5, at)
            code, info = curl(self.server, "/v1/tasks/%d" % later)
            self.assertEqual(info["attempts"], 1, "waiting spent no attempt")
        finally:
            other.shutdown()

    def test_09_sigterm_and_restart(self):
        s = self.server
        acknowledged = []
        stop = threading.Event()

        def client():
            while not stop.is_set():
                try:
                    code, body = curl(s, "/v1/tasks", "POST",
                                      {"type": "sleep", "payload": "1", "delay_ms": 600000},
                                      timeout=5)
                except Exception:
                    continue
                if code == 201:
                    acknowledged.append(body["id"])
        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        wait_for(lambda: len(acknowledged) >= 20, 20, "20 acknowledged enqueues")
        rc = s.stop(signal.SIGTERM)
        stop.set()
        for t in threads:
            t.join(20)
        self.assertEqual(rc, 0)
        s.start()
        for task_id in acknowledged:
            code, task = curl(s, "/v1/tasks/%d" % task_id)
            self.assertEqual(code, 200, (task_id, task))


class BusyTest(unittest.TestCase):
    """Back-pressure through HTTP: with room for one enqueue not yet durable,
    simultaneous POSTs meet the writer's bound and get 503 busy with
    Retry-After, and every 201 they got is stored."""

    def test_busy_answers_503_with_retry_after_and_loses_nothing(self):
        directory = tempfile.mkdtemp(prefix="spoold-busy-")
        write_token(directory)
        server = Spoold(directory, free_port(), 1,
                        settings=("writer.max_pending_tasks=1",))
        server.start()
        try:
            stored, busy = [], []
            for _ in range(40):  # rounds, until the bound has been met
                stored_now, busy_now = self.burst(server, 12)
                stored += stored_now
                busy += busy_now
                if busy:
                    break
            self.assertTrue(busy, "12 simultaneous enqueues never met the bound")
            for retry_after, body in busy:
                self.assertEqual(retry_after, "1")
                self.assertEqual(body["error"]["code"], "busy", body)
                self.assertIn("writer.max_pending_tasks", body["error"]["message"])
            for task_id in stored:
                code, task = curl(server, "/v1/tasks/%d" % task_id)
                self.assertEqual(code, 200, task)
        finally:
            self.assertEqual(server.stop(), 0)
            shutil.rmtree(directory, ignore_errors=True)

    @staticmethod
    def burst(server, count):
        """POSTs `count` enqueues at once over open connections: the stored
        ids, and (Retry-After, body) of each 503."""
        import http.client
        connections = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
                       for _ in range(count)]
        for c in connections:
            c.connect()
        barrier = threading.Barrier(count)
        results = [None] * count
        body = json.dumps({"type": "noop", "payload": "x"})

        def post(i):
            barrier.wait(10)
            connections[i].request("POST", "/v1/tasks", body,
                                   {"Authorization": "Bearer " + TOKEN,
                                    "Content-Type": "application/json"})
            response = connections[i].getresponse()
            results[i] = (response.status, response.getheader("Retry-After"),
                          json.loads(response.read()))

        threads = [threading.Thread(target=post, args=(i,)) for i in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        for c in connections:
            c.close()
        stored = [r[2]["id"] for r in results if r and r[0] == 201]
        busy = [(r[1], r[2]) for r in results if r and r[0] == 503]
        assert len(stored) + len(busy) == count, results
        return stored, busy


class BackupTest(unittest.TestCase):
    """POST /v1/backup: a backup into backup.dir while clients enqueue,
    with the write token only, no body and no path from the client; a
    spoold on the restored copy serves every task acknowledged before it."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="spoold-backup-")
        write_token(self.dir)
        self.backups = os.path.join(self.dir, "backups")
        self.server = Spoold(self.dir, free_port(), free_port(),
                             settings=["backup.dir=" + self.backups, "backup.keep=3"])
        self.server.start()

    def tearDown(self):
        if self.server.process.poll() is None:
            self.server.stop(signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_backup_under_load_and_restore(self):
        s = self.server
        acknowledged = []
        stop = threading.Event()

        def client():
            while not stop.is_set():
                code, body = curl(s, "/v1/tasks", "POST",
                                  {"type": "sleep", "payload": "1", "delay_ms": 600000})
                if code == 201:
                    acknowledged.append(body["id"])
        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: len(acknowledged) >= 50, 30, "50 acknowledged enqueues")
            before = list(acknowledged)
            code, made = curl(s, "/v1/backup", "POST", timeout=60)
        finally:
            stop.set()
            for t in threads:
                t.join(20)
        self.assertEqual(code, 201, made)
        self.assertEqual(made["id"], 1)
        self.assertGreater(made["files"], 0)
        self.assertGreater(made["size_bytes"], 0)
        self.assertRegex(made["created_at"], r"^\d{4}-\d\d-\d\dT")
        self.assertEqual(stat.S_IMODE(os.stat(self.backups).st_mode), 0o700)

        # Only the write token; no body, so no path, from the client.
        code, body = curl(s, "/v1/backup", "POST", token=READ_TOKEN)
        self.assertEqual(code, 403, body)
        code, body = curl(s, "/v1/backup", "POST", token=None)
        self.assertEqual(code, 401, body)
        code, body = curl(s, "/v1/backup", "POST", {"dir": "/tmp/elsewhere"})
        self.assertEqual(code, 400, body)
        self.assertIn("takes no body", body["error"]["message"])
        code, body = curl(s, "/v1/backup")
        self.assertEqual(code, 405, body)
        self.assertEqual(sorted(os.listdir(os.path.join(self.backups, "meta"))), ["1"])

        s.stop(signal.SIGKILL)
        restored = os.path.join(self.dir, "restored")
        os.makedirs(restored)
        write_token(restored)
        out = subprocess.run([os.path.join(os.path.dirname(SPOOLD), "spool"), "restore",
                              self.backups, os.path.join(restored, "data")],
                             capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        copy = Spoold(restored, free_port(), free_port())
        copy.start()
        try:
            for task_id in before:
                code, task = curl(copy, "/v1/tasks/%d" % task_id)
                self.assertEqual(code, 200, (task_id, task))
        finally:
            copy.stop(signal.SIGKILL)

    def test_without_backup_dir_it_says_so(self):
        self.server.stop(signal.SIGKILL)
        plain = Spoold(self.dir, free_port(), free_port())
        plain.start()
        try:
            code, body = curl(plain, "/v1/backup", "POST")
            self.assertEqual(body["error"]["code"], "failed_precondition", body)
            self.assertIn("backup.dir", body["error"]["message"])
            self.assertEqual(code, 409, body)
        finally:
            plain.stop(signal.SIGKILL)


def serve_hook():
    """spoold_test.py --hook: Hook alone, for tests in other languages
    (tests/remote_test.cc). Prints "hook listening on PORT" (a free loopback
    port), then {"path": ..., "body": ...} for each request, one JSON line
    each, before it answers; serves until killed."""
    Hook.echo = True
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    print("hook listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1:] == ["--hook"]:
        serve_hook()
        sys.exit(0)
    SPOOLD = sys.argv.pop(1)
    unittest.main(verbosity=2)
