#!/usr/bin/env bash
# Self-contained demo: start a throwaway local registry (Debian's docker-registry) on a free
# loopback port, push a tiny image with skopeo, then check a present and an absent tag.
# Everything is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release --locked --bin pullcheck >&2
pc=$PWD/target/release/pullcheck

work=$(mktemp -d)
cleanup() { [ -n "${reg_pid:-}" ] && kill "$reg_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/config.yml" <<CFG
version: 0.1
log: { level: error }
storage: { filesystem: { rootdirectory: $work/storage } }
http: { addr: 127.0.0.1:$port }
CFG
docker-registry serve "$work/config.yml" >"$work/registry.log" 2>&1 &
reg_pid=$!
for _ in $(seq 50); do curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break; sleep 0.1; done

# A one-layer OCI image, written as an OCI layout and pushed with skopeo.
lay=$work/layout; mkdir -p "$lay/blobs/sha256" "$work/rootfs"
echo "hello from pullcheck's demo" > "$work/rootfs/hello.txt"
tar -C "$work/rootfs" -cf "$work/layer.tar" hello.txt
blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "$lay/blobs/sha256/$d"; echo "$d"; }
layer=$(blob "$work/layer.tar")
printf '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$layer" > "$work/config.json"
config=$(blob "$work/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
  "$config" "$(stat -c %s "$work/config.json")" "$layer" "$(stat -c %s "$work/layer.tar")" > "$work/manifest.json"
manifest=$(blob "$work/manifest.json")
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"v1"}}]}' \
  "$manifest" "$(stat -c %s "$work/manifest.json")" > "$lay/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$lay/oci-layout"
skopeo copy --quiet --dest-tls-verify=false "oci:$lay:v1" "docker://127.0.0.1:$port/demo/hello:v1"

reg=127.0.0.1:$port
echo
echo "\$ pullcheck check --insecure-registry $reg $reg/demo/hello:v1"
set +e
"$pc" check --insecure-registry "$reg" "$reg/demo/hello:v1"; echo "exit code: $?"
echo
echo "\$ pullcheck check --insecure-registry $reg $reg/demo/hello:v2   # a tag that was never pushed"
"$pc" check --insecure-registry "$reg" "$reg/demo/hello:v2"; echo "exit code: $?"
echo
echo "\$ pullcheck check --insecure-registry $reg --output json $reg/demo/hello:v1 $reg/demo/hello:v2"
"$pc" check --insecure-registry "$reg" --quiet --output json "$reg/demo/hello:v1" "$reg/demo/hello:v2"; echo "exit code: $?"
set -e
