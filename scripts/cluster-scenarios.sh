#!/usr/bin/env bash
# The fail-fast scenarios of the Rust harness (tests/cluster/) on a real single-node cluster:
# brings the node up if it is down (scripts/cluster.sh), builds the static binary if it is
# missing (scripts/build-static.sh), runs the selected scenarios and rewrites
# docs/fail-fast-results.md, docs/fail-fast-data/timeline.csv and the chart; every other
# scenario's parts are kept from the committed files. Opt-in, as root; not run in CI.
#
#   scripts/cluster-scenarios.sh                        # every scenario (about 20 min)
#   FF_SCENARIOS="2 9a" scripts/cluster-scenarios.sh    # a subset; "9" is 9a … 9h-pytorch
#   FF_KEEP_CLUSTER=1 scripts/cluster-scenarios.sh      # leave a node it started up
#
# Scenario 9d needs a node started with PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1 (set it here
# and a node this script starts has it); scenarios 8, 9h-pytorch and 10d start the Kubeflow
# training operator (scripts/cluster/kubeflow.sh; built once by scripts/cluster/node-tools.sh).
# The windows and the other knobs are the harness's environment (tests/cluster/main.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "cluster-scenarios: needs root (kubelet, containerd)" >&2; exit 2; }
tdir=${CARGO_TARGET_DIR:-target}
[ -x "$tdir/x86_64-unknown-linux-musl/release/pullcheck" ] || scripts/build-static.sh >&2
started=''
if ! scripts/cluster.sh status >/dev/null 2>&1; then
  scripts/cluster.sh up >/dev/null
  started=1
fi
down() { if [ -n "$started" ] && [ -z "${FF_KEEP_CLUSTER:-}" ]; then scripts/cluster.sh down || true; fi; }
trap down EXIT
cargo test --locked --test cluster -- --ignored --nocapture real_node
