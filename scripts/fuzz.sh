#!/usr/bin/env bash
# Run every cargo-fuzz target of fuzz/ for a set time, one after another, and print the
# executions and coverage (libFuzzer's `cov:`) of each.
#
#   scripts/fuzz.sh              # 60 s per target
#   scripts/fuzz.sh 600          # 10 min per target
#   scripts/fuzz.sh smoke        # ~10 s per target (CI)
#   scripts/fuzz.sh 60 reference www_authenticate   # only these targets
#
# Toolchain: cargo-fuzz needs a nightly compiler (sanitizer flags). A `nightly` rustup
# toolchain is used when there is one; otherwise the stable compiler with
# RUSTC_BOOTSTRAP=1 (set PULLCHECK_FUZZ_TOOLCHAIN=bootstrap to force that). cargo-fuzz
# itself is installed with `cargo install cargo-fuzz` when missing.
#
# Corpora: fuzz/seeds/<target> (committed, read-only) plus fuzz/corpus/<target> (grown by
# libFuzzer, ignored by git). A crash leaves its input in fuzz/artifacts/<target>/; the
# script reports it, carries on with the other targets, and exits 1 at the end. Minimise it
# with `cargo +nightly fuzz tmin <target> <file>` and turn it into a regression test.
#
# Everything runs under `nice`, one target at a time (the machine is shared).
set -euo pipefail

cd "$(dirname "$0")/.."

seconds=60
if [[ $# -gt 0 ]]; then
    case "$1" in
        smoke) seconds=10 ;;
        ''|*[!0-9]*) echo "usage: $0 [SECONDS|smoke] [TARGET...]" >&2; exit 2 ;;
        *) seconds=$1 ;;
    esac
    shift
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install --locked cargo-fuzz
fi

toolchain=()
if [[ "${PULLCHECK_FUZZ_TOOLCHAIN:-}" != bootstrap ]] && rustup run nightly rustc --version >/dev/null 2>&1; then
    toolchain=(+nightly)
    echo "toolchain: $(rustup run nightly rustc --version)" >&2
else
    export RUSTC_BOOTSTRAP=1
    echo "toolchain: $(rustc --version) with RUSTC_BOOTSTRAP=1" >&2
fi

mapfile -t all < <(cargo "${toolchain[@]}" fuzz list)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")

# Longest inputs worth trying, per target (libFuzzer's default is 4096).
max_len() {
    case "$1" in
        manifest_index|inject_yaml|docker_config|hosts_toml|credential_provider) echo 16384 ;;
        *) echo 4096 ;;
    esac
}

nice -n 10 cargo "${toolchain[@]}" fuzz build >&2

logdir=fuzz/artifacts/logs
mkdir -p "$logdir"
failed=()
printf '%-18s %12s %10s %8s %8s  %s\n' target executions exec/s cov ft result
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
    log="$logdir/$t.log"
    set +e
    nice -n 10 cargo "${toolchain[@]}" fuzz run "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
        -max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    set -e
    execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    speed=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
    ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
    if [[ $rc -eq 0 ]]; then
        result=ok
    else
        result="CRASH (exit $rc; see $log and fuzz/artifacts/$t/)"
        failed+=("$t")
    fi
    printf '%-18s %12s %10s %8s %8s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$result"
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "crashes in: ${failed[*]}" >&2
    exit 1
fi
