#!/usr/bin/env python3
"""A real CAF peer against the remote-worker gateway of a real spoold
(issue 27, docs/security.md): spoold with [remote] on loopback, a real
spool-worker connected to it, then gateway_attacker (exit and link
messages, the gateway's own stop/tick/start, forged and replayed hellos,
oversized hellos, guessed sessions with forged heartbeats and outcomes).
Asserts that every attack failed, and that afterwards the same worker
still runs the tasks spoold is given, with nothing lost.

  gateway_attack_test.py SPOOLD SPOOL_WORKER GATEWAY_ATTACKER

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

WORKER = ATTACKER = None
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


if __name__ == "__main__":
    spoold_test.SPOOLD = sys.argv.pop(1)
    WORKER = sys.argv.pop(1)
    ATTACKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
