#!/usr/bin/env bash
#
# build-postgres.sh -- build a PostgreSQL major that Debian 12 does not
# package (17, 18, 16) from the upstream source that Debian's archive serves,
# and cache the installation outside the checkout.
#
#   bash scripts/build-postgres.sh 17|18|16     prints the cached tree's path
#
# The source: the source package postgresql-<major> of a newer Debian suite,
# whose .orig.tar.* is the upstream release.  It is fetched through apt with
# a private configuration (its own sources list of deb-src lines, its own
# lists and cache directories under the cache); the system's apt
# configuration is read, for the archive's address, and never changed.
# Suites are tried in order (stable, testing, unstable, oldstable): an index
# may list a version whose files are not yet (or no longer) there.
#
# The cache: $ZKLOCK_PG_CACHE (default /var/cache/zklock)/pg<major>, built
# with --enable-tap-tests (the TAP suite uses PostgreSQL::Test::Cluster) and
# the contrib module dblink, installed atomically: a build cut off leaves no
# half cache, and a second run reuses the tree in well under a second.  The
# tree is relocatable: copy it and the copy's pg_config reports the copy's
# paths (test/run_tests.sh installs zklock into such a copy).
#
# Needs root for apt-get install of the build tools (bison, flex, perl's
# IPC::Run) when they are missing; building itself runs as the caller.
#
set -euo pipefail

major=${1:-}
case "$major" in
16 | 17 | 18) ;;
*)
	echo "usage: build-postgres.sh 16|17|18" >&2
	exit 2
	;;
esac

cache=${ZKLOCK_PG_CACHE:-/var/cache/zklock}
case "$cache" in
/*) ;;
*) cache="$PWD/$cache" ;;
esac
dest="$cache/pg$major"

if [ -x "$dest/bin/pg_config" ] && [ -f "$dest/.zklock-complete" ]; then
	echo "$dest"
	exit 0
fi

log() { echo "build-postgres: $*" >&2; }

# One build of a major at a time: a second run waits for the first, then
# finds its tree.  A complete tree is never replaced.
mkdir -p "$cache"
exec 9> "$cache/.lock-pg$major"
if ! flock -n 9; then
	log "another build of PostgreSQL $major is running; waiting for it"
	flock 9
fi
if [ -x "$dest/bin/pg_config" ] && [ -f "$dest/.zklock-complete" ]; then
	echo "$dest"
	exit 0
fi
# a run killed outright (SIGKILL) left its folder; its build is gone (it
# held this lock until it ended)
rm -rf "$cache"/.build-pg"$major".*

# --- the archive's address, from the machine's own apt configuration ----
# deb822 files (*.sources) first, then one-line sources.list entries; the
# first address that serves the main archive (not the security archive).
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

# --- build tools, from bookworm ------------------------------------------
need=()
for p in build-essential bison flex libipc-run-perl; do
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

uri=$(archive_uri) || {
	log "no Debian archive address in /etc/apt (sources.list or sources.list.d)"
	exit 1
}

work=$(mktemp -d "$cache/.build-pg$major.XXXXXX")
build_pid=
# cut off (a signal, an error): the build goes, and its folder with it
# (set -e applies in here too: nothing may fail before the rm)
cleanup() {
	local i
	if [ -n "$build_pid" ]; then
		kill -TERM -- -"$build_pid" 2>/dev/null || true
		# until every process of the build is gone (bounded: then KILL)
		for i in $(seq 1 100); do
			kill -0 -- -"$build_pid" 2>/dev/null || break
			[ "$i" -eq 50 ] && kill -KILL -- -"$build_pid" 2>/dev/null
			sleep 0.1
		done
		wait "$build_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# --- fetch the source -------------------------------------------------------
aptdir="$work/apt"
mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" "$work/src"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
aptopts=(-q -o "Dir::Etc::sourcelist=$aptdir/sources.list" -o Dir::Etc::sourceparts=-
	-o "Dir::State::lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache"
	-o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
# a snapshot archive's Release files are old by design
case "$uri" in
*snapshot.debian.org*) aptopts+=(-o Acquire::Check-Valid-Until=false) ;;
esac
tarball=
for suite in stable testing unstable oldstable; do
	echo "deb-src [signed-by=$keyring] $uri $suite main" > "$aptdir/sources.list"
	if ! apt-get "${aptopts[@]}" update > "$work/apt-$suite.log" 2>&1; then
		log "suite $suite: no index ($(tail -n 1 "$work/apt-$suite.log"))"
		continue
	fi
	rm -f "$work/src"/*
	if (cd "$work/src" && apt-get "${aptopts[@]}" source --download-only "postgresql-$major") \
		>> "$work/apt-$suite.log" 2>&1; then
		tarball=$(ls "$work/src"/postgresql-"$major"_*.orig.tar.* 2>/dev/null | head -n 1)
		[ -n "$tarball" ] && { log "suite $suite: $(basename "$tarball")"; break; }
	fi
	log "suite $suite: postgresql-$major not fetched ($(grep -E '^(E|W):' "$work/apt-$suite.log" | tail -n 1))"
done
if [ -z "$tarball" ]; then
	log "no suite of $uri serves postgresql-$major (tried stable, testing, unstable, oldstable)"
	exit 1
fi

# --- build and install into the cache, atomically ---------------------------
tar -xf "$tarball" -C "$work"
srcdir=$(find "$work" -maxdepth 1 -type d -name "postgresql-$major*" | head -n 1)
log "building $(basename "$srcdir") (configure, make -j$(nproc); minutes)"
# in its own process group, in the background, so that the trap can end it
# (every step chained: set -e does not reach into it)
setsid bash -c '
	# the script killed outright (SIGKILL: no trap runs): the build goes too
	( while kill -0 "$4" 2>/dev/null; do sleep 1; done; kill -KILL 0 ) \
		</dev/null >/dev/null 2>&1 &
	cd "$1" &&
	./configure --prefix="$2" --enable-tap-tests --enable-debug \
		--without-icu --without-readline --without-zlib > "$3/configure.log" 2>&1 &&
	make -s -j"$(nproc)" > "$3/make.log" 2>&1 &&
	make -s -C contrib/dblink > "$3/contrib.log" 2>&1 &&
	make -s install DESTDIR="$3/root" > "$3/install.log" 2>&1 &&
	make -s -C contrib/dblink install DESTDIR="$3/root" >> "$3/install.log" 2>&1
' build "$srcdir" "$dest" "$work" "$$" </dev/null >/dev/null 2>&1 &
build_pid=$!
brc=0
wait "$build_pid" || brc=$?
build_pid=
if [ $brc -ne 0 ] || [ ! -x "$work/root$dest/bin/pg_config" ]; then
	log "build failed; last lines of the logs:"
	tail -n 20 "$work"/*.log >&2
	exit 1
fi
# an incomplete tree in the way (none is complete: checked under the lock)
touch "$work/root$dest/.zklock-complete"
rm -rf "$dest"
mv "$work/root$dest" "$dest"
log "installed in $dest"
echo "$dest"
