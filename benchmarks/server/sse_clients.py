#!/usr/bin/env python3
"""Opens N idle event streams (GET /v1/events) to spoold and reports the
server's thread count before and after: sse_clients.py PORT PID N."""
import os
import socket
import sys
import time

port, pid, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])


def threads():
    return len(os.listdir("/proc/%d/task" % pid))


before = threads()
sockets = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
    sockets.append(s)
ok = 0
for s in sockets:
    data = b""
    while b"event: counts" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    ok += b"event: counts" in data
time.sleep(1)
after = threads()
with open("/proc/%d/status" % pid) as f:
    rss = [l.split()[1] for l in f if l.startswith("VmRSS")][0]
print("sse_clients=%d streams_with_counts=%d threads_before=%d threads_after=%d rss_kib=%s"
      % (n, ok, before, after, rss))
for s in sockets:
    s.close()
