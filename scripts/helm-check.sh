#!/usr/bin/env bash
# Static checks of the Helm chart charts/pullcheck: `helm lint --strict` and `helm template`
# with the default values and with each option combination, asserting the kinds, counts
# and the fields the webhook's safety depends on (failurePolicy, namespace exclusions,
# matchConditions, TLS wiring, RBAC scope, restricted securityContext, ...). The checks are
# Rust tests (tests/helm_chart/, #[ignore]d without helm); this script provides helm and
# runs them.
#
#   scripts/helm-check.sh            # helm from scripts/go-tools.sh (built once, cached)
#   HELM=/path/to/helm scripts/helm-check.sh
#   scripts/helm-check.sh watch::    # only the tests whose name holds "watch::"
#
# Needs openssl (certificate checks). Exit status 0 when every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${HELM:-}" ]; then
  HELM="$(scripts/go-tools.sh helm)/helm"
fi
export HELM
command -v openssl >/dev/null || { echo "helm-check: openssl is required (scripts/deps.sh test)" >&2; exit 2; }

exec cargo test --locked --test helm_chart -- --ignored "$@"
