#!/usr/bin/env python3
"""Repeated failovers (docs/replication.md, "Measured"): a real etcd and
three spoold nodes as in cluster_test.py; four clients enqueue all along
while the primary's handlers drain. Each round SIGKILLs the primary (or,
one round in four, a random standby, or SIGSTOPs the primary past its
lease), waits for the first acknowledged enqueue on a new primary, checks
that every task acknowledged so far is on it, and restarts the victim.

  failover_torture.py SPOOLD [--kills N] [--seed S]

Prints one line per round and, at the end,
  kills=N acknowledged=A lost=L failover_p50_ms=P failover_max_ms=M
  pause_p50_ms=Q pause_max_ms=R seed=S
where a failover is from a SIGKILL of the primary to the first enqueue
acknowledged by another node, and a pause the same from a SIGSTOP (it
includes the clients' 5 s timeouts on the paused node).
and exits 1 if any acknowledged task was lost. Every wait is bounded.
"""

import argparse
import http.client
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "server"))
import cluster_test  # noqa: E402
import spoold_test  # noqa: E402
from cluster_test import NAMES, Clients, Etcd, Node  # noqa: E402
from spoold_test import TOKEN, wait_for  # noqa: E402


def ready_primary(nodes, other_than=None, timeout=30):
    def find():
        for node in nodes:
            if node is not other_than and node.ready_primary():
                return node
        return None
    return wait_for(find, timeout, "a ready primary")


def following(primary, name):
    """Whether `name` follows `primary`, within 100 commits of it."""
    code, cluster = primary.get("/v1/cluster")
    if code != 200:
        return False
    return any(s["name"] == name and s["connected"] and s["lag_commits"] < 100
               for s in cluster.get("standbys", []))


def missing_on(node, ids):
    """The ids `node` does not hold, asked over one keep-alive connection."""
    missing = []
    conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=10)
    try:
        for task_id in ids:
            conn.request("GET", "/v1/tasks/%d" % task_id,
                         headers={"Authorization": "Bearer " + TOKEN})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                missing.append(task_id)
    finally:
        conn.close()
    return missing


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("spoold")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args()
    spoold_test.SPOOLD = args.spoold
    rng = random.Random(args.seed)
    directory = tempfile.mkdtemp(prefix="spool-failover-")
    etcd = Etcd(directory)
    nodes = [Node(os.path.join(directory, n), n, etcd.url) for n in NAMES]
    for node in nodes:
        node.start()
    clients = None
    lost = 0
    failovers = []  # after a SIGKILL of the primary
    pauses = []     # after a SIGSTOP: the clients' own timeouts included
    try:
        primary = ready_primary(nodes)
        clients = Clients(nodes)
        checked = set()
        for round_ in range(1, args.kills + 1):
            time.sleep(rng.uniform(0.3, 1.2))
            kind = rng.choice(["kill", "kill", "kill", "standby", "stop"])
            victim = primary
            if kind == "standby":
                victim = rng.choice([n for n in nodes if n is not primary])
            at = time.monotonic()
            if kind == "stop":
                os.kill(victim.process.pid, signal.SIGSTOP)
            else:
                victim.process.send_signal(signal.SIGKILL)
                victim.process.wait(10)
            if kind != "standby":
                primary = ready_primary(nodes, other_than=victim)
                wait_for(lambda: clients.first_after(at, victim.name), 30,
                         "an acknowledged enqueue on the new primary")
                took = clients.first_after(at, victim.name) - at
                (failovers if kind == "kill" else pauses).append(took)
            if kind == "stop":
                os.kill(victim.process.pid, signal.SIGCONT)
            else:
                victim.start()
            wait_for(lambda: victim.role() == "standby", 60,
                     "%s back as a standby" % victim.name)
            # ...and caught up (a base copied, if it needed one): each round
            # starts from a healthy cluster.
            wait_for(lambda: following(primary, victim.name), 120,
                     "%s following %s" % (victim.name, primary.name))
            with clients.lock:
                ids = [i for i in clients.acknowledged if i not in checked]
            missing = missing_on(primary, ids)
            lost += len(missing)
            checked.update(ids)
            print("round %d: %s %s; primary %s; %d acknowledged, %d missing%s"
                  % (round_, kind, victim.name, primary.name, len(checked),
                     len(missing),
                     "" if kind == "standby" else
                     "; failover %.0f ms" % (took * 1000)),
                  flush=True)
    finally:
        if clients:
            clients.stop()
        for node in nodes:
            if node.alive():
                os.kill(node.process.pid, signal.SIGCONT)
                node.stop(signal.SIGKILL)
        etcd.stop()
    total = len(clients.acknowledged) if clients else 0
    def ms(values, f):
        return "%.0f" % (f(values) * 1000) if values else "-"
    print("kills=%d acknowledged=%d lost=%d failover_p50_ms=%s "
          "failover_max_ms=%s pause_p50_ms=%s pause_max_ms=%s seed=%d"
          % (args.kills, total, lost, ms(failovers, statistics.median),
             ms(failovers, max), ms(pauses, statistics.median),
             ms(pauses, max), args.seed))
    if lost == 0:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        print("kept " + directory)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
