#!/usr/bin/env bash
#
# install-deps.sh -- install what zklock needs to build, run and test, from
# Debian 12's archive.  Runs apt-get update only when something is missing.
#
set -euo pipefail

PACKAGES=(
	build-essential
	postgresql-15
	postgresql-contrib
	postgresql-server-dev-15
	libzookeeper-mt-dev
	zookeeper
	default-jre-headless
	libipc-run-perl
	python3-kazoo
	libcurator-recipes-java
)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all packages present"
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
