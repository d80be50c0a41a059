#!/usr/bin/env bash
#
# package_test.sh -- zklock's Debian package, end to end, on this machine.
#
#   bash test/package_test.sh          (as root; test/run_tests.sh runs it)
#
# Builds the packages from a copy of this tree (`dpkg-buildpackage -us -uc -b`,
# debian/), one postgresql-<major>-zklock per major that pg_buildext builds
# for; checks what each depends on and holds; then, for each: installs it
# with `apt-get install ./<deb>` (no network: its dependencies are installed
# already), starts a throw-away ZooKeeper (test/zk_server.sh) and two
# clusters made by pg_createcluster that preload zklock, creates the
# extension in both, takes a lock on one and shows the other one waits for
# it and sees it in zk_locks; then drops the clusters, stops ZooKeeper,
# removes the package (--purge) and checks that its files are gone.
#
# Prints TAP ("ok N - ...", the plan "1..N" last) and exits non-zero if any
# check failed.  Every wait is bounded; everything it starts or makes is
# stopped and removed on any exit (trap), the package included.
#
# What it changes on the machine, and puts back: installing the package
# replaces the zklock files that `make install` put into the system
# PostgreSQL (test/run_tests.sh does that); these are saved first and
# restored after the package is removed, so the machine is left as found.
# It refuses to run while the package is installed already (it would
# remove it).
#
# ZKLOCK_PKG_KEEP=1 keeps the temporary directories (build log, server logs).
#
set -uo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
started=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
export PGCONNECT_TIMEOUT=10

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1"
	shift
	local l
	for l in "$@"; do echo "#   $l"; done
}
# diag FILE [LINES]: the tail of a file, as TAP comments
diag() { [ -f "$1" ] && tail -n "${2:-20}" "$1" | sed 's/^/#   /'; return 0; }
finish() {
	echo "1..$n"
	echo "# package test: $((n - failed)) passed, $failed failed, $(($(date +%s) - started)) s"
	[ "$failed" -eq 0 ] && exit 0
	exit 1
}
bail() {
	echo "# stopping here: $*"
	finish
}

if [ "$(id -u)" -ne 0 ]; then
	echo "Bail out! package_test.sh must run as root (it installs and removes a package)"
	exit 1
fi

work=$(mktemp -d /tmp/zklock-pkg.XXXXXX)	# the build (root's)
run=$(mktemp -d /tmp/zklock-pkgrun.XXXXXX)	# servers and sockets (postgres's)
chown postgres:postgres "$run"
chmod 755 "$run"

# what cleanup() undoes
clusters=()		# "major name"
pkg_installed=
saved=0
holder_pid=

# shellcheck disable=SC2317  # (called by the trap)
cleanup() {
	set +e
	if [ -n "$holder_pid" ]; then
		touch "$run/release"
		for _ in $(seq 1 30); do kill -0 "$holder_pid" 2>/dev/null || break; sleep 0.1; done
		kill "$holder_pid" 2>/dev/null
	fi
	local c
	for c in "${clusters[@]}"; do
		# shellcheck disable=SC2086
		timeout 120 pg_dropcluster --stop $c >/dev/null 2>&1
	done
	[ -d "$run/zk" ] && bash "$src/test/zk_server.sh" stop "$run/zk" >/dev/null 2>&1
	if [ -n "$pkg_installed" ] && dpkg-query -W -f='${Status}' "$pkg_installed" 2>/dev/null | grep -q 'ok installed'; then
		timeout 300 apt-get remove --purge -y -q -o DPkg::Lock::Timeout=120 "$pkg_installed" >/dev/null 2>&1
	fi
	[ "$saved" = 1 ] && restore_saved
	if [ "${ZKLOCK_PKG_KEEP:-}" = 1 ]; then
		echo "# kept: $work $run"
	else
		rm -rf "$work" "$run"
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# put back the files saved before the install (file by file: the
# directories above them are left as they are)
# shellcheck disable=SC2317
restore_saved() {
	local f rc=0
	while read -r f; do
		cp -a "$work/saved$f" "$f" || rc=1
	done <"$work/saved.list"
	saved=0
	return $rc
}

# a free loopback port (as test/run_tests.sh finds one)
free_port() {
	perl -MIO::Socket::INET -e '
		for (1..200) { my $p = 20000 + int(rand(20000));
			my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $p, Listen => 1, ReuseAddr => 0);
			if ($s) { print $p; exit 0 } } exit 1'
}

# --- build ----------------------------------------------------------------
# A copy without git and build products; FAILPOINTS and PG_CFLAGS=-Werror in
# the environment, as test/run_tests.sh's own build has them: debian/rules
# must build a release anyway (checked below: no -Werror in the build, no
# zklock.failpoints setting in the server).
mkdir "$work/zklock"
tar -C "$src" --exclude=./.git --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
	--exclude=./test/tmp_check --exclude=./tmp_check --exclude=./results -cf - . |
	tar -C "$work/zklock" -xf -
t0=$(date +%s)
if (cd "$work/zklock" && FAILPOINTS=1 PG_CFLAGS=-Werror timeout 900 dpkg-buildpackage -us -uc -b) \
	>"$work/build.log" 2>&1; then
	ok "dpkg-buildpackage -us -uc -b builds ($(($(date +%s) - t0)) s)"
else
	not_ok "dpkg-buildpackage -us -uc -b builds" "log: $work/build.log"
	diag "$work/build.log" 30
	bail "no package"
fi

if grep -E '^(gcc|cc|clang) ' "$work/build.log" | grep -qE ' -Werror( |$)'; then
	not_ok "the build compiles without -Werror (PG_CFLAGS=-Werror in the environment is ignored)"
else
	ok "the build compiles without -Werror (PG_CFLAGS=-Werror in the environment is ignored)"
fi

expected=$(cd "$work/zklock" && pg_buildext supported-versions | sort -n | xargs)
debs=()
majors=()
for f in "$work"/postgresql-*-zklock_*.deb; do
	[ -f "$f" ] || continue
	p=$(dpkg-deb -f "$f" Package)
	m=$(echo "$p" | sed -nE 's/^postgresql-([0-9]+)-zklock$/\1/p')
	[ -n "$m" ] || continue
	debs+=("$f")
	majors+=("$m")
done
got=$(printf '%s\n' "${majors[@]}" | sort -n | xargs)
if [ -n "$got" ] && [ "$got" = "$expected" ]; then
	ok "one package per major pg_buildext builds for ($expected): $(cd "$work" && echo postgresql-*-zklock*_*.deb)"
else
	not_ok "one package per major pg_buildext builds for" "pg_buildext: '$expected'; packages: '$got'"
	[ -n "$got" ] || bail "no package"
fi

version=$(cd "$work/zklock" && dpkg-parsechangelog -S Version)
extversion=$(sed -nE "s/^default_version *= *'([^']+)'.*/\1/p" "$src/zklock.control")
doc_pages=()
for f in "$src"/doc/*.md; do [ -f "$f" ] && doc_pages+=("$(basename "$f")"); done
# the images README.md shows, at their paths relative to it
mapfile -t readme_images < <(sed -n 's/.*!\[[^]]*\](\([^)]*\)).*/\1/p' "$src/README.md")

for i in "${!debs[@]}"; do
	deb=${debs[$i]}
	major=${majors[$i]}
	pkg=postgresql-$major-zklock
	depends=$(dpkg-deb -f "$deb" Depends)
	# ZooKeeper's C client with TLS is inside zklock.so (doc/security.md):
	# OpenSSL and Cyrus SASL are its libraries, Debian's libzookeeper-mt2 is not
	if echo "$depends" | grep -qE '(^|, )libssl3( |,|$)' &&
		echo "$depends" | grep -qE '(^|, )libsasl2-2( |,|$)' &&
		! echo "$depends" | grep -qE '(^|, )libzookeeper-mt2( |,|$)' &&
		echo "$depends" | grep -qE "(^|, )postgresql-$major( |,|$)"; then
		ok "$pkg $version depends on libssl3, libsasl2-2 and postgresql-$major, not libzookeeper-mt2 (Depends: $depends)"
	else
		not_ok "$pkg depends on libssl3, libsasl2-2 and postgresql-$major, not libzookeeper-mt2" "Depends: $depends"
	fi
	# the client inside speaks TLS: zklock's patched handshake is there
	mkdir -p "$work/x-$major"
	dpkg-deb -x "$deb" "$work/x-$major"
	if grep -q 'error in ssl connect: %s' "$work/x-$major/usr/lib/postgresql/$major/lib/zklock.so"; then
		ok "$pkg's zklock.so carries ZooKeeper's C client with TLS"
	else
		not_ok "$pkg's zklock.so carries ZooKeeper's C client with TLS"
	fi
	dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|' >"$work/$pkg.files"
	missing=()
	for f in "/usr/lib/postgresql/$major/lib/zklock.so" \
		"/usr/share/postgresql/$major/extension/zklock.control" \
		"/usr/share/postgresql/$major/extension/zklock--1.0.sql" \
		"/usr/share/doc/$pkg/README.md" "/usr/share/doc/$pkg/copyright"; do
		grep -qx "$f" "$work/$pkg.files" || missing+=("$f")
	done
	for f in "${doc_pages[@]}"; do
		grep -qx "/usr/share/doc/$pkg/doc/$f" "$work/$pkg.files" || missing+=("/usr/share/doc/$pkg/doc/$f")
	done
	for f in "${readme_images[@]}"; do
		grep -qx "/usr/share/doc/$pkg/$f" "$work/$pkg.files" || missing+=("/usr/share/doc/$pkg/$f")
	done
	if [ ${#readme_images[@]} -eq 0 ]; then
		not_ok "README.md shows an image" "none found by the pattern"
	fi
	if [ ${#missing[@]} -eq 0 ]; then
		ok "$pkg holds zklock.so, the control file and SQL scripts, README.md, the ${#readme_images[@]} image(s) it shows (${readme_images[*]}) and the ${#doc_pages[@]} pages of doc/ (uncompressed)"
	else
		not_ok "$pkg holds the library, the extension's files and the manual" "missing: ${missing[*]}"
	fi
done

# --- per major: install, two clusters, a lock across them, remove --------
zkport=$(free_port) || bail "no free port"
hosts=$(bash "$src/test/zk_server.sh" start "$run/zk" --base-port "$zkport" --owner-pid $$ 2>"$run/zk_start.err")
if [ -n "$hosts" ]; then
	ok "ZooKeeper started at $hosts"
else
	not_ok "ZooKeeper starts"
	diag "$run/zk_start.err"
	bail "no ZooKeeper"
fi

# q MAJOR PORT SQL: one statement's result, unaligned, as postgres
q() {
	timeout 60 runuser -u postgres -- "/usr/lib/postgresql/$1/bin/psql" -X -At -v ON_ERROR_STOP=1 \
		-h "$run" -p "$2" -d postgres -c "$3" 2>>"$run/psql.err"
}

for i in "${!debs[@]}"; do
	deb=${debs[$i]}
	major=${majors[$i]}
	pkg=postgresql-$major-zklock

	if dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
		not_ok "$pkg is not installed before the test" "remove it first: apt-get remove --purge $pkg"
		continue
	fi
	# the files of an earlier `make install` (no package owns them): saved, put back at the end
	while read -r f; do
		if [ -f "$f" ] && ! dpkg -S "$f" >/dev/null 2>&1; then
			mkdir -p "$work/saved$(dirname "$f")"
			cp -a "$f" "$work/saved$f"
			echo "$f" >>"$work/saved.list"
			saved=1
		fi
	done <"$work/$pkg.files"

	pkg_installed=$pkg
	if timeout 300 apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=120 "$deb" \
		>"$work/install-$major.log" 2>&1 &&
		dpkg-query -W -f='${Status}' "$pkg" | grep -q 'ok installed'; then
		ok "apt-get install $(basename "$deb") installs it"
	else
		not_ok "apt-get install $(basename "$deb") installs it"
		diag "$work/install-$major.log"
		bail "not installed"
	fi

	# two clusters, their sockets in $run, loading zklock from the package
	names=("zklockpkg_$$_a" "zklockpkg_$$_b")
	ports=()
	made=1
	for name in "${names[@]}"; do
		port=$(free_port) || bail "no free port"
		ports+=("$port")
		clusters+=("$major $name")
		if timeout 120 pg_createcluster "$major" "$name" -p "$port" -s "$run" --start-conf=manual \
			-o shared_preload_libraries=zklock -o "zklock.hosts=$hosts" \
			-o "zklock.node_name=$name" -o zklock.root=/zklockpkg \
			-o listen_addresses=localhost >"$run/create-$name.log" 2>&1 &&
			timeout 120 pg_ctlcluster "$major" "$name" start >>"$run/create-$name.log" 2>&1; then
			:
		else
			made=0
			diag "$run/create-$name.log"
			diag "/var/log/postgresql/postgresql-$major-$name.log"
		fi
	done
	if [ $made = 1 ]; then
		ok "pg_createcluster $major ${names[0]} and ${names[1]} (ports ${ports[*]}), shared_preload_libraries = zklock, started"
	else
		not_ok "pg_createcluster $major: two clusters with zklock preloaded start"
		bail "no clusters"
	fi
	pa=${ports[0]}
	pb=${ports[1]}

	va=$(q "$major" "$pa" "CREATE EXTENSION zklock" >/dev/null && q "$major" "$pa" "SELECT extversion FROM pg_extension WHERE extname = 'zklock'")
	vb=$(q "$major" "$pb" "CREATE EXTENSION zklock" >/dev/null && q "$major" "$pb" "SELECT extversion FROM pg_extension WHERE extname = 'zklock'")
	if [ "$va" = "$extversion" ] && [ "$vb" = "$extversion" ]; then
		ok "CREATE EXTENSION zklock in both clusters: version $extversion"
	else
		not_ok "CREATE EXTENSION zklock in both clusters" "versions: '$va' '$vb', expected '$extversion'"
		diag "$run/psql.err"
	fi

	fp=$(q "$major" "$pa" "SELECT count(*) FROM pg_settings WHERE name = 'zklock.failpoints'")
	if [ "$fp" = 0 ]; then
		ok "the packaged library is a release build (no zklock.failpoints setting)"
	else
		not_ok "the packaged library is a release build (no zklock.failpoints setting)" "count: '$fp'"
	fi

	sa=''
	sb=''
	for _ in $(seq 1 150); do
		sa=$(q "$major" "$pa" "SELECT state FROM zk_lock_status")
		sb=$(q "$major" "$pb" "SELECT state FROM zk_lock_status")
		[ "$sa" = connected ] && [ "$sb" = connected ] && break
		sleep 0.2
	done
	if [ "$sa" = connected ] && [ "$sb" = connected ]; then
		ok "both workers connected to ZooKeeper"
	else
		not_ok "both workers connect to ZooKeeper within 30 s" "states: '$sa' '$sb'"
	fi

	# A holds 'pkg/test' in a session that stays open until $run/release
	rm -f "$run/acquired" "$run/release" "$run/released"
	cat >"$run/holder.sql" <<SQL
SELECT zk_lock_acquire_session('pkg/test', timeout => '30 s') IS NOT NULL AS acquired;
\\! touch $run/acquired
\\! i=0; while [ ! -e $run/release ] && [ \$i -lt 1200 ]; do sleep 0.1; i=\$((i+1)); done
SELECT zk_lock_release('pkg/test') AS released;
\\! touch $run/released
SQL
	chown postgres:postgres "$run/holder.sql"
	runuser -u postgres -- "/usr/lib/postgresql/$major/bin/psql" -X -At -v ON_ERROR_STOP=1 \
		-h "$run" -p "$pa" -d postgres -f "$run/holder.sql" >"$run/holder.out" 2>&1 &
	holder_pid=$!
	for _ in $(seq 1 300); do
		[ -e "$run/acquired" ] && break
		kill -0 "$holder_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ -e "$run/acquired" ]; then
		ok "${names[0]}: zk_lock_acquire_session('pkg/test') granted, session kept open"
	else
		not_ok "${names[0]}: zk_lock_acquire_session('pkg/test') granted within 30 s"
		diag "$run/holder.out"
	fi

	tb=$(q "$major" "$pb" "SELECT coalesce(zk_lock_try_acquire_session('pkg/test')::text, 'none')")
	if [ "$tb" = none ]; then
		ok "${names[1]}: zk_lock_try_acquire_session('pkg/test') is NULL while ${names[0]} holds it"
	else
		not_ok "${names[1]}: zk_lock_try_acquire_session('pkg/test') is NULL while ${names[0]} holds it" "got: '$tb'"
		diag "$run/psql.err" 5
	fi

	seen=$(q "$major" "$pb" "SELECT resource || ' ' || mode || ' ' || granted || ' ' || instance || ' ' || scope FROM zk_locks WHERE resource = 'pkg/test'")
	if [ "$seen" = "pkg/test exclusive true ${names[0]} session" ]; then
		ok "${names[1]}: zk_locks shows ${names[0]}'s lock: $seen"
	else
		not_ok "${names[1]}: zk_locks shows ${names[0]}'s lock" "got: '$seen'"
	fi

	touch "$run/release"
	for _ in $(seq 1 300); do
		[ -e "$run/released" ] && break
		kill -0 "$holder_pid" 2>/dev/null || break
		sleep 0.1
	done
	wait "$holder_pid" 2>/dev/null
	hrc=$?
	holder_pid=
	tb=none
	if [ -e "$run/released" ] && [ $hrc -eq 0 ]; then
		for _ in $(seq 1 50); do
			tb=$(q "$major" "$pb" "SELECT coalesce(zk_lock_try_acquire_session('pkg/test')::text, 'none')")
			[ -n "$tb" ] && [ "$tb" != none ] && break
			sleep 0.2
		done
	fi
	if [ -n "$tb" ] && [ "$tb" != none ]; then
		ok "${names[1]}: zk_lock_try_acquire_session('pkg/test') granted after ${names[0]} released it (token $tb)"
	else
		not_ok "${names[1]}: zk_lock_try_acquire_session('pkg/test') granted after ${names[0]} released it" "got: '$tb'"
		diag "$run/holder.out"
		diag "$run/psql.err" 5
	fi

	dropped=1
	for name in "${names[@]}"; do
		timeout 120 pg_dropcluster --stop "$major" "$name" >>"$run/drop.log" 2>&1 || dropped=0
		[ -d "/etc/postgresql/$major/$name" ] && dropped=0
		[ -d "/var/lib/postgresql/$major/$name" ] && dropped=0
	done
	clusters=()
	if [ $dropped = 1 ]; then
		ok "pg_dropcluster --stop: both clusters gone"
	else
		not_ok "pg_dropcluster --stop: both clusters gone"
		diag "$run/drop.log"
	fi

	if timeout 300 apt-get remove --purge -y -q -o DPkg::Lock::Timeout=120 "$pkg" >"$work/remove-$major.log" 2>&1; then
		left=()
		while read -r f; do
			case $f in
			*/zklock.so | */zklock.control | */zklock--*.sql | */README.md | */doc/*.md) [ -e "$f" ] && left+=("$f") ;;
			esac
		done <"$work/$pkg.files"
		[ -e "/usr/share/doc/$pkg" ] && left+=("/usr/share/doc/$pkg")
		if [ ${#left[@]} -eq 0 ] && ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
			ok "apt-get remove --purge $pkg: zklock.so, the extension's files and /usr/share/doc/$pkg are gone"
		else
			not_ok "apt-get remove --purge $pkg leaves nothing" "left: ${left[*]}"
		fi
	else
		not_ok "apt-get remove --purge $pkg"
		diag "$work/remove-$major.log"
	fi
	pkg_installed=
done

bash "$src/test/zk_server.sh" stop "$run/zk" >/dev/null 2>&1
if [ "$saved" = 1 ]; then
	if restore_saved; then
		ok "the zklock files of an earlier make install, replaced by the package, are back"
	else
		not_ok "the zklock files of an earlier make install are put back"
	fi
fi
finish
