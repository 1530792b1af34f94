#!/usr/bin/env bash
# Secret hygiene sweep (docs/hardening.md): run the whole test suite once with a sentinel in every
# password and assert the sentinel never appears in anything pullcheck or the tests wrote.
#
#   scripts/secret-hygiene.sh                 # the whole suite: unit, integration, doc tests
#   scripts/secret-hygiene.sh webhook         # only tests matching a filter (libtest args)
#
# How:
# - PULLCHECK_TEST_SENTINEL=<random> makes the harness append `-<sentinel>` to every
#   password it creates (tests/integration/support/mod.rs `secret()`: alice's and bob's,
#   the registries' htpasswd, the token server, every pull-secret file written by
#   `support::write_dockerconfigjson` and `support::pull_secret`, wrong passwords included),
#   and keeps the tests' temporary directories instead of deleting them.
# - The suite builds into its own target dir (target/hygiene), where target/hygiene/debug/
#   pullcheck (the binary every integration test runs) is swapped for a wrapper that `exec`s
#   the real binary (same pid, argv[0], signals, exit status) with stdout and stderr teed
#   into a capture dir, and, for `pullcheck webhook`, scrapes /metrics twice a second while
#   it runs. So every byte any pullcheck process printed, and every metrics page, is kept.
# - TMPDIR points into the run dir: the harness's registry and token-server logs, the
#   tests' temp dirs (termination logs, JSON written to files, hosts.toml, ...) land there.
# - The test executables `cargo test --no-run` built are run directly (`cargo test` would
#   re-link the real binary over the wrapper), each with `--nocapture`, and their output is
#   kept too; doc tests run through `cargo test --doc` before the swap.
# Then every file is searched for the sentinel, raw and in its base64 forms (standard and
# URL-safe alphabets, all three alignments). Hits in files where a secret legitimately
# lives (pull-secret / docker config JSON, Kubernetes Secret objects, legacy .dockercfg,
# htpasswd, the fake credential helper, a CredentialProviderConfig handing a scripted plugin
# its answer) are listed as expected; any other hit fails with
# the file, line and a redacted excerpt. A planted canary (a base64-only Basic header in a
# fake capture) must be caught, so a blind scanner can't pass.
#
# Needs what scripts/test.sh needs (scripts/deps.sh test). The first run builds the test
# profile into target/hygiene (a few minutes); later runs are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TERM_COLOR=never
target=$root/target/hygiene
run=$target/run
bin=$target/debug/pullcheck

# Put the real binary back (cargo hard-links it from deps/, so remove the name first).
restore() { if [ -e "$bin.real" ]; then rm -f "$bin"; mv -f "$bin.real" "$bin"; fi; }
restore   # a previous run that was interrupted may have left the wrapper in place

export CARGO_TARGET_DIR=$target
cargo build --locked --bins >&2
mapfile -t exes < <(cargo test --locked --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        print(m["executable"])')
[ ${#exes[@]} -gt 0 ] || { echo "no test executables" >&2; exit 1; }

sentinel=pcsentinel$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
rm -rf "$run"
mkdir -p "$run/tmp" "$run/capture" "$run/args" "$run/test-output"
export PULLCHECK_TEST_SENTINEL=$sentinel \
  PULLCHECK_HYGIENE_CAPTURE=$run/capture \
  PULLCHECK_HYGIENE_ARGS=$run/args \
  PULLCHECK_HYGIENE_REAL=$bin.real

rc=0
TMPDIR=$run/tmp cargo test --locked --doc -- --nocapture >"$run/test-output/doctests.log" 2>&1 || rc=$?

mv "$bin" "$bin.real"
trap restore EXIT
cat >"$bin" <<'EOF'
#!/bin/bash
# scripts/secret-hygiene.sh: record what this pullcheck run prints, then become it.
cap=$PULLCHECK_HYGIENE_CAPTURE/$$-$(date +%s%N)
printf '%q ' "$@" >"$PULLCHECK_HYGIENE_ARGS/${cap##*/}"
if [ "${1:-}" = webhook ]; then
  pid=$$
  (
    addr=
    while kill -0 "$pid" 2>/dev/null && [ -z "$addr" ]; do
      sleep 0.2
      addr=$(sed -n 's#.*listening on https://##p' "$cap.err" 2>/dev/null | head -1)
    done
    while [ -n "$addr" ] && kill -0 "$pid" 2>/dev/null; do
      curl -sk --max-time 2 "https://$addr/metrics" >>"$cap.metrics" 2>/dev/null
      sleep 0.5
    done
  ) </dev/null >/dev/null 2>&1 &
fi
exec -a "$0" "$PULLCHECK_HYGIENE_REAL" "$@" > >(exec tee -a "$cap.out") 2> >(exec tee -a "$cap.err" >&2)
EOF
chmod +x "$bin"

echo "sentinel run: $run" >&2
for exe in "${exes[@]}"; do
  name=$(basename "$exe")
  echo "running $name" >&2
  TMPDIR=$run/tmp "$exe" --nocapture "$@" >"$run/test-output/$name.log" 2>&1 || rc=$?
done
restore
# Give the last tee and metrics scrapers a moment to finish writing.
sleep 1

summary=$(cat "$run"/test-output/*.log | grep -E '^test result:' | awk '{p+=$4; f+=$6; i+=$8} END {printf "%d passed, %d failed, %d ignored", p, f, i}')
runs=$(find "$run/args" -type f | wc -l)
echo "suite: $summary (exit $rc); pullcheck runs captured: $runs" >&2
if [ "$rc" != 0 ]; then
  grep -hE '^test .* FAILED$' "$run"/test-output/*.log >&2 || true
  echo "FAIL: the test suite failed under the sentinel (logs: $run/test-output/)" >&2
  exit 1
fi
if [ "$runs" -lt 100 ] && [ $# = 0 ]; then
  echo "FAIL: only $runs pullcheck runs were captured; the wrapper was not used" >&2
  exit 1
fi

# Positive control: a capture the scanner must flag (alice's Basic header, base64 only).
canary=$run/capture/zz-canary.err
printf 'Authorization: Basic %s\n' "$(printf 'alice:alice-pw-%s' "$sentinel" | base64 -w0)" >"$canary"

SENTINEL=$sentinel CANARY=$canary python3 - "$run" <<'EOF'
import base64, json, os, re, sys

run = sys.argv[1]
canary = os.path.relpath(os.environ["CANARY"], run)
s = os.environ["SENTINEL"].encode()
needles = {b"raw": s}
for k in range(3):
    for name, enc in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
        e = enc(b"\0" * k + s).rstrip(b"=")
        # drop the group that mixes in unknown leading bytes and the last, partial group
        core = e[4 if k else 0 : len(e) - 4]
        needles[f"{name}@{k}".encode()] = core


def legit(path, data):
    """A file whose job is to hold a credential (written by the tests as input)."""
    base = os.path.basename(path)
    if base == "htpasswd" or base.startswith("docker-credential-"):
        return True
    # A kubelet CredentialProviderConfig whose provider env hands a scripted plugin the
    # credential it answers with (tests/integration/credential_providers.rs).
    if re.search(rb"^kind:\s*CredentialProviderConfig\s*$", data, re.M):
        return True
    try:
        v = json.loads(data)
    except Exception:
        return False
    if isinstance(v, dict):
        if "auths" in v or v.get("kind") in ("Secret", "CredentialProviderConfig"):
            return True
        if v and all(isinstance(x, dict) and "auth" in x for x in v.values()):
            return True  # legacy .dockercfg
    return False


skip_dirs = {os.path.join(run, "args")}
files = nbytes = 0
expected, bad = [], []
for dirpath, dirnames, filenames in os.walk(run):
    if dirpath in skip_dirs:
        dirnames[:] = []
        continue
    for fn in filenames:
        p = os.path.join(dirpath, fn)
        if not os.path.isfile(p) or os.path.islink(p):
            continue
        try:
            data = open(p, "rb").read()
        except OSError:
            continue
        files += 1
        nbytes += len(data)
        hits = [n.decode() for n, needle in needles.items() if needle in data]
        if not hits:
            continue
        rel = os.path.relpath(p, run)
        if legit(p, data):
            expected.append(rel)
            continue
        for i, line in enumerate(data.splitlines(), 1):
            if any(needle in line for needle in needles.values()):
                text = line.decode("utf-8", "replace")
                for n, needle in needles.items():
                    text = text.replace(needle.decode(), f"<SENTINEL:{n.decode()}>")
                bad.append(f"{rel}:{i}: {text[:300]}")

caught = [b for b in bad if b.startswith(canary + ":")]
bad = [b for b in bad if not b.startswith(canary + ":")]
if not caught:
    print(f"FAIL: the scanner missed the planted canary {canary}")
    sys.exit(1)
print(f"scanned {files} files, {nbytes / 1e6:.1f} MB; needles: {', '.join(n.decode() for n in needles)}")
print(f"planted canary caught: {canary}")
print(f"sentinel in credential files (expected): {len(expected)}")
for p in sorted(expected)[:10]:
    print(f"  {p}")
if len(expected) > 10:
    print(f"  ... and {len(expected) - 10} more")
if bad:
    print(f"FAIL: the sentinel leaked in {len(bad)} line(s):")
    for b in bad[:50]:
        print(f"  {b}")
    sys.exit(1)
print("OK: the sentinel appears nowhere else (stdout, stderr, logs, termination messages, metrics, JSON)")
EOF
cap=$run/capture
echo "captured: $(find "$cap" -name '*.out' | wc -l) stdout, $(find "$cap" -name '*.err' | wc -l) stderr, $(find "$cap" -name '*.metrics' | wc -l) metrics scrapes (webhook runs); $(find "$run/tmp" -type f | wc -l) files under TMPDIR" >&2
