#!/usr/bin/env bash
# The real kubelet credential-provider plugins that pullcheck's tests run.
#
#   scripts/provider-e2e.sh [cargo test filter/args...]
#
# 1. builds (once, cached) ecr-credential-provider at the version pinned in
#    scripts/go-tools.sh (from the Go module proxy; ~1.5 min cold on 2 cores);
# 2. exports PULLCHECK_ECR_PROVIDER (its path);
# 3. runs tests/integration/ecr_provider.rs with --ignored: the provider against the
#    scripted ECR API on loopback (tests/integration/support/ecr_api.rs);
# 4. runs tests/integration/ecr_e2e.rs through scripts/netns-test.sh: `pullcheck check` and
#    `explain` with a node's provider config naming the provider, against real registries
#    served under ECR host names (on 443, in the script's network namespace).
#
# With arguments only step 3 runs, with them as the cargo test filter/args.
#
# Exit status: the first failing step's (1 also when the provider can't be built or is
# missing). The last lines are the test binary's "test result: ... N passed; M failed".
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[provider-e2e] %s\n' "$*" >&2; }
t0=$SECONDS

bin=$(scripts/go-tools.sh ecr-credential-provider) || { log "error: building ecr-credential-provider failed"; exit 1; }
PULLCHECK_ECR_PROVIDER=$bin/ecr-credential-provider
[ -x "$PULLCHECK_ECR_PROVIDER" ] || { log "error: $PULLCHECK_ECR_PROVIDER is missing after go-tools.sh"; exit 1; }
export PULLCHECK_ECR_PROVIDER
log "provider ready in $((SECONDS - t0))s: $("$PULLCHECK_ECR_PROVIDER" --version)"

t1=$SECONDS
cargo test --locked --test integration "${@:-ecr_provider::}" -- --ignored
log "provider tests took $((SECONDS - t1))s"
if [ $# -eq 0 ]; then
  t2=$SECONDS
  scripts/netns-test.sh ecr_e2e::
  log "end-to-end tests took $((SECONDS - t2))s"
fi
log "total $((SECONDS - t0))s"
