
# Review of issue 20 finding 4 (i20-watch): a request that stops waiting
# must not leave its watch behind.  zkc_watch_upkeep() removes a cancelled
# watch only once no live watch of the session shares its path (ZooKeeper
# keeps one watch per path and session); until then the cancelled context
# stays on watch_list (and its watcher object in the client's table).  A
# backend that polls a lock held by another backend of the SAME instance
# (zk_lock_acquire with a short timeout, in a loop) waits behind the
# holder's node, on which the holder's guard is a live watch: every attempt
# that times out leaves one more context, for as long as the lock is held.
# And each upkeep walks the whole list for each of them
# (watch_path_unwanted() per cancelled context, the live guard being the
# oldest entry, at the tail): the worker's cost per withdrawal grows with
# the square of the attempts so far, with event_mutex held (the completion
# thread waits meanwhile).
#
# Shown by the worker's count of watch contexts (zk_lock_status.watches in
# 1.3; else its watch_armed, read with gdb): 6,000 attempts here (4,434
# waits) left 2,136 contexts while the server holds 1 watch.  (The time per
# batch is noted; at this size the upkeep's cost still hides behind the 5 ms
# timeouts.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

my $BATCHES = $ENV{ZKLOCK_PILE_BATCHES} // 4;
my $BATCH   = $ENV{ZKLOCK_PILE_BATCH}   // 1500;

zk_start();
my $node = zk_node('node1');

$node->safe_psql('postgres', <<'EOS');
CREATE FUNCTION poll(n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	FOR i IN 1 .. n LOOP
		BEGIN
			PERFORM zk_lock_acquire('pile', parents => false,
									timeout => '5 ms');
			RAISE EXCEPTION 'granted while held';
		EXCEPTION WHEN lock_not_available THEN
			NULL;
		END;
	END LOOP;
	RETURN extract(epoch FROM clock_timestamp() - t0);
END $$;
EOS

my $h = zk_session($node, 'holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('pile', parents => false) > 0});

my $p = zk_session($node, 'poller');
my @secs;
for my $b (1 .. $BATCHES)
{
	my $r = $p->query("SELECT poll($BATCH)", 600);
	is($r->{sqlstate}, '00000', "batch $b of $BATCH timed-out attempts")
	  or diag(explain($r));
	push @secs, $r->{out} + 0;
}
my $waited = psql1($node, 'SELECT waited FROM zk_lock_status');
note "requests that waited: $waited";
note 'seconds per batch: ' . join(', ', map { sprintf '%.2f', $_ } @secs);

# The worker's count of watches: zk_lock_status.watches (1.3), else its
# watch_armed read with gdb (the contexts the worker keeps)
my $has_column = psql1($node,
	q{SELECT count(*) FROM pg_attribute
	   WHERE attrelid = 'zk_lock_status'::regclass AND attname = 'watches'});
sub worker_watches
{
	return psql1($node, 'SELECT watches FROM zk_lock_status') if $has_column;
	my $pid = psql1($node, 'SELECT worker_pid FROM zk_lock_status');
	my $out = `gdb -p $pid -batch -ex 'p watch_armed' 2>/dev/null`;
	return $out =~ /^\$1 = (\d+)/m ? $1 : undef;
}
my $n;
SKIP:
{
	skip 'neither zk_lock_status.watches (1.3) nor gdb', 1
	  unless $has_column || defined worker_watches();
	# the holder's guard and the session's revocation mailbox (issue 18),
	# nothing else
	ok(wait_until(sub { ($n = worker_watches() // -1) <= 2 }, timeout => 10),
		"after $waited waits given up behind a lock held by the same instance, the worker keeps two watches (the holder's guard, its mailbox)")
	  or diag("the worker keeps $n watch contexts; the server has "
		  . zk_server('4lw', 1, 'wchs'));
}
$h->query_ok(q{SELECT zk_lock_release('pile')});
zk_done_check();
done_testing();
