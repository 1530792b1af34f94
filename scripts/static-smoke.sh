#!/usr/bin/env bash
# Prove the static binary runs in an empty root directory (no CA files, no libc, no shell)
# against a TLS registry: a present tag exits 0, an absent one 11, and without the CA the
# check is transient (20) instead of a panic. Needs root (chroot). Usage:
#   scripts/static-smoke.sh [path/to/static/pullcheck]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
bin=${1:-${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/release/pullcheck}
[ -x "$bin" ] || { echo "static-smoke: $bin missing; run scripts/build-static.sh" >&2; exit 1; }

work=$(mktemp -d)
cleanup() { [ -n "${REG_PID:-}" ] && kill "$REG_PID" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
make_tls "$work/tls"
port=$(free_port)
start_registry "$work/registry" "$port" "$work/tls"
reg=127.0.0.1:$port
mkdir -p "$work/certs" && cp "$work/tls/ca.crt" "$work/certs/ca.crt"
push_image "$work/image" "$reg/smoke/app:v1" "$work/certs"

root=$work/root
mkdir -p "$root"
cp "$bin" "$root/pullcheck"
cp "$work/tls/ca.crt" "$root/ca.pem"
echo "empty root: $(cd "$root" && find . | sort | tr '\n' ' ')"

pass=0 fail=0
expect() {
  local want=$1; shift
  set +e; env -i "$(command -v chroot)" "$root" /pullcheck check "$@" > "$work/out" 2>&1; local got=$?; set -e
  if [ "$got" = "$want" ]; then echo "ok   exit $got: $*"; pass=$((pass+1)); else echo "FAIL exit $got (want $want): $*"; fail=$((fail+1)); fi
  sed 's/^/     /' "$work/out"
}
expect 0  --ca-file /ca.pem "$reg/smoke/app:v1"
expect 11 --ca-file /ca.pem "$reg/smoke/app:v2"
expect 20 --timeout 5 "$reg/smoke/app:v1"
# An inherited SSL_CERT_FILE naming a file the image doesn't have is ignored, not fatal.
set +e; env -i SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "$(command -v chroot)" "$root" /pullcheck check --ca-file /ca.pem "$reg/smoke/app:v1" >/dev/null 2>&1; got=$?; set -e
if [ "$got" = 0 ]; then echo "ok   exit 0: missing SSL_CERT_FILE ignored"; pass=$((pass+1)); else echo "FAIL exit $got: missing SSL_CERT_FILE"; fail=$((fail+1)); fi
size=$(stat -c %s "$bin")
echo "static binary: $size bytes"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
