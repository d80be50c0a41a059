#!/usr/bin/env bash
#
# smoke.sh -- a seconds-long performance check for CI, two checks on its own
# standalone ZooKeeper with one instance:
#
# 1. zklock's 1-client, uncontended, session-scope lock cycle (pgbench)
#    against ZooKeeper's floor (the C client's synchronous create+delete of
#    an EPHEMERAL_SEQUENTIAL node), in three alternating 1-second rounds
#    (each side keeps its best round, so a burst of load from elsewhere on
#    the machine does not fail the check);
# 2. what a flat uncontended cycle costs ZooKeeper: 1,000 session-scope
#    cycles (zk_lock_acquire_session(r, parents => false); zk_lock_release(r)),
#    ZooKeeper's counters (srvr) before and after, the idle rate subtracted:
#    requests, write transactions and packets sent per cycle.
#
#   bash bench/smoke.sh [--min-ratio R]
#
# Fails (exit 1) when zklock/floor < R (default 0.25): a regression that
# makes a lock cycle several times slower than ZooKeeper's own cost; or
# when the cycle costs more than ZKLOCK_SMOKE_MAX_REQUESTS requests
# (environment, default 3; 0.05 of slack for the idle rate's estimate).
# Prints the figures and a closing line "bench: 2 passed, 0 failed".
#
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

for arg in "$@"; do
	case "$arg" in
	-h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	esac
done

if ! bench_need "${BENCH_BASE_PKGS[@]}" || ! bench_zklock; then
	echo "bench: 0 passed, 2 failed"
	exit 1
fi
exec /usr/bin/python3 -B "$BENCH_DIR/bench.py" --smoke "$@"
