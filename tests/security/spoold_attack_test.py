#!/usr/bin/env python3
"""Attacks on spoold's HTTP doors (issue 27, docs/security.md): the real
spoold, curl and raw sockets. Each attack asserts that it failed and that
spoold still serves with nothing lost.

  spoold_attack_test.py SPOOLD MAKE_TEST_CERTS [unittest args]

Every wait is bounded; about 15 s.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "server"))
import spoold_test  # noqa: E402
from spoold_test import (READ_TOKEN, TOKEN, Spoold, curl, free_port,  # noqa: E402
                         wait_for, write_token)

READS = ["/v1/tasks", "/v1/counts", "/v1/tasks/1", "/v1/tasks/1/history",
         "/metrics", "/v1/events"]


def raw(port, request, timeout=5):
    """The bytes spoold answers to `request`, sent as is on a new socket."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
        return out


def head_of(response):
    """(status code, {lower-case field: value}) of raw response bytes."""
    head = response.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    fields = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return int(head[0].split()[1]), fields


class SpooldAttackTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="spoold-attack-")
        write_token(cls.dir)
        cls.server = Spoold(cls.dir, free_port(), free_port())
        cls.server.start()
        code, body = curl(cls.server, "/v1/tasks", "POST",
                          {"type": "noop", "payload": "before the attacks"})
        assert code == 201, body
        cls.first = body["id"]

    @classmethod
    def tearDownClass(cls):
        if cls.server.process.poll() is None:
            cls.server.stop(signal.SIGKILL)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tearDown(self):
        # Whatever the attack, spoold serves and the first task is there.
        self.assertIsNone(self.server.process.poll(), "spoold died")
        code, body = curl(self.server, "/v1/tasks/%d" % self.first)
        self.assertEqual(code, 200, body)
        self.assertEqual(base64.b64decode(body["payload_base64"]), b"before the attacks")

    def test_reads_need_a_token(self):
        for path in READS:
            for token in (None, "not-the-token-at-all-0000"):
                code, body = curl(self.server, path, token=token, timeout=3)
                self.assertEqual(code, 401, (path, token, body))
        # Health checks stay open.
        self.assertEqual(curl(self.server, "/healthz", token=None)[0], 200)
        self.assertEqual(curl(self.server, "/readyz", token=None)[0], 200)

    def test_the_read_token_reads_and_cannot_write(self):
        code, body = curl(self.server, "/v1/counts", token=READ_TOKEN)
        self.assertEqual(code, 200, body)
        code, body = curl(self.server, "/metrics", token=READ_TOKEN)
        self.assertEqual(code, 200)
        for path, payload in (("/v1/tasks", {"type": "noop", "payload": "x"}),
                              ("/v1/tasks/%d/cancel" % self.first, None),
                              ("/v1/purge", {})):
            code, body = curl(self.server, path, "POST", payload, token=READ_TOKEN)
            self.assertEqual(code, 403, (path, body))
            self.assertIn("read-only token", body["error"]["message"])

    def test_a_foreign_host_is_misdirected(self):
        for host in ("rebind.example", "rebind.example:%d" % self.server.port,
                     "127.0.0.1.rebind.example", "localhost.:80", "[::2]"):
            code, body = curl(self.server, "/v1/counts", headers=["Host: " + host])
            self.assertEqual(code, 421, (host, body))
        # The dashboard is not served under a foreign name either.
        code, _ = curl(self.server, "/", token=None, headers=["Host: rebind.example"])
        self.assertEqual(code, 421)
        for host in ("localhost:%d" % self.server.port, "127.0.0.1", "[::1]:1"):
            code, body = curl(self.server, "/v1/counts", headers=["Host: " + host])
            self.assertEqual(code, 200, (host, body))
        answer = raw(self.server.port,
                     b"GET /v1/counts HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: rebind.example\r\n"
                     b"Authorization: Bearer " + TOKEN.encode() + b"\r\nConnection: close\r\n\r\n")
        self.assertEqual(head_of(answer)[0], 400)
        answer = raw(self.server.port,
                     b"GET /v1/counts HTTP/1.1\r\nAuthorization: Bearer " + TOKEN.encode() +
                     b"\r\nConnection: close\r\n\r\n")
        self.assertEqual(head_of(answer)[0], 421, "HTTP/1.1 without Host")

    def test_security_headers(self):
        answer = raw(self.server.port,
                     b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        code, fields = head_of(answer)
        self.assertEqual(code, 200)
        policy = fields["content-security-policy"]
        self.assertNotIn("unsafe-inline", policy)
        self.assertIn("frame-ancestors 'none'", policy)
        self.assertIn("script-src 'self'", policy)
        self.assertEqual(fields["x-frame-options"], "DENY")
        self.assertEqual(fields["x-content-type-options"], "nosniff")
        self.assertEqual(fields["referrer-policy"], "no-referrer")
        self.assertNotIn(b"<script>", answer)
        self.assertNotIn(b"style=", answer)
        for path in (b"/dashboard.js", b"/dashboard.css", b"/v1/counts", b"/nowhere"):
            answer = raw(self.server.port,
                         b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                         TOKEN.encode() + b"\r\nConnection: close\r\n\r\n")
            code, fields = head_of(answer)
            self.assertEqual(fields["x-content-type-options"], "nosniff", path)
            self.assertIn("frame-ancestors 'none'", fields["content-security-policy"], path)

    def test_head_sends_no_body(self):
        answer = raw(self.server.port,
                     b"HEAD /v1/counts HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                     TOKEN.encode() + b"\r\nConnection: close\r\n\r\n")
        code, fields = head_of(answer)
        self.assertEqual(code, 200)
        self.assertGreater(int(fields["content-length"]), 0)
        self.assertEqual(answer.split(b"\r\n\r\n", 1)[1], b"")

    def test_deep_json_is_refused_while_parsing(self):
        deep = b'{"type":"noop","payload":' + b"[" * 100000 + b"]" * 100000 + b"}"
        server = Spoold(self.dir + "-deep", free_port(), free_port(),
                        settings=["server.max_body_bytes=400000"])
        os.makedirs(server.directory, exist_ok=True)
        write_token(server.directory)
        server.start()
        try:
            for body in (deep, b'{"type":"noop","payload":' + b"[" * 65 + b"]" * 65 + b"}",
                         b'{"type":"noop","payload":1e999}'):
                code, answer = curl(server, "/v1/tasks", "POST", body)
                self.assertEqual(code, 400, answer)
            code, answer = curl(server, "/v1/tasks", "POST",
                                b'{"type":"noop","payload":' + b"[" * 60 + b"]" * 60 + b"}")
            self.assertEqual(code, 201, answer)
            self.assertIsNone(server.process.poll(), "spoold died")
        finally:
            server.stop(signal.SIGKILL)
            shutil.rmtree(server.directory, ignore_errors=True)

    def test_durations_cannot_overflow(self):
        for path, body in (("/v1/purge", {"older_than_ms": 2 ** 63 - 1}),
                           ("/v1/tasks", {"type": "noop", "payload": "x",
                                          "delay_ms": 2 ** 62}),
                           ("/v1/tasks", {"type": "noop", "payload": "x",
                                          "timeout_ms": 2 ** 62})):
            code, answer = curl(self.server, path, "POST", body)
            self.assertEqual(code, 400, (path, answer))
            self.assertIn("kMaxDelay", answer["error"]["message"])

    def test_beyond_loopback_needs_a_token_and_allow_insecure(self):
        base = [spoold_test.SPOOLD, "--set", "storage.path=" + os.path.join(self.dir, "beyond"),
                "--set", "server.listen=0.0.0.0:%d" % free_port()]
        token = ["--set", "server.token_file=" + os.path.join(self.dir, "token")]
        for args, key in ((base, "server.token_file"),
                          (base + token, "server.allow_insecure")):
            out = subprocess.run(args, capture_output=True, timeout=20)
            self.assertNotEqual(out.returncode, 0)
            text = (out.stdout + out.stderr).decode()
            self.assertIn("beyond loopback", text)
            self.assertIn(key, text)


def connect_from(source, port, timeout=5):
    """A socket to spoold from the loopback address `source` (127.0.0.x)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def open_stream(port, query="", source="127.0.0.1"):
    """(socket, status, bytes read) of GET /v1/events?query: a stream's
    head (the socket stays open), or a refusal whole."""
    s = connect_from(source, port)
    s.sendall(("GET /v1/events%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (query, port, TOKEN)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    status = head_of(head)[0] if head else 0
    while status != 200:  # a refusal: read its body, up to the close
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    return s, status, head


class SpooldLimitsTest(unittest.TestCase):
    """Connections per address, event streams and live listings in all,
    and the longest an event stream lives."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="spoold-limits-")
        write_token(cls.dir)
        cls.server = Spoold(cls.dir, free_port(), free_port(), settings=(
            "server.max_connections_per_address=4",
            "server.max_event_streams=3",
            "server.max_live_listings=1",
            "server.sse_max_duration_ms=1500"))
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        if cls.server.process.poll() is None:
            cls.server.stop(signal.SIGKILL)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tearDown(self):
        self.assertIsNone(self.server.process.poll(), "spoold died")

    def metric(self, name):
        code, text = curl(self.server, "/metrics")
        self.assertEqual(code, 200)
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        self.fail("no metric " + name)

    def test_one_address_cannot_take_every_connection(self):
        port = self.server.port
        held = [connect_from("127.0.0.2", port) for _ in range(4)]
        try:
            extra = connect_from("127.0.0.2", port)
            answer = extra.recv(4096)
            extra.close()
            status, fields = head_of(answer)
            self.assertEqual(status, 503, answer)
            self.assertIn(b"too_many_connections", answer)
            self.assertIn(b"max_connections_per_address", answer)
            self.assertEqual(fields.get("retry-after"), "1")
            # Another address is served meanwhile.
            other = connect_from("127.0.0.3", port)
            other.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Connection: close\r\n\r\n")
            self.assertEqual(head_of(other.recv(4096))[0], 200)
            other.close()
        finally:
            for s in held:
                s.close()
        # Once they are closed, the address may connect again.
        wait_for(lambda: head_of(raw(port, b"GET /healthz HTTP/1.1\r\nHost: "
                                 b"127.0.0.1\r\nConnection: close\r\n\r\n"))[0]
                 == 200, 10, "the address to be admitted again")

    def test_event_streams_and_live_listings_are_capped(self):
        port = self.server.port
        rejected = self.metric("spoold_event_streams_rejected_total")
        streams = []
        try:
            s, status, _ = open_stream(port, "?status=pending", "127.0.0.4")
            streams.append(s)
            self.assertEqual(status, 200)
            # A second live listing is over max_live_listings.
            s, status, head = open_stream(port, "?type=noop", "127.0.0.4")
            s.close()
            self.assertEqual(status, 503, head)
            self.assertIn(b"max_live_listings", head)
            for _ in range(2):
                s, status, _ = open_stream(port, "", "127.0.0.5")
                streams.append(s)
                self.assertEqual(status, 200)
            # A fourth stream of any kind is over max_event_streams.
            s, status, head = open_stream(port, "", "127.0.0.6")
            s.close()
            self.assertEqual(status, 503, head)
            self.assertEqual(self.metric("spoold_event_streams_rejected_total"),
                             rejected + 2)
            # Plain requests are still served.
            self.assertEqual(curl(self.server, "/v1/counts")[0], 200)
        finally:
            for s in streams:
                s.close()

    def test_an_event_stream_ends_after_its_longest_life(self):
        wait_for(lambda: self.metric("spoold_event_streams") == 0, 10,
                 "earlier streams to be gone")
        s, status, _ = open_stream(self.server.port, "?status=pending", "127.0.0.7")
        self.assertEqual(status, 200)
        s.settimeout(10)
        started = time.monotonic()
        while s.recv(65536):
            pass
        lived = time.monotonic() - started
        s.close()
        self.assertGreater(lived, 1.0)
        self.assertLess(lived, 8.0)
        # Its places are given back: the live listing may be opened again.
        wait_for(lambda: self.metric("spoold_event_streams") == 0, 10,
                 "the stream to be released")
        s, status, head = open_stream(self.server.port, "?status=pending",
                                      "127.0.0.7")
        s.close()
        self.assertEqual(status, 200, head)


MAKE_TEST_CERTS = None  # tests/security/make_test_certs.sh, from argv


def curl_tls(port, path, certs, method="GET", body=None, token=TOKEN,
             ca="ca.pem", client=None, timeout=10):
    """(curl's exit code, HTTP status, body text) over HTTPS to 127.0.0.1,
    trusting certs/`ca` (None: the system's CAs), presenting the client
    certificate certs/`client`.pem when set."""
    args = ["curl", "-s", "-S", "-X", method, "-o", "-", "-w", "\n%{http_code}",
            "--max-time", str(timeout), "https://127.0.0.1:%d%s" % (port, path)]
    if ca:
        args += ["--cacert", os.path.join(certs, ca)]
    if client:
        args += ["--cert", os.path.join(certs, client + ".pem"),
                 "--key", os.path.join(certs, client + ".key")]
    if token:
        args += ["-H", "Authorization: Bearer " + token]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    out = subprocess.run(args, input=None if body is None else json.dumps(body).encode(),
                         capture_output=True, timeout=timeout + 5)
    text, _, code = out.stdout.decode().rpartition("\n")
    return out.returncode, int(code or 0), text


class TlsSpoold(Spoold):
    """A spoold serving HTTPS with the test PKI in `certs`."""

    def __init__(self, directory, certs, settings=()):
        super().__init__(directory, free_port(), free_port(), settings=(
            "server.tls_certificate_file=" + os.path.join(certs, "server.pem"),
            "server.tls_key_file=" + os.path.join(certs, "server.key"),
        ) + tuple(settings))
        self.certs = certs
        self.client = None

    def ready(self):
        if self.process.poll() is not None:
            raise AssertionError("spoold exited with %s" % self.process.returncode)
        try:
            return curl_tls(self.port, "/readyz", self.certs, token=None,
                            client=self.client, timeout=3)[1] == 200
        except Exception:
            return False


def spoold_refuses(directory, *settings):
    """The output of a spoold that must refuse to start with `settings`."""
    args = [spoold_test.SPOOLD, "--set",
            "storage.path=" + os.path.join(directory, "refused"),
            "--set", "server.listen=127.0.0.1:%d" % free_port()]
    for setting in settings:
        args += ["--set", setting]
    out = subprocess.run(args, capture_output=True, timeout=20)
    assert out.returncode != 0, "spoold started with %s" % (settings,)
    return (out.stdout + out.stderr).decode()


class SpooldTlsTest(unittest.TestCase):
    """HTTPS: real handshakes with curl, and what is refused."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="spoold-tls-")
        cls.certs = os.path.join(cls.dir, "certs")
        subprocess.run(["bash", MAKE_TEST_CERTS, cls.certs], check=True, timeout=60)
        write_token(cls.dir)
        cls.server = TlsSpoold(cls.dir, cls.certs)
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        if cls.server.process.poll() is None:
            cls.server.stop(signal.SIGKILL)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def tearDown(self):
        self.assertIsNone(self.server.process.poll(), "spoold died")
        rc, code, text = curl_tls(self.server.port, "/v1/counts", self.certs)
        self.assertEqual((rc, code), (0, 200), text)

    def test_requests_over_tls(self):
        rc, code, text = curl_tls(self.server.port, "/v1/tasks", self.certs, "POST",
                                  {"type": "noop", "payload": "over tls"})
        self.assertEqual((rc, code), (0, 201), text)
        task = json.loads(text)["id"]
        rc, code, text = curl_tls(self.server.port, "/v1/tasks/%d" % task, self.certs)
        self.assertEqual(code, 200, text)
        # Tokens are needed as before.
        rc, code, _ = curl_tls(self.server.port, "/v1/tasks", self.certs, token=None)
        self.assertEqual(code, 401)
        # A listing larger than one TLS record, and an event stream.
        for i in range(20):
            self.assertEqual(curl_tls(self.server.port, "/v1/tasks", self.certs, "POST",
                                      {"type": "noop", "payload": "x" * 3000})[1], 201)
        rc, code, text = curl_tls(self.server.port, "/v1/tasks?limit=100", self.certs)
        self.assertEqual(code, 200)
        self.assertGreaterEqual(len(json.loads(text)["tasks"]), 21)
        rc, code, text = curl_tls(self.server.port, "/v1/events", self.certs, timeout=2)
        self.assertEqual(rc, 28)  # curl's own timeout: the stream stays open
        self.assertIn("retry: 2000", text)
        self.assertIn("event: counts", text)

    def test_plain_http_and_untrusted_clients_get_no_answer(self):
        port = self.server.port
        code, _ = curl(self.server, "/v1/counts", timeout=3)
        self.assertNotEqual(code, 200)
        # A client that does not trust the server's CA refuses it (curl 60).
        rc, _, _ = curl_tls(port, "/v1/counts", self.certs, ca=None)
        self.assertEqual(rc, 60)
        # A connection that never starts its handshake is closed after
        # header_timeout_ms (800 ms here).
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            started = time.monotonic()
            self.assertEqual(s.recv(100), b"")
            self.assertLess(time.monotonic() - started, 4)
        rc, code, text = curl_tls(port, "/metrics", self.certs)
        failures = [line for line in text.splitlines()
                    if line.startswith("spoold_tls_handshake_failures_total ")]
        self.assertTrue(failures and float(failures[0].split()[1]) >= 2, failures)

    def test_bad_key_files_are_refused_at_start(self):
        certs = self.certs
        cert = "server.tls_certificate_file=" + os.path.join(certs, "server.pem")
        # Readable by others.
        loose = os.path.join(self.dir, "loose.key")
        shutil.copy(os.path.join(certs, "server.key"), loose)
        os.chmod(loose, 0o644)
        text = spoold_refuses(self.dir, cert, "server.tls_key_file=" + loose)
        self.assertIn("server.tls_key_file", text)
        self.assertIn("chmod", text)
        # Another certificate's key.
        text = spoold_refuses(self.dir, cert, "server.tls_key_file=" +
                              os.path.join(certs, "rogue.key"))
        self.assertIn("does not match", text)
        # Not PEM.
        junk = os.path.join(self.dir, "junk.pem")
        with open(junk, "w") as f:
            f.write("not a certificate\n")
        text = spoold_refuses(self.dir, "server.tls_certificate_file=" + junk,
                              "server.tls_key_file=" + os.path.join(certs, "server.key"))
        self.assertIn("server.tls_certificate_file " + junk, text)
        # One without the other.
        text = spoold_refuses(self.dir, cert)
        self.assertIn("set both, or neither", text)

    def test_beyond_loopback_tls_needs_no_allow_insecure(self):
        server = TlsSpoold(os.path.join(self.dir, "beyond"), self.certs,
                           settings=("server.listen=0.0.0.0:%d" % free_port(),))
        os.makedirs(server.directory)
        write_token(server.directory)
        server.port = int(server.settings[-1].rsplit(":", 1)[1])
        server.start()
        try:
            rc, code, text = curl_tls(server.port, "/v1/counts", self.certs)
            self.assertEqual((rc, code), (0, 200), text)
        finally:
            server.stop(signal.SIGKILL)

    def test_mutual_tls_refuses_clients_without_a_trusted_certificate(self):
        directory = os.path.join(self.dir, "mutual")
        os.makedirs(directory)
        write_token(directory)
        server = TlsSpoold(directory, self.certs, settings=(
            "server.tls_client_ca_file=" + os.path.join(self.certs, "ca.pem"),))
        server.client = "client"
        server.start()
        try:
            rc, code, text = curl_tls(server.port, "/v1/counts", self.certs,
                                      client="client")
            self.assertEqual((rc, code), (0, 200), text)
            for client in (None, "rogue"):
                rc, code, _ = curl_tls(server.port, "/v1/counts", self.certs,
                                       client=client, timeout=5)
                self.assertNotEqual(rc, 0, client)
                self.assertEqual(code, 0, client)
            # And it still serves the trusted client.
            rc, code, _ = curl_tls(server.port, "/v1/counts", self.certs,
                                   client="client")
            self.assertEqual(code, 200)
        finally:
            server.stop(signal.SIGKILL)


if __name__ == "__main__":
    spoold_test.SPOOLD = sys.argv.pop(1)
    MAKE_TEST_CERTS = sys.argv.pop(1)
    unittest.main(verbosity=2)
