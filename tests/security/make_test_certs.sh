#!/usr/bin/env bash
# Writes a throwaway PKI for the TLS tests into DIR, with the openssl CLI:
#
#   make_test_certs.sh DIR
#
#   ca.pem                 the CA every side trusts
#   server.pem server.key  a server certificate for 127.0.0.1, ::1 and
#                          localhost, signed by ca.pem
#   client.pem client.key  a client certificate (a worker's), signed by ca.pem
#   rogue-ca.pem           another CA, and rogue.pem rogue.key signed by it:
#   rogue.pem rogue.key    a certificate no spool side trusts
#
# Keys are EC P-256, certificates valid for two days; every key file is
# mode 0600, as spool requires of key files. Nothing here is fit for
# production: it exists so that tests run real TLS handshakes.
set -euo pipefail
dir=${1:?usage: make_test_certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
umask 077

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() {  # NAME SUBJECT
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -days 2 -subj "/CN=$2" -out "$1.pem" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

leaf() {  # NAME CA SUBJECT EXTENSIONS
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$3" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" \
    -CAcreateserial -days 2 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

ca ca "spool test CA"
leaf server ca "spool test server" \
  "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
leaf client ca "spool test worker" "extendedKeyUsage=clientAuth,serverAuth"
ca rogue-ca "rogue CA"
leaf rogue rogue-ca "rogue" \
  "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
rm -f ./*.srl
chmod 600 ./*.key
chmod 644 ./*.pem
