#!/usr/bin/env bash
#
# run_tests.sh -- zklock's whole test suite, from a fresh Debian 12 machine.
#
#   bash test/run_tests.sh
#
# As root: installs the packages that are missing, builds and installs the
# extension, then runs the suite as the unprivileged user "postgres" from a
# copy of the tree in a temporary folder (PostgreSQL refuses to run as root).
# As another user: expects the packages and `make install` to be done, and
# runs the suite as that user.
#
# The suite: the unit test of the grant rule (test/unit/, `make zklock-unit`,
# no servers); pg_regress (sql/, expected/) by `make installcheck` against a
# server and a ZooKeeper started here on loopback; then the TAP tests (test/t/*.pl), which
# start their own ZooKeeper servers and PostgreSQL instances; then, as root,
# the seconds-long benchmark smoke test (bench/smoke.sh), which fails when a
# lock cycle is several times slower than ZooKeeper's own create+delete.
#
# Set PROVE_TESTS="test/t/001_x.pl ..." to run only some TAP tests.
#
# test/t/034_rolling_upgrade.pl needs zklock's last release (git revision
# ZKLOCK_OLD_REV, default 2e55121) built into its own copy of PostgreSQL:
# as root, from a clone, this script builds it (test/build_old.sh, some
# seconds) and passes its path in ZKLOCK_OLD_INSTALL.  As another user, set
# ZKLOCK_OLD_INSTALL to such an installation; the test fails without one.
#
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
pgbin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)

# After a failed run: the logs of the failed TAP tests only (their own log
# and their servers' logs, tails), then prove's summary of what failed, last,
# so that it is what the end of the output shows.
report_failures() {
	local tree=$1 name f
	[ -f "$tree/regression.diffs" ] && { echo "---- regression.diffs (head)"; head -n 60 "$tree/regression.diffs"; }
	for name in $(sed -nE 's|^test/t/([^ ]+)\.pl +\(Wstat.*|\1|p' "$tree/prove.out.log" 2>/dev/null); do
		for f in "$tree"/test/tmp_check/log/regress_log_"$name" "$tree"/test/tmp_check/log/*"$name"*.log; do
			[ -f "$f" ] && { echo "---- $(basename "$f") (tail)"; tail -n 60 "$f"; }
		done
	done
	if [ -f "$tree/prove.out.log" ]; then
		echo "---- what failed (prove)"
		grep -E '^(not ok|# +Failed test|test/t/.* \(Wstat|  (Failed tests?|Non-zero|Parse errors|Bad plan)|Result:)' \
			"$tree/prove.out.log" | head -n 60 || true
	fi
	for f in "$tree"/unit.out.log "$tree"/regress.out.log; do
		if [ -f "$f" ]; then grep -E '^not ok|FAILED' "$f" | head -n 20 || true; fi
	done
	return 0
}

if [ "${ZKLOCK_TEST_INNER:-}" != 1 ]; then
	if [ "$(id -u)" -eq 0 ]; then
		bash "$src/scripts/install-deps.sh"
		pgbin=$(pg_config --bindir)
		make -C "$src" -s clean
		# the test build: with failpoints (src/failpoint.c), warnings are errors
		make -C "$src" -s FAILPOINTS=1 PG_CFLAGS=-Werror
		make -C "$src" -s install FAILPOINTS=1 PG_CFLAGS=-Werror
		work=$(mktemp -d /tmp/zklock-test.XXXXXX)
		cp -a "$src/." "$work/src"
		# the rolling upgrade test runs the library of the last release
		# (ZKLOCK_OLD_REV) beside this one: built here, from git history
		# (the suite runs from a copy without it); the test fails without it
		old_install=
		if [ -z "${PROVE_TESTS:-}" ] || [[ "${PROVE_TESTS}" == *034_rolling_upgrade* ]]; then
			if [ -d "$src/.git" ] || [ -f "$src/.git" ]; then
				old_install=$(bash "$src/test/build_old.sh" "$src" \
					"${ZKLOCK_OLD_REV:-2e55121b7913c2873fb71a21802178ec3a7aaa04}" "$work/old") || old_install=
			fi
		fi
		chown -R postgres:postgres "$work"
		rc=0
		runuser -u postgres -- env ZKLOCK_TEST_INNER=1 PROVE_TESTS="${PROVE_TESTS:-}" \
			ZKLOCK_OLD_INSTALL="$old_install" \
			bash "$work/src/test/run_tests.sh" || rc=$?
		read -r passed failed < "$work/src/counts" || { passed=0; failed=1; }

		# the performance smoke test: a cycle several times slower fails
		brc=0
		if [ -z "${PROVE_TESTS:-}" ]; then
			bash "$src/bench/smoke.sh" || brc=$?
			if [ $brc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
		fi
		if [ $rc -ne 0 ]; then
			report_failures "$work/src"
		fi
		rm -rf "$work"
		echo
		echo "zklock: $passed passed, $failed failed"
		[ $rc -eq 0 ] && [ $brc -eq 0 ]
		exit $?
	fi
fi

export PATH="$pgbin:$PATH"
cd "$src"

# a free loopback port
free_port() {
	perl -MIO::Socket::INET -e '
		for (1..200) { my $p = 20000 + int(rand(20000));
			my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $p, Listen => 1, ReuseAddr => 0);
			if ($s) { print $p; exit 0 } } exit 1'
}

zkdir=$(mktemp -d /tmp/zklock-zk.XXXXXX)
pgdata="$zkdir/pgdata"
cleanup() {
	[ -d "$pgdata" ] && pg_ctl -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true
	bash test/zk_server.sh stop "$zkdir/zk" >/dev/null 2>&1 || true
	rm -rf "$zkdir"
}
trap cleanup EXIT

unit_passed=0
unit_failed=0
regress_passed=0
regress_failed=0
tap_passed=0
tap_failed=0

# --- unit tests (test/unit/, no servers) --------------------------------
# The grant rule and lock node names (src/grant_rule.c), and the node data
# codec (src/nodedata.c), table-driven; TAP, one plan per program.
set +e
make -s zklock-unit PG_CONFIG="$pgbin/pg_config" PG_CFLAGS=-Werror 2>&1 | tee unit.out.log
unit_rc=${PIPESTATUS[0]}
set -e
unit_passed=$(grep -cE '^ok ' unit.out.log || true)
unit_failed=$(grep -cE '^not ok ' unit.out.log || true)
unit_planned=$(sed -nE 's/^1\.\.([0-9]+)$/\1/p' unit.out.log | awk '{s += $1} END {print s + 0}')
# cases that never ran (a crash, a build failure) count as failed
if [ "$((unit_passed + unit_failed))" -lt "${unit_planned:-0}" ]; then
	unit_failed=$((unit_planned - unit_passed))
fi
if [ "$unit_rc" -ne 0 ] && [ "$unit_failed" -eq 0 ]; then
	unit_failed=1
fi

# --- pg_regress, through `make installcheck` ---------------------------
# A ZooKeeper and a server with the suite's settings (test/installcheck.conf),
# then the real `make installcheck` against that server, as a user would run
# it against theirs.
zkport=$(free_port)
hosts=$(bash test/zk_server.sh start "$zkdir/zk" --base-port "$zkport")
pgport=$(free_port)
initdb -D "$pgdata" -A trust >/dev/null
{
	cat test/installcheck.conf
	echo "zklock.hosts = '$hosts'"
	echo "port = $pgport"
	echo "listen_addresses = ''"
	echo "unix_socket_directories = '$zkdir'"
} >>"$pgdata/postgresql.conf"
pg_ctl -D "$pgdata" -l "$zkdir/pg_regress_server.log" -w -t 60 start >/dev/null

set +e
PGHOST=$zkdir PGPORT=$pgport make -s installcheck PG_CONFIG="$pgbin/pg_config" 2>&1 | tee regress.out.log
regress_rc=${PIPESTATUS[0]}
set -e
n=$(grep -cE '^(ok|not ok) ' regress.out.log || true)
nf=$(grep -cE '^not ok |FAILED' regress.out.log || true)
if [ "$n" -eq 0 ]; then
	# older pg_regress output: "test name ... ok"
	n=$(grep -cE '\.\.\. (ok|FAILED)' regress.out.log || true)
	nf=$(grep -cE '\.\.\. FAILED' regress.out.log || true)
fi
regress_failed=$nf
regress_passed=$((n - nf))
if [ "$regress_rc" -ne 0 ] && [ "$regress_failed" -eq 0 ]; then
	regress_failed=1
	tail -n 20 "$zkdir/pg_regress_server.log"
fi
[ -f regression.diffs ] && cat regression.diffs
pg_ctl -D "$pgdata" -m fast stop >/dev/null 2>&1 || true
bash test/zk_server.sh stop "$zkdir/zk" >/dev/null 2>&1 || true

# --- TAP ---------------------------------------------------------------
set +e
mkdir -p test/tmp_check
TESTDIR="$src/test" PG_REGRESS="$(dirname "$(pg_config --pgxs)")/../test/regress/pg_regress" \
	prove -I "$(dirname "$(pg_config --pgxs)")/../test/perl" -I test \
	${PROVE_TESTS:-test/t/*.pl} 2>&1 | tee prove.out.log
tap_rc=${PIPESTATUS[0]}
set -e
tap_total=$(sed -nE 's/^Files=[0-9]+, Tests=([0-9]+),.*/\1/p' prove.out.log | tail -n1)
tap_failed=$(sed -nE 's/^\s*Failed ([0-9]+)\/[0-9]+ subtests.*/\1/p' prove.out.log | awk '{s += $1} END {print s + 0}')
tap_total=${tap_total:-0}
tap_failed=${tap_failed:-0}
tap_passed=$((tap_total - tap_failed))
if [ "$tap_rc" -ne 0 ] && [ "$tap_failed" -eq 0 ]; then
	tap_failed=1
fi

suite_passed=$((unit_passed + regress_passed + tap_passed))
suite_failed=$((unit_failed + regress_failed + tap_failed))
echo
echo "unit: $unit_passed passed, $unit_failed failed"
echo "pg_regress: $regress_passed passed, $regress_failed failed"
echo "TAP: $tap_passed passed, $tap_failed failed"
echo "suite: $suite_passed passed, $suite_failed failed"
echo "$suite_passed $suite_failed" > counts
[ "$unit_rc" -eq 0 ] && [ "$unit_failed" -eq 0 ] && [ "$regress_rc" -eq 0 ] && [ "$tap_rc" -eq 0 ]
