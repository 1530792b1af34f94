#!/usr/bin/env bash
# Self-contained demo: start a throwaway local registry (Debian's docker-registry) on a free
# loopback port, push a tiny image with skopeo, then check a present and an absent tag.
# Everything is removed on exit. Needs Rust (rustup); installs docker-registry and skopeo
# (scripts/deps.sh registry) when they are missing.
#
# The demo fails (non-zero exit) when a command's exit code is not the documented one; it
# shows pullcheck's output as it is and does not depend on its wording.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

say() { printf '\n== %s\n' "$*"; }

say "1/5 installing what the demo needs, if missing (docker-registry, skopeo)"
scripts/deps.sh registry

# The dev profile, as scripts/test.sh builds it: the README's second command then reuses
# this build instead of compiling everything again; speed doesn't matter for five checks.
say "2/5 building pullcheck (cargo build; the first build takes a few minutes, later ones seconds)"
target=$(realpath "${CARGO_TARGET_DIR:-target}")
mkdir -p "$target"
log=$target/demo-build.log
t0=$SECONDS
cargo build --locked --bin pullcheck >"$log" 2>&1 &
build=$!
# A line every 30 s, so a cold build (minutes) doesn't look like a hang.
while kill -0 "$build" 2>/dev/null; do
  for _ in $(seq 1 60); do kill -0 "$build" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$build" 2>/dev/null; then
    echo "   still building ($((SECONDS - t0)) s; $(grep -c '^ *Compiling' "$log" || true) crates compiled so far)"
  fi
done
if ! wait "$build"; then
  cat "$log" >&2
  echo "demo: the build failed (log above, also in $log)" >&2
  exit 1
fi
pc=$target/debug/pullcheck
echo "built $pc in $((SECONDS - t0)) s (cargo's output: $log)"

work=$(mktemp -d)
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() { [ -n "${REG_PID:-}" ] && kill "$REG_PID" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

say "3/5 starting a throwaway registry (Debian's docker-registry, plain HTTP on loopback)"
port=$(free_port)
start_registry "$work/registry" "$port"
reg=127.0.0.1:$port
echo "registry listening on $reg (storage in $work/registry, removed on exit)"

say "4/5 pushing a one-layer linux/amd64 image to it with skopeo"
push_image "$work/image" "$reg/demo/hello:v1"
echo "pushed $reg/demo/hello:v1 (the tag v2 does not exist)"

# show WANT WHY ARGS...: run pullcheck, print its exit code, and fail the demo if it differs.
failed=0
show() {
  local want=$1 why=$2; shift 2
  printf '\n# %s\n$ pullcheck %s\n' "$why" "$*"
  set +e; "$pc" "$@"; local got=$?; set -e
  echo "exit code: $got"
  [ "$got" = "$want" ] || { echo "demo: expected exit code $want" >&2; failed=1; }
}
say "5/5 checking tags (--insecure-registry: this registry speaks plain HTTP)"
show 0 "a tag that exists: pullable, exit 0" \
  check --insecure-registry "$reg" "$reg/demo/hello:v1"
show 11 "a tag that does not exist: not_found, exit 11 (what an init container exits with)" \
  check --insecure-registry "$reg" "$reg/demo/hello:v2"
show 11 "both at once, as JSON for scripts: the lowest permanent code wins" \
  check --insecure-registry "$reg" --quiet --output json "$reg/demo/hello:v1" "$reg/demo/hello:v2"
show 0 "what check would do for an image, without doing it" \
  explain --insecure-registry "$reg" "$reg/demo/hello:v1"

if [ "$failed" = 0 ]; then
  cat <<EOF

== done: every exit code was the documented one; the registry is gone.

What to try next (the binary is $pc; \`cargo install --path .\` puts pullcheck on your PATH):
  pullcheck check nginx:latest docker.io/library/no-such-image:1  # a public registry
  pullcheck lint -f examples/job-backoff-limit-0.yaml            # what a Job lacks to fail fast
  scripts/publish-image.sh REGISTRY/REPO:TAG   # build and push the image, then install (README: Install)
  pullcheck inject --image REGISTRY/REPO@sha256:… -f examples/job-backoff-limit-0.yaml  # add the init container (the image it printed)
  docs/fail-fast-results.md                    # what pullcheck changes on a real node
EOF
else
  echo; echo "== demo: some exit codes were not the documented ones (see above)" >&2
fi
exit "$failed"
