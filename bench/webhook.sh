#!/usr/bin/env bash
# Webhook load: admissions/s and latency percentiles (wrk) for cached and uncached verdicts,
# and RSS with 100 000 distinct images in the verdict cache. Called by bench/run.sh with the
# fixture up; prints `key<TAB>value` lines and wrk's own output.
#
#   PC=path/to/pullcheck bench/webhook.sh WORKDIR
#
# Pinning (2 cores): the webhook may run on both cores (taskset -c 0,1: its runtime has 2
# workers); wrk runs with 1 thread pinned to core 1 (taskset -c 1), so the load generator
# takes its share of one of the two cores the webhook uses. docker-registry and the token
# server (only involved in uncached verdicts) are not pinned.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$1
# shellcheck disable=SC1091
. "$work/fixture/env"
secs=${WRK_SECS:-10}
conns=${WRK_CONNS:-16}
fill_n=100000
fill_per=100
[ "${BENCH_QUICK:-0}" = 1 ] && fill_n=10000
dir=$work/webhook
mkdir -p "$dir"
tls=$(dirname "$CA")

"$PC" webhook --help >/dev/null

start_webhook() { # extra args...
  : >"$dir/webhook.err"
  taskset -c 0,1 "$PC" webhook --listen 127.0.0.1:0 --tls-cert "$tls/server.crt" --tls-key "$tls/server.key" \
    --allow-loopback-registries --ca-file "$CA" --cluster-platform linux/amd64 --inject-image 127.0.0.1/pullcheck:bench "$@" \
    2>"$dir/webhook.err" &
  WH_PID=$!
  for _ in $(seq 200); do
    addr=$(sed -n 's#.*listening on https://##p' "$dir/webhook.err" | head -1)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  [ -n "$addr" ] || { echo "webhook did not start:" >&2; cat "$dir/webhook.err" >&2; exit 1; }
  URL=https://$addr
}
stop_webhook() { kill "$WH_PID" 2>/dev/null || true; wait "$WH_PID" 2>/dev/null || true; }
trap stop_webhook EXIT

status_kib() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$WH_PID/status"; }

python3 bench/webhook_load.py review "$TOKEN/bench/app:v1" >"$dir/cached.json"
python3 bench/webhook_load.py review "__IMAGE__" >"$dir/template.json"

cat >"$dir/cached.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open(os.getenv("BODY_FILE")); wrk.body = f:read("*a"); f:close()
EOF
cat >"$dir/uncached.lua" <<'EOF'
-- a distinct (absent) tag per request: every admission is a verdict-cache miss and one
-- registry lookup (the token for the repository is reused, as in a long-running webhook)
local tpl, reg
local n = 0
function init(args)
  local f = io.open(os.getenv("BODY_FILE")); tpl = f:read("*a"); f:close()
  reg = os.getenv("REG")
end
function request()
  n = n + 1
  local image = string.format("%s/bench/r%02d:uncached-%d", reg, n % 50, n)
  local body = tpl:gsub("__IMAGE__", image)
  return wrk.format("POST", "/validate", {["Content-Type"] = "application/json"}, body)
end
EOF

run_wrk() { # NAME LUA BODY
  BODY_FILE=$3 REG=$TOKEN taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" --latency -s "$2" "$URL/validate" >"$dir/wrk-$1.txt" 2>&1
  local rps p50 p90 p99
  rps=$(sed -n 's/^Requests\/sec:[[:space:]]*//p' "$dir/wrk-$1.txt")
  to_ms() { awk '{v=$1; if (v ~ /us$/) {sub(/us$/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms$/,"",v)} else if (v ~ /s$/) {sub(/s$/,"",v); v*=1000}; printf "%.3f", v}'; }
  p50=$(awk '$1=="50%" {print $2}' "$dir/wrk-$1.txt" | to_ms)
  p90=$(awk '$1=="90%" {print $2}' "$dir/wrk-$1.txt" | to_ms)
  p99=$(awk '$1=="99%" {print $2}' "$dir/wrk-$1.txt" | to_ms)
  printf '%s_rps\t%s\n%s_p50_ms\t%s\n%s_p90_ms\t%s\n%s_p99_ms\t%s\n' "$1" "$rps" "$1" "$p50" "$1" "$p90" "$1" "$p99"
  grep -q "Non-2xx" "$dir/wrk-$1.txt" && printf '%s_non2xx\t%s\n' "$1" "$(sed -n 's/.*Non-2xx or 3xx responses: //p' "$dir/wrk-$1.txt")"
  return 0
}

# ---- throughput and latency ---------------------------------------------------------------
start_webhook
echo "command	$PC webhook --listen 127.0.0.1:0 --tls-cert server.crt --tls-key server.key --allow-loopback-registries --ca-file ca.crt --cluster-platform linux/amd64 --inject-image 127.0.0.1/pullcheck:bench"
echo "load	taskset -c 1 wrk -t1 -c$conns -d${secs}s --latency -s {cached,uncached}.lua $URL/validate (and -c2 for cached_light)"
echo "pinning	webhook taskset -c 0,1 (2 runtime workers); wrk 1 thread on core 1; registry/token server unpinned"
echo "rss_idle_kib	$(status_kib VmRSS)"
# The verdict for the cached case, once (this is what every cached admission answers).
verdict=$(curl -sS --cacert "$CA" -H 'Content-Type: application/json' --data-binary "@$dir/cached.json" "$URL/validate")
echo "cached_response	$(printf '%s' "$verdict" | jq -c '.response | {allowed, warnings, status}')"
run_wrk cached "$dir/cached.lua" "$dir/cached.json"
# Light load: 2 connections (closed loop, like an API server with few admissions in flight);
# the 16-connection run above saturates the server, so its percentiles include queueing.
conns=2 run_wrk cached_light "$dir/cached.lua" "$dir/cached.json"
run_wrk uncached "$dir/uncached.lua" "$dir/template.json"
echo "rss_after_load_kib	$(status_kib VmRSS)"
stop_webhook

# ---- memory with N distinct images cached -----------------------------------------------------
# Negative verdicts (absent tags) are cached for --cache-negative-ttl: raised so none expires
# during the fill; --cache-max-mib raised so all of them fit (the default bound is 32 MiB).
start_webhook --cache-negative-ttl 3600 --cache-max-mib 256 --concurrency 32
echo "fill_command	webhook ... --cache-negative-ttl 3600 --cache-max-mib 256 --concurrency 32; $((fill_n / fill_per)) reviews x $fill_per distinct absent images"
t0=$(date +%s.%N)
failed=$(python3 bench/webhook_load.py fill "$URL/validate" "$CA" $((fill_n / fill_per)) "$fill_per" "$TOKEN")
t1=$(date +%s.%N)
misses=$(curl -sS --cacert "$CA" "$URL/metrics" | awk '/^pullcheck_cache_misses/ {s+=$2} END {print s+0}')
echo "fill_images	$fill_n"
echo "fill_failed_reviews	$failed"
echo "fill_seconds	$(echo "$t1 - $t0" | bc)"
echo "fill_cache_misses	$misses"
echo "rss_filled_kib	$(status_kib VmRSS)"
echo "hwm_filled_kib	$(status_kib VmHWM)"
stop_webhook

start_webhook --cache-negative-ttl 3600
python3 bench/webhook_load.py fill "$URL/validate" "$CA" $((fill_n / fill_per)) "$fill_per" "$TOKEN" >/dev/null
echo "rss_filled_default_bound_kib	$(status_kib VmRSS)"
echo "hwm_filled_default_bound_kib	$(status_kib VmHWM)"
stop_webhook
echo
echo "--- wrk cached"; cat "$dir/wrk-cached.txt"
echo "--- wrk uncached"; cat "$dir/wrk-uncached.txt"
echo "--- wrk cached, 2 connections"; cat "$dir/wrk-cached_light.txt"
