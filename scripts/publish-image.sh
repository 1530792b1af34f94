#!/usr/bin/env bash
# Build pullcheck's container image and push it to your registry, then print the digest to
# pin it by. The chart and `pullcheck inject` default to an image that is not published, so
# this is the first step of an install.
#
#   scripts/publish-image.sh [--dest-tls-verify=false] [--dest-cert-dir DIR] REGISTRY/REPO[:TAG]
#
#   REGISTRY/REPO:TAG       where to push, e.g. registry.example.com/tools/pullcheck:0.1.0
#                           (default TAG: the crate version from Cargo.toml)
#   --dest-tls-verify=false push over plain HTTP or to a registry with an untrusted certificate
#                           (only for a registry you run yourself on a trusted network)
#   --dest-cert-dir DIR     trust the CA certificates (*.crt) in DIR for the registry
#
# Needs Rust (rustup) and, on Debian, what `scripts/deps.sh static image` installs (musl-tools,
# skopeo, jq). Credentials come from skopeo's usual places: run `skopeo login REGISTRY` first
# (or `docker login`; skopeo reads ~/.docker/config.json too).
#
# The image is the static binary in a FROM-scratch image (scripts/build-image.sh), pushed with
# skopeo. On stdout: the pushed reference, its digest, the pinned reference and the helm and
# inject commands that use it; build progress goes to stderr. The digest is the one skopeo
# wrote to the registry (its --digestfile), i.e. what the registry serves for the tag.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
tls=() dest=
while [ $# -gt 0 ]; do
  case $1 in
    --dest-tls-verify=false) tls=(--dest-tls-verify=false); shift ;;
    --dest-cert-dir) [ $# -ge 2 ] || { echo "publish-image: --dest-cert-dir needs a directory" >&2; exit 2; }
                     tls+=(--dest-cert-dir "$2"); shift 2 ;;
    --dest-cert-dir=*) tls+=(--dest-cert-dir "${1#*=}"); shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "publish-image: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$dest" ] || { echo "publish-image: one destination only (got '$dest' and '$1')" >&2; exit 2; }
       dest=$1; shift ;;
  esac
done
[ -n "$dest" ] || { echo "publish-image: missing REGISTRY/REPO[:TAG] (see --help)" >&2; exit 2; }
case $dest in
  docker://*) dest=${dest#docker://} ;;
esac
case $dest in
  *@*) echo "publish-image: '$dest' names a digest; give a tag to push to (REGISTRY/REPO:TAG)" >&2; exit 2 ;;
  */*) ;;
  *) echo "publish-image: '$dest' has no registry part; give REGISTRY/REPO[:TAG], e.g. registry.example.com/pullcheck:0.1.0" >&2; exit 2 ;;
esac
version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
# A colon after the last slash is a tag; one before it belongs to the registry's port.
case ${dest##*/} in
  *:*) repo=${dest%:*} tag=${dest##*:} ;;
  *) repo=$dest tag=$version; dest=$repo:$tag ;;
esac

scripts/deps.sh static image
echo "publish-image: building the static binary (the first build takes a few minutes)" >&2
bin=$(scripts/build-static.sh | cut -d' ' -f1)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
layout=${CARGO_TARGET_DIR:-target}/image/publish
scripts/build-image.sh --out "$layout" --tag "$tag" "$bin" >"$work/build.out"
sed 's/^/publish-image: /' "$work/build.out" >&2
built=$(sed -n 's/^digest: *//p' "$work/build.out")

echo "publish-image: pushing to $dest" >&2
skopeo copy --quiet ${tls[@]+"${tls[@]}"} --digestfile "$work/digest" "oci:$layout:$tag" "docker://$dest"
digest=$(cat "$work/digest")
case $digest in
  sha256:????????????????????????????????????????????????????????????????) ;;
  *) echo "publish-image: skopeo reported no digest ('$digest')" >&2; exit 1 ;;
esac
# skopeo copies an OCI manifest as is unless the registry refuses it; say so if it converted.
[ "$digest" = "$built" ] || echo "publish-image: note: the registry stores a converted manifest ($digest, built $built)" >&2

cat <<EOF
pushed: $dest
digest: $digest
pinned: $repo@$digest

Install the webhook with this image:
  helm install pullcheck charts/pullcheck -n pullcheck-system --create-namespace \\
    --set image.repository=$repo --set image.digest=$digest
or inject it as an init container:
  pullcheck inject --image $repo@$digest -f job.yaml
EOF
