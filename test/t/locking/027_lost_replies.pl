
# Lost replies, driven by failpoints (issue 11, review item 4; REVIEW.md
# class 5: every asynchronous request can end in a connection loss):
#  (a) after-create-reply=fail drops the reply of a create that succeeded,
#      as a connection loss would: the worker does not know its node's name;
#      the listing finds the node again by its request's prefix and adopts
#      it after checking that its ephemeralOwner is this session (an
#      explicit lock's: no owner).  The acquire succeeds, exactly one node
#      exists for it, and the release leaves none;
#  (b) before-delete=fail: the release's delete is retried until it goes
#      through; the node stays meanwhile (the waiter on the other instance
#      keeps waiting) and goes once the failpoint is cleared, and the
#      waiter is granted;
#  (c) before-delete=exit: the worker exits instead of deleting; the
#      restarted worker closes its previous session, so the node does not
#      stay behind and the waiter on the other instance is granted.
# Needs the test build (make FAILPOINTS=1), as test/run_tests.sh makes it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');




my $h = zk_session($node1, 'holder');
my $w = zk_session($node2, 'waiter');

# --- (a) a create whose reply was lost: adopted ----------------------------
my $log_at = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'after-create-reply=fail'), "failpoints set to 'after-create-reply=fail'");
$h->query_ok('BEGIN');
my $token = $h->query_ok(q{SELECT zk_lock_acquire('lr/a', parents => false, timeout => '20 s')});
like($token, qr/^\d+$/, '(a) the acquire succeeds although its create reply was dropped');
ok(zk_wait_log($node1, qr/failpoint "after-create-reply" reached \(fail\)/, $log_at),
	'(a) the create reply was dropped');
ok(zk_wait_log($node1, qr/adopted lock node "[^"]*lr\/a\/[^"]*" after its create's reply was lost/, $log_at),
	'(a) the node was found again by its prefix and adopted');
my @info = zk_lock_info(zk_path('lr/a'));
is(scalar @info, 1, '(a) exactly one node exists for it');
is($info[0][1], $token, '(a) and the token is that node\'s czxid');
is($w->query_ok(q{SELECT zk_lock_try_acquire('lr/a', parents => false) IS NULL}), 't',
	'(a) the adopted node is a real lock: the other instance is kept out');
$h->query_ok('COMMIT');
ok(zk_wait_no_locks(zk_path('lr/a')), '(a) released at commit: no node left');

# an explicit lock (a persistent node, no ephemeralOwner) is adopted too
$log_at = -s $node1->logfile;
$h->query_ok(q{SELECT zk_lock_acquire_explicit('lr/x', ttl => '10 minutes', timeout => '20 s')});
ok(zk_wait_log($node1, qr/adopted lock node "[^"]*lr\/x\/[^"]*" after its create's reply was lost/, $log_at),
	'(a) an explicit lock\'s node is adopted as well');
is(zk_count_locks(zk_path('lr/x')), 1, '(a) exactly one node for the explicit lock');
is($h->query_ok(q{SELECT zk_lock_release_explicit('lr/x')}), '1', '(a) and it is released');
ok(zk_wait_no_locks(zk_path('lr/x')), '(a) leaving no node');
ok(zk_set_failpoints($node1, ''), "failpoints set to ''");

# $h holds $res in a transaction on node1; $w waits for it on node2.
sub hold_with_waiter
{
	my ($res, $label) = @_;
	$h->query_ok('BEGIN');
	$h->query_ok(qq{SELECT zk_lock_acquire('$res', parents => false)});
	$w->query_ok('BEGIN');
	$w->send(qq{SELECT zk_lock_acquire('$res', parents => false, timeout => '60 s') > 0});
	ok(wait_for_waiting($node2, $w->pid), "$label a waiter on the other instance");
}

# --- (b) a delete that fails is retried -------------------------------------
hold_with_waiter('lr/b', '(b)');
$log_at = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'before-delete=fail'), "failpoints set to 'before-delete=fail'");
$h->query_ok('COMMIT');
ok( wait_until(
		sub { zk_log_count($node1, qr/failpoint "before-delete" reached \(fail\)/, $log_at) >= 3 },
		timeout => 15),
	'(b) the release\'s delete fails and is retried');
is(zk_count_locks(zk_path('lr/b')), 2, '(b) meanwhile the node stays (and the waiter\'s)');
ok(!$w->done, '(b) and the waiter still waits');
ok(zk_set_failpoints($node1, ''), "failpoints set to ''");
my $r = $w->wait(30);
ok($r && $r->{out} eq 't', '(b) once the failpoint is cleared, the waiter is granted');
is(zk_count_locks(zk_path('lr/b')), 1, '(b) the released node is gone, the waiter\'s is there');
$w->query_ok('COMMIT');
ok(zk_wait_no_locks(zk_path('lr/b')), '(b) no node left');

# --- (c) the worker exits instead of deleting -------------------------------
my $old_worker = psql1($node1, 'SELECT worker_pid FROM zk_lock_status');
hold_with_waiter('lr/c', '(c)');
$log_at = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'before-delete=exit'), "failpoints set to 'before-delete=exit'");
my $t0 = time();
$h->query_ok('COMMIT');
ok(zk_wait_log($node1, qr/failpoint "before-delete" reached \(exit\)/, $log_at),
	'(c) the worker exits where it would delete the node');
# the restarted worker must not exit again
ok(zk_set_failpoints($node1, ''), "failpoints set to ''");
ok( wait_until(
		sub {
			my $p = psql1($node1, 'SELECT coalesce(worker_pid, 0) FROM zk_lock_status');
			$p != 0 && $p != $old_worker;
		},
		timeout => 20),
	'(c) the worker is restarted');
$r = $w->wait(30);
ok($r && $r->{out} eq 't', '(c) the waiter on the other instance is granted');
note sprintf('(c) granted %.1f s after the commit', time() - $t0);
is(zk_count_locks(zk_path('lr/c')), 1, '(c) the node of the exited worker\'s session is gone');
$w->query_ok('COMMIT');
ok(zk_wait_connected($node1), '(c) the restarted worker is connected');

zk_done_check();
done_testing();
