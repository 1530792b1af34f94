#!/usr/bin/env bash
# Build pullcheck's static musl release binaries, one per image platform, and print one line
# per binary: "PATH SIZE bytes linux/ARCH".
#
#   scripts/build-static.sh [--profile PROFILE] [PLATFORM...]
#
#   PLATFORM   amd64 (x86_64-unknown-linux-musl, built natively) and/or arm64
#              (aarch64-unknown-linux-musl, cross-compiled); default: amd64.
#              `all` means every platform the image is published for (amd64 arm64).
#   --profile  the cargo profile (default release; the output lands in target/TRIPLE/PROFILE)
#
# Installs what it needs: the Rust target (rustup target add) and, through scripts/deps.sh,
# musl-tools for amd64 and Debian's gcc-aarch64-linux-gnu for arm64. ring's C and assembly
# need a C compiler for the target: for arm64 that is aarch64-linux-gnu-gcc (a glibc-targeted
# cross gcc; ring's C uses no libc headers that differ, and the Rust musl target links its own
# self-contained musl crt and libc, so the result is a static musl binary). Each binary is
# checked with `file`: static and of the expected architecture, or the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release platforms=()
while [ $# -gt 0 ]; do
  case $1 in
    --profile) [ $# -ge 2 ] || { echo "build-static: --profile needs a name" >&2; exit 2; }
               profile=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    all) platforms+=(amd64 arm64); shift ;;
    amd64|arm64) platforms+=("$1"); shift ;;
    *) echo "build-static: unknown platform or option '$1' (amd64, arm64, all; see --help)" >&2; exit 2 ;;
  esac
done
[ ${#platforms[@]} -gt 0 ] || platforms=(amd64)

# Install the Rust target, or say exactly why not (a fresh CI machine has only the host's).
rust_target() {
  local triple=$1
  command -v rustup >/dev/null 2>&1 || {
    rustc --print target-libdir --target "$triple" >/dev/null 2>&1 && return 0
    echo "build-static: the Rust target $triple is not installed and there is no rustup to add it; install it (rustup target add $triple)" >&2
    exit 1
  }
  rustup target list --installed | grep -qx "$triple" && return 0
  echo "build-static: adding the Rust target $triple (rustup target add)" >&2
  rustup target add "$triple" >&2 || {
    echo "build-static: 'rustup target add $triple' failed (offline? see above); the $triple build needs it" >&2
    exit 1
  }
}

out_dir=$profile
[ "$profile" = dev ] && out_dir=debug
for p in "${platforms[@]}"; do
  case $p in
    amd64) triple=x86_64-unknown-linux-musl want='x86-64'
           scripts/deps.sh static
           env=() ;;
    arm64) triple=aarch64-unknown-linux-musl want='ARM aarch64'
           scripts/deps.sh static cross
           command -v aarch64-linux-gnu-gcc >/dev/null || {
             echo "build-static: arm64 needs the cross C compiler aarch64-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu)" >&2; exit 1; }
           # ring's build script compiles its C/asm with CC_<triple>; rustc links with the
           # same gcc (it only drives the link: -nostartfiles + Rust's self-contained musl).
           env=(CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
                AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar
                CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc) ;;
  esac
  rust_target "$triple"
  start=$(date +%s)
  env ${env[@]+"${env[@]}"} cargo build --profile "$profile" --locked --target "$triple" --bin pullcheck >&2
  echo "build-static: linux/$p ($triple, profile $profile) took $(( $(date +%s) - start )) s" >&2
  bin=${CARGO_TARGET_DIR:-target}/$triple/$out_dir/pullcheck
  info=$(file -b "$bin" 2>/dev/null || true)
  case $info in
    *statically\ linked*|*static-pie*) ;;
    *) echo "build-static: $bin is not static ($info)" >&2; exit 1 ;;
  esac
  case $info in
    *"$want"*) ;;
    *) echo "build-static: $bin is not a $want binary ($info)" >&2; exit 1 ;;
  esac
  echo "$bin $(stat -c %s "$bin") bytes linux/$p"
done
