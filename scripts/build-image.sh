#!/usr/bin/env bash
# Assemble pullcheck's container image without a container engine: the Dockerfile's final
# stage (FROM scratch; /pullcheck 0755 and /LICENSE 0644 owned 0:0; USER 65532:65532;
# ENTRYPOINT ["/pullcheck"]; the OCI labels) written directly as an OCI image layout from
# the static binaries that scripts/build-static.sh builds. Optionally pushes it with skopeo.
#
#   scripts/build-image.sh [--out DIR] [--tag TAG] [--push HOST/REPO[:TAG]]
#                          [--dest-cert-dir DIR | --dest-insecure] [BINARY...]
#
#   BINARY   one static binary per platform (its architecture is read with `file`);
#            default target/x86_64-unknown-linux-musl/release/pullcheck. One binary gives
#            a single-platform image (the tag names its manifest); several give an OCI
#            image index over one manifest per platform (the tag names the index).
#   --out    OCI layout directory (default target/image/oci); replaced if it exists
#   --tag    the layout's ref name (default: the crate version from Cargo.toml)
#   --push   copy the image (every platform) to docker://HOST/REPO[:TAG] (default tag: --tag)
#
# Prints the layout reference, the digest (the index's when there are several platforms),
# and per platform its manifest digest and the image size (compressed layer + config +
# manifest, what a node downloads). The output is reproducible: the same binaries,
# LICENSE, Cargo.toml and SOURCE_DATE_EPOCH (default: the HEAD commit's time) give the same
# digests.
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

out=target/image/oci tag='' push='' cert_dir='' insecure=0
bins=()
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --push) push=$2; shift 2 ;;
    --dest-cert-dir) cert_dir=$2; shift 2 ;;
    --dest-insecure) insecure=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "build-image: unknown option $1" >&2; exit 2 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[ ${#bins[@]} -gt 0 ] || bins=("${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/release/pullcheck")
for bin in "${bins[@]}"; do
  [ -x "$bin" ] || { echo "build-image: $bin missing; run scripts/build-static.sh" >&2; exit 1; }
done
for t in tar gzip sha256sum jq file; do
  command -v "$t" >/dev/null || { echo "build-image: needs $t" >&2; exit 1; }
done

# Image metadata from Cargo.toml (the Dockerfile's ARG defaults and LABELs carry the same values).
cargo_field() { sed -n "/^\[package\]/,/^\[/s/^$1 = \"\(.*\)\"\$/\1/p" Cargo.toml | head -1; }
version=$(cargo_field version)
description=$(cargo_field description)
licenses=$(cargo_field license)
source_url=$(cargo_field repository)
{ [ -n "$version" ] && [ -n "$licenses" ]; } || { echo "build-image: can't read Cargo.toml" >&2; exit 1; }
tag=${tag:-$version}

epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out/blobs/sha256"
blob() { # blob FILE -> prints the digest's hex, stores the file under blobs/sha256
  local d
  d=$(sha256sum "$1" | cut -d' ' -f1)
  cp "$1" "$out/blobs/sha256/$d"
  echo "$d"
}

# image BINARY: one platform's layer, config and manifest; sets ARCH, MANIFEST (hex),
# MANIFEST_SIZE and prints that platform's lines.
image() {
  local bin=$1 info w
  info=$(file -b "$bin")
  case $info in
    *statically\ linked*|*static-pie*) ;;
    *) echo "build-image: $bin is not statically linked ($info)" >&2; exit 1 ;;
  esac
  case $info in
    *x86-64*) ARCH=amd64 ;;
    *aarch64*) ARCH=arm64 ;;
    *) echo "build-image: unknown architecture: $info" >&2; exit 1 ;;
  esac
  case " ${archs[*]} " in
    *" $ARCH "*) echo "build-image: two binaries for linux/$ARCH" >&2; exit 1 ;;
  esac
  archs+=("$ARCH")
  w=$work/$ARCH
  mkdir -p "$w/root"
  install -m 0755 "$bin" "$w/root/pullcheck"
  install -m 0644 LICENSE "$w/root/LICENSE"

  # One layer, byte-for-byte reproducible: fixed order, owner, mtime; ustar has no
  # atime/ctime headers; gzip -n stores no name or time.
  tar -C "$w/root" --format=ustar --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@$epoch" -cf "$w/layer.tar" LICENSE pullcheck
  gzip -9 -n -c "$w/layer.tar" > "$w/layer.tar.gz"
  local diff_id layer layer_size config config_size
  diff_id=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
  layer=$(blob "$w/layer.tar.gz")
  layer_size=$(stat -c %s "$w/layer.tar.gz")

  jq -cnS --arg created "$created" --arg arch "$ARCH" --arg diff "sha256:$diff_id" \
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
    }' | tr -d '\n' > "$w/config.json"
  config=$(blob "$w/config.json")
  config_size=$(stat -c %s "$w/config.json")

  jq -cn --arg config "sha256:$config" --argjson csize "$config_size" \
    --arg layer "sha256:$layer" --argjson lsize "$layer_size" '{
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $config, size: $csize},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $layer, size: $lsize}]
    }' | tr -d '\n' > "$w/manifest.json"
  MANIFEST=$(blob "$w/manifest.json")
  MANIFEST_SIZE=$(stat -c %s "$w/manifest.json")
  local total=$((layer_size + config_size + MANIFEST_SIZE))
  echo "manifest: linux/$ARCH sha256:$MANIFEST"
  echo "contents: linux/$ARCH /pullcheck $(stat -c %s "$bin") bytes, /LICENSE $(stat -c %s LICENSE) bytes (uncompressed layer $(stat -c %s "$w/layer.tar") bytes)"
  echo "size:     linux/$ARCH $total bytes = layer $layer_size + config $config_size + manifest $MANIFEST_SIZE (compressed, as pulled)"
}

archs=() entries=()
for bin in "${bins[@]}"; do
  image "$bin"
  entries+=("$(jq -cn --arg m "sha256:$MANIFEST" --argjson size "$MANIFEST_SIZE" --arg arch "$ARCH" \
    '{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $m, size: $size,
      platform: {architecture: $arch, os: "linux"}}')")
done

if [ ${#bins[@]} = 1 ]; then
  # One platform: the tag names the manifest itself (what the runc smoke test pulls).
  top=$MANIFEST top_type=application/vnd.oci.image.manifest.v1+json top_size=$MANIFEST_SIZE
else
  # Several: an image index over them, so every node's containerd picks its own (the
  # digest to pin is the index's, the same on every node).
  printf '%s\n' "${entries[@]}" | jq -cs '{
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: .
    }' | tr -d '\n' > "$work/index.json"
  top=$(blob "$work/index.json")
  top_type=application/vnd.oci.image.index.v1+json top_size=$(stat -c %s "$work/index.json")
fi
jq -cn --arg d "sha256:$top" --arg type "$top_type" --argjson size "$top_size" --arg tag "$tag" '{
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{mediaType: $type, digest: $d, size: $size,
                 annotations: {"org.opencontainers.image.ref.name": $tag}}]
  }' > "$out/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$out/oci-layout"

platforms=$(printf 'linux/%s,' "${archs[@]}")
echo "image:    oci:$out:$tag (${platforms%,})"
echo "digest:   sha256:$top"

if [ -n "$push" ]; then
  case ${push##*/} in *:*|*@*) dest=$push ;; *) dest=$push:$tag ;; esac
  tls=(--dest-tls-verify=true)
  [ -n "$cert_dir" ] && tls+=(--dest-cert-dir "$cert_dir")
  [ "$insecure" = 1 ] && tls=(--dest-tls-verify=false)
  skopeo copy --quiet --all "${tls[@]}" "oci:$out:$tag" "docker://$dest"
  echo "pushed:   $dest@sha256:$top"
fi
