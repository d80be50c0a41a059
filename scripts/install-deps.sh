#!/usr/bin/env bash
#
# install-deps.sh -- install what zklock needs, from Debian 12's archive.
# Runs apt-get update only when something is missing.
#
#   install-deps.sh --server   a database server: what building zklock needs
#                              (a compiler, PostgreSQL 15's server headers, the
#                              ZooKeeper C client's headers), which brings the
#                              C client's runtime, libzookeeper-mt2.  No
#                              ZooKeeper server, JRE, Curator, Kazoo or IPC::Run.
#   install-deps.sh [--dev]    a developer's machine (the default): the above,
#                              plus everything the tests and the demo use: a
#                              ZooKeeper server and a JRE, IPC::Run, Kazoo,
#                              Curator, dblink (postgresql-contrib).
#   install-deps.sh --runtime  a server that gets zklock's files built
#                              elsewhere (README): libzookeeper-mt2 only,
#                              next to PostgreSQL 15.
#
set -euo pipefail

mode=dev
case "${1:-}" in
--server) mode=server ;;
--runtime) mode=runtime ;;
--dev | "") mode=dev ;;
*)
	echo "usage: install-deps.sh [--server | --runtime | --dev]" >&2
	exit 2
	;;
esac

RUNTIME=(
	postgresql-15
	libzookeeper-mt2
)
SERVER=(
	"${RUNTIME[@]}"
	build-essential
	postgresql-server-dev-15
	libzookeeper-mt-dev
)
DEV=(
	"${SERVER[@]}"
	postgresql-contrib
	zookeeper
	default-jre-headless
	libipc-run-perl
	python3-kazoo
	libcurator-recipes-java
)
case $mode in
runtime) PACKAGES=("${RUNTIME[@]}") ;;
server) PACKAGES=("${SERVER[@]}") ;;
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
