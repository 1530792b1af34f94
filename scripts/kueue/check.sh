#!/usr/bin/env bash
# Issue 23: pullcheck's admission check (`pullcheck webhook --kueue-admission-check`)
# against a real Kueue v0.19.2, Jobs timed from `kubectl create`.
# Opt-in (not in CI: the Kueue build takes ~8 min cold); results in docs/kueue.md.
#
#   scripts/kueue/check.sh            # as root (Kueue's fixed certificate paths)
#
# The real Kueue of scripts/kueue/lib.sh, a real docker-registry on loopback with app:v1
# (one linux/amd64 manifest) and app:amd64-only (an index with only linux/amd64), the
# queues of check-queues.yaml, and pullcheck's webhook with the admission check on
# (target/debug/pullcheck unless PULLCHECK_BIN is set), reading the cluster from the
# control plane's kubeconfig. No kubelet: "0 pods" holds by construction here; what is
# measured is Kueue's decision and the quota it holds. Scenarios:
#   a  missing tag                    → Rejected, Job suspended and deactivated, quota 0
#   b  present tag                    → Admitted; the same Job on a queue without the check
#   f  amd64-only index, arm64 flavor → Rejected, platform_missing
#   c  registry down at create, up 30 s later → Retry, then Ready and Admitted
# Prints one result line per scenario (`RESULT name seconds detail`) and writes them to
# $OUT/results.tsv (default /tmp/pullcheck-kueue-check). Exit 0: every expectation held.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/pullcheck-kueue-check}
PULLCHECK_BIN=${PULLCHECK_BIN:-$ROOT/target/debug/pullcheck}
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
log() { printf '[kueue-check] %s\n' "$*" >&2; }
fail() {
  log "FAILED: $*"
  if [ -n "${WORK:-}" ] && [ -f "$WORK/pullcheck.log" ]; then
    log "pullcheck log (last 15 lines):"; tail -15 "$WORK/pullcheck.log" >&2
    kubectl get workloads -n team-a -o yaml > "$OUT/workloads-at-failure.yaml" 2>/dev/null || true
    log "Workloads at the failure: $OUT/workloads-at-failure.yaml"
  fi
  exit 1
}
[ -x "$PULLCHECK_BIN" ] || fail "no $PULLCHECK_BIN: cargo build first, or set PULLCHECK_BIN"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pullcheck-kueue.XXXXXX")
# shellcheck source=scripts/kueue/lib.sh
. "$HERE/lib.sh"
PC_PID=
cleanup() {
  [ -z "$PC_PID" ] || kill "$PC_PID" 2>/dev/null || true
  [ -z "${REG_PID:-}" ] || kill "$REG_PID" 2>/dev/null || true
  kueue_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
kueue_start
mkdir -p "$OUT"; : > "$OUT/results.tsv"

reg_port=$(free_port)
start_registry "$WORK/registry" "$reg_port"
REG=127.0.0.1:$reg_port
push_image "$WORK/image" "$REG/app:v1"
# An index with only the linux/amd64 manifest, beside it in the same repository.
digest=$(curl -fsS -I -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$REG/v2/app/manifests/v1" | tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p')
size=$(curl -fsS -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$REG/v2/app/manifests/v1" | wc -c)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"amd64","os":"linux"}}]}' \
  "$digest" "$size" > "$WORK/index.json"
curl -fsS -X PUT -H 'Content-Type: application/vnd.oci.image.index.v1+json' --data-binary "@$WORK/index.json" \
  "http://$REG/v2/app/manifests/amd64-only" >/dev/null
log "registry at $REG: app:v1 ($digest), app:amd64-only"

kubectl apply -f "$HERE/check-queues.yaml" >/dev/null
listen=$(free_port)
RUST_LOG=pullcheck=info "$PULLCHECK_BIN" webhook --listen "127.0.0.1:$listen" \
  --tls-cert "$WORK/tls/server.crt" --tls-key "$WORK/tls/server.key" \
  --kubeconfig "$KUBECONFIG" --kueue-admission-check \
  --insecure-registry "$REG" --allow-loopback-registries \
  --inject-image "$REG/app:v1" > "$WORK/pullcheck.log" 2>&1 &
PC_PID=$!

# The AdmissionCheck gets its Active condition from pullcheck; the ClusterQueues follow.
for _ in $(seq 60); do
  [ "$(kubectl get clusterqueue checked-amd -o jsonpath='{.status.conditions[?(@.type=="Active")].status}')" = True ] && break
  sleep 0.5
done
[ "$(kubectl get admissioncheck image-check -o jsonpath='{.status.conditions[?(@.type=="Active")].status}')" = True ] \
  || { tail -20 "$WORK/pullcheck.log" >&2; fail "the AdmissionCheck is not Active"; }
[ "$(kubectl get clusterqueue checked-amd -o jsonpath='{.status.conditions[?(@.type=="Active")].status}')" = True ] \
  || fail "ClusterQueue checked-amd not Active"
log "AdmissionCheck Active (set by pullcheck); ClusterQueues active"

# job NAME QUEUE IMAGE: create it; echo the create time (epoch seconds, ns precision).
job() {
  sed "s|@NAME@|$1|; s|@QUEUE@|$2|; s|@IMAGE@|$3|" "$HERE/check-job.yaml" | kubectl create -f - >/dev/null
  date +%s.%N
}
# check_state WL: our entry's state.
check_state() { kubectl get workload -n team-a "$1" -o jsonpath='{.status.admissionChecks[?(@.name=="image-check")].state}'; }
# wait_for WHAT SECONDS CMD...: until CMD succeeds; fails after SECONDS.
wait_for() {
  local what=$1 within=$2; shift 2
  local end=$((SECONDS + within))
  until "$@"; do [ "$SECONDS" -lt "$end" ] || fail "timed out: $what"; sleep 0.2; done
}
wl_for() { local w; w=$(wl_of team-a "$1"); [ -n "$w" ] && echo "$w"; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(date +%s.%N)"; }
result() { printf 'RESULT %s %s %s\n' "$1" "$2" "$3"; printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$OUT/results.tsv"; }
usage_of() { kubectl get clusterqueue "$1" -o jsonpath='{.status.flavorsReservation[0].resources[?(@.name=="example.com/gpu")].total}'; }

# (a) missing tag
t=$(job missing checked-amd "$REG/app:nope")
wait_for "missing: a Workload" 20 wl_for missing >/dev/null
wl=$(wl_for missing)
is_rejected() { [ "$(wl_cond team-a "$wl" Evicted reason)" = DeactivatedDueToAdmissionCheck ]; }
wait_for "missing: Rejected" 30 is_rejected
secs=$(since "$t")
[ "$(kubectl get workload -n team-a "$wl" -o jsonpath='{.spec.active}')" = false ] || fail "missing: spec.active is not false"
[ "$(kubectl get job -n team-a missing -o jsonpath='{.spec.suspend}')" = true ] || fail "missing: the Job is not suspended"
msg=$(wl_cond team-a "$wl" Evicted message)
case $msg in *"not_found"*) ;; *) fail "missing: Evicted message without not_found: $msg" ;; esac
quota_zero() { [ "$(usage_of checked-amd)" = 0 ]; }
wait_for "missing: quota back to 0" 10 quota_zero
[ "$(kubectl get pods -n team-a -o name | wc -l)" = 0 ] || fail "missing: pods exist"
result a-missing "$secs" "Rejected; deactivated; Job suspended; gpu reservation $(usage_of checked-amd); message: $msg"

# (b) present tag, with and without the check
t=$(job present checked-amd "$REG/app:v1")
wait_for "present: a Workload" 20 wl_for present >/dev/null
wl=$(wl_for present)
is_admitted() { [ "$(wl_cond team-a "$wl" Admitted status)" = True ]; }
wait_for "present: Admitted" 30 is_admitted
secs=$(since "$t")
[ "$(kubectl get job -n team-a present -o jsonpath='{.spec.suspend}')" = false ] || fail "present: the Job is still suspended"
result b-present "$secs" "Admitted, Job unsuspended; check: $(kubectl get workload -n team-a "$wl" -o jsonpath='{.status.admissionChecks[0].message}')"
t=$(job plain plain-amd "$REG/app:v1")
wait_for "plain: a Workload" 20 wl_for plain >/dev/null
wl=$(wl_for plain)
wait_for "plain: Admitted" 30 is_admitted
result b-no-check "$(since "$t")" "Admitted without an admission check (same run)"

# (f) platform from the flavor
t=$(job platform checked-arm "$REG/app:amd64-only")
wait_for "platform: a Workload" 20 wl_for platform >/dev/null
wl=$(wl_for platform)
wait_for "platform: Rejected" 30 is_rejected
msg=$(wl_cond team-a "$wl" Evicted message)
case $msg in *"platform_missing"*) ;; *) fail "platform: Evicted message without platform_missing: $msg" ;; esac
result f-platform "$(since "$t")" "Rejected on the arm64 flavor; message: $msg"

# (c) registry down at create, back 30 s later. Its own tag: app:v1's pullable verdict is
# in pullcheck's cache (--cache-positive-ttl) and would answer Ready without asking.
skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false "docker://$REG/app:v1" "docker://$REG/app:flaky"
kill "$REG_PID"; wait "$REG_PID" 2>/dev/null || true; REG_PID=
t=$(job flaky checked-amd "$REG/app:flaky")
wait_for "flaky: a Workload" 20 wl_for flaky >/dev/null
wl=$(wl_for flaky)
saw_retry() { kubectl get events -n team-a --field-selector "involvedObject.name=$wl" -o jsonpath='{.items[*].message}' | grep -q 'asking again' ||
  [ "$(check_state "$wl")" = Retry ]; }
wait_for "flaky: Retry" 40 saw_retry
retry_at=$(since "$t")
log "flaky: Retry after ${retry_at}s; registry back in 30 s"
sleep 30
docker-registry serve "$WORK/registry/config.yml" >>"$WORK/registry/registry.log" 2>&1 &
REG_PID=$!
wait_for "flaky: Admitted" 180 is_admitted
[ "$(kubectl get workload -n team-a "$wl" -o jsonpath='{.spec.active}')" != false ] || fail "flaky: deactivated"
# Kueue sets status.requeueState only when it backs a workload off; empty is said, not printed blank.
requeues=$(kubectl get workload -n team-a "$wl" -o jsonpath='{.status.requeueState.count}')
result c-registry-down "$(since "$t")" "Retry at ${retry_at}s, Admitted after the registry came back; requeueState.count: ${requeues:-unset}"
cp "$WORK/pullcheck.log" "$OUT/pullcheck.log"
log "all expectations held; $OUT/results.tsv"
