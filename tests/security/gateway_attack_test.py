#!/usr/bin/env python3
"""A real CAF peer against the remote-worker gateway of a real spoold
(issue 27, docs/security.md): spoold with [remote] on loopback, a real
spool-worker connected to it, then gateway_attacker (exit and link
messages, the gateway's own stop/tick/start, forged and replayed hellos,
oversized hellos, guessed sessions with forged heartbeats and outcomes).
Asserts that every attack failed, and that afterwards the same worker
still runs the tasks spoold is given, with nothing lost.

  gateway_attack_test.py SPOOLD SPOOL_WORKER GATEWAY_ATTACKER MAKE_TEST_CERTS

Every wait is bounded; about 10 s.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "server"))
import spoold_test  # noqa: E402
from spoold_test import Spoold, curl, free_port, wait_for, write_token  # noqa: E402

WORKER = ATTACKER = MAKE_TEST_CERTS = None
SECRET = "the-gateway-secret-0123456789abcdef"


class GatewayAttackTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gateway-attack-")
        write_token(self.dir)
        self.secret = os.path.join(self.dir, "secret")
        with open(self.secret, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(self.secret, 0o600)
        self.gateway_port = free_port()
        # One local worker beside the remote one's 1 + claim-ahead slots:
        # most tasks run remotely, so that those after the attack show that
        # its session survived.
        self.server = Spoold(self.dir, free_port(), free_port(), settings=[
            "remote.listen=127.0.0.1:%d" % self.gateway_port,
            "remote.secret_file=" + self.secret,
            "runtime.workers=1"])
        self.server.start()
        self.starts = os.path.join(self.dir, "starts.log")
        self.worker = subprocess.Popen(
            [WORKER, "--connect", "127.0.0.1:%d" % self.gateway_port,
             "--secret-file", self.secret, "--types", "noop", "--node", "honest",
             "--log", self.starts],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.worker.stdout.readline().decode()
        self.assertIn("connected", line)

    def tearDown(self):
        if self.worker.poll() is None:
            self.worker.kill()
            self.worker.wait(5)
        if self.server.process.poll() is None:
            self.server.stop(signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_noops(self, n, label):
        ids = []
        for i in range(n):
            code, body = curl(self.server, "/v1/tasks", "POST",
                              {"type": "noop", "payload": "%s-%d" % (label, i)})
            self.assertEqual(code, 201, body)
            ids.append(body["id"])
        for task in ids:
            wait_for(lambda: curl(self.server, "/v1/tasks/%d" % task)[1]["status"] == "succeeded",
                     15, "task %d to succeed" % task)
        with open(self.starts) as f:
            ran = {int(line.split()[0]) for line in f if line.strip()}
        self.assertTrue(set(ids) & ran, "some of the tasks ran on the honest worker")
        return ids

    def test_every_attack_fails_and_the_worker_keeps_serving(self):
        before = self.run_noops(30, "before")
        out = subprocess.run([ATTACKER, "127.0.0.1", str(self.gateway_port)],
                             capture_output=True, timeout=120)
        report = out.stdout.decode() + out.stderr.decode()
        print(report)
        self.assertEqual(out.returncode, 0, report)
        self.assertIn("ALL ATTACKS FAILED", report)
        self.assertIsNone(self.server.process.poll(), "spoold died")
        self.assertIsNone(self.worker.poll(), "the honest worker died")
        after = self.run_noops(30, "after")
        # Nothing lost, nothing settled by the forged outcomes.
        for task in before + after:
            code, body = curl(self.server, "/v1/tasks/%d" % task)
            self.assertEqual((code, body["status"], body["attempts"]), (200, "succeeded", 1), body)
        code, counts = curl(self.server, "/v1/counts")
        self.assertEqual(counts["by_status"].get("failed", 0), 0, counts)


class GatewayTlsTest(unittest.TestCase):
    """The gateway with remote.tls_*: a worker with a certificate of the CA
    runs tasks; a plain CAF peer, a worker without a certificate and one
    with a rogue CA's never reach the door; bad files stop spoold."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="gateway-tls-")
        cls.certs = os.path.join(cls.dir, "certs")
        subprocess.run(["bash", MAKE_TEST_CERTS, cls.certs], check=True, timeout=60)
        write_token(cls.dir)
        cls.secret = os.path.join(cls.dir, "secret")
        with open(cls.secret, "w") as f:
            f.write(SECRET + "\n")
        os.chmod(cls.secret, 0o600)
        cls.gateway_port = free_port()
        cls.server = Spoold(cls.dir, free_port(), free_port(), settings=[
            "remote.listen=127.0.0.1:%d" % cls.gateway_port,
            "remote.secret_file=" + cls.secret,
            "runtime.workers=1", "log.level=info"] + cls.tls("server"))
        cls.server.start()
        cls.workers = []

    @classmethod
    def tls(cls, name, ca="ca"):
        c = cls.certs
        return ["remote.tls_certificate_file=" + os.path.join(c, name + ".pem"),
                "remote.tls_key_file=" + os.path.join(c, name + ".key"),
                "remote.tls_ca_file=" + os.path.join(c, ca + ".pem")]

    @classmethod
    def tearDownClass(cls):
        for worker in cls.workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(5)
        if cls.server.process.poll() is None:
            cls.server.stop(signal.SIGKILL)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def worker(self, node, cert=None, ca="ca"):
        args = [WORKER, "--connect", "127.0.0.1:%d" % self.gateway_port,
                "--secret-file", self.secret, "--types", "noop", "--node", node,
                "--log", os.path.join(self.dir, node + ".log")]
        if cert:
            c = self.certs
            args += ["--tls-certificate", os.path.join(c, cert + ".pem"),
                     "--tls-key", os.path.join(c, cert + ".key"),
                     "--tls-ca", os.path.join(c, ca + ".pem")]
        with open(os.path.join(self.dir, node + ".err"), "wb") as err:
            worker = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
        self.workers.append(worker)
        return worker

    def starts(self, node):
        path = os.path.join(self.dir, node + ".log")
        if not os.path.exists(path):
            return set()
        with open(path) as f:
            return {int(line.split()[0]) for line in f if line.strip()}

    def run_noops(self, n):
        ids = []
        for i in range(n):
            code, body = curl(self.server, "/v1/tasks", "POST", {"type": "noop", "payload": str(i)})
            self.assertEqual(code, 201, body)
            ids.append(body["id"])
        for task in ids:
            wait_for(lambda: curl(self.server, "/v1/tasks/%d" % task)[1]["status"] == "succeeded",
                     15, "task %d to succeed" % task)
        return ids

    def spoold_log(self):
        with open(os.path.join(self.dir, "spoold.log"), "rb") as f:
            return f.read().decode(errors="replace")

    def test_only_workers_with_a_trusted_certificate_get_tasks(self):
        self.worker("honest", cert="client")
        wait_for(lambda: "remote worker 'honest'" in self.spoold_log(), 20,
                 "the TLS worker's hello")
        intruders = {"plain": self.worker("plain"),
                     "rogue": self.worker("rogue", cert="rogue"),
                     # trusts another CA than the gateway's: refuses it
                     "suspicious": self.worker("suspicious", cert="client", ca="rogue-ca")}
        # A plain CAF peer cannot even reach the door.
        out = subprocess.run([ATTACKER, "127.0.0.1", str(self.gateway_port)],
                             capture_output=True, timeout=60)
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn(b"cannot reach the door", out.stderr)
        ids = self.run_noops(40)
        self.assertTrue(set(ids) & self.starts("honest"), "the TLS worker ran tasks")
        log = self.spoold_log()
        for name, process in intruders.items():
            self.assertEqual(self.starts(name), set(), name)
            self.assertNotIn("remote worker '%s'" % name, log)
            self.assertIsNone(process.poll(), name + " exited instead of retrying")
        self.assertIsNone(self.server.process.poll(), "spoold died")
        # The strangers' failed handshakes never cost the honest worker its
        # connection: libcaf_openssl leaves each failure on OpenSSL's error
        # queue, and the next healthy read on its thread was taken for an
        # error (runtime/openssl_error_queue.cc). One session, one attempt.
        lost = [line for line in log.splitlines() if "'honest'" in line and "lost:" in line]
        self.assertEqual(lost, [])
        self.assertEqual(log.count("remote worker 'honest'"), 1, log[-3000:])
        for task in ids:
            self.assertEqual(curl(self.server, "/v1/tasks/%d" % task)[1]["attempts"], 1)

    def test_beyond_loopback_needs_tls_or_allow_insecure(self):
        directory = os.path.join(self.dir, "beyond")
        os.makedirs(directory)
        write_token(directory)
        listen = "remote.listen=0.0.0.0:%d" % free_port()
        out = subprocess.run(
            [spoold_test.SPOOLD, "--set", "storage.path=" + os.path.join(directory, "data"),
             "--set", "server.listen=127.0.0.1:%d" % free_port(), "--set", listen,
             "--set", "remote.secret_file=" + self.secret],
            capture_output=True, timeout=30)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn(b"remote.tls_certificate_file", out.stdout + out.stderr)
        server = Spoold(directory, free_port(), free_port(), settings=[
            listen, "remote.secret_file=" + self.secret] + self.tls("server"))
        server.start()  # no allow_insecure needed with TLS
        server.stop(signal.SIGKILL)

    def test_bad_tls_files_are_refused_before_caf_reads_them(self):
        def refused(*settings):
            args = [spoold_test.SPOOLD,
                    "--set", "storage.path=" + os.path.join(self.dir, "refused"),
                    "--set", "server.listen=127.0.0.1:%d" % free_port(),
                    "--set", "remote.listen=127.0.0.1:%d" % free_port(),
                    "--set", "remote.secret_file=" + self.secret]
            for setting in settings:
                args += ["--set", setting]
            out = subprocess.run(args, capture_output=True, timeout=30)
            self.assertNotEqual(out.returncode, 0, settings)
            self.assertNotEqual(out.returncode, -signal.SIGABRT, settings)
            return (out.stdout + out.stderr).decode()
        good = self.tls("server")
        self.assertIn("set all three", refused(*good[:2]))
        loose = os.path.join(self.dir, "loose.key")
        shutil.copy(os.path.join(self.certs, "server.key"), loose)
        os.chmod(loose, 0o644)
        text = refused(good[0], "remote.tls_key_file=" + loose, good[2])
        self.assertIn("remote.tls_key_file", text)
        self.assertIn("chmod", text)
        text = refused(good[0], "remote.tls_key_file=" +
                       os.path.join(self.certs, "rogue.key"), good[2])
        self.assertIn("does not match", text)
        text = refused(good[0], good[1], "remote.tls_ca_file=" + self.secret)
        self.assertIn("remote.tls_ca_file", text)
        # The worker checks its own the same way, before connecting.
        out = subprocess.run([WORKER, "--connect", "127.0.0.1:%d" % self.gateway_port,
                              "--secret-file", self.secret, "--tls-certificate",
                              os.path.join(self.certs, "client.pem")],
                             capture_output=True, timeout=30)
        self.assertEqual(out.returncode, 2)
        self.assertIn(b"set all three", out.stderr)


if __name__ == "__main__":
    spoold_test.SPOOLD = sys.argv.pop(1)
    WORKER = sys.argv.pop(1)
    ATTACKER = sys.argv.pop(1)
    MAKE_TEST_CERTS = sys.argv.pop(1)
    unittest.main(verbosity=2)
