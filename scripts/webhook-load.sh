#!/usr/bin/env bash
# The admission webhook under load and fault (docs/hardening.md): a release `pullcheck webhook` on
# loopback, a real docker-registry, and
#
#   1. mixed load: N AdmissionReviews at full speed (wrk + scripts/load/mix.lua): valid Jobs
#      (cached), the same through /mutate, Jobs with a missing tag, unknown kinds, pod
#      templates of 400 containers, 8 shapes of malformed input, and requests declaring a
#      body above 3 MiB; meanwhile scripts/load/probe.py sends oversized bodies for real
#      (Content-Length and chunked). Asserts: every answer is the expected one (200
#      allowed/denied by class, 400 for malformed, 413 for oversized), no socket error or
#      timeout, the process alive afterwards and exit status 0 after SIGTERM, no panic in
#      its log, VmRSS (sampled every second) flat after warm-up (no upward trend: the peak
#      and the floor of the last third of the samples within LOAD_RSS_BOUND of the first
#      third's);
#   2. registry outage: uncached admissions while the registry is SIGSTOPped, once
#      fail-open and once --fail-closed: every answer within --budget (+ slack), with the
#      configured verdict for what could not be verified;
#   3. SIGTERM drain: requests in flight when SIGTERM arrives — slow ones (registry
#      stopped, so each waits for its budget) and busy keep-alive connections — each get a
#      complete answer, new connections are refused after the settle period, exit 0.
#
#   scripts/webhook-load.sh            # full: 1 000 000 mixed requests (~2-6 min on 2 cores)
#   scripts/webhook-load.sh smoke      # CI: 20 000 requests + outage + drain (< 60 s)
#   LOAD_REQUESTS=200000 scripts/webhook-load.sh
#
# Env: LOAD_REQUESTS, LOAD_CONNS (wrk connections, default 32), PC (a pullcheck binary;
# default: cargo build --release), LOAD_RSS_BOUND (allowed RSS growth after warm-up,
# default 0.20), LOAD_DIR (work dir, default target/tmp/webhook-load).
#
# Pinning (2 cores, shared): the webhook may use both cores (taskset -c 0,1; its runtime
# has one worker per core); wrk runs one thread pinned to core 1 (taskset -c 1), and so do
# the Python probes, so the load generator takes its share of one of the webhook's cores.
# docker-registry is not pinned (it only serves the uncached lookups).
#
# Results: `key value` lines on stdout, also written to $LOAD_DIR/results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

mode=${1:-full}
case "$mode" in
  full) requests=${LOAD_REQUESTS:-1000000}; outage_secs=12; oversize_rounds=40 ;;
  smoke) requests=${LOAD_REQUESTS:-20000}; outage_secs=6; oversize_rounds=5 ;;
  *) echo "usage: $0 [full|smoke]" >&2; exit 2 ;;
esac
conns=${LOAD_CONNS:-32}
rss_bound=${LOAD_RSS_BOUND:-0.20}
work=${LOAD_DIR:-$root/target/tmp/webhook-load}
budget=2          # --budget of the outage and drain phases (seconds)
slack_ms=500      # answer latency allowed above the budget (scheduling noise on 2 cores)

need() { command -v "$1" >/dev/null 2>&1; }
for t in wrk docker-registry skopeo openssl python3 taskset curl; do
  if ! need "$t"; then
    case "$t" in
      wrk) apt-get install -y wrk >/dev/null ;;
      *) scripts/deps.sh >/dev/null ;;
    esac
  fi
done
if [ -z "${PC:-}" ]; then
  cargo build --release --quiet
  PC=$root/target/release/pullcheck
fi

rm -rf "$work"
mkdir -p "$work"
results=$work/results.txt
: >"$results"
say() { echo "$*" | tee -a "$results"; }
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
failures=0

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# ---- fixture: TLS, registry, images -----------------------------------------------------
make_tls "$work/tls"
reg_port=$(free_port)
start_registry "$work/registry" "$reg_port"
pids+=("$REG_PID")
reg=127.0.0.1:$reg_port
push_image "$work/image" "$reg/demo/hello:v1"
tags=8
for i in $(seq "$tags"); do
  skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false \
    "docker://$reg/demo/hello:v1" "docker://$reg/demo/hello:t$i"
done
python3 scripts/load/reviews.py "$work/bodies" "$reg" >/dev/null
ca=$work/tls/ca.crt

# start_webhook NAME [ARGS...]: sets WH_PID and URL; stderr goes to $work/NAME.log.
start_webhook() {
  local name=$1; shift
  local log=$work/$name.log addr=
  taskset -c 0,1 "$PC" webhook --listen 127.0.0.1:0 \
    --tls-cert "$work/tls/server.crt" --tls-key "$work/tls/server.key" \
    --allow-loopback-registries --insecure-registry "$reg" \
    --cluster-platform linux/amd64 --inject-image "$reg/pullcheck:load" "$@" 2>"$log" &
  WH_PID=$!
  pids+=("$WH_PID")
  for _ in $(seq 200); do
    addr=$(sed -n 's#.*listening on https://##p' "$log" | head -1)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  [ -n "$addr" ] || { cat "$log" >&2; echo "webhook $name did not start" >&2; exit 1; }
  URL=https://$addr
}

# stop_webhook NAME: SIGTERM, wait, assert exit status 0 and no panic in the log.
stop_webhook() {
  local name=$1 rc=0
  kill -0 "$WH_PID" 2>/dev/null || fail "$name: webhook died before SIGTERM"
  kill -TERM "$WH_PID"
  wait "$WH_PID" || rc=$?
  say "${name}_exit_status $rc"
  [ "$rc" = 0 ] || fail "$name: exit status $rc after SIGTERM"
  if grep -qiE 'panicked|overflow|SIGSEGV|fatal runtime' "$work/$name.log"; then
    fail "$name: panic in the log"; grep -iE 'panicked|overflow' "$work/$name.log" | head -5 >&2
  fi
}

rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null; }

# tally FILE KEY: a number from a wrk tally file (0 when absent).
tally() { awk -v k="$2" '{ v=$NF; $NF=""; sub(/ $/, ""); if ($0==k) { print v; f=1 } } END { if (!f) print 0 }' "$1"; }

# ---- 1. mixed load ------------------------------------------------------------------------
start_webhook mixed
say "mode $mode"
say "webhook $PC webhook --listen 127.0.0.1:0 --allow-loopback-registries --insecure-registry $reg --cluster-platform linux/amd64 --inject-image $reg/pullcheck:load (enforce, fail-open, budget 8s)"
say "pinning webhook taskset -c 0,1; wrk -t1 taskset -c 1; probes taskset -c 1"
say "rss_idle_kib $(rss_kib "$WH_PID")"
# Warm the verdict cache (one lookup per image); the mixed run starts from cached verdicts.
for c in ok miss huge; do
  curl -sS -o /dev/null --cacert "$ca" -H 'Content-Type: application/json' \
    --data-binary "@$work/bodies/$c.body" "$URL/validate"
done
( while kill -0 "$WH_PID" 2>/dev/null; do echo "$(date +%s) $(rss_kib "$WH_PID")"; sleep 1; done ) >"$work/rss.txt" &
sampler=$!
(taskset -c 1 python3 scripts/load/probe.py oversized "$URL" "$ca" "$oversize_rounds" >"$work/oversized.txt" 2>&1; echo "rc $?" >>"$work/oversized.txt") &
probe=$!
out=$work/mixed.tally
BODIES=$work/bodies QUOTA=$requests OUT=$out taskset -c 1 \
  wrk -t1 -c"$conns" -d3600s --timeout 10s --latency -s scripts/load/mix.lua "$URL" >"$work/wrk-mixed.txt" 2>&1 &
wrk_pid=$!
while kill -0 "$wrk_pid" 2>/dev/null && ! compgen -G "$out.done-*" >/dev/null; do sleep 0.2; done
kill -INT "$wrk_pid" 2>/dev/null || true
wait "$wrk_pid" || { cat "$work/wrk-mixed.txt" >&2; fail "wrk failed"; }
wait "$probe" || true
sleep 1
kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true
[ -s "$out" ] || { cat "$work/wrk-mixed.txt" >&2; echo "no tally from wrk" >&2; exit 1; }

answered=$(tally "$out" requests)
secs=$(tally "$out" seconds)
say "mixed_answered $answered"
say "mixed_seconds $secs"
say "mixed_rps $(awk -v n="$answered" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')"
for k in p50_ms p90_ms p99_ms p99.9_ms max_ms; do say "mixed_$k $(tally "$out" "$k")"; done
say "mixed_errors $(sed -n 's/^errors //p' "$out")"
grep -q '^errors connect=0 read=0 write=0 timeout=0$' "$out" || fail "socket errors or timeouts: $(grep ^errors "$out")"
[ "$answered" -ge "$requests" ] || fail "answered $answered < $requests"

# Expected answer per class; anything else (a 500, a 200 for malformed input, ...) fails.
declare -A expect=([ok]="ok allowed" [mut]="mut allowed" [miss]="miss denied" [unk]="unk allowed"
                   [huge]="huge allowed" [big]="http 413")
sent_total=0; sent_bad=0
while read -r _ class n; do
  sent_total=$((sent_total + n))
  case "$class" in bad-*) sent_bad=$((sent_bad + n)) ;; esac
done < <(grep '^sent ' "$out")
say "mixed_sent $sent_total"
in_flight=$((sent_total - answered))
say "mixed_unanswered_at_stop $in_flight (requests on other connections when the quota was reached)"
{ [ "$in_flight" -ge 0 ] && [ "$in_flight" -le "$conns" ]; } || fail "sent $sent_total vs answered $answered"
got_bad=$(tally "$out" "got http 400")
say "mixed_class bad (8 malformed shapes) sent $sent_bad answered-400 $got_bad"
{ [ $((sent_bad - got_bad)) -ge 0 ] && [ $((sent_bad - got_bad)) -le "$conns" ]; } || fail "malformed: sent $sent_bad, 400s $got_bad"
for class in ok mut miss unk huge big; do
  s=$(tally "$out" "sent $class"); g=$(tally "$out" "got ${expect[$class]}")
  say "mixed_class $class sent $s answered-as-expected $g (${expect[$class]})"
  { [ $((s - g)) -ge 0 ] && [ $((s - g)) -le "$conns" ]; } || fail "class $class: sent $s, expected answers $g"
done
unexpected=$(grep '^got ' "$out" | grep -vE '^got (ok allowed|mut allowed|miss denied|unk allowed|huge allowed|http 400|http 413) ' || true)
[ -z "$unexpected" ] || fail "unexpected answers: $unexpected"
say "mixed_unexpected_answers $(printf '%s' "$unexpected" | grep -c . || true)"

sed 's/^/mixed_/' "$work/oversized.txt" | grep -v '^mixed_rc' | tee -a "$results"
grep -q '^rc 0$' "$work/oversized.txt" || fail "oversized probe: $(cat "$work/oversized.txt")"

# RSS: samples after warm-up (the first 20 % of the run, at least 5 s; 2 s in smoke mode).
n_rss=$(wc -l <"$work/rss.txt")
min_skip=5; [ "$mode" = smoke ] && min_skip=2
skip=$(( n_rss / 5 > min_skip ? n_rss / 5 : min_skip ))
# RSS moves with what is in flight (a 400-container review, a 3 MiB chunked body being
# refused), so "flat" is judged on the trend: the peak and the floor of the last third of
# the samples after warm-up against those of the first third.
tail -n +$((skip + 1)) "$work/rss.txt" | awk '{ print $2 }' >"$work/rss-after-warmup.txt"
read -r rmin rmax rlast first_max first_min last_max last_min < <(awk '
  { v[NR]=$1 } END {
    n=NR; t=int(n/3); if (t<1) t=1
    mn=v[1]; mx=v[1]; for (i=1;i<=n;i++) { if (v[i]<mn) mn=v[i]; if (v[i]>mx) mx=v[i] }
    fmx=v[1]; fmn=v[1]; for (i=1;i<=t;i++) { if (v[i]>fmx) fmx=v[i]; if (v[i]<fmn) fmn=v[i] }
    lmx=v[n]; lmn=v[n]; for (i=n-t+1;i<=n;i++) { if (v[i]>lmx) lmx=v[i]; if (v[i]<lmn) lmn=v[i] }
    print mn+0, mx+0, v[n]+0, fmx+0, fmn+0, lmx+0, lmn+0 }' "$work/rss-after-warmup.txt")
say "mixed_rss_samples $n_rss (1 per second; warm-up: first $skip)"
say "mixed_rss_peak_kib $(awk 'BEGIN{m=0} $2>m {m=$2} END {print m}' "$work/rss.txt")"
say "mixed_rss_after_warmup_min_kib $rmin"
say "mixed_rss_after_warmup_max_kib $rmax"
say "mixed_rss_end_kib $rlast"
if [ "${rmin:-0}" -gt 0 ]; then
  peak_growth=$(awk -v a="$first_max" -v b="$last_max" 'BEGIN { printf "%.3f", (b - a) / a }')
  floor_growth=$(awk -v a="$first_min" -v b="$last_min" 'BEGIN { printf "%.3f", (b - a) / a }')
  say "mixed_rss_first_third_kib min $first_min max $first_max"
  say "mixed_rss_last_third_kib min $last_min max $last_max"
  say "mixed_rss_growth peak $peak_growth floor $floor_growth (bound $rss_bound)"
  awk -v p="$peak_growth" -v f="$floor_growth" -v b="$rss_bound" 'BEGIN { exit !(p < b && f < b) }' ||
    fail "RSS grew after warm-up: peak $peak_growth, floor $floor_growth"
else
  fail "too few RSS samples after warm-up"
fi
curl -sS --cacert "$ca" "$URL/metrics" >"$work/metrics-mixed.txt"
grep '^pullcheck_admissions_total' "$work/metrics-mixed.txt" | sed 's/^/mixed_metric /' | tee -a "$results"
say "mixed_log_bytes $(stat -c %s "$work/mixed.log")"
stop_webhook mixed

# ---- 2. registry outage during load ------------------------------------------------------
for policy in open closed; do
  flags=(--budget "$budget" --cache-positive-ttl 0.001)
  [ "$policy" = closed ] && flags+=(--fail-closed)
  name=outage-$policy
  start_webhook "$name" "${flags[@]}"
  out=$work/$name.tally
  BODIES=$work/bodies REG=$reg TAGS=$tags OUT=$out taskset -c 1 \
    wrk -t1 -c"$conns" -d"$((outage_secs + 4))s" --timeout 10s -s scripts/load/outage.lua "$URL" >"$work/wrk-$name.txt" 2>&1 &
  wrk_pid=$!
  sleep 2
  kill -STOP "$REG_PID"
  sleep "$outage_secs"
  kill -CONT "$REG_PID"
  wait "$wrk_pid" || fail "$name: wrk failed"
  # After the outage the registry answers again: a fresh image is verified.
  after=$(sed "s#__IMAGE__#$reg/demo/hello:t1#" "$work/bodies/outage-template.body" |
    curl -sS --cacert "$ca" -H 'Content-Type: application/json' --data-binary @- "$URL/validate")
  for k in verified-allowed verified-denied unverified-allowed unverified-denied other-denied; do
    say "${name}_$k $(tally "$out" "got $k")"
  done
  for k in requests p50_ms p99_ms max_ms; do say "${name}_$k $(tally "$out" "$k")"; done
  say "${name}_errors $(sed -n 's/^errors //p' "$out")"
  say "${name}_budget_ms $((budget * 1000))"
  grep -q '^errors connect=0 read=0 write=0 timeout=0$' "$out" || fail "$name: socket errors or timeouts"
  [ "$(grep -c '^got http-' "$out" || true)" = 0 ] || fail "$name: non-200 answers: $(grep '^got http-' "$out")"
  [ "$(tally "$out" "got other-denied")" = 0 ] || fail "$name: denials that are neither not_found nor transient"
  max=$(tally "$out" max_ms)
  awk -v m="$max" -v b="$((budget * 1000 + slack_ms))" 'BEGIN { exit !(m <= b) }' || fail "$name: slowest answer ${max} ms > budget + ${slack_ms} ms"
  [ "$(tally "$out" "got verified-allowed")" -gt 0 ] || fail "$name: nothing verified (before/after the outage)"
  if [ "$policy" = open ]; then
    [ "$(tally "$out" "got unverified-allowed")" -gt 0 ] || fail "$name: no fail-open answer during the outage"
    [ "$(tally "$out" "got unverified-denied")" = 0 ] || fail "$name: fail-open denied an unverified image"
  else
    [ "$(tally "$out" "got unverified-denied")" -gt 0 ] || fail "$name: no fail-closed denial during the outage"
    [ "$(tally "$out" "got unverified-allowed")" = 0 ] || fail "$name: fail-closed admitted an unverified image"
  fi
  if printf '%s' "$after" | grep -q '"allowed":true' && ! printf '%s' "$after" | grep -q 'not verified'; then
    say "${name}_after_resume verified"
  else
    fail "$name: not verified after the registry resumed: $after"
  fi
  curl -sS --cacert "$ca" "$URL/metrics" | grep -E '^pullcheck_budget_exhausted_images_total' | sed "s/^/${name}_metric /" | tee -a "$results"
  stop_webhook "$name"
done

# ---- 3. SIGTERM drains in-flight requests ---------------------------------------------------
# Two kinds of requests are in flight when SIGTERM comes: 64 slow ones (the registry is
# stopped, so each waits for its budget) and 16 keep-alive connections posting cheap
# reviews in a closed loop, as a busy API server does. Every request must get a complete
# answer (the keep-alive ones end with Connection: close), new connections are refused once
# the settle period (a quarter of --shutdown-grace, at most 2 s) is over, exit status 0.
grace=10
settle_ms=2000
start_webhook drain --budget 3 --shutdown-grace "$grace"
drain_n=64
sed "s#__IMAGE__#$reg/demo/hello:drain-$RANDOM$RANDOM#" "$work/bodies/outage-template.body" >"$work/drain.body"
kill -STOP "$REG_PID"
mark=$work/drain.sent
taskset -c 1 python3 scripts/load/probe.py drain "$URL" "$ca" "$work/drain.body" "$drain_n" "$mark" >"$work/drain.txt" 2>&1 &
drainer=$!
taskset -c 1 python3 scripts/load/probe.py keepalive "$URL" "$ca" "$work/bodies/unk.body" 16 30 >"$work/keepalive.txt" 2>&1 &
keeper=$!
for _ in $(seq 100); do [ -e "$mark" ] && break; sleep 0.05; done
sleep 0.5
t0=$(date +%s%N)
kill -TERM "$WH_PID"
sleep "$(awk -v m="$settle_ms" 'BEGIN { print m / 1000 + 0.5 }')"
if python3 scripts/load/probe.py refused "$URL" "$ca"; then
  say "drain_new_connections refused after the settle period"
else
  fail "drain: a new connection was served after the settle period"
fi
rc=0; wait "$drainer" || rc=$?
krc=0; wait "$keeper" || krc=$?
wh_rc=0; wait "$WH_PID" || wh_rc=$?
t1=$(date +%s%N)
kill -CONT "$REG_PID"
tee -a "$results" <"$work/drain.txt"
tee -a "$results" <"$work/keepalive.txt"
say "drain_exit_status $wh_rc"
say "drain_exit_after_sigterm_ms $(( (t1 - t0) / 1000000 ))"
[ "$rc" = 0 ] || fail "drain: slow requests in flight were dropped"
[ "$krc" = 0 ] || fail "drain: keep-alive requests were dropped"
[ "$wh_rc" = 0 ] || fail "drain: exit status $wh_rc"
grep -qiE 'panicked' "$work/drain.log" && fail "drain: panic in the log"

echo
if [ "$failures" -gt 0 ]; then
  say "RESULT FAIL ($failures)"
  exit 1
fi
say "RESULT OK"
