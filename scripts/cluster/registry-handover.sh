#!/usr/bin/env bash
# Issue 20 section 1 on the real node: the webhook's --insecure-registry and --ca-file reach
# the init container it injects (annotation pullcheck.io/registry-config), on pod-network
# Jobs. Needs the cluster up (scripts/cluster.sh up; PULLCHECK_CLUSTER_NO_PULLCHECK_IMAGE=1
# is enough: this script pushes its own pullcheck image from PC).
#
#   PC=target/x86_64-unknown-linux-musl/debug/pullcheck scripts/cluster/registry-handover.sh
#
# Two registries on the bridge's address 10.244.231.1 (pcbr0, the pods' subnet: the pod
# network namespace has a route to it and none to the node's 127.0.0.1 or 10.244.230.1);
# containerd and the webhook, on the host, reach it as a local address. A plain-HTTP one and a TLS one whose certificate comes from a CA of its own;
# containerd gets hosts.toml for both (server http://…, and ca = the CA). The webhook runs
# with --insecure-registry for the first and --ca-file for the second, and nothing else
# about them (no --inject-check-arg); --allow-loopback-registries and --insecure-registry for
# the infra registry on 127.0.0.1 are for the validating review of the pullcheck image. Jobs: present image on each (Complete expected, the
# init container passing), a missing tag on each (Failed in seconds by podFailurePolicy,
# exit 11), a hostNetwork Job (Complete too), and a present image on the plain-HTTP
# registry injected by `pullcheck inject`
# without the hand-over (the bug: exit 20, Count, until backoffLimit).
# Output: one line per Job: NAME OUTCOME SECONDS INIT_EXIT, then the stored annotation.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh" # free_port, make_tls
log() { printf '[registry-handover] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

PC=${PC:-$ROOT/target/x86_64-unknown-linux-musl/debug/pullcheck}
[ -x "$PC" ] || die "$PC missing (cargo build --target x86_64-unknown-linux-musl)"
eval "$("$ROOT/scripts/cluster.sh" env)"
K=(kubectl)
W=${HANDOVER_WORK:-/tmp/pullcheck-handover}
ADDR=10.244.231.1
rm -rf "$W"; mkdir -p "$W"
PIDS=()
cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  "${K[@]}" delete mutatingwebhookconfiguration,validatingwebhookconfiguration pullcheck-handover --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$PULLCHECK_CLUSTER_DIR/containerd/certs.d/$ADDR:"* 2>/dev/null || true
  exit $rc
}
trap cleanup EXIT

# ---- the pullcheck image, from PC ----
"$ROOT/scripts/build-image.sh" --out "$W/pullcheck-oci" --push "$PULLCHECK_INFRA_REGISTRY/pullcheck/handover" \
  --dest-insecure "$PC" >"$W/image.txt"
PC_IMAGE=$(sed -n 's/^pushed: *//p' "$W/image.txt")
[ -n "$PC_IMAGE" ] || die "no image pushed ($W/image.txt)"
log "pullcheck image $PC_IMAGE"

# ---- registries on the node address ----
reg() { # NAME PORT [TLSDIR]
  local d=$W/registry-$1
  mkdir -p "$d"
  {
    echo "version: 0.1"
    echo "log: { level: error }"
    echo "storage: { filesystem: { rootdirectory: $d/storage } }"
    if [ -n "${3:-}" ]; then
      echo "http: { addr: $ADDR:$2, tls: { certificate: $3/server.crt, key: $3/server.key } }"
    else
      echo "http: { addr: $ADDR:$2 }"
    fi
  } >"$d/config.yml"
  docker-registry serve "$d/config.yml" >"$d/registry.log" 2>&1 &
  PIDS+=($!)
}
tls=$W/tls
mkdir -p "$tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=pullcheck-handover-ca \
  -keyout "$tls/ca.key" -out "$tls/ca.crt" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj "/CN=$ADDR" -keyout "$tls/server.key" -out "$tls/server.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:%s\n' "$ADDR" >"$tls/ext.cnf"
openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial \
  -days 2 -extfile "$tls/ext.cnf" -out "$tls/server.crt" >/dev/null 2>&1
PLAIN=$ADDR:$(free_port)
PRIV=$ADDR:$(free_port)
reg plain "${PLAIN#*:}"
reg private "${PRIV#*:}" "$tls"
for _ in $(seq 100); do
  curl -fsS "http://$PLAIN/v2/" >/dev/null 2>&1 && curl -fsS --cacert "$tls/ca.crt" "https://$PRIV/v2/" >/dev/null 2>&1 && break
  sleep 0.1
done
src="docker://$PULLCHECK_INFRA_REGISTRY/work/app:v1"
skopeo copy -q --src-tls-verify=false --dest-tls-verify=false "$src" "docker://$PLAIN/ml/trainer:v1"
mkdir -p "$W/certs"; cp "$tls/ca.crt" "$W/certs/ca.crt"
skopeo copy -q --src-tls-verify=false --dest-cert-dir "$W/certs" "$src" "docker://$PRIV/ml/trainer:v1"
# containerd (the node's runtime) is configured for both, as an operator would
certs=$PULLCHECK_CLUSTER_DIR/containerd/certs.d
mkdir -p "$certs/$PLAIN" "$certs/$PRIV"
printf 'server = "http://%s"\n' "$PLAIN" >"$certs/$PLAIN/hosts.toml"
cp "$tls/ca.crt" "$certs/$PRIV/ca.crt"
printf 'server = "https://%s"\n[host."https://%s"]\n  capabilities = ["pull", "resolve"]\n  ca = "%s"\n' \
  "$PRIV" "$PRIV" "$certs/$PRIV/ca.crt" >"$certs/$PRIV/hosts.toml"
log "registries: plain http://$PLAIN, private CA https://$PRIV"

# ---- the webhook: its own settings only ----
wt=$W/webhook-tls
make_tls "$wt"
port=$(free_port)
setsid "$PC" webhook --listen "127.0.0.1:$port" --tls-cert "$wt/server.crt" --tls-key "$wt/server.key" \
  --insecure-registry "$PLAIN" --ca-file "$tls/ca.crt" --fail-fast --transient count \
  --allow-loopback-registries --insecure-registry "$PULLCHECK_INFRA_REGISTRY" \
  --inject-image "$PC_IMAGE" </dev/null >"$W/webhook.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do curl -fsS --cacert "$wt/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
for kind in Mutating Validating; do
  path=$([ $kind = Mutating ] && echo mutate || echo validate)
  "${K[@]}" apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ${kind}WebhookConfiguration
metadata: {name: pullcheck-handover}
webhooks:
  - name: $path.pullcheck.io
    admissionReviewVersions: ["v1"]
    sideEffects: None
    failurePolicy: Ignore
    timeoutSeconds: 10
    clientConfig:
      url: https://127.0.0.1:$port/$path
      caBundle: $(base64 -w0 <"$wt/ca.crt")
    namespaceSelector: {matchLabels: {pullcheck-scenario: handover}}
    rules: [{apiGroups: ["batch"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["jobs"]}]
EOF
done
sleep 2 # the apiserver's webhook configuration informer

job() { # NS NAME IMAGE [HOST_NETWORK]
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: $2, namespace: $1}
spec:
  backoffLimit: 2
  activeDeadlineSeconds: 300
  template:
    spec:
      restartPolicy: Never
      hostNetwork: ${4:-false}
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers: [{name: main, image: "$3"}]
EOF
}
wait_job() { # NS NAME -> "OUTCOME SECONDS INIT_EXIT"
  local t0=$SECONDS c
  while :; do
    c=$("${K[@]}" -n "$1" get job "$2" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type} {end}' 2>/dev/null || true)
    case " $c " in *" Complete "* | *" Failed "*) break ;; esac
    [ $((SECONDS - t0)) -lt 240 ] || { c="Timeout"; break; }
    sleep 0.5
  done
  local code
  code=$("${K[@]}" -n "$1" get pods -l job-name="$2" -o jsonpath='{.items[0].status.initContainerStatuses[0].state.terminated.exitCode}' 2>/dev/null || true)
  case " $c " in *" Complete "*) c=Complete ;; *" Failed "*) c=Failed ;; esac
  echo "$c $((SECONDS - t0)) ${code:--}"
}

ns=handover
"${K[@]}" delete namespace $ns --ignore-not-found --wait=true >/dev/null
"${K[@]}" create namespace $ns >/dev/null
"${K[@]}" label namespace $ns pullcheck-scenario=handover >/dev/null
"${K[@]}" -n $ns create serviceaccount default >/dev/null 2>&1 || true
for spec in "plain-present $PLAIN/ml/trainer:v1" "private-present $PRIV/ml/trainer:v1" \
  "private-hostnetwork $PRIV/ml/trainer:v1 true" \
  "plain-missing $PLAIN/ml/trainer:no-such-tag" "private-missing $PRIV/ml/trainer:no-such-tag"; do
  read -r -a fields <<<"$spec"
  set -- "${fields[@]}"
  # A missing tag is denied by the validating review: to see the node's verdict, the Job is
  # created with the validating configuration out of the way (only mutated).
  case $1 in *missing) "${K[@]}" delete validatingwebhookconfiguration pullcheck-handover >/dev/null 2>&1 || true ;; esac
  job $ns "$1" "$2" "${3:-false}" | "${K[@]}" create -f - 2>"$W/$1.create.txt" >/dev/null || { echo "$1 refused: $(cat "$W/$1.create.txt")"; continue; }
  echo "$1 $(wait_job $ns "$1")"
done
"${K[@]}" -n $ns get job plain-present -o json >"$W/plain-present.json"
"${K[@]}" -n $ns get job private-present -o json >"$W/private-present.json"

# Without the hand-over (the bug): `pullcheck inject` as before, in a namespace the webhook skips.
ns2=handover-off
"${K[@]}" delete namespace $ns2 --ignore-not-found --wait=true >/dev/null
"${K[@]}" create namespace $ns2 >/dev/null
"${K[@]}" -n $ns2 create serviceaccount default >/dev/null 2>&1 || true
job $ns2 plain-without "$PLAIN/ml/trainer:v1" | "$PC" inject -f - --fail-fast --transient count --image "$PC_IMAGE" --check-arg=--timeout=10 2>/dev/null |
  "${K[@]}" create -f - >/dev/null
echo "plain-without-hand-over $(wait_job $ns2 plain-without)"
echo "annotation (plain-present): $(jq -r '.spec.template.metadata.annotations["pullcheck.io/registry-config"]' "$W/plain-present.json")"
echo "annotation (private-present): $(jq -r '.spec.template.metadata.annotations["pullcheck.io/registry-config"]' "$W/private-present.json" | cut -c1-80)…"
