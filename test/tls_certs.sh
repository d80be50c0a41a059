#!/usr/bin/env bash
#
# tls_certs.sh -- the certificates of a TLS test, made with openssl and
# keytool (the JRE's) in DIR:
#
#   tls_certs.sh DIR [CLIENT...]
#
#   ca.pem, ca.key             a CA ("zklock test CA")
#   server.p12                 ZooKeeper's keystore (PKCS12, password
#                              "zkpass"): its key and a certificate of the CA
#                              for CN=localhost, IP 127.0.0.1
#   truststore.p12             ZooKeeper's truststore (PKCS12, "zkpass"): the CA
#   <client>.pem, <client>.key for each CLIENT: a certificate of the CA,
#                              CN=<client>, and its key (mode 0600); a
#                              CLIENT "name=/O=x/CN=y" gets that subject
#                              (several files, each its own key, may share
#                              one subject: one x509 identity)
#   inspect.pem, inspect.key   the same for CN=inspect: the tests' own tools
#                              (zk_server.sh --tls-only, zkutil.py with
#                              ZKUTIL_TLS) on a ZooKeeper without a plain port
#   other-ca.pem, other-ca.key another CA, which ZooKeeper does not trust
#   other.pem, other.key       a client certificate of the other CA
#
# RSA 2048, valid for a day; nothing here is meant to last.
set -euo pipefail

dir=$1
shift
mkdir -p "$dir"
cd "$dir"
umask 077

ca() { # name subject
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" \
		-days 1 -subj "/CN=$2" -addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
leaf() { # name subject ca [san]
	local subj="/CN=$2"
	case $2 in /*) subj=$2 ;; esac
	openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" \
		-subj "$subj" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=serverAuth,clientAuth"
		[ -n "${4:-}" ] && echo "subjectAltName=$4"
	} > "$1.ext"
	openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" \
		-CAcreateserial -days 1 -out "$1.pem" -extfile "$1.ext" 2>/dev/null
	rm -f "$1.csr" "$1.ext"
}

ca ca "zklock test CA"
leaf server localhost ca "DNS:localhost,IP:127.0.0.1"
openssl pkcs12 -export -in server.pem -inkey server.key -certfile ca.pem \
	-name server -out server.p12 -passout pass:zkpass
keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore.p12 \
	-storetype PKCS12 -storepass zkpass > /dev/null 2>&1
for c in inspect "$@"; do
	case $c in
		*=/*) leaf "${c%%=*}" "${c#*=}" ca ;;
		*) leaf "$c" "$c" ca ;;
	esac
done
ca other-ca "another CA"
leaf other other-client other-ca
chmod 644 ./*.pem ./*.p12
chmod 600 ./*.key
