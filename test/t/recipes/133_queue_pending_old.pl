# The recovery walk of transactional puts (worker/recipes/queue_pending.c)
# meets a pending node whose transaction is older than the commit log
# keeps (pg_xact truncated by VACUUM FREEZE): it must leave it with a LOG
# line, not ask the commit log, whose "could not access status of
# transaction" ERROR would end the worker at every connection (and every
# lock of the instance with it).  Found in review: the walk only refused
# xids more than 2^30 old, while the commit log is truncated far sooner
# (at the oldest datfrozenxid).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

zk_start();
my $node1 = zk_node('node1');

my $root = zk_root();
my $q = "$root/zklock.queues/old";
$node1->safe_psql('postgres', q{SELECT zk_queue_put_now('old', 'x'::text)});
my $sysid = $node1->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');

# Move the xid counter far ahead (its commit log segment made by hand, as
# pg_resetwal's manual says), then freeze every database: VACUUM truncates
# pg_xact below the new horizon.
my $next = 100_000_000;
$node1->stop;
my $bindir = $node1->config_data('--bindir');
PostgreSQL::Test::Utils::system_or_bail("$bindir/pg_resetwal", '-x', $next,
	'-D', $node1->data_dir);
{
	my $seg = sprintf('%s/pg_xact/%04X', $node1->data_dir,
		int($next / (32 * 8192 * 4)));
	open my $fh, '>', $seg or die "$seg: $!";
	binmode $fh;
	print $fh "\0" x (32 * 8192);
	close $fh;
}
$node1->start;
ok(zk_wait_connected($node1), 'node1 connected again');
$node1->safe_psql('postgres',
	'ALTER DATABASE template0 WITH ALLOW_CONNECTIONS true');
for my $db (qw(template0 template1 postgres))
{
	$node1->safe_psql($db, 'VACUUM FREEZE');
}
$node1->safe_psql('postgres',
	'ALTER DATABASE template0 WITH ALLOW_CONNECTIONS false');
my $old = 5_000_000;
is($node1->safe_psql('postgres', "SELECT pg_xact_status('$old'::xid8) IS NULL"),
	't', "xid $old is older than the commit log keeps");

# A pending node of this instance with that xid (as a put left it)
my $pending = "$q/pending/$sysid-$old-0-100";
my ($rc, undef, $err) = ZkLockTest::zkutil('create-acl', $pending, 'rwcda', 'x:y');
is($rc, 0, 'a pending node of an old transaction') or diag($err);

# A new connection walks the pending nodes
my $from = -s $node1->logfile;
$node1->restart;
ok(zk_wait_connected($node1), 'node1 connected after the restart');
ok(zk_wait_log($node1, qr/leaving the queue item ".*\Q$sysid-$old-0-100\E": its transaction is older than the commit log/,
		$from, 60),
	'the walk leaves it, with a LOG line');
is(zk_log_count($node1, qr/could not access status of transaction/, $from), 0,
	'the commit log was not asked (no ERROR)');
is(zk_log_count($node1, qr/background worker "zklock.*" .*exited with exit code/, $from), 0,
	'the worker did not exit');
is($node1->safe_psql('postgres', q{SELECT zk_queue_length('old')}), '1',
	'the worker serves requests');
ok((grep { $_ eq $pending } zk_list_znodes("$root/zklock.queues")),
	'the pending node is left for an administrator');
# the worker is still the same process a while later (no restart loop)
my $pid = $node1->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type LIKE 'zklock%'});
sleep 2;
is($node1->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type LIKE 'zklock%'}),
	$pid, 'and it stays up');

ZkLockTest::zkutil('delete-r', $pending);
zk_done_check();
done_testing();
