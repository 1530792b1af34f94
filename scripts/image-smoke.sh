#!/usr/bin/env bash
# Prove pullcheck's container image works the way a kubelet would run it, without a
# container engine: build the image (scripts/build-image.sh), push it and a tiny workload
# image to a TLS docker-registry, pull the pullcheck image back by digest, unpack it into a
# runc bundle and run it the way the injected init container runs (uid/gid 65532 from the
# image's USER, ENTRYPOINT + args, read-only root filesystem, all capabilities dropped,
# no_new_privs, 64Mi/100m limits, the CA and a pull secret bind-mounted read-only,
# /dev/termination-log bind-mounted read-write).
#
# Networking: the script re-executes itself in a fresh network namespace (unshare --net,
# loopback only) and starts the registry there; every runc container joins that namespace by
# path (/proc/<script pid>/ns/net), the way the CRI puts a pod's containers into the pod
# sandbox's namespace. Nothing listens on the host's network and the namespace disappears
# with the script.
#
# Needs root (unshare, runc), runc, skopeo, docker-registry, jq, openssl, and the static
# binary. Usage:
#   scripts/build-static.sh && scripts/image-smoke.sh [path/to/static/pullcheck]
# The last line is "N passed, M failed"; the exit status is non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "image-smoke: needs root (unshare, runc)" >&2; exit 1; }
if [ "${PULLCHECK_IMAGE_SMOKE_NETNS:-}" != "$$" ]; then
  # exec keeps the pid, so the marker says "this very process is already in its own netns".
  PULLCHECK_IMAGE_SMOKE_NETNS=$$ exec unshare --net -- "$0" "$@"
fi
ip link set lo up

. scripts/lib.sh
die() { echo "image-smoke: $*" >&2; echo "0 passed, 1 failed"; exit 1; }
bin=${1:-${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/release/pullcheck}
[ -x "$bin" ] || die "$bin missing; run scripts/build-static.sh"
for t in runc skopeo docker-registry jq openssl curl tar; do
  command -v "$t" >/dev/null || die "needs $t (scripts/deps.sh installs it)"
done

start_ns=$(date +%s%N)
work=$(mktemp -d /tmp/pullcheck-image-smoke.XXXXXX)
chmod 0755 "$work"
containers=()
summary_printed=0
cleanup() {
  local rc=$? id
  set +e
  for id in "${containers[@]}"; do runc delete --force "$id" >/dev/null 2>&1; done
  if [ -n "${REG_PID:-}" ]; then kill "$REG_PID" 2>/dev/null; wait "$REG_PID" 2>/dev/null; fi
  rm -rf "$work"
  # An unexpected error (set -e) still ends with the summary line, counted as a failure.
  if [ "$summary_printed" != 1 ]; then
    echo "image-smoke: aborted (exit $rc)"
    echo "$passed passed, $((failed + 1)) failed"
    [ "$rc" = 0 ] && rc=1
  fi
  exit "$rc"
}
trap cleanup EXIT

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { # check DESCRIPTION COMMAND...: passes when the command succeeds
  local what=$1; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

# --- registry and images ------------------------------------------------------------------
make_tls "$work/tls"
port=$(free_port)
start_registry "$work/registry" "$port" "$work/tls"
reg=127.0.0.1:$port
mkdir -p "$work/certs" && cp "$work/tls/ca.crt" "$work/certs/ca.crt"
push_image "$work/workload" "$reg/smoke/app:v1" "$work/certs"

scripts/build-image.sh --out "$work/built" --tag smoke --push "$reg/pullcheck/pullcheck:smoke" \
  --dest-cert-dir "$work/certs" "$bin" | tee "$work/build.out"
digest=$(sed -n 's/^digest: *//p' "$work/build.out")
image=$reg/pullcheck/pullcheck@$digest

# --- pull it back by digest, as a pinned init container image is pulled ---------------------
skopeo copy --quiet --src-cert-dir "$work/certs" "docker://$image" "oci:$work/pulled:img"
pulled_manifest=$(jq -r '.manifests[0].digest' "$work/pulled/index.json")
check "pulled manifest digest equals the built one ($digest)" [ "$pulled_manifest" = "$digest" ]
blob() { echo "$work/pulled/blobs/${1/://}"; }
manifest=$(blob "$pulled_manifest")
config=$(blob "$(jq -r '.config.digest' "$manifest")")
check "one gzip layer" [ "$(jq -r '[.layers[].mediaType] | join(",")' "$manifest")" = "application/vnd.oci.image.layer.v1.tar+gzip" ]

size=$(( $(jq '.layers[0].size + .config.size' "$manifest") + $(stat -c %s "$manifest") ))
echo "image size: $size bytes (compressed layer + config + manifest)"
check "image size $size bytes < 10 MB" [ "$size" -lt 10000000 ]

# The image config, as the kubelet/containerd read it.
user=$(jq -r '.config.User' "$config")
check "config User is 65532:65532" [ "$user" = "65532:65532" ]
check 'config Entrypoint is ["/pullcheck"], no Cmd' \
  [ "$(jq -c '[.config.Entrypoint, .config.Cmd]' "$config")" = '[["/pullcheck"],null]' ]
check "config os/arch linux/amd64" [ "$(jq -r '.os + "/" + .architecture' "$config")" = linux/amd64 ]
cargo_field() { sed -n "/^\[package\]/,/^\[/s/^$1 = \"\(.*\)\"\$/\1/p" Cargo.toml | head -1; }
labels_ok=1
for pair in "title=pullcheck" "description=$(cargo_field description)" "licenses=$(cargo_field license)" \
            "source=$(cargo_field repository)" "version=$(cargo_field version)"; do
  key=org.opencontainers.image.${pair%%=*} want=${pair#*=}
  got=$(jq -r --arg k "$key" '.config.Labels[$k] // "(missing)"' "$config")
  [ "$got" = "$want" ] || { echo "     label $key: got '$got', want '$want'"; labels_ok=0; }
  # The Dockerfile must carry the same value (as a LABEL or an ARG default).
  grep -qF -- "$want" Dockerfile || { echo "     Dockerfile lacks '$want' ($key)"; labels_ok=0; }
done
check "OCI labels match Cargo.toml and the Dockerfile" [ "$labels_ok" = 1 ]
check "Dockerfile: FROM scratch, USER 65532:65532, ENTRYPOINT [\"/pullcheck\"]" \
  bash -c 'grep -qx "FROM scratch" Dockerfile && grep -qx "USER 65532:65532" Dockerfile &&
           grep -qxF "ENTRYPOINT [\"/pullcheck\"]" Dockerfile'

# --- unpack into a runc bundle (what the snapshotter does; umoci is not needed) -------------
rootfs=$work/rootfs
mkdir -p "$rootfs"
for l in $(jq -r '.layers[].digest' "$manifest"); do
  tar -xzf "$(blob "$l")" -C "$rootfs" --numeric-owner --same-owner --same-permissions
done
listing=$(cd "$rootfs" && find . -mindepth 1 -printf '%P %m %U:%G\n' | sort | tr '\n' ';')
check "rootfs is exactly /LICENSE 644 and /pullcheck 755, owned 0:0 (no shell, no CA files): $listing" \
  [ "$listing" = "LICENSE 644 0:0;pullcheck 755 0:0;" ]
check "rootfs /pullcheck is the binary that was built" cmp -s "$rootfs/pullcheck" "$bin"

# Host-side files the containers get.
uid=${user%%:*} gid=${user##*:}
mkdir -p "$work/secrets/regcred" "$work/secrets-root/regcred" "$work/out"
printf '{"auths":{"registry.example.com":{"auth":"%s"}}}\n' "$(printf 'u:p' | base64)" \
  > "$work/secrets/regcred/.dockerconfigjson"
cp "$work/secrets/regcred/.dockerconfigjson" "$work/secrets-root/regcred/.dockerconfigjson"
# Readable by 65532 only (all capabilities are dropped, so not even uid 0 could read it) ...
chown -R "$uid:$gid" "$work/secrets"
chmod 0500 "$work/secrets" "$work/secrets/regcred"; chmod 0400 "$work/secrets/regcred/.dockerconfigjson"
# ... and a copy readable by root only, which a uid-65532 process must fail to read.
chmod 0555 "$work/secrets-root" "$work/secrets-root/regcred"; chmod 0400 "$work/secrets-root/regcred/.dockerconfigjson"
chmod 1777 "$work/out"
netns=/proc/$$/ns/net

n=0
# run_pod [--secrets DIR] [--no-ca] -- ARGS...: runs the image in a fresh bundle (shared
# read-only rootfs); ARGS follow the image's entrypoint, like a pod's `args`. Sets RC, OUT
# (the captured stdout+stderr) and TERMLOG (the host file behind /dev/termination-log).
run_pod() {
  local secrets=$work/secrets ca=1
  while [ "$1" != -- ]; do
    case $1 in
      --secrets) secrets=$2; shift 2 ;;
      --no-ca) ca=0; shift ;;
      *) echo "run_pod: bad option $1" >&2; return 1 ;;
    esac
  done
  shift
  n=$((n + 1))
  local id=pullcheck-image-smoke-$$-$n bundle=$work/bundle-$n
  mkdir -p "$bundle"
  : > "$bundle/termination-log"
  chown "$uid:$gid" "$bundle/termination-log"; chmod 0600 "$bundle/termination-log"
  runc spec --bundle "$bundle"
  jq --arg rootfs "$rootfs" --argjson uid "$uid" --argjson gid "$gid" --arg netns "$netns" \
     --argjson entry "$(jq -c '.config.Entrypoint' "$config")" \
     --argjson env "$(jq -c '.config.Env // []' "$config")" \
     --arg ca "$work/tls/ca.crt" --argjson with_ca "$ca" --arg secrets "$secrets" \
     --arg termlog "$bundle/termination-log" --arg out "$work/out" \
     --argjson args "$(printf '%s\n' "$@" | jq -R . | jq -cs .)" '
    .hostname = "pullcheck"
    | .root = {path: $rootfs, readonly: true}
    | .process.terminal = false
    | .process.user = {uid: $uid, gid: $gid, additionalGids: [$gid]}
    | .process.args = $entry + $args
    | .process.env = $env
    | .process.cwd = "/"
    | .process.noNewPrivileges = true
    | .process.capabilities = {bounding: [], effective: [], inheritable: [], permitted: [], ambient: []}
    | .linux.namespaces = [.linux.namespaces[] | select(.type != "network")] + [{type: "network", path: $netns}]
    | .linux.resources.memory = {limit: 67108864}
    | .linux.resources.cpu = {quota: 10000, period: 100000}
    | .mounts += [
        {destination: "/dev/termination-log", type: "bind", source: $termlog, options: ["rbind", "rw", "nosuid", "nodev", "noexec"]},
        {destination: "/var/run/pullcheck/secrets", type: "bind", source: $secrets, options: ["rbind", "ro", "nosuid", "nodev", "noexec"]},
        {destination: "/run/out", type: "bind", source: $out, options: ["rbind", "rw", "nosuid", "nodev", "noexec"]}
      ]
      + (if $with_ca == 1 then [{destination: "/etc/pullcheck/ca.pem", type: "bind", source: $ca, options: ["rbind", "ro", "nosuid", "nodev", "noexec"]}] else [] end)
     ' "$bundle/config.json" > "$bundle/config.json.new"
  mv "$bundle/config.json.new" "$bundle/config.json"
  containers+=("$id")
  set +e
  timeout -k 5 90 runc run --bundle "$bundle" "$id" < /dev/null > "$bundle/output" 2>&1
  RC=$?
  set -e
  runc delete --force "$id" >/dev/null 2>&1 || true
  OUT=$(cat "$bundle/output")
  TERMLOG=$bundle/termination-log
  sed 's/^/     | /' "$bundle/output"
}
expect_rc() { # expect_rc WANT DESCRIPTION
  if [ "$RC" = "$1" ]; then pass "exit $RC: $2"; else fail "exit $RC (want $1): $2"; fi
}
common=(check --ca-file /etc/pullcheck/ca.pem --pull-secrets /var/run/pullcheck/secrets
        --no-docker-config --termination-log /dev/termination-log --timeout 30)

# 1. Present tag (and the pullcheck image itself, by digest): 0.
run_pod -- "${common[@]}" "$reg/smoke/app:v1" "$image"
expect_rc 0 "present tag and the pinned pullcheck image"
check "termination log says all pullable" grep -qx "pullcheck: all 2 images pullable" "$TERMLOG"
check "... and only uid $uid may write that file (mode/owner $(stat -c '%a %u:%g' "$TERMLOG"))" \
  [ "$(stat -c '%a %u:%g' "$TERMLOG")" = "600 $uid:$gid" ]

# 2. Absent tag: 11, with the not_found line in the bind-mounted termination log.
run_pod -- "${common[@]}" "$reg/smoke/app:v2"
expect_rc 11 "absent tag"
check "termination log headline" grep -qx "pullcheck: exit 11: 1 of 1 images not pullable" "$TERMLOG"
check "termination log has the not_found line for $reg/smoke/app:v2" grep -q "^not_found $reg/smoke/app:v2: " "$TERMLOG"
sed 's/^/     termination-log: /' "$TERMLOG"

# 3. The process runs as 65532:65532: a file it creates is owned by it.
run_pod -- check --ca-file /etc/pullcheck/ca.pem --pull-secrets /var/run/pullcheck/secrets \
  --no-docker-config --termination-log /run/out/created-by-pullcheck "$reg/smoke/app:v1"
expect_rc 0 "termination log written to a new file in a bind-mounted directory"
created=$(stat -c '%u:%g' "$work/out/created-by-pullcheck" 2>/dev/null || echo missing)
check "that file is owned by $uid:$gid (got $created)" [ "$created" = "$uid:$gid" ]

# 4. ... and without any capability: a pull secret readable only by root is unreadable.
run_pod --secrets "$work/secrets-root" -- "${common[@]}" "$reg/smoke/app:v1"
expect_rc 2 "root-only pull secret is a usage error (no root, no CAP_DAC_OVERRIDE)"

# 5. Read-only root filesystem: writing there fails, and the exit code is unchanged.
run_pod -- check --ca-file /etc/pullcheck/ca.pem --no-docker-config --termination-log /termination-log \
  "$reg/smoke/app:v1"
expect_rc 0 "termination log on the root filesystem does not change the verdict"
check "writing to / failed with EROFS" grep -q "termination log /termination-log: Read-only file system" <<<"$OUT"

# 6. No CA mounted: the image holds no CA files, only the built-in roots: TLS fails, 20.
run_pod --no-ca -- check --no-docker-config --termination-log /dev/termination-log --timeout 5 \
  "$reg/smoke/app:v1"
expect_rc 20 "without the test CA the TLS registry is untrusted (transient)"

elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
echo "image-smoke: image $digest, $size bytes; $n containers run under runc; ${elapsed_ms} ms in all"
echo "$passed passed, $failed failed"
summary_printed=1
[ "$failed" = 0 ]
