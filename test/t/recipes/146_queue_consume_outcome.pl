
# A committed take's consume has an outcome the COMMIT reads (issue 31,
# review finding 3; 12 and 13 beside it).  "A COMMIT that returned has
# consumed its items", or the COMMIT says (WARNING) that an item was not
# consumed and will be delivered again; zk_queue_stats counts `consumed`
# only when ZooKeeper deleted the entry.  Each case checks what ZooKeeper
# has against what the COMMIT said and what the statistics count:
#  - reload: the worker stopped (SIGSTOP) as the COMMIT gives its take
#    back; zklock.hosts changed and reloaded meanwhile; continued, the
#    worker ends its session before it sends the consume.  (Before: the
#    COMMIT returned silently, counted consumed, and the item came back.)
#  - worker restart: the same with a SIGTERM of the worker (a restart).
#  - NOTEMPTY: another client's child under the entry before the COMMIT:
#    ZooKeeper refuses the entry's delete.  (Before: a LOG line only.)
#  - finding 13: a hold deleted by another client while the queue fence is
#    paused after opening its window (failpoint queue-fence-window): the
#    COMMIT fails with 55P03 (the fence's second look).
#  - finding 12: a take granted, its hold deleted before the backend looks
#    (the backend stopped meanwhile): 55P03 with a message, not XX000 with
#    an empty one.
# In every case the item is still in the queue and is taken again.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

my $hosts = zk_start();
my $node1 = zk_node('node1');
my $root = zk_root();
$node1->safe_psql('postgres', 'CREATE TABLE landed (q text)');

sub qpath { return "$root/zklock.queues/$_[0]"; }

sub entry_exists
{
	my ($q, $id) = @_;
	return (ZkLockTest::zkutil('exists', qpath($q) . "/entries/$id"))[0] == 0;
}

sub stats
{
	my ($q) = @_;
	return psql1($node1,
		"SELECT consumed || '|' || given_back FROM zk_queue_stats WHERE queue = '$q'");
}

# a session that took the only item of $q, in an open transaction
sub take_one
{
	my ($q) = @_;
	my $s = zk_session($node1, "taker_$q");
	$s->query_ok("SELECT zk_queue_put_now('$q', 'item of $q') IS NOT NULL");
	$s->query_ok('BEGIN');
	my $id = $s->query_ok("SELECT id FROM zk_queue_try_take('$q')");
	$s->query_ok("INSERT INTO landed VALUES ('$q')");
	return ($s, $id);
}

# the lease well ahead (the worker is then stopped: its fence must pass on
# what the lease covers already)
sub lease_fresh
{
	return wait_until(sub { psql1($node1, 'SELECT lease_remaining FROM zk_lock_status') >= 2500 },
		timeout => 20, interval => 0.05);
}

# the COMMIT's outcome against ZooKeeper's and the statistics'
sub check_outcome
{
	my ($q, $id, $r, $what) = @_;
	ok($r && $r->{sqlstate} eq '00000', "$what: the COMMIT returns") or diag(explain($r));
	ok(zk_wait_connected($node1, 30), "$what: the worker is connected");
	my $gone = !entry_exists($q, $id);
	my ($consumed, $given_back) = split /\|/, stats($q);
	my $said = $r->{err} =~ /"\Q$id\E" of queue "\Q$q\E" was not consumed by this commit/ ? 'not'
	  : $r->{err} =~ /"\Q$id\E" of queue "\Q$q\E" may not have been consumed by this commit/ ? 'maybe'
	  : 'consumed';
	note("$what: the COMMIT said $said; the entry is " . ($gone ? 'gone' : 'there'));
	if ($said eq 'consumed')
	{
		ok($gone, "$what: the COMMIT consumed its item, or said it did not")
		  or diag("entry still there; the COMMIT said: $r->{err}");
		is($consumed, 1, "$what: counted consumed");
	}
	else
	{
		ok($said eq 'maybe' || !$gone, "$what: an item the COMMIT says was not consumed is still there");
		is($consumed, 0, "$what: zk_queue_stats does not count it consumed");
		is($given_back, $said eq 'not' ? 1 : 0, "$what: given back when it was not consumed");
	}
	if (!$gone)
	{
		my $again;
		wait_until(sub {
			$again = psql1($node1, "SELECT id FROM zk_queue_try_take('$q')");
			$again ne '';
		}, timeout => 20);
		is($again, $id, "$what: the item is delivered again");
	}
	return $gone;
}

# --- reload of zklock.hosts before the consume is sent ----------------------
(my $other_spelling = $hosts) =~ s/127\.0\.0\.1/localhost/g;
{
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	my ($s, $id) = take_one('cr');
	ok(lease_fresh(), 'reload: the lease is fresh');
	kill 'STOP', $worker;
	$s->send('COMMIT');
	ok(wait_until(sub { psql1($node1, q{SELECT count(*) FROM landed WHERE q = 'cr'}) eq '1' },
			timeout => 30), 'reload: the commit record is written');
	$node1->safe_psql('postgres',
		"ALTER SYSTEM SET zklock.hosts = '$other_spelling'; SELECT pg_reload_conf()");
	select(undef, undef, undef, 0.3);
	kill 'CONT', $worker;
	check_outcome('cr', $id, $s->wait(60), 'reload');
	$s->quit;
}

# --- the worker ends (pg_terminate_backend) before the consume is sent -----
{
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	my ($s, $id) = take_one('cw');
	ok(lease_fresh(), 'worker restart: the lease is fresh');
	kill 'STOP', $worker;
	$s->send('COMMIT');
	ok(wait_until(sub { psql1($node1, q{SELECT count(*) FROM landed WHERE q = 'cw'}) eq '1' },
			timeout => 30), 'worker restart: the commit record is written');
	kill 'TERM', $worker;
	kill 'CONT', $worker;
	check_outcome('cw', $id, $s->wait(60), 'worker restart');
	$s->quit;
}

# --- a take and a put in one COMMIT, the reload before the consume ---------
# The window stays open for the consume's verdict only: the put's move,
# asked for after the verdict, must not be held by the worker's wait for
# that window (it defers requests until its next session, which waits for
# the window: both would stall a session timeout, and the COMMIT warn that
# the item is still pending).
{
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	my ($s, $id) = take_one('cp');
	$s->query_ok(q{SELECT zk_queue_put('cp2', 'put beside a take') IS NOT NULL});
	ok(zk_set_failpoints($node1, 'queue-fence-window=pause'), 'take and put: failpoint set');
	my $log_at = -s $node1->logfile;
	$s->send('COMMIT');
	ok(zk_wait_log($node1, qr/failpoint "queue-fence-window" reached/, $log_at, 30),
		'take and put: the put is pending, the window open');
	kill 'STOP', $worker;
	$node1->safe_psql('postgres',
		"ALTER SYSTEM SET zklock.failpoints = ''; ALTER SYSTEM SET zklock.hosts = '$hosts'; SELECT pg_reload_conf()");
	ok(wait_until(sub { psql1($node1, q{SELECT count(*) FROM landed WHERE q = 'cp'}) eq '1' },
			timeout => 30), 'take and put: the commit record is written');
	select(undef, undef, undef, 0.3);
	my $cont_at = time();
	kill 'CONT', $worker;
	my $r = $s->wait(60);
	ok($r && $r->{sqlstate} eq '00000', 'take and put: the COMMIT returns') or diag(explain($r));
	unlike($r ? $r->{err} : '', qr/still pending/, 'take and put: the put is not left pending')
	  or diag($r->{err});
	my $took = time() - $cont_at;
	ok($took < 3.5, 'take and put: the COMMIT is not held for a session timeout')
	  or diag("the COMMIT returned $took s after the worker went on");
	ok(zk_wait_connected($node1, 30), 'take and put: the worker is connected');
	my $got;
	ok(wait_until(sub {
			$got = psql1($node1, q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('cp2')});
			$got ne '';
		}, timeout => 20), 'take and put: the put item is in its queue');
	is($got, 'put beside a take', 'take and put: the put item');
	$s->quit;
}

# --- the worker stopped (SIGSTOP) through the COMMIT's wait for its verdict --
# A flag of a stopped worker says nothing: the wait is bounded by a session
# timeout and says the item may not have been consumed; neither counted.
{
	my $worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
	my ($s, $id) = take_one('cs');
	ok(lease_fresh(), 'worker stopped: the lease is fresh');
	kill 'STOP', $worker;
	$s->send('COMMIT');
	my $r = $s->wait(60);
	kill 'CONT', $worker;
	ok($r && $r->{elapsed} < 15, 'worker stopped: the COMMIT\'s wait is bounded')
	  or diag(explain($r));
	like($r ? $r->{err} : '', qr/"\Q$id\E" of queue "cs" may not have been consumed by this commit/,
		'worker stopped: the COMMIT says the item may not have been consumed');
	check_outcome('cs', $id, $r, 'worker stopped');
	$s->quit;
}

# --- NOTEMPTY: another client's child under the entry -----------------------
{
	my ($s, $id) = take_one('cn');
	my ($rc, $child, $err) = ZkLockTest::zkutil('create-seq', qpath('cn') . "/entries/$id/child-", 'x');
	is($rc, 0, 'NOTEMPTY: another client made a child under the entry') or diag($err);
	chomp $child;
	$s->send('COMMIT');
	my $r = $s->wait(60);
	like($r ? $r->{err} : '', qr/NOTEMPTY/, 'NOTEMPTY: the WARNING says why');
	ZkLockTest::zkutil('delete-r', $child);
	ok(!check_outcome('cn', $id, $r, 'NOTEMPTY'), 'NOTEMPTY: the entry stays');
	$s->quit;
}

# --- two takes in one COMMIT, one consumed, one refused (NOTEMPTY) ----------
# Each hold has its own verdict: one WARNING, naming the one not consumed;
# counted consumed once and given back once.
{
	my $s = zk_session($node1, 'taker_c2');
	$s->query_ok(q{SELECT zk_queue_put_now('c2', 'first') IS NOT NULL});
	$s->query_ok(q{SELECT zk_queue_put_now('c2', 'second') IS NOT NULL});
	$s->query_ok('BEGIN');
	my $id1 = $s->query_ok(q{SELECT id FROM zk_queue_try_take('c2')});
	my $id2 = $s->query_ok(q{SELECT id FROM zk_queue_try_take('c2')});
	isnt($id1, $id2, 'two takes: two items held');
	my ($rc, $child) = ZkLockTest::zkutil('create-seq', qpath('c2') . "/entries/$id2/child-", 'x');
	is($rc, 0, 'two takes: a child under the second entry');
	chomp $child;
	$s->send('COMMIT');
	my $r = $s->wait(60);
	ok($r && $r->{sqlstate} eq '00000', 'two takes: the COMMIT returns') or diag(explain($r));
	my @warned = ($r->{err} =~ /item "([^"]+)" of queue "c2" (?:was not|may not have been) consumed/g);
	is_deeply(\@warned, [$id2], 'two takes: one WARNING, for the second item only');
	ok(!entry_exists('c2', $id1), 'two takes: the first item is consumed');
	ok(entry_exists('c2', $id2), 'two takes: the second item stays');
	is(stats('c2'), '1|1', 'two takes: counted consumed once, given back once');
	ZkLockTest::zkutil('delete-r', $child);
	$s->quit;
	is(psql1($node1, q{SELECT id FROM zk_queue_try_take('c2')}), $id2,
		'two takes: the second item is delivered again');
}

# --- finding 13: a hold lost after the fence's first look --------------------
{
	my ($s, $id) = take_one('cf');
	ok(zk_set_failpoints($node1, 'queue-fence-window=pause'), 'failpoint set');
	my $log_at = -s $node1->logfile;
	$s->send('COMMIT');
	ok(zk_wait_log($node1, qr/failpoint "queue-fence-window" reached/, $log_at, 30),
		'fence: the window is open, the second look not made');
	ZkLockTest::zkutil('delete-r', qpath('cf') . "/taken/$id");
	ok(zk_wait_log($node1, qr/the hold "[^"]*\Q$id\E" of a queue item was deleted while held/,
			$log_at, 30), 'fence: the worker saw the hold deleted');
	ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
	my $r = $s->wait(60);
	is($r ? $r->{sqlstate} : 'none', '55P03', 'fence: the COMMIT fails, as for a lost lock')
	  or diag(explain($r));
	is(psql1($node1, q{SELECT count(*) FROM landed WHERE q = 'cf'}), '0',
		'fence: the transaction did not commit');
	ok(entry_exists('cf', $id), 'fence: the item stays in the queue');
	$s->quit;
	is(psql1($node1, q{SELECT id FROM zk_queue_try_take('cf')}), $id,
		'fence: the item is taken again');
}

# --- finding 12: LOST between the grant and the backend's look -----------------
{
	my $s = zk_session($node1, 'lost_taker');
	my $pid = $s->pid;
	$s->query_ok('BEGIN');
	$s->send(q{SELECT id FROM zk_queue_take('cl', '30 s')});
	ok(wait_until(sub {
			psql1($node1, "SELECT state FROM pg_stat_activity WHERE pid = $pid") eq 'active';
		}, timeout => 20), 'lost: the take waits');
	select(undef, undef, undef, 0.5);
	kill 'STOP', $pid;
	my $id = psql1($node1, q{SELECT zk_queue_put_now('cl', 'x')});
	my $hold = qpath('cl') . "/taken/$id";
	ok(wait_until(sub { (ZkLockTest::zkutil('exists', $hold))[0] == 0 }, timeout => 20),
		'lost: the worker holds the item for the stopped backend');
	my $log_at = -s $node1->logfile;
	ZkLockTest::zkutil('delete-r', $hold);
	ok(zk_wait_log($node1, qr/of a queue item was deleted while held/, $log_at, 30),
		'lost: the hold is deleted before the backend looks');
	kill 'CONT', $pid;
	my $r = $s->wait(60);
	is($r ? $r->{sqlstate} : 'none', '55P03', 'lost: 55P03') or diag(explain($r));
	like($r ? $r->{err} : '', qr/its hold was lost/, 'lost: with a message');
	$s->query_ok('ROLLBACK');
	$s->quit;
	is(psql1($node1, q{SELECT id FROM zk_queue_try_take('cl')}), $id,
		'lost: the item is taken again');
}

done_testing();
