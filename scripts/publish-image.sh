#!/usr/bin/env bash
# Build pullcheck's container image for every node platform, push it to your registry with
# the Helm chart beside it, and print the digest to pin it by. There is no public image: the
# chart refuses to render without one and `pullcheck inject` needs --image, so this is the
# first step of an install.
#
#   scripts/publish-image.sh [--dest-tls-verify=false] [--dest-cert-dir DIR] [--no-chart]
#                            [--krew-uri-base URL] REGISTRY/REPO[:TAG]
#
#   REGISTRY/REPO:TAG       where to push, e.g. registry.example.com/tools/pullcheck:0.1.0
#                           (default TAG: the crate version from Cargo.toml)
#   --dest-tls-verify=false push over plain HTTP or to a registry with an untrusted certificate
#                           (only for a registry you run yourself on a trusted network)
#   --dest-cert-dir DIR     trust the CA certificates (*.crt) in DIR for the registry
#   --no-chart              push the image only
#   --krew-uri-base URL     where you will host the kubectl plugin archives (the manifest's
#                           `uri`s; default a placeholder, see scripts/krew-manifest.sh)
#
# The image is an OCI image index over linux/amd64 and linux/arm64 (`platforms` below, the
# chart's default clusterPlatforms; scripts/helm-check.sh fails when the two differ): static
# musl binaries (scripts/build-static.sh, arm64 cross-compiled) in FROM-scratch images
# (scripts/build-image.sh), pushed with `skopeo copy --all`. The chart is packaged with
# image.repository and image.digest set to what was pushed and pushed as an OCI artifact
# (`helm push`) to oci://REGISTRY/…/charts/pullcheck (beside REPO, not in it: the chart's
# version would collide with the image's tag), so `helm install oci://…` needs no --set.
#
# Needs Rust (rustup; the Rust targets are added when missing) and, on Debian, what
# `scripts/deps.sh static cross image` installs (musl-tools, gcc-aarch64-linux-gnu, skopeo,
# jq), and helm 3.8+ for the chart ($HELM, else helm on PATH). Credentials come from
# skopeo's and helm's usual places: run `skopeo login REGISTRY` and `helm registry login
# REGISTRY` first (both read ~/.docker/config.json too).
#
# The same static binaries become the kubectl plugin: one archive per platform and the krew
# manifest plugin.yaml with their sha256 (scripts/krew-manifest.sh), written to
# ${CARGO_TARGET_DIR:-target}/krew; upload the archives under --krew-uri-base.
#
# On stdout: the pushed reference, the index digest, each platform's manifest, the pinned
# reference, the chart reference, the krew manifest and the helm, inject and krew commands
# that use them; build progress goes to stderr. The digest is the one skopeo wrote to the registry (its
# --digestfile), i.e. what the registry serves for the tag.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
# The platforms of the image, in index order (see the header).
platforms=(amd64 arm64)
tls=() dest='' chart=1 krew_uri=()
while [ $# -gt 0 ]; do
  case $1 in
    --dest-tls-verify=false) tls=(--dest-tls-verify=false); shift ;;
    --dest-cert-dir) [ $# -ge 2 ] || { echo "publish-image: --dest-cert-dir needs a directory" >&2; exit 2; }
                     tls+=(--dest-cert-dir "$2"); shift 2 ;;
    --dest-cert-dir=*) tls+=(--dest-cert-dir "${1#*=}"); shift ;;
    --no-chart) chart=0; shift ;;
    --krew-uri-base) [ $# -ge 2 ] || { echo "publish-image: --krew-uri-base needs a URL" >&2; exit 2; }
                     krew_uri=(--uri-base "$2"); shift 2 ;;
    --krew-uri-base=*) krew_uri=(--uri-base "${1#*=}"); shift ;;
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

scripts/deps.sh static cross image
helm=
if [ "$chart" = 1 ]; then
  helm=${HELM:-$(command -v helm || true)}
  { [ -n "$helm" ] && [ -x "$helm" ]; } || {
    echo "publish-image: needs helm 3.8+ to push the chart (set HELM=/path/to/helm), or pass --no-chart" >&2; exit 2; }
fi
echo "publish-image: building the static binaries for ${platforms[*]} (the first build takes several minutes)" >&2
mapfile -t bins < <(scripts/build-static.sh "${platforms[@]}" | cut -d' ' -f1)
[ ${#bins[@]} = ${#platforms[@]} ] || { echo "publish-image: build-static.sh gave ${#bins[@]} binaries for ${#platforms[@]} platforms" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
krew_dir=${CARGO_TARGET_DIR:-target}/krew
scripts/krew-manifest.sh --out "$krew_dir" ${krew_uri[@]+"${krew_uri[@]}"} "${bins[@]}" >"$work/krew.out"
layout=${CARGO_TARGET_DIR:-target}/image/publish
scripts/build-image.sh --out "$layout" --tag "$tag" "${bins[@]}" >"$work/build.out"
sed 's/^/publish-image: /' "$work/build.out" >&2
built=$(sed -n 's/^digest: *//p' "$work/build.out")

echo "publish-image: pushing to $dest" >&2
skopeo copy --quiet --all ${tls[@]+"${tls[@]}"} --digestfile "$work/digest" "oci:$layout:$tag" "docker://$dest"
digest=$(cat "$work/digest")
case $digest in
  sha256:????????????????????????????????????????????????????????????????) ;;
  *) echo "publish-image: skopeo reported no digest ('$digest')" >&2; exit 1 ;;
esac
# skopeo copies an OCI index as is unless the registry refuses it; say so if it converted.
[ "$digest" = "$built" ] || echo "publish-image: note: the registry stores a converted index ($digest, built $built)" >&2

echo "pushed: $dest"
echo "digest: $digest"
sed -n 's/^manifest: */platform: /p' "$work/build.out"
echo "pinned: $repo@$digest"
sed -n 's/^archive: /krew archive: /p; s/^manifest: /krew manifest: /p' "$work/krew.out"

chart_ref=
if [ "$chart" = 1 ]; then
  # The chart, with the image just pushed as its default, as an OCI artifact.
  cp -r charts/pullcheck "$work/pullcheck"
  sed -i '/^image:/,/^[^ #]/{s|^  repository: ""$|  repository: '"$repo"'|; s|^  digest: ""$|  digest: '"$digest"'|}' \
    "$work/pullcheck/values.yaml"
  grep -qx "  digest: $digest" "$work/pullcheck/values.yaml" || {
    echo "publish-image: could not set image.digest in the packaged chart's values.yaml" >&2; exit 1; }
  "$helm" package "$work/pullcheck" -d "$work/pkg" >/dev/null
  pkg=$(ls "$work/pkg"/pullcheck-*.tgz)
  host=${repo%%/*} path=${repo#*/}
  case $path in */*) chart_repo=$host/${path%/*}/charts ;; *) chart_repo=$host/charts ;; esac
  hargs=() insecure=0 expect_dir=0
  for t in ${tls[@]+"${tls[@]}"}; do
    if [ "$expect_dir" = 1 ]; then
      cat "$t"/*.crt > "$work/ca.crt"; hargs+=(--ca-file "$work/ca.crt"); expect_dir=0; continue
    fi
    case $t in
      --dest-cert-dir) expect_dir=1 ;;
      --dest-tls-verify=false) insecure=1 ;;
    esac
  done
  echo "publish-image: pushing the chart to oci://$chart_repo" >&2
  if [ "$insecure" = 1 ]; then
    # skopeo's tls-verify=false covers both plain HTTP and an untrusted certificate; helm
    # has a flag for each: the certificate one first, then plain HTTP.
    "$helm" push "$pkg" "oci://$chart_repo" --insecure-skip-tls-verify >"$work/push.out" 2>&1 \
      || "$helm" push "$pkg" "oci://$chart_repo" --plain-http >"$work/push.out" 2>&1 \
      || { sed 's/^/publish-image: /' "$work/push.out" >&2; exit 1; }
  else
    "$helm" push "$pkg" "oci://$chart_repo" ${hargs[@]+"${hargs[@]}"} >"$work/push.out" 2>&1 \
      || { sed 's/^/publish-image: /' "$work/push.out" >&2; exit 1; }
  fi
  chart_version=$(sed -n 's/^version: *//p' "$work/pullcheck/Chart.yaml")
  chart_digest=$(sed -n 's/^Digest: *//p' "$work/push.out")
  chart_ref=oci://$chart_repo/pullcheck
  echo "chart:  $chart_ref --version $chart_version ($chart_digest)"
fi

echo
if [ -n "$chart_ref" ]; then
  echo "Install the webhook (the chart's image defaults to the one just pushed):"
  echo "  helm install pullcheck $chart_ref --version $chart_version -n pullcheck-system --create-namespace"
  echo "or from a checkout:"
else
  echo "Install the webhook with this image:"
fi
cat <<EOF
  helm install pullcheck charts/pullcheck -n pullcheck-system --create-namespace \\
    --set image.repository=$repo --set image.digest=$digest
or inject it as an init container:
  pullcheck inject --image $repo@$digest -f job.yaml
Install the kubectl plugin (krew; the archive of your platform):
  kubectl krew install --manifest=$krew_dir/plugin.yaml --archive=$krew_dir/kubectl-pullcheck_linux_amd64.tar.gz
EOF
