# Attacks on the sweep's index and its one sweeper (issue 18, "an idle
# cost that does not grow with the locks held"; REVIEW.md classes 1, 5, 6,
# 8, 9, 13):
#  (a) an explicit lock whose create reply is lost (after-create-reply=fail)
#      is adopted, indexed, and still expires;
#  (c) a sweeper stopped (SIGSTOP) past its session: the other takes over,
#      the stopped one does not sweep beside it once resumed;
#  (d) a waiting explicit request whose waiter's instance died, while the
#      other instance sweeps, is removed within the bound;
#  (e) an entry whose node another client deleted goes;
#  (f) a role without admin rights cannot lock the sweep's nodes, leave
#      others' entries, or pass its quota;
#  (g) creates refused by another client's ACL leave no entry for good;
#  (h) a node deleted by another client while its create's reply waits;
#  (i) a sweeper whose loop stalls with its session alive is taken over;
#  (b) an index bigger than one getChildren reply may be (ZooKeeper's
#      jute.maxbuffer, about 1 MB: 1,400 explicit locks with 255-byte
#      names): the sweep still removes an expired lock, and the worker's
#      connection is not lost over it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
my $T = 4;			# zklock.session_timeout, s
my $I = 1;			# zklock.sweep_interval, s
my $grace = 2 * $T > 10 ? 2 * $T : 10;
my $conf = "zklock.sweep_interval = '${I}s'";
my $node1 = zk_node('node1', extra_conf => $conf, session_timeout => "${T}s");
my $node2 = zk_node('node2', extra_conf => $conf, session_timeout => "${T}s");
my %nodes = (node1 => $node1, node2 => $node2);
my $index = zk_path('zklock.explicit');

# the index's entries (names under <root>/zklock.explicit, whatever depth)
sub entries
{
	return map { substr($_, length($index) + 1) } zk_list_znodes($index);
}

# --- (a) a lost create reply ---------------------------------------------------
my $log_at = -s $node1->logfile;
ok(zk_set_failpoints($node1, 'after-create-reply=fail'), '(a) create replies dropped');
like(psql1($node1, "SELECT zk_lock_acquire_explicit('lost/a', ttl => '2 s')"),
	qr/^\d+$/, '(a) the explicit lock is taken although its create reply was lost');
ok(zk_wait_log($node1, qr/failpoint "after-create-reply" reached \(fail\)/, $log_at),
	'(a) the reply was dropped');
ok(zk_set_failpoints($node1, ''), '(a) failpoints cleared');
is(scalar(grep { /lost%2Fa%zx/ } entries()), 1, '(a) the adopted lock is indexed');
ok(wait_until(sub { zk_count_locks(zk_path('lost/a')) == 0 }, timeout => 2 + 3 * $I + $T),
	'(a) and expires');
ok(wait_until(sub { !grep { /lost%2Fa%/ } entries() }, timeout => 5),
	'(a) its entry goes after it');

# --- (b) an index bigger than one getChildren reply --------------------------
# 1,400 explicit locks, each name 255 bytes of which 248 are "%" (written
# "%25" in an entry's name: ~800 bytes an entry, ~1.1 MB in all), by a
# superuser (no quota).
my $N = 1400;
my $pad = '%' x 248;
my $t0 = time;
is(psql1($node2, "SELECT count(zk_lock_acquire_explicit(format('big%s%s', lpad(i::text, 4, '0'), '$pad'), ttl => '1 hour')) FROM generate_series(1, $N) i"),
	$N, "(b) $N explicit locks with 255-byte names taken");
note sprintf('(b) taken in %.1f s', time - $t0);
my $bytes = 0;
$bytes += length($_) + 4 foreach entries();
cmp_ok($bytes, '>', 1048575, "(b) the index's names take more than 1 MB ($bytes bytes)");
my %bat = map { $_ => -s $nodes{$_}->logfile } keys %nodes;
like(psql1($node1, "SELECT zk_lock_acquire_explicit('big/probe', ttl => '2 s')"),
	qr/^\d+$/, '(b) one more with a 2 s time to live');
ok(wait_until(sub { zk_count_locks(zk_path('big/probe')) == 0 }, timeout => 2 + 4 * $I + $T),
	'(b) the sweep still removes it when it expires');
foreach my $n (sort keys %nodes)
{
	is(zk_log_count($nodes{$n}, qr/zklock: (?:lost the connection|reconnected to ZooKeeper|gave up ZooKeeper session)/, $bat{$n}), 0,
		"(b) $n: its connection was not lost meanwhile");
}
is(psql1($node1, "SELECT state FROM zk_lock_status"), 'connected', '(b) node1 connected');
is(psql1($node2, "SELECT state FROM zk_lock_status"), 'connected', '(b) node2 connected');
is(psql1($node2, "SELECT count(zk_lock_release_explicit(format('big%s%s', lpad(i::text, 4, '0'), '$pad'))) FROM generate_series(1, $N) i"),
	$N, '(b) all released');

# --- helpers for who sweeps ---------------------------------------------------
my $sweeper = zk_path('zklock.sweeper');

sub session_hex
{
	my ($node) = @_;
	my $sid = psql1($node, 'SELECT session_id FROM zk_lock_status');
	$sid =~ s/^0x//i;
	return ('0' x (16 - length $sid)) . lc $sid;
}

# the instance whose session holds the sweeper's node, or ''
sub sweeper_of
{
	my ($rc, $out) = ZkLockTest::zkutil('get', $sweeper);
	return '' if $rc != 0 || $out !~ /session=([0-9a-f]{16})/;
	my $s = $1;
	foreach my $name (sort keys %nodes)
	{
		my $sid = eval { session_hex($nodes{$name}) } // '';
		return $name if $sid eq $s;
	}
	return '';
}

# writes per second under the root (ZooKeeper's own counter) over $secs
sub writes_per_s
{
	my ($secs) = @_;
	(my $ns = zk_root()) =~ s{^/}{};
	my $w = sub {
		my $out = ZkLockTest::zk_server('4lw', 1, 'mntr');
		my ($v) = $out =~ /^zk_cnt_${ns}_write_per_namespace\t(\d+)/m;
		return $v // 0;
	};
	my $w0 = $w->();
	sleep($secs);
	return ($w->() - $w0) / $secs;
}

# --- (c) a stalled sweeper ----------------------------------------------------
# Its worker stopped (SIGSTOP) for twice the session timeout: the other
# instance takes over and removes an expired lock meanwhile; once the
# stalled worker resumes, with its session expired, it does not sweep
# beside the other (one sweeper's clock writes, not two).
my $who;
ok(wait_until(sub { ($who = sweeper_of()) ne '' }, timeout => 10), "(c) $who sweeps");
my $other = $who eq 'node1' ? 'node2' : 'node1';
my %at = map { $_ => -s $nodes{$_}->logfile } keys %nodes;
my $wpid = psql1($nodes{$who}, 'SELECT worker_pid FROM zk_lock_status');
like(psql1($nodes{$other}, "SELECT zk_lock_acquire_explicit('stall/x', ttl => '1 s')"),
	qr/^\d+$/, '(c) an explicit lock with a 1 s time to live');
kill 'STOP', $wpid;
my $t_stop = time;
ok(wait_until(sub { sweeper_of() eq $other }, timeout => $T + 3 * $I + 5),
	"(c) $other takes over while ${who}'s worker is stopped");
ok(wait_until(sub { zk_count_locks(zk_path('stall/x')) == 0 }, timeout => 3 * $I + 5),
	"(c) and removes the expired lock");
sleep(2 * $T - (time - $t_stop)) if time - $t_stop < 2 * $T;
kill 'CONT', $wpid;
ok(zk_wait_connected($nodes{$who}), "(c) ${who}'s worker resumes and connects again");
ok(zk_wait_log($nodes{$who}, qr/this instance no longer sweeps expired explicit locks/, $at{$who}),
	"(c) $who says it no longer sweeps");
sleep(2 * $I);
is(sweeper_of(), $other, "(c) $other still sweeps");
my $wr = writes_per_s(4 * $I);
# one sweeper: its clock's create and delete and its beat, 3 a second; two: 6
cmp_ok($wr, '<=', 4.5, "(c) one sweeper's writes a second, not two's ($wr)");
cmp_ok($wr, '>=', 1, '(c) ... and it does sweep');

# --- (i) a sweeper whose worker's loop stalls with its session alive ---------
# (a failpoint pauses the loop; the client library's thread keeps answering
# ZooKeeper's pings, so the sweeper's ephemeral node stays): the other
# instance takes over once the node has not been rewritten for three of
# its sweep intervals and the session timeout, and removes an expired lock
# meanwhile; the stalled one, resumed, stops sweeping.
ok(wait_until(sub { ($who = sweeper_of()) ne '' }, timeout => 10), "(i) $who sweeps");
$other = $who eq 'node1' ? 'node2' : 'node1';
%at = map { $_ => -s $nodes{$_}->logfile } keys %nodes;
ok(zk_set_failpoints($nodes{$who}, 'after-create-reply=pause'), "(i) $who: creates pause its worker");
my $ps = zk_session($nodes{$who}, 'pauser');
$ps->send(q{SELECT zk_lock_acquire_session('pause/x', timeout => '60 s')});
ok(zk_wait_log($nodes{$who}, qr/failpoint "after-create-reply" reached \(pause\)/, $at{$who}),
	"(i) ${who}'s worker loop is paused");
like(psql1($nodes{$other}, "SELECT zk_lock_acquire_explicit('pause/e', ttl => '1 s')"),
	qr/^\d+$/, '(i) an explicit lock with a 1 s time to live');
ok(wait_until(sub { zk_count_locks(zk_path('pause/e')) == 0 },
		timeout => 3 * $I + $T + 4 * $I + 10),
	"(i) it is removed while ${who}'s loop is stalled") or diag('sweeper: ' . sweeper_of());
is(sweeper_of(), $other, "(i) $other sweeps now");
ok(zk_set_failpoints($nodes{$who}, ''), "(i) ${who}'s worker resumes");
# (its backend may have given up on the stalled worker: connect_timeout)
my $pr = $ps->wait(30);
ok(defined $pr, "(i) the paused acquire ends");
ok(zk_wait_log($nodes{$who}, qr/this instance no longer sweeps expired explicit locks/, $at{$who}),
	"(i) $who says it no longer sweeps");
sleep(2 * $I);
is(sweeper_of(), $other, "(i) $other still sweeps");
$ps->quit;

# --- (e) an explicit node deleted by another client --------------------------
like(psql1($nodes{$other}, "SELECT zk_lock_acquire_explicit('gone/x', ttl => '1 hour')"),
	qr/^\d+$/, '(e) an explicit lock for an hour');
is(scalar(grep { /gone%2Fx%zx/ } entries()), 1, '(e) indexed');
my ($gnode) = zk_lock_nodes(zk_path('gone/x'));
is((ZkLockTest::zkutil('delete-r', $gnode))[0], 0, '(e) its node deleted by another client');
ok(wait_until(sub { !grep { /gone%2Fx%/ } entries() }, timeout => $grace + 4 * $I + 5),
	'(e) its entry goes within twice the session timeout and a few sweeps');

# --- (f) a role without admin rights ------------------------------------------
$nodes{$other}->safe_psql('postgres', q{
	CREATE ROLE alice LOGIN;
	ALTER ROLE alice SET zklock.max_explicit_locks_per_role = 3;});
my $a = ZkLockTest::zk_session_as($nodes{$other}, 'alice', 'alice');
foreach my $name ('zklock.sweeper', 'zklock.explicit', 'zklock.explicit/x', 'zklock.sweeper/x')
{
	my $r = $a->query(qq{SELECT zk_lock_acquire_explicit('$name', ttl => '1 hour')});
	like($r->{err} // '', qr/must not begin with "zklock\."/, "(f) alice cannot lock \"$name\"");
}
like(psql1($nodes{$other}, "SELECT zk_lock_acquire_explicit('priv/su', ttl => '1 hour')"),
	qr/^\d+$/, "(f) the superuser's explicit lock");
for my $i (1 .. 3)
{
	like($a->query_ok(qq{SELECT zk_lock_acquire_explicit('priv/a$i', ttl => '1 hour')}),
		qr/^\d+$/, "(f) alice's explicit lock $i");
}
my $r = $a->query(q{SELECT zk_lock_acquire_explicit('priv/a4', ttl => '1 hour')});
like($r->{err} // '', qr/holds too many explicit zklock locks/, '(f) the fourth is refused (quota)');
is(scalar(grep { /^priv%2Fa\d%/ } entries()), 3, "(f) alice's index entries: 3");
$r = $a->query(q{SELECT zk_lock_release_explicit('priv/su')});
is(scalar(grep { /^priv%2Fsu%/ } entries()), 1, "(f) alice's release of the superuser's lock leaves its entry");
is(zk_count_locks(zk_path('priv/su')), 1, '(f) ... and its node');
is($a->query_ok(q{SELECT sum(zk_lock_release_explicit('priv/a' || i)) FROM generate_series(1, 3) i}), '3',
	'(f) alice releases hers');
ok(wait_until(sub { !grep { /^priv%2Fa/ } entries() }, timeout => 5), "(f) and their entries go");
is(psql1($nodes{$other}, "SELECT zk_lock_release_explicit('priv/su')"), '1', '(f) released');

# --- (g) another client's node that zklock may neither list nor write under --
# Each explicit acquire of it fails (NOAUTH); no entry of it may stay: else
# any role fills the index without bound, past its quota (the quota counts
# nodes, and there are none), and the sweep lists them all, forever.
is((ZkLockTest::zkutil('create-acl', zk_path('prot'), '', 'other:secret'))[0], 0,
	"(g) another client's node, no rights for anyone else");
for my $i (1 .. 5)
{
	my $r = $a->query(qq{SELECT zk_lock_acquire_explicit('prot', ttl => '1 hour', timeout => '5 s')});
	isnt($r->{sqlstate}, '00000', "(g) alice's explicit acquire $i of it fails");
}
ok(wait_until(sub { !grep { /^prot%/ } entries() }, timeout => 3),
	'(g) the entries of those failed creates go with their failure')
  or diag(join("\n", grep { /^prot%/ } entries()));
# and an entry of it left by other means (a create tried again, 1.4's
# walk): an entry the sweep cannot check, so it goes as one without its node
is((ZkLockTest::zkutil('create-acl', "$index/prot%zx00000000.0.1-LOCK-EXCLUSIVE-", 'rwcda', 'other:secret'))[0], 0,
	'(g) an entry of it made by hand');
ok(wait_until(sub { !grep { /^prot%/ } entries() }, timeout => $grace + 4 * $I + 5),
	'(g) the entry the sweep cannot check goes as one without its node')
  or diag(join("\n", grep { /^prot%/ } entries()));

# --- (h) the node deleted by another client while its create's reply is
# being handled (after-create-reply=sleep): whatever the acquire answers,
# every node of the resource ends with its entry and no entry without one.
%at = map { $_ => -s $nodes{$_}->logfile } keys %nodes;
ok(zk_set_failpoints($nodes{$other}, 'after-create-reply=sleep:2000'), '(h) create replies handled 2 s late');
my $hs = zk_session($nodes{$other}, 'racer');
$hs->send(q{SELECT zk_lock_acquire_explicit('race/x', ttl => '1 hour', timeout => '20 s')});
ok(zk_wait_log($nodes{$other}, qr/failpoint "after-create-reply" reached \(sleep:2000\)/, $at{$other}),
	'(h) the reply waits');
my ($rnode) = zk_lock_nodes(zk_path('race/x'));
ok(defined $rnode && (ZkLockTest::zkutil('delete-r', $rnode))[0] == 0, '(h) its node deleted by another client meanwhile');
my $hr = $hs->wait(30);
ok(defined $hr, "(h) the acquire ends: sqlstate $hr->{sqlstate}");
ok(zk_set_failpoints($nodes{$other}, ''), '(h) failpoints cleared');
my $match = sub {
	my $n = scalar zk_lock_nodes(zk_path('race/x'));
	my $e = scalar(grep { /^race%2Fx%/ } entries());
	return $n == $e;
};
ok(wait_until($match, timeout => $grace + 4 * $I + 5),
	'(h) as many entries as nodes of it (within the bound of an entry without its node)')
  or diag(join("\n", zk_lock_nodes(zk_path('race/x')), grep { /^race%2Fx%/ } entries()));
psql1($nodes{$other}, "SELECT zk_lock_release_explicit('race/x')") if zk_lock_nodes(zk_path('race/x'));
$hs->quit;

# --- (d) a waiter's instance dies, another sweeps --------------------------
# $who no longer sweeps; its backend waits for an explicit lock $other
# holds; $who stops (immediate): its waiting node goes within the bound of
# doc/settings.md (twice the session timeout from its creation, the session
# timeout for the waiter child to go, and a sweep interval).
like(psql1($nodes{$other}, "SELECT zk_lock_acquire_explicit('dw/x', ttl => '1 hour')"),
	qr/^\d+$/, '(d) an explicit lock held on the sweeper');
my $wt = zk_session($nodes{$who}, 'waiter');
$wt->send(q{SELECT zk_lock_acquire_explicit('dw/x', ttl => '1 hour', timeout => '60 s')});
ok(wait_until(sub { zk_count_locks(zk_path('dw/x')) == 2 }, timeout => 10), "(d) $who waits for it");
is(scalar(grep { /^dw%2Fx%/ } entries()), 2, '(d) both indexed');
my $t_wait = time;
$nodes{$who}->stop('immediate');
my $t_dead = time;
ok(wait_until(sub { zk_count_locks(zk_path('dw/x')) == 1 }, timeout => $grace + $T + 3 * $I + 10),
	"(d) the dead waiter's node is removed by $other");
note sprintf('(d) removed %.1f s after its creation, %.1f s after the stop', time - $t_wait, time - $t_dead);
ok(wait_until(sub { scalar(grep { /^dw%2Fx%/ } entries()) == 1 }, timeout => 5), '(d) and its entry');
is(psql1($nodes{$other}, "SELECT zk_lock_release_explicit('dw/x')"), '1', '(d) released');
$nodes{$who}->start;

done_testing();
