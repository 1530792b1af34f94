#!/usr/bin/env bash
# Issue 23: what a real Kueue does with each answer of pullcheck's admission check.
# Opt-in (not in CI: the Kueue build takes ~8 min cold); results in docs/kueue.md.
#
#   scripts/kueue/answers.sh
#
# Starts etcd + kube-apiserver (scripts/control-plane.sh) and Kueue v0.19.2
# (scripts/go-tools.sh kueue; its webhooks are not registered: the Jobs are created
# suspended, as Kueue's own webhook would make them), applies Kueue's CRDs server-side, a
# ResourceFlavor, our AdmissionCheck (its Active condition set as pullcheck's controller
# will), a ClusterQueue using it and a LocalQueue. Then for each answer (Ready, Retry,
# Rejected) one Job: wait for its Workload to reserve quota with our check Pending, apply the
# answer to workloads/status server-side with force as pullcheck's field manager (the body
# src/kueue's admission_check_apply builds), and check what Kueue did.
# Writes Kueue's Workloads to $OUT (default /tmp/pullcheck-kueue-answers). Exit 0: every
# expectation held; 1: one did not (the line says which).
# Kueue needs /etc/kueue/metrics/certs and /visibility (fixed paths in v0.19.2): run as root.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-/tmp/pullcheck-kueue-answers}
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
log() { printf '[kueue-answers] %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pullcheck-kueue.XXXXXX")
work=$WORK
# shellcheck source=scripts/kueue/lib.sh
. "$HERE/lib.sh"
cleanup() { kueue_stop; rm -rf "$WORK"; }
trap cleanup EXIT
kueue_start

kubectl apply -f "$HERE/queues.yaml" >/dev/null
inactive=$(kubectl get clusterqueue gpu -o jsonpath='{.status.conditions[?(@.type=="Active")].reason}')
for _ in $(seq 20); do [ -n "$inactive" ] && break; sleep 0.5
  inactive=$(kubectl get clusterqueue gpu -o jsonpath='{.status.conditions[?(@.type=="Active")].reason}'); done
[ "$inactive" = AdmissionCheckInactive ] || fail "ClusterQueue Active reason before the check is active: '$inactive', want AdmissionCheckInactive"
log "ClusterQueue inactive while the AdmissionCheck has no Active condition: $inactive"
kubectl patch admissioncheck image-check --subresource=status --type=merge -p \
  "{\"status\":{\"conditions\":[{\"type\":\"Active\",\"status\":\"True\",\"reason\":\"Active\",\"message\":\"pullcheck answers\",\"lastTransitionTime\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"observedGeneration\":1}]}}" >/dev/null

mkdir -p "$OUT"
# answer JOB STATE MESSAGE: create the Job, wait for its Workload's quota, apply the answer.
answer() {
  local job=$1 state=$2 message=$3 wl rv
  sed "s/@NAME@/$job/" "$HERE/job.yaml" | kubectl apply -f - >/dev/null
  for _ in $(seq 40); do
    wl=$(wl_of team-a "$job")
    [ -n "$wl" ] && [ "$(wl_cond team-a "$wl" QuotaReserved status)" = True ] && break
    sleep 0.5
  done
  [ -n "$wl" ] || fail "$job: no Workload"
  kubectl get workload -n team-a "$wl" -o json > "$OUT/$job-pending.json"
  rv=$(kubectl get workload -n team-a "$wl" -o jsonpath='{.metadata.resourceVersion}')
  local requeue=""
  [ "$state" = Retry ] && requeue=',"requeueAfterSeconds":30'
  printf '{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"Workload","metadata":{"name":"%s","namespace":"team-a","resourceVersion":"%s"},"status":{"admissionChecks":[{"name":"image-check","state":"%s","message":"%s","lastTransitionTime":"%s"%s}]}}' \
    "$wl" "$rv" "$state" "$message" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$requeue" > "$work/apply.json"
  kubectl apply --server-side --subresource=status --force-conflicts \
    --field-manager=pullcheck-image-check -f "$work/apply.json" >/dev/null
  sleep 3
  kubectl get workload -n team-a "$wl" -o json > "$OUT/$job-after.json"
  echo "$wl"
}
cond() { wl_cond team-a "$@"; }

wl=$(answer rejected Rejected "r.example/app:nope: not_found (pullcheck)")
[ "$(kubectl get workload -n team-a "$wl" -o jsonpath='{.spec.active}')" = false ] || fail "Rejected: spec.active is not false"
[ "$(cond "$wl" Evicted reason)" = DeactivatedDueToAdmissionCheck ] || fail "Rejected: Evicted reason '$(cond "$wl" Evicted reason)'"
[ "$(cond "$wl" QuotaReserved status)" = False ] || fail "Rejected: quota still reserved"
[ "$(kubectl get job -n team-a rejected -o jsonpath='{.spec.suspend}')" = true ] || fail "Rejected: the Job is not suspended"
log "Rejected: deactivated (spec.active=false), evicted ($(cond "$wl" Evicted message)), quota released, Job suspended"

wl=$(answer retry Retry "r.example/app:v1: transient; asking again in 30s (pullcheck)")
# Not asserted yet: on 2026-12-02 the quota stayed reserved 15 s after a Retry in this
# harness (no Evicted condition), though a manual run saw it released; see docs/kueue.md.
for _ in $(seq 30); do [ "$(cond "$wl" QuotaReserved status)" = False ] && break; sleep 0.5; done
log "Retry (recorded, not asserted): QuotaReserved=$(cond "$wl" QuotaReserved status), Evicted=$(cond "$wl" Evicted reason), requeueAt=$(kubectl get workload -n team-a "$wl" -o jsonpath='{.status.requeueState.requeueAt}')"

wl=$(answer ready Ready "3 images pullable (pullcheck)")
[ "$(cond "$wl" Admitted status)" = True ] || fail "Ready: not admitted"
[ "$(kubectl get job -n team-a ready -o jsonpath='{.spec.suspend}')" = false ] || fail "Ready: the Job is still suspended"
log "Ready: admitted, Job unsuspended"
log "all expectations held; Workloads in $OUT"
