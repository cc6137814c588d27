#!/usr/bin/env python3
"""A real Prometheus server scrapes spoold: the real spoold on a free
loopback port (spoold_test.py's Spoold), Debian's prometheus scraping its
/metrics every second, and its query API must return spool's counters.

  prometheus_test.py SPOOLD

Needs prometheus (scripts/install-deps) and curl. Every wait is bounded.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spoold_test  # noqa: E402  (Spoold, curl, free_port, wait_for)
from spoold_test import curl, free_port, wait_for  # noqa: E402

PROMETHEUS = os.environ.get("PROMETHEUS", "prometheus")
TASKS = 7


class PrometheusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="spoold-prometheus-")
        spoold_test.write_token(cls.dir)
        cls.server = spoold_test.Spoold(cls.dir, free_port(), free_port())
        cls.server.start()
        cls.prometheus = None

    @classmethod
    def tearDownClass(cls):
        if cls.prometheus is not None and cls.prometheus.poll() is None:
            cls.prometheus.send_signal(signal.SIGTERM)
            try:
                cls.prometheus.wait(10)
            except subprocess.TimeoutExpired:
                cls.prometheus.kill()
            cls.log.close()
        if cls.server.process.poll() is None:
            cls.server.stop(signal.SIGTERM)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def start_prometheus(self):
        port = free_port()
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: spoold\n"
                    "    authorization:\n      type: Bearer\n"
                    "      credentials_file: %s\n"
                    "    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
                    % (os.path.join(self.dir, "read_token"), self.server.port))
        type(self).log = open(os.path.join(self.dir, "prometheus.log"), "wb")
        type(self).prometheus = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + config,
             "--storage.tsdb.path=" + os.path.join(self.dir, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % port, "--log.level=warn"],
            stdout=self.log, stderr=self.log)
        self.api = "http://127.0.0.1:%d/api/v1/" % port
        wait_for(lambda: self.get("status/runtimeinfo") is not None, 30, "prometheus to answer")

    def get(self, path):
        if self.prometheus.poll() is not None:
            with open(os.path.join(self.dir, "prometheus.log"), errors="replace") as f:
                raise AssertionError("prometheus exited with %s: %s"
                                     % (self.prometheus.returncode, f.read()[-2000:]))
        try:
            with urllib.request.urlopen(self.api + path, timeout=5) as r:
                body = json.load(r)
        except OSError:
            return None
        return body["data"] if body.get("status") == "success" else None

    def query(self, expr):
        """The single value of an instant query, or None."""
        data = self.get("query?query=" + urllib.parse.quote(expr))
        if not data or len(data["result"]) != 1:
            return None
        return float(data["result"][0]["value"][1])

    def test_scraped_counters(self):
        for i in range(TASKS):
            code, body = curl(self.server, "/v1/tasks", "POST", {"type": "noop", "payload": str(i)})
            self.assertEqual(code, 201, body)
        failed = curl(self.server, "/v1/tasks", "POST", {"type": "sleep", "payload": "x"})
        self.assertEqual(failed[0], 201, failed)
        wait_for(lambda: curl(self.server, "/v1/counts")[1]["by_status"]["succeeded"] == TASKS,
                 15, "the noop tasks to succeed")
        wait_for(lambda: curl(self.server, "/v1/counts")[1]["by_status"]["failed"] == 1,
                 15, "the sleep task to fail")
        self.start_prometheus()
        start = time.monotonic()
        wait_for(lambda: self.query('up{job="spoold"}') == 1, 30, "up to be 1")
        wait_for(lambda: self.query("spool_tasks_succeeded_total") == TASKS, 30,
                 "spool_tasks_succeeded_total == %d" % TASKS)
        self.assertEqual(self.query("spool_tasks_stored_total"), TASKS + 1)
        self.assertEqual(self.query("spool_tasks_dead_total"), 1)
        self.assertEqual(self.query('spool_tasks{status="succeeded"}'), TASKS)
        self.assertEqual(self.query('spool_tasks{status="failed"}'), 1)
        self.assertGreater(self.query("spoold_http_requests_total"), TASKS)
        # The target's health as Prometheus sees it.
        targets = self.get("targets")["activeTargets"]
        self.assertEqual([t["health"] for t in targets], ["up"], targets)
        # A counter that moves is seen moving.
        code, body = curl(self.server, "/v1/tasks", "POST", {"type": "noop", "payload": "late"})
        self.assertEqual(code, 201, body)
        wait_for(lambda: self.query("spool_tasks_succeeded_total") == TASKS + 1, 30,
                 "spool_tasks_succeeded_total to move")
        print("prometheus saw the counters %.1f s after it started" % (time.monotonic() - start))


if __name__ == "__main__":
    spoold_test.SPOOLD = sys.argv.pop(1)
    unittest.main(verbosity=2)
