#!/usr/bin/env bash
# spoold over HTTP, on loopback (docs/benchmarks.md, "spoold over HTTP"):
#   1. durable enqueues/s: wrk, 64 keep-alive connections, POST /v1/tasks
#      with a 100-byte payload (the noop type paused, so that only the
#      enqueue path runs, as in spool-bench's in-process enqueue scenario);
#   2. 1,000 idle event streams: spoold's thread count before and after;
#   3. GET /v1/tasks?limit=1000 (1,000 stored tasks): latency p50 with wrk.
# The enqueue and listing figures run ROUNDS times (default 3) and report
# every round and the median. With SPOOL_BENCH set to spool-bench's path,
# the in-process 64-caller enqueue runs beside them and the ratio is given.
#
# Usage: [ROUNDS=N] [SPOOL_BENCH=PATH] \
#          benchmarks/server/server_bench.sh SPOOLD [SECONDS] [--set K=V]...
set -euo pipefail
spoold=$1
seconds=${2:-10}
rounds=${ROUNDS:-3}
median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
# wrk's p50 line in milliseconds ("50%    1.70ms", or us/s units).
p50_ms() { awk '$1=="50%" { v=$2; if (v ~ /us$/) { sub(/us$/,"",v); v/=1000 } else if (v ~ /ms$/) { sub(/ms$/,"",v) } else { sub(/s$/,"",v); v*=1000 } print v }'; }
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

echo "== enqueue: wrk -t2 -c64 -d${seconds}s, 100-byte payloads, $rounds rounds"
rates=()
for round in $(seq "$rounds"); do
  out=$(wrk -t2 -c64 -d"${seconds}s" --latency -s "$here/post_task.lua" \
    "http://127.0.0.1:$port")
  echo "$out" | grep -E "Requests/sec|50%|99%|Non-2xx|requests in" | sed "s/^/round $round: /"
  rates+=("$(echo "$out" | awk '/Requests\/sec/ { print $2 }')")
done
enqueue_median=$(median "${rates[@]}")
echo "enqueue_per_s_median=$enqueue_median rounds=${rates[*]}"
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
p50s=()
for round in $(seq "$rounds"); do
  p50s+=("$(wrk -t1 -c1 -d3s --latency \
    "http://127.0.0.1:$port/v1/tasks?type=sleep&limit=1000" | p50_ms)")
done
echo "listing_p50_ms_median=$(median "${p50s[@]}") rounds=${p50s[*]}"
threads=$(ls /proc/$pid/task | wc -l)
echo "spoold_threads=$threads"
if [ -n "${SPOOL_BENCH:-}" ]; then
  in_process=$("$SPOOL_BENCH" --scenario enqueue --peers none --rounds "$rounds" 2>&1 |
    awk '/enqueue +sync,callers=64 +ops_per_s/ { gsub(",", "", $NF); print $NF }')
  echo "in_process_enqueue_64_callers_per_s=$in_process"
  python3 -c "import sys; print('ratio_http_over_in_process=%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" \
    "$enqueue_median" "$in_process"
fi
