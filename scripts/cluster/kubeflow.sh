#!/usr/bin/env bash
# Kubeflow training-operator v1 on the fail-fast cluster (scenarios 8, 9h-pytorch
# and 10d of tests/cluster/): scripts/cluster/kubeflow.sh start|stop
#
# - the PyTorchJob CRD from ../shared/crds (training-operator v1.9.0's);
# - training-operator (scripts/cluster/node-tools.sh training-operator, cached) running in
#   a network namespace of its own ("pcko", veth 10.244.229.1 <-> .2): its webhook server
#   listens on every interface (not configurable), so it gets an empty network of its own;
#   it reaches the apiserver (127.0.0.1 only) through scripts/cluster/tcp-forward.py on the
#   host side of the veth;
# - its cert rotation (hard-coded cert dir /tmp/k8s-webhook-server/serving-certs) is
#   satisfied with a throwaway serving cert in a private tmpfs (a private mount namespace),
#   an empty Secret it fills itself and a ValidatingWebhookConfiguration without webhooks
#   (PyTorchJobs are not validated by it here).
# Needs the cluster up (scripts/cluster.sh up). Logs: $PULLCHECK_CLUSTER_DIR/logs/training-operator.log
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
eval "$("$ROOT/scripts/cluster.sh" env)"
STATE=$PULLCHECK_CLUSTER_DIR
KF=$STATE/kubeflow
NETNS=pcko HOST_IF=pcko-h NS_IF=pcko-n HOST_IP=10.244.229.1 NS_IP=10.244.229.2
CERT_MNT=/tmp/k8s-webhook-server
CRD=${PULLCHECK_PYTORCHJOB_CRD:-$ROOT/tests/data/crds/kubeflow.org_pytorchjobs.yaml}

log() { printf '[kubeflow] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

cmd_start() {
  [ -f "$CRD" ] || die "no CRD at $CRD"
  local bin; bin=$("$HERE/node-tools.sh" training-operator)
  mkdir -p "$KF"
  kubectl apply --server-side -f "$CRD" >/dev/null
  for _ in $(seq 1 60); do
    [ "$(kubectl get crd pytorchjobs.kubeflow.org -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" = True ] && break
    sleep 0.5
  done
  kubectl create namespace kubeflow --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n kubeflow create secret generic training-operator-webhook-cert --dry-run=client -o yaml |
    kubectl apply -f - >/dev/null
  kubectl apply -f - >/dev/null <<'EOF'
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validator.training-operator.kubeflow.org
webhooks: []
EOF
  # throwaway serving cert for the operator's (unused) webhook server
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=training-operator.kubeflow.svc \
    -addext subjectAltName=DNS:training-operator.kubeflow.svc \
    -keyout "$KF/tls.key" -out "$KF/tls.crt" 2>/dev/null
  cp "$KF/tls.crt" "$KF/ca.crt"

  # network namespace + veth; the apiserver through a forwarder on the host side only
  ip netns add "$NETNS"
  ip link add "$HOST_IF" type veth peer name "$NS_IF"
  ip link set "$NS_IF" netns "$NETNS"
  ip addr add "$HOST_IP/30" dev "$HOST_IF"; ip link set "$HOST_IF" up
  ip netns exec "$NETNS" ip addr add "$NS_IP/30" dev "$NS_IF"
  ip netns exec "$NETNS" ip link set "$NS_IF" up
  ip netns exec "$NETNS" ip link set lo up
  local fport api_port
  fport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  api_port=${PULLCHECK_CP_SERVER_PORT:-$(sed -n 's#^PULLCHECK_CP_SERVER=https://127.0.0.1:##p' "$STATE/cp/env")}
  setsid python3 "$HERE/tcp-forward.py" "$HOST_IP" "$fport" 127.0.0.1 "$api_port" \
    </dev/null >"$STATE/logs/kubeflow-forward.log" 2>&1 &
  echo $! >"$KF/forward.pid"
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/$HOST_IP/$fport") 2>/dev/null && break; sleep 0.1; done
  # the operator's kubeconfig: the forwarder, verifying the apiserver cert as "localhost"
  # shellcheck disable=SC1091
  . "$STATE/cp/env"
  local kc=$KF/kubeconfig
  kubectl config --kubeconfig "$kc" set-cluster c --server "https://$HOST_IP:$fport" \
    --certificate-authority "$STATE/cp/pki/ca.crt" --embed-certs --tls-server-name localhost >/dev/null
  kubectl config --kubeconfig "$kc" set-credentials u --token "$PULLCHECK_CP_TOKEN" >/dev/null
  kubectl config --kubeconfig "$kc" set-context c --cluster c --user u >/dev/null
  kubectl config --kubeconfig "$kc" use-context c >/dev/null

  mkdir -p "$CERT_MNT"
  cat >"$KF/run.sh" <<EOF
#!/bin/sh
set -e
mount -t tmpfs -o size=1m tmpfs "$CERT_MNT"
mkdir -p "$CERT_MNT/serving-certs"
cp "$KF/tls.crt" "$KF/tls.key" "$KF/ca.crt" "$CERT_MNT/serving-certs/"
export KUBECONFIG="$kc" MY_POD_NAMESPACE=kubeflow
exec "$bin/training-operator" --enable-scheme=pytorchjob --metrics-bind-address=0 \
  --health-probe-bind-address=0 --webhook-server-port=9443 --zap-log-level=info
EOF
  chmod +x "$KF/run.sh"
  setsid ip netns exec "$NETNS" unshare -m --propagation private "$KF/run.sh" \
    </dev/null >"$STATE/logs/training-operator.log" 2>&1 &
  echo $! >"$KF/operator.pid"
  for _ in $(seq 1 90); do
    grep -q 'Starting workers.*pytorchjob' "$STATE/logs/training-operator.log" 2>/dev/null && break
    kill -0 "$(cat "$KF/operator.pid")" 2>/dev/null || { tail -20 "$STATE/logs/training-operator.log" >&2; die "training-operator exited"; }
    sleep 1
  done
  grep -q 'Starting workers.*pytorchjob' "$STATE/logs/training-operator.log" ||
    { tail -20 "$STATE/logs/training-operator.log" >&2; die "training-operator not ready after 90s"; }
  log "training-operator $("$HERE/node-tools.sh" --versions | awk '$1 == "training-operator" {print $2}') running in netns $NETNS (log $STATE/logs/training-operator.log)"
}

cmd_stop() {
  local f pid
  for f in operator forward; do
    [ -f "$KF/$f.pid" ] || continue
    pid=$(cat "$KF/$f.pid")
    kill -TERM "$pid" 2>/dev/null || true
    # the operator runs under ip netns exec / unshare: end the process in the namespace too
    sleep 1; kill -KILL "$pid" 2>/dev/null || true
    rm -f "$KF/$f.pid"
  done
  for pid in $(ip netns pids "$NETNS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  ip link delete "$HOST_IF" 2>/dev/null || true
  ip netns delete "$NETNS" 2>/dev/null || true
  rmdir "$CERT_MNT" 2>/dev/null || true
  kubectl delete validatingwebhookconfiguration validator.training-operator.kubeflow.org --ignore-not-found >/dev/null 2>&1 || true
  log "stopped"
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
