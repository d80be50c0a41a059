#!/usr/bin/env bash
#
# demo.sh -- from a fresh Debian 12 machine, as root: install what is
# missing, build and install zklock, start a local ZooKeeper and two
# PostgreSQL instances with zklock, and show the ETL guard across them.
#
#   bash scripts/demo.sh           # run the demo, then stop everything
#   bash scripts/demo.sh --keep    # leave the servers running (prints how
#                                  # to connect and how to stop them)
#
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
keep=0
[ "${1:-}" = "--keep" ] && keep=1

if [ "$(id -u)" -ne 0 ]; then
	echo "demo.sh: run as root: it installs packages and the extension" >&2
	exit 1
fi

bash "$src/scripts/install-deps.sh"
make -C "$src" -s
make -C "$src" -s install
pgbin=$(pg_config --bindir)

dir=$(mktemp -d /tmp/zklock-demo.XXXXXX)
chown postgres:postgres "$dir"
as_pg() { runuser -u postgres -- "$@"; }

stop_all() {
	for n in 1 2; do
		[ -d "$dir/pg$n" ] && as_pg "$pgbin/pg_ctl" -D "$dir/pg$n" -m fast stop >/dev/null 2>&1 || true
	done
	bash "$src/test/zk_server.sh" stop "$dir/zk" >/dev/null 2>&1 || true
}
if [ $keep -eq 0 ]; then
	trap 'stop_all; rm -rf "$dir"' EXIT
fi

echo "== starting ZooKeeper on loopback"
hosts=$(bash "$src/test/zk_server.sh" start "$dir/zk" --base-port 21810)
echo "   $hosts"

for n in 1 2; do
	port=$((5440 + n))
	echo "== starting PostgreSQL instance pg$n on port $port"
	as_pg "$pgbin/initdb" -D "$dir/pg$n" -A trust >/dev/null
	cat >> "$dir/pg$n/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
shared_preload_libraries = 'zklock'
zklock.hosts = '$hosts'
zklock.node_name = 'pg$n'
CONF
	as_pg "$pgbin/pg_ctl" -D "$dir/pg$n" -l "$dir/pg$n.log" -w start >/dev/null
	as_pg "$pgbin/psql" -X -q -h "$dir" -p $port -d postgres -c "CREATE EXTENSION zklock"
done

psql1() { as_pg "$pgbin/psql" -X -h "$dir" -p 5441 -d postgres "$@"; }
psql2() { as_pg "$pgbin/psql" -X -h "$dir" -p 5442 -d postgres "$@"; }

for i in $(seq 1 50); do
	[ "$(psql1 -Atc "SELECT state FROM zk_lock_status")" = connected ] &&
		[ "$(psql2 -Atc "SELECT state FROM zk_lock_status")" = connected ] && break
	sleep 0.2
done
psql1 -c "SELECT worker_pid, state, session_id, hosts, session_timeout FROM zk_lock_status"

echo
echo "== 1. cron on every node at 02:00: exactly one runs the nightly load"
psql1 -Atc "SELECT 'pg1 runs it: ' || (zk_lock_try_acquire_session('etl/nightly_load') IS NOT NULL), pg_sleep(1)" > "$dir/cron1" &
psql2 -Atc "SELECT 'pg2 runs it: ' || (zk_lock_try_acquire_session('etl/nightly_load') IS NOT NULL), pg_sleep(1)" > "$dir/cron2" &
wait
cut -d'|' -f1 "$dir/cron1" "$dir/cron2"

echo
echo "== 2. the ETL guard: pg1 loads inside a transaction; pg2 waits its turn"
psql1 -q <<'SQL' &
BEGIN;
SELECT zk_lock_acquire('etl/nightly_load') AS token \gset
SELECT 'pg1: got etl/nightly_load at ' || to_char(clock_timestamp(), 'HH24:MI:SS.MS')
       || ', fencing token ' || :token AS step;
SELECT pg_sleep(3);   -- the guarded work
SELECT 'pg1: commit at ' || to_char(clock_timestamp(), 'HH24:MI:SS.MS') AS step;
COMMIT;
SQL
sleep 1
psql2 -q <<'SQL' &
BEGIN;
SELECT 'pg2: asks at ' || to_char(clock_timestamp(), 'HH24:MI:SS.MS') AS step;
SELECT zk_lock_acquire('etl/nightly_load') AS token \gset
SELECT 'pg2: got etl/nightly_load at ' || to_char(clock_timestamp(), 'HH24:MI:SS.MS')
       || ', fencing token ' || :token AS step;
COMMIT;
SQL
sleep 1
echo "-- zk_locks on pg1 while pg2 waits (the view shows every instance's nodes):"
psql1 -c "SELECT resource, mode, granted, instance, pid, scope, token FROM zk_locks"
wait

echo
echo "== 3. a waiter that gives up: timeout => 55P03, and no znode left behind"
psql1 -q -c "SELECT zk_lock_acquire_session('etl/nightly_load')" -c "SELECT pg_sleep(2)" >/dev/null &
sleep 0.5
psql2 -c "SELECT zk_lock_acquire('etl/nightly_load', timeout => '500 ms')" 2>&1 | sed 's/^/   /' || true
wait
psql2 -c "SELECT count(*) AS lock_nodes_left FROM zk_locks"

if [ $keep -eq 1 ]; then
	echo
	echo "Servers left running in $dir:"
	echo "  runuser -u postgres -- psql -h $dir -p 5441 -d postgres   # pg1"
	echo "  runuser -u postgres -- psql -h $dir -p 5442 -d postgres   # pg2"
	echo "Stop them with:"
	echo "  for n in 1 2; do runuser -u postgres -- $pgbin/pg_ctl -D $dir/pg\$n stop; done; bash $src/test/zk_server.sh stop $dir/zk"
fi
echo
echo "demo done"
