#!/usr/bin/env bash
#
# install-deps.sh -- install what zklock needs, from Debian's archive.
# Runs apt-get update only when something is missing.
#
# PostgreSQL is named by Debian's metapackages (postgresql,
# postgresql-contrib, postgresql-server-dev-all), which stand for the
# distribution's own major (15 on Debian 12, 17 on Debian 13): no major
# is written here.
#
#   install-deps.sh --server   a database server: what building zklock needs
#                              (a compiler, PostgreSQL's server headers, the
#                              ZooKeeper C client's headers), which brings the
#                              C client's runtime, libzookeeper-mt2.  No
#                              ZooKeeper server, JRE, Curator, Kazoo or IPC::Run.
#   install-deps.sh --package  the above, plus what building zklock's Debian
#                              package needs (dpkg-buildpackage -us -uc -b,
#                              debian/): the build of ZooKeeper's C client
#                              with TLS and SASL (scripts/build-zkclient.sh:
#                              autotools, libssl-dev, libsasl2-dev, the jute
#                              compiler of libzookeeper-java and a JRE),
#                              debhelper and dpkg-dev (pg_buildext
#                              comes with postgresql-common; no fakeroot: the
#                              packaging says Rules-Requires-Root: no).
#   install-deps.sh [--dev]    a developer's machine (the default): the above,
#                              plus everything the tests and the demo use: a
#                              ZooKeeper server and a JRE, IPC::Run, Kazoo,
#                              Curator, dblink (postgresql-contrib).
#   install-deps.sh --runtime  a server that gets zklock's files built
#                              elsewhere (doc/install.md): libzookeeper-mt2 only,
#                              next to PostgreSQL.
#
set -euo pipefail

mode=dev
case "${1:-}" in
--server) mode=server ;;
--package) mode=package ;;
--runtime) mode=runtime ;;
--dev | "") mode=dev ;;
*)
	echo "usage: install-deps.sh [--server | --package | --runtime | --dev]" >&2
	exit 2
	;;
esac

RUNTIME=(
	postgresql
	libzookeeper-mt2
)
SERVER=(
	"${RUNTIME[@]}"
	build-essential
	postgresql-server-dev-all
	libzookeeper-mt-dev
)
PACKAGE=(
	"${SERVER[@]}"
	dpkg-dev
	debhelper
	# ZooKeeper's C client with TLS and SASL (scripts/build-zkclient.sh),
	# which the package and the test build link in
	autoconf
	automake
	libtool
	pkg-config
	libssl-dev
	libsasl2-dev
	libkrb5-dev
	libzookeeper-java
	default-jre-headless
)
DEV=(
	"${PACKAGE[@]}"
	postgresql-contrib
	zookeeper
	default-jre-headless
	libipc-run-perl
	python3-kazoo
	python3-pure-sasl
	# test/t/ops/117_kerberos.pl: a KDC, its tools, Cyrus SASL's GSSAPI plugin
	krb5-kdc
	krb5-admin-server
	libsasl2-modules-gssapi-mit
	# test/t/ops/125_kerberos_interop.pl: Kazoo's GSSAPI (pure-sasl's) and kinit
	python3-kerberos
	krb5-user
	libcurator-recipes-java
)
case $mode in
runtime) PACKAGES=("${RUNTIME[@]}") ;;
server) PACKAGES=("${SERVER[@]}") ;;
package) PACKAGES=("${PACKAGE[@]}") ;;
dev) PACKAGES=("${DEV[@]}") ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps ($mode): all packages present"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages: ${missing[*]}; run as root (or with sudo)" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
