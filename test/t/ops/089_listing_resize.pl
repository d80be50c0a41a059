
# Listings past their first DSM segment.  A backend reads zk_locks' rows,
# and the explicit-lock quota's count, from a 64 kB DSM segment the worker
# fills (request.c list_nodes); when the rows need more, the worker says how
# much and the backend asks again with a bigger one
# (zklock_channel_take_rows).  300 session locks whose rows come to well
# past two segments must all be listed, whole and under a subtree; 150
# explicit locks past one segment must all be counted by the quota, which
# then refuses the next one with 53400 and the exact count.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

my $N = 300;    # session locks
my $E = 150;    # explicit locks
my $pad = 'x' x 700;    # in each node's query= field: ~1 kB a row

zk_start();
my $node = zk_node('node1', extra_conf => "zklock.max_locks_per_backend = 400");
$node->safe_psql('postgres', q{CREATE ROLE quota_user LOGIN;
	ALTER ROLE quota_user SET zklock.max_explicit_locks_per_role = 1000});

# session locks whose rows, together, are well past 64 kB
my $h = zk_session($node, 'holder');
$h->query_ok(qq{SELECT count(zk_lock_acquire_session('big/' || i, parents => false)) /* $pad */
	FROM generate_series(1, $N) i});
my $bytes = psql1($node, q{SELECT sum(octet_length(t::text)) FROM zk_locks t WHERE resource LIKE 'big/%'});
cmp_ok($bytes, '>', 2 * 65536, "zk_locks rows of $N locks are $bytes bytes: past two 64 kB segments");
is(psql1($node, q{SELECT count(*) FROM zk_locks WHERE resource LIKE 'big/%'}), $N,
	'zk_locks lists every one of them');
is(psql1($node, q{SELECT count(*) FROM zk_locks('big') }), $N, 'zk_locks(subtree) too');

# explicit locks: each acquire's quota count lists them all
my $q = zk_session($node, 'quota', user => 'quota_user');
for my $i (1 .. $E)
{
	$q->query_ok("SELECT zk_lock_acquire_explicit('ex/$i', ttl => '1 hour') /* $pad */");
}
is(psql1($node, q{SELECT count(*) FROM zk_locks WHERE resource LIKE 'ex/%'}), $E,
	"$E explicit locks held");
$bytes = psql1($node, q{SELECT sum(octet_length(t::text)) FROM zk_locks t WHERE resource LIKE 'ex/%'});
cmp_ok($bytes, '>', 65536, "their zk_locks rows are $bytes bytes: past the first 64 kB segment");
$node->safe_psql('postgres', "ALTER ROLE quota_user SET zklock.max_explicit_locks_per_role = $E");
my $q2 = zk_session($node, 'quota2', user => 'quota_user');
my $r = $q2->query(q{SELECT zk_lock_acquire_explicit('ex/over', ttl => '1 hour')});
is($r->{sqlstate}, '53400', 'the quota counts all of them through a listing past 64 kB');
like($r->{err}, qr/holds or waits for $E explicit locks/, '... exactly') or diag($r->{err});

is(psql1($node, qq{SELECT sum(zk_lock_release_explicit('ex/' || i)) FROM generate_series(1, $E) i}),
	$E, 'released');
$h->query_ok('SELECT zk_lock_release_all()');
$h->quit;
$q->quit;
$q2->quit;
done_testing();
