#!/usr/bin/env bash
#
# valgrind_worker.sh -- run one PostgreSQL instance with zklock under
# valgrind's memcheck (every process of the instance, the zklock worker and
# libzookeeper_mt's threads among them), drive every kind of request through
# it, stop it, and report the memcheck errors whose stack passes through
# zklock.so.  Not part of the test command (it takes a few minutes); run it
# after touching memory or threads:
#
#   bash test/valgrind_worker.sh          # as root, after make install
#
# Exit status 0 when memcheck found no error in zklock's code.  PostgreSQL
# itself is not built for valgrind here (no USE_VALGRIND), so errors that
# do not pass through zklock.so are counted but not judged.
#
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
pgbin=$(${PG_CONFIG:-pg_config} --bindir)
command -v valgrind >/dev/null || { echo "valgrind_worker: valgrind is not installed" >&2; exit 1; }

as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

work=$(mktemp -d /tmp/zklock-vg.XXXXXX)
chmod 755 "$work"
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$work"
cleanup() {
	as_owner "$pgbin/pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
	bash "$src/test/zk_server.sh" stop "$work/zk" >/dev/null 2>&1 || true
	[ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

port=$(( 30000 + RANDOM % 20000 ))
hosts=$(bash "$src/test/zk_server.sh" start "$work/zk" --base-port $((port + 1)) --owner-pid $$)
as_owner "$pgbin/initdb" -D "$work/data" -A trust -U postgres --no-sync >/dev/null
# digest credentials from a file, as a production setup has them
(umask 077; echo "digest:vg:vg-$RANDOM$RANDOM" > "$work/zk_credentials")
[ "$(id -u)" -eq 0 ] && chown postgres:postgres "$work/zk_credentials"
cat >> "$work/data/postgresql.conf" <<CONF
zklock.auth_file = '$work/zk_credentials'
listen_addresses = ''
unix_socket_directories = '$work'
port = $port
shared_preload_libraries = 'zklock'
zklock.hosts = '$hosts'
zklock.node_name = 'vg'
zklock.sweep_interval = '500ms'
zklock.session_timeout = '10s'
zklock.connect_timeout = '20s'
max_connections = 20
CONF

echo "valgrind_worker: starting PostgreSQL under valgrind (slow)" >&2
as_owner env PGDATA="$work/data" valgrind --quiet --trace-children=yes \
	--error-limit=no --num-callers=30 --log-file="$work/vg.%p.log" \
	"$pgbin/postgres" -D "$work/data" > "$work/pg.log" 2>&1 &

psql_() { as_owner "$pgbin/psql" -X -q -A -t -h "$work" -p "$port" -U postgres -d postgres "$@"; }
for _ in $(seq 1 240); do
	psql_ -c 'SELECT 1' >/dev/null 2>&1 && break
	sleep 1
done
psql_ -c 'CREATE EXTENSION zklock' >/dev/null
for _ in $(seq 1 120); do
	[ "$(psql_ -c 'SELECT state FROM zk_lock_status' 2>/dev/null)" = connected ] && break
	sleep 1
done

echo "valgrind_worker: workload" >&2
psql_ -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
SELECT zk_lock_acquire_session('vg/a');
SELECT zk_lock_acquire_session('vg/a');
SELECT zk_lock_release('vg/a');
SELECT zk_lock_release('vg/a');
BEGIN;
SELECT zk_lock_acquire('vg/db/t/p1');
SELECT zk_lock_acquire('vg/db/t/p2', 'shared');
SELECT zk_lock_acquire_all(ARRAY['vg/s/a', 'vg/s/b/c', 'vg/s/a'], ARRAY['exclusive', 'shared', 'shared']);
SAVEPOINT s;
SELECT zk_lock_acquire('vg/sp');
ROLLBACK TO SAVEPOINT s;
SELECT count(*) FROM zk_locks;
SELECT * FROM zk_lock_status;
SELECT * FROM zk_lock_local;
COMMIT;
SELECT zk_lock_try_acquire('vg/t') IS NOT NULL;
SELECT zk_lock_acquire_explicit('vg/x', 'exclusive', ttl => '1 s');
SELECT pg_sleep(3);
SELECT count(*) FROM zk_locks WHERE resource = 'vg/x';
DO $$
BEGIN
  FOR i IN 1..200 LOOP
    PERFORM zk_lock_acquire_session('vg/loop' || (i % 7));
    PERFORM zk_lock_release('vg/loop' || (i % 7));
  END LOOP;
END $$;
SQL
# a waiter, its timeout, and a held lock taken over by another backend
psql_ -c "SELECT zk_lock_acquire_session('vg/w'); SELECT pg_sleep(2);" >/dev/null &
holder=$!
sleep 1
psql_ -c "SELECT zk_lock_acquire('vg/w', timeout => '300 ms')" >/dev/null 2>&1 || true
psql_ -c "SELECT zk_lock_acquire('vg/w', timeout => '20 s')" >/dev/null
wait "$holder"

# contended cycles on one resource: watches set, fired, and removed (a
# waiter whose node ahead went before its watch was set, one that gave up)
cyclers=()
for _ in 1 2 3; do
	psql_ -c "DO \$\$ BEGIN FOR i IN 1..50 LOOP PERFORM zk_lock_acquire_session('vg/c', parents => false); PERFORM zk_lock_release('vg/c'); END LOOP; END \$\$" >/dev/null &
	cyclers+=($!)
done
psql_ -c "SELECT zk_lock_acquire('vg/c', parents => false, timeout => '10 ms')" >/dev/null 2>&1 || true
wait "${cyclers[@]}"

# listings at once, some withdrawn by a statement timeout mid-walk
psql_ -c "SELECT count(zk_lock_acquire_session('vg/l/' || i, parents => false)) FROM generate_series(1, 20) i; SELECT pg_sleep(25);" >/dev/null &
holder=$!
sleep 5
listers=()
for _ in 1 2 3; do
	psql_ -c "$(printf "SELECT count(*) FROM zk_locks; %.0s" 1 2 3 4 5)" >/dev/null &
	listers+=($!)
done
for ms in 5 20 50 100 200 400 800 1600 3200 6400; do
	psql_ -c "SET statement_timeout = '${ms}ms'; SELECT count(*) FROM zk_locks" >/dev/null 2>&1 || true
done
wait "${listers[@]}"
wait "$holder"

echo "valgrind_worker: stopping" >&2
as_owner "$pgbin/pg_ctl" -D "$work/data" -m fast -t 180 -w stop >/dev/null

total=0
ours=0
# every source file of zklock, as an alternation: protocol|channel|...
srcfiles=$(cd "$src/src" && ls -- *.c | sed 's/\.c$//' | paste -sd '|')
for f in "$work"/vg.*.log; do
	n=$(grep -c '^==[0-9]*== [A-Z]' "$f" || true)
	total=$((total + n))
	# one error = the block from its first line to the next blank line; it
	# is zklock's when a frame is in zklock.so: "(in .../zklock.so)" without
	# debug information, zklock's source files and functions with it
	z=$(awk -v files="$srcfiles" '/^==[0-9]+== [A-Z]/ { e = 1; hit = 0 } e && (/zklock\.so/ || /[( ]zklock_[a-z_]+ \(/ || $0 ~ ("\\((" files ")\\.c:[0-9]+\\)")) { hit = 1 }
		e && /^==[0-9]+== $/ { if (hit) c++; e = 0 } END { print c + 0 }' "$f")
	if [ "$z" -gt 0 ]; then
		echo "---- $f"
		cat "$f"
	fi
	ours=$((ours + z))
done
echo "valgrind_worker: $(ls "$work"/vg.*.log | wc -l) processes checked; memcheck errors through zklock.so: $ours (all errors: $total)"
[ "$ours" -eq 0 ]
