#!/usr/bin/env bash
# Assemble pullcheck's container image without a container engine: the Dockerfile's final
# stage (FROM scratch; /pullcheck 0755 and /LICENSE 0644 owned 0:0; USER 65532:65532;
# ENTRYPOINT ["/pullcheck"]; the OCI labels) written directly as an OCI image layout from
# the static binary that scripts/build-static.sh builds. Optionally pushes it with skopeo.
#
#   scripts/build-image.sh [--out DIR] [--tag TAG] [--push HOST/REPO[:TAG]]
#                          [--dest-cert-dir DIR | --dest-insecure] [BINARY]
#
#   BINARY   default target/x86_64-unknown-linux-musl/release/pullcheck
#   --out    OCI layout directory (default target/image/oci); replaced if it exists
#   --tag    the layout's ref name (default: the crate version from Cargo.toml)
#   --push   copy the image to docker://HOST/REPO[:TAG] (default tag: --tag)
#
# Prints the layout reference, the manifest digest and the image size (compressed layer +
# config + manifest, what a node downloads). The output is reproducible: the same binary,
# LICENSE, Cargo.toml and SOURCE_DATE_EPOCH (default: the HEAD commit's time) give the same
# digest.
#
# Why not buildah: `buildah from scratch` + copy/config/commit works too, but it keeps its
# state in /var/lib/containers (vfs on this machine: a full copy per step, shared with every
# other user of the machine), stamps the current time into the layer and config unless told
# otherwise, and needs --storage-driver/--isolation flags that differ between machines. An
# image from scratch with one layer is just tar + gzip + two small JSON documents, so this
# script needs only tar, gzip, sha256sum and jq, and skopeo (which validates every digest
# and size on copy) to push.
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/image/oci tag= push= cert_dir= insecure=0
bin=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/release/pullcheck
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --push) push=$2; shift 2 ;;
    --dest-cert-dir) cert_dir=$2; shift 2 ;;
    --dest-insecure) insecure=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build-image: unknown option $1" >&2; exit 2 ;;
    *) bin=$1; shift ;;
  esac
done
[ -x "$bin" ] || { echo "build-image: $bin missing; run scripts/build-static.sh" >&2; exit 1; }
for t in tar gzip sha256sum jq file; do
  command -v "$t" >/dev/null || { echo "build-image: needs $t" >&2; exit 1; }
done

# Image metadata from Cargo.toml (the Dockerfile's ARG defaults and LABELs carry the same values).
cargo_field() { sed -n "/^\[package\]/,/^\[/s/^$1 = \"\(.*\)\"\$/\1/p" Cargo.toml | head -1; }
version=$(cargo_field version)
description=$(cargo_field description)
licenses=$(cargo_field license)
source_url=$(cargo_field repository)
[ -n "$version" ] && [ -n "$licenses" ] || { echo "build-image: can't read Cargo.toml" >&2; exit 1; }
tag=${tag:-$version}

info=$(file -b "$bin")
case $info in
  *statically\ linked*|*static-pie*) ;;
  *) echo "build-image: $bin is not statically linked ($info)" >&2; exit 1 ;;
esac
case $info in
  *x86-64*) arch=amd64 ;;
  *aarch64*|*ARM\ aarch64*) arch=arm64 ;;
  *) echo "build-image: unknown architecture: $info" >&2; exit 1 ;;
esac

epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/root"
install -m 0755 "$bin" "$work/root/pullcheck"
install -m 0644 LICENSE "$work/root/LICENSE"

# One layer, byte-for-byte reproducible: fixed order, owner, mtime; ustar has no
# atime/ctime headers; gzip -n stores no name or time.
tar -C "$work/root" --format=ustar --sort=name --owner=0 --group=0 --numeric-owner \
  --mtime="@$epoch" -cf "$work/layer.tar" LICENSE pullcheck
gzip -9 -n -c "$work/layer.tar" > "$work/layer.tar.gz"

rm -rf "$out"
mkdir -p "$out/blobs/sha256"
blob() { # blob FILE -> prints the digest's hex, stores the file under blobs/sha256
  local d
  d=$(sha256sum "$1" | cut -d' ' -f1)
  cp "$1" "$out/blobs/sha256/$d"
  echo "$d"
}
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
layer=$(blob "$work/layer.tar.gz")
layer_size=$(stat -c %s "$work/layer.tar.gz")

jq -cnS --arg created "$created" --arg arch "$arch" --arg diff "sha256:$diff_id" \
  --arg version "$version" --arg description "$description" --arg licenses "$licenses" \
  --arg source "$source_url" '{
    created: $created, architecture: $arch, os: "linux",
    config: {
      User: "65532:65532",
      Entrypoint: ["/pullcheck"],
      Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
      Labels: {
        "org.opencontainers.image.title": "pullcheck",
        "org.opencontainers.image.description": $description,
        "org.opencontainers.image.licenses": $licenses,
        "org.opencontainers.image.source": $source,
        "org.opencontainers.image.version": $version
      }
    },
    rootfs: {type: "layers", diff_ids: [$diff]},
    history: [{created: $created, created_by: "scripts/build-image.sh: COPY /pullcheck /LICENSE"}]
  }' | tr -d '\n' > "$work/config.json"
config=$(blob "$work/config.json")
config_size=$(stat -c %s "$work/config.json")

jq -cn --arg config "sha256:$config" --argjson csize "$config_size" \
  --arg layer "sha256:$layer" --argjson lsize "$layer_size" '{
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $config, size: $csize},
    layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $layer, size: $lsize}]
  }' | tr -d '\n' > "$work/manifest.json"
manifest=$(blob "$work/manifest.json")
manifest_size=$(stat -c %s "$work/manifest.json")

jq -cn --arg m "sha256:$manifest" --argjson size "$manifest_size" --arg tag "$tag" --arg arch "$arch" '{
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $size,
                 platform: {architecture: $arch, os: "linux"},
                 annotations: {"org.opencontainers.image.ref.name": $tag}}]
  }' > "$out/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$out/oci-layout"

total=$((layer_size + config_size + manifest_size))
echo "image:    oci:$out:$tag (linux/$arch)"
echo "digest:   sha256:$manifest"
echo "contents: /pullcheck $(stat -c %s "$bin") bytes, /LICENSE $(stat -c %s LICENSE) bytes (uncompressed layer $(stat -c %s "$work/layer.tar") bytes)"
echo "size:     $total bytes = layer $layer_size + config $config_size + manifest $manifest_size (compressed, as pulled)"

if [ -n "$push" ]; then
  case ${push##*/} in *:*|*@*) dest=$push ;; *) dest=$push:$tag ;; esac
  tls=(--dest-tls-verify=true)
  [ -n "$cert_dir" ] && tls+=(--dest-cert-dir "$cert_dir")
  [ "$insecure" = 1 ] && tls=(--dest-tls-verify=false)
  skopeo copy --quiet "${tls[@]}" "oci:$out:$tag" "docker://$dest"
  echo "pushed:   $dest@sha256:$manifest"
fi
