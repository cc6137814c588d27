#!/usr/bin/env python3
"""spool-worker stops on SIGTERM within its close timeout whatever the
gateway's state (issue 27): here a "gateway" that accepts the TCP
connection and never says a word, which leaves CAF's connect blocked, and
an address where nothing listens at all. Its stderr lines stay whole.

  worker_sigterm_test.py SPOOL_WORKER

Every wait is bounded; about 10 s.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

WORKER = None


class WorkerSigtermTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="worker-sigterm-")
        self.secret = os.path.join(self.dir, "secret")
        with open(self.secret, "w") as f:
            f.write("a-secret-of-enough-length-0123456789\n")
        os.chmod(self.secret, 0o600)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def stop_within(self, port, close_ms, limit_s):
        err = open(os.path.join(self.dir, "stderr"), "wb")
        worker = subprocess.Popen(
            [WORKER, "--connect", "127.0.0.1:%d" % port, "--secret-file", self.secret,
             "--types", "noop", "--reconnect-max-ms", "200",
             "--close-timeout-ms", str(close_ms)], stdout=subprocess.DEVNULL, stderr=err)
        try:
            time.sleep(1.5)  # in its hello: connecting, or retrying
            self.assertIsNone(worker.poll(), "spool-worker exited before SIGTERM")
            started = time.monotonic()
            worker.send_signal(signal.SIGTERM)
            worker.wait(limit_s)
            took = time.monotonic() - started
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(5)
            err.close()
        with open(os.path.join(self.dir, "stderr"), "rb") as f:
            text = f.read().decode(errors="replace")
        # Every line is whole: one timestamp (or the tool's own prefix) at
        # its start, none inside it.
        for line in text.splitlines():
            self.assertLessEqual(len(re.findall(r"\[\d{4}-\d\d-\d\d ", line)), 1, line)
        return took

    def test_sigterm_while_the_gateway_never_answers(self):
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # accepted by the kernel, never read
        try:
            took = self.stop_within(silent.getsockname()[1], 1000, 10)
            self.assertLess(took, 4.0)
        finally:
            silent.close()

    def test_sigterm_while_nothing_listens(self):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        took = self.stop_within(port, 1000, 10)
        self.assertLess(took, 4.0)


if __name__ == "__main__":
    WORKER = sys.argv.pop(1)
    unittest.main(verbosity=2)
