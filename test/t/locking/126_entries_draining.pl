# A backend's entries still being removed (RELEASING: the backend is done
# with them, the worker has not deleted their nodes yet) count against its
# slot (zklock.max_locks_per_backend), but a slot full only because of them
# no longer fails the next request at once with 53400: the submit waits
# for the worker to free them, at most zklock.connect_timeout
# (src/backend/wait.c, submit_request).  The worker's deletes are held with
# the failpoint before-delete=pause, after the backend gave back its four
# locks (the cap here):
#  (a) the next acquire waits, and is granted once the deletes proceed;
#  (b) deletes that never proceed: 53400 after connect_timeout, its DETAIL
#      saying how many entries were still being removed;
#  (c) a statement_timeout ends the wait (57014), and nothing is left;
#  (d) a backend that really holds its four locks gets 53400 at once.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

my $ct = 4;    # zklock.connect_timeout, seconds
zk_start();
my $node = zk_node('drain',
	extra_conf => "zklock.max_locks_per_backend = 4\nzklock.connect_timeout = '${ct}s'");
my $s = zk_session($node, 's');

# Take the cap's four locks, hold the worker before its first delete, and
# give them back: the slot is full of entries being removed.
sub fill_draining
{
	my ($tag) = @_;
	for my $i (1 .. 4)
	{
		is($s->query(qq{SELECT zk_lock_acquire_session('drain/$tag$i', parents => false) > 0})->{out},
			't', "($tag) lock $i of 4 held");
	}
	my $from = -s $node->logfile;
	ok(zk_set_failpoints($node, 'before-delete=pause'), "($tag) deletes pause");
	$s->query_ok(q{SELECT zk_lock_release_all()});
	ok(zk_wait_log($node, qr/failpoint "before-delete" reached \(pause\)/, $from),
		"($tag) the worker is held before deleting the released nodes");
	is(zk_entries_in_use($node), '4', "($tag) the four entries are still in use");
}

sub drained
{
	my ($tag) = @_;
	ok(zk_set_failpoints($node, ''), "($tag) deletes proceed");
	ok(zk_wait_no_entries($node, 30), "($tag) every entry is free again");
	ok(zk_wait_no_locks(zk_path('drain'), 30), "($tag) no lock node left");
}

# --- (a) the deletes proceed: granted ------------------------------------
fill_draining('a');
$s->send(q{SELECT zk_lock_acquire_session('drain/next', parents => false) > 0});
ok(wait_for_waiting($node, $s->pid, 10), '(a) the acquire waits');
sleep(0.5);
ok(!$s->done, '(a) instead of failing with 53400 at once');
ok(zk_set_failpoints($node, ''), '(a) deletes proceed');
my $r = $s->wait(60);
is($r && $r->{sqlstate}, '00000', '(a) the acquire succeeds once the entries are freed')
  or diag(explain($r));
is($r && $r->{out}, 't', '(a) and the lock is held');
$s->query_ok(q{SELECT zk_lock_release_all()});
drained('a');

# --- (b) the deletes never proceed: 53400 after the bound -----------------
fill_draining('b');
$r = $s->query(q{SELECT zk_lock_acquire_session('drain/next', parents => false)}, 60);
is($r->{sqlstate}, '53400', '(b) 53400 when the entries are not freed');
like($r->{err}, qr/4 of them were still being removed after zklock\.connect_timeout/,
	'(b) its DETAIL says how many entries were still being removed');
cmp_ok($r->{elapsed}, '>=', $ct - 0.5, '(b) after zklock.connect_timeout');
drained('b');

# --- (c) a statement_timeout ends the wait --------------------------------
fill_draining('c');
$s->query_ok(q{SET statement_timeout = '500ms'});
$r = $s->query(q{SELECT zk_lock_acquire_session('drain/next', parents => false)}, 60);
is($r->{sqlstate}, '57014', '(c) statement_timeout cancels the wait');
cmp_ok($r->{elapsed}, '<', $ct, '(c) before zklock.connect_timeout');
$s->query_ok(q{RESET statement_timeout});
drained('c');
is($s->query(q{SELECT count(*) FROM zk_lock_local})->{out}, '0',
	'(c) the cancelled request holds nothing');

# --- (d) a backend that holds its share: 53400 at once ---------------------
for my $i (1 .. 4)
{
	$s->query_ok(qq{SELECT zk_lock_acquire_session('drain/d$i', parents => false)});
}
$r = $s->query(q{SELECT zk_lock_acquire_session('drain/next', parents => false)}, 60);
is($r->{sqlstate}, '53400', '(d) 53400 when the backend holds its four locks');
like($r->{err}, qr/nodes still being removed for an earlier backend/,
	'(d) with the DETAIL of a full share');
cmp_ok($r->{elapsed}, '<', $ct, '(d) at once, not after zklock.connect_timeout');
$s->query_ok(q{SELECT zk_lock_release_all()});
drained('d');

$s->quit;
zk_done_check();
done_testing();
