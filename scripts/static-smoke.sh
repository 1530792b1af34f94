#!/usr/bin/env bash
# Prove the static binary runs in an empty root directory (no CA files, no libc, no shell)
# against a TLS registry: a present tag exits 0, an absent one 11, and without the CA the
# check is transient (20) instead of a panic. Needs root (chroot). Usage:
#   scripts/static-smoke.sh [path/to/static/pullcheck...]
# Default: the amd64 binary, and the arm64 one too when scripts/build-static.sh arm64 built
# it. A binary of another architecture than the host's runs under Debian's
# qemu-user-static (qemu-aarch64-static, itself static, copied into the empty root), so the
# arm64 image's binary is proven to start and check a registry, not just to link.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
bins=("$@")
if [ ${#bins[@]} = 0 ]; then
  t=${CARGO_TARGET_DIR:-target}
  bins=("$t/x86_64-unknown-linux-musl/release/pullcheck")
  [ -x "$t/aarch64-unknown-linux-musl/release/pullcheck" ] && bins+=("$t/aarch64-unknown-linux-musl/release/pullcheck")
fi
for bin in "${bins[@]}"; do
  [ -x "$bin" ] || { echo "static-smoke: $bin missing; run scripts/build-static.sh" >&2; exit 1; }
done

work=$(mktemp -d)
cleanup() { [ -n "${REG_PID:-}" ] && kill "$REG_PID" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
make_tls "$work/tls"
port=$(free_port)
start_registry "$work/registry" "$port" "$work/tls"
reg=127.0.0.1:$port
mkdir -p "$work/certs" && cp "$work/tls/ca.crt" "$work/certs/ca.crt"
push_image "$work/image" "$reg/smoke/app:v1" "$work/certs"

pass=0 fail=0
for bin in "${bins[@]}"; do
case $(file -b "$bin") in
  *x86-64*) arch=amd64 ;;
  *aarch64*) arch=arm64 ;;
  *) echo "static-smoke: $bin: unknown architecture ($(file -b "$bin"))" >&2; exit 1 ;;
esac
root=$work/root-$arch
mkdir -p "$root"
cp "$bin" "$root/pullcheck"
cp "$work/tls/ca.crt" "$root/ca.pem"
run=(/pullcheck)
host=$(uname -m)
if [ "$arch" = arm64 ] && [ "$host" != aarch64 ]; then
  scripts/deps.sh cross >&2
  cp "$(command -v qemu-aarch64-static)" "$root/qemu-aarch64-static"
  run=(/qemu-aarch64-static /pullcheck)
fi
echo "linux/$arch, empty root: $(cd "$root" && find . | sort | tr '\n' ' ')"
version=$(env -i "$(command -v chroot)" "$root" "${run[@]}" --version 2>&1 || true)
if [ "$version" = "pullcheck $(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)" ]; then
  echo "ok   linux/$arch runs: $version"; pass=$((pass+1))
else
  echo "FAIL linux/$arch --version: $version"; fail=$((fail+1))
fi

expect() {
  local want=$1; shift
  set +e; env -i "$(command -v chroot)" "$root" "${run[@]}" check "$@" > "$work/out" 2>&1; local got=$?; set -e
  if [ "$got" = "$want" ]; then echo "ok   linux/$arch exit $got: $*"; pass=$((pass+1)); else echo "FAIL linux/$arch exit $got (want $want): $*"; fail=$((fail+1)); fi
  sed 's/^/     /' "$work/out"
}
expect 0  --ca-file /ca.pem "$reg/smoke/app:v1"
expect 11 --ca-file /ca.pem "$reg/smoke/app:v2"
expect 20 --timeout 5 "$reg/smoke/app:v1"
# An inherited SSL_CERT_FILE naming a file the image doesn't have is ignored, not fatal.
set +e; env -i SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "$(command -v chroot)" "$root" "${run[@]}" check --ca-file /ca.pem "$reg/smoke/app:v1" >/dev/null 2>&1; got=$?; set -e
if [ "$got" = 0 ]; then echo "ok   linux/$arch exit 0: missing SSL_CERT_FILE ignored"; pass=$((pass+1)); else echo "FAIL linux/$arch exit $got: missing SSL_CERT_FILE"; fail=$((fail+1)); fi
size=$(stat -c %s "$bin")
echo "static binary linux/$arch: $size bytes"
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
