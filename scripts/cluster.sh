#!/usr/bin/env bash
# A real single-node Kubernetes cluster on loopback, for proving pullcheck's fail-fast
# behaviour (tests/cluster/ via scripts/cluster-scenarios.sh, docs/fail-fast-results.md). Opt-in: not run in CI.
#
#   scripts/cluster.sh up       # build (cached) and start everything; prints the env lines
#   scripts/cluster.sh env      # export lines: KUBECONFIG, PATH, registry addresses
#   scripts/cluster.sh status
#   scripts/cluster.sh down     # stop everything, unmount, remove the state dir
#   scripts/cluster.sh registry-stop|registry-start   # the workload registry (scenario 4)
#
# What runs (on 127.0.0.1, and the kubelet on 10.244.230.1, an address added to lo;
# free ports picked at start):
#   etcd + kube-apiserver          scripts/control-plane.sh (state in $STATE/cp)
#   kube-controller-manager, kube-scheduler, kubelet   scripts/cluster/node-tools.sh
#   containerd 2.x + runc (Debian) own root/state/socket under $STATE/containerd, hosts.toml
#                                  for both registries, sandbox image from the infra registry
#   CNI: Debian's bridge + host-local (+ loopback), bridge pcbr0, 10.244.231.0/24
#   registries (Debian docker-registry, plain HTTP):
#     infra     pause, pullcheck, the busybox workload image — never stopped
#     workload  the busybox workload image — stopped by scenario 4
# Binaries: kube-apiserver/kubectl/etcd from scripts/go-tools.sh, the rest from
# scripts/cluster/node-tools.sh; both cached in ${PULLCHECK_TOOLS:-~/.cache/pullcheck-tools}.
# State:  ${PULLCHECK_CLUSTER_DIR:-/tmp/pullcheck-cluster}; logs in $STATE/logs.
#
# PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1 (opt-in; scripts/cluster/provider-parity.sh):
# the kubelet also gets --image-credential-provider-config/--image-credential-provider-bin-dir
# with the real ecr-credential-provider (scripts/go-tools.sh) for "*.dkr.ecr.*.amazonaws.com",
# its env pointing AWS_ENDPOINT_URL_ECR at a scripted ECR API (scripts/cluster/ecr-api.py,
# 127.0.0.1) with static test keys, and a real docker-registry (TLS from a CA of its own +
# htpasswd user AWS, the password the scripted API hands out) on $ECR_IP:443 (added to lo),
# served under the name $ECR_HOST. Only containerd must resolve that name: it runs in a
# private mount namespace (unshare -m --propagation slave) with a hosts file bind-mounted
# over /etc/hosts, and $STATE is made a shared mount first so that the kubelet's volume
# mounts still reach it. Nothing on the host's /etc/hosts changes. `env` then also prints
# PULLCHECK_ECR_* (host, config, bin dir, CA, hosts file, API call log).
# Needs root (kubelet, containerd, mounts), cgroup v1 or v2 with the cgroupfs driver.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
STATE=${PULLCHECK_CLUSTER_DIR:-/tmp/pullcheck-cluster}
NODE=${PULLCHECK_NODE_NAME:-pullcheck-node}
SUBNET=10.244.231.0/24
BRIDGE=pcbr0
# The kubelet refuses a loopback (127/8) node IP, so the node gets its own address, added
# to the lo interface (reachable only from this host; removed by down).
NODE_IP=10.244.230.1
PAUSE_REF=pause:3.10
WORK_REF=work/app:v1
PROVIDER=${PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER:-}
ECR_HOST=123456789012.dkr.ecr.us-east-1.amazonaws.com
ECR_IP=10.244.230.5
# shellcheck source=scripts/lib.sh
. "$HERE/lib.sh"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# alive NAME: $STATE/NAME.pid is a live process
alive() {
  local pid
  [ -f "$STATE/$1.pid" ] || return 1
  pid=$(cat "$STATE/$1.pid")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

start_bg() { # NAME CMD...: setsid, log to $STATE/logs/NAME.log, pid to $STATE/NAME.pid
  local name=$1; shift
  setsid "$@" </dev/null >>"$STATE/logs/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

stop_one() { # NAME [SECONDS]
  local name=$1 secs=${2:-15} pid i
  alive "$name" || { rm -f "$STATE/$name.pid"; return 0; }
  pid=$(cat "$STATE/$name.pid")
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 $((secs * 10))); do alive "$name" || break; sleep 0.1; done
  if alive "$name"; then log "$name (pid $pid) ignored SIGTERM: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$STATE/$name.pid"
}

wait_for() { # SECONDS DESCRIPTION COMMAND...
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.5
  done
  log "$what"
}

# ---- images --------------------------------------------------------------------
# oci_push ROOTFS DEST CONFIG_JSON: a one-layer linux/amd64 OCI image of ROOTFS (files owned
# 0:0, fixed mtime) pushed to docker://DEST over plain HTTP. CONFIG_JSON is the image
# config's "config" object (Entrypoint, Cmd, User...). With OCI_PUSH_CREDS=USER:PASSWORD
# set, skopeo logs in with them (TLS is not verified: the destination is on loopback).
oci_push() {
  local rootfs=$1 dest=$2 cfg=$3 w
  w=$(mktemp -d "$STATE/.img.XXXXXX")
  mkdir -p "$w/lay/blobs/sha256"
  tar -C "$rootfs" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" .
  gzip -9 -n -c "$w/layer.tar" >"$w/layer.tar.gz"
  blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "$w/lay/blobs/sha256/$d"; echo "$d"; }
  local diff layer config manifest
  diff=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
  layer=$(blob "$w/layer.tar.gz")
  jq -cn --arg diff "sha256:$diff" --argjson cfg "$cfg" \
    '{architecture:"amd64",os:"linux",config:$cfg,rootfs:{type:"layers",diff_ids:[$diff]}}' |
    tr -d '\n' >"$w/config.json"
  config=$(blob "$w/config.json")
  jq -cn --arg c "sha256:$config" --argjson cs "$(stat -c %s "$w/config.json")" \
    --arg l "sha256:$layer" --argjson ls "$(stat -c %s "$w/layer.tar.gz")" '{
      schemaVersion:2, mediaType:"application/vnd.oci.image.manifest.v1+json",
      config:{mediaType:"application/vnd.oci.image.config.v1+json",digest:$c,size:$cs},
      layers:[{mediaType:"application/vnd.oci.image.layer.v1.tar+gzip",digest:$l,size:$ls}]}' |
    tr -d '\n' >"$w/manifest.json"
  manifest=$(blob "$w/manifest.json")
  jq -cn --arg m "sha256:$manifest" --argjson s "$(stat -c %s "$w/manifest.json")" \
    '{schemaVersion:2,manifests:[{mediaType:"application/vnd.oci.image.manifest.v1+json",digest:$m,size:$s,
      platform:{architecture:"amd64",os:"linux"},annotations:{"org.opencontainers.image.ref.name":"img"}}]}' \
    >"$w/lay/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$w/lay/oci-layout"
  skopeo copy --quiet --dest-tls-verify=false ${OCI_PUSH_CREDS:+--dest-creds "$OCI_PUSH_CREDS"} \
    "oci:$w/lay:img" "docker://$dest"
  rm -rf "$w"
  log "pushed $dest (sha256:${manifest:0:12})"
}

build_images() {
  local w=$STATE/images
  mkdir -p "$w/pause-root" "$w/work-root/bin"
  command -v musl-gcc >/dev/null || die "musl-gcc missing (apt-get install musl-tools)"
  musl-gcc -static -Os -s -o "$w/pause-root/pause" "$HERE/cluster/pause.c"
  oci_push "$w/pause-root" "$INFRA_REG/$PAUSE_REF" '{"Entrypoint":["/pause"],"User":"65535:65535"}'
  local bb
  bb=$(command -v busybox) || die "busybox missing (apt-get install busybox-static)"
  file -L "$bb" | grep -q 'statically linked' || die "$bb is not static (apt-get install busybox-static)"
  install -m 0755 "$bb" "$w/work-root/bin/busybox"
  local a
  for a in sh echo sleep cat true false; do ln -sf busybox "$w/work-root/bin/$a"; done
  local wcfg='{"Cmd":["/bin/sh","-c","echo ok"],"Env":["PATH=/bin"]}'
  oci_push "$w/work-root" "$INFRA_REG/$WORK_REF" "$wcfg"
  oci_push "$w/work-root" "$WORK_REG/$WORK_REF" "$wcfg"
  if [ -n "$PROVIDER" ]; then
    # pushed by address: skopeo runs on the host, where the ECR name does not resolve
    OCI_PUSH_CREDS="AWS:$(cat "$STATE/ecr/password")" oci_push "$w/work-root" "$ECR_IP:443/$WORK_REF" "$wcfg"
  fi
  # pullcheck's own scratch image (scripts/build-image.sh), from the static binary; not
  # with PULLCHECK_CLUSTER_NO_PULLCHECK_IMAGE=1 (scripts/cluster/provider-parity.sh runs
  # pullcheck on the host only, and a cold musl release build takes minutes)
  [ -z "${PULLCHECK_CLUSTER_NO_PULLCHECK_IMAGE:-}" ] || { log "pullcheck image: skipped"; return 0; }
  local tdir=${CARGO_TARGET_DIR:-target}
  case $tdir in /*) ;; *) tdir=$ROOT/$tdir ;; esac
  local pc=$tdir/x86_64-unknown-linux-musl/release/pullcheck
  if [ ! -x "$pc" ] || [ -n "${PULLCHECK_REBUILD:-}" ]; then (cd "$ROOT" && scripts/build-static.sh >&2); fi
  (cd "$ROOT" && scripts/build-image.sh --out "$w/pullcheck-oci" --push "$INFRA_REG/pullcheck/pullcheck" \
    --dest-insecure "$pc") >"$w/pullcheck-image.txt"
  cat "$w/pullcheck-image.txt" >&2
}

# ---- registries ----------------------------------------------------------------
reg_start() { # NAME PORT
  local d=$STATE/registry-$1
  start_registry "$d" "$2" || die "registry $1 failed (log $d/registry.log)"
  echo "$REG_PID" >"$STATE/registry-$1.pid"
}

# ---- credential provider (PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1) --------------------
# ecr_setup BIN_DIR: the CA and certificate for $ECR_HOST, the htpasswd, the scripted ECR
# API, the registry on $ECR_IP:443, the hosts file, the provider config and bin dir.
ecr_setup() {
  local bin=$1 e=$STATE/ecr api_port i
  mkdir -p "$e/plugins" "$e/registry/storage"
  chmod 700 "$e"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=pullcheck-cluster-ecr-ca \
    -keyout "$e/ca.key" -out "$e/ca.crt" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$ECR_HOST" -keyout "$e/server.key" -out "$e/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=DNS:%s,IP:%s\n' "$ECR_HOST" "$ECR_IP" >"$e/ext.cnf"
  openssl x509 -req -in "$e/server.csr" -CA "$e/ca.crt" -CAkey "$e/ca.key" -CAcreateserial \
    -days 2 -extfile "$e/ext.cnf" -out "$e/server.crt" >/dev/null 2>&1
  # a fresh password per cluster; only the scripted API and the htpasswd know it
  head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$e/password"
  printf 'AWS:%s\n' "$(cat "$e/password")" >"$e/token"
  htpasswd -Bbn AWS "$(cat "$e/password")" >"$e/htpasswd"
  api_port=$(free_port)
  : >"$e/calls.log"
  start_bg ecr-api python3 "$HERE/cluster/ecr-api.py" --listen "127.0.0.1:$api_port" \
    --token-file "$e/token" --log "$e/calls.log"
  ip addr replace "$ECR_IP/32" dev lo
  cat >"$e/registry/config.yml" <<YAML
version: 0.1
log: { level: info, accesslog: { disabled: false } }
storage: { filesystem: { rootdirectory: $e/registry/storage } }
http: { addr: "$ECR_IP:443", tls: { certificate: $e/server.crt, key: $e/server.key } }
auth: { htpasswd: { realm: pullcheck-cluster-ecr, path: $e/htpasswd } }
YAML
  start_bg registry-ecr docker-registry serve "$e/registry/config.yml"
  for i in $(seq 100); do
    curl -s -o /dev/null --cacert "$e/ca.crt" --resolve "$ECR_HOST:443:$ECR_IP" "https://$ECR_HOST/v2/" && break
    [ "$i" -lt 100 ] || die "the ECR-named registry did not start (log $STATE/logs/registry-ecr.log)"
    sleep 0.1
  done
  { cat /etc/hosts; printf '%s\t%s\n' "$ECR_IP" "$ECR_HOST"; } >"$e/hosts"
  ln -sf "$bin/ecr-credential-provider" "$e/plugins/ecr-credential-provider"
  cat >"$e/credential-providers.yaml" <<YAML
# Generated by scripts/cluster.sh (PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1)
apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    matchImages:
      - "*.dkr.ecr.*.amazonaws.com"
    defaultCacheDuration: 12h
    env:
      - name: AWS_ENDPOINT_URL_ECR
        value: "http://127.0.0.1:$api_port"
      - name: AWS_ACCESS_KEY_ID
        value: AKIDEXAMPLE
      - name: AWS_SECRET_ACCESS_KEY
        value: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
      - name: AWS_EC2_METADATA_DISABLED
        value: "true"
      - name: AWS_CONFIG_FILE
        value: $e/no-aws-config
      - name: AWS_SHARED_CREDENTIALS_FILE
        value: $e/no-aws-credentials
YAML
  log "credential provider: ecr-credential-provider for *.dkr.ecr.*.amazonaws.com, scripted ECR API 127.0.0.1:$api_port, registry $ECR_HOST ($ECR_IP:443)"
}

# ---- containerd ----------------------------------------------------------------
write_containerd_config() {
  local c=$STATE/containerd r
  mkdir -p "$c/root" "$c/state" "$c/certs.d" "$STATE/runc" "$STATE/cni/net.d" "$STATE/cni/ipam"
  for r in "$INFRA_REG" "$WORK_REG"; do
    mkdir -p "$c/certs.d/$r"
    printf 'server = "http://%s"\n\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' "$r" "$r" \
      >"$c/certs.d/$r/hosts.toml"
  done
  if [ -n "$PROVIDER" ]; then
    # the image's own host with the registry's CA: not a mirror, so containerd sends it the
    # kubelet's (the provider's) credentials
    mkdir -p "$c/certs.d/$ECR_HOST"
    printf 'server = "https://%s"\n\n[host."https://%s"]\n  capabilities = ["pull", "resolve"]\n  ca = "%s"\n' \
      "$ECR_HOST" "$ECR_HOST" "$STATE/ecr/ca.crt" >"$c/certs.d/$ECR_HOST/hosts.toml"
  fi
  cat >"$c/config.toml" <<EOF
# Generated by scripts/cluster.sh
version = 3
root = "$c/root"
state = "$c/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$c/containerd.sock"

[ttrpc]
  address = "$c/containerd.sock.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$INFRA_REG/$PAUSE_REF"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "$c/certs.d"

[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  # This host's root lacks CAP_SYS_RESOURCE, so runc can't lower oom_score_adj (the kubelet
  # asks -998 for sandboxes, -997 for Guaranteed pods): clamp to containerd's own score.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$STATE/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
EOF
  cat >"$STATE/cni/net.d/10-pullcheck.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "pullcheck",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$SUBNET"}]],
        "dataDir": "$STATE/cni/ipam"
      }
    }
  ]
}
EOF
}

# ---- kubelet -------------------------------------------------------------------
write_kubelet_config() {
  local k=$STATE/kubelet
  mkdir -p "$k/root" "$STATE/pod-logs"
  cat >"$k/config.yaml" <<EOF
# Generated by scripts/cluster.sh
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$STATE/containerd/containerd.sock
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
failSwapOn: false
podLogsDir: $STATE/pod-logs
registerNode: true
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
resolvConf: /etc/resolv.conf
EOF
}

# ---- env -----------------------------------------------------------------------
print_env() {
  # shellcheck disable=SC1091
  . "$STATE/env"
  cat <<EOF
export KUBECONFIG='$STATE/cp/kubeconfig'
export PULLCHECK_CLUSTER_DIR='$STATE'
export PULLCHECK_INFRA_REGISTRY='$INFRA_REG'
export PULLCHECK_WORK_REGISTRY='$WORK_REG'
export PULLCHECK_NODE='$NODE'
export PATH='$BIN_DIR':"\$PATH"
EOF
  if [ -d "$STATE/ecr" ]; then
    cat <<EOF
export PULLCHECK_ECR_HOST='$ECR_HOST'
export PULLCHECK_ECR_PROVIDER_CONFIG='$STATE/ecr/credential-providers.yaml'
export PULLCHECK_ECR_PROVIDER_BIN_DIR='$STATE/ecr/plugins'
export PULLCHECK_ECR_CA='$STATE/ecr/ca.crt'
export PULLCHECK_ECR_HOSTS='$STATE/ecr/hosts'
export PULLCHECK_ECR_API_LOG='$STATE/ecr/calls.log'
EOF
  fi
}

cmd_up() {
  [ "$(id -u)" = 0 ] || die "needs root (kubelet, containerd)"
  if alive kubelet && alive containerd; then log "already up (state $STATE)"; print_env; return; fi
  [ ! -d "$STATE" ] || cmd_down
  local t0=$SECONDS bin
  for t in docker-registry skopeo jq runc musl-gcc busybox; do
    command -v "$t" >/dev/null || die "$t missing (scripts/deps.sh installs docker-registry, skopeo, musl-tools; apt-get install runc busybox-static containernetworking-plugins)"
  done
  { [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ]; } ||
    die "CNI plugins missing (apt-get install containernetworking-plugins)"
  log "binaries: scripts/go-tools.sh etcd kube-apiserver kubectl + scripts/cluster/node-tools.sh (cached after the first build)"
  bin=$("$ROOT/scripts/go-tools.sh" etcd kube-apiserver kubectl)
  if [ -n "$PROVIDER" ]; then
    command -v htpasswd >/dev/null || die "htpasswd missing (apt-get install apache2-utils)"
    [ "$("$ROOT/scripts/go-tools.sh" ecr-credential-provider)" = "$bin" ] || die "go-tools.sh put ecr-credential-provider elsewhere"
  fi
  local nbin; nbin=$("$HERE/cluster/node-tools.sh")
  [ "$bin" = "$nbin" ] || die "go-tools.sh and node-tools.sh disagree on the bin dir ($bin vs $nbin)"
  mkdir -p "$STATE/logs"; chmod 700 "$STATE"

  local ip iw
  ip=$(free_port); iw=$(free_port); KUBELET_PORT=$(free_port); KUBELET_HEALTHZ_PORT=$(free_port)
  local cm_port sch_port; cm_port=$(free_port); sch_port=$(free_port)
  INFRA_REG=127.0.0.1:$ip WORK_REG=127.0.0.1:$iw
  cat >"$STATE/env" <<EOF
BIN_DIR=$bin
INFRA_REG=$INFRA_REG
WORK_REG=$WORK_REG
WORK_REG_PORT=$iw
KUBELET_PORT=$KUBELET_PORT
EOF
  log "registries: infra $INFRA_REG, workload $WORK_REG"
  reg_start infra "$ip"
  reg_start work "$iw"
  [ -z "$PROVIDER" ] || ecr_setup "$bin"
  build_images

  log "control plane (scripts/control-plane.sh, state $STATE/cp)"
  # kubectl logs: reach the kubelet by its InternalIP, not the node name (no DNS)
  # (control-plane.sh can mistake a slow fork for an etcd exit on a loaded machine: retry)
  local try
  for try in 1 2 3; do
    if PULLCHECK_CP_DIR=$STATE/cp PULLCHECK_CP_BIN=$bin \
      PULLCHECK_CP_APISERVER_ARGS="--kubelet-preferred-address-types=InternalIP ${PULLCHECK_CP_APISERVER_ARGS:-}" \
      "$ROOT/scripts/control-plane.sh" start >"$STATE/cp.env"; then
      break
    fi
    [ "$try" -lt 3 ] || die "control plane did not start (logs $STATE/cp/logs)"
    log "control plane start failed (attempt $try); retrying"
    PULLCHECK_CP_DIR=$STATE/cp "$ROOT/scripts/control-plane.sh" stop || true
  done
  local kc=$STATE/cp/kubeconfig
  local kubectl=("$bin/kubectl" --kubeconfig "$kc")

  log "kube-controller-manager, kube-scheduler"
  mkdir -p "$STATE/kcm-pki" "$STATE/sched-pki"
  start_bg kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$kc" \
    --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --bind-address 127.0.0.1 --secure-port "$cm_port" --cert-dir "$STATE/kcm-pki" \
    --service-account-private-key-file "$STATE/cp/pki/sa.key" --root-ca-file "$STATE/cp/pki/ca.crt" \
    --use-service-account-credentials=false --leader-elect=false --v=2
  start_bg kube-scheduler "$bin/kube-scheduler" --kubeconfig "$kc" \
    --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --bind-address 127.0.0.1 --secure-port "$sch_port" --cert-dir "$STATE/sched-pki" \
    --leader-elect=false --v=2

  log "containerd ($STATE/containerd/containerd.sock)"
  write_containerd_config
  if [ -n "$PROVIDER" ]; then
    # $STATE shared, so the kubelet's later mounts under it (pod volumes) propagate into
    # containerd's namespace, which is a slave copy: its own mounts stay inside.
    mount --bind "$STATE" "$STATE"
    mount --make-rshared "$STATE"
    # shellcheck disable=SC2016 # expanded by the inner sh
    PATH="$bin:$PATH" start_bg containerd unshare -m --propagation slave \
      sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$STATE/ecr/hosts" \
      "$bin/containerd" --config "$STATE/containerd/config.toml"
  else
    PATH="$bin:$PATH" start_bg containerd "$bin/containerd" --config "$STATE/containerd/config.toml"
  fi
  wait_for 60 "containerd is up" test -S "$STATE/containerd/containerd.sock" ||
    { tail -30 "$STATE/logs/containerd.log" >&2; die "containerd did not start (log $STATE/logs/containerd.log)"; }

  log "kubelet (node $NODE, node IP $NODE_IP on lo)"
  ip addr replace "$NODE_IP/32" dev lo
  write_kubelet_config
  local provider_flags=()
  [ -z "$PROVIDER" ] || provider_flags=(--image-credential-provider-config "$STATE/ecr/credential-providers.yaml"
    --image-credential-provider-bin-dir "$STATE/ecr/plugins")
  PATH="$bin:$PATH" start_bg kubelet "$bin/kubelet" --config "$STATE/kubelet/config.yaml" \
    --kubeconfig "$kc" --hostname-override "$NODE" --node-ip "$NODE_IP" \
    --root-dir "$STATE/kubelet/root" --cert-dir "$STATE/kubelet/pki" "${provider_flags[@]}" --v=2
  local deadline=$((SECONDS + 180))
  until [ "$("${kubectl[@]}" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
    for n in kubelet containerd kube-controller-manager kube-scheduler; do
      alive "$n" || { tail -40 "$STATE/logs/$n.log" >&2; die "$n exited (log $STATE/logs/$n.log)"; }
    done
    [ $SECONDS -lt $deadline ] || { "${kubectl[@]}" describe node "$NODE" >&2 || true; die "node not Ready after 180s (logs in $STATE/logs)"; }
    sleep 1
  done
  log "node $NODE Ready; waiting for the default ServiceAccount and the not-ready taint to go"
  wait_for 60 "ServiceAccount default exists" "${kubectl[@]}" -n default get serviceaccount default || die "no default ServiceAccount (controller-manager log $STATE/logs/kube-controller-manager.log)"
  deadline=$((SECONDS + 60))
  while [ -n "$("${kubectl[@]}" get node "$NODE" -o jsonpath='{.spec.taints}')" ]; do
    [ $SECONDS -lt $deadline ] || die "node still tainted: $("${kubectl[@]}" get node "$NODE" -o jsonpath='{.spec.taints}')"
    sleep 1
  done
  log "up in $((SECONDS - t0))s; state $STATE"
  log "logs: $STATE/logs/{kubelet,containerd,kube-controller-manager,kube-scheduler}.log, $STATE/cp/logs/{etcd,kube-apiserver}.log, $STATE/registry-{infra,work}/registry.log"
  print_env
}

# Every mount under $STATE, deepest first.
state_mounts() { awk -v p="$STATE/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r; }

cmd_down() {
  [ -d "$STATE" ] || { log "not up (no $STATE)"; return 0; }
  # shellcheck disable=SC1091
  [ -f "$STATE/env" ] && . "$STATE/env"
  # scenario 8's training operator (network namespace, forwarder), if it was started
  [ ! -d "$STATE/kubeflow" ] || "$HERE/cluster/kubeflow.sh" stop 2>/dev/null || true
  stop_one kubelet 20
  stop_one kube-scheduler
  stop_one kube-controller-manager
  # containers: every runc container under our own runc root (never the host's)
  local id
  if [ -d "$STATE/runc" ]; then
    for id in $(runc --root "$STATE/runc/k8s.io" list -q 2>/dev/null); do
      runc --root "$STATE/runc/k8s.io" kill -a "$id" KILL 2>/dev/null || true
    done
  fi
  stop_one containerd 20
  # shims started by our containerd: matched by our socket path in their command line
  local pid
  for pid in $(pgrep -f -- "-address $STATE/containerd/containerd.sock" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -d "$STATE/runc" ]; then
    sleep 0.5
    for id in $(runc --root "$STATE/runc/k8s.io" list -q 2>/dev/null); do
      runc --root "$STATE/runc/k8s.io" delete -f "$id" 2>/dev/null || true
    done
  fi
  PULLCHECK_CP_DIR=$STATE/cp "$ROOT/scripts/control-plane.sh" stop 2>/dev/null || true
  stop_one registry-work
  stop_one registry-infra
  stop_one registry-ecr
  stop_one ecr-api
  ip addr del "$ECR_IP/32" dev lo 2>/dev/null || true
  local m
  for m in $(state_mounts); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"; done
  # the shared bind of $STATE itself (credential provider mode)
  while awk -v p="$STATE" '$2 == p {f=1} END {exit !f}' /proc/mounts; do
    umount "$STATE" 2>/dev/null || umount -l "$STATE" 2>/dev/null || { log "could not unmount $STATE"; break; }
  done
  # the cgroups kubelet made (cgroupfs driver): kubepods under every v1 hierarchy or v2 root
  local cg
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [ -d "$cg" ] || continue
    find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link delete "$BRIDGE" 2>/dev/null || true; fi
  ip addr del "$NODE_IP/32" dev lo 2>/dev/null || true
  # kubelet's /var/log/containers symlinks into our pod-logs dir
  find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null || true
  # shim sockets live in /run/containerd/s whatever the state dir; drop the dirs if empty
  rmdir /run/containerd/s /run/containerd 2>/dev/null || true
  [ -z "$(state_mounts)" ] || log "warning: still mounted: $(state_mounts | tr '\n' ' ')"
  if [ -n "${PULLCHECK_CLUSTER_KEEP:-}" ]; then log "stopped; kept $STATE"; else rm -rf "$STATE"; log "stopped; removed $STATE"; fi
}

cmd_status() {
  local n rc=0
  local names=(registry-infra registry-work kubelet containerd kube-scheduler kube-controller-manager)
  [ ! -d "$STATE/ecr" ] || names+=(registry-ecr ecr-api)
  for n in "${names[@]}"; do
    if alive "$n"; then log "$n running (pid $(cat "$STATE/$n.pid"))"; else log "$n not running"; rc=1; fi
  done
  PULLCHECK_CP_DIR=$STATE/cp "$ROOT/scripts/control-plane.sh" status || rc=1
  if [ -f "$STATE/env" ]; then
    # shellcheck disable=SC1091
    . "$STATE/env"
    "$BIN_DIR/kubectl" --kubeconfig "$STATE/cp/kubeconfig" get nodes -o wide >&2 || rc=1
  fi
  log "logs: $STATE/logs (kubelet, containerd, kube-controller-manager, kube-scheduler), $STATE/cp/logs (etcd, kube-apiserver), $STATE/registry-*/registry.log"
  return $rc
}

# sourced (for its functions): stop here
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) [ -f "$STATE/env" ] || die "not up"; print_env ;;
  registry-stop) stop_one registry-work ;;
  registry-start)
    # shellcheck disable=SC1091
    . "$STATE/env"; alive registry-work || reg_start work "$WORK_REG_PORT" ;;
  *) echo "usage: $0 up|down|status|env|registry-stop|registry-start" >&2; exit 2 ;;
esac
