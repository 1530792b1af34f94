# shellcheck shell=bash
# The real Kueue of scripts/kueue/*.sh: etcd + kube-apiserver (scripts/control-plane.sh)
# and Kueue v0.19.2 (scripts/go-tools.sh kueue) with its CRDs applied server-side. Kueue's
# webhooks are not registered: the Jobs are created suspended, as its webhook would make
# them. Kueue needs /etc/kueue/metrics/certs and /visibility (fixed paths in v0.19.2): run
# as root. Source it after setting ROOT, WORK and log/fail; call kueue_start; kueue_stop
# in the EXIT trap.

KUEUE_PID=

# kueue_start: tools on PATH, control plane up (KUBECONFIG exported), Kueue ready.
kueue_start() {
  local bin kueue_dir health webhook
  bin=$("$ROOT/scripts/go-tools.sh" etcd kube-apiserver kubectl kueue)
  export PATH="$bin:$PATH"
  kueue_dir=$(GOFLAGS=-mod=mod go mod download -json sigs.k8s.io/kueue@v0.19.2 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$kueue_dir/config/components/crd/bases" ] || fail "no Kueue CRDs under $kueue_dir"
  export PULLCHECK_CP_DIR="$WORK/cp"
  eval "$("$ROOT/scripts/control-plane.sh" start)"
  kubectl apply --server-side -f "$kueue_dir/config/components/crd/bases/" >/dev/null
  make_tls "$WORK/tls"
  mkdir -p "$WORK/certs" /etc/kueue/metrics/certs /visibility
  for d in "$WORK/certs" /etc/kueue/metrics/certs /visibility; do
    cp "$WORK/tls/server.crt" "$d/tls.crt"; cp "$WORK/tls/server.key" "$d/tls.key"
  done
  health=$(free_port); webhook=$(free_port)
  cat > "$WORK/kueue-config.yaml" <<YAML
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {healthProbeBindAddress: "127.0.0.1:$health"}
metrics: {bindAddress: "0"}
webhook: {port: $webhook, host: 127.0.0.1, certDir: $WORK/certs}
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
integrations: {frameworks: ["batch/job"]}
YAML
  kubectl create namespace kueue-system >/dev/null
  kueue --config "$WORK/kueue-config.yaml" --kubeconfig "$KUBECONFIG" > "$WORK/kueue.log" 2>&1 &
  KUEUE_PID=$!
  for _ in $(seq 60); do curl -fs "http://127.0.0.1:$health/readyz" >/dev/null 2>&1 && break; sleep 1; done
  curl -fs "http://127.0.0.1:$health/readyz" >/dev/null || { tail -20 "$WORK/kueue.log" >&2; fail "Kueue not ready"; }
  log "Kueue ready"
}

kueue_stop() {
  [ -z "$KUEUE_PID" ] || kill "$KUEUE_PID" 2>/dev/null || true
  "$ROOT/scripts/control-plane.sh" stop >/dev/null 2>&1 || true
}

# wl_of NS JOB: the name of the Job's Workload (empty while there is none).
wl_of() {
  kubectl get workloads -n "$1" -o jsonpath="{.items[?(@.metadata.ownerReferences[0].name==\"$2\")].metadata.name}"
}

# wl_cond NS WL TYPE FIELD: a Workload condition's field.
wl_cond() {
  kubectl get workload -n "$1" "$2" -o jsonpath="{.status.conditions[?(@.type==\"$3\")].$4}"
}
