#!/usr/bin/env bash
# The test command: install what the tests need, then run every test (unit, conformance
# vectors, real-registry integration tests). Usage: scripts/test.sh [cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
cargo build --locked --bins >&2
cargo test --locked "$@"
