#!/usr/bin/env bash
# spoold over HTTPS beside plain HTTP, in one run (docs/benchmarks.md,
# "spoold over HTTPS"): two spoolds on loopback, one plain and one with the
# test PKI's certificate (tests/security/make_test_certs.sh), measured in
# alternating rounds so that both see the same disk and load:
#   1. durable enqueues/s: wrk -t2 -c64, keep-alive, POST /v1/tasks with a
#      100-byte payload (noop paused: only the enqueue path runs);
#   2. GET /v1/tasks?limit=1000 over one connection: latency p50, where
#      the encryption of ~400 KB per answer shows.
# Reports each round, the medians and HTTPS/HTTP ratios.
#
# Usage: [ROUNDS=N] benchmarks/server/tls_bench.sh SPOOLD [SECONDS] [--set K=V]...
# (the --set options go to both spoolds)
set -euo pipefail
spoold=$1
seconds=${2:-10}
rounds=${ROUNDS:-3}
shift $(( $# >= 2 ? 2 : 1 ))
here=$(cd "$(dirname "$0")" && pwd)
median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
p50_ms() { awk '$1=="50%" { v=$2; if (v ~ /us$/) { sub(/us$/,"",v); v/=1000 } else if (v ~ /ms$/) { sub(/ms$/,"",v) } else { sub(/s$/,"",v); v*=1000 } print v }'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
dir=$(mktemp -d /tmp/spoold-tls-bench.XXXXXX)
bash "$here/../../tests/security/make_test_certs.sh" "$dir/certs"
openssl rand -hex 32 > "$dir/token"
chmod 600 "$dir/token"
export SPOOLD_TOKEN=$(cat "$dir/token")
ulimit -n 8192
plain_port=$(free_port)
tls_port=$(free_port)
"$spoold" --set storage.path="$dir/plain" --set server.listen=127.0.0.1:$plain_port \
  --set server.token_file="$dir/token" "$@" 2> "$dir/plain.log" &
plain_pid=$!
"$spoold" --set storage.path="$dir/tls" --set server.listen=127.0.0.1:$tls_port \
  --set server.token_file="$dir/token" \
  --set server.tls_certificate_file="$dir/certs/server.pem" \
  --set server.tls_key_file="$dir/certs/server.key" "$@" 2> "$dir/tls.log" &
tls_pid=$!
trap 'kill -TERM $plain_pid $tls_pid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
auth=(-H "Authorization: Bearer $SPOOLD_TOKEN")
ca=(--cacert "$dir/certs/ca.pem")
urls=("http://127.0.0.1:$plain_port" "https://127.0.0.1:$tls_port")
for url in "${urls[@]}"; do
  for _ in $(seq 100); do
    curl -sf "${ca[@]}" "$url/readyz" > /dev/null && break
    sleep 0.1
  done
  curl -sf "${ca[@]}" -X POST "${auth[@]}" "$url/v1/types/noop/pause" > /dev/null
done

echo "== enqueue: wrk -t2 -c64 -d${seconds}s, 100-byte payloads, $rounds rounds each"
plain_rates=(); tls_rates=()
for round in $(seq "$rounds"); do
  for url in "${urls[@]}"; do
    rate=$(wrk -t2 -c64 -d"${seconds}s" -s "$here/post_task.lua" "$url" |
      awk '/Requests\/sec/ { print $2 }')
    echo "round $round: $url enqueue_per_s=$rate"
    if [[ $url == https* ]]; then tls_rates+=("$rate"); else plain_rates+=("$rate"); fi
  done
done
plain=$(median "${plain_rates[@]}"); tls=$(median "${tls_rates[@]}")
echo "enqueue_per_s_median plain=$plain https=$tls"
python3 -c "import sys; print('ratio_https_over_http_enqueue=%.2f' % (float(sys.argv[2]) / float(sys.argv[1])))" "$plain" "$tls"

echo "== listing: GET /v1/tasks?type=sleep&limit=1000, one connection"
body=$(python3 -c 'import json; print(json.dumps({"tasks":[{"type":"sleep","payload":"1","delay_ms":3600000}]*1000}))')
for url in "${urls[@]}"; do
  curl -sf "${ca[@]}" -X POST "${auth[@]}" -H 'Content-Type: application/json' \
    --data-binary "$body" "$url/v1/tasks:batch" > /dev/null
done
echo "listing_bytes=$(curl -s "${ca[@]}" "${auth[@]}" "${urls[1]}/v1/tasks?type=sleep&limit=1000" | wc -c)"
plain_p50=(); tls_p50=()
for round in $(seq "$rounds"); do
  for url in "${urls[@]}"; do
    p50=$(wrk -t1 -c1 -d3s --latency -H "Authorization: Bearer $SPOOLD_TOKEN" \
      "$url/v1/tasks?type=sleep&limit=1000" | p50_ms)
    echo "round $round: $url listing_p50_ms=$p50"
    if [[ $url == https* ]]; then tls_p50+=("$p50"); else plain_p50+=("$p50"); fi
  done
done
plain=$(median "${plain_p50[@]}"); tls=$(median "${tls_p50[@]}")
echo "listing_p50_ms_median plain=$plain https=$tls"
python3 -c "import sys; print('ratio_https_over_http_listing_p50=%.2f' % (float(sys.argv[2]) / float(sys.argv[1])))" "$plain" "$tls"
