#!/usr/bin/env bash
# Install what a script needs on a fresh Debian machine (as root), skipping what is already
# there. Idempotent. Each caller names the groups it uses, so the demo doesn't install a
# container runtime it never starts:
#
#   scripts/deps.sh GROUP...     e.g. scripts/deps.sh registry
#   scripts/deps.sh              every group (the hardening and end-to-end scripts)
#   scripts/deps.sh --list       each group and its Debian packages
#
#   registry  a throwaway Debian docker-registry and skopeo to push to it (demo, publish test)
#   test      the integration tests: registry + openssl, htpasswd (basic auth fixtures), jq
#   static    the musl toolchain for the static binary (build-static.sh adds the Rust target)
#   cross     the arm64 cross build and its emulator: aarch64-linux-gnu-gcc for ring's C,
#             qemu-aarch64-static to run the result (build-static.sh arm64, static-smoke.sh)
#   image     assembling and pushing the OCI image (build-image.sh, publish-image.sh)
#   smoke     running that image under runc in a network namespace (image-smoke.sh)
#   cluster   the single-node cluster's workload image and network (cluster.sh)
#   bench     the benchmarks (bench/run.sh)
#   lint      shellcheck, over every script that stays shell (.ci/run)
set -euo pipefail

# group -> "command:package" pairs; a package is installed when its command is missing.
declare -A groups=(
  [registry]="docker-registry:docker-registry skopeo:skopeo curl:curl"
  [test]="docker-registry:docker-registry skopeo:skopeo curl:curl openssl:openssl htpasswd:apache2-utils jq:jq"
  [static]="musl-gcc:musl-tools file:file"
  [cross]="aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu qemu-aarch64-static:qemu-user-static file:file"
  [image]="jq:jq file:file skopeo:skopeo"
  [smoke]="runc:runc skopeo:skopeo docker-registry:docker-registry jq:jq openssl:openssl curl:curl ip:iproute2"
  [cluster]="busybox:busybox-static musl-gcc:musl-tools ip:iproute2 jq:jq curl:curl /usr/lib/cni/bridge:containernetworking-plugins"
  [bench]="hyperfine:hyperfine"
  [lint]="shellcheck:shellcheck"
)
order=(registry test static cross image smoke cluster bench lint)

if [ "${1:-}" = --list ]; then
  for g in "${order[@]}"; do
    pkgs=()
    for pair in ${groups[$g]}; do pkgs+=("${pair#*:}"); done
    printf '%-9s %s\n' "$g" "${pkgs[*]}"
  done
  exit 0
fi

wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${order[@]}")
need=()
for g in "${wanted[@]}"; do
  [ -n "${groups[$g]+set}" ] || { echo "deps: unknown group '$g' (groups: ${order[*]})" >&2; exit 2; }
  for pair in ${groups[$g]}; do
    bin=${pair%%:*} pkg=${pair#*:}
    command -v "$bin" >/dev/null 2>&1 && continue
    case " ${need[*]} " in *" $pkg "*) ;; *) need+=("$pkg") ;; esac
  done
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
