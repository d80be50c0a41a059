#!/usr/bin/env bash
#
# smoke.sh -- a seconds-long performance check for CI: zklock's 1-client,
# uncontended, session-scope lock cycle (pgbench) against ZooKeeper's floor
# (the C client's synchronous create+delete of an EPHEMERAL_SEQUENTIAL
# node), measured in the same run on the same standalone ZooKeeper, in
# three alternating 1-second rounds (each side keeps its best round, so a
# burst of load from elsewhere on the machine does not fail the check).
#
#   bash bench/smoke.sh [--min-ratio R]
#
# Fails (exit 1) when zklock/floor < R (default 0.25): a regression that
# makes a lock cycle several times slower than ZooKeeper's own cost.
# Prints both figures, the ratio and a closing line
# "bench: 1 passed, 0 failed" (or "bench: 0 passed, 1 failed").
#
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

for arg in "$@"; do
	case "$arg" in
	-h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	esac
done

if ! bench_need "${BENCH_BASE_PKGS[@]}" || ! bench_zklock; then
	echo "bench: 0 passed, 1 failed"
	exit 1
fi
exec /usr/bin/python3 -B "$BENCH_DIR/bench.py" --smoke "$@"
