#!/usr/bin/env bash
#
# run.sh -- zklock side by side with Apache Curator 5.4, Kazoo 2.8,
# ZooKeeper's own floor (C client) and PostgreSQL's advisory locks, in one
# run on one standalone ZooKeeper and then on a 3-server ensemble, with
# ZooKeeper's own counters per cycle (requests, write transactions, packets
# sent).
#
#   bash bench/run.sh [--quick] [--csv FILE] [--png FILE] [--keep] [--secs S]
#                      [--ensemble | --standalone]
#                      [--only s1,s32,excl8,shared8,handoff,sem,stats,tls,queue,idle,scale,many]
#
#   --quick     about 2 s per measurement, scale scenarios skipped, the
#               standalone server only (CI)
#   --ensemble  a 3-server ZooKeeper ensemble only; --standalone: the
#               standalone server only (default: both, one after the other;
#               the ensemble leaves out scale and many unless --only names them)
#   --csv FILE  also write every figure as CSV
#   --png FILE  also draw a chart (gnuplot, from Debian's gnuplot-nox)
#   --keep      keep the temporary work folder (servers' logs, pgbench logs)
#   --secs S    seconds per measurement (default 5, quick 2)
#   --only LIST run only these scenarios (tls: TLS against plain TCP, which
#               needs zklock built with make ZK_CLIENT=$(bash
#               scripts/build-zkclient.sh), else it is skipped and says why:
#               a SKIPPED row, and exit 1 when --only names tls)
#
#   bash bench/run.sh --baseline REV [--rounds N] [--quick] [--secs S] [--only LIST]
#
#   A/B: zklock built at git revision REV (old) and from the current tree
#   (new), each installed into its own copy of PostgreSQL in a temporary
#   folder; every zklock measurement of the scenarios runs on both, in N
#   alternating rounds (default 3).  Prints old, new and new/old per row.
#
# Installs what is missing from Debian's archive (libcurator-recipes-java,
# zookeeper, a JDK, python3-kazoo, libzookeeper-mt-dev, gnuplot-nox for
# --png), builds and installs zklock if it is not installed, then runs
# bench/bench.py with Debian's /usr/bin/python3.  Everything it starts
# (ZooKeeper, two PostgreSQL instances run as `postgres` when we are root,
# the clients) lives in a temporary folder and is stopped at the end.
# The table goes to stdout, progress to stderr.  Exit status: 0 when every
# measurement ran (a full run with a zklock without TLS: the tls row
# SKIPPED, saying why), 1 otherwise.
#
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"

png=0
baseline=""
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) sed -n '2,42p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	--png | --png=*) png=1 ;;
	--baseline) baseline=${2:?--baseline needs a git revision}; shift 2; continue ;;
	--baseline=*) baseline=${1#*=}; shift; continue ;;
	esac
	args+=("$1")
	shift
done

if [ -n "$baseline" ]; then
	bench_need "${BENCH_BASE_PKGS[@]}" postgresql-server-dev-all "git|git"
	bench_ab "$baseline" "${args[@]}"
	exit $?
fi

pkgs=("${BENCH_BASE_PKGS[@]}"
	"libcurator-recipes-java"
	"default-jdk-headless|javac"
	"python3-kazoo")
[ "$png" -eq 1 ] && pkgs+=("gnuplot-nox|gnuplot")
bench_need "${pkgs[@]}"
bench_zklock

exec /usr/bin/python3 -B "$BENCH_DIR/bench.py" "${args[@]}"
