#!/usr/bin/env bash
#
# installcheck_precheck.sh BINDIR -- run by `make installcheck` before the
# SQL suite: is the server at PGHOST/PGPORT (as psql finds it) one the suite
# can run against?  zklock loaded with the settings of test/installcheck.conf,
# its worker connected to ZooKeeper, dblink available.  Says what is missing
# and exits 1 otherwise, within about 15 s.
#
set -u

bindir=${1:-}
conf=$(cd "$(dirname "$0")" && pwd)/installcheck.conf
where="the server at PGHOST=${PGHOST:-(default)} PGPORT=${PGPORT:-(default)}"
psql=("${bindir:+$bindir/}psql" -X -A -t -q -v ON_ERROR_STOP=1 -d "${PGDATABASE:-postgres}")
export PGCONNECT_TIMEOUT=${PGCONNECT_TIMEOUT:-5}

fail() {
	echo "make installcheck: $*" >&2
	echo "make installcheck: the suite needs a running server with the settings of test/installcheck.conf, a reachable ZooKeeper in zklock.hosts, and dblink (postgresql-contrib); test/run_tests.sh starts one" >&2
	exit 1
}

out=$("${psql[@]}" -c 'SELECT 1' 2>&1) || fail "cannot connect to $where: $out"

spl=$("${psql[@]}" -c 'SHOW shared_preload_libraries' 2>&1)
case ",${spl// /}," in
*,zklock,*) ;;
*) fail "zklock is not loaded in $where: shared_preload_libraries = '$spl' does not name zklock" ;;
esac

bad=""
while IFS= read -r line; do
	case "$line" in '#'* | '') continue ;; esac
	name=$(sed -E 's/^[[:space:]]*([A-Za-z0-9_.]+)[[:space:]]*=.*/\1/' <<<"$line")
	want=$(sed -E "s/^[^=]*=[[:space:]]*'?([^']*)'?[[:space:]]*\$/\1/" <<<"$line")
	[ "$name" = shared_preload_libraries ] && continue
	have=$("${psql[@]}" -c "SELECT current_setting('$name', true)" 2>&1)
	if [ "$name" = max_prepared_transactions ]; then
		[ "${have:-0}" -ge "$want" ] 2>/dev/null || bad="$bad $name=$have (want >= $want)"
	elif [ "$have" != "$want" ]; then
		bad="$bad $name=${have:-(unset)} (want $want)"
	fi
done <"$conf"
[ -z "$bad" ] || fail "$where does not have the suite's settings:$bad"

avail=$("${psql[@]}" -c "SELECT count(*) FROM pg_available_extensions WHERE name IN ('zklock', 'dblink')" 2>&1)
[ "$avail" = 2 ] || fail "$where lacks the zklock or dblink extension files (make install; postgresql-contrib)"

# the worker's view of ZooKeeper, through the extension created in a
# transaction that is rolled back (nothing is left in the database)
state=$("${psql[@]}" 2>&1 <<'SQL'
BEGIN;
CREATE EXTENSION IF NOT EXISTS zklock;
DO $$
BEGIN
  FOR i IN 1..100 LOOP
    EXIT WHEN (SELECT state FROM zk_lock_status) = 'connected';
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT state || ' (zklock.hosts = ''' || coalesce(hosts, '') || ''''
       || coalesce(', last error: ' || nullif(last_error, ''), '') || ')'
FROM zk_lock_status;
ROLLBACK;
SQL
)
case "$state" in
connected*) ;;
*) fail "the zklock worker of $where is not connected to ZooKeeper after 10 s: ${state:-no answer}" ;;
esac

# the suite's second sessions: dblink back to the server (as sql/setup.sql's
# self_dsn() builds the connection string), as this user and as another role
out=$("${psql[@]}" 2>&1 <<'SQL'
BEGIN;
CREATE EXTENSION IF NOT EXISTS dblink;
SELECT dblink_connect('zklock_precheck',
  'dbname=' || current_database() || ' port=' || current_setting('port')
  || ' host=' || coalesce(nullif(trim(split_part(current_setting('unix_socket_directories'), ',', 1)), ''),
                          'localhost'));
SELECT dblink_disconnect('zklock_precheck');
ROLLBACK;
SQL
) || fail "$where cannot be reached from its own backends through dblink (the suite's second sessions; local connections must be trusted): $out"
exit 0
