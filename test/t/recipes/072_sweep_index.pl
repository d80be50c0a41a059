# The sweep of explicit locks (issue 18, "an idle cost that does not grow
# with the locks held"):
#  - explicit locks are recorded under <root>/zklock.explicit before their
#    node is made, and the record goes after the node (the sweep's removal,
#    zk_lock_release_explicit, a try that failed);
#  - one instance sweeps for all (<root>/zklock.sweeper is its session's):
#    ZooKeeper counts the writes of one sweeper's clock, not two;
#    explicit locks with a short time to live taken on both instances are
#    removed;
#  - an instance holding 500 session locks costs ZooKeeper no more reads
#    per second than one holding none (mntr: reads under the root);
#  - the sweeper stopped with pg_ctl -m immediate: the other instance takes
#    over within a session timeout and a sweep interval, removes an expired
#    lock, and removes the node of an explicit request the dead instance
#    was waiting with, within the bound doc/settings.md gives (a sweep
#    interval after twice the session timeout from its creation);
#  - zklock 1.4's explicit nodes (no index entry, made here by hand in its
#    format): the sweep leaves them to 1.4's own sweep, and a worker's first
#    walk removes the expired one and records the other, which the sweeper
#    then removes when it expires.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use IPC::Run;

my $hosts = zk_start();
my $T = 4;			# zklock.session_timeout, s
my $I = 1;			# zklock.sweep_interval, s
my $conf = "zklock.sweep_interval = '${I}s'\nzklock.max_locks_per_backend = 600\nzklock.max_locks = 1200";
# how long a waiting node may be without its waiter: twice the session
# timeout, at least 10 s (doc/safety.md)
my $grace = 2 * $T > 10 ? 2 * $T : 10;
my $node1 = zk_node('node1', extra_conf => $conf, session_timeout => "${T}s");
my $node2 = zk_node('node2', extra_conf => $conf, session_timeout => "${T}s");
my %nodes = (node1 => $node1, node2 => $node2);

my $index = zk_path('zklock.explicit');
my $sweeper = zk_path('zklock.sweeper');

sub session_hex
{
	my ($node) = @_;
	my $sid = psql1($node, 'SELECT session_id FROM zk_lock_status');
	$sid =~ s/^0x//i;
	return ('0' x (16 - length $sid)) . lc $sid;
}

# the index's entries (names under <root>/zklock.explicit)
sub entries
{
	my @all = zk_list_znodes($index);
	return map { (split m{/})[-1] } @all;
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

sub mntr
{
	my %m = %{ zk_mntr() };
	(my $ns = zk_root()) =~ s{^/}{};
	return {
		reads => $m{"zk_cnt_${ns}_read_per_namespace"} // 0,
		writes => $m{"zk_cnt_${ns}_write_per_namespace"} // 0,
		packets => $m{zk_packets_received} // 0 };
}

# ZooKeeper's counters over $secs seconds, per second
sub rates
{
	my ($secs) = @_;
	my $m0 = mntr();
	sleep($secs);
	my $m1 = mntr();
	return { map { $_ => ($m1->{$_} - $m0->{$_}) / $secs } keys %$m0 };
}

sub node_gone
{
	my ($path, $secs) = @_;
	return wait_until(sub { (ZkLockTest::zkutil('exists', $path))[0] == 1 },
		timeout => $secs, interval => 0.1);
}

# --- another client's node in the sweeper's place -----------------------------
# it cannot switch the sweep off: every instance sweeps.  (The sweeper's
# node replaced by another client's in one transaction, with an ACL that
# lets zklock read nothing.)
# (no sweeper while the root does not exist: nothing to sweep; the first
# explicit lock makes it, and the index, which keeps it)
my $noroot = rates(3);
cmp_ok($noroot->{packets}, '<', 15,
	sprintf('no root yet: %.1f requests/s, the claim is not retried in a loop', $noroot->{packets}));
like(psql1($node1, "SELECT zk_lock_acquire_explicit('first', ttl => '1 hour')"),
	qr/^\d+$/, 'a first explicit lock');
is(psql1($node1, "SELECT zk_lock_release_explicit('first')"), '1', '... released');
ok(wait_until(sub { (ZkLockTest::zkutil('exists', $sweeper))[0] == 0 }, timeout => 10),
	'an instance made <root>/zklock.sweeper');
my $py = q{
import sys
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl
zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=10)
t = zk.transaction()
t.delete(sys.argv[2])
t.create(sys.argv[2], b"another client's node", acl=[make_digest_acl("other", "secret", all=True)])
r = t.commit()
sys.exit(0 if all(x is True or isinstance(x, str) for x in r) else 1)
};
my ($pout, $perr) = ('', '');
IPC::Run::run([ $ENV{ZKLOCK_TEST_PYTHON} || '/usr/bin/python3', '-c', $py, $hosts, $sweeper ],
	'<', \undef, '>', \$pout, '2>', \$perr);
is($? >> 8, 0, "another client's unreadable node replaces it") or diag($perr);
like(psql1($node1, "SELECT zk_lock_acquire_explicit('squat', ttl => '1 s')"),
	qr/^\d+$/, 'an explicit lock of 1 s');
ok(wait_until(sub { zk_count_locks(zk_path('squat')) == 0 }, timeout => 10),
	'... is removed all the same');
foreach my $n ($node1, $node2)
{
	ok(zk_wait_log($n, qr/is not the node of a zklock sweeper; every instance sweeps/),
		$n->name . ' warns that it sweeps');
}
my %off = map { $_ => -s $nodes{$_}->logfile } keys %nodes;
ZkLockTest::zkutil('delete-private', $sweeper, 'other:secret');

# --- one sweeper ---------------------------------------------------------------
my $who;
ok(wait_until(sub { ($who = sweeper_of()) ne '' }, timeout => 10),
	"one instance holds <root>/zklock.sweeper ($who)");
my $other = $who eq 'node1' ? 'node2' : 'node1';
ok(zk_wait_log($nodes{$who}, qr/sweeps expired explicit locks for every instance now/, $off{$who}),
	'... and says so in its log');
is(zk_log_count($nodes{$other}, qr/sweeps expired explicit locks for every instance now/, $off{$other}),
	0, '... the other does not');
sleep(1);
my $idle = rates(8);
note sprintf('idle, two instances, no lock: %.1f requests/s (%.1f reads, %.1f writes under the root)',
	$idle->{packets}, $idle->{reads}, $idle->{writes});
# a sweep's clock is a create and a delete, and the sweeper rewrites its
# node (its beat, test 075): one sweeper, 3 writes a second
cmp_ok($idle->{writes}, '<=', 4.5,
	sprintf('one sweeper: %.1f writes/s under the root (two would write 6/s)', $idle->{writes}));
cmp_ok($idle->{writes}, '>=', 1, '... and it does sweep');

# --- expiry, by whichever sweeps ---------------------------------------------
my $t0 = time();
foreach my $name ('node1', 'node2')
{
	like(psql1($nodes{$name}, "SELECT zk_lock_acquire_explicit('short/$name', ttl => '2 s')"),
		qr/^\d+$/, "$name takes an explicit lock of 2 s");
}
is(scalar(grep { /^short%2Fnode[12]%zx/ } entries()), 2,
	'both are recorded in the index, named by resource and request');
ok(wait_until(sub { zk_count_locks(zk_path('short')) == 0 }, timeout => 15),
	sprintf('both are removed by the sweeper (%.1f s after the acquire)', time() - $t0));
ok(wait_until(sub { !grep { /^short%2F/ } entries() }, timeout => 5),
	'... and so are their index entries');

like(psql1($node1, "SELECT zk_lock_acquire_explicit('rel/a', ttl => '1 hour')"),
	qr/^\d+$/, 'an explicit lock of an hour');
is(scalar(grep { /^rel%2Fa%/ } entries()), 1, '... is recorded');
is(psql1($node2, "SELECT zk_lock_release_explicit('rel/a')"), '1',
	'zk_lock_release_explicit on the other instance');
ok(wait_until(sub { !grep { /^rel%2Fa%/ } entries() }, timeout => 5),
	'... removes its entry too');
like(psql1($node2, "SELECT zk_lock_acquire_explicit('rel/b', ttl => '1 hour')"),
	qr/^\d+$/, 'another explicit lock');
my ($rc, $out, $err) = $node1->psql('postgres',
	"SELECT zk_lock_acquire_explicit('rel/b', ttl => '1 hour', timeout => '0')");
like($err, qr/could not obtain/, 'a try on the other instance fails');
ok(wait_until(sub { scalar(grep { /^rel%2Fb%/ } entries()) == 1 }, timeout => 5),
	'a try that failed leaves no entry of its own');
is(psql1($node1, "SELECT zk_lock_release_explicit('rel/b')"), '1', 'released');

# --- idle cost with 500 session locks ----------------------------------------
my $h = zk_session($nodes{$other}, 'holder');
$h->query_ok(q{DO $$ BEGIN FOR i IN 1..500 LOOP
	PERFORM zk_lock_acquire_session('held' || i); END LOOP; END $$});
is(zk_count_locks(), 500, "the non-sweeping instance holds 500 session locks");
my $h2 = zk_session($nodes{$who}, 'holder2');
$h2->query_ok(q{DO $$ BEGIN FOR i IN 1..500 LOOP
	PERFORM zk_lock_acquire_session('kept' || i); END LOOP; END $$});
is(zk_count_locks(), 1000, "... and the sweeping one 500 more");
sleep(1);
my $held = rates(8);
note sprintf('idle, two instances, 1,000 session locks: %.1f requests/s (%.1f reads, %.1f writes under the root)',
	$held->{packets}, $held->{reads}, $held->{writes});
cmp_ok($held->{reads}, '<=', $idle->{reads} + 1,
	sprintf('reads under the root do not grow with the locks held (%.1f/s with none, %.1f/s with 1,000; listing them would be 1,000/s)',
		$idle->{reads}, $held->{reads}));
cmp_ok($held->{packets}, '<=', $idle->{packets} + 1.5,
	'nor do the requests ZooKeeper receives');
$h->query_ok('SELECT zk_lock_release_all()');
$h2->query_ok('SELECT zk_lock_release_all()');
ok(zk_wait_no_locks(zk_root(), 20), 'released');

# --- the sweeper dies --------------------------------------------------------
my $holder = $nodes{$other};
like(psql1($holder, "SELECT zk_lock_acquire_explicit('dead/held', ttl => '1 hour')"),
	qr/^\d+$/, "$other holds an explicit lock of an hour");
like(psql1($nodes{$who}, "SELECT zk_lock_acquire_explicit('dead/short', ttl => '2 s')"),
	qr/^\d+$/, "the sweeper $who takes one of 2 s");
my $w = zk_session($nodes{$who}, 'dead_waiter');
$w->send(q{SELECT zk_lock_acquire_explicit('dead/held', ttl => '1 hour', timeout => '60 s')});
ok(zk_wait_count(zk_path('dead/held'), 2, 10), "an explicit request of $who waits behind it");
my $t_wait = time();
my ($waiting) = grep { !/LOCK-EXCLUSIVE-0000000000$/ } zk_lock_nodes(zk_path('dead/held'));
ok(defined $waiting, "its node is $waiting");
is(scalar(grep { /^dead%2Fheld%/ } entries()), 2, 'both are recorded');
my $off = -s $holder->logfile;
$nodes{$who}->stop('immediate');
my $t_kill = time();
delete $nodes{$who};
ok(zk_wait_log($holder, qr/sweeps expired explicit locks for every instance now/, $off,
		$T + 3 * $I + 5),
	sprintf('%s takes over the sweep (%.1f s after the kill; bound: session timeout %d s and a sweep interval)',
		$other, time() - $t_kill, $T));
ok(wait_until(sub { zk_count_locks(zk_path('dead/short')) == 0 },
		timeout => $T + 3 * $I + 5),
	sprintf('... and removes the dead sweeper\'s expired lock (%.1f s after the kill)', time() - $t_kill));
ok(node_gone($waiting, $grace + 3 * $I + 5),
	sprintf('the node of the dead instance\'s waiting request goes %.1f s after its creation (bound: twice the session timeout, at least 10 s, and a sweep interval: %d s)',
		time() - $t_wait, $grace + $I));
cmp_ok(time() - $t_wait, '<=', $grace + $I + 2, '... within the bound (with 2 s for the test)');
is(zk_count_locks(zk_path('dead/held')), 1, 'the lock it waited behind stays');
ok(wait_until(sub { scalar(grep { /^dead%2F/ } entries()) == 1 }, timeout => 5),
	'... its entry alone is left');
is(psql1($holder, "SELECT zk_lock_release_explicit('dead/held')"), '1', 'released');

# --- zklock 1.4's nodes, unrecorded ------------------------------------------
# two explicit nodes as 1.4 makes them, no entry: one expires at once, one in
# a while; the sweeper does not see them
my $data = 'v=2\ninstance=old14\npid=1\ndatabase=postgres\nuser=postgres\nscope=explicit\nimplicit=false\nsince=1.000000\nttl=%d\nexpires_at=2.000000\nquery=LOCK';
my (undef, $pa) = ZkLockTest::zkutil('create-seq', zk_path('legacy/a/zx0badf00d.1.1-LOCK-EXCLUSIVE-'),
	sprintf($data, 500));
my (undef, $pb) = ZkLockTest::zkutil('create-seq', zk_path('legacy/b/zx0badf00d.2.1-LOCK-SHARED-'),
	sprintf($data, 15000));
chomp($pa, $pb);
my $t_legacy = time();
like($pb, qr/LOCK-SHARED-\d{10}$/, "1.4's nodes made by hand ($pa, $pb)");
sleep(3);
ok((ZkLockTest::zkutil('exists', $pa))[0] == 0,
	'the sweeper leaves an expired node it has no entry for (1.4 sweeps it)');
$off = -s $nodes{$other}->logfile;
my $restarted = $who;
my $rnode = $restarted eq 'node1' ? $node1 : $node2;
$rnode->start;
$nodes{$restarted} = $rnode;
ok(zk_wait_connected($rnode), "$restarted starts again (a worker upgraded from 1.4)");
ok(node_gone($pa, 10), "its first walk removes the expired 1.4 node");
ok(wait_until(sub { grep { /^legacy%2Fb%zx0badf00d\.2\.1-LOCK-SHARED-$/ } entries() }, timeout => 10),
	'... and records the other in the index');
ok((ZkLockTest::zkutil('exists', $pb))[0] == 0, '... which is not expired yet');
ok(node_gone($pb, 20), sprintf('the sweeper removes it once expired (%.1f s after its creation, ttl 15 s)',
		time() - $t_legacy));
ok(wait_until(sub { !grep { /^legacy%2F/ } entries() }, timeout => 5), '... and its entry');

zk_done_check();
done_testing();
