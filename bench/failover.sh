#!/usr/bin/env bash
#
# failover.sh -- leader failover of instance leadership (zklock.elections),
# measured: two instances stand in one election group on one standalone
# ZooKeeper (tickTime 200 ms); each round ends the leader and times how long
# until the other instance's zk_is_leader is true, then brings the first
# back as a candidate.  Not part of the test run.
#
#   bash bench/failover.sh [--rounds N] [--mode kill|stop] [--session-timeout MS]
#
#   --mode kill   SIGKILL to the leader's postmaster (default); its worker
#                 leaves with it and closes its session
#   --mode stop   SIGSTOP to the leader's zklock worker until the other
#                 leads (the session expires on ZooKeeper), then SIGCONT
#
# Prints each failover, the median and the worst next to the bound (the
# session timeout + ZooKeeper's tick + 1 s; the worst against twice that),
# and "bench: 1 passed, 0 failed" when both hold (exit 0), else exit 1.
#
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

for arg in "$@"; do
	case "$arg" in
	-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	esac
done

if ! bench_need "${BENCH_BASE_PKGS[@]}" || ! bench_zklock; then
	echo "bench: 0 passed, 1 failed"
	exit 1
fi
exec /usr/bin/python3 -B "$BENCH_DIR/failover.py" "$@"
