#!/usr/bin/env bash
# Benchmark fixture: Debian's docker-registry on loopback in two modes over ONE seeded
# storage directory, plus a token server.
#
#   bench/fixture.sh up DIR     start everything, seed, write DIR/env (source it); returns
#   bench/fixture.sh down DIR   stop what `up` started (by the pids it recorded)
#
# Modes:
#   plain  anonymous plain HTTP                      ($PLAIN = 127.0.0.1:PORT)
#   token  TLS (throwaway CA, $CA) + bearer tokens    ($TOKEN = 127.0.0.1:PORT)
#          from bench/token-server (ES256 JWTs with an x5c header chained to the
#          registry's rootcertbundle, like the Rust test harness's token server).
#          The realm is https://localhost:PORT/token: crane >= 0.22 refuses a realm that is
#          a private/loopback IP literal other than the registry's own host:port.
# Both registries serve the same storage, seeded once through the plain one:
#   bench/app:v1        single-arch linux/amd64 OCI manifest     (present)
#   bench/app:missing   absent tag
#   bench/multi:v1      OCI index: linux/amd64 + linux/arm64/v8
#   bench/rNN:v1        NN=00..49, present;  bench/rNN:missing absent   (the 100 refs)
# Each registry's combined access log (one line per request, its stdout) is
# $PLAIN_LOG / $TOKEN_LOG; the token server logs one line per token request to $TOKEN_SRV_LOG.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=../scripts/lib.sh
. "$root/scripts/lib.sh"

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: bench/fixture.sh up|down DIR" >&2; exit 2; }

down() {
  [ -f "$dir/pids" ] || return 0
  while read -r pid; do
    kill "$pid" 2>/dev/null || true
  done <"$dir/pids"
  rm -f "$dir/pids"
}

wait_http() { # URL [curl args]: until anything answers
  local url=$1; shift
  for _ in $(seq 200); do
    curl -sS -o /dev/null "$@" "$url" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "fixture: $url did not answer" >&2
  return 1
}

# registry_config FILE PORT STORAGE [TLSDIR REALM SERVICE ISSUER BUNDLE]
registry_config() {
  local f=$1 port=$2 storage=$3
  {
    echo "version: 0.1"
    echo "log: { level: error, formatter: text }"
    echo "storage: { filesystem: { rootdirectory: $storage }, cache: { blobdescriptor: inmemory } }"
    if [ $# -gt 3 ]; then
      echo "http: { addr: 127.0.0.1:$port, secret: pullcheck-bench, tls: { certificate: $4/server.crt, key: $4/server.key } }"
      echo "auth: { token: { realm: \"$5\", service: $6, issuer: $7, rootcertbundle: $8 } }"
    else
      echo "http: { addr: 127.0.0.1:$port, secret: pullcheck-bench }"
    fi
  } >"$f"
}

# --- seeding through the registry API (plain HTTP registry, anonymous push) ----------
blob() { # FILE -> prints its digest, sha256:HEX
  local d; d=sha256:$(sha256sum "$1" | cut -d' ' -f1); echo "$d"
}
push_blob() { # REPO FILE
  local repo=$1 file=$2 digest loc
  digest=$(blob "$file")
  loc=$(curl -fsS -X POST -o /dev/null -D - "http://$PLAIN/v2/$repo/blobs/uploads/" |
    tr -d '\r' | sed -n 's/^[Ll]ocation: //p')
  case $loc in http*) ;; *) loc="http://$PLAIN$loc" ;; esac
  case $loc in *\?*) loc="$loc&digest=$digest" ;; *) loc="$loc?digest=$digest" ;; esac
  curl -fsS -X PUT -H 'Content-Type: application/octet-stream' --data-binary "@$file" "$loc" -o /dev/null
}
push_manifest() { # REPO REF FILE MEDIATYPE
  curl -fsS -X PUT -H "Content-Type: $4" --data-binary "@$3" "http://$PLAIN/v2/$1/manifests/$2" -o /dev/null
}

seed() {
  local s=$dir/seed
  mkdir -p "$s/rootfs"
  echo "pullcheck benchmark layer" >"$s/rootfs/hello.txt"
  tar --mtime=@0 --owner=0 --group=0 -C "$s/rootfs" -cf "$s/layer.tar" hello.txt
  local layer; layer=$(blob "$s/layer.tar")
  local arch variant
  for arch in amd64 arm64; do
    variant=""; [ "$arch" = arm64 ] && variant=',"variant":"v8"'
    printf '{"architecture":"%s","os":"linux"%s,"rootfs":{"type":"layers","diff_ids":["%s"]}}' \
      "$arch" "$variant" "$layer" >"$s/config-$arch.json"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"%s","size":%s}]}' \
      "$(blob "$s/config-$arch.json")" "$(stat -c %s "$s/config-$arch.json")" \
      "$layer" "$(stat -c %s "$s/layer.tar")" >"$s/manifest-$arch.json"
  done
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"amd64","os":"linux"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"arm64","os":"linux","variant":"v8"}}]}' \
    "$(blob "$s/manifest-amd64.json")" "$(stat -c %s "$s/manifest-amd64.json")" \
    "$(blob "$s/manifest-arm64.json")" "$(stat -c %s "$s/manifest-arm64.json")" >"$s/index.json"
  local oci=application/vnd.oci.image.manifest.v1+json
  local repos=(bench/app) i
  for i in $(seq -w 0 49); do repos+=("bench/r$i"); done
  for r in "${repos[@]}"; do
    push_blob "$r" "$s/layer.tar"
    push_blob "$r" "$s/config-amd64.json"
    push_manifest "$r" v1 "$s/manifest-amd64.json" "$oci"
  done
  push_blob bench/multi "$s/layer.tar"
  for arch in amd64 arm64; do
    push_blob bench/multi "$s/config-$arch.json"
    push_manifest bench/multi "$(blob "$s/manifest-$arch.json")" "$s/manifest-$arch.json" "$oci"
  done
  push_manifest bench/multi v1 "$s/index.json" application/vnd.oci.image.index.v1+json
  blob "$s/manifest-amd64.json" >"$s/app.digest"
  blob "$s/index.json" >"$s/multi.digest"
}

up() {
  down
  rm -rf "$dir"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  : >"$dir/pids"

  # PKI: registry/token-server TLS identity (RSA, lib.sh) and the JWT signing cert (EC P-256).
  make_tls "$dir/tls"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/tls/sign.key" 2>/dev/null
  openssl req -x509 -new -key "$dir/tls/sign.key" -subj /CN=pullcheck-bench-token-signer -days 2 \
    -out "$dir/tls/sign.crt" 2>/dev/null
  mkdir -p "$dir/certs.d"; cp "$dir/tls/ca.crt" "$dir/certs.d/ca.crt"

  # Token server (its own tiny cargo project, see bench/token-server/Cargo.toml).
  local ts=$root/target/bench-token-server/release/bench-token-server
  (cd "$here/token-server" && CARGO_TARGET_DIR=$root/target/bench-token-server \
    cargo build --release --quiet >&2)
  "$ts" --tls-cert "$dir/tls/server.crt" --tls-key "$dir/tls/server.key" \
    --sign-cert "$dir/tls/sign.crt" --sign-key "$dir/tls/sign.key" --issuer pullcheck-bench-issuer \
    --port-file "$dir/token.port" --log "$dir/token-server.log" 2>"$dir/token-server.err" &
  echo $! >>"$dir/pids"
  for _ in $(seq 100); do [ -s "$dir/token.port" ] && break; sleep 0.05; done
  local tport; tport=$(cat "$dir/token.port")
  wait_http "https://127.0.0.1:$tport/token" --cacert "$dir/tls/ca.crt"

  # Plain-HTTP registry (seeds the storage), then the TLS+token one on the same storage.
  local pport; pport=$(free_port)
  mkdir -p "$dir/plain" "$dir/token"
  registry_config "$dir/plain/config.yml" "$pport" "$dir/storage"
  docker-registry serve "$dir/plain/config.yml" >"$dir/plain/access.log" 2>"$dir/plain/error.log" &
  echo $! >>"$dir/pids"
  PLAIN=127.0.0.1:$pport
  wait_http "http://$PLAIN/v2/"
  seed

  local kport; kport=$(free_port)
  registry_config "$dir/token/config.yml" "$kport" "$dir/storage" "$dir/tls" \
    "https://localhost:$tport/token" pullcheck-bench-registry pullcheck-bench-issuer "$dir/tls/sign.crt"
  docker-registry serve "$dir/token/config.yml" >"$dir/token/access.log" 2>"$dir/token/error.log" &
  echo $! >>"$dir/pids"
  TOKEN=127.0.0.1:$kport
  wait_http "https://$TOKEN/v2/" --cacert "$dir/tls/ca.crt"

  cat >"$dir/env" <<EOF
PLAIN=$PLAIN
TOKEN=$TOKEN
CA=$dir/tls/ca.crt
CERT_DIR=$dir/certs.d
PLAIN_LOG=$dir/plain/access.log
TOKEN_LOG=$dir/token/access.log
TOKEN_SRV_LOG=$dir/token-server.log
TOKEN_REALM=https://localhost:$tport/token
TOKEN_SERVICE=pullcheck-bench-registry
APP_DIGEST=$(cat "$dir/seed/app.digest")
MULTI_DIGEST=$(cat "$dir/seed/multi.digest")
EOF
  echo "$dir/env"
}

case $cmd in
  up) up ;;
  down) down ;;
  *) echo "usage: bench/fixture.sh up|down DIR" >&2; exit 2 ;;
esac
