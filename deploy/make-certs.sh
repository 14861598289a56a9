#!/usr/bin/env bash
# deploy/make-certs.sh: the cluster CA and one certificate per node, with the openssl CLI.
#
#   deploy/make-certs.sh DIR NAME...     e.g. deploy/make-certs.sh certs coordinator node
#
# Writes DIR/ca.pem (the cluster CA's certificate: every node's [cluster] tls_ca),
# DIR/ca.key (keep it off the nodes), and DIR/NAME.pem + DIR/NAME.key for each NAME (a node's
# tls_cert and tls_key). An existing CA in DIR is reused, so more node certificates can be
# added later. Nodes verify that a peer's certificate is signed by the CA; the name is not
# checked (one certificate may serve every node of a role, or of the cluster).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR NAME..." >&2
  exit 2
fi
dir=$1
shift
# Rationale: 825 days is the longest validity common TLS stacks accept for a leaf; the CA
# lasts ten years. P-256 keys: fast handshakes, supported by every OpenSSL CAF builds with.
days_ca=3650
days_node=825
mkdir -p "$dir"
umask 077
if [ ! -f "$dir/ca.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days "$days_ca" -subj "/CN=caf-agent cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
for name in "$@"; do
  case $name in
    */* | "" | .*) echo "$0: bad node name '$name'" >&2; exit 2 ;;
  esac
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
  ext=$(mktemp)
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:%s\n' \
    "$name" >"$ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -out "$dir/$name.pem" -days "$days_node" -sha256 -extfile "$ext" 2>/dev/null
  rm -f "$ext" "$dir/$name.csr"
done
chmod 644 "$dir"/*.pem
echo "$dir: ca.pem, and a certificate and key for: $*"
