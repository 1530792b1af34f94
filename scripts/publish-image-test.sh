#!/usr/bin/env bash
# Test scripts/publish-image.sh the way a user runs it, against throwaway Debian
# docker-registries on loopback: one over TLS with a private CA (--dest-cert-dir), one over
# plain HTTP (--dest-tls-verify=false). The digest it prints must be the one the registry
# serves for the tag (asked with curl, not skopeo), the manifest behind it must hash to that
# digest, a second publish must give the same digest (the image is reproducible), and bad
# destinations are usage errors. The last line is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
scripts/deps.sh registry test >/dev/null

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

# --- usage errors ----------------------------------------------------------------------------
publish "$work/u1.out" "$preg/pullcheck@$digest"
check "a digest as destination is a usage error (exit $RC)" [ "$RC" = 2 ]
publish "$work/u2.out" pullcheck
check "a destination without a registry is a usage error (exit $RC)" [ "$RC" = 2 ]
publish "$work/u3.out"
check "no destination is a usage error (exit $RC)" [ "$RC" = 2 ]

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
