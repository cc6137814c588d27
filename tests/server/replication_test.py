#!/usr/bin/env python3
"""Replication end to end (docs/replication.md): a primary spoold with
storage.durability = "replicated" and a standby spoold that follows it,
real processes on loopback, killed with SIGKILL, driven by curl.

  replication_test.py SPOOLD [unittest args]

Every wait is bounded. Shares spoold_test.py's helpers.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spoold_test  # noqa: E402
from spoold_test import Spoold, curl, free_port, wait_for, write_token  # noqa: E402

SECRET = "r3plica-" + "ef" * 16


def write_secret(directory):
    path = os.path.join(directory, "replication_secret")
    with open(path, "w") as f:
        f.write(SECRET + "\n")
    os.chmod(path, 0o600)
    return path


class Node(Spoold):
    """A spoold that may be started without waiting for /readyz (a
    replicated primary is not ready until a standby follows it)."""

    def start(self, wait_ready=True):
        if wait_ready:
            return Spoold.start(self)
        real = self.ready
        self.ready = lambda: self.opened()
        try:
            Spoold.start(self)
        finally:
            self.ready = real

    def opened(self):
        """Whether the runtime is open: /readyz answers 200, or 503 for a
        reason other than recovery."""
        if self.process.poll() is not None:
            raise AssertionError("spoold exited with %s" % self.process.returncode)
        try:
            code, body = curl(self, "/readyz")
        except Exception:
            return False
        return code == 200 or (code == 503 and isinstance(body, dict)
                               and body.get("status") == "not_ready")

    def url(self):
        return "http://127.0.0.1:%d" % self.port


def raw(server, path, method="POST", token=SECRET, timeout=10):
    """(status, body bytes) of a replication route."""
    args = ["curl", "-s", "-S", "-X", method, "-o", "-", "-w", "\n%{http_code}",
            "--max-time", str(timeout), server.url() + path]
    if token:
        args += ["-H", "Authorization: Bearer " + token]
    out = subprocess.run(args, capture_output=True, timeout=timeout + 5)
    body, _, code = out.stdout.rpartition(b"\n")
    return int(code), body


class Proxy:
    """A TCP proxy on loopback that the test controls: "pass" forwards,
    "delay" holds each chunk `delay_s` first, "drop" forwards nothing (the
    connections stay open, silent), and reset() closes every connection
    with a TCP reset."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.mode, self.delay_s = "pass", 0.0
        self.sockets, self.lock = [], threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        threading.Thread(target=self.accept, daemon=True).start()

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while self.mode == "drop" and not self.closed:
                    time.sleep(0.01)
                if self.mode == "delay":
                    time.sleep(self.delay_s)
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        source.close()

    def reset(self):
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            try:
                # A linger of 0 makes the close a reset; the shutdown wakes
                # the pump blocked in recv on it (a close from another
                # thread would not), which then closes it.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                struct.pack("ii", 1, 0))
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        self.listener.close()
        self.reset()


class ReplicationTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="spoold-repl-")
        self.nodes = []

    def tearDown(self):
        for node in self.nodes:
            if node.process and node.process.poll() is None:
                node.stop(signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)

    def primary(self, extra=()):
        d = os.path.join(self.dir, "primary")
        os.makedirs(d, exist_ok=True)
        write_token(d)
        node = Node(d, free_port(), free_port(), settings=[
            "storage.durability=replicated",
            "replication.min_acks=1",
            "replication.ack_timeout_ms=1500",
            "replication.secret_file=" + write_secret(d)] + list(extra))
        self.nodes.append(node)
        return node

    def standby(self, primary, name="s1", primary_url=None):
        d = os.path.join(self.dir, name)
        os.makedirs(d, exist_ok=True)
        write_token(d)
        node = Node(d, free_port(), free_port(), settings=[
            "replication.role=standby",
            "replication.primary=" + (primary_url or primary.url()),
            "replication.name=" + name,
            "replication.secret_file=" + write_secret(d)])
        self.nodes.append(node)
        return node

    def enqueue_under_load(self, primary, seconds, clients=4):
        """Enqueues from `clients` threads for `seconds`; the ids answered
        201, and every other answer."""
        acknowledged, others = [], []
        stop = threading.Event()

        def client():
            while not stop.is_set():
                code, body = curl(primary, "/v1/tasks", "POST",
                                  {"type": "sleep", "payload": "1",
                                   "delay_ms": 600000}, timeout=5)
                (acknowledged.append(body["id"]) if code == 201
                 else others.append((code, body)))
        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        time.sleep(seconds)
        return acknowledged, others, stop, threads

    def test_standby_holds_every_acknowledged_task_after_primary_sigkill(self):
        primary = self.primary()
        primary.start(wait_ready=False)
        standby = self.standby(primary)
        standby.start()
        wait_for(lambda: curl(primary, "/readyz")[0] == 200, 30,
                 "the primary ready with its standby")

        acknowledged, others, stop, threads = self.enqueue_under_load(primary, 2.0)
        # Killed while the clients still enqueue: whatever it answered 201
        # before it died must be on the standby.
        primary.process.send_signal(signal.SIGKILL)
        primary.process.wait(10)
        stop.set()
        for t in threads:
            t.join(20)
        self.assertGreater(len(acknowledged), 50, others[:3])

        for task_id in acknowledged:
            code, body = curl(standby, "/v1/tasks/%d" % task_id)
            self.assertEqual(code, 200, (task_id, body))
            self.assertEqual(body["type"], "sleep")

        # The standby serves reads and sends writes to the primary.
        code, body = curl(standby, "/v1/tasks", "POST", {"type": "sleep", "payload": "1"})
        self.assertEqual(code, 421, body)
        self.assertEqual(body["primary"], primary.url())
        code, cluster = curl(standby, "/v1/cluster")
        self.assertEqual(code, 200, cluster)
        self.assertEqual(cluster["role"], "standby")
        self.assertEqual(cluster["primary"], primary.url())
        # Positions count group commits, each of one or more tasks.
        self.assertGreater(cluster["applied_sequence"], 0)

    def test_too_few_standbys_is_refused_and_readyz_says_why(self):
        primary = self.primary()
        primary.start(wait_ready=False)
        code, body = curl(primary, "/readyz")
        self.assertEqual(code, 503, body)
        self.assertIn("0 of the 1 standby(s)", body["reason"])
        code, body = curl(primary, "/v1/tasks", "POST", {"type": "sleep", "payload": "1"})
        self.assertEqual(code, 503, body)
        self.assertIn("nothing was stored", body["error"]["message"])

        standby = self.standby(primary)
        standby.start()
        wait_for(lambda: curl(primary, "/readyz")[0] == 200, 30, "a standby")
        code, body = curl(primary, "/v1/tasks", "POST", {"type": "sleep", "payload": "1"})
        self.assertEqual(code, 201, body)
        code, cluster = curl(primary, "/v1/cluster")
        self.assertEqual(cluster["role"], "primary")
        self.assertIsNone(cluster["primary"])
        self.assertEqual([s["name"] for s in cluster["standbys"]], ["s1"])
        self.assertTrue(cluster["standbys"][0]["connected"])
        code, metrics = curl(primary, "/metrics")
        self.assertIn('spool_replication_standby_lag_commits{standby="s1"}', metrics)
        self.assertIn("spool_replication_standbys_connected 1", metrics)

        # The standby dies: once its acknowledgements are overdue nothing
        # is answered 201, and the primary says why.
        standby.stop(signal.SIGKILL)
        deadline = time.monotonic() + 10
        answers = []
        while time.monotonic() < deadline:
            code, body = curl(primary, "/v1/tasks", "POST", {"type": "sleep", "payload": "1"})
            answers.append(code)
            if code == 503 and "standby" in body["error"]["message"]:
                break
        self.assertEqual(answers[-1], 503, answers)
        self.assertTrue(set(answers) <= {201, 503, 504}, answers)
        code, body = curl(primary, "/readyz")
        self.assertEqual(code, 503, body)

    def test_a_cut_replication_link_loses_nothing_and_resumes(self):
        primary = self.primary()
        primary.start(wait_ready=False)
        proxy = Proxy(primary.port)
        self.addCleanup(proxy.close)
        standby = self.standby(primary, primary_url=proxy.url())
        standby.start()
        wait_for(lambda: curl(primary, "/readyz")[0] == 200, 30, "a standby")
        acknowledged, others, stop, threads = self.enqueue_under_load(primary, 0.5)
        proxy.delay_s, proxy.mode = 0.05, "delay"   # a slow link
        time.sleep(1.5)
        proxy.mode = "drop"                          # a silent one
        time.sleep(2.5)
        proxy.mode = "pass"
        for _ in range(3):                           # resets
            time.sleep(0.4)
            proxy.reset()
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(20)
        self.assertGreater(len(acknowledged), 20, others[:3])
        # While the link was silent, the primary said so instead of 201.
        self.assertTrue({code for code, _ in others} <= {503, 504}, others[:5])
        self.assertTrue(others, "the silent link was never noticed")
        target = curl(primary, "/v1/cluster")[1]["applied_sequence"]
        wait_for(lambda: curl(standby, "/v1/cluster")[1]["applied_sequence"] >= target,
                 30, "the standby to catch up")
        conn = http.client.HTTPConnection("127.0.0.1", standby.port, timeout=10)
        self.addCleanup(conn.close)
        for task_id in acknowledged:
            conn.request("GET", "/v1/tasks/%d" % task_id,
                         headers={"Authorization": "Bearer " + spoold_test.TOKEN})
            response = conn.getresponse()
            response.read()
            self.assertEqual(response.status, 200, task_id)
        # The log held everything: the stream resumed, with no new base.
        with open(os.path.join(standby.directory, "spoold.log"), "rb") as f:
            log = f.read().decode("utf-8", "replace")
        self.assertEqual(log.count("copying a base"), 1, log[-2000:])

    def test_the_routes_need_the_replication_secret(self):
        primary = self.primary()
        primary.start(wait_ready=False)
        query = "/v1/replication/follow?standby=x&log_id=0&applied=0"
        self.assertEqual(raw(primary, query, token=None)[0], 401)
        self.assertEqual(raw(primary, query, token=spoold_test.TOKEN)[0], 401)
        code, body = raw(primary, query)
        self.assertEqual(code, 410, body)
        self.assertIn(b"follows no log", body)
        code, body = raw(primary, "/v1/replication/follow?standby=bad%20name&log_id=0&applied=0")
        self.assertEqual(code, 400, body)
        # The secret opens nothing else.
        self.assertEqual(curl(primary, "/v1/tasks", token=SECRET)[0], 401)
        # A base file is named from the base's own listing, never a path.
        code, listing = raw(primary, "/v1/replication/base", timeout=60)
        self.assertEqual(code, 201, listing)
        files = json.loads(listing)["files"]
        self.assertTrue(any(f["name"].startswith("meta/") for f in files), files)
        for name in ("../data/CURRENT", "/etc/passwd", "meta/../../primary/token"):
            code, body = raw(primary, "/v1/replication/base/file?name=%s&offset=0"
                             % name, method="GET")
            self.assertEqual(code, 404, (name, body))
        code, body = raw(primary, "/v1/replication/base/file?name=%s&offset=0"
                         % files[0]["name"], method="GET")
        self.assertEqual(code, 200)
        self.assertEqual(len(body), min(files[0]["size"], 4 << 20))

    def test_a_restarted_primary_is_followed_again(self):
        primary = self.primary()
        primary.start(wait_ready=False)
        standby = self.standby(primary)
        standby.start()
        wait_for(lambda: curl(primary, "/readyz")[0] == 200, 30, "a standby")
        ids = [curl(primary, "/v1/tasks", "POST", {"type": "sleep", "payload": "1",
                                                    "delay_ms": 600000})[1]["id"]
               for _ in range(20)]
        self.assertEqual(primary.stop(signal.SIGTERM), 0)
        primary.start(wait_ready=False)
        wait_for(lambda: curl(primary, "/readyz")[0] == 200, 30,
                 "the restarted primary with its standby")
        code, body = curl(primary, "/v1/tasks", "POST",
                          {"type": "sleep", "payload": "1", "delay_ms": 600000})
        self.assertEqual(code, 201, body)
        ids.append(body["id"])
        for task_id in ids:
            self.assertEqual(curl(standby, "/v1/tasks/%d" % task_id)[0], 200, task_id)
        # Its log went on across the clean restart: one base copy, the first.
        with open(os.path.join(standby.directory, "spoold.log"), "rb") as f:
            log = f.read().decode("utf-8", "replace")
        self.assertEqual(log.count("copying a base"), 1, log)

    def test_a_primary_restarted_after_sigkill_starts_a_new_log(self):
        # Commits reach the standby before the primary's own sync, so a
        # primary that died may have shipped one its disk never got: its
        # next open starts a new log, and the standby copies a new base
        # rather than keep a commit the primary could write anew.
        primary = self.primary()
        primary.start(wait_ready=False)
        standby = self.standby(primary)
        standby.start()
        wait_for(lambda: curl(primary, "/readyz")[0] == 200, 30, "a standby")
        acknowledged, others, stop, threads = self.enqueue_under_load(primary, 1.5)
        primary.process.send_signal(signal.SIGKILL)
        primary.process.wait(10)
        primary.log.close()
        stop.set()
        for t in threads:
            t.join(20)
        self.assertGreater(len(acknowledged), 20, others[:3])

        primary.start(wait_ready=False)
        wait_for(lambda: curl(primary, "/readyz")[0] == 200, 60,
                 "the restarted primary with its standby")
        code, body = curl(primary, "/v1/tasks", "POST",
                          {"type": "sleep", "payload": "1", "delay_ms": 600000})
        self.assertEqual(code, 201, body)
        acknowledged.append(body["id"])
        for task_id in acknowledged:
            self.assertEqual(curl(primary, "/v1/tasks/%d" % task_id)[0], 200, task_id)
            self.assertEqual(curl(standby, "/v1/tasks/%d" % task_id)[0], 200, task_id)
        # Both hold the same tasks: whatever the standby had of a commit
        # the primary lost went with the old log.
        totals = [sum(curl(node, "/v1/counts")[1]["by_status"].values())
                  for node in (primary, standby)]
        self.assertEqual(totals[0], totals[1], totals)
        with open(os.path.join(primary.directory, "spoold.log"), "rb") as f:
            log = f.read().decode("utf-8", "replace")
        self.assertIn("did not close cleanly", log)
        with open(os.path.join(standby.directory, "spoold.log"), "rb") as f:
            log = f.read().decode("utf-8", "replace")
        self.assertEqual(log.count("copying a base"), 2, log[-3000:])


if __name__ == "__main__":
    spoold_test.SPOOLD = sys.argv.pop(1)
    unittest.main(verbosity=2)
