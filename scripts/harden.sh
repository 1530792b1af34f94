#!/usr/bin/env bash
# All of the hardening runs in one command; see docs/hardening.md.
#
#   scripts/harden.sh            # fuzz 60 s per target, hostile suite, webhook load (1 000 000
#                                # requests, outage, drain), secret hygiene sweep
#   scripts/harden.sh 600        # fuzz 10 min per target, the rest as above
#   scripts/harden.sh smoke      # the CI versions: fuzz ~10 s per target, webhook-load smoke
#
# Every part runs even when an earlier one fails; the exit status is 1 if any failed. The
# figures of each part are gathered in target/tmp/harden-report.md.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

fuzz_arg=${1:-60}
case "$fuzz_arg" in
  smoke) load_mode=smoke ;;
  ''|*[!0-9]*) echo "usage: $0 [SECONDS|smoke]" >&2; exit 2 ;;
  *) load_mode=full ;;
esac

scripts/deps.sh >/dev/null
mkdir -p target/tmp
report=target/tmp/harden-report.md
start=$(date +%s)
failed=()
{
  echo "# Hardening run $(date -u +%Y-%m-%dT%H:%MZ) (fuzz: $fuzz_arg, webhook load: $load_mode)"
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(uname -r)"
} >"$report"

part() { # NAME COMMAND...: run, tee to target/tmp/harden-NAME.log, record pass/fail
  local name=$1; shift
  local t0 rc
  t0=$(date +%s)
  echo; echo "== $name: $* ($(( t0 - start ))s)"
  "$@" 2>&1 | tee "target/tmp/harden-$name.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || failed+=("$name")
  { echo; echo "## $name ($([ "$rc" = 0 ] && echo ok || echo "FAILED, exit $rc"), $(( $(date +%s) - t0 )) s)"; echo; echo "\`$*\`"; echo; } >>"$report"
  return 0
}

part fuzz scripts/fuzz.sh "$fuzz_arg"
{ echo '```'; grep -E '^(target|[a-z_]+ +[0-9?])' target/tmp/harden-fuzz.log; echo '```'; } >>"$report"

part hostile cargo test --locked --test integration hostile -- --nocapture
[ -f target/tmp/hostile-bounds.md ] && cat target/tmp/hostile-bounds.md >>"$report"

part webhook-load scripts/webhook-load.sh "$load_mode"
{ echo '```'; cat target/tmp/webhook-load/results.txt 2>/dev/null; echo '```'; } >>"$report"

part secret-hygiene scripts/secret-hygiene.sh
{ echo '```'; grep -E '^(suite|scanned|sentinel in|OK|FAIL|captured)' target/tmp/harden-secret-hygiene.log; echo '```'; } >>"$report"

echo
echo "== done in $(( $(date +%s) - start ))s; report: $report"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all parts passed"
