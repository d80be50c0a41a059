#!/usr/bin/env bash
#
# build-zkclient.sh -- build ZooKeeper's C client with OpenSSL (TLS) and
# Cyrus SASL, which Debian's libzookeeper-mt2 lacks, from the source package
# Debian's archive serves, and cache it outside the checkout.
#
#   bash scripts/build-zkclient.sh        prints the cached tree's path
#
# zklock is then built against it with `make ZK_CLIENT=<that path>`: the
# client is linked into zklock.so statically (a static library built with
# -fPIC; its symbols are not exported from zklock.so), so that neither the
# package nor a server needs a second libzookeeper_mt.so.2 -- one with the
# same soname as Debian's but another ABI (zsock_t changes layout with
# OpenSSL) -- and OpenSSL and Cyrus SASL stay shared libraries that Debian's
# security updates reach.  doc/security.md says more.
#
# The version: the one of the installed libzookeeper-java, whose jute
# compiler (org.apache.jute.compiler.generated.Rcc) generates the client's
# marshalling code (zookeeper.jute.c/h, which the source tarball lacks);
# Debian 12: 3.8.0.  The source: the zookeeper source package of exactly
# that Debian version (else the newest of the machine's own suite with the
# same upstream version), fetched through apt with a private configuration
# (its own sources list of deb-src lines, its own lists and cache under the
# build folder); the system's apt configuration is read, for the archive's
# address, and never changed.  The Debian patches of the package's series
# that touch the C client are applied, then zklock's own patches in
# scripts/zkclient/ (each says why).
#
# The cache: $ZKLOCK_PG_CACHE (default /var/cache/zklock)/zkclient-<upstream
# version>-<hash of scripts/zkclient/*.patch> (include/zookeeper/*.h,
# lib/libzookeeper_mt.a), installed
# atomically: a build cut off leaves no half cache, a second run reuses the
# tree at once.  The build takes well under a minute on two cores.
#
# Needs root for apt-get install of the build tools and libraries
# (autoconf, automake, libtool, libssl-dev, libsasl2-dev, libkrb5-dev (zklock
# links MIT krb5 for its credential cache), libzookeeper-java,
# a JRE) when they are missing; building itself runs as the caller.
#
set -euo pipefail

cache=${ZKLOCK_PG_CACHE:-/var/cache/zklock}
case "$cache" in
/*) ;;
*) cache="$PWD/$cache" ;;
esac
here=$(cd "$(dirname "$0")" && pwd)

log() { echo "build-zkclient: $*" >&2; }

# --- build tools and libraries, from the machine's own suite ---------------
need=()
for p in build-essential autoconf automake libtool pkg-config libssl-dev \
	libsasl2-dev libkrb5-dev libzookeeper-java default-jre-headless; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		log "missing packages: ${need[*]}; run as root (or install them)"
		exit 1
	fi
	log "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

debver=$(dpkg-query -W -f='${Version}' libzookeeper-java)
upver=${debver#*:}
upver=${upver%%-*}
upver=${upver%%+*}
# the tree's name says what it holds: the version, and zklock's patches
# (another patch: another tree, built once)
patches=$(cat "$here"/zkclient/*.patch 2>/dev/null | sha256sum | cut -c1-8)
dest="$cache/zkclient-$upver-$patches"
jute_jar=/usr/share/java/zookeeper-jute.jar

if [ -f "$dest/lib/libzookeeper_mt.a" ] && [ -f "$dest/.zklock-complete" ]; then
	echo "$dest"
	exit 0
fi

# One build at a time: a second run waits for the first, then finds its tree.
mkdir -p "$cache"
exec 9> "$cache/.lock-zkclient"
if ! flock -n 9; then
	log "another build of the ZooKeeper client is running; waiting for it"
	flock 9
fi
if [ -f "$dest/lib/libzookeeper_mt.a" ] && [ -f "$dest/.zklock-complete" ]; then
	echo "$dest"
	exit 0
fi
rm -rf "$cache"/.build-zkclient-*

# --- the archive's address, from the machine's own apt configuration ------
# (as scripts/build-postgres.sh: the first address of the main archive)
archive_uri() {
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f" |
			grep -v -- '-security' | head -n 1)
		[ -n "$uri" ] && { echo "$uri"; return 0; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		uri=$(sed -nE 's/^deb(-src)?( \[[^]]*\])? +([^ ]+) .*/\3/p' "$f" |
			grep -v -- '-security' | head -n 1)
		[ -n "$uri" ] && { echo "$uri"; return 0; }
	done
	return 1
}
uri=$(archive_uri) || {
	log "no Debian archive address in /etc/apt (sources.list or sources.list.d)"
	exit 1
}
# the security archive's address, for a +debNuN security update of the source
security_uri() {
	local f
	for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		grep -ohE '[a-z]+://[^ ]*-security[^ ]*' "$f" | head -n 1 && return 0
	done
	return 1
}
suri=$(security_uri) || suri=
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || codename=stable

work=$(mktemp -d "$cache/.build-zkclient-$upver.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP

# --- fetch the source -------------------------------------------------------
aptdir="$work/apt"
mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$work/src"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
aptopts=(-q -o "Dir::Etc::sourcelist=$aptdir/sources.list" -o Dir::Etc::sourceparts=-
	-o "Dir::State::lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache"
	-o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
case "$uri" in
*snapshot.debian.org*) aptopts+=(-o Acquire::Check-Valid-Until=false) ;;
esac
{
	echo "deb-src [signed-by=$keyring] $uri $codename main"
	echo "deb-src [signed-by=$keyring] $uri $codename-updates main"
	[ -n "$suri" ] && echo "deb-src [signed-by=$keyring] $suri $codename-security main"
} > "$aptdir/sources.list"
if ! apt-get "${aptopts[@]}" update > "$work/apt.log" 2>&1; then
	log "no source index from $uri ($codename): $(tail -n 1 "$work/apt.log")"
	exit 1
fi
fetched=
for want in "zookeeper=$debver" zookeeper; do
	rm -f "$work/src"/*
	if (cd "$work/src" && apt-get "${aptopts[@]}" source --download-only "$want") \
		>> "$work/apt.log" 2>&1 &&
		ls "$work/src"/zookeeper_"$upver".orig.tar.* > /dev/null 2>&1; then
		fetched=$want
		break
	fi
done
if [ -z "$fetched" ]; then
	log "$codename does not serve the zookeeper source of version $upver (that of libzookeeper-java, $debver): $(grep -E '^(E|W):' "$work/apt.log" | tail -n 1)"
	exit 1
fi
log "source: $(basename "$(ls "$work/src"/zookeeper_*.dsc)")"

# --- unpack, patch, generate ------------------------------------------------
orig=$(ls "$work/src"/zookeeper_"$upver".orig.tar.* | grep -v '\.asc$' | head -n 1)
tar -xf "$orig" -C "$work"
top=$(find "$work" -maxdepth 1 -type d -name "*zookeeper-$upver*" | head -n 1)
[ -n "$top" ] || { log "no source tree in the tarball"; exit 1; }
tar -xf "$(ls "$work/src"/zookeeper_*.debian.tar.* | grep -v '\.asc$' | head -n 1)" -C "$top"
c="$top/zookeeper-client/zookeeper-client-c"
while read -r p; do
	case "$p" in '' | '#'*) continue ;; esac
	p=${p%% *}
	grep -q 'zookeeper-client-c' "$top/debian/patches/$p" || continue
	patch -d "$top" -p1 -s < "$top/debian/patches/$p" || { log "Debian's patch $p does not apply"; exit 1; }
done < "$top/debian/patches/series"
for p in "$here"/zkclient/*.patch; do
	[ -f "$p" ] || continue
	patch -d "$top" -p1 -s < "$p" || { log "$(basename "$p") does not apply to $upver"; exit 1; }
done
mkdir -p "$c/generated"
(cd "$c/generated" && java -cp "$jute_jar" org.apache.jute.compiler.generated.Rcc \
	-l c "$top/zookeeper-jute/src/main/resources/zookeeper.jute") > "$work/jute.log" 2>&1 || {
	log "the jute compiler failed:"; cat "$work/jute.log" >&2; exit 1; }

# --- build, install into the cache atomically ---------------------------------
log "building the C client $upver with OpenSSL and Cyrus SASL (configure, make; under a minute)"
if ! (cd "$c" &&
	autoreconf -if > "$work/autoreconf.log" 2>&1 &&
	CFLAGS="-O2 -g -fPIC" ./configure --prefix="$dest" --disable-shared \
		--enable-static --with-pic --without-cppunit --with-openssl --with-sasl \
		> "$work/configure.log" 2>&1 &&
	grep -q '^OPENSSL_CPPFLAGS = -DHAVE_OPENSSL_H' Makefile &&
	grep -q '^SASL_CPPFLAGS = -DHAVE_CYRUS_SASL_H' Makefile &&
	make -j"$(nproc)" > "$work/make.log" 2>&1 &&
	make install DESTDIR="$work/root" > "$work/install.log" 2>&1); then
	log "build failed; last lines of the logs:"
	tail -n 20 "$work"/autoreconf.log "$work"/configure.log "$work"/make.log "$work"/install.log >&2 2>/dev/null || true
	exit 1
fi
root="$work/root$dest"
[ -f "$root/lib/libzookeeper_mt.a" ] && [ -f "$root/include/zookeeper/zookeeper.h" ] || {
	log "the build installed no libzookeeper_mt.a"; exit 1; }
# the library and its headers: no single-threaded client, no programs
rm -rf "$root"/lib/*.la "$root"/lib/libzookeeper_st.a "$root/bin"
echo "$fetched" > "$root/SOURCE"
touch "$root/.zklock-complete"
rm -rf "$dest"
mv "$root" "$dest"
log "installed in $dest"
echo "$dest"
