#!/usr/bin/env bash
# Test scripts/publish-image.sh the way a user runs it, against throwaway Debian
# docker-registries on loopback: one over TLS with a private CA (--dest-cert-dir), one over
# plain HTTP (--dest-tls-verify=false). The digest it prints must be the one the registry
# serves for the tag (asked with curl, not skopeo), the manifest behind it must hash to that
# digest, a second publish must give the same digest (the image is reproducible), and bad
# destinations are usage errors. The image is an index over linux/amd64 and linux/arm64:
# pullcheck's own check, crane and regctl must each find both platforms in what the
# registry serves. The chart is pushed beside it as an OCI artifact: `helm template
# oci://…` of what the registry serves must pin the image to the printed digest.
# The last line is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
scripts/deps.sh registry test >/dev/null
# helm (publish-image.sh pushes the chart with it), crane and regctl (independent readers of
# the index), from scripts/go-tools.sh (built once, cached).
tools=$(scripts/go-tools.sh helm crane regctl)
export HELM=$tools/helm

work=$(mktemp -d)
pids=()
cleanup() { local p; for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

accept='application/vnd.oci.image.manifest.v1+json,application/vnd.oci.image.index.v1+json,application/vnd.docker.distribution.manifest.v2+json'
# served_digest URL CURLARGS...: the Docker-Content-Digest the registry answers for a HEAD.
served_digest() {
  local url=$1; shift
  curl -fsSI "$@" -H "Accept: $accept" "$url" | tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: *//p'
}
# publish OUTFILE ARGS...: runs publish-image.sh, keeps stdout, shows it indented.
publish() {
  local out=$1; shift
  set +e; scripts/publish-image.sh "$@" >"$out" 2>"$out.err"; RC=$?; set -e
  sed 's/^/     | /' "$out"
  [ "$RC" = 0 ] || sed 's/^/     ! /' "$out.err"
}

# --- TLS registry, trusted through --dest-cert-dir ------------------------------------------
make_tls "$work/tls"
mkdir -p "$work/certs" && cp "$work/tls/ca.crt" "$work/certs/ca.crt"
tport=$(free_port)
start_registry "$work/reg-tls" "$tport" "$work/tls"; pids+=("$REG_PID")
treg=127.0.0.1:$tport
publish "$work/tls.out" --dest-cert-dir "$work/certs" "$treg/tools/pullcheck:test"
check "publish to a TLS registry exits 0" [ "$RC" = 0 ]
digest=$(sed -n 's/^digest: //p' "$work/tls.out")
check "prints a sha256 digest ($digest)" grep -Eqx 'sha256:[0-9a-f]{64}' <<<"$digest"
served=$(served_digest "https://$treg/v2/tools/pullcheck/manifests/test" --cacert "$work/tls/ca.crt")
check "the registry serves that digest for the tag ($served)" [ "$served" = "$digest" ]
curl -fsS --cacert "$work/tls/ca.crt" -H "Accept: $accept" \
  "https://$treg/v2/tools/pullcheck/manifests/$digest" -o "$work/manifest.json"
check "the manifest fetched by digest hashes to it" [ "sha256:$(sha256sum <"$work/manifest.json" | cut -d' ' -f1)" = "$digest" ]
check "prints the pinned reference" grep -qxF "pinned: $treg/tools/pullcheck@$digest" "$work/tls.out"
check "prints the helm values that pin it" \
  grep -qF -- "--set image.repository=$treg/tools/pullcheck --set image.digest=$digest" "$work/tls.out"

# The index: one manifest per platform, in the order publish-image.sh builds them, each as
# printed.
platforms=$(jq -r '[.manifests[] | .platform.os + "/" + .platform.architecture] | join(",")' "$work/manifest.json")
check "the served manifest is an OCI index over linux/amd64,linux/arm64 ($platforms)" \
  [ "$(jq -r .mediaType "$work/manifest.json")/$platforms" = "application/vnd.oci.image.index.v1+json/linux/amd64,linux/arm64" ]
for arch in amd64 arm64; do
  child=$(jq -r --arg a "$arch" '.manifests[] | select(.platform.architecture == $a) | .digest' "$work/manifest.json")
  check "prints linux/$arch's manifest ($child)" grep -qxF "platform: linux/$arch $child" "$work/tls.out"
  curl -fsS --cacert "$work/tls/ca.crt" -H "Accept: $accept" \
    "https://$treg/v2/tools/pullcheck/manifests/$child" -o "$work/$arch.json"
  config=$(jq -r .config.digest "$work/$arch.json")
  carch=$(curl -fsS --cacert "$work/tls/ca.crt" "https://$treg/v2/tools/pullcheck/blobs/$config" | jq -r '.os + "/" + .architecture')
  check "linux/$arch's image config says $carch" [ "$carch" = "linux/$arch" ]
  # pullcheck's own verdict for a node of that platform (the amd64 static binary, run here).
  set +e
  "${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/release/pullcheck" check --output json \
    --ca-file "$work/tls/ca.crt" --platform "linux/$arch" "$treg/tools/pullcheck:test" >"$work/check-$arch.json" 2>"$work/check-$arch.err"
  crc=$?
  set -e
  check "pullcheck check --platform linux/$arch: exit 0, pullable, the index digest, linux/$arch's manifest" \
    [ "$crc/$(jq -r '.images[0] | .verdict + " " + .digest + " " + .platform.child_digest' "$work/check-$arch.json")" = "0/pullable $digest $child" ]
done
set +e
"${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-musl/release/pullcheck" check \
  --ca-file "$work/tls/ca.crt" --platform linux/s390x "$treg/tools/pullcheck:test" >/dev/null 2>&1
crc=$?
set -e
check "pullcheck check --platform linux/s390x: platform missing (exit $crc)" [ "$crc" = 12 ]

# The chart beside the image, as helm pulls it: its default image is the pinned one.
chart_line=$(sed -n 's/^chart:  //p' "$work/tls.out")
check "prints the chart reference ($chart_line)" \
  grep -Eq "^oci://$treg/tools/charts/pullcheck --version [0-9.]+ \(sha256:[0-9a-f]{64}\)\$" <<<"$chart_line"
chart_version=$(sed -n 's/.* --version \([^ ]*\) .*/\1/p' <<<"$chart_line")
chart_digest=$(sed -n 's/.*(\(sha256:[0-9a-f]*\))$/\1/p' <<<"$chart_line")
served=$(served_digest "https://$treg/v2/tools/charts/pullcheck/manifests/$chart_version" --cacert "$work/tls/ca.crt")
check "the registry serves the printed chart digest ($served)" [ "$served/${chart_digest:-none}" = "$chart_digest/$chart_digest" ]
set +e
"$HELM" template pc "oci://$treg/tools/charts/pullcheck" --version "$chart_version" --ca-file "$work/tls/ca.crt" \
  -n pullcheck-system >"$work/chart.yaml" 2>"$work/chart.err"
hrc=$?
set -e
[ "$hrc" = 0 ] || sed 's/^/     ! /' "$work/chart.err"
check "helm template oci://… needs no --set: the webhook runs $treg/tools/pullcheck@$digest" \
  grep -qxF "          image: \"$treg/tools/pullcheck@$digest\"" "$work/chart.yaml"
check "... and injects it (--inject-image)" grep -qF -- "- --inject-image=$treg/tools/pullcheck@$digest" "$work/chart.yaml"
check "prints the helm install oci:// command" \
  grep -qxF "  helm install pullcheck oci://$treg/tools/charts/pullcheck --version $chart_version -n pullcheck-system --create-namespace" "$work/tls.out"

# The kubectl plugin beside the image: each archive printed with the sha256 plugin.yaml names.
manifest=$(sed -n 's/^krew manifest: //p' "$work/tls.out")
check "prints the krew manifest ($manifest)" [ -f "$manifest" ]
for arch in amd64 arm64; do
  read -r archive sum < <(sed -n "s|^krew archive: \(.*\) \([0-9a-f]*\) linux/$arch\$|\1 \2|p" "$work/tls.out")
  check "krew archive for linux/$arch: sha256 as printed and in plugin.yaml ($sum)" \
    [ "$(sha256sum <"${archive:-/dev/null}" | cut -d' ' -f1)/$(grep -c "^    sha256: $sum\$" "$manifest")" = "$sum/1" ]
done

# Without the CA, TLS is verified and the push fails (nothing is sent in the clear).
publish "$work/untrusted.out" "$treg/tools/pullcheck:untrusted"
check "without --dest-cert-dir the untrusted certificate fails the push (exit $RC)" [ "$RC" != 0 ]

# --- plain-HTTP registry, only with --dest-tls-verify=false ---------------------------------
pport=$(free_port)
start_registry "$work/reg-plain" "$pport"; pids+=("$REG_PID")
preg=127.0.0.1:$pport
publish "$work/plain.out" --dest-tls-verify=false "$preg/pullcheck"
check "publish over plain HTTP with --dest-tls-verify=false exits 0" [ "$RC" = 0 ]
version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
check "a destination without a tag gets the crate version ($version)" grep -qxF "pushed: $preg/pullcheck:$version" "$work/plain.out"
served=$(served_digest "http://$preg/v2/pullcheck/manifests/$version")
check "same digest as the first publish (reproducible image): $served" [ "$served" = "$digest" ]
check "... and printed as such" grep -qxF "digest: $digest" "$work/plain.out"
# Two other readers of the index: crane and regctl, over plain HTTP.
c_index=$("$tools/crane" digest --insecure "$preg/pullcheck:$version" 2>&1 || true)
check "crane digest: the same index digest ($c_index)" [ "$c_index" = "$digest" ]
r_index=$("$tools/regctl" image digest --host "reg=$preg,tls=disabled" "$preg/pullcheck:$version" 2>&1 || true)
check "regctl image digest: the same ($r_index)" [ "$r_index" = "$digest" ]
for arch in amd64 arm64; do
  want=$(sed -n "s|^platform: linux/$arch ||p" "$work/plain.out")
  c=$("$tools/crane" digest --insecure --platform "linux/$arch" "$preg/pullcheck:$version" 2>&1 || true)
  r=$("$tools/regctl" image digest --host "reg=$preg,tls=disabled" --platform "linux/$arch" "$preg/pullcheck:$version" 2>&1 || true)
  check "crane and regctl pick linux/$arch's printed manifest ($want)" [ "$c/$r/${want:-none}" = "$want/$want/$want" ]
done
set +e
"$HELM" template pc "oci://$preg/charts/pullcheck" --version "$(sed -n 's/^version: *//p' charts/pullcheck/Chart.yaml)" \
  --plain-http -n pullcheck-system >"$work/chart-plain.yaml" 2>"$work/chart-plain.err"
set -e
check "the chart went over plain HTTP too, to oci://$preg/charts/pullcheck, pinned to $digest" \
  grep -qxF "          image: \"$preg/pullcheck@$digest\"" "$work/chart-plain.yaml"

# --- usage errors ----------------------------------------------------------------------------
publish "$work/u1.out" "$preg/pullcheck@$digest"
check "a digest as destination is a usage error (exit $RC)" [ "$RC" = 2 ]
publish "$work/u2.out" pullcheck
check "a destination without a registry is a usage error (exit $RC)" [ "$RC" = 2 ]
publish "$work/u3.out"
check "no destination is a usage error (exit $RC)" [ "$RC" = 2 ]

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
