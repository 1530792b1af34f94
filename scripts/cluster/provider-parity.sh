#!/usr/bin/env bash
# Real-node parity for kubelet credential providers: the cluster harness's kubelet, run with
# the real ecr-credential-provider (PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1), pulls a Job's
# image from a registry served under an ECR name, and `pullcheck check` with the SAME
# provider config and bin dir says what the kubelet did: 0 for the present tag (which the
# kubelet runs to Completed), 11 for the missing one (which it fails with ErrImagePull
# "not found"). Writes the results file (default docs/credential-providers-node-parity.md).
#
#   PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1 scripts/cluster.sh up
#   eval "$(scripts/cluster.sh env)"
#   scripts/cluster/provider-parity.sh [OUT.md]
#   scripts/cluster.sh down
#
# pullcheck runs on the host, in a private mount namespace with the cluster's hosts file
# bind-mounted over /etc/hosts (as containerd does), with the registry's CA as --ca-file.
# The Jobs: restartPolicy Never, backoffLimit 0, no pullcheck injection. Exit 1 when the
# node and pullcheck disagree. Opt-in (needs root and the cluster); not run in CI.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
log() { printf '[provider-parity] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

: "${PULLCHECK_ECR_HOST:?run: PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1 scripts/cluster.sh up; eval \"\$(scripts/cluster.sh env)\"}"
command -v kubectl >/dev/null || die "kubectl not on PATH (eval \"\$(scripts/cluster.sh env)\")"
OUT=${1:-$ROOT/docs/credential-providers-node-parity.md}
NS=provider-parity
BIN=$(dirname "$(command -v kubectl)")
PRESENT=$PULLCHECK_ECR_HOST/work/app:v1
MISSING=$PULLCHECK_ECR_HOST/work/app:no-such-tag

tdir=${CARGO_TARGET_DIR:-$ROOT/target}
PULLCHECK=${PULLCHECK_BIN:-$tdir/debug/pullcheck}
if [ -z "${PULLCHECK_BIN:-}" ]; then (cd "$ROOT" && cargo build --locked --bin pullcheck >&2); fi
[ -x "$PULLCHECK" ] || die "no pullcheck binary at $PULLCHECK"

W=$(mktemp -d)
cleanup() { kubectl delete namespace "$NS" --wait=false >/dev/null 2>&1 || true; rm -rf "$W"; }
trap cleanup EXIT
calls() { wc -l <"$PULLCHECK_ECR_API_LOG"; }

kubectl delete namespace "$NS" --ignore-not-found --wait=true >/dev/null
kubectl create namespace "$NS" >/dev/null
job() { # NAME IMAGE
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: $NS}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: app
          image: $2
EOF
}

# ---- the node ------------------------------------------------------------------
c0=$(calls)
job present "$PRESENT" >"$W/present.yaml"
job missing "$MISSING" >"$W/missing.yaml"
kubectl apply -f "$W/present.yaml" -f "$W/missing.yaml" >/dev/null
state() { # JOB: the pod's first container state, as JSON
  kubectl -n "$NS" get pods -l "job-name=$1" -o json | jq -c '.items[0].status.containerStatuses[0] // {}'
}
deadline=$((SECONDS + 120))
while :; do
  p=$(state present) m=$(state missing)
  p_done=$(jq -r '.state.terminated.reason // empty' <<<"$p")
  m_reason=$(jq -r '.state.waiting.reason // empty' <<<"$m")
  if [ -n "$p_done" ] && { [ "$m_reason" = ErrImagePull ] || [ "$m_reason" = ImagePullBackOff ]; }; then break; fi
  [ $SECONDS -lt $deadline ] || die "jobs not settled after 120s: present=$p missing=$m"
  sleep 1
done
# the first pull failure's message (ErrImagePull) is also in the Failed event
node_calls=$(($(calls) - c0))
p_image_id=$(jq -r '.imageID' <<<"$p")
m_message=$(kubectl -n "$NS" get events -o json |
  jq -r '[.items[] | select(.involvedObject.name | startswith("missing-")) | select(.reason == "Failed") | .message][0]')
p_pulled=$(kubectl -n "$NS" get events -o json |
  jq -r '[.items[] | select(.involvedObject.name | startswith("present-")) | select(.reason == "Pulled") | .message][0]')
log "node: present → $p_done ($p_image_id); missing → $m_reason: $m_message; ECR API calls: $node_calls"

# ---- pullcheck, same config ------------------------------------------------------
pc() { # IMAGE: pullcheck check's JSON on stdout, its exit code in $W/rc
  local rc=0
  # shellcheck disable=SC2016 # expanded by the inner sh
  unshare -m --propagation private sh -c 'mount --bind "$0" /etc/hosts && shift && exec "$@"' \
    "$PULLCHECK_ECR_HOSTS" _ env -u DOCKER_CONFIG HOME=/nonexistent "$PULLCHECK" check --output json \
    --ca-file "$PULLCHECK_ECR_CA" --no-docker-config \
    --image-credential-provider-config "$PULLCHECK_ECR_PROVIDER_CONFIG" \
    --image-credential-provider-bin-dir "$PULLCHECK_ECR_PROVIDER_BIN_DIR" "$1" || rc=$?
  echo "$rc" >"$W/rc"
}
c1=$(calls)
pc "$PRESENT" >"$W/pc-present.json"; pc_p_rc=$(cat "$W/rc")
pc "$MISSING" >"$W/pc-missing.json"; pc_m_rc=$(cat "$W/rc")
pc_calls=$(($(calls) - c1))
field() { jq -r ".images[0].$2 // \"-\"" "$W/pc-$1.json"; }
log "pullcheck: present → $pc_p_rc $(field present verdict) $(field present digest); missing → $pc_m_rc $(field missing verdict)"

# ---- parity --------------------------------------------------------------------
ok=1
[ "$p_done" = Completed ] || { log "MISMATCH: the present Job ended $p_done"; ok=0; }
{ [ "$pc_p_rc" = 0 ] && [ "$(field present verdict)" = pullable ]; } || { log "MISMATCH: pullcheck said $pc_p_rc for the present tag"; ok=0; }
[ "${p_image_id##*@}" = "$(field present digest)" ] || { log "MISMATCH: digests ${p_image_id##*@} vs $(field present digest)"; ok=0; }
case $m_message in *"not found"*) ;; *) log "MISMATCH: the kubelet's message has no 'not found'"; ok=0 ;; esac
{ [ "$pc_m_rc" = 11 ] && [ "$(field missing verdict)" = not_found ]; } || { log "MISMATCH: pullcheck said $pc_m_rc for the missing tag"; ok=0; }
if grep -qF "$(cat "$PULLCHECK_CLUSTER_DIR/ecr/password")" "$W"/pc-*.json; then log "MISMATCH: the password is in pullcheck's output"; ok=0; fi

# ---- the results file ------------------------------------------------------------
v_kubelet=$("$BIN/kubelet" --version | awk '{print $2}')
v_containerd=$("$BIN/containerd" --version | awk '{print $3}')
v_provider=$("$PULLCHECK_ECR_PROVIDER_BIN_DIR/ecr-credential-provider" --version | awk '{print $NF}')
v_registry=$(docker-registry --version | awk '{print $3}')
v_pullcheck=$("$PULLCHECK" --version | awk '{print $2}')
v_commit=$(cd "$ROOT" && git rev-parse --short HEAD)
config=$(sed -e "s|$PULLCHECK_CLUSTER_DIR|\$STATE|g" \
  -e 's|127\.0\.0\.1:[0-9]*|127.0.0.1:PORT|' "$PULLCHECK_ECR_PROVIDER_CONFIG" | grep -v '^#')
pc_json() { jq -c '.images[0] | {image, verdict, digest, credential, detail} | with_entries(select(.value != null))' "$W/pc-$1.json"; }
{
  cat <<EOF
# Credential providers: real-node parity

Generated by \`scripts/cluster/provider-parity.sh\` (regenerate: see its header); opt-in,
not run in CI. The cluster harness's kubelet (\`PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1
scripts/cluster.sh up\`) runs the real ecr-credential-provider; \`pullcheck check\` runs it
with the same config and bin dir. **Parity: $([ "$ok" = 1 ] && echo holds || echo BROKEN).**

| | version |
| --- | --- |
| kubelet | $v_kubelet |
| containerd | $v_containerd |
| ecr-credential-provider | $v_provider |
| docker-registry (distribution) | $v_registry |
| pullcheck | $v_pullcheck (commit $v_commit) |

## Setup

- \`$PULLCHECK_ECR_HOST\`: a real docker-registry (TLS from the cluster's own test CA,
  htpasswd user \`AWS\` with a password made at \`up\`) on 10.244.230.5:443, an address on lo;
  the image \`work/app:v1\` (linux/amd64, busybox \`echo ok\`) pushed to it.
- The scripted ECR API (\`scripts/cluster/ecr-api.py\`, 127.0.0.1) answers
  GetAuthorizationToken with \`AWS:<that password>\`, valid 12 h.
- containerd resolves the name through a hosts file bind-mounted over /etc/hosts in its own
  mount namespace; its \`certs.d/$PULLCHECK_ECR_HOST/hosts.toml\` names the host itself (no
  mirror) with the test CA. pullcheck runs with the same hosts file and \`--ca-file\`.
- The kubelet: \`--image-credential-provider-config \$STATE/ecr/credential-providers.yaml
  --image-credential-provider-bin-dir \$STATE/ecr/plugins\`, the config being:

\`\`\`yaml
$config
\`\`\`

## The kubelet

Two Jobs (restartPolicy Never, backoffLimit 0, no pullcheck injection):

| image | outcome | kubelet's message |
| --- | --- | --- |
| \`$PRESENT\` | $p_done, imageID \`$p_image_id\` | $p_pulled |
| \`$MISSING\` | $m_reason | $m_message |

GetAuthorizationToken calls for both pulls: **$node_calls**. The provider answers
\`cacheKeyType: Registry\` with \`cacheDuration\` 6h, so the kubelet asks once per registry:
1 on a fresh cluster, 0 when an earlier pull on the same cluster already filled its cache.

## pullcheck, same config

\`\`\`sh
unshare -m sh -c 'mount --bind \$STATE/ecr/hosts /etc/hosts && exec pullcheck check --output json \\
  --ca-file \$STATE/ecr/ca.crt --no-docker-config \\
  --image-credential-provider-config \$STATE/ecr/credential-providers.yaml \\
  --image-credential-provider-bin-dir \$STATE/ecr/plugins IMAGE'
\`\`\`

| image | exit | verdict (JSON, \`images[0]\`) |
| --- | --- | --- |
| \`$PRESENT\` | $pc_p_rc | \`$(pc_json present)\` |
| \`$MISSING\` | $pc_m_rc | \`$(pc_json missing)\` |

GetAuthorizationToken calls for the two runs: **$pc_calls** (one per run: the CLI keeps no
cache between runs). The registry's password appears in no output.
EOF
} >"$OUT"
log "wrote $OUT"
[ "$ok" = 1 ] || die "the node and pullcheck disagree (see above)"
log "parity holds"
