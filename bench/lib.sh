# lib.sh -- shared by bench/run.sh and bench/smoke.sh: install the Debian
# packages the benchmark needs when they are missing (apt-get update once,
# only then), and build + install zklock when it is not installed yet.
# Sourced, not run.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_ROOT=$(dirname "$BENCH_DIR")
# the PostgreSQL that PATH's pg_config names (Debian's: its own major) unless
# PG_CONFIG says otherwise; bench.py runs the one zklock is installed into
PG_CONFIG=${PG_CONFIG:-$(command -v pg_config || echo pg_config)}
if [ -z "${PGBIN:-}" ] && command -v "$PG_CONFIG" >/dev/null 2>&1; then
	PGBIN=$("$PG_CONFIG" --bindir)
fi
export PGBIN

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

# zklock must be installed in that PostgreSQL (shared_preload_libraries).
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
	bench_need postgresql-server-dev-all || return 1
	echo "bench: building and installing zklock" >&2
	make -C "$BENCH_ROOT" -s PG_CONFIG="$PG_CONFIG" >&2 &&
		make -C "$BENCH_ROOT" -s PG_CONFIG="$PG_CONFIG" install >&2
}

# bench_pg_copy DIR: a private copy of the PostgreSQL PG_CONFIG names (Debian's
# layout) under DIR: DIR/usr/lib/postgresql/<major>,
# DIR/usr/share/postgresql/<major> and DIR/usr/include -> /usr/include.  Its
# binaries are relocatable (pg_config, postgres find share/ and lib/ from
# their own place), so zklock can be installed there alone.  Prints its
# bin directory.
bench_pg_copy() {
	local dest=$1 lib share major
	lib=$(dirname "$("$PG_CONFIG" --bindir)")
	share=$("$PG_CONFIG" --sharedir)
	major=$(basename "$lib")
	mkdir -p "$dest/usr/lib/postgresql" "$dest/usr/share/postgresql" || return 1
	cp -a "$lib" "$dest/usr/lib/postgresql/$major" &&
		cp -a "$share" "$dest/usr/share/postgresql/$major" &&
		ln -sfn /usr/include "$dest/usr/include" || return 1
	echo "$dest/usr/lib/postgresql/$major/bin"
}

# bench_build_into SRC BINDIR: make && make install of the zklock tree SRC
# into the PostgreSQL whose bin directory is BINDIR
bench_build_into() {
	make -C "$1" -s PG_CONFIG="$2/pg_config" >&2 &&
		make -C "$1" -s PG_CONFIG="$2/pg_config" install >&2
}

# bench_ab REV ARGS...: bench.py --ab with zklock built at REV (old) and
# from the current tree as it is, uncommitted changes included (new), each
# installed into its own copy of PostgreSQL in a temporary folder that
# is removed at the end.
bench_ab() {
	local rev=$1 sha work side bin old_bin new_bin old_label new_label rc=0
	shift
	if ! sha=$(git -C "$BENCH_ROOT" rev-parse --verify -q "$rev^{commit}"); then
		echo "bench: --baseline $rev is not a revision of $BENCH_ROOT" >&2
		return 2
	fi
	work=$(mktemp -d /tmp/zklock-ab.XXXXXX) || return 1
	# shellcheck disable=SC2064 # $work is fixed now
	trap "rm -rf '$work'" EXIT
	chmod 755 "$work"
	mkdir -p "$work/old/src" "$work/new/src"
	git -C "$BENCH_ROOT" archive "$sha" | tar -x -C "$work/old/src" || return 1
	(cd "$BENCH_ROOT" && git ls-files -z --cached --others --exclude-standard |
		tar --null -T - --ignore-failed-read -cf -) | tar -x -C "$work/new/src" || return 1
	for side in old new; do
		echo "bench: building zklock ($side) in $work/$side" >&2
		bin=$(bench_pg_copy "$work/$side/pg") || return 1
		bench_build_into "$work/$side/src" "$bin" || return 1
		if [ $side = old ]; then old_bin=$bin; else new_bin=$bin; fi
	done
	chmod -R a+rX "$work"
	old_label="$rev = $(git -C "$BENCH_ROOT" rev-parse --short "$sha")"
	new_label="the current tree (HEAD = $(git -C "$BENCH_ROOT" rev-parse --short HEAD)"
	if [ -n "$(git -C "$BENCH_ROOT" status --porcelain --untracked-files=no)" ]; then
		new_label+=", with uncommitted changes"
	fi
	new_label+=")"
	/usr/bin/python3 -B "$BENCH_DIR/bench.py" \
		--ab-old "$old_bin" --ab-old-label "$old_label" \
		--ab-new "$new_bin" --ab-new-label "$new_label" \
		"$@" || rc=$?
	return $rc
}

# what both scripts need: servers, the C client, a compiler
BENCH_BASE_PKGS=(
	"postgresql"
	"zookeeper"
	"default-jre-headless|java"
	"libzookeeper-mt-dev"
	"gcc|gcc"
	"libc6-dev"
	"python3"
)
