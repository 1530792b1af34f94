#!/usr/bin/env bash
# The tests that need host names that are not loopback (tests/integration/netns.rs), run in
# a network namespace of their own.
#
#   scripts/netns-test.sh [test filter/libtest args...]   (default: netns::)
#
# 1. builds the integration test binary (cargo test --locked --test integration --no-run);
# 2. runs it under `unshare --net --mount` (a new network namespace and a private mount
#    namespace, so nothing below is seen outside): brings lo up, adds the 10.203.0.0/24
#    addresses of the table below to lo, writes a hosts file naming them (plus localhost)
#    and bind-mounts it over /etc/hosts, and a resolv.conf whose only nameserver is
#    127.0.0.1 (nothing listens there: a name not in the table fails at once, and no query
#    leaves the namespace, which has no route anywhere else);
# 3. exports PULLCHECK_NETNS=1 and PULLCHECK_NETNS_HOSTS (name=address,...), which
#    tests/integration/support/named.rs reads, and runs the ignored tests of netns::
#    (or the given filter) with --ignored.
#
# Needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN), unshare, ip and mount.
# Exit status: the test binary's. The last lines are its "test result: ... N passed; M failed".
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[netns-test] %s\n' "$*" >&2; }
t0=$SECONDS

# name address. 10.203.0.0/24 is used by nothing else here (scripts/cluster.sh uses
# 10.244.230.1 and 10.244.231.0/24). A name for the address guard's rebinding case maps
# to loopback on purpose.
hosts=(
  "registry.pullcheck.test 10.203.0.1"
  "blobs.pullcheck.test 10.203.0.2"
  "auth.pullcheck.test 10.203.0.3"
  "store.pullcheck.test 10.203.0.4"
  "loopback.pullcheck.test 127.0.0.1"
  # ECR registry names for tests/integration/ecr_e2e.rs (run by scripts/provider-e2e.sh):
  # two accounts, so that the provider's Registry cache keys can be counted.
  "123456789012.dkr.ecr.us-east-1.amazonaws.com 10.203.0.5"
  "210987654321.dkr.ecr.us-east-1.amazonaws.com 10.203.0.6"
)

# Inside the namespaces (re-entered by the outer call below).
if [ "${1:-}" = "--inside" ]; then
  shift
  bin=$1
  shift
  ip link set lo up
  state=$(mktemp -d "${TMPDIR:-/tmp}/pullcheck-netns.XXXXXX")
  {
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
    map=
    for h in "${hosts[@]}"; do
      read -r name addr <<<"$h"
      case $addr in
        127.*) ;;
        *) ip addr add "$addr/32" dev lo ;;
      esac
      printf '%s\t%s\n' "$addr" "$name"
      map+="${map:+,}$name=$addr"
    done
  } >"$state/hosts"
  printf 'nameserver 127.0.0.1\noptions attempts:1 timeout:1\n' >"$state/resolv.conf"
  mount --bind "$state/hosts" /etc/hosts
  mount --bind "$state/resolv.conf" /etc/resolv.conf
  export PULLCHECK_NETNS=1
  export PULLCHECK_NETNS_HOSTS=$map
  log "namespace ready: $(ip -4 -o addr show dev lo | awk '{print $4}' | paste -sd' ')"
  rc=0
  "$bin" "$@" --ignored || rc=$?
  rm -rf "$state"
  exit "$rc"
fi

for tool in unshare ip mount; do
  command -v "$tool" >/dev/null || { log "needs $tool"; exit 2; }
done

# The binary cargo built: the last "Executable" line of the JSON build messages.
bin=$(cargo test --locked --test integration --no-run --message-format=json |
  python3 -c 'import json,sys
exe=[m["executable"] for m in map(json.loads, sys.stdin) if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="integration"]
print(exe[-1])')
log "built $bin in $((SECONDS - t0))s"

t1=$SECONDS
rc=0
unshare --net --mount --propagation private "$0" --inside "$bin" "${@:-netns::}" || rc=$?
log "tests took $((SECONDS - t1))s (total $((SECONDS - t0))s)"
exit "$rc"
