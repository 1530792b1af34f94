#!/usr/bin/env bash
# A throwaway Kubernetes control plane on loopback: etcd + kube-apiserver (no
# controller-manager, no scheduler, no kubelet), for admission-webhook tests.
#
#   eval "$(scripts/control-plane.sh start)"   # prints export lines (KUBECONFIG, ...)
#   kubectl get ns
#   scripts/control-plane.sh env               # the same export lines again
#   scripts/control-plane.sh smoke             # start if needed, namespace + dry-run Job
#   scripts/control-plane.sh status
#   scripts/control-plane.sh stop              # kill both, remove the state dir
#
# Binaries come from scripts/go-tools.sh (built and cached on first use), or from
# PULLCHECK_CP_BIN (a directory with etcd, kube-apiserver, kubectl).
# State (PKI, token file, kubeconfig, etcd data, logs, pids):
#   ${PULLCHECK_CP_DIR:-${TMPDIR:-/tmp}/pullcheck-control-plane}
# Everything listens on 127.0.0.1 only, on free ports picked at start
# (or PULLCHECK_CP_APISERVER_PORT / PULLCHECK_CP_ETCD_PORT / PULLCHECK_CP_ETCD_PEER_PORT).
# Authentication: a static token (user "pullcheck-admin", group system:masters);
# authorization: RBAC (PULLCHECK_CP_AUTHZ=AlwaysAllow to switch). Admission plugins:
# the apiserver's defaults (incl. Mutating/ValidatingAdmissionWebhook, ServiceAccount).
# Without a controller-manager no ServiceAccount "default" appears in new
# namespaces and no Job ever gets Pods: tests create the ServiceAccounts they need.
# Docs: docs/test-infrastructure.md
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE=${PULLCHECK_CP_DIR:-${TMPDIR:-/tmp}/pullcheck-control-plane}
AUTHZ=${PULLCHECK_CP_AUTHZ:-RBAC}
READY_TIMEOUT=${PULLCHECK_CP_TIMEOUT:-120}

log() { printf '[control-plane] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

bin_dir() {
  if [ -n "${PULLCHECK_CP_BIN:-}" ]; then echo "$PULLCHECK_CP_BIN"; return; fi
  "$HERE/go-tools.sh" etcd kube-apiserver kubectl
}

# shellcheck source=scripts/lib.sh
. "$HERE/lib.sh" # free_port
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# alive NAME: the pid in $STATE/NAME.pid runs the binary we started
# running NAME: the recorded process still exists. Used while a component starts: right
# after the fork its command line is still the shell's, so `alive` would misread it as dead.
running() {
  [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null
}

alive() {
  local pid
  [ -f "$STATE/$1.pid" ] || return 1
  pid=$(cat "$STATE/$1.pid")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "/$1 "
}

print_env() {
  # shellcheck disable=SC1091
  . "$STATE/env"
  cat <<EOF
export KUBECONFIG='$STATE/kubeconfig'
export PULLCHECK_CP_DIR='$STATE'
export PULLCHECK_CP_SERVER='$PULLCHECK_CP_SERVER'
export PULLCHECK_CP_TOKEN='$PULLCHECK_CP_TOKEN'
export PULLCHECK_CP_CA='$STATE/pki/ca.crt'
export PULLCHECK_CP_ETCD='$PULLCHECK_CP_ETCD'
export PATH='$PULLCHECK_CP_BIN_DIR':"\$PATH"
EOF
}

make_pki() {
  local pki=$STATE/pki
  mkdir -p "$pki"; chmod 700 "$pki"
  command -v openssl >/dev/null || die "openssl is required (apt-get install openssl)"
  # test CA + serving certificate for 127.0.0.1/localhost (so clients can verify)
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=pullcheck-test-apiserver-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" 2>/dev/null
  printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1" \
    "extendedKeyUsage=serverAuth" "keyUsage=digitalSignature,keyEncipherment" >"$pki/apiserver.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
  # ServiceAccount token signing key
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

cmd_start() {
  if alive kube-apiserver && alive etcd; then
    log "already running (state $STATE)"; print_env; return
  fi
  [ ! -d "$STATE" ] || cmd_stop
  local t0=$SECONDS bin
  bin=$(bin_dir)
  for b in etcd kube-apiserver kubectl; do [ -x "$bin/$b" ] || die "missing $bin/$b"; done
  mkdir -p "$STATE/logs"; chmod 700 "$STATE"
  make_pki
  local token; token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  printf '%s,pullcheck-admin,uid-pullcheck-admin,"system:masters"\n' "$token" >"$STATE/tokens.csv"
  chmod 600 "$STATE/tokens.csv"

  # etcd gets up to 3 tries: a picked port can still be taken before etcd binds it.
  local ec ep ap etcd_up=""
  for attempt in 1 2 3; do
    ec=${PULLCHECK_CP_ETCD_PORT:-$(free_port)}
    ep=${PULLCHECK_CP_ETCD_PEER_PORT:-$(free_port "$ec")}
    log "etcd on 127.0.0.1:$ec (peer $ep)"
    rm -rf "$STATE/etcd"
    setsid "$bin/etcd" --name pullcheck --data-dir "$STATE/etcd" \
      --listen-client-urls "http://127.0.0.1:$ec" --advertise-client-urls "http://127.0.0.1:$ec" \
      --listen-peer-urls "http://127.0.0.1:$ep" --initial-advertise-peer-urls "http://127.0.0.1:$ep" \
      --initial-cluster "pullcheck=http://127.0.0.1:$ep" --initial-cluster-state new \
      --unsafe-no-fsync --log-level warn \
      </dev/null >"$STATE/logs/etcd.log" 2>&1 &
    echo $! >"$STATE/etcd.pid"
    for _ in $(seq 1 100); do
      if ! port_free "$ec"; then etcd_up=1; break; fi
      running etcd || break
      sleep 0.1
    done
    [ -z "$etcd_up" ] || break
    if running etcd; then die "etcd not listening on 127.0.0.1:$ec after 10s (log: $STATE/logs/etcd.log)"; fi
    tail -20 "$STATE/logs/etcd.log" >&2
    if [ -z "${PULLCHECK_CP_ETCD_PORT:-}${PULLCHECK_CP_ETCD_PEER_PORT:-}" ] && [ "$attempt" -lt 3 ] &&
      grep -q 'address already in use' "$STATE/logs/etcd.log"; then
      log "etcd's port was taken meanwhile: trying other ports"
      continue
    fi
    die "etcd exited"
  done
  ap=${PULLCHECK_CP_APISERVER_PORT:-$(free_port "$ec" "$ep")}
  cat >"$STATE/env" <<EOF
PULLCHECK_CP_SERVER=https://127.0.0.1:$ap
PULLCHECK_CP_TOKEN=$token
PULLCHECK_CP_ETCD=http://127.0.0.1:$ec
PULLCHECK_CP_BIN_DIR=$bin
EOF

  # PULLCHECK_CP_APISERVER_ARGS: extra flags, split on blanks (no flag value holds one)
  local extra_args=()
  read -r -a extra_args <<<"${PULLCHECK_CP_APISERVER_ARGS:-}"
  log "kube-apiserver on https://127.0.0.1:$ap (authorization $AUTHZ)"
  setsid "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ec" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$ap" \
    --cert-dir "$STATE/pki" \
    --tls-cert-file "$STATE/pki/apiserver.crt" --tls-private-key-file "$STATE/pki/apiserver.key" \
    --client-ca-file "$STATE/pki/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$STATE/pki/sa.pub" \
    --service-account-signing-key-file "$STATE/pki/sa.key" \
    --token-auth-file "$STATE/tokens.csv" \
    --authorization-mode "$AUTHZ" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --endpoint-reconciler-type none \
    --allow-privileged=true \
    --profiling=false \
    --v="${PULLCHECK_CP_VERBOSITY:-1}" \
    "${extra_args[@]}" \
    </dev/null >"$STATE/logs/kube-apiserver.log" 2>&1 &
  echo $! >"$STATE/kube-apiserver.pid"

  "$bin/kubectl" config --kubeconfig "$STATE/kubeconfig" set-cluster pullcheck \
    --server "https://127.0.0.1:$ap" --certificate-authority "$STATE/pki/ca.crt" --embed-certs >/dev/null
  "$bin/kubectl" config --kubeconfig "$STATE/kubeconfig" set-credentials pullcheck-admin --token "$token" >/dev/null
  "$bin/kubectl" config --kubeconfig "$STATE/kubeconfig" set-context pullcheck \
    --cluster pullcheck --user pullcheck-admin --namespace default >/dev/null
  "$bin/kubectl" config --kubeconfig "$STATE/kubeconfig" use-context pullcheck >/dev/null
  chmod 600 "$STATE/kubeconfig"

  local deadline=$((SECONDS + READY_TIMEOUT))
  until "$bin/kubectl" --kubeconfig "$STATE/kubeconfig" get --raw /readyz >/dev/null 2>&1; do
    if ! running kube-apiserver; then
      tail -30 "$STATE/logs/kube-apiserver.log" >&2; die "kube-apiserver exited (log: $STATE/logs/kube-apiserver.log)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      "$bin/kubectl" --kubeconfig "$STATE/kubeconfig" get --raw '/readyz?verbose' >&2 || true
      die "kube-apiserver not ready after ${READY_TIMEOUT}s (log: $STATE/logs/kube-apiserver.log)"
    fi
    sleep 0.25
  done
  log "ready in $((SECONDS - t0))s (state $STATE)"
  print_env
}

stop_one() {
  local name=$1 pid
  alive "$name" || return 0
  pid=$(cat "$STATE/$name.pid")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do alive "$name" || return 0; sleep 0.1; done
  log "$name (pid $pid) ignored SIGTERM for 10s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_stop() {
  [ -d "$STATE" ] || { log "not running (no $STATE)"; return 0; }
  stop_one kube-apiserver
  stop_one etcd
  if [ -n "${PULLCHECK_CP_KEEP:-}" ]; then
    rm -f "$STATE"/*.pid; log "stopped; kept $STATE"
  else
    rm -rf "$STATE"; log "stopped; removed $STATE"
  fi
}

cmd_env() {
  { alive kube-apiserver && alive etcd; } || die "not running (state $STATE); run: $0 start"
  print_env
}

cmd_status() {
  local n rc=0
  for n in etcd kube-apiserver; do
    if alive "$n"; then log "$n running (pid $(cat "$STATE/$n.pid"))"; else log "$n not running"; rc=1; fi
  done
  return $rc
}

cmd_smoke() {
  local started=
  if ! { alive kube-apiserver && alive etcd; }; then cmd_start >/dev/null; started=1; fi
  # shellcheck disable=SC1091
  . "$STATE/env"
  local k=("$PULLCHECK_CP_BIN_DIR/kubectl" --server "$PULLCHECK_CP_SERVER" --token "$PULLCHECK_CP_TOKEN"
    --insecure-skip-tls-verify)
  "${k[@]}" version >&2
  "${k[@]}" create namespace pullcheck-smoke >&2
  "${k[@]}" -n pullcheck-smoke create serviceaccount default >&2
  "${k[@]}" -n pullcheck-smoke apply --dry-run=server -f - >&2 <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  name: smoke
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: registry.example/smoke:1.0
          command: ["true"]
EOF
  # and the same through the kubeconfig with CA verification
  "$PULLCHECK_CP_BIN_DIR/kubectl" --kubeconfig "$STATE/kubeconfig" get namespace pullcheck-smoke >&2
  "$PULLCHECK_CP_BIN_DIR/kubectl" --kubeconfig "$STATE/kubeconfig" delete namespace pullcheck-smoke --wait=false >&2
  log "smoke test passed"
  [ -z "$started" ] || cmd_stop
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  env) cmd_env ;;
  status) cmd_status ;;
  smoke) cmd_smoke ;;
  *) echo "usage: $0 start|stop|env|status|smoke" >&2; exit 2 ;;
esac
