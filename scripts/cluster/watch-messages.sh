#!/usr/bin/env bash
# Records the kubelet's real image-pull failure messages, for `pullcheck watch`'s classifier
# tests (src/watch/classify/tests.rs): one pod per scenario (restartPolicy Never, no
# pullcheck), its containerStatuses[].state.waiting {reason, message} for ErrImagePull and
# the ImagePullBackOff after it, and its Events.
#
#   scripts/cluster.sh up && eval "$(scripts/cluster.sh env)"
#   scripts/cluster/watch-messages.sh [OUTDIR]     # default tests/data/watch/kubelet-<v>-containerd-<v>
#   scripts/cluster.sh down
#
# Besides the cluster's workload registry it starts, on loopback: a docker-registry with
# htpasswd basic auth, one with a self-signed TLS certificate the node does not trust, and
# a scripted HTTP server that answers 429 or 503 (the only scripted one); a port with
# nothing listening stands for a registry that is down, and two such registries get a
# mirror (the workload registry; the basic-auth one) in their hosts.toml. hosts.toml files for them go into
# the cluster's containerd certs.d and are removed at the end, as are the helpers.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
log() { printf '[watch-messages] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

STATE=${PULLCHECK_CLUSTER_DIR:?run: eval "\$(scripts/cluster.sh env)"}
WORK=${PULLCHECK_WORK_REGISTRY:?}
command -v kubectl >/dev/null || die "kubectl not on PATH (eval \"\$(scripts/cluster.sh env)\")"
KUBELET_V=$("$(dirname "$(command -v kubectl)")/kubelet" --version | awk '{print $2}')
CONTAINERD_V=$("$(dirname "$(command -v kubectl)")/containerd" --version | awk '{print $3}')
OUT=${1:-$ROOT/tests/data/watch/kubelet-${KUBELET_V#v}-containerd-${CONTAINERD_V#v}}
NS=watch-messages
W=$(mktemp -d "$STATE/.watch-messages.XXXXXX")
CERTS=$STATE/containerd/certs.d
PIDS=()
HOSTS=()

cleanup() {
  local p h
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for h in "${HOSTS[@]}"; do rm -rf "${CERTS:?}/$h"; done
  kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT

hosts_toml() { # HOST SCHEME
  mkdir -p "$CERTS/$1"
  printf 'server = "%s://%s"\n\n[host."%s://%s"]\n  capabilities = ["pull", "resolve"]\n' "$2" "$1" "$2" "$1" \
    >"$CERTS/$1/hosts.toml"
  HOSTS+=("$1")
}

# basic-auth registry (user u, password right)
AUTH_PORT=$(free_port)
mkdir -p "$W/auth"
htpasswd -Bbn u right >"$W/auth/htpasswd"
cat >"$W/auth/config.yml" <<EOF
version: 0.1
log: { level: error }
storage: { filesystem: { rootdirectory: $W/auth/storage } }
http: { addr: 127.0.0.1:$AUTH_PORT }
auth: { htpasswd: { realm: pullcheck-watch, path: $W/auth/htpasswd } }
EOF
docker-registry serve "$W/auth/config.yml" >"$W/auth/registry.log" 2>&1 &
PIDS+=($!)
AUTH=127.0.0.1:$AUTH_PORT
hosts_toml "$AUTH" http

# TLS registry whose CA the node does not have
TLS_PORT=$(free_port)
make_tls "$W/tls"
start_registry "$W/tls-reg" "$TLS_PORT" "$W/tls" || die "TLS registry did not start"
PIDS+=("$REG_PID")
TLS=127.0.0.1:$TLS_PORT
hosts_toml "$TLS" https

# nothing listens here
DOWN=127.0.0.1:$(free_port)
hosts_toml "$DOWN" http

# mirrors: the registry at MIRRORED (nothing listens) has one mirror in front of it, tried
# first (containerd's hosts.toml order); AUTH_MIRRORED the same with the basic-auth registry
# as its mirror
hosts_toml_mirrored() { # HOST MIRROR
  mkdir -p "$CERTS/$1"
  printf 'server = "http://%s"\n\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' "$1" "$2" \
    >"$CERTS/$1/hosts.toml"
  HOSTS+=("$1")
}
MIRRORED=127.0.0.1:$(free_port)
hosts_toml_mirrored "$MIRRORED" "$WORK"
AUTH_MIRRORED=127.0.0.1:$(free_port)
hosts_toml_mirrored "$AUTH_MIRRORED" "$AUTH"

# scripted: /v2/ is 200; any repository named r429 answers 429, r503 answers 503
SCRIPT_PORT=$(free_port)
cat >"$W/scripted.py" <<'EOF'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def answer(self, body):
        code = 200
        if "/r429/" in self.path: code = 429
        elif "/r503/" in self.path: code = 503
        self.send_response(code)
        if code == 429: self.send_header("Retry-After", "30")
        self.send_header("Content-Type", "application/json")
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.send_header("Content-Length", "2")
        self.end_headers()
        if body: self.wfile.write(b"{}")
    def do_HEAD(self): self.answer(False)
    def do_GET(self): self.answer(True)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF
python3 "$W/scripted.py" "$SCRIPT_PORT" &
PIDS+=($!)
SCRIPTED=127.0.0.1:$SCRIPT_PORT
hosts_toml "$SCRIPTED" http

for _ in $(seq 50); do curl -fsS -u u:right "http://$AUTH/v2/" >/dev/null 2>&1 && break; sleep 0.1; done

# an index whose only entry is linux/arm64 (the node is linux/amd64)
mkdir -p "$W/arm/blobs/sha256"
blob() { local d; d=$(printf '%s' "$1" | sha256sum | cut -d' ' -f1); printf '%s' "$1" >"$W/arm/blobs/sha256/$d"; echo "$d"; }
layer_tar=$W/layer.tar
tar -C "$W" --owner=0 --group=0 --mtime=@0 -cf "$layer_tar" scripted.py
layer=$(sha256sum "$layer_tar" | cut -d' ' -f1); cp "$layer_tar" "$W/arm/blobs/sha256/$layer"
cfg=$(printf '{"architecture":"arm64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$layer")
cfg_d=$(blob "$cfg")
man=$(printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$cfg_d" "${#cfg}" "$layer" "$(stat -c %s "$layer_tar")")
man_d=$(blob "$man")
idx=$(printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"arm64","os":"linux"}}]}' \
  "$man_d" "${#man}")
idx_d=$(blob "$idx")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"v1"}}]}' \
  "$idx_d" "${#idx}" >"$W/arm/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$W/arm/oci-layout"
skopeo copy --quiet --all --dest-tls-verify=false "oci:$W/arm:v1" "docker://$WORK/work/armonly:v1"

kubectl create namespace "$NS" >/dev/null
kubectl -n "$NS" create secret docker-registry wrong-password --docker-server="$AUTH" \
  --docker-username=u --docker-password=wrong >/dev/null
kubectl -n "$NS" create secret docker-registry right-password --docker-server="$AUTH" \
  --docker-username=u --docker-password=right >/dev/null

# scenario|image|pull-secret|what[|imagePullPolicy]
SCENARIOS=(
  "missing-tag|$WORK/work/app:nope||a tag the registry does not have"
  "missing-repository|$WORK/work/nosuch:v1||a repository the registry does not have"
  "platform-missing|$WORK/work/armonly:v1||an index with linux/arm64 only, on a linux/amd64 node"
  "auth-no-secret|$AUTH/work/app:v1||a basic-auth registry, no pull secret"
  "auth-wrong-password|$AUTH/work/app:v1|wrong-password|a basic-auth registry, a pull secret with the wrong password"
  "auth-missing-tag|$AUTH/work/app:nope|right-password|a basic-auth registry, the right password, a missing tag"
  "registry-down|$DOWN/work/app:v1||nothing listening on the registry's port (hosts.toml: plain HTTP)"
  "mirror-404-upstream-down|$MIRRORED/work/app:nope||a mirror that answers 404, its upstream down (the mirrors caveat)"
  "mirror-401-upstream-down|$AUTH_MIRRORED/work/app:v1||a mirror that wants basic auth (no secret), its upstream down"
  "dns|pullcheck-watch.invalid/work/app:v1||a registry host name that does not resolve"
  "x509|$TLS/work/app:v1||a TLS registry whose certificate's CA the node does not trust"
  "status-429|$SCRIPTED/r429/app:v1||a scripted registry answering 429 Too Many Requests"
  "status-503|$SCRIPTED/r503/app:v1||a scripted registry answering 503 Service Unavailable"
  "invalid-name|$WORK/Work/App:v1||a reference with upper-case letters in the repository"
  "never-pull|$WORK/work/absent:v1||imagePullPolicy Never, the image not on the node|Never"
)
mkdir -p "$OUT"
for s in "${SCENARIOS[@]}"; do
  IFS='|' read -r name image secret _ policy <<<"$s"
  jq -n --arg name "$name" --arg image "$image" --arg secret "$secret" --arg policy "${policy:-IfNotPresent}" '{
    apiVersion: "v1", kind: "Pod", metadata: {name: $name},
    spec: ({restartPolicy: "Never", terminationGracePeriodSeconds: 1,
      containers: [{name: "main", image: $image, imagePullPolicy: $policy, command: ["/bin/sh", "-c", "echo ok"]}]}
      + (if $secret == "" then {} else {imagePullSecrets: [{name: $secret}]} end))}' |
    kubectl -n "$NS" create -f - >/dev/null
done
log "created ${#SCENARIOS[@]} pods in namespace $NS; polling their statuses"
printf '%s\n' "${SCENARIOS[@]}" >"$W/scenarios"
python3 "$HERE/watch-capture.py" "$NS" "$W/scenarios" "$OUT" "$KUBELET_V" "$CONTAINERD_V"
log "wrote $OUT"
