#!/usr/bin/env bash
# pullcheck installed as kubectl users install plugins: the archives and plugin.yaml of
# scripts/krew-manifest.sh installed by a real krew (scripts/go-tools.sh krew, built from the
# Go module proxy), offline, then `kubectl pullcheck` run by the real kubectl against a real
# kube-apiserver (scripts/control-plane.sh) with nothing but the kubeconfig.
#
#   scripts/krew-test.sh
#
# 1. the static binaries (scripts/build-static.sh all: cargo rebuilds nothing when they are
#    fresh) → archives + plugin.yaml;
# 2. `kubectl krew install --manifest=plugin.yaml --archive=…` with KREW_NO_UPGRADE_CHECK=1,
#    a temporary KREW_ROOT whose bin is on PATH, in a network namespace with no network
#    (unshare --net: nothing can be fetched, the manifest's uri included); the amd64 archive
#    installs and runs, the arm64 archive is refused on amd64 (its sha256 is not linux/amd64's),
#    and with KREW_ARCH=arm64 it installs the aarch64 binary;
# 3. `kubectl pullcheck --help`, `kubectl pullcheck audit` (-A, the context's namespace, -n)
#    against workloads on the control plane whose images are present and missing on a real
#    docker-registry, with only KUBECONFIG set; the completion kubectl asks of the plugin
#    (`kubectl __complete pullcheck …`) offers the kubeconfig's context and the cluster's
#    namespaces.
#
# Needs root (unshare), Go ≥ 1.26 for the tools, and what scripts/deps.sh installs.
# The last line is "N passed, M failed"; exit 0 only when none failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
t0=$SECONDS
log() { printf '[krew-test] %s\n' "$*" >&2; }

scripts/deps.sh registry test static cross >/dev/null
tools=$(scripts/go-tools.sh etcd kube-apiserver kubectl krew)
mapfile -t bins < <(scripts/build-static.sh all | cut -d' ' -f1)
[ ${#bins[@]} = 2 ] || { log "build-static.sh gave ${#bins[@]} binaries, not 2"; exit 1; }
log "tools and static binaries ready in $((SECONDS - t0))s"

work=$(mktemp -d "${TMPDIR:-/tmp}/pullcheck-krew.XXXXXX")
pids=()
export PULLCHECK_CP_DIR=$work/cp PULLCHECK_CP_BIN=$tools
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  scripts/control-plane.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
# run OUT CMD...: stdout to OUT, stderr to OUT.err, exit status in RC.
run() { local out=$1; shift; set +e; "$@" >"$out" 2>"$out.err"; RC=$?; set -e; }

# --- the archives and the manifest -------------------------------------------------------
scripts/krew-manifest.sh --out "$work/dist" "${bins[@]}" >"$work/manifest.out"
amd64=$work/dist/kubectl-pullcheck_linux_amd64.tar.gz
arm64=$work/dist/kubectl-pullcheck_linux_arm64.tar.gz
for a in amd64 arm64; do
  f=$work/dist/kubectl-pullcheck_linux_$a.tar.gz
  sum=$(sha256sum "$f" | cut -d' ' -f1)
  check "plugin.yaml's linux/$a sha256 is its archive's ($sum)" \
    grep -qxF "    sha256: $sum" <(sed -n "/arch: $a\$/,/bin:/p" "$work/dist/plugin.yaml")
  check "the linux/$a archive holds LICENSE and kubectl-pullcheck" \
    [ "$(tar -tzf "$f" | tr '\n' ' ')" = "LICENSE kubectl-pullcheck " ]
done
cp -r "$work/dist" "$work/dist2"
scripts/krew-manifest.sh --out "$work/dist2" "${bins[@]}" >/dev/null
check "a second run writes the same bytes (reproducible archives, same manifest)" \
  diff -r "$work/dist" "$work/dist2"

# --- krew, offline ------------------------------------------------------------------------
mkdir -p "$work/bin" "$work/home"
ln -s "$tools/krew" "$work/bin/kubectl-krew"
krew_env() { # krew_env ROOT CMD...: CMD in a fresh network namespace, as a user with krew
  local root=$1; shift
  env -i PATH="$root/bin:$work/bin:$tools:/usr/bin:/bin" HOME="$work/home" \
    KREW_ROOT="$root" KREW_NO_UPGRADE_CHECK=1 ${KREW_ARCH:+KREW_ARCH=$KREW_ARCH} \
    unshare --net -- "$@"
}
root=$work/krew-root
version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
run "$work/install.out" krew_env "$root" kubectl krew install --manifest="$work/dist/plugin.yaml" --archive="$amd64"
[ "$RC" = 0 ] || sed 's/^/     ! /' "$work/install.out.err"
check "kubectl krew install --manifest --archive (amd64), offline: exit $RC" [ "$RC" = 0 ]
check "... says it installed pullcheck" grep -qF 'Installed plugin: pullcheck' "$work/install.out.err" "$work/install.out"
# (`kubectl krew list` needs the plugin index, which an offline krew never fetched.)
check "krew's receipt records pullcheck v$version from the detached manifest" \
  grep -qx "  version: v$version" "$root/receipts/pullcheck.yaml"
run "$work/plugins.out" krew_env "$root" kubectl plugin list --name-only
check "kubectl plugin list finds kubectl-pullcheck ($(tr '\n' ' ' <"$work/plugins.out"))" \
  grep -qx 'kubectl-pullcheck' "$work/plugins.out"
link=$(readlink "$root/bin/kubectl-pullcheck" || true)
check "KREW_ROOT/bin/kubectl-pullcheck links the installed binary ($link)" \
  [ "$link" = "$root/store/pullcheck/v$version/kubectl-pullcheck" ]
check "... which is the amd64 static binary, byte for byte" cmp -s "$root/bin/kubectl-pullcheck" "${bins[0]}"
run "$work/version.out" krew_env "$root" kubectl krew version
check "krew is the pinned v0.5.0" grep -qE '^GitTag +v0\.5\.0$' "$work/version.out"

# The wrong archive for this platform: krew checks linux/amd64's sha256 and refuses it.
run "$work/wrong.out" krew_env "$work/krew-wrong" kubectl krew install --manifest="$work/dist/plugin.yaml" --archive="$arm64"
check "the arm64 archive for linux/amd64 is refused (exit $RC): $(grep -o 'checksum does not match' "$work/wrong.out.err" | head -1)" \
  grep -qF 'checksum does not match' "$work/wrong.out.err"
# linux/arm64's entry, as krew on an arm64 machine picks it (KREW_ARCH).
KREW_ARCH=arm64 run "$work/arm.out" krew_env "$work/krew-arm64" kubectl krew install --manifest="$work/dist/plugin.yaml" --archive="$arm64"
check "with KREW_ARCH=arm64 the arm64 archive installs (exit $RC) the aarch64 binary" \
  cmp -s "$work/krew-arm64/bin/kubectl-pullcheck" "${bins[1]}"

# --- kubectl pullcheck, with only a kubeconfig ---------------------------------------------
cp_env=$(scripts/control-plane.sh start) || { log "the control plane did not start"; exit 1; }
eval "$(grep '^export PULLCHECK_CP_SERVER=' <<<"$cp_env")"
kubeconfig=$PULLCHECK_CP_DIR/kubeconfig
[ -f "$kubeconfig" ] || { log "control-plane.sh wrote no $kubeconfig"; exit 1; }
log "control plane up at $PULLCHECK_CP_SERVER"
kc() { "$tools/kubectl" --kubeconfig "$kubeconfig" "$@"; }
# As the user runs it: kubectl on PATH, the plugin found through KREW_ROOT/bin, KUBECONFIG
# and nothing else naming the cluster (no PULLCHECK_CP_*, no in-cluster variables).
user() {
  env -i PATH="$root/bin:$work/bin:$tools:/usr/bin:/bin" HOME="$work/home" KUBECONFIG="$kubeconfig" "$@"
}

port=$(free_port)
start_registry "$work/reg" "$port"; pids+=("$REG_PID")
reg=127.0.0.1:$port
push_image "$work/img" "$reg/team/app:v1"
ns=krew-e2e
kc create namespace "$ns" >/dev/null
kc -n "$ns" create deployment web --image="$reg/team/app:v1" >/dev/null
kc -n "$ns" create cronjob nightly --image="$reg/team/app:gone" --schedule='0 3 * * *' >/dev/null

run "$work/help.out" user kubectl pullcheck --help
check "kubectl pullcheck --help: exit $RC, usage says kubectl pullcheck" \
  grep -qx 'Usage: kubectl pullcheck \[OPTIONS\] <COMMAND>' "$work/help.out"
run "$work/audit-help.out" user kubectl pullcheck audit --help
check "kubectl pullcheck audit --help shows the kubectl examples" \
  grep -qF 'kubectl pullcheck audit -A' "$work/audit-help.out"

rows='[.workloads[] | .namespace + " " + .kind + "/" + .name + " " + ([.images[] | .image + "=" + .verdict] | join(","))] | join(";")'
run "$work/all.json" user kubectl pullcheck audit -A -o json --insecure-registry "$reg"
got=$(jq -r "$rows" "$work/all.json" 2>/dev/null || true)
check "kubectl pullcheck audit -A: exit 11 (not_found), the CronJob's missing tag and the Deployment's present one ($got)" \
  [ "$RC/$got" = "11/$ns CronJob/nightly $reg/team/app:gone=not_found;$ns Deployment/web $reg/team/app:v1=pullable" ]
check "... and stderr names the kubeconfig it used" \
  grep -qxF "pullcheck: using kubeconfig \$KUBECONFIG ($kubeconfig), context $(kc config current-context)" "$work/all.json.err"
run "$work/default.json" user kubectl pullcheck audit -o json --insecure-registry "$reg"
got=$(jq -r "$rows" "$work/default.json" 2>/dev/null || true)
check "kubectl pullcheck audit: the context's namespace (default, empty): exit 0, no workloads ('$got')" \
  [ "$RC/$got" = "0/" ]
run "$work/ns.txt" user kubectl pullcheck audit -n "$ns" --insecure-registry "$reg"
# Columns: NAMESPACE KIND/NAME CONTAINER IMAGE NEXT RUN VERDICT REASON (NEXT RUN is one word
# here: an RFC 3339 time for the CronJob, - for the Deployment).
check "kubectl pullcheck audit -n $ns: exit 11, the table's rows" \
  [ "$RC/$(awk 'NR > 1 && NF >= 6 && $1 == "'"$ns"'" {print $2, $6}' "$work/ns.txt" | tr '\n' ';')" = "11/CronJob/nightly not_found;Deployment/web pullable;" ]

# Completion through kubectl (1.26+ runs kubectl_complete-pullcheck; krew links only `bin`, so
# the user adds this link, as README says).
ln -s kubectl-pullcheck "$root/bin/kubectl_complete-pullcheck"
run "$work/ctx.out" user kubectl __complete pullcheck audit --context ''
check "kubectl completes pullcheck's --context with the kubeconfig's context" \
  [ "$(tr '\n' ' ' <"$work/ctx.out")" = "$(kc config get-contexts -o name) :4 " ]
kc create namespace krew-e2e-other >/dev/null
run "$work/ns.out" user kubectl __complete pullcheck watch -n krew-e2e
check "... and -n with the cluster's namespaces ($(tr '\n' ' ' <"$work/ns.out"))" \
  [ "$(tr '\n' ' ' <"$work/ns.out")" = "krew-e2e krew-e2e-other :4 " ]

log "took $((SECONDS - t0))s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
