#!/usr/bin/env bash
#
# run_tests.sh -- zklock's whole test suite, from a fresh Debian 12 machine.
#
#   bash test/run_tests.sh
#
# As root: installs the packages that are missing, then runs the suite on
# each PostgreSQL major, as the unprivileged user "postgres", from a copy of
# the tree in a temporary folder (PostgreSQL refuses to run as root):
#
#   15   Debian 12's package: the whole suite.  zklock is built and installed
#        into it (make install), as a user would.
#   17, 18  built from the upstream source that Debian's archive serves
#        (scripts/build-postgres.sh, cached in /var/cache/zklock; minutes
#        the first time, under a second after): zklock is built and
#        installed into a copy of the cached tree, and runs the unit tests,
#        all of pg_regress and the TAP tests of MAJOR_TAP_TESTS below
#        (locking, the fence, the worker's session, the update scripts).
#        These two run side by side with 15 (mostly waiting on timeouts,
#        a leg uses a fraction of a core): 15 streams its output, 17 and 18
#        each write theirs into a log, printed whole after, in the majors'
#        order.  Every leg reserves
#        its ports in one lock directory (PG_TEST_PORT_DIR, as
#        PostgreSQL::Test::Cluster::get_free_port does), so that no two
#        servers of the run take the same port.
#
# Then, as root, the seconds-long benchmark smoke test (bench/smoke.sh), which
# fails when a lock cycle is several times slower than ZooKeeper's own
# create+delete, or when a flat uncontended cycle costs ZooKeeper more than
# 3 requests; the Debian package's test (test/package_test.sh): the
# package is built, installed into clusters made by pg_createcluster, used
# across two of them, and removed; and README's tour as written
# (test/tour_test.sh: PostgreSQL 18, two instances, a lock across them).
#
# Knobs (environment):
#   ZKLOCK_TEST_VERSIONS="15 17 18"   the majors (15: Debian's package)
#   ZKLOCK_TEST_ALL_VERSIONS=1        the whole suite on every major
#                                     (one major after the other)
#   ZKLOCK_TEST_SEQUENTIAL=1          every leg alone, one after the other
#   ZKLOCK_TEST_JOBS=N                TAP files at once in each leg (by
#                                     default 2 for a whole suite, else 1)
#   PG_CONFIG=/var/cache/zklock/pg18/bin/pg_config
#                                     the whole suite on that PostgreSQL alone
#                                     (a copy of its tree gets zklock)
#   ZKLOCK_ZK_CLIENT=system           zklock built against Debian's
#                                     libzookeeper-mt (no TLS, no SASL)
#                                     instead of scripts/build-zkclient.sh's
#   PROVE_TESTS="test/t/locking/001_x.pl ..."
#                                     only these TAP tests (on every major);
#                                     the benchmark and package tests then
#                                     do not run
#
# The suite on one major: the unit tests (test/unit/, `make zklock-unit`, no
# servers); pg_regress (sql/, expected/) by `make installcheck` against a
# server and a ZooKeeper started here on loopback; then the TAP tests
# (test/t/<folder>/*.pl, and any test still flat in test/t/), which start
# their own ZooKeeper servers and PostgreSQL instances.
#
# test/t/upgrade/034_rolling_upgrade.pl needs zklock's last release (git revision
# ZKLOCK_OLD_REV, default 2e55121) built into its own copy of PostgreSQL
# 15: as root, from a clone, this script builds it (test/build_old.sh, some
# seconds) and passes its path in ZKLOCK_OLD_INSTALL; that release builds
# on 15 only, so 034 runs on 15 only.  test/t/upgrade/059_cross_major.pl needs a
# second major with this tree's zklock, in ZKLOCK_OTHER_INSTALL: 18 for the
# suite on 15, and 15 for the others.  As another user, set both to such
# installations; each test fails without its own.  test/t/upgrade/067_rolling_recipes.pl
# needs the previous release (ZKLOCK_PREV_REV, default 78d507c: 1.3), built
# the same way, in ZKLOCK_PREV_INSTALL; on 15 only.  test/t/upgrade/079_rolling_1_5.pl
# needs the last release (ZKLOCK_LAST_REV, default 2b98233: 1.4.0), built
# the same way (only when 079 runs), in ZKLOCK_LAST_INSTALL; on 15 only.
#
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
pgbin=$(${PG_CONFIG:-pg_config} --bindir 2>/dev/null || true)

# The TAP tests that run on 17 and 18 (with all of pg_regress and the unit
# tests): locking across instances, waits, the commit fence and its lease,
# the worker's session and its watches, the update scripts, what each
# major adds, and the queue (its interface, the transactional put, its
# cycle, its load, the commit's wait, the waiting takers).
MAJOR_TAP_TESTS="
	test/t/recipes/063_advisory.pl
	test/t/recipes/064_semaphore.pl
	test/t/recipes/065_election.pl
	test/t/recipes/066_failover.pl
	test/t/fence/073_guard_listing.pl
	test/t/locking/074_group_commit.pl
	test/t/ops/080_stats.pl
	test/t/deadlock/081_deadlock.pl
	test/t/locking/001_cross_instance.pl
	test/t/locking/002_fairness.pl
	test/t/locking/003_trylock_waiters.pl
	test/t/locking/004_dead_holder.pl
	test/t/upgrade/006_upgrade.pl
	test/t/locking/007_lost_client.pl
	test/t/locking/009_bounded_waits.pl
	test/t/fence/020_commit_fence.pl
	test/t/fence/024_lease.pl
	test/t/locking/027_lost_replies.pl
	test/t/fence/035_fence_window.pl
	test/t/fence/036_handshake_flap.pl
	test/t/locking/043_watches.pl
	test/t/ops/044_privileges.pl
	test/t/upgrade/058_script_search_path.pl
	test/t/upgrade/059_cross_major.pl
	test/t/upgrade/060_version_features.pl
	test/t/ops/113_tls.pl
	test/t/recipes/130_queue.pl
	test/t/recipes/131_queue_put.pl
	test/t/recipes/134_queue_fast.pl
	test/t/recipes/135_queue_load.pl
	test/t/recipes/137_queue_commit.pl
	test/t/recipes/138_queue_wait.pl
	test/t/recipes/141_queue_names.pl
	test/t/recipes/143_queue_stats.pl
	test/t/recipes/145_queue_recovery.pl
	test/t/recipes/146_queue_consume_outcome.pl
	test/t/ops/147_queue_allowed.pl
"

# After a failed run: the logs of the failed TAP tests only (their own log
# and their servers' logs, tails), then prove's summary of what failed, last,
# so that it is what the end of the output shows.
report_failures() {
	local tree=$1 name f
	[ -f "$tree/regression.diffs" ] && { echo "---- regression.diffs (head)"; head -n 60 "$tree/regression.diffs"; }
	# (a test's log is named by its file's name, without its folder)
	for name in $(sed -nE 's|^test/t/([^ ]+/)?([^ /]+)\.pl +\(Wstat.*|\2|p' "$tree/prove.out.log" 2>/dev/null); do
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

# major_of PG_CONFIG: 15, 17, 18
major_of() { "$1" --version | sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p'; }

# prepare_leg NAME PG_CONFIG: zklock's test build installed into that
# PostgreSQL ("system": Debian's, by make install from the checkout; else
# a copy of the tree that PG_CONFIG names, under $work) and a copy of the
# source for the suite to run from, $work/src-NAME; prints the PostgreSQL
# installation's directory (for install_path).
prepare_leg() {
	local name=$1 pgc=$2 tree
	if [ "$name" = system ]; then
		make -C "$src" -s clean || return 1
		# the test build: with failpoints (src/common/failpoint.c), warnings are errors
		make -C "$src" -s FAILPOINTS=1 PG_CFLAGS=-Werror PG_CONFIG="$pgc" ${zk_client:+ZK_CLIENT="$zk_client"} >&2 || return 1
		make -C "$src" -s install FAILPOINTS=1 PG_CFLAGS=-Werror PG_CONFIG="$pgc" ${zk_client:+ZK_CLIENT="$zk_client"} >&2 || return 1
		cp -a "$src/." "$work/src-$name" || return 1
		tree=$(dirname "$("$pgc" --bindir)")
	else
		tree="$work/pg-$name"
		cp -a "$(dirname "$("$pgc" --bindir)")" "$tree" || return 1
		pgc="$tree/bin/pg_config"
		cp -a "$src/." "$work/src-$name" || return 1
		make -C "$work/src-$name" -s clean PG_CONFIG="$pgc" >&2 || return 1
		make -C "$work/src-$name" -s FAILPOINTS=1 PG_CFLAGS=-Werror PG_CONFIG="$pgc" ${zk_client:+ZK_CLIENT="$zk_client"} >&2 || return 1
		make -C "$work/src-$name" -s install FAILPOINTS=1 PG_CFLAGS=-Werror PG_CONFIG="$pgc" ${zk_client:+ZK_CLIENT="$zk_client"} >&2 || return 1
		chmod -R a+rX "$tree" || return 1
	fi
	echo "$tree"
}

# exec_leg NAME INSTALL TAP_TESTS OTHER_INSTALL: the suite as "postgres"
# against the installation INSTALL (its bin first in PATH), from
# $work/src-NAME; returns its exit status (the counts are in
# $work/src-NAME/counts).  Changes no variable of this shell: it also runs
# in a background subshell, beside another leg.
exec_leg() {
	local name=$1 inst=$2 tests=$3 other=$4 rc=0
	echo
	echo "======== PostgreSQL $(major_of "$inst/bin/pg_config") ($inst)"
	rm -f "$work/src-$name/counts"
	chown -R postgres:postgres "$work/src-$name"
	# the whole suite two TAP files at a time (the TAP section below)
	local jobs=${ZKLOCK_TEST_JOBS:-1}
	[ -n "${ZKLOCK_TEST_JOBS:-}" ] || [ "${full_of[$name]:-0}" != 1 ] || jobs=2
	runuser -u postgres -- env ZKLOCK_TEST_INNER=1 PROVE_TESTS="$tests" \
		ZKLOCK_TEST_JOBS="$jobs" \
		PATH="$inst/bin:$PATH" PG_CONFIG="$inst/bin/pg_config" \
		PG_TEST_PORT_DIR="$work/ports" \
		ZKLOCK_OLD_INSTALL="$old_install" ZKLOCK_PREV_INSTALL="$prev_install" \
		ZKLOCK_LAST_INSTALL="$last_install" \
		ZKLOCK_OTHER_INSTALL="$other" \
		bash "$work/src-$name/test/run_tests.sh" || rc=$?
	return $rc
}

# count_leg NAME INSTALL RC: adds the counts of the leg that ended with
# exit status RC to passed/failed and its line to summary; after a failure,
# its logs (report_failures)
count_leg() {
	local name=$1 inst=$2 rc=$3 p f major
	major=$(major_of "$inst/bin/pg_config")
	read -r p f < "$work/src-$name/counts" || { p=0; f=1; }
	[ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
	passed=$((passed + p))
	failed=$((failed + f))
	summary+="PostgreSQL $major: $p passed, $f failed"$'\n'
	if [ "$rc" -ne 0 ]; then
		report_failures "$work/src-$name"
		# and, for the end of the output, which tests and checks failed
		failures+="PostgreSQL $major:"$'\n'
		# (never fails: under set -e and pipefail a grep that finds nothing,
		# a pg_regress-only failure, would end the runner before its summary;
		# so would grep killed by SIGPIPE once head has its 30 lines, when
		# many checks failed: hence the last "|| true")
		failures+=$( { grep -E '^(test/t/.* \(Wstat|# +Failed test|# +at test/t/)' \
			"$work/src-$name/prove.out.log" 2>/dev/null || echo "(no TAP failure: see the unit tests and pg_regress above)"; } | head -n 30 || true)$'\n'
	fi
	return 0
}

# run_leg NAME: the leg, its output streamed; adds its counts
run_leg() {
	local rc=0
	exec_leg "$1" "${inst_of[$1]}" "${tests_of[$1]}" "${other_of[$1]}" || rc=$?
	count_leg "$1" "${inst_of[$1]}" $rc
}

# run_together FIRST OTHER...: the legs side by side.  FIRST streams its
# output and is counted (run_leg); each other one writes its output to
# $work/leg-NAME.out and, once ended, its exit status to $work/leg-NAME.rc.
# Returns when all have ended; print_leg NAME then prints and counts each
# other one, in its turn.
run_together() {
	local first=$1 leg pid pids=()
	shift
	for leg in "$@"; do
		rm -f "$work/leg-$leg.out" "$work/leg-$leg.rc"
		(
			trap - EXIT
			r=0
			exec_leg "$leg" "${inst_of[$leg]}" "${tests_of[$leg]}" "${other_of[$leg]}" || r=$?
			echo "$r" > "$work/leg-$leg.rc"
		) > "$work/leg-$leg.out" 2>&1 &
		pids+=($!)
	done
	run_leg "$first"
	for pid in "${pids[@]}"; do
		wait "$pid" || true
	done
}
print_leg() {
	local rc
	cat "$work/leg-$1.out"
	# no status file: the subshell itself failed
	read -r rc 2>/dev/null < "$work/leg-$1.rc" || rc=1
	count_leg "$1" "${inst_of[$1]}" "$rc"
}

# root_tap_test NAME SCRIPT: a root-run test that prints TAP; adds its
# counts (a failure without a "not ok" line counts as one)
root_tap_test() {
	local name=$1 script=$2 rc=0 p f
	echo
	echo "======== $name ($(basename "$script"))"
	bash "$script" 2>&1 | tee "$work/root_tap.out" || rc=$?
	p=$(grep -cE '^ok ' "$work/root_tap.out" || true)
	f=$(grep -cE '^not ok ' "$work/root_tap.out" || true)
	[ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
	passed=$((passed + p))
	failed=$((failed + f))
	summary+="$name: $p passed, $f failed"$'\n'
}

# every TAP test, in the order of their numbers: those of test/t/'s folders
# and any left flat in test/t/ (none is skipped for where it stands)
tap_all() {
	(cd "$src" && for t in test/t/*.pl test/t/*/*.pl; do
		[ -f "$t" ] && printf '%s %s\n' "$(basename "$t")" "$t"
	done) | sort | cut -d' ' -f2 | tr '\n' ' '
}

# every TAP test but those named
tap_except() {
	local t skip out=
	for t in $(tap_all); do
		for skip in "$@"; do [ "$t" = "$skip" ] && continue 2; done
		out+="$t "
	done
	echo "$out"
}

# the tests of $1 without those whose file is named $2 (in whatever folder)
tests_without() {
	local t out=
	for t in $1; do [ "$(basename "$t")" = "$2" ] || out+="$t "; done
	echo "$out"
}

if [ "${ZKLOCK_TEST_INNER:-}" != 1 ]; then
	if [ "$(id -u)" -eq 0 ]; then
		bash "$src/scripts/install-deps.sh"
		# the ZooKeeper C client with TLS and SASL that the package links
		# in (scripts/build-zkclient.sh, cached: under a minute the first
		# time); ZKLOCK_ZK_CLIENT=system tests against Debian's plain one
		# instead (the tests of TLS and SASL then fail)
		zk_client=
		if [ "${ZKLOCK_ZK_CLIENT:-}" != system ]; then
			zk_client=$(bash "$src/scripts/build-zkclient.sh")
		fi
		work=$(mktemp -d /tmp/zklock-test.XXXXXX)
		chmod 755 "$work"
		# the port reservations of every leg (PostgreSQL::Test::Cluster's
		# get_free_port and free_port below), so that legs running side by
		# side never take the same port
		mkdir "$work/ports"
		chown postgres:postgres "$work/ports"
		# removed after a run that passed; kept (and named) after one that
		# failed, and after one interrupted (a leg may still run in it)
		trap '[ "${finished:-}" = 1 ] && [ "$failed" -eq 0 ] && rm -rf "$work"' EXIT
		passed=0
		failed=0
		summary=
		failures=
		notrun=

		# the majors, and the PostgreSQL of each: "system" is Debian's
		declare -A pgc_of=() inst_of=() tests_of=() other_of=() full_of=()
		legs=()
		if [ -n "${PG_CONFIG:-}" ] && [ "$("$PG_CONFIG" --bindir)" = "$(pg_config --bindir)" ]; then
			legs=(system)
			pgc_of[system]=$(command -v pg_config)
		elif [ -n "${PG_CONFIG:-}" ]; then
			legs=(chosen)
			pgc_of[chosen]=$PG_CONFIG
		else
			for v in ${ZKLOCK_TEST_VERSIONS:-15 17 18}; do
				if [ "$v" = "$(major_of "$(command -v pg_config)")" ]; then
					[ -n "${pgc_of[system]:-}" ] && continue	# named twice
					legs+=(system)
					pgc_of[system]=$(command -v pg_config)
				else
					[ -n "${pgc_of[$v]:-}" ] && continue
					legs+=("$v")
					pgc_of[$v]=$(bash "$src/scripts/build-postgres.sh" "$v")/bin/pg_config
				fi
			done
		fi
		# (a leg whose build fails is counted failed and not run: set -e
		# does not reach into $(...), and Debian's PostgreSQL would
		# otherwise run the suite against the zklock a former run installed)
		built=()
		for leg in "${legs[@]}"; do
			if inst_of[$leg]=$(prepare_leg "$leg" "${pgc_of[$leg]}"); then
				built+=("$leg")
			else
				failed=$((failed + 1))
				summary+="PostgreSQL $(major_of "${pgc_of[$leg]}"): the build FAILED (above), not run"$'\n'
				unset 'pgc_of[$leg]'
			fi
		done
		legs=(${built[@]+"${built[@]}"})

		# the rolling upgrade test runs the library of the last release
		# (ZKLOCK_OLD_REV) beside this one: built here, from git history
		# (the suite runs from a copy without it), on 15 only
		old_install=
		if [ -n "${pgc_of[system]:-}" ] && { [ -z "${PROVE_TESTS:-}" ] || [[ "${PROVE_TESTS}" == *034_rolling_upgrade* ]]; }; then
			if [ -d "$src/.git" ] || [ -f "$src/.git" ]; then
				old_install=$(bash "$src/test/build_old.sh" "$src" \
					"${ZKLOCK_OLD_REV:-2e55121b7913c2873fb71a21802178ec3a7aaa04}" "$work/old") || old_install=
			fi
		fi
		# and test/t/upgrade/067 the previous release's (ZKLOCK_PREV_REV: 1.3) beside
		# this one's recipes
		prev_install=
		if [ -n "${pgc_of[system]:-}" ] && { [ -z "${PROVE_TESTS:-}" ] || [[ "${PROVE_TESTS}" == *067_rolling_recipes* ]]; }; then
			if [ -d "$src/.git" ] || [ -f "$src/.git" ]; then
				prev_install=$(bash "$src/test/build_old.sh" "$src" \
					"${ZKLOCK_PREV_REV:-78d507c08aa0511f530a6ee2d595d57e50fa6ae8}" "$work/prev") || prev_install=
			fi
		fi
		# and test/t/upgrade/079 the last release's (ZKLOCK_LAST_REV: 1.4.0) beside
		# this one's protocol
		last_install=
		if [ -n "${pgc_of[system]:-}" ] && { [ -z "${PROVE_TESTS:-}" ] || [[ "${PROVE_TESTS}" == *079_rolling_1_5* ]]; }; then
			if [ -d "$src/.git" ] || [ -f "$src/.git" ]; then
				last_install=$(bash "$src/test/build_old.sh" "$src" \
					"${ZKLOCK_LAST_REV:-2b98233a14ba32b19b70bb061ac8465dbadb8515}" "$work/last") || last_install=
			fi
		fi

		for leg in "${legs[@]}"; do
			inst=${inst_of[$leg]}
			# the second major for 059: 18 (or the last other) for 15, 15
			# (or the first other) for the others
			other=
			for o in "${legs[@]}"; do
				[ "$o" != "$leg" ] && { other=${inst_of[$o]}; [ "$leg" = system ] || break; }
			done
			full=0
			{ [ "$leg" = system ] || [ "$leg" = chosen ] || [ "${ZKLOCK_TEST_ALL_VERSIONS:-}" = 1 ]; } && full=1
			if [ -n "${PROVE_TESTS:-}" ]; then
				tests=$PROVE_TESTS
				if [ "$leg" != system ] && [[ "$tests" == *034_rolling_upgrade* ]]; then
					tests=$(tests_without "$tests" 034_rolling_upgrade.pl)
					notrun+="NOT RUN on PostgreSQL $(major_of "$inst/bin/pg_config"): test/t/upgrade/034_rolling_upgrade.pl (zklock 1.1 builds on 15 only)"$'\n'
				fi
				if [ "$leg" != system ] && [[ "$tests" == *067_rolling_recipes* ]]; then
					tests=$(tests_without "$tests" 067_rolling_recipes.pl)
					notrun+="NOT RUN on PostgreSQL $(major_of "$inst/bin/pg_config"): test/t/upgrade/067_rolling_recipes.pl (the previous release is built on 15 only)"$'\n'
				fi
				if [ "$leg" != system ] && [[ "$tests" == *079_rolling_1_5* ]]; then
					tests=$(tests_without "$tests" 079_rolling_1_5.pl)
					notrun+="NOT RUN on PostgreSQL $(major_of "$inst/bin/pg_config"): test/t/upgrade/079_rolling_1_5.pl (the last release is built on 15 only)"$'\n'
				fi
			elif [ $full = 1 ]; then
				skip=()
				[ "$leg" = system ] || skip+=(test/t/upgrade/034_rolling_upgrade.pl test/t/upgrade/067_rolling_recipes.pl test/t/upgrade/079_rolling_1_5.pl)
				[ -n "$other" ] || skip+=(test/t/upgrade/059_cross_major.pl)
				tests=$(tap_except "${skip[@]}")
				[ ${#skip[@]} -gt 0 ] &&
					notrun+="NOT RUN on PostgreSQL $(major_of "$inst/bin/pg_config"): ${skip[*]} (034, 067, 079: the earlier releases are built on 15 only; 059: needs a second major)"$'\n'
			else
				tests=$MAJOR_TAP_TESTS
				[ -n "$other" ] || { tests=$(tests_without "$tests" 059_cross_major.pl);
					notrun+="NOT RUN on PostgreSQL $(major_of "$inst/bin/pg_config"): test/t/upgrade/059_cross_major.pl (needs a second major)"$'\n'; }
			fi
			tests_of[$leg]=$tests
			other_of[$leg]=$other
			full_of[$leg]=$full
		done

		# The legs run side by side (a TAP test mostly waits: the 15 leg
		# used 546 s of CPU in 2,437 s, 17's and 18's 110 s in 495 s each):
		# the first leg of the whole suite (15's, or PG_CONFIG's) beside
		# the others (17 and 18: MAJOR_TAP_TESTS or PROVE_TESTS).  Any
		# further whole-suite leg (ZKLOCK_TEST_ALL_VERSIONS=1) runs alone,
		# after; ZKLOCK_TEST_SEQUENTIAL=1 runs every leg alone.  Each
		# leg's output is printed whole, in the legs' order.
		together=()
		if [ "${ZKLOCK_TEST_SEQUENTIAL:-}" != 1 ]; then
			first_full=
			for leg in "${legs[@]}"; do
				if [ "${full_of[$leg]}" = 1 ]; then
					[ -n "$first_full" ] && continue
					first_full=$leg
				fi
				together+=("$leg")
			done
			[ ${#together[@]} -ge 2 ] || together=()
		fi
		for leg in "${legs[@]}"; do
			if [ ${#together[@]} -eq 0 ] || [[ " ${together[*]} " != *" $leg "* ]]; then
				run_leg "$leg"
			elif [ "$leg" = "${together[0]}" ]; then
				run_together "${together[@]}"
			else
				print_leg "$leg"
			fi
		done

		if [ -z "${PROVE_TESTS:-}" ] && [ -z "${PG_CONFIG:-}" ]; then
			# the performance smoke test: a cycle several times slower fails
			brc=0
			bash "$src/bench/smoke.sh" || brc=$?
			if [ $brc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
			summary+="benchmark smoke test: $([ $brc -eq 0 ] && echo passed || echo FAILED)"$'\n'
			# the Debian package, last: it replaces the zklock of Debian's
			# PostgreSQL, and removes it
			root_tap_test "Debian package" "$src/test/package_test.sh"
			# README's tour, as written (PostgreSQL 18, two instances)
			root_tap_test "README's tour" "$src/test/tour_test.sh"
		fi
		echo
		printf '%s' "$summary"
		printf '%s' "$notrun"
		if [ -n "$failures" ]; then
			echo "what failed:"
			printf '%s' "$failures"
		fi
		[ "$failed" -eq 0 ] || echo "the failed run's trees and logs are kept in $work"
		echo "zklock: $passed passed, $failed failed"
		finished=1
		[ "$failed" -eq 0 ]
		exit $?
	fi
fi

export PATH="$pgbin:$PATH"
cd "$src"

# The lock directory of port reservations: PostgreSQL::Test::Cluster's
# get_free_port (the TAP tests' servers, ZooKeeper's among them) reserves
# each port there, in PORT.rsv holding the pid of the process that owns it
# while that process lives.  The root run gives every leg the same one.
export PG_TEST_PORT_DIR=${PG_TEST_PORT_DIR:-$src/test/tmp_check/portlock}
mkdir -p "$PG_TEST_PORT_DIR"
reserved=

# free_port: a loopback port that nothing listens on and that no other
# process of the run has reserved, reserved for this script (its pid) the
# way get_free_port does (same range, below Linux's ephemeral ports; same
# file, lock and format); the reservation is removed at exit (cleanup)
free_port() {
	perl -MIO::Socket::INET -MFcntl=:DEFAULT,:flock,:seek -e '
		my ($dir, $owner) = @ARGV;
		for (1 .. 1000) {
			my $p = 10200 + int(rand(32767 - 10200 + 1));
			my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => $p,
				Listen => 1, ReuseAddr => 0) or next;
			close($s);
			sysopen(my $f, "$dir/$p.rsv", O_RDWR | O_CREAT) or die "$dir/$p.rsv: $!";
			flock($f, LOCK_EX) or die "$dir/$p.rsv: $!";
			my $pid = <$f> || "0";
			chomp $pid;
			if ($pid + 0 > 0 && kill(0, $pid + 0)) { close($f); next; }
			seek($f, 0, SEEK_SET) or die $!;
			print $f sprintf("%10d\n", $owner);
			close($f) or die $!;
			print $p;
			exit 0;
		}
		exit 1' "$PG_TEST_PORT_DIR" $$
}

zkdir=$(mktemp -d /tmp/zklock-zk.XXXXXX)
pgdata="$zkdir/pgdata"
cleanup() {
	local p
	[ -d "$pgdata" ] && pg_ctl -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true
	bash test/zk_server.sh stop "$zkdir/zk" >/dev/null 2>&1 || true
	rm -rf "$zkdir"
	for p in $reserved; do rm -f "$PG_TEST_PORT_DIR/$p.rsv"; done
}
trap cleanup EXIT

unit_passed=0
unit_failed=0
regress_passed=0
regress_failed=0
tap_passed=0
tap_failed=0

# --- unit tests (test/unit/, no servers) --------------------------------
# The grant rule and lock node names (src/common/grant_rule.c), and the node data
# codec (src/common/nodedata.c), table-driven; TAP, one plan per program.
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
reserved+=" $zkport"
hosts=$(bash test/zk_server.sh start "$zkdir/zk" --ports "$zkport")
pgport=$(free_port)
reserved+=" $pgport"
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
# TAP files at once (ZKLOCK_TEST_JOBS): exec_leg gives a whole suite 2,
# a chosen list or 17's and 18's subsets 1.  A TAP test mostly waits (15's
# whole suite used 651 s of CPU in 3,151 s) and each has its own servers,
# data folders and reserved ports, so two at once take about half the time.
tap_jobs=${ZKLOCK_TEST_JOBS:-1}
set +e
mkdir -p test/tmp_check
# (TESTDIR for 15's PostgreSQL::Test::Utils; TESTDATADIR and TESTLOGDIR for
# 17's and later, which would otherwise hand relative paths to the servers)
TESTDIR="$src/test" TESTDATADIR="$src/test/tmp_check" TESTLOGDIR="$src/test/tmp_check/log" PG_REGRESS="$(dirname "$(pg_config --pgxs)")/../test/regress/pg_regress" \
	prove --timer -j "$tap_jobs" -I "$(dirname "$(pg_config --pgxs)")/../test/perl" -I test \
	${PROVE_TESTS:-$(tap_all)} 2>&1 | tee prove.out.log
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
