# shellcheck shell=bash
# Shared shell helpers for scripts/: a throwaway Debian docker-registry on loopback and a
# tiny OCI image pushed with skopeo. Source it; functions print what callers need.

# free_port [PORT...]: a loopback port nothing holds, not one of the arguments, drawn below
# the kernel's ephemeral range (net.ipv4.ip_local_port_range). A port the kernel hands out
# itself (bind to port 0) can be taken again by any outgoing connection before the server
# that was meant to listen on it binds: CI saw etcd fail with "bind: address already in use"
# on such a port. Below the range only another free_port caller can take it.
# shellcheck disable=SC2120 # the arguments are optional (ports to avoid)
free_port() {
  python3 - "$@" <<'PY'
import random, socket, sys
taken = {int(a) for a in sys.argv[1:]}
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
top = max(low, 12000)
for _ in range(500):
    p = random.randrange(10000, top)
    if p in taken:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    sys.exit(0)
sys.exit("free_port: no free port on 127.0.0.1 in 10000-%d" % (top - 1))
PY
}

# make_tls DIR: a throwaway CA (DIR/ca.crt) and a server cert for 127.0.0.1 (DIR/server.{crt,key}).
make_tls() {
  local d=$1
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=pullcheck-demo-ca \
    -keyout "$d/ca.key" -out "$d/ca.crt" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$d/ext.cnf"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/ext.cnf" -out "$d/server.crt" >/dev/null 2>&1
}

# start_registry DIR PORT [TLSDIR]: runs docker-registry in the background; sets REG_PID.
start_registry() {
  local d=$1 port=$2 tls=${3:-} scheme=http
  mkdir -p "$d"
  {
    echo "version: 0.1"
    echo "log: { level: error }"
    echo "storage: { filesystem: { rootdirectory: $d/storage } }"
    if [ -n "$tls" ]; then
      echo "http: { addr: 127.0.0.1:$port, tls: { certificate: $tls/server.crt, key: $tls/server.key } }"
      scheme=https
    else
      echo "http: { addr: 127.0.0.1:$port }"
    fi
  } > "$d/config.yml"
  docker-registry serve "$d/config.yml" >"$d/registry.log" 2>&1 &
  # shellcheck disable=SC2034 # read by the scripts that source this file
  REG_PID=$!
  for _ in $(seq 100); do
    curl -fsS ${tls:+--cacert "$tls/ca.crt"} "$scheme://127.0.0.1:$port/v2/" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "registry on port $port did not start; see $d/registry.log" >&2
  return 1
}

# push_image WORKDIR DEST [CERTDIR]: a one-layer linux/amd64 OCI image written as an OCI
# layout and copied to docker://DEST with skopeo.
push_image() {
  local w=$1 dest=$2 certs=${3:-}
  local lay=$w/layout
  mkdir -p "$lay/blobs/sha256" "$w/rootfs"
  echo "hello from pullcheck" > "$w/rootfs/hello.txt"
  tar -C "$w/rootfs" -cf "$w/layer.tar" hello.txt
  _blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "$lay/blobs/sha256/$d"; echo "$d"; }
  local layer config manifest
  layer=$(_blob "$w/layer.tar")
  printf '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$layer" > "$w/config.json"
  config=$(_blob "$w/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$config" "$(stat -c %s "$w/config.json")" "$layer" "$(stat -c %s "$w/layer.tar")" > "$w/manifest.json"
  manifest=$(_blob "$w/manifest.json")
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"v1"}}]}' \
    "$manifest" "$(stat -c %s "$w/manifest.json")" > "$lay/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' > "$lay/oci-layout"
  if [ -n "$certs" ]; then
    skopeo copy --quiet --dest-cert-dir "$certs" "oci:$lay:v1" "docker://$dest"
  else
    skopeo copy --quiet --dest-tls-verify=false "oci:$lay:v1" "docker://$dest"
  fi
}
