#!/usr/bin/env bash
# Install what pullcheck's build, demo and tests need on a fresh Debian machine (as root),
# skipping what is already there. Idempotent.
set -euo pipefail
need=()
for pair in docker-registry:docker-registry skopeo:skopeo runc:runc buildah:buildah \
            musl-gcc:musl-tools openssl:openssl htpasswd:apache2-utils jq:jq \
            hyperfine:hyperfine ip:iproute2 busybox:busybox-static; do
  bin=${pair%%:*}; pkg=${pair#*:}
  command -v "$bin" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
if command -v rustup >/dev/null 2>&1; then
  rustup target list --installed | grep -q x86_64-unknown-linux-musl \
    || rustup target add x86_64-unknown-linux-musl >/dev/null
fi
