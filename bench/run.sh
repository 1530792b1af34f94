#!/usr/bin/env bash
# pullcheck vs crane, regctl and skopeo, side by side, against Debian's docker-registry on
# loopback (bench/fixture.sh: plain HTTP and TLS + token). Regenerates docs/benchmarks.md.
#
#   bench/run.sh            full run (~15 min on 2 cores)
#   bench/run.sh --quick    fewer hyperfine runs, small webhook load (to try the harness)
#
# Env: BENCH_DIR (work dir, default target/bench), BENCH_OUT (default docs/benchmarks.md),
#      BENCH_SKIP_BUILD=1 (reuse target/release/pullcheck and the static binary).
# Needs: hyperfine, skopeo, docker-registry, openssl, curl, jq, python3 (scripts/deps.sh),
#        crane and regctl (scripts/go-tools.sh), /usr/bin/time, wrk (webhook section).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=0
[ "${1:-}" = --quick ] && quick=1
work=${BENCH_DIR:-$root/target/bench}
out=${BENCH_OUT:-$root/docs/benchmarks.md}
log() { printf '[bench] %s\n' "$*" >&2; }

if [ $quick = 1 ]; then
  R_SINGLE=10 W_SINGLE=2 R_REFS=2 W_REFS=0 R_VERSION=20 RSS_RUNS=3 WRK_SECS=3
else
  R_SINGLE=40 W_SINGLE=5 R_REFS=5 W_REFS=1 R_VERSION=100 RSS_RUNS=7 WRK_SECS=10
fi

# ---- tools and builds ------------------------------------------------------------------
scripts/deps.sh
command -v wrk >/dev/null || { apt-get install -y -qq wrk >/dev/null 2>&1 || true; }
gobin=$(scripts/go-tools.sh crane regctl)
export PATH="$gobin:$PATH"
for t in hyperfine skopeo docker-registry crane regctl jq python3 /usr/bin/time; do
  command -v "$t" >/dev/null || { log "missing $t"; exit 1; }
done

rm -rf "$work"
mkdir -p "$work/bin" "$work/results" "$work/home"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
rustc_version=$(rustc --version)   # before HOME changes below (rustup lives under HOME)
go_version=$(go version 2>/dev/null | cut -d' ' -f3)
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  log "building pullcheck (release, then static musl)"
  cargo build --release --locked --bin pullcheck >&2
  scripts/build-static.sh >"$work/results/static.txt"
else
  echo "target/x86_64-unknown-linux-musl/release/pullcheck $(stat -c %s target/x86_64-unknown-linux-musl/release/pullcheck) bytes" >"$work/results/static.txt"
fi
# Copies, so a concurrent build in the shared target dir can't swap binaries mid-run.
cp target/release/pullcheck "$work/bin/pullcheck"
cp target/x86_64-unknown-linux-musl/release/pullcheck "$work/bin/pullcheck-static"
PC=$work/bin/pullcheck
PCS=$work/bin/pullcheck-static
if [ -x scripts/build-image.sh ]; then
  scripts/build-image.sh --out "$work/image" "$PCS" >"$work/results/image.txt" 2>&1 \
    || echo "build-image failed" >>"$work/results/image.txt"
else
  echo "scripts/build-image.sh not present in this build" >"$work/results/image.txt"
fi

# ---- fixture -----------------------------------------------------------------------------
fixture=$work/fixture
trap 'bench/fixture.sh down "$fixture" || true' EXIT
bench/fixture.sh up "$fixture" >/dev/null
# shellcheck disable=SC1091
. "$fixture/env"

# Same trust and the same (empty) configuration for every tool: crane and regctl (Go) and
# pullcheck read SSL_CERT_FILE; skopeo reads --cert-dir. HOME is an empty directory, so
# nobody finds a docker/containers/regctl config or credentials.
export HOME=$work/home SSL_CERT_FILE=$CA
unset DOCKER_CONFIG REGISTRY_AUTH_FILE REGCTL_CONFIG RUST_LOG 2>/dev/null || true

# Per mode: registry and the flags each tool needs for it.
mode_setup() {
  case $1 in
    token)
      REG=$TOKEN RLOG=$TOKEN_LOG
      PCF=""                                     # CA via SSL_CERT_FILE
      CRF=""                                     # CA via SSL_CERT_FILE
      RGF=""                                     # CA via SSL_CERT_FILE
      SKF="--cert-dir $CERT_DIR" ;;
    plain)
      REG=$PLAIN RLOG=$PLAIN_LOG
      PCF="--insecure-registry $PLAIN"
      CRF="--insecure"
      RGF="--host reg=$PLAIN,tls=disabled"
      SKF="--tls-verify=false" ;;
  esac
}

# Command lines per tool and case ({IMG} is replaced).
cmd_for() { # TOOL CASE IMG
  local t=$1 c=$2 img=$3 plat=""
  case $t in
    pullcheck|pullcheck-static)
      local bin=$PC; [ "$t" = pullcheck-static ] && bin=$PCS
      [ "$c" = platform ] && plat=" --platform linux/amd64"
      echo "$bin check $PCF$plat $img" | tr -s ' ' ;;
    crane)
      [ "$c" = platform ] && plat=" --platform linux/amd64"
      echo "crane digest $CRF$plat $img" | tr -s ' ' ;;
    regctl)
      [ "$c" = platform ] && plat=" --platform linux/amd64"
      echo "regctl $RGF image digest$plat $img" | tr -s ' ' ;;
    skopeo)
      [ "$c" = platform ] && plat=" --override-os linux --override-arch amd64"
      echo "skopeo inspect $SKF --no-tags$plat --format {{.Digest}} docker://$img" | tr -s ' ' ;;
  esac
}

TOOLS=(pullcheck crane regctl skopeo)

# hf NAME RUNS WARMUP SHELL(0|1) -- NAME1 CMD1 NAME2 CMD2 ...
hf() {
  local name=$1 runs=$2 warm=$3 shell=$4; shift 5
  local args=(--runs "$runs" --warmup "$warm" --ignore-failure --style basic
              --export-json "$work/results/hf-$name.json")
  [ "$shell" = 0 ] && args+=(-N)
  while [ $# -gt 0 ]; do args+=(-n "$1" "$2"); shift 2; done
  log "hyperfine $name"
  hyperfine "${args[@]}" >"$work/results/hf-$name.txt" 2>&1
}

# Wait until a log file stops growing.
quiet() { local f=$1 last=-1 n; for _ in $(seq 50); do n=$(stat -c %s "$f"); [ "$n" = "$last" ] && return; last=$n; sleep 0.05; done; }

# count MODE CASE TOOL CMD...: registry requests and token requests of one run.
count() {
  local mode=$1 case=$2 tool=$3; shift 3
  quiet "$RLOG"; quiet "$TOKEN_SRV_LOG"
  local r0 t0 r1 t1
  r0=$(wc -l <"$RLOG"); t0=$(wc -l <"$TOKEN_SRV_LOG")
  bash -c "$*" >/dev/null 2>&1 || true
  quiet "$RLOG"; quiet "$TOKEN_SRV_LOG"
  r1=$(wc -l <"$RLOG"); t1=$(wc -l <"$TOKEN_SRV_LOG")
  local seq
  seq=$(tail -n +$((r0 + 1)) "$RLOG" | head -n $((r1 - r0)) |
    awk '{m=$6; gsub(/"/,"",m); p=$7; sub(/^\/v2\/[^ ]*\/manifests\/sha256:.*/,"manifest@digest",p);
          sub(/^\/v2\/[^ ]*\/manifests\/.*/,"manifest:tag",p); sub(/^\/v2\/[^ ]*\/blobs\/.*/,"blob",p);
          printf "%s%s %s %s", (NR>1?", ":""), m, p, $9}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$case" "$tool" $((r1 - r0)) $((t1 - t0)) "$seq" >>"$work/results/requests.tsv"
}

# rss MODE CASE TOOL CMD...: median peak RSS (KiB) over RSS_RUNS runs.
rss() {
  local mode=$1 case=$2 tool=$3; shift 3
  local vals=() v i
  for i in $(seq "$RSS_RUNS"); do
    v=$({ bash -c "/usr/bin/time -v $* 2>&1 >/dev/null" || true; } | sed -n 's/.*Maximum resident set size (kbytes): //p' | tail -1)
    vals+=("$v")
  done
  v=$(printf '%s\n' "${vals[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%s\t%s\t%s\t%s\t%s\n' "$mode" "$case" "$tool" "$v" "${vals[*]}" >>"$work/results/rss.tsv"
}

: >"$work/results/requests.tsv"; : >"$work/results/rss.tsv"; : >"$work/results/commands.tsv"

# ---- the 100 references ------------------------------------------------------------------
refs_file() { # MODE -> writes refs-MODE.txt and refs-MODE-docker.txt
  local reg=$1 f=$work/refs-$2.txt i
  : >"$f"
  for i in $(seq -w 0 49); do echo "$reg/bench/r$i:v1"; echo "$reg/bench/r$i:missing"; done >>"$f"
  sed 's#^#docker://#' "$f" >"$work/refs-$2-docker.txt"
}

for mode in token plain; do
  mode_setup $mode
  refs_file "$REG" $mode
  app=$REG/bench/app:v1 missing=$REG/bench/app:missing multi=$REG/bench/multi:v1

  # Single-image cases: one hyperfine invocation per case, every tool in it.
  for case in present missing platform; do
    case $case in present) img=$app ;; missing) img=$missing ;; platform) img=$multi ;; esac
    args=()
    for t in "${TOOLS[@]}"; do args+=("$t" "$(cmd_for $t $case "$img")"); done
    args+=(pullcheck-static "$(cmd_for pullcheck-static $case "$img")")
    for ((i = 0; i < ${#args[@]}; i += 2)); do
      printf '%s\t%s\t%s\t%s\n' "$mode" "$case" "${args[i]}" "${args[i+1]}" >>"$work/results/commands.tsv"
    done
    hf "$mode-$case" "$R_SINGLE" "$W_SINGLE" 0 -- "${args[@]}"
    for t in "${TOOLS[@]}"; do count $mode $case $t "$(cmd_for $t $case "$img")"; done
  done

  # 100 references: pullcheck takes them all in one invocation; the peers take one image
  # per invocation, so they run as the idiomatic xargs loop, sequential and 8-way.
  refs=$work/refs-$mode.txt drefs=$work/refs-$mode-docker.txt
  one_pc="$PC check${PCF:+ $PCF} $(tr '\n' ' ' <"$refs")"
  one_pcs="$PCS check${PCF:+ $PCF} $(tr '\n' ' ' <"$refs")"
  args=(pullcheck "$one_pc" pullcheck-static "$one_pcs")
  for t in crane regctl skopeo pullcheck; do
    base=$(cmd_for $t refs X); base=${base% X}; base=${base% docker://X}
    f=$refs; [ $t = skopeo ] && f=$drefs
    args+=("$t xargs -P8" "xargs -P8 -n1 $base <$f")
    [ $t != pullcheck ] && args+=("$t xargs (sequential)" "xargs -n1 $base <$f")
  done
  # Calibration: the registry's own floor for these 100 manifest GETs — curl on one
  # connection, sequential, with a token (covering all 50 repositories) fetched beforehand.
  floor=$work/floor-$mode.curl
  : >"$floor"
  if [ $mode = token ]; then
    scopes=$(for i in $(seq -w 0 49); do printf '&scope=repository:bench/r%s:pull' "$i"; done)
    tok=$(curl -fsS --cacert "$CA" "$TOKEN_REALM?service=$TOKEN_SERVICE$scopes" | jq -r .token)
    echo "header = \"Authorization: Bearer $tok\"" >>"$floor"
  fi
  scheme=http; [ $mode = token ] && scheme=https
  echo 'header = "Accept: application/vnd.oci.image.manifest.v1+json"' >>"$floor"
  while read -r ref; do
    r=${ref#*/}; repo=${r%:*}; tag=${r##*:}
    printf 'url = "%s://%s/v2/%s/manifests/%s"\noutput = "/dev/null"\n' "$scheme" "$REG" "$repo" "$tag" >>"$floor"
  done <"$refs"
  args+=("curl, 100 GETs on one connection (registry floor)" "curl -s --cacert $CA -K $floor")
  for ((i = 0; i < ${#args[@]}; i += 2)); do
    c=${args[i+1]}
    [ "${args[i]}" = pullcheck ] && c="$PC check${PCF:+ $PCF} \$(cat $refs)  # 100 images, one process"
    [ "${args[i]}" = pullcheck-static ] && c="$PCS check${PCF:+ $PCF} \$(cat $refs)  # 100 images, one process"
    printf '%s\t%s\t%s\t%s\n' "$mode" "refs" "${args[i]}" "$c" >>"$work/results/commands.tsv"
  done
  hf "$mode-refs" "$R_REFS" "$W_REFS" 1 -- "${args[@]}"
  count $mode refs pullcheck "$one_pc"
  for t in crane regctl skopeo; do
    base=$(cmd_for $t refs X); base=${base% X}; base=${base% docker://X}
    f=$refs; [ $t = skopeo ] && f=$drefs
    count $mode refs $t "xargs -n1 $base <$f"
  done

  # Peak RSS: one present tag (all tools), 100 refs in one pullcheck process.
  for t in "${TOOLS[@]}" pullcheck-static; do rss $mode present $t "$(cmd_for $t present "$app")"; done
  rss $mode refs pullcheck "$one_pc"
done

# Cold process start.
args=(pullcheck "$PC --version" pullcheck-static "$PCS --version" crane "crane version"
      regctl "regctl version" skopeo "skopeo --version")
for ((i = 0; i < ${#args[@]}; i += 2)); do
  printf '%s\t%s\t%s\t%s\n' "-" "version" "${args[i]}" "${args[i+1]}" >>"$work/results/commands.tsv"
done
hf version "$R_VERSION" 10 0 -- "${args[@]}"
for ((i = 0; i < ${#args[@]}; i += 2)); do rss - version "${args[i]}" "${args[i+1]}"; done

# ---- webhook -----------------------------------------------------------------------------
if "$PC" webhook --help >/dev/null 2>&1 && command -v wrk >/dev/null; then
  log "webhook"
  BENCH_QUICK=$quick WRK_SECS=$WRK_SECS PC=$PC bench/webhook.sh "$work" >"$work/results/webhook.txt" 2>"$work/results/webhook.err" \
    || log "webhook bench failed: see $work/results/webhook.err"
else
  echo "not measured: webhook not available in this build (or wrk missing)" >"$work/results/webhook.txt"
fi

# ---- report ----------------------------------------------------------------------------------
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
{
  echo "date	$(date -u +%FT%TZ)"
  echo "commit	$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Cargo.toml Cargo.lock || echo ' (+ uncommitted changes in src)')"
  echo "cpu	$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) × $(nproc)"
  echo "memory	$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel	$(uname -sr)"
  echo "os	$(. /etc/os-release; echo "$PRETTY_NAME")"
  echo "load_start	$load_start"
  echo "load_end	$load_end"
  echo "pullcheck	$("$PC" --version)"
  echo "rustc	$rustc_version"
  echo "crane	$(crane version)"
  echo "regctl	$(regctl version --format '{{.VCSTag}}')"
  echo "skopeo	$(skopeo --version)"
  echo "go	$go_version (built crane and regctl)"
  echo "docker-registry	$(docker-registry --version)"
  echo "hyperfine	$(hyperfine --version)"
  echo "wrk	$(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
  echo "release_size	$(stat -c %s "$PC")"
  echo "quick	$quick"
} >"$work/results/meta.tsv"
python3 bench/report.py "$work/results" "$out"
log "wrote $out"
