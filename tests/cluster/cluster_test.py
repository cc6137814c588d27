#!/usr/bin/env python3
"""Failover through etcd (docs/replication.md, "Failover"): a real etcd on
loopback with a data directory of its own, and three spoold nodes with
[cluster] set, storage.durability = "replicated" and min_acks = 1. Nodes
are killed with SIGKILL and paused with SIGSTOP while clients enqueue over
keep-alive HTTP connections and the primary's handlers drain.

  cluster_test.py SPOOLD SPOOL_WORKER [unittest args]

The invariant every test checks: each task a node answered 201 for is on
the primary at the end. Every wait is bounded.
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "server"))
import spoold_test  # noqa: E402
from spoold_test import TOKEN, Spoold, free_port, wait_for, write_token  # noqa: E402

ETCD = "/usr/bin/etcd"
WORKER = None  # spool-worker, from the command line
SECRET = "c1uster-" + "ab" * 16
NAMES = ["a", "b", "c"]
LEASE_MS = 1000


class Etcd:
    def __init__(self, directory):
        self.port = free_port()
        peer = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        peer_url = "http://127.0.0.1:%d" % peer
        self.log = open(os.path.join(directory, "etcd.log"), "ab")
        # Short Raft timers: a 1 s lease is within etcd's minimum TTL.
        self.process = subprocess.Popen(
            [ETCD, "--name", "t", "--data-dir", os.path.join(directory, "etcd"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer_url,
             "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", "t=" + peer_url,
             "--heartbeat-interval", "50", "--election-timeout", "250",
             "--logger", "zap", "--log-level", "error"],
            stdout=self.log, stderr=self.log)
        wait_for(self.healthy, 30, "etcd /health")

    def healthy(self):
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            c.request("GET", "/health")
            return c.getresponse().status == 200
        except OSError:
            return False

    def stop(self):
        self.process.kill()
        self.process.wait(10)
        self.log.close()


class Node(Spoold):
    """A cluster member; started without waiting for /readyz."""

    def __init__(self, directory, name, etcd_url, extra=()):
        os.makedirs(directory, exist_ok=True)
        write_token(directory)
        secret = os.path.join(directory, "replication_secret")
        with open(secret, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(secret, 0o600)
        port = free_port()
        Spoold.__init__(self, directory, port, 0, settings=[
            "storage.durability=replicated",
            "replication.min_acks=1",
            "replication.ack_timeout_ms=1500",
            "replication.secret_file=" + secret,
            "cluster.etcd=" + etcd_url,
            "cluster.name=" + name,
            "cluster.nodes=" + ",".join(NAMES),
            "cluster.advertise=http://127.0.0.1:%d" % port,
            "cluster.lease_ms=%d" % LEASE_MS,
            "cluster.prefix=/spool/test",
            "server.max_connections=64",
            "runtime.workers=4",
        ] + [x.replace("$SECRET", secret) for x in extra])
        self.name = name
        self.secret = secret

    def start(self):
        self.ready = lambda: self.process.poll() is None
        Spoold.start(self)

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def get(self, path, timeout=2):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("GET", path, headers={"Authorization": "Bearer " + TOKEN})
            r = c.getresponse()
            return r.status, json.loads(r.read() or b"null")
        except (OSError, ValueError, http.client.HTTPException):
            return 0, None
        finally:
            c.close()

    def role(self, timeout=2):
        code, body = self.get("/v1/cluster", timeout)
        return body.get("role") if code == 200 and isinstance(body, dict) else None

    def ready_primary(self):
        return (self.alive() and self.role() == "primary"
                and self.get("/readyz")[0] == 200)


class Clients:
    """`count` threads that enqueue noop tasks to whichever node is the
    primary, over keep-alive connections, and record every 201."""

    def __init__(self, nodes, count=4):
        self.nodes = nodes
        self.acknowledged = {}  # task id -> (node name, monotonic time)
        self.answers = []       # (time, node name, status) of every non-201
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i,))
                        for i in range(count)]
        for t in self.threads:
            t.start()

    def run(self, index):
        conn, node, n = None, None, 0
        while not self.stop_event.is_set():
            if conn is None:
                # Briefly: a paused node accepts and never answers.
                node = next((x for x in self.nodes
                             if x.alive() and x.role(timeout=0.3) == "primary"),
                            None)
                if node is None:
                    time.sleep(0.02)
                    continue
                conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=5)
            n += 1
            body = json.dumps({"type": "noop", "payload": "c%d-%d" % (index, n)})
            try:
                conn.request("POST", "/v1/tasks", body,
                             {"Authorization": "Bearer " + TOKEN,
                              "Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = None
                continue
            now = time.monotonic()
            with self.lock:
                if r.status == 201:
                    self.acknowledged[json.loads(data)["id"]] = (node.name, now)
                else:
                    self.answers.append((now, node.name, r.status))
            if r.status != 201:
                conn.close()
                conn = None
                time.sleep(0.01)
        if conn is not None:
            conn.close()

    def stop(self):
        self.stop_event.set()
        for t in self.threads:
            t.join(20)

    def first_after(self, moment, other_than):
        with self.lock:
            times = [t for (name, t) in self.acknowledged.values()
                     if t > moment and name != other_than]
        return min(times) if times else None


class ClusterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="spool-cluster-")
        self.etcd = Etcd(self.dir)
        # Each node's remote-worker gateway; only the primary's listens.
        self.gateways = [free_port() for _ in NAMES]
        self.nodes = [Node(os.path.join(self.dir, n), n, self.etcd.url,
                           ["remote.listen=127.0.0.1:%d" % port,
                            "remote.secret_file=$SECRET",
                            ])
                      for n, port in zip(NAMES, self.gateways)]
        for node in self.nodes:
            node.start()
        self.primary = self.wait_primary()

    def tearDown(self):
        for node in self.nodes:
            if node.process and node.process.poll() is None:
                os.kill(node.process.pid, signal.SIGCONT)
                node.stop(signal.SIGKILL)
        for worker in getattr(self, "workers", []):
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
        self.etcd.stop()
        if not os.environ.get("SPOOL_KEEP_TEST_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            print("kept " + self.dir, file=sys.stderr)

    def wait_primary(self, timeout=30, other_than=None):
        def find():
            for node in self.nodes:
                if node is not other_than and node.ready_primary():
                    return node
            return None
        return wait_for(find, timeout, "a ready primary")

    def assert_all_on(self, node, acknowledged):
        missing = []
        for task_id in acknowledged:
            code, body = node.get("/v1/tasks/%d" % task_id, timeout=5)
            if code != 200:
                missing.append((task_id, code))
        self.assertEqual(missing[:10], [], "%d of %d acknowledged tasks are missing on %s" %
                         (len(missing), len(acknowledged), node.name))

    def wait_following(self, primary, count=2, timeout=30):
        def connected():
            code, body = primary.get("/v1/cluster")
            return code == 200 and sum(
                1 for s in body["standbys"] if s["connected"]) >= count
        wait_for(connected, timeout, "%d standbys following %s" % (count, primary.name))

    def wait_role(self, node, role, timeout=30):
        wait_for(lambda: node.role() == role, timeout,
                 "%s to be a %s" % (node.name, role))

    def test_sigkill_of_the_primary_loses_no_acknowledged_task(self):
        clients = Clients(self.nodes)
        time.sleep(1.5)
        old = self.primary
        killed_at = time.monotonic()
        old.process.send_signal(signal.SIGKILL)
        old.process.wait(10)
        new = self.wait_primary(other_than=old)
        wait_for(lambda: clients.first_after(killed_at, old.name), 20,
                 "an acknowledged enqueue on the new primary")
        failover = clients.first_after(killed_at, old.name) - killed_at
        time.sleep(0.5)
        clients.stop()
        self.assertGreater(len(clients.acknowledged), 50)
        print("failover: %.3f s to the first acknowledged enqueue on %s; %d acknowledged"
              % (failover, new.name, len(clients.acknowledged)), file=sys.stderr)
        self.assertLess(failover, 10.0)
        self.assert_all_on(new, list(clients.acknowledged))
        # Every acknowledged task runs to success on the new primary.
        def drained():
            code, counts = new.get("/v1/counts")
            return (code == 200 and counts["by_status"].get("succeeded", 0)
                    >= len(clients.acknowledged))
        wait_for(drained, 60, "the acknowledged tasks to succeed on the new primary")

        # The old primary comes back as a standby of the new one.
        old.start()
        self.wait_role(old, "standby")
        self.assertEqual(new.role(), "primary")

    def test_a_paused_primary_acknowledges_nothing_after_its_lease(self):
        clients = Clients(self.nodes)
        time.sleep(1.0)
        old = self.primary
        os.kill(old.process.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        new = self.wait_primary(other_than=old)
        wait_for(lambda: clients.first_after(stopped_at, old.name), 20,
                 "an acknowledged enqueue on the new primary")
        os.kill(old.process.pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        # It learns its lease is gone and rejoins as a standby.
        self.wait_role(old, "standby")
        time.sleep(0.5)
        clients.stop()
        late = [t for (name, t) in clients.acknowledged.values()
                if name == old.name and t > resumed_at + 0.05]
        self.assertEqual(late, [], "the paused primary acknowledged after its lease")
        self.assert_all_on(new, list(clients.acknowledged))

    def test_no_promotion_while_the_most_advanced_standby_is_down_too(self):
        old = self.primary
        ahead, behind = [n for n in self.nodes if n is not old]
        self.wait_following(old)
        # `behind` stops applying; the primary goes on with `ahead` alone.
        os.kill(behind.process.pid, signal.SIGSTOP)
        clients = Clients(self.nodes)
        time.sleep(1.5)
        clients.stop()
        self.assertGreater(len(clients.acknowledged), 20, clients.answers[:5])
        # The primary and the standby that holds the last acknowledgements
        # die; `behind` alone cannot prove it holds every acknowledged
        # commit (2 of the 3 nodes must publish), so it must not lead.
        for node in (old, ahead):
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(10)
        os.kill(behind.process.pid, signal.SIGCONT)
        time.sleep(3 * LEASE_MS / 1000.0 + 1.0)
        self.assertNotEqual(behind.role(), "primary")
        # With `ahead` back, the two elect it, the more advanced, and it has
        # every acknowledged task; `behind` follows it.
        ahead.start()
        new = self.wait_primary(other_than=old)
        self.assertIs(new, ahead)
        self.assert_all_on(new, list(clients.acknowledged))
        self.wait_role(behind, "standby")
        self.assert_all_on(behind, list(clients.acknowledged)[-20:])

    def test_a_killed_standby_leaves_the_primary_serving_until_none_is_left(self):
        primary = self.primary
        standbys = [n for n in self.nodes if n is not primary]
        standbys[0].process.send_signal(signal.SIGKILL)
        standbys[0].process.wait(10)
        code, body = primary_post(primary)
        self.assertEqual(code, 201, body)
        standbys[1].process.send_signal(signal.SIGKILL)
        standbys[1].process.wait(10)
        # ack_timeout_ms later, no standby counts as connected.
        def refused():
            code, body = primary_post(primary)
            return code == 503 and "standby" in body["error"]["message"]
        wait_for(refused, 10, "enqueues refused for want of a standby")
        self.assertEqual(primary.get("/readyz")[0], 503)
        standbys[1].start()
        wait_for(lambda: primary_post(primary)[0] == 201, 30,
                 "enqueues acknowledged again")


    def post(self, node, task_type, payload):
        code, body = primary_post(node, task_type, payload)
        self.assertEqual(code, 201, body)
        return body["id"]

    def test_spool_worker_follows_the_new_primary(self):
        # A spool-worker that lists every node's gateway, beside each
        # primary's own 4 workers; --log records the attempts it starts.
        attempts = os.path.join(self.dir, "attempts.log")
        log = open(os.path.join(self.dir, "worker.log"), "ab")
        self.workers = [subprocess.Popen(
            [WORKER, "--connect", ",".join("127.0.0.1:%d" % p for p in self.gateways),
             "--secret-file", self.nodes[0].secret, "--types", "sleep",
             "--concurrency", "8", "--reconnect-max-ms", "200", "--log", attempts],
            stdout=log, stderr=log)]
        old = self.primary
        before = [self.post(old, "sleep", "50") for _ in range(24)]
        wait_for(lambda: succeeded(old) >= 24, 30, "24 tasks run")
        # Some are running on the worker when the primary dies.
        during = [self.post(old, "sleep", "300") for _ in range(16)]
        time.sleep(0.2)
        old.process.send_signal(signal.SIGKILL)
        old.process.wait(10)
        new = self.wait_primary(other_than=old)
        after = [self.post(new, "sleep", "200") for _ in range(40)]
        wait_for(lambda: succeeded(new) >= 80, 60, "every task run on the new primary")
        for task_id in before + during + after:
            code, task = new.get("/v1/tasks/%d" % task_id)
            self.assertEqual(code, 200, task_id)
            self.assertEqual(task["status"], "succeeded", task)
            # Only an attempt cut off with the old primary runs again.
            expected = (1, 2) if task_id in during else (1,)
            self.assertIn(task["attempts"], expected, task)
        # The worker found the new primary's gateway and ran its tasks.
        with open(attempts) as f:
            ran = {int(line.split()[0]) for line in f if line.strip()}
        self.assertTrue(ran & set(before + during),
                        "the worker ran nothing for the old primary")
        self.assertTrue(ran & set(after), "the worker ran nothing on the new primary")


def succeeded(node):
    code, counts = node.get("/v1/counts")
    return counts["by_status"].get("succeeded", 0) if code == 200 else 0


def primary_post(node, task_type="noop", payload="x"):
    c = http.client.HTTPConnection("127.0.0.1", node.port, timeout=5)
    try:
        c.request("POST", "/v1/tasks",
                  json.dumps({"type": task_type, "payload": payload}),
                  {"Authorization": "Bearer " + TOKEN,
                   "Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


if __name__ == "__main__":
    spoold_test.SPOOLD = sys.argv.pop(1)
    WORKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
