# lib.sh -- shared by bench/run.sh and bench/smoke.sh: install the Debian
# packages the benchmark needs when they are missing (apt-get update once,
# only then), and build + install zklock when it is not installed yet.
# Sourced, not run.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_ROOT=$(dirname "$BENCH_DIR")
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
# the PostgreSQL that bench.py runs is the one zklock is installed into
if [ -z "${PGBIN:-}" ] && [ -x "$PG_CONFIG" ]; then
	PGBIN=$("$PG_CONFIG" --bindir)
fi
export PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}

bench_installed() { # package
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}

# bench_need PKG...: install whichever of these packages are missing.
# A package given as "pkg|command" counts as present when the command is
# on PATH (e.g. any JDK satisfies "default-jdk-headless|javac").
bench_need() {
	local spec pkg cmd missing=()
	for spec in "$@"; do
		pkg=${spec%%|*}
		cmd=""
		[ "$pkg" != "$spec" ] && cmd=${spec#*|}
		if [ -n "$cmd" ] && command -v "$cmd" >/dev/null 2>&1; then
			continue
		fi
		bench_installed "$pkg" || missing+=("$pkg")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench: missing packages: ${missing[*]}; run as root to install them" >&2
		return 1
	fi
	echo "bench: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	if [ -z "${BENCH_APT_UPDATED:-}" ]; then
		apt-get update -qq >&2 || return 1
		BENCH_APT_UPDATED=1
	fi
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# zklock must be installed in PostgreSQL 15 (shared_preload_libraries).
bench_zklock() {
	local lib ext
	lib="$("$PG_CONFIG" --pkglibdir)/zklock.so"
	ext="$("$PG_CONFIG" --sharedir)/extension/zklock.control"
	if [ -f "$lib" ] && [ -f "$ext" ]; then
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "bench: zklock is not installed; run 'make && make install' as root first" >&2
		return 1
	fi
	bench_need postgresql-server-dev-15 || return 1
	echo "bench: building and installing zklock" >&2
	make -C "$BENCH_ROOT" -s PG_CONFIG="$PG_CONFIG" >&2 &&
		make -C "$BENCH_ROOT" -s PG_CONFIG="$PG_CONFIG" install >&2
}

# what both scripts need: servers, the C client, a compiler
BENCH_BASE_PKGS=(
	"postgresql-15"
	"zookeeper"
	"default-jre-headless|java"
	"libzookeeper-mt-dev"
	"gcc|gcc"
	"libc6-dev"
	"python3"
)
