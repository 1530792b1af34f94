#!/usr/bin/env bash
# Build (once) and cache the Go tools that pullcheck's tests and benchmarks use,
# from source through the Go module proxy, at pinned versions.
#
#   export PATH="$(scripts/go-tools.sh):$PATH"          # all tools
#   export PATH="$(scripts/go-tools.sh helm crane regctl):$PATH"
#   scripts/go-tools.sh --versions                       # print the pins
#
# stdout: only the bin directory (so it can be used in $(...)); logs go to stderr.
# Cache:  ${PULLCHECK_TOOLS:-$HOME/.cache/pullcheck-tools}/bin, one stamp file per
#         tool in .../stamps; a tool is rebuilt only when its stamp (version +
#         recipe) differs or its binary is missing.
# Exit:   0 ok, 2 usage, 3 no working `go`, 1 a build failed.
# Docs:   docs/test-infrastructure.md
set -euo pipefail

# ---- pinned versions ---------------------------------------------------------
KUBERNETES_VERSION=v1.35.4   # kube-apiserver, kubectl (k8s.io/kubernetes; go 1.25 directive)
ETCD_VERSION=v3.6.16         # etcd (go.etcd.io/etcd/server/v3; k8s 1.35 ships etcd 3.6)
HELM_VERSION=v3.22.0         # helm (helm.sh/helm/v3)
CRANE_VERSION=v0.22.1        # crane (github.com/google/go-containerregistry)
REGCTL_VERSION=v0.11.7       # regctl (github.com/regclient/regclient)
ECR_PROVIDER_VERSION=v1.35.3 # ecr-credential-provider (k8s.io/cloud-provider-aws; follows the k8s minor)
KUEUE_VERSION=v0.19.2        # kueue controller manager (sigs.k8s.io/kueue; issue 23's harness)
KREW_VERSION=v0.5.0          # krew (sigs.k8s.io/krew; scripts/krew-test.sh installs the plugin with it)
# Bump when a build recipe (flags, wrapper module) changes, to force rebuilds.
RECIPE=1

ALL_TOOLS=(etcd kube-apiserver kubectl helm crane regctl)
# Built only when named (scripts/provider-e2e.sh does): not needed by scripts/test.sh.
EXTRA_TOOLS=(ecr-credential-provider kueue krew)

TOOLS_DIR=${PULLCHECK_TOOLS:-${HOME:-/root}/.cache/pullcheck-tools}
BIN_DIR=$TOOLS_DIR/bin
STAMP_DIR=$TOOLS_DIR/stamps
SRC_DIR=$TOOLS_DIR/src
JOBS=${PULLCHECK_TOOLS_JOBS:-2}

# Everything below logs to stderr; the bin dir is printed on the saved stdout (fd 3).
exec 3>&1 1>&2

log() { printf '[go-tools] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  cat >&2 <<EOF
usage: scripts/go-tools.sh [--versions | --help] [tool...]
tools: ${ALL_TOOLS[*]}   (default: all)
       ${EXTRA_TOOLS[*]}   (only when named)
env:   PULLCHECK_TOOLS (cache root, default \$HOME/.cache/pullcheck-tools),
       PULLCHECK_TOOLS_JOBS (go build -p, default 2), GOCACHE/GOMODCACHE/GOPROXY as usual
EOF
}

version_of() {
  case $1 in
    kube-apiserver|kubectl) echo "$KUBERNETES_VERSION" ;;
    etcd) echo "$ETCD_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    crane) echo "$CRANE_VERSION" ;;
    regctl) echo "$REGCTL_VERSION" ;;
    ecr-credential-provider) echo "$ECR_PROVIDER_VERSION" ;;
    kueue) echo "$KUEUE_VERSION" ;;
    krew) echo "$KREW_VERSION" ;;
    *) return 1 ;;
  esac
}

# ---- arguments ---------------------------------------------------------------
want=()
for a in "$@"; do
  case $a in
    -h|--help) usage; exit 0 ;;
    --versions)
      for t in "${ALL_TOOLS[@]}" "${EXTRA_TOOLS[@]}"; do printf '%s\t%s\n' "$t" "$(version_of "$t")" >&3; done
      exit 0 ;;
    -*) usage; exit 2 ;;
    *) version_of "$a" >/dev/null || { log "unknown tool: $a"; usage; exit 2; }
       want+=("$a") ;;
  esac
done
[ ${#want[@]} -gt 0 ] || want=("${ALL_TOOLS[@]}")

# ---- Go ----------------------------------------------------------------------
if ! command -v go >/dev/null 2>&1 || ! GO_VERSION=$(go version 2>&1); then
  log "error: a working Go toolchain is required (\`go version\` failed${GO_VERSION:+: $GO_VERSION})."
  log "       Install Go >= 1.26 and put it on PATH; the tools are built from the Go module proxy."
  exit 3
fi
# Never let a module's toolchain line download another Go behind our back; a caller
# can still opt in (e.g. GOTOOLCHAIN=go1.27.3).
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
# Sane on a 2-core machine shared with cargo builds.
export GOMAXPROCS=${GOMAXPROCS:-$JOBS}
NICE=()
command -v nice >/dev/null 2>&1 && NICE=(nice -n "${PULLCHECK_TOOLS_NICE:-10}")
log "$GO_VERSION (GOTOOLCHAIN=$GOTOOLCHAIN, GOCACHE=$(go env GOCACHE), GOMODCACHE=$(go env GOMODCACHE))"

mkdir -p "$BIN_DIR" "$STAMP_DIR" "$SRC_DIR"

stamp_text() { printf '%s %s recipe=%s\n' "$1" "$(version_of "$1")" "$RECIPE"; }
is_fresh() {
  [ -x "$BIN_DIR/$1" ] && [ -f "$STAMP_DIR/$1" ] && [ "$(cat "$STAMP_DIR/$1")" = "$(stamp_text "$1")" ]
}
# Fast path: everything asked for is cached; no lock (another run may be building
# other tools), no go command.
all_fresh=1
for t in "${want[@]}"; do is_fresh "$t" || { all_fresh=; break; }; done
if [ -n "$all_fresh" ]; then
  log "cached: ${want[*]}"
  echo "$BIN_DIR" >&3
  exit 0
fi

# One builder at a time per cache dir (CI jobs, parallel test runs).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$TOOLS_DIR/.lock"
  if ! flock -n 9; then
    log "waiting for another go-tools.sh holding $TOOLS_DIR/.lock"
    flock 9
  fi
fi

# install_bin TOOL BUILT_FILE SECONDS
install_bin() {
  install -m 0755 "$2" "$BIN_DIR/.$1.new"
  mv -f "$BIN_DIR/.$1.new" "$BIN_DIR/$1"
  stamp_text "$1" >"$STAMP_DIR/$1"
  printf '%s\t%s\t%ss\t%s\t%s\n' "$(date -u +%FT%TZ)" "$1 $(version_of "$1")" "$3" \
    "$(go env GOVERSION)" "$(nproc 2>/dev/null || echo ?)cpu" >>"$TOOLS_DIR/build-times.log"
  log "installed $1 $(version_of "$1") -> $BIN_DIR/$1 (${3}s)"
}

gobuild() { "${NICE[@]}" go build -p "$JOBS" -trimpath "$@"; }
goinstall() { "${NICE[@]}" go install -p "$JOBS" -trimpath "$@"; }

modinfo() { # modinfo MODULE@VERSION FIELD -> the field of `go mod download -json`
  go mod download -json "$1" | sed -n "s/^[[:space:]]*\"$2\": \"\(.*\)\",\{0,1\}\$/\1/p"
}

# ---- kubernetes: wrapper module --------------------------------------------
# k8s.io/kubernetes can't be `go install`ed: its go.mod replaces the k8s.io/*
# staging modules with ./staging/src/... directories. The wrapper module requires
# k8s.io/kubernetes and replaces each staging module with its published v0.Y.Z.
build_kubernetes() { # build_kubernetes tool...
  local v=$KUBERNETES_VERSION
  local minor=${v#v1.}; minor=${minor%%.*}
  local patch=${v##*.}
  local staging=v0.$minor.$patch
  local dir=$SRC_DIR/kubernetes-$v
  local gomod time
  log "kubernetes $v: preparing wrapper module in $dir (staging modules at $staging)"
  gomod=$(modinfo "k8s.io/kubernetes@$v" GoMod)
  [ -f "$gomod" ] || die "go mod download k8s.io/kubernetes@$v gave no go.mod"
  time=$(modinfo "k8s.io/kubernetes@$v" Time)
  mkdir -p "$dir"
  {
    echo "// Generated by scripts/go-tools.sh: builds k8s.io/kubernetes $v commands."
    echo "module pullcheck.local/kubernetes-tools"
    echo
    grep -E '^go [0-9]' "$gomod"
    grep -E '^godebug ' "$gomod" || true
    echo
    echo "require k8s.io/kubernetes $v"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\)[[:space:]]*=>[[:space:]]*\./staging/src/\1[[:space:]]*$#\1#p' "$gomod" |
      while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
    echo ")"
  } >"$dir/go.mod.new"
  grep -q "=> k8s.io/api $staging" "$dir/go.mod.new" || die "found no staging replace block in $gomod"
  if ! cmp -s "$dir/go.mod.new" "$dir/go.mod.gen" 2>/dev/null; then
    cp "$dir/go.mod.new" "$dir/go.mod"; mv "$dir/go.mod.new" "$dir/go.mod.gen"; rm -f "$dir/go.sum"
  else
    rm -f "$dir/go.mod.new"
  fi
  local pkgs=() t
  for t in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$t"); done
  log "kubernetes $v: resolving modules (go get ${pkgs[*]})"
  (cd "$dir" && go get "${pkgs[@]/%/@$v}")
  local ld="-s -w"
  ld+=" -X k8s.io/component-base/version.gitVersion=$v"
  ld+=" -X k8s.io/component-base/version.gitMajor=1"
  ld+=" -X k8s.io/component-base/version.gitMinor=$minor"
  ld+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ld+=" -X k8s.io/component-base/version.gitCommit=$v"
  ld+=" -X k8s.io/component-base/version.buildDate=${time:-1970-01-01T00:00:00Z}"
  # client-go's copy of the version (kubectl's user agent, `kubectl version`)
  ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$v"
  ld+=" -X k8s.io/client-go/pkg/version.gitMajor=1"
  ld+=" -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  ld+=" -X k8s.io/client-go/pkg/version.gitTreeState=clean"
  local out; out=$(mktemp -d "$TOOLS_DIR/.build.XXXXXX")
  local start=$SECONDS
  log "kubernetes $v: go build ${pkgs[*]} (this takes a while on 2 cores)"
  (cd "$dir" && gobuild -mod=mod -ldflags "$ld" -o "$out/" "${pkgs[@]}")
  local secs=$((SECONDS - start))
  for t in "$@"; do install_bin "$t" "$out/$t" "$secs"; done
  rm -rf "$out"
}

# ---- etcd: wrapper module ------------------------------------------------------
# go.etcd.io/etcd/server/v3 has relative `replace` lines (../api, ../client/...),
# so it can't be `go install`ed either; pin its sibling modules to the same tag.
build_etcd() {
  local v=$ETCD_VERSION dir=$SRC_DIR/etcd-$ETCD_VERSION
  mkdir -p "$dir"
  cat >"$dir/go.mod.new" <<EOF
// Generated by scripts/go-tools.sh: builds etcd $v.
module pullcheck.local/etcd-tools

go 1.26.0

require (
	go.etcd.io/etcd/api/v3 $v
	go.etcd.io/etcd/client/pkg/v3 $v
	go.etcd.io/etcd/client/v3 $v
	go.etcd.io/etcd/pkg/v3 $v
	go.etcd.io/etcd/server/v3 $v
)
EOF
  if ! cmp -s "$dir/go.mod.new" "$dir/go.mod.gen" 2>/dev/null; then
    cp "$dir/go.mod.new" "$dir/go.mod"; mv "$dir/go.mod.new" "$dir/go.mod.gen"; rm -f "$dir/go.sum"
  else
    rm -f "$dir/go.mod.new"
  fi
  log "etcd $v: resolving modules"
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$v")
  # the etcd main package is the server module's root (server/main.go) in 3.5/3.6
  local out; out=$(mktemp -d "$TOOLS_DIR/.build.XXXXXX")
  local start=$SECONDS
  log "etcd $v: go build go.etcd.io/etcd/server/v3"
  (cd "$dir" && gobuild -mod=mod -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$v" \
    -o "$out/etcd" go.etcd.io/etcd/server/v3)
  install_bin etcd "$out/etcd" $((SECONDS - start))
  rm -rf "$out"
}

# ---- ecr-credential-provider: wrapper module ------------------------------------
# k8s.io/cloud-provider-aws's go.mod has a `replace` (github.com/google/cel-go =>
# github.com/cel-expr/cel-go), and `go install pkg@version` refuses any module with
# one. The wrapper requires the module and carries over its non-relative replaces, so
# every dependency resolves to the version upstream builds with.
build_ecr-credential-provider() {
  local v=$ECR_PROVIDER_VERSION dir=$SRC_DIR/cloud-provider-aws-$ECR_PROVIDER_VERSION gomod
  local pkg=k8s.io/cloud-provider-aws/cmd/ecr-credential-provider
  gomod=$(modinfo "k8s.io/cloud-provider-aws@$v" GoMod)
  [ -f "$gomod" ] || die "go mod download k8s.io/cloud-provider-aws@$v gave no go.mod"
  mkdir -p "$dir"
  {
    echo "// Generated by scripts/go-tools.sh: builds k8s.io/cloud-provider-aws $v commands."
    echo "module pullcheck.local/cloud-provider-aws-tools"
    echo
    grep -E '^go [0-9]' "$gomod"
    echo
    echo "require k8s.io/cloud-provider-aws $v"
    echo
    # single-line `replace a => b vX` only; a relative target (./, ../) can't be carried over
    grep -E '^replace [^ ]+ => [^./][^ ]* v[^ ]+$' "$gomod" || true
  } >"$dir/go.mod.new"
  if ! cmp -s "$dir/go.mod.new" "$dir/go.mod.gen" 2>/dev/null; then
    cp "$dir/go.mod.new" "$dir/go.mod"; mv "$dir/go.mod.new" "$dir/go.mod.gen"; rm -f "$dir/go.sum"
  else
    rm -f "$dir/go.mod.new"
  fi
  log "ecr-credential-provider $v: resolving modules (go get $pkg@$v)"
  (cd "$dir" && go get "$pkg@$v")
  local out; out=$(mktemp -d "$TOOLS_DIR/.build.XXXXXX")
  local start=$SECONDS
  log "ecr-credential-provider $v: go build $pkg"
  # the same two stamps as upstream's Makefile (`ecr-credential-provider --version`)
  (cd "$dir" && gobuild -mod=mod -ldflags "-s -w -X main.gitVersion=$v -X k8s.io/component-base/version.gitVersion=$v" -o "$out/ecr-credential-provider" "$pkg")
  install_bin ecr-credential-provider "$out/ecr-credential-provider" $((SECONDS - start))
  rm -rf "$out"
}

# ---- plain `go install module/cmd@version` -------------------------------------
build_helm() {
  local v=$HELM_VERSION gomod kmin
  gomod=$(modinfo "helm.sh/helm/v3@$v" GoMod)
  # as helm's Makefile: the default .Capabilities.KubeVersion follows client-go
  kmin=$(sed -n 's#^[[:space:]]*k8s\.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$gomod" | head -1)
  local ld="-s -w -X helm.sh/helm/v3/internal/version.version=$v"
  ld+=" -X helm.sh/helm/v3/internal/version.metadata="
  ld+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  if [ -n "$kmin" ]; then
    ld+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kmin"
    ld+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kmin"
  fi
  go_install_tool helm "helm.sh/helm/v3/cmd/helm@$v" "$ld"
}
build_crane() {
  go_install_tool crane "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION" \
    "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$CRANE_VERSION"
}
build_regctl() {
  go_install_tool regctl "github.com/regclient/regclient/cmd/regctl@$REGCTL_VERSION" \
    "-s -w -X github.com/regclient/regclient/internal/version.vcsTag=$REGCTL_VERSION"
}
build_kueue() {
  # The module has no replace directives, so `go install PKG@VERSION` builds it as pinned.
  go_install_tool kueue "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" "-s -w"
}
build_krew() {
  # No replace directives either. The two stamps are the ones krew's release build sets
  # (internal/version), so `krew version` names the pin rather than "unknown".
  go_install_tool krew "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" \
    "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$KREW_VERSION -X sigs.k8s.io/krew/internal/version.gitCommit=$KREW_VERSION"
}
go_install_tool() { # TOOL PKG@VERSION LDFLAGS
  local out; out=$(mktemp -d "$TOOLS_DIR/.build.XXXXXX")
  local start=$SECONDS
  log "$1: go install $2"
  GOBIN=$out goinstall -ldflags "$3" "$2"
  install_bin "$1" "$out/$1" $((SECONDS - start))
  rm -rf "$out"
}

# ---- main ----------------------------------------------------------------------
trap 'rm -rf "$TOOLS_DIR"/.build.* 2>/dev/null || true' EXIT
# run_build FN ARGS...: run in a subshell with errexit on, result in $rc, so one
# failing tool doesn't stop the others. (Never call it as `run_build ... || x`:
# bash ignores `set -e` in everything run from such a context.)
run_build() { set +e; (set -e; "$@"); rc=$?; set -e; }
k8s=() failed=()
for t in "${want[@]}"; do
  if is_fresh "$t"; then log "$t $(version_of "$t") is cached"; continue; fi
  case $t in
    kube-apiserver|kubectl) k8s+=("$t") ;;
    *) run_build "build_$t"; [ "$rc" = 0 ] || failed+=("$t") ;;
  esac
done
# kube-apiserver and kubectl share one wrapper module and one go build.
if [ ${#k8s[@]} -gt 0 ]; then
  run_build build_kubernetes "${k8s[@]}"; [ "$rc" = 0 ] || failed+=("${k8s[@]}")
fi
if [ ${#failed[@]} -gt 0 ]; then
  log "error: failed to build: ${failed[*]}"
  exit 1
fi
echo "$BIN_DIR" >&3
