#!/usr/bin/env bash
# The Helm chart, `pullcheck webhook` and `pullcheck watch` against a real kube-apiserver.
#
#   scripts/apiserver-e2e.sh [cargo test filter/args...]
#
# 1. installs the test dependencies (scripts/deps.sh: docker-registry, openssl, ...);
# 2. builds (once, cached) etcd, kube-apiserver, kubectl and helm (scripts/go-tools.sh);
# 3. starts etcd + kube-apiserver on loopback (scripts/control-plane.sh) in a private state
#    directory, and a second one with --feature-gates=ContainerRestartRules=false (for the
#    webhook's restart-rules probe; PULLCHECK_CP_GATE_OFF_DIR/_SERVER), stopped on exit;
# 4. runs tests/integration/apiserver.rs (cargo test --test integration apiserver::) with
#    PULLCHECK_APISERVER_E2E=1, so a missing piece fails instead of skipping.
#
# Exit status: cargo's. The last lines are cargo's "test result: ... N passed; M failed".
# On failure the control plane's logs are printed (kube-apiserver.log tail).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[apiserver-e2e] %s\n' "$*" >&2; }
t0=$SECONDS

scripts/deps.sh
bin=$(scripts/go-tools.sh etcd kube-apiserver kubectl helm)
export PATH="$bin:$PATH"
log "tools ready in $((SECONDS - t0))s: $(helm version --short), kubectl $(kubectl version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)".*/\1/p' | head -1)"

# Kueue's CRDs (tests/integration/apiserver/kueue.rs): the pinned module's
# config/components/crd/bases, downloaded through the module proxy, nothing built.
KUEUE_VERSION=$(scripts/go-tools.sh --versions | sed -n 's/^kueue[[:space:]=:]*//p' | head -1)
kueue_dir=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kueue@${KUEUE_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
export PULLCHECK_KUEUE_CRDS="$kueue_dir/config/components/crd/bases"
[ -d "$PULLCHECK_KUEUE_CRDS" ] || { log "no Kueue CRDs under $kueue_dir"; exit 1; }

# Build the test binary before the control plane runs (no apiserver idling meanwhile).
cargo test --locked --test integration --no-run >&2

state=$(mktemp -d "${TMPDIR:-/tmp}/pullcheck-e2e.XXXXXX")
export PULLCHECK_CP_DIR="$state/cp"
export PULLCHECK_CP_BIN="$bin"
cleanup() {
  local rc=$?
  if [ "$rc" != 0 ] && [ -f "$PULLCHECK_CP_DIR/logs/kube-apiserver.log" ]; then
    log "kube-apiserver log (last 40 lines):"
    tail -40 "$PULLCHECK_CP_DIR/logs/kube-apiserver.log" >&2 || true
  fi
  scripts/control-plane.sh stop >/dev/null 2>&1 || true
  PULLCHECK_CP_DIR="$state/cp-gate-off" scripts/control-plane.sh stop >/dev/null 2>&1 || true
  rm -rf "$state"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t1=$SECONDS
cp_env=$(scripts/control-plane.sh start) || { log "the control plane did not start"; exit 1; }
eval "$cp_env"
log "control plane up in $((SECONDS - t1))s at $PULLCHECK_CP_SERVER"
# Only its PULLCHECK_CP_* lines, renamed: KUBECONFIG and PATH stay the first one's.
cp_env=$(PULLCHECK_CP_DIR="$state/cp-gate-off" PULLCHECK_CP_APISERVER_ARGS=--feature-gates=ContainerRestartRules=false \
  scripts/control-plane.sh start) || { log "the second control plane did not start"; exit 1; }
eval "$(sed -n 's/^export PULLCHECK_CP_/export PULLCHECK_CP_GATE_OFF_/p' <<<"$cp_env")"
log "second control plane (ContainerRestartRules=false) at $PULLCHECK_CP_GATE_OFF_SERVER"

export PULLCHECK_APISERVER_E2E=1
t2=$SECONDS
cargo test --locked --test integration "${@:-apiserver::}" -- --ignored
log "tests took $((SECONDS - t2))s (total $((SECONDS - t0))s)"
