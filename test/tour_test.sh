#!/usr/bin/env bash
#
# tour_test.sh -- runs README.md's five-minute tour as written: its shell
# blocks, in order, in one bash, as root, from the checkout (PostgreSQL 18
# from scripts/build-postgres.sh, zklock built for it, a throw-away
# ZooKeeper on 127.0.0.1:2181, two instances on ports 5441 and 5442, a lock
# across them), then checks what the tour says the user sees, and removes
# everything the tour made (/opt/pg18, /tmp/pg1, /tmp/pg2, /tmp/zk).
# test/run_tests.sh runs it last, as root.  Prints TAP.
#
set -uo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }

if [ "$(id -u)" -ne 0 ]; then
	echo "tour_test.sh: run as root (the tour is written for root)" >&2
	exit 2
fi

made=(/opt/pg18 /tmp/pg1 /tmp/pg2 /tmp/zk /tmp/pg1.log /tmp/pg2.log)
cleanup() {
	for i in 1 2; do
		[ -d /tmp/pg$i ] && runuser -u postgres -- /opt/pg18/bin/pg_ctl -D /tmp/pg$i -m immediate stop >/dev/null 2>&1
	done
	[ -d /tmp/zk ] && bash "$src/test/zk_server.sh" stop /tmp/zk >/dev/null 2>&1
	rm -rf "${made[@]}"
	# the checkout was built for 18 by the tour
	make -C "$src" -s clean PG_CONFIG="$(command -v pg_config)" >/dev/null 2>&1
	return 0
}

# what the tour makes must not be there already (never remove a user's)
busy=
for p in "${made[@]}"; do [ -e "$p" ] && busy+="$p "; done
for port in 2181 5441 5442; do
	perl -MIO::Socket::INET -e 'exit(IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $ARGV[0]) ? 0 : 1)' "$port" &&
		busy+="port $port "
done
if [ -n "$busy" ]; then
	not_ok "the tour's places are free (in use: $busy)"
	echo "1..$n"
	exit 1
fi
trap cleanup EXIT

# the tour's shell blocks, from "## A five-minute tour" to the next section
script=$(awk '/^## A five-minute tour/ { on = 1; next }
	on && /^## / { exit }
	on && /^```sh$/ { inblock = 1; next }
	on && inblock && /^```$/ { inblock = 0; next }
	on && inblock { print }' "$src/README.md")
blocks=$(grep -c '^```sh$' <(awk '/^## A five-minute tour/ { on = 1; next } on && /^## / { exit } on { print }' "$src/README.md"))
check "README's tour has its three shell blocks ($blocks)" [ "$blocks" -eq 3 ]

start=$(date +%s)
out=$(cd "$src" && timeout 1200 bash -e -c "$script" 2>&1)
rc=$?
secs=$(($(date +%s) - start))
echo "$out" | sed 's/^/# /'
check "the tour runs to its end without an error (rc $rc, $secs s)" [ $rc -eq 0 ]
check "zk_lock_status says connected, with the 10 s session timeout" \
	grep -qE '^ *connected *\| *10000$' <<<"$out"
check "pg2's try-lock says pg1 holds the lock" \
	grep -qE '^ *taken *$' -A2 <<<"$out"
check "pg2's try-lock answer is t" \
	bash -c "grep -A2 -E '^ *taken *\$' <<<\"\$1\" | grep -qE '^ *t\$'" _ "$out"
check "pg2's zk_locks lists pg1's lock (SHOW LOCKS from any instance)" \
	grep -qE '^ *etl/nightly_load *\| *exclusive *\| *t *\| *pg1 *\|' <<<"$out"
check "pg2's zk_lock_acquire is granted once pg1's hold ends, with a token" \
	bash -c "grep -A2 -E '^ *zk_lock_acquire *\$' <<<\"\$1\" | grep -qE '^ *[0-9]+\$'" _ "$out"
q="SELECT current_setting('server_version_num')::int / 10000 || ' ' || (e.extversion = a.default_version)
   FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'zklock'"
for port in 5441 5442; do
	v=$(runuser -u postgres -- /opt/pg18/bin/psql -X -At -p $port -d postgres -c "$q" 2>&1)
	check "the instance on port $port runs PostgreSQL 18 with zklock's current version ($v)" [ "$v" = "18 true" ]
done

echo "1..$n"
[ $failed -eq 0 ]
