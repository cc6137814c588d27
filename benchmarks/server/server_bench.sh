#!/usr/bin/env bash
# spoold over HTTP, on loopback (docs/benchmarks.md, "spoold over HTTP"):
#   1. durable enqueues/s: wrk, 64 keep-alive connections, POST /v1/tasks
#      with a 100-byte payload (the noop type paused, so that only the
#      enqueue path runs, as in spool-bench's in-process enqueue scenario);
#   2. 1,000 idle event streams: spoold's thread count before and after;
#   3. GET /v1/tasks?limit=1000 (1,000 stored tasks): latency p50 with wrk.
#
# Usage: benchmarks/server/server_bench.sh SPOOLD [SECONDS] [--set K=V]...
set -euo pipefail
spoold=$1
seconds=${2:-10}
shift $(( $# >= 2 ? 2 : 1 ))
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/spoold-bench.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
openssl rand -hex 32 > "$dir/token"
chmod 600 "$dir/token"
export SPOOLD_TOKEN=$(cat "$dir/token")
ulimit -n 8192
"$spoold" --set storage.path="$dir/data" --set server.listen=127.0.0.1:$port \
  --set server.token_file="$dir/token" "$@" 2> "$dir/spoold.log" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/readyz" > /dev/null && break
  sleep 0.1
done
auth=(-H "Authorization: Bearer $SPOOLD_TOKEN")
curl -sf -X POST "${auth[@]}" "http://127.0.0.1:$port/v1/types/noop/pause" > /dev/null

echo "== enqueue: wrk -t2 -c64 -d${seconds}s, 100-byte payloads"
wrk -t2 -c64 -d"${seconds}s" --latency -s "$here/post_task.lua" \
  "http://127.0.0.1:$port" | grep -E "Requests/sec|Latency|50%|99%|Non-2xx|requests in"
stored=$(curl -s "http://127.0.0.1:$port/v1/counts" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["by_status"]["pending"])')
echo "stored_pending=$stored"

echo "== 1000 idle event streams"
python3 "$here/sse_clients.py" "$port" "$pid" 1000

echo "== listing: GET /v1/tasks?type=list&limit=1000"
body=$(python3 -c 'import json; print(json.dumps({"tasks":[{"type":"sleep","payload":"1","delay_ms":3600000}]*1000}))')
curl -sf -X POST "${auth[@]}" -H 'Content-Type: application/json' --data-binary "$body" \
  "http://127.0.0.1:$port/v1/tasks:batch" > /dev/null
bytes=$(curl -s "http://127.0.0.1:$port/v1/tasks?type=sleep&limit=1000" | wc -c)
echo "listing_bytes=$bytes"
wrk -t1 -c1 -d5s --latency "http://127.0.0.1:$port/v1/tasks?type=sleep&limit=1000" |
  grep -E "Requests/sec|50%|90%|99%"
threads=$(ls /proc/$pid/task | wc -l)
echo "spoold_threads=$threads"
