#!/usr/bin/env bash
# TLS for Ray's internal traffic (RAY_USE_TLS=1): a CA for this cluster only, and a
# certificate per node signed by it.
#
#   bash deploy/tls.sh ca [--rotate]   on the machine that runs `ray up`, once (with
#                                      deploy/secrets.sh): ~/.memorybus/tls/ca.pem and ca.key
#   bash tls.sh node                   on every node, before `ray start` (cluster.yaml's
#                                      setup runs it): node.pem/node.key for this node
#
# Ray's gRPC checks that a peer's certificate names the address it dialled, and a
# node's address is only known once it runs: so each node makes its own key and a
# certificate for 127.0.0.1, its private IP(s) and its host name, signed by the CA
# that file_mounts copied there. The CA signs nothing else and is trusted by nothing
# else: whoever holds its key can join this cluster's TLS, which root on a node could
# already do with the Ray token beside it (Ray's own recipe does the same).
# Every `ray start` on the node then runs with
#   RAY_USE_TLS=1 RAY_TLS_SERVER_CERT=$DIR/node.pem RAY_TLS_SERVER_KEY=$DIR/node.key RAY_TLS_CA_CERT=$DIR/ca.pem
# (mutual: every Ray process presents its node's certificate and checks the peer's).
#
# Keys are EC P-256, private files 0600 (umask 077). The CA lives 10 years, node
# certificates 825 days (a new `ray up` makes fresh ones). `ca --rotate` makes a new CA:
# then a full `ray up` (node certificates are remade at setup) and restart the bus.
# MEMORYBUS_TLS_DIR overrides the directory (default ~/.memorybus/tls); MEMORYBUS_TLS_IPS
# adds addresses for `node` (space-separated; default: `hostname -I`).
set -euo pipefail

DIR="${MEMORYBUS_TLS_DIR:-$HOME/.memorybus/tls}"

usage() { echo "usage: tls.sh ca [--rotate] | tls.sh node" >&2; exit 2; }
need_openssl() {
  command -v openssl >/dev/null ||
    { sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssl; }
}

make_ca() {
  local rotate="${1:-}"
  if [ -s "$DIR/ca.pem" ] && [ -s "$DIR/ca.key" ] && [ "$rotate" != "--rotate" ]; then
    echo "kept $DIR/ca.pem"
    return
  fi
  openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/ca.key.tmp"
  openssl req -x509 -new -key "$DIR/ca.key.tmp" -sha256 -days 3650 -subj "/CN=memorybus cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$DIR/ca.pem.tmp"
  mv "$DIR/ca.key.tmp" "$DIR/ca.key"
  mv "$DIR/ca.pem.tmp" "$DIR/ca.pem"
  chmod 600 "$DIR/ca.key"
  chmod 644 "$DIR/ca.pem"
  echo "wrote $DIR/ca.pem and $DIR/ca.key"
}

make_node() {
  [ -s "$DIR/ca.pem" ] && [ -s "$DIR/ca.key" ] ||
    { echo "tls.sh: $DIR/ca.pem or ca.key is missing: run deploy/tls.sh ca before ray up" >&2; exit 1; }
  local ips name san ip
  ips="${MEMORYBUS_TLS_IPS:-$(hostname -I 2>/dev/null || true)}"
  name="$(hostname)"
  san="IP:127.0.0.1,DNS:localhost,DNS:$name"
  for ip in $ips; do
    case "$ip" in
      *:*) continue ;;  # IPv6 link addresses: Ray advertises IPv4
      *) san="$san,IP:$ip" ;;
    esac
  done
  openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/node.key.tmp"
  openssl req -new -key "$DIR/node.key.tmp" -subj "/CN=$name" -out "$DIR/node.csr"
  printf '%s\n' "subjectAltName=$san" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth,clientAuth" > "$DIR/node.ext"
  openssl x509 -req -in "$DIR/node.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" -set_serial "0x$(od -An -N16 -tx1 /dev/urandom | tr -d " \n")" \
    -days 825 -sha256 -extfile "$DIR/node.ext" -out "$DIR/node.pem.tmp" 2>/dev/null
  mv "$DIR/node.key.tmp" "$DIR/node.key"
  mv "$DIR/node.pem.tmp" "$DIR/node.pem"
  rm -f "$DIR/node.csr" "$DIR/node.ext"
  chmod 600 "$DIR/node.key"
  echo "wrote $DIR/node.pem for $san"
}

umask 077
mkdir -p "$DIR"
chmod 700 "$DIR"
case "${1:-}" in
  ca) need_openssl; make_ca "${2:-}" ;;
  node) [ $# -eq 1 ] || usage; need_openssl; make_node ;;
  *) usage ;;
esac
