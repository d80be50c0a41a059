
# The queue's cycle at Kazoo's cost (issue 31): a take's hold and its
# entry's read are sent back to back, and a committed take's entry and
# hold are deleted as one multi (worker/recipes/queue_release.c).
#  - writes per cycle (zk_queue_put_now, zk_queue_try_take, COMMIT) by
#    ZooKeeper's zxid (srvr), printed with the requests: 3 (the put, the
#    hold, the multi), as Kazoo's LockingQueue (before: 4, two deletes)
#  - the read is in flight with the hold's create: the failpoint
#    queue-hold-reply pauses the worker with the hold's reply in hand, the
#    entry is deleted meanwhile (zkutil), and the take still gets its
#    item, read before the delete (before: the read went after the pause,
#    found no entry, and the try returned nothing); its COMMIT's multi
#    rolls back (the entry gone) and the hold is deleted alone: the COMMIT
#    returns, nothing is left in entries/ or taken/
#  - the other rollback: the failpoint queue-before-consume pauses a
#    committed take's multi, its hold is deleted meanwhile; the entry is
#    deleted alone and only then the COMMIT returns, nothing left
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;

zk_start();
my $node1 = zk_node('node1', session_timeout => '20s');
my $root = zk_root();
my $q = "$root/zklock.queues/qf";

sub nodes_in
{
	my ($dir) = @_;
	return grep { m{^\Q$q/$dir\E/} } zk_list_znodes("$root/zklock.queues");
}

sub zxid
{
	my ($z) = zk_server('4lw', 1, 'srvr') =~ /Zxid: (0x[0-9a-f]+)/i;
	return hex($z) & 0xffffffff;
}

$node1->safe_psql('postgres', <<'EOS');
CREATE PROCEDURE cycles(n int)
LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    PERFORM zk_queue_put_now('qf', 'item ' || i);
    PERFORM * FROM zk_queue_try_take('qf');
    COMMIT;
  END LOOP;
END $$;
EOS

# ---------------------------------------------------------------------------
# Writes and requests per cycle.
$node1->safe_psql('postgres', 'CALL cycles(5)');	# the queue's nodes made
my $n = 40;
my ($z0, $p0) = (zxid(), zk_mntr()->{zk_packets_received});
$node1->safe_psql('postgres', "CALL cycles($n)");
my ($z1, $p1) = (zxid(), zk_mntr()->{zk_packets_received});
my $wr = ($z1 - $z0) / $n;
diag(sprintf('per cycle: %.2f writes (zxid), %.2f requests (pings included)',
		$wr, ($p1 - $p0) / $n));
ok($wr < 3.5, "3 writes per cycle, as Kazoo's LockingQueue (got $wr)");
is($node1->safe_psql('postgres', q{SELECT zk_queue_length('qf')}), '0',
	'every item consumed');

# ---------------------------------------------------------------------------
# The read in flight with the hold: the entry consumed meanwhile.
my $s = zk_session($node1, 'S');
$s->query_ok(q{SELECT zk_queue_put_now('qf', 'a')});
my ($entry) = nodes_in('entries');
ok(defined $entry, 'the entry is there');
my $off = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'queue-hold-reply=pause'), 'failpoint set');
$s->query_ok('BEGIN');
$s->send(q{SELECT coalesce((SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('qf')), 'none')});
ok(zk_wait_log($node1, qr/failpoint "queue-hold-reply" reached/, $off, 20),
	'the hold was answered');
my ($rc, undef, $err) = ZkLockTest::zkutil('delete-r', $entry);
is($rc, 0, "the entry deleted meanwhile $err");
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
my $r = $s->wait(60);
is($r ? $r->{out} : 'timed out', 'a',
	'the take got the item its read, sent with the hold, found');
is($s->query_ok('COMMIT'), '', 'its COMMIT returns (the multi rolled back)');
is(scalar(nodes_in('entries')) + scalar(nodes_in('taken')), 0,
	'nothing left in entries/ or taken/');

# ---------------------------------------------------------------------------
# The hold gone when the multi is sent: the entry deleted alone.
$s->query_ok(q{SELECT zk_queue_put_now('qf', 'b')});
$s->query_ok('BEGIN');
is($s->query_ok(q{SELECT convert_from(item, 'UTF8') FROM zk_queue_try_take('qf')}),
	'b', 'b taken');
my ($hold) = nodes_in('taken');
ok(defined $hold, 'its hold is there');
$off = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'queue-before-consume=pause'), 'failpoint set');
$s->send('COMMIT');
ok(zk_wait_log($node1, qr/failpoint "queue-before-consume" reached/, $off, 20),
	'the consume is about to be sent');
($rc, undef, $err) = ZkLockTest::zkutil('delete-r', $hold);
is($rc, 0, "the hold deleted meanwhile $err");
ok(zk_set_failpoints($node1, ''), 'failpoint cleared');
$r = $s->wait(60);
ok($r && $r->{sqlstate} eq '00000', 'the COMMIT returns without an error')
  or diag(explain($r));
is(scalar(nodes_in('entries')) + scalar(nodes_in('taken')), 0,
	'the entry was deleted alone: nothing left');

$s->quit;
done_testing();
