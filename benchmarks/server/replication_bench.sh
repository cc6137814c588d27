#!/usr/bin/env bash
# Replicated enqueues beside local ones, over spoold on loopback
# (docs/benchmarks.md, "Replication"; docs/replication.md):
#   A: a spoold with storage.durability = "sync";
#   B: a spoold with storage.durability = "replicated", min_acks = 1, and
#      C, its standby, on the same disk.
# wrk POSTs /v1/tasks (100-byte payloads, the noop type paused) to A and
# to B in alternation, ROUNDS times (default 3) each, with 64 connections
# and with 1; it reports each round, the medians, p50 latencies and the
# ratios B/A in the same run. Every answer must be 201 (Non-2xx is shown).
#
# STANDBY_DIR puts C's store on another file system (default: beside A's
# and B's), e.g. STANDBY_DIR=/dev/shm: two syncs on one virtio disk run one
# after the other, as they would not on two machines.
#
# Usage: [ROUNDS=N] [STANDBY_DIR=D] benchmarks/server/replication_bench.sh SPOOLD [SECONDS]
set -euo pipefail
spoold=$1
seconds=${2:-5}
rounds=${ROUNDS:-3}
here=$(cd "$(dirname "$0")" && pwd)
median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
p50_ms() { awk '$1=="50%" { v=$2; if (v ~ /us$/) { sub(/us$/,"",v); v/=1000 } else if (v ~ /ms$/) { sub(/ms$/,"",v) } else { sub(/s$/,"",v); v*=1000 } print v }'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
dir=$(mktemp -d /tmp/spool-repl-bench.XXXXXX)
standby_store=$(mktemp -d "${STANDBY_DIR:-$dir}/spool-repl-standby.XXXXXX")
openssl rand -hex 32 > "$dir/token"
openssl rand -hex 32 > "$dir/secret"
chmod 600 "$dir/token" "$dir/secret"
export SPOOLD_TOKEN=$(cat "$dir/token")
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM $p 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir" "$standby_store"' EXIT
start() {  # NAME PORT SETTINGS...
  local name=$1 port=$2 path=$dir/$1; shift 2
  [ "$name" = standby ] && path=$standby_store/data
  "$spoold" --set storage.path="$path" --set server.listen=127.0.0.1:$port \
    --set server.token_file="$dir/token" --set replication.secret_file="$dir/secret" \
    "$@" 2> "$dir/$name.log" &
  pids+=($!)
}
wait_ready() {
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$1/readyz" > /dev/null && return 0
    sleep 0.1
  done
  echo "spoold on port $1 never became ready" >&2; return 1
}
a=$(free_port); b=$(free_port); c=$(free_port)
start local $a
start replicated $b --set storage.durability=replicated --set replication.min_acks=1
start standby $c --set replication.role=standby \
  --set replication.primary=http://127.0.0.1:$b --set replication.name=c
wait_ready $a; wait_ready $c; wait_ready $b
for port in $a $b; do
  curl -sf -X POST -H "Authorization: Bearer $SPOOLD_TOKEN" \
    "http://127.0.0.1:$port/v1/types/noop/pause" > /dev/null
done

for conns in 64 1; do
  declare -A rate=() p50=()
  for round in $(seq "$rounds"); do
    for which in local replicated; do
      port=$a; [ $which = replicated ] && port=$b
      out=$(wrk -t$(( conns > 1 ? 2 : 1 )) -c$conns -d"${seconds}s" --latency \
        -s "$here/post_task.lua" "http://127.0.0.1:$port")
      r=$(echo "$out" | awk '/Requests\/sec/ { print $2 }')
      l=$(echo "$out" | p50_ms)
      bad=$(echo "$out" | awk '/Non-2xx/ { print $NF }')
      echo "c=$conns round $round $which: ${r}/s p50 ${l} ms non-2xx ${bad:-0}"
      rate[$which]="${rate[$which]:-} $r"; p50[$which]="${p50[$which]:-} $l"
    done
  done
  lr=$(median ${rate[local]}); rr=$(median ${rate[replicated]})
  lp=$(median ${p50[local]}); rp=$(median ${p50[replicated]})
  echo "c=$conns median: local ${lr}/s p50 ${lp} ms; replicated ${rr}/s p50 ${rp} ms; rate ratio $(python3 -c "print(round($rr/$lr,2))"); p50 +$(python3 -c "print(round($rp-$lp,3))") ms"
  unset rate p50
done
curl -s -H "Authorization: Bearer $SPOOLD_TOKEN" "http://127.0.0.1:$b/v1/cluster"; echo
