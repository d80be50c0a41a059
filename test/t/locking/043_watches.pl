
# Watches outlive nothing (issue 20, finding 4): a waiter whose predecessor
# is gone before its exists arrives gets NONODE, and ZooKeeper then keeps a
# creation watch on a name that is never used again, in the server and in
# the client, which sends every such watch again in one SetWatches packet
# after each reconnection; past jute.maxbuffer the server refuses the
# reconnection, again and again.
#
#  (a) 8 clients on 2 instances cycle acquire/release of one resource,
#      contended (thousands of cycles, bounded in time), each waiter's
#      worker pausing before it watches (so that the node it waits behind
#      is often gone by then: NONODE, hundreds of times): the server's count
#      of watches (the four-letter word wchs) stays within the number of
#      clients all along, and is 0 once nothing is held or waited for; the
#      worker's count (zk_lock_status.watches, extension 1.3) says the same.
#  (b) waiters that give up (timeout) behind a holder leave no watch behind.
#  (c) ZooKeeper restarted (with a low jute.maxbuffer, so that a SetWatches
#      of leaked watches would be refused): both workers reconnect to their
#      sessions, the waiter still waiting is granted at the release of the
#      holder on the other instance, and locks still work across instances.
#
# ZKLOCK_WATCH_CYCLES (default 3000) and ZKLOCK_WATCH_SECONDS (default 60):
# the cycles of (a), all clients together, and the most time they may take.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

my $CYCLES  = $ENV{ZKLOCK_WATCH_CYCLES}  // 3000;
my $SECS    = $ENV{ZKLOCK_WATCH_SECONDS} // 60;
my $CLIENTS = 8;

# A session's SetWatches holds every path it watches, ~70 bytes each here:
# 2 KB is about thirty leaked watches, while what zklock sends in a
# session with nothing leaked stays far below it.
$ENV{ZK_JVM_OPTS} = join(' ', grep { defined && $_ ne '' }
	  $ENV{ZK_JVM_OPTS}, '-Djute.maxbuffer=2048');

zk_start();
# A client that reaches the restarted server before it serves waits two
# thirds of the session timeout before it tries again: the longest timeout
# ZooKeeper allows here keeps the sessions alive through that.
my @nodes = map { zk_node("node$_", session_timeout => '60s') } 1 .. 2;
my ($node1, $node2) = @nodes;

# Does zk_lock_status show the worker's count of watches (1.3)?
my $has_column = psql1($node1,
	q{SELECT count(*) FROM pg_attribute
	   WHERE attrelid = 'zk_lock_status'::regclass AND attname = 'watches'});

# The server's count of watches, all sessions (wchs: "Total watches:N")
sub server_watches
{
	my $out = zk_server('4lw', 1, 'wchs');
	# less the two workers' revocation mailboxes' (issue 18), always set
	return $out =~ /Total watches:\s*(\d+)/ ? $1 - 2 : undef;
}

# The server's watches per session (wchc: a session id, then its paths)
sub server_watches_of
{
	my ($session) = @_;
	my $out = zk_server('4lw', 1, 'wchc');
	my ($n, $cur) = (0, '');
	for my $line (split /\n/, $out)
	{
		if ($line =~ /^(0x[0-9a-f]+)/) { $cur = $1; }
		elsif ($line =~ m{^\s+/} && $cur eq $session) { $n++; }
	}
	return $n;
}

sub status
{
	my ($node, $col) = @_;
	return psql1($node, "SELECT $col FROM zk_lock_status");
}

# The workers' counts agree with the server's (1.3 only).  A worker counts
# its data watches and its listings' child watches (issue 18), while wchc
# shows data watches only: their sum is compared with mntr's zk_watch_count,
# every session's data and child watches (the two workers are the only
# sessions that watch anything here).
sub server_watches_all
{
	my $out = zk_server('4lw', 1, 'mntr');
	return $out =~ /zk_watch_count\s+(\d+)/ ? $1 : undef;
}

sub counts_agree
{
	my ($what) = @_;
  SKIP:
	{
		skip 'zk_lock_status.watches needs extension 1.3', 1
		  unless $has_column;
		my ($mine, $server) = (0, 0);
		my $ok = wait_until(
			sub {
				$mine = 0;
				$mine += status($_, 'watches') for @nodes;
				$server = server_watches_all() // -1;
				return $mine == $server;
			},
			timeout => 10);
		ok($ok, "$what: the workers' zk_lock_status.watches add up to the server's count")
		  or diag("workers say $mine, server says $server");
	}
}

my %sid = map { $_->name => status($_, 'session_id') } @nodes;

# --- (a) contended cycles ------------------------------------------------------
for my $node (@nodes)
{
	$node->safe_psql('postgres', <<'EOS');
CREATE FUNCTION cycles(n int, secs float8) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	i int := 0;
	stop timestamptz := clock_timestamp() + secs * interval '1 s';
BEGIN
	WHILE i < n AND clock_timestamp() < stop LOOP
		PERFORM zk_lock_acquire_session('w/one', 'exclusive', parents => false);
		PERFORM zk_lock_release('w/one', 'exclusive');
		-- away for a while: the queue stays short, its holder often
		-- the node a new waiter waits behind
		PERFORM pg_sleep(random() * 0.02);
		i := i + 1;
	END LOOP;
	RETURN i;
END $$;
EOS
}
my %waited0 = map { $_->name => status($_, 'waited') } @nodes;

# Each waiter's worker pauses 3 ms between the listing and the exists on
# the node it waits behind (failpoint before-wait), as a loaded machine or
# a slower link would: the holder on the other instance often releases
# meanwhile, and the exists finds no node (NONODE) -- the race that left a
# watch behind.
ok(zk_set_failpoints($_, 'before-wait=sleep:3'),
	$_->name . ': failpoint before-wait set') for @nodes;

my @clients = map { zk_session($nodes[$_ % 2], "cycler$_") } 1 .. $CLIENTS;
my $per = int(($CYCLES + $CLIENTS - 1) / $CLIENTS);
$_->send("SELECT cycles($per, $SECS)") for @clients;

# sample the server's watches while they run
my ($max, $samples) = (0, 0);
my $deadline = time() + $SECS + 60;
while (grep { !$_->done } @clients)
{
	last if time() > $deadline;
	my $n = server_watches();
	if (defined $n)
	{
		$samples++;
		$max = $n if $n > $max;
	}
	sleep(0.5);
}
my $total = 0;
for my $c (@clients)
{
	my $r = $c->wait(5);
	ok($r && $r->{sqlstate} eq '00000', $c->name . ' cycled without error')
	  or diag(explain($r));
	$total += $r->{out} if $r && $r->{out} =~ /^\d+$/;
}
zk_set_failpoints($_, '') for @nodes;
my $waited = 0;
$waited += status($_, 'waited') - $waited0{ $_->name } for @nodes;
note "(a) $total cycles, $waited waits, $samples samples of wchs, at most $max watches";
cmp_ok($waited, '>=', 100, '(a) the cycles were contended (requests waited)');
cmp_ok($max, '<=', $CLIENTS,
	"(a) the server never held more watches than there are clients ($CLIENTS)");
my $left;
ok(wait_until(sub { ($left = server_watches() // -1) == 0 }, timeout => 10),
	'(a) no watch left on the server once nothing is held or waited for')
  or diag("wchs: $left watches left after $total cycles");
counts_agree('(a)');

# --- (b) waiters that give up -------------------------------------------------
my $h = zk_session($node1, 'holder');
$h->query_ok(q{SELECT zk_lock_acquire_session('w/held', parents => false) > 0});
# granted alone, its guard is its listing's child watch, which wchs does
# not count: every watch (mntr), less the mailboxes'
ok(wait_until(sub { ((server_watches_all() // -1) - 2) == 1 }, timeout => 10),
	'(b) the holder has one watch (its guard)');
for my $k (1 .. 3)
{
	my $r = zk_session($node2, "quitter$k")->query(
		q{SELECT zk_lock_acquire('w/held', parents => false, timeout => '1 s')});
	is($r->{sqlstate}, '55P03', "(b) waiter $k gave up (timeout)");
}
ok(wait_until(sub { ((server_watches_all() // -1) - 2) == 1 }, timeout => 10),
	'(b) the waiters that gave up left no watch on the holder\'s node')
  or diag('wchs: ' . server_watches());
counts_agree('(b)');

# --- (c) ZooKeeper restarted ------------------------------------------------
my $w = zk_session($node2, 'waiter');
$w->send(q{SELECT zk_lock_acquire_session('w/held', parents => false) > 0});
ok(wait_for_waiting($node2, $w->pid), '(c) a waiter on node2 waits');
ok(wait_until(sub { (server_watches() // -1) == 2 }, timeout => 10),
	'(c) two watches: the holder\'s guard and the waiter\'s');

my ($rc) = zk_server('restart-one', 1);
is($rc, 0, '(c) ZooKeeper restarted');
for my $node (@nodes)
{
	ok(zk_wait_connected($node, 90),
		'(c) ' . $node->name . ' reconnected after the restart');
	is(status($node, 'session_id'), $sid{ $node->name },
		'(c) ' . $node->name . ' kept its session');
}
ok(wait_until(sub { (server_watches() // -1) == 2 }, timeout => 10),
	'(c) the two watches are set again, and only they')
  or diag('wchs: ' . (server_watches() // 'no answer'));
counts_agree('(c)');

$h->query_ok(q{SELECT zk_lock_release('w/held')});
my $r = $w->wait(30);
is($r && $r->{out}, 't', '(c) the waiter is granted at the release on node1');
my $t = zk_session($node1, 'trier');
is($t->query_ok(q{SELECT zk_lock_try_acquire('w/held', parents => false) IS NULL}),
	't', '(c) node1 cannot take the lock node2 holds');
$w->query_ok(q{SELECT zk_lock_release('w/held')});
is($t->query_ok(q{SELECT zk_lock_try_acquire_session('w/held', parents => false) > 0}),
	't', '(c) node1 takes it once node2 released it');
$t->query_ok(q{SELECT zk_lock_release('w/held')});
ok(wait_until(sub { (server_watches() // -1) == 0 }, timeout => 10),
	'(c) no watch left at the end');
counts_agree('(c) end');

zk_done_check();
done_testing();
