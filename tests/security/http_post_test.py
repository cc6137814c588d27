#!/usr/bin/env python3
"""Attacks on spoold's http.post handler (issue 27, docs/security.md): the
real spoold, real libcurl and real sockets, with loopback receivers that
record everything that reaches them.

  http_post_test.py SPOOLD [unittest args]

The allow-list of the spoold under attack ends with "http://**/**", the
widest entry there is, so that every attack passes the URL check and meets
the address rules; only "http://127.0.0.1:*/named/**" names an address.
Its environment points http_proxy and friends at a listener that records
any connection: none may arrive. Each attack asserts that it failed, that
nothing reached a receiver, and that spoold still serves with nothing lost.
Every wait is bounded; about 10 s.
"""

import http.server
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "server"))
import spoold_test  # noqa: E402
from spoold_test import Spoold, curl, free_port, wait_for, write_token  # noqa: E402

SECRET = "s3cr3t-t0k3n-value"


class Receiver(http.server.BaseHTTPRequestHandler):
    """A webhook receiver that keeps connections alive (HTTP/1.1) and
    records every request: path, headers, body and the client's port."""
    protocol_version = "HTTP/1.1"
    requests = []
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with Receiver.lock:
            Receiver.requests.append({
                "path": self.path, "headers": list(self.headers.items()),
                "body": body, "port": self.client_address[1],
                "at": time.monotonic()})
        path = self.path.split("?")[0]
        if path.endswith("/stream") or path.endswith("/stream-500"):
            return self.stream(200 if path.endswith("/stream") else 500)
        if path.endswith("/retry-huge"):
            return self.answer(503, b"later", {"Retry-After": "9223372036854775807"})
        if path.endswith("/fail"):
            return self.answer(500, b"failed here")
        self.answer(200, b"fine")

    def answer(self, code, text, headers=None):
        self.send_response(code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def stream(self, code):
        """A body without end (bounded at 20 s so the thread ends)."""
        self.send_response(code)
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = b"x" * 16384
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                self.wfile.write(chunk)
        except OSError:
            pass  # the client hung up: what the bound is for
        self.close_connection = True

    def log_message(self, *args):
        pass


class Listener:
    """A TCP listener that records each connection's first bytes and answers
    200: a proxy that must never be used (or, configured, must be)."""

    def __init__(self):
        self.seen = []
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.settimeout(5)
                try:
                    data = self.request.recv(65536)
                except OSError:
                    data = b""
                outer.seen.append(data)
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n"
                                     b"Connection: close\r\n\r\nproxied")
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class TargetSpoold(Spoold):
    """spoold with `settings` (--set KEY=VALUE) and `environment` added to
    its own environment only (the test's curl must not see a proxy)."""

    def __init__(self, directory, settings, environment):
        super().__init__(directory, free_port(), 0, settings)
        self.environment = environment

    def start(self):
        args = [spoold_test.SPOOLD,
                "--set", "storage.path=" + os.path.join(self.directory, "data"),
                "--set", "server.listen=127.0.0.1:%d" % self.port,
                "--set", "server.token_file=" + os.path.join(self.directory, "token"),
                "--set", "runtime.close_timeout_ms=3000",
                "--set", "handlers.http.post.timeout_ms=5000"]
        for setting in self.settings:
            args += ["--set", setting]
        env = dict(os.environ)
        env.update(self.environment)
        self.log = open(os.path.join(self.directory, "spoold.log"), "ab")
        self.process = subprocess.Popen(args, stdout=self.log, stderr=self.log,
                                        env=env)
        wait_for(self.ready, 30, "spoold /readyz")


def start_spoold(directory, settings, environment):
    write_token(directory)
    server = TargetSpoold(directory, settings, environment)
    server.start()
    return server


class HttpPostAttackTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="security-http-post-")
        cls.receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        cls.receiver.daemon_threads = True
        threading.Thread(target=cls.receiver.serve_forever, daemon=True).start()
        cls.port = cls.receiver.server_address[1]
        cls.proxy = Listener()
        proxy_url = "http://127.0.0.1:%d" % cls.proxy.port
        allow = ",".join(["http://127.0.0.1:*/named/**",
                          "http://*:%d/**" % cls.port, "http://**/**"])
        cls.server = start_spoold(cls.dir, (
            "handlers.http.post.allow=" + allow,
            "handlers.http.post.timeout_ms=15000",
            "handlers.http.post.max_retry_after_ms=1500",
            # One worker thread, one libcurl handle: a connection it keeps
            # alive is the one the next request would reuse.
            "runtime.workers=1",
            "log.level=debug"),
            {name: proxy_url for name in ("http_proxy", "HTTP_PROXY",
                                          "https_proxy", "HTTPS_PROXY",
                                          "all_proxy", "ALL_PROXY")})
        # Kept pending through every attack: nothing may be lost.
        cls.kept = cls.enqueue_as(cls.server, {"type": "sleep", "payload": "1",
                                               "delay_ms": 600000})

    @classmethod
    def tearDownClass(cls):
        if cls.server.process.poll() is None:
            cls.server.stop(signal.SIGKILL)
        cls.receiver.shutdown()
        cls.proxy.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @staticmethod
    def enqueue_as(server, task):
        code, body = curl(server, "/v1/tasks", "POST", task)
        assert code == 201, (code, body)
        return body["id"]

    def post(self, url, **extra):
        task = {"type": "http.post", "payload": {"url": url, "body": {"n": 1}},
                "retry": {"kind": "none"}}
        task.update(extra)
        return self.enqueue_as(self.server, task)

    def finished(self, task_id, timeout=15):
        def check():
            code, task = curl(self.server, "/v1/tasks/%d" % task_id)
            return task if code == 200 and task["status"] in (
                "succeeded", "failed", "cancelled") else None
        return wait_for(check, timeout, "task %d to finish" % task_id)

    def paths_received(self):
        with Receiver.lock:
            return [r["path"] for r in Receiver.requests]

    def assertStillServing(self):
        code, task = curl(self.server, "/v1/tasks/%d" % self.kept)
        self.assertEqual((code, task["status"]), (200, "pending"), task)
        ok = self.post("http://127.0.0.1:%d/named/still-ok" % self.port)
        self.assertEqual(self.finished(ok)["status"], "succeeded")
        self.assertEqual(curl(self.server, "/readyz")[0], 200)

    def test_01_special_addresses_are_refused_however_written(self):
        r = self.port
        attacks = {
            "http://169.254.169.254/latest/meta-data/": "169.254.169.254, a link-local",
            "http://10.0.0.1/a1": "10.0.0.1, a private",
            "http://172.16.0.1/a2": "172.16.0.1, a private",
            "http://192.168.0.1/a3": "192.168.0.1, a private",
            "http://100.64.0.1/a4": "100.64.0.1, a carrier-grade NAT",
            "http://224.0.0.1/a5": "224.0.0.1, a multicast",
            "http://255.255.255.255/a6": "255.255.255.255, the broadcast",
            "http://0.0.0.0:%d/a7" % r: "0.0.0.0, an unspecified",
            "http://[::]:%d/a8" % r: "an unspecified address (::)",
            "http://[::1]:%d/a9" % r: "::1, a loopback",
            "http://[::ffff:127.0.0.1]:%d/a10" % r: "IPv4-mapped form of a loopback",
            "http://[::ffff:169.254.169.254]/a11": "IPv4-mapped form of a link-local",
            "http://[fe80::1]:%d/a12" % r: "fe80::1, a link-local",
            "http://[fd00::1]/a13": "fd00::1, a unique-local",
            # Not the entry that names 127.0.0.1: its path is not /named.
            "http://127.0.0.1:%d/a14" % r: "127.0.0.1, a loopback",
            # Other spellings of 127.0.0.1: libcurl's parser writes them as
            # 127.0.0.1 before the allow-list sees them, and the address
            # check meets 127.0.0.1 (a loopback) whatever the spelling.
            "http://2130706433:%d/a15" % r: "127.0.0.1, a loopback",
            "http://0x7f000001:%d/a16" % r: "127.0.0.1, a loopback",
            "http://0177.0.0.1:%d/a17" % r: "127.0.0.1, a loopback",
            "http://127.1:%d/a18" % r: "127.0.0.1, a loopback",
            # A host name that resolves to loopback, through "http://*:PORT/**",
            # an entry that names no address.
            "http://localhost:%d/named/a19" % r: "a loopback",
        }
        ids = {url: self.post(url) for url in attacks}
        for url, why in attacks.items():
            task = self.finished(ids[url])
            self.assertEqual(task["status"], "failed", (url, task))
            self.assertEqual(task["attempts"], 1, (url, task))
            self.assertIn("refused to connect to", task["last_error"], url)
            self.assertIn(why, task["last_error"], url)
            self.assertIn("names the address itself", task["last_error"], url)
        self.assertEqual(self.paths_received(), [],
                         "a refused request reached the receiver")
        # The entry that names 127.0.0.1 reaches it.
        named = self.post("http://127.0.0.1:%d/named/hook" % r)
        self.assertEqual(self.finished(named)["status"], "succeeded")
        self.assertIn("/named/hook", self.paths_received())
        self.assertStillServing()

    def test_02_a_kept_alive_connection_carries_no_request_its_entry_does_not_allow(self):
        r = self.port
        first = self.post("http://127.0.0.1:%d/named/keep-1" % r)
        self.assertEqual(self.finished(first)["status"], "succeeded")
        second = self.post("http://127.0.0.1:%d/named/keep-2" % r)
        self.assertEqual(self.finished(second)["status"], "succeeded")
        with Receiver.lock:
            ports = {q["path"]: q["port"] for q in Receiver.requests}
        # The connection was reused (so the next request would reuse it too).
        self.assertEqual(ports["/named/keep-1"], ports["/named/keep-2"], ports)
        # Same host and port, a path only "http://**/**" allows: refused
        # before the request, on the connection kept alive.
        third = self.post("http://127.0.0.1:%d/keep-3" % r)
        task = self.finished(third)
        self.assertEqual(task["status"], "failed", task)
        self.assertIn("127.0.0.1, a loopback", task["last_error"])
        self.assertNotIn("/keep-3", self.paths_received())
        self.assertStillServing()

    def test_03_an_endless_body_does_not_hold_the_worker(self):
        r = self.port
        start = time.monotonic()
        ok = self.post("http://127.0.0.1:%d/named/stream" % r)
        bad = self.post("http://127.0.0.1:%d/named/stream-500" % r)
        task = self.finished(ok)
        self.assertEqual(task["status"], "succeeded", task)
        task = self.finished(bad)
        elapsed = time.monotonic() - start
        self.assertEqual(task["status"], "failed", task)
        self.assertIn("HTTP 500", task["last_error"])
        self.assertIn("cut off after max_response_bytes = 65536", task["last_error"])
        # timeout_ms is 15 s: the byte bound ended both, one worker in turn.
        self.assertLess(elapsed, 6, "the endless bodies held the worker")
        self.assertStillServing()

    def test_04_control_bytes_never_reach_a_header(self):
        r = self.port
        injected = self.post("http://127.0.0.1:%d/named/idem" % r,
                             idempotency_key="k1\r\nX-Injected: yes")
        task = self.finished(injected)
        self.assertEqual((task["status"], task["attempts"]), ("failed", 1), task)
        self.assertIn("idempotency_key holds a control byte", task["last_error"])
        fine = self.post("http://127.0.0.1:%d/named/idem-ok" % r,
                         idempotency_key="k2-plain")
        self.assertEqual(self.finished(fine)["status"], "succeeded")
        with Receiver.lock:
            requests = list(Receiver.requests)
        self.assertNotIn("/named/idem", [q["path"] for q in requests])
        for q in requests:
            for name, value in q["headers"]:
                self.assertNotEqual(name.lower(), "x-injected", q)
        sent = [q for q in requests if q["path"] == "/named/idem-ok"][0]
        self.assertIn(("Idempotency-Key", "k2-plain"), sent["headers"])
        # A URL with CR/LF in it is not a URL.
        crlf = self.post("http://127.0.0.1:%d/named/x\r\nX-Injected: yes" % r)
        task = self.finished(crlf)
        self.assertEqual(task["status"], "failed", task)
        self.assertIn("not a valid URL", task["last_error"])
        # The configured Content-Type: spoold refuses to start, naming it.
        out = subprocess.run(
            [spoold_test.SPOOLD, "--set",
             "handlers.http.post.content_type=text/plain\r\nX-Injected: yes",
             "--print-config"], capture_output=True, timeout=30)
        text = (out.stdout + out.stderr).decode()
        self.assertEqual(out.returncode, 2, text)
        self.assertIn('handlers."http.post".content_type: holds a control byte', text)
        self.assertStillServing()

    def test_05_secrets_in_urls_stay_out_of_errors_and_logs(self):
        r = self.port
        closed = free_port()
        urls = [
            "http://127.0.0.1:%d/named/fail?token=%s" % (r, SECRET),      # HTTP 500
            "http://127.0.0.1:%d/named/x?token=%s" % (closed, SECRET),   # cannot connect
            "http://127.0.0.1:%d/other?token=%s" % (r, SECRET),          # address refused
            "https://nowhere.invalid:443/x?token=%s" % SECRET,           # not allowed
            "http://user:%s@127.0.0.1:%d/named/x" % (SECRET, r),         # user info
            "http://127.0.0.1:%d/named/x y?token=%s" % (r, SECRET),      # malformed
        ]
        ids = [self.post(url) for url in urls]
        for url, task_id in zip(urls, ids):
            task = self.finished(task_id)
            self.assertEqual(task["status"], "failed", (url, task))
            code, history = curl(self.server, "/v1/tasks/%d/history" % task_id)
            self.assertEqual(code, 200, history)
            errors = [task["last_error"], history["last_error"]] + [
                f["error"] for f in history["failures"]]
            self.assertTrue(history["failures"], history)
            for error in errors:
                self.assertNotIn(SECRET, error, url)
        first = curl(self.server, "/v1/tasks/%d" % ids[0])[1]["last_error"]
        self.assertIn("HTTP 500 from http://127.0.0.1:%d/named/fail?\u2026" % r, first)
        code, listing = curl(self.server, "/v1/tasks?status=failed&payload=false&limit=1000")
        self.assertNotIn(SECRET, json.dumps(listing))
        with open(os.path.join(self.dir, "spoold.log"), "rb") as f:
            self.assertNotIn(SECRET.encode(), f.read())
        self.assertStillServing()

    def test_06_overflowing_durations_are_refused_not_wrapped(self):
        # 2^63 - 1 ms in microseconds wrapped to -1000 us: a sleep that
        # succeeded at once. Now a permanent error, at once.
        start = time.monotonic()
        ids = [self.enqueue_as(self.server, {"type": "sleep", "payload": p})
               for p in ("9223372036854775807", 9223372036854775807, "1e30")]
        for task_id in ids:
            task = self.finished(task_id)
            self.assertEqual((task["status"], task["attempts"]), ("failed", 1), task)
            self.assertIn("365 days", task["last_error"])
        self.assertLess(time.monotonic() - start, 5)
        # A 503 whose Retry-After is 2^63 - 1 seconds: the retry waits
        # max_retry_after_ms (1.5 s), not the policy's 50 ms a wrapped
        # negative delay fell back to.
        huge = self.post("http://127.0.0.1:%d/named/retry-huge" % self.port,
                         retry={"kind": "fixed", "max_attempts": 2,
                                "initial_delay_ms": 50, "max_delay_ms": 50})
        task = self.finished(huge)
        self.assertEqual((task["status"], task["attempts"]), ("failed", 2), task)
        with Receiver.lock:
            at = [q["at"] for q in Receiver.requests if q["path"] == "/named/retry-huge"]
        self.assertEqual(len(at), 2, at)
        self.assertGreaterEqual(at[1] - at[0], 1.3, at)
        self.assertLess(at[1] - at[0], 10, at)
        self.assertStillServing()

    def test_07_no_proxy_from_the_environment_was_ever_used(self):
        # Every request of the tests above ran with http_proxy and friends
        # set; the direct ones succeeded, and the proxy saw none.
        self.assertTrue(self.paths_received())
        self.assertEqual(self.proxy.seen, [])


class ConfiguredProxyTest(unittest.TestCase):
    """handlers."http.post".proxy: every request goes through it, even for a
    host no_proxy names; the allow-list still applies."""

    def test_the_configured_proxy_carries_every_request(self):
        directory = tempfile.mkdtemp(prefix="security-http-proxy-")
        proxy = Listener()
        try:
            server = start_spoold(directory, (
                "handlers.http.post.allow=http://hooks.invalid:80/**",
                "handlers.http.post.proxy=http://127.0.0.1:%d" % proxy.port),
                {"no_proxy": "*", "NO_PROXY": "*"})
            try:
                ok = HttpPostAttackTest.enqueue_as(server, {
                    "type": "http.post", "retry": {"kind": "none"},
                    "payload": {"url": "http://hooks.invalid/hook", "body": "x"}})
                outside = HttpPostAttackTest.enqueue_as(server, {
                    "type": "http.post", "retry": {"kind": "none"},
                    "payload": {"url": "http://other.invalid/hook", "body": "x"}})

                def status(task_id):
                    code, task = curl(server, "/v1/tasks/%d" % task_id)
                    return task if task.get("status") in ("succeeded", "failed") else None
                self.assertEqual(wait_for(lambda: status(ok), 15, "ok")["status"],
                                 "succeeded")
                task = wait_for(lambda: status(outside), 15, "outside")
                self.assertEqual(task["status"], "failed")
                self.assertIn("not in handlers", task["last_error"])
                self.assertEqual(len(proxy.seen), 1, proxy.seen)
                self.assertTrue(proxy.seen[0].startswith(b"POST http://hooks.invalid"),
                                proxy.seen)
                self.assertIn(b"/hook HTTP/1.1\r\n", proxy.seen[0])
            finally:
                self.assertEqual(server.stop(), 0)
        finally:
            proxy.close()
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    spoold_test.SPOOLD = sys.argv.pop(1)
    unittest.main(verbosity=2)
