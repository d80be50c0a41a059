
# Without zklock in shared_preload_libraries, CREATE EXTENSION works but
# every zklock function fails at once with 55000 "zklock is not loaded" and a
# hint -- the views too, and nothing crashes the server.  The one exception
# is zk_lock_fence, a check against a table of this database that needs no
# ZooKeeper: a database that only receives fenced writes may fence them
# without loading zklock (doc/sql.md, zk_lock_fence).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('plain');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION zklock');

for my $sql (
	q{SELECT zk_lock_acquire('a/b')},
	q{SELECT zk_lock_try_acquire('a/b', 'shared')},
	q{SELECT zk_lock_acquire_session('a/b', timeout => '1 s')},
	q{SELECT zk_lock_acquire_all(ARRAY['a', 'b'])},
	q{SELECT zk_lock_release('a/b')},
	q{SELECT zk_lock_release_all()},
	q{SELECT zk_lock_acquire_explicit('a/b', ttl => '1 hour')},
	q{SELECT * FROM zk_locks},
	q{SELECT * FROM zk_lock_status},
	q{SELECT zk_lock_status_watches()},
	q{SELECT * FROM zk_lock_local},
	q{SELECT zk_lock_outer_role()},
	q{SELECT zk_lock_release_explicit('a/b')},
	q{SELECT zk_lock_force_release('a/b')},
	q{SELECT zk_lock_revoke('a/b')},
	# the queue's (1.9): functions/queue.c sets the backend side up before
	# backend/queue.c, which does not (it is below backend.c)
	q{SELECT zk_queue_put_now('q', 'x'::text)},
	q{SELECT zk_queue_put('q', '\\x01'::bytea, 5)},
	q{SELECT * FROM zk_queue_try_take('q')},
	q{SELECT * FROM zk_queue_take('q', '1 s')},
	q{SELECT * FROM zk_queue_peek('q')},
	q{SELECT zk_queue_length('q')},
	q{SELECT zk_queue_purge('q')})
{
	my ($ret, $out, $err) = $node->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	is($ret, 3, "$sql: fails");
	like($err, qr/ERROR:  55000: zklock is not loaded/, "$sql: 55000, not loaded");
	like($err, qr/HINT:  Add zklock to shared_preload_libraries/, "$sql: with the hint");
}

# the fence works without the library, and refuses an older token
is($node->safe_psql('postgres', q{SELECT zk_lock_fence('a/b', 20)}), '20',
	'zk_lock_fence records a token without the library');
my ($ret, $out, $err) = $node->psql('postgres', q{SELECT zk_lock_fence('a/b', 10)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  55P03: stale fencing token 10/,
	'zk_lock_fence refuses an older token without the library');

is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is still up');
unlike(slurp_file($node->logfile), qr/terminated by signal/, 'no backend crashed');

$node->stop;
done_testing();
