#!/usr/bin/env bash
# Self-contained demo: start a throwaway local registry (Debian's docker-registry) on a free
# loopback port, push a tiny image with skopeo, then check a present and an absent tag.
# Everything is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
scripts/deps.sh
cargo build --release --locked --bin pullcheck >&2
pc=$(realpath "${CARGO_TARGET_DIR:-target}")/release/pullcheck

work=$(mktemp -d)
cleanup() { [ -n "${REG_PID:-}" ] && kill "$REG_PID" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

port=$(free_port)
start_registry "$work/registry" "$port"
reg=127.0.0.1:$port
push_image "$work/image" "$reg/demo/hello:v1"

# show WANT ARGS...: run pullcheck, print its exit code, and fail the demo if it differs.
failed=0
show() {
  local want=$1; shift
  echo; echo "\$ pullcheck $*"
  set +e; "$pc" "$@"; local got=$?; set -e
  echo "exit code: $got"
  [ "$got" = "$want" ] || { echo "demo: expected exit code $want" >&2; failed=1; }
}
show 0 check --insecure-registry "$reg" "$reg/demo/hello:v1"
show 11 check --insecure-registry "$reg" "$reg/demo/hello:v2"
show 11 check --insecure-registry "$reg" --quiet --output json "$reg/demo/hello:v1" "$reg/demo/hello:v2"
show 0 explain --insecure-registry "$reg" "$reg/demo/hello:v1"
exit "$failed"
