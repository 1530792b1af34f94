#!/usr/bin/env bash
# Build the static x86_64 musl release binary and print its path and size.
# Usage: scripts/build-static.sh   (output: target/x86_64-unknown-linux-musl/release/pullcheck)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh static
cargo build --release --locked --target x86_64-unknown-linux-musl --bin pullcheck >&2
bin=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/release/pullcheck
file "$bin" 2>/dev/null | grep -q 'statically linked\|static-pie' || { echo "build-static: $bin is not static" >&2; exit 1; }
echo "$bin $(stat -c %s "$bin") bytes"
