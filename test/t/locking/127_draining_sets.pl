# The draining slot of 126 (entries still being removed count against the
# backend's zklock.max_locks_per_backend; a submit finding its slot full
# of some waits for the worker to free them), in a lock set, and its cost:
#  (e) a set of three whose first two members fill the slot (one lock
#      held, one being removed): the third waits, and the set is granted
#      once the deletes proceed;
#  (f) the same when they never do: 53400 after zklock.connect_timeout,
#      and the two members submitted are given back;
#  (g) a backend really full, retrying in a loop, with a table of 400,000
#      entries: a refusal costs about what it costs with a table of 64 (the
#      slot's entries being removed are counted, not scanned for under the
#      exclusive lock: that made it about 300 times slower).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

my $ct = 4;
zk_start();
my $node = zk_node('rv',
	extra_conf => "zklock.max_locks_per_backend = 4\nzklock.connect_timeout = '${ct}s'\nzklock.max_locks = 400000");
my $s = zk_session($node, 's');

sub half_draining
{
	my ($tag) = @_;
	$s->query_ok(qq{SELECT zk_lock_acquire_session('rv${tag}1')});
	$s->query_ok(qq{SELECT zk_lock_acquire_session('rv${tag}2')});
	my $from = -s $node->logfile;
	ok(zk_set_failpoints($node, 'before-delete=pause'), "($tag) deletes pause");
	$s->query_ok(qq{SELECT zk_lock_release('rv${tag}2')});
	ok(zk_wait_log($node, qr/failpoint "before-delete" reached \(pause\)/, $from),
		"($tag) the worker is held before deleting");
	is(zk_entries_in_use($node), '2', "($tag) one held, one being removed");
}

# (e) a set of three: two members go in, the third waits for the drain
half_draining('e');
$s->send(q{SELECT cardinality(zk_lock_acquire_all_session(ARRAY['rve_b1','rve_b2','rve_b3']))});
ok(wait_until(sub { zk_entries_in_use($node) eq '4' }, timeout => 20),
	'(e) two members submitted, the slot full');
sleep(0.5);
ok(!$s->done, '(e) the third member waits');
ok(zk_set_failpoints($node, ''), '(e) deletes proceed');
my $r = $s->wait(60);
is($r && $r->{sqlstate}, '00000', '(e) the set is granted') or diag(explain($r));
is($r && $r->{out}, '3', '(e) three tokens');
$s->query_ok(q{SELECT zk_lock_release_all()});
ok(zk_wait_no_entries($node, 30), '(e) every entry free');

# (f) the same, deletes never proceed: 53400, and the two members given back
half_draining('f');
$r = $s->query(q{SELECT zk_lock_acquire_all_session(ARRAY['rvf_b1','rvf_b2','rvf_b3'])}, 60);
is($r->{sqlstate}, '53400', '(f) 53400 after the bound');
is(zk_entries_in_use($node), '4', '(f) two members withdrawn (still being removed), one held, one released');
ok(zk_set_failpoints($node, ''), '(f) deletes proceed');
ok(wait_until(sub { zk_entries_in_use($node) eq '1' }, timeout => 30), '(f) only the held lock is left');
is($s->query(q{SELECT string_agg(resource, ',') FROM zk_lock_local})->{out}, 'rvf1', '(f) locally too');
$s->query_ok(q{SELECT zk_lock_release_all()});
ok(zk_wait_no_entries($node, 30), '(f) every entry free');

# (g) cost: a backend really full, retrying in a loop, with a large table,
# against the same loop on an instance with a small table, side by side (a
# ratio, not a time: a scan of the table made it about 300 times slower)
my $small = zk_node('rvsmall',
	extra_conf => "zklock.max_locks_per_backend = 4\nzklock.max_locks = 64");
my $refusals = q{DO $$ DECLARE n int := 0; BEGIN FOR i IN 1..2000 LOOP BEGIN PERFORM zk_lock_try_acquire_session('rvgx'); EXCEPTION WHEN configuration_limit_exceeded THEN n := n + 1; END; END LOOP; IF n <> 2000 THEN RAISE EXCEPTION 'only % refusals', n; END IF; END $$};

sub full_loop
{
	my ($sess) = @_;
	for my $i (1 .. 4) { $sess->query_ok(qq{SELECT zk_lock_acquire_session('rvg$i')}); }
	my $t0 = time;
	my $res = $sess->query($refusals, 300);
	my $took = time - $t0;
	is($res->{sqlstate}, '00000', '(g) every try refused with 53400 (' . $sess->name . ')')
	  or diag(explain($res));
	$sess->query_ok(q{SELECT zk_lock_release_all()});
	return $took;
}
my $ss = zk_session($small, 'small');
my $el_small = full_loop($ss);
my $el = full_loop($s);
diag(sprintf("(g) 2000 refused acquires: table of 400000 %.3f s, of 64 %.3f s (ratio %.1f)",
	$el, $el_small, $el / $el_small));
cmp_ok($el / $el_small, '<', 20, '(g) a refusal costs about the same with a table of 400,000 entries as with 64: no scan of the table');
$ss->quit;
ok(zk_wait_no_entries($node, 30), '(g) every entry free');

$s->quit;
zk_done_check();
done_testing();
