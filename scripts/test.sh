#!/usr/bin/env bash
# The test command: install what the tests need, then run every test (unit, conformance
# vectors, real-registry integration tests). Usage: scripts/test.sh [cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
cargo build --locked --bins >&2
cargo test --locked "$@"
# The "N ignored" above: tests that need more than a registry, each #[ignore] naming the
# script that runs it. Counted from the sources, so the numbers can't drift.
echo "ignored tests, by the script that runs them (.ci/run runs all of them):" >&2
grep -rhoE '#\[ignore = "[^"]*: run scripts/[a-z0-9-]+\.sh"\]' tests src \
  | sed -E 's/#\[ignore = "(.*): run (scripts\/[a-z0-9-]+\.sh)"\]/\2 (\1)/' \
  | sort | uniq -c | sed 's/^/  /' >&2
