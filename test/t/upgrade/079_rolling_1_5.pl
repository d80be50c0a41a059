
# A rolling upgrade from 1.4.0 to 1.5.0: an instance running zklock 1.4.0
# (git revision 2b98233, extension 1.4) and one running this tree's library
# (package 1.5.0, still extension 1.4) share one ZooKeeper and one root.
# 1.5 changed the worker's protocol, not the SQL objects: a lock granted
# alone is guarded by its listing's child watch and revoked through the
# holder session's mailbox (<root>/zklock.sessions/<id>), creates and
# deletes go as one multi with a setData on <root>/zklock.zxid-<random>,
# explicit locks are indexed under <root>/zklock.explicit and one instance
# sweeps (<root>/zklock.sweeper).  Asserted here:
#  - mutual exclusion both ways, flat and nested names, EXCLUSIVE and
#    SHARED, under concurrency (a checker: no EXCLUSIVE critical section
#    overlaps another one);
#  - a 1.5 holder whose node another ZooKeeper client deletes cannot COMMIT;
#  - zk_lock_revoke on the 1.5 instance revokes a 1.4 holder (which has no
#    mailbox);
#  - zk_lock_revoke on the 1.4 instance of an uncontended 1.5 holder is not
#    acted on until another request arrives on that resource, and then is
#    (the caveat doc/install.md states);
#  - explicit locks of a short time to live made by either instance (and one
#    made by 1.4 before the 1.5 instance came) expire, leaving no node and
#    no index entry;
#  - the 1.4 instance's zk_locks lists the 1.5 instance's locks and runs
#    over the 1.5 internal nodes without an error;
#  - no lock node is left.
# The 1.4 release is built by test/run_tests.sh (test/build_old.sh) and named
# by ZKLOCK_LAST_INSTALL; without it this test fails, never skips.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use File::Temp qw(tempdir);
use PostgreSQL::Test::Utils;
use Test::More;

my $last_install = $ENV{ZKLOCK_LAST_INSTALL} // '';
ok($last_install ne '' && -x "$last_install/bin/postgres"
	  && -f "$last_install/lib/zklock.so",
	"zklock 1.4.0 is installed (ZKLOCK_LAST_INSTALL=$last_install)")
  or do
{
	diag('ZKLOCK_LAST_INSTALL must name a PostgreSQL installation with zklock 2b98233 (test/build_old.sh; test/run_tests.sh builds it as root from a clone)');
	done_testing();
	exit 1;
};

my $conf = "zklock.sweep_interval = '500ms'";
zk_start();
my $old = zk_node('old', node_name => 'old-inst', install_path => $last_install,
	extra_conf => $conf);

# an explicit lock the 1.4 instance takes before any 1.5 instance exists
# (not indexed: the 1.5 instance's first sweep walks the tree and finds it)
like(psql1($old, q{SELECT zk_lock_acquire_explicit('roll/exp_pre', ttl => '4 s')}),
	qr/^\d+$/, 'the 1.4 instance takes an explicit lock of 4 s, alone');

my $new = zk_node('new', node_name => 'new-inst', extra_conf => $conf);

is(psql1($old, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	'1.4', 'the old instance runs extension 1.4');
is(psql1($new, q{SELECT extversion FROM pg_extension WHERE extname = 'zklock'}),
	'1.9', 'the new instance runs extension 1.9 (the 1.9 library: a fresh install)');

# --- mutual exclusion both ways ----------------------------------------------
# run_mix($label, $resource, [node, mode] per client): each client runs
# $iters critical sections; no EXCLUSIVE one may overlap any other.
my $dir = tempdir(CLEANUP => 1);
my $iters = 8;

sub run_mix
{
	my ($label, $res, @spec) = @_;
	my @clients;
	my $i = 0;
	foreach my $sp (@spec)
	{
		my ($node, $mode) = @$sp;
		my $name = "c$i-" . $node->name . "-$mode";
		$i++;
		my $sql = '';
		for (1 .. $iters)
		{
			$sql .= "BEGIN;\n"
			  . "SELECT 'T|' || zk_lock_acquire('$res', '$mode', timeout => '60 s');\n"
			  . "SELECT 'S|' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;\n"
			  . "SELECT 'E|' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint FROM pg_sleep(0.01);\n"
			  . "COMMIT;\n";
		}
		my $file = "$dir/$name.sql";
		open(my $fh, '>', $file) or die "$file: $!";
		print $fh $sql;
		close($fh);
		my %c = (name => $name, mode => $mode, out => '', err => '');
		$c{h} = IPC::Run::start(
			[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', $file ],
			'<', \undef, '>', \$c{out}, '2>', \$c{err}, IPC::Run::timeout(120));
		push @clients, \%c;
	}
	my (@iv, $all_ok);
	$all_ok = 1;
	foreach my $c (@clients)
	{
		my $ok = eval { $c->{h}->finish; 1; };
		if (!$ok || $c->{h}->result(0) != 0 || $c->{err} ne '')
		{
			diag("$label $c->{name}: " . ($@ // '') . " $c->{err}");
			eval { $c->{h}->kill_kill; };
			$all_ok = 0;
			next;
		}
		my $cur;
		foreach my $line (split /\n/, $c->{out})
		{
			if ($line =~ /^T\|(\d+)$/) { $cur = { c => $c->{name}, mode => $c->{mode} }; }
			elsif ($line =~ /^S\|(\d+)$/ && $cur) { $cur->{start} = $1; }
			elsif ($line =~ /^E\|(\d+)$/ && $cur && defined $cur->{start})
			{
				$cur->{end} = $1;
				push @iv, $cur;
				undef $cur;
			}
			else { diag("$label $c->{name}: unexpected line '$line'"); $all_ok = 0; }
		}
	}
	ok($all_ok, "($label) every client ran without an error");
	is(scalar(@iv), $iters * scalar(@spec), "($label) every critical section was recorded");
	my $overlaps = 0;
	my @sorted = sort { $a->{start} <=> $b->{start} } @iv;
	for my $x (0 .. $#sorted)
	{
		for my $y ($x + 1 .. $#sorted)
		{
			last if $sorted[$y]{start} >= $sorted[$x]{end};
			next if $sorted[$x]{mode} eq 'shared' && $sorted[$y]{mode} eq 'shared';
			$overlaps++;
			diag("($label) overlap: $sorted[$x]{c} [$sorted[$x]{start},$sorted[$x]{end}]"
				  . " and $sorted[$y]{c} [$sorted[$y]{start},$sorted[$y]{end}]")
			  if $overlaps <= 5;
		}
	}
	is($overlaps, 0, "($label) no EXCLUSIVE critical section overlaps another one");
	ok(zk_wait_no_locks(zk_path($res), 10), "($label) no lock node left on $res");
	return;
}

run_mix('flat, exclusive', 'rollflat',
	[ $old, 'exclusive' ], [ $old, 'exclusive' ], [ $new, 'exclusive' ], [ $new, 'exclusive' ]);
run_mix('nested, exclusive', 'roll/n/deep',
	[ $old, 'exclusive' ], [ $new, 'exclusive' ], [ $old, 'exclusive' ], [ $new, 'exclusive' ]);
run_mix('flat, 1.4 shared, 1.5 exclusive', 'rollshared',
	[ $old, 'shared' ], [ $old, 'shared' ], [ $new, 'exclusive' ], [ $new, 'exclusive' ]);
run_mix('nested, 1.4 exclusive, 1.5 shared', 'roll/s/deep',
	[ $old, 'exclusive' ], [ $old, 'exclusive' ], [ $new, 'shared' ], [ $new, 'shared' ]);

# --- a 1.5 holder's node deleted by another ZooKeeper client -----------------
$new->safe_psql('postgres', 'CREATE TABLE guarded (v int)');
{
	my $h = zk_session($new, 'holder-del');
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('roll/del')});
	$h->query_ok('INSERT INTO guarded VALUES (1)');
	my ($path) = zk_lock_nodes(zk_path('roll/del'));
	ok($path, 'the 1.5 holder\'s node is there, alone');
	my ($rc) = ZkLockTest::zkutil('delete-r', $path);
	is($rc, 0, 'another ZooKeeper client deletes it');
	ok( wait_until(
			sub { psql1($new, q{SELECT count(*) FROM zk_lock_local WHERE state = 'lost'}) eq '1' },
			timeout => 10),
		'the 1.5 instance sees the lock lost');
	my $r = $h->query('COMMIT');
	is($r->{sqlstate}, '55P03', 'the 1.5 holder\'s COMMIT is refused');
	is(psql1($new, 'SELECT count(*) FROM guarded'), '0', 'nothing it wrote is visible');
	$h->quit;
}

# --- 1.5 revokes a 1.4 holder (no mailbox) -----------------------------------
zk_revoke_across('1.5', '1.4 instance', $new, $old, 'roll/rev14');

# --- 1.4 revokes an uncontended 1.5 holder: acted on at the next request -----
{
	my $res = 'roll/rev15';
	my $h = zk_session($new, 'holder-rev15');
	my $log_at = -s $new->logfile;
	$h->send("BEGIN; SELECT zk_lock_acquire('$res'); SELECT pg_sleep(60);");
	my $sleeping = sub {
		psql1($new, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep';
	};
	ok(wait_until($sleeping, timeout => 20), 'a 1.5 holder sleeps with the lock, granted alone');
	is(psql1($old, "SELECT zk_lock_revoke('$res', 'cancel')"), '1',
		'zk_lock_revoke on the 1.4 instance finds the 1.5 holder');
	sleep(3);
	ok($sleeping->(), 'three seconds on, the 1.5 holder still sleeps with its lock (no mailbox write from 1.4)');
	is(zk_log_count($new, qr/was revoked/, $log_at), 0,
		'and its worker has not acted on the revocation');
	is(scalar(zk_lock_nodes(zk_path($res))), 1, 'its node is still there');
	my $w = zk_session($old, 'waiter-rev15');
	$w->send("SELECT zk_lock_acquire_session('$res', timeout => '30 s') > 0");
	my $r = $h->wait(20);
	is($r && $r->{sqlstate}, '57014',
		'once a request from the 1.4 instance arrives, the 1.5 holder is canceled');
	ok(zk_wait_log($new, qr/\Q$res\E\/[^"]*" was revoked/, $log_at),
		'its worker logs "was revoked"');
	$h->query('ROLLBACK');
	$r = $w->wait(20);
	is($r && $r->{out}, 't', 'the 1.4 waiter is granted');
	$w->query_ok("SELECT zk_lock_release('$res')");
	ok(zk_wait_no_locks(zk_path($res), 10), 'no lock node left on it');
	$w->quit;
	$h->quit;
}

# --- with zklock.guard_by_listing off, a 1.4 revocation is acted on at once --
{
	my $res = 'roll/rev15off';
	$new->append_conf('postgresql.conf', 'zklock.guard_by_listing = off');
	$new->reload;
	ok(wait_until(sub { psql1($new, 'SHOW zklock.guard_by_listing') eq 'off' }, timeout => 10),
		'zklock.guard_by_listing is off on the 1.5 instance after a reload');
	sleep(3);    # the worker reads a reload at its next pass (at least one a second)
	my $h = zk_session($new, 'holder-rev15off');
	my $log_at = -s $new->logfile;
	$h->send("BEGIN; SELECT zk_lock_acquire('$res'); SELECT pg_sleep(60);");
	ok(wait_until(sub {
				psql1($new, 'SELECT wait_event FROM pg_stat_activity WHERE pid = ' . $h->pid) eq 'PgSleep'
			}, timeout => 20),
		'a 1.5 holder sleeps with the lock, granted alone');
	is(psql1($old, "SELECT zk_lock_revoke('$res', 'cancel')"), '1',
		'zk_lock_revoke on the 1.4 instance finds it');
	my $r = $h->wait(20);
	is($r && $r->{sqlstate}, '57014',
		'with the listing guard off, the 1.5 holder is canceled without another request');
	ok(zk_wait_log($new, qr/\Q$res\E\/[^"]*" was revoked/, $log_at),
		'its worker logs "was revoked"');
	$h->query('ROLLBACK');
	ok(zk_wait_no_locks(zk_path($res), 10), 'no lock node left on it');
	$h->quit;
	$new->append_conf('postgresql.conf', 'zklock.guard_by_listing = on');
	$new->reload;
}

# --- the 1.4 instance's zk_locks over the 1.5 instance's locks and nodes -----
{
	my $s = zk_session($new, 'listed');
	$s->query_ok(q{SELECT zk_lock_acquire_session('roll/listed')});
	$s->query_ok(q{SELECT zk_lock_acquire_session('roll/l/deep', 'shared')});
	like(psql1($new, q{SELECT zk_lock_acquire_explicit('roll/l/exp', ttl => '1 hour')}),
		qr/^\d+$/, 'the 1.5 instance holds an explicit lock');
	my @all = zk_list_znodes(zk_root());
	my $root = zk_root();
	ok((grep { m{^\Q$root\E/zklock\.sessions/[0-9a-f]+$} } @all), 'a mailbox under zklock.sessions exists');
	ok((grep { m{^\Q$root\E/zklock\.zxid-} } @all), 'a zklock.zxid-* anchor exists');
	ok((grep { m{^\Q$root\E/zklock\.explicit/} } @all), 'an index entry under zklock.explicit exists');
	ok((grep { $_ eq "$root/zklock.sweeper" } @all), 'zklock.sweeper exists');
	my ($rc, $out, $err) = $old->psql('postgres', q{SELECT count(*) FROM zk_locks});
	is($rc, 0, "the 1.4 instance's zk_locks over the whole root runs without an error")
	  or diag($err);
	is(psql1($old, q{SELECT string_agg(resource || ':' || mode, ',' ORDER BY resource)
		FROM zk_locks WHERE resource IN ('roll/listed', 'roll/l/deep', 'roll/l/exp')}),
		'roll/l/deep:shared,roll/l/exp:exclusive,roll/listed:exclusive',
		"it lists the 1.5 instance's three locks");
	is(psql1($old, q{SELECT count(*) FROM zk_locks WHERE resource LIKE 'zklock.%'}), '0',
		'and no internal node as a lock');
	is(psql1($new, q{SELECT zk_lock_release_explicit('roll/l/exp')}), '1', 'the explicit lock released');
	$s->query_ok(q{SELECT zk_lock_release('roll/listed')});
	$s->query_ok(q{SELECT zk_lock_release('roll/l/deep', 'shared')});
	$s->quit;
}

# --- explicit locks of a short ttl made by both expire ----------------------
like(psql1($old, q{SELECT zk_lock_acquire_explicit('roll/exp_old', ttl => '2 s')}),
	qr/^\d+$/, 'the 1.4 instance takes an explicit lock of 2 s');
like(psql1($new, q{SELECT zk_lock_acquire_explicit('roll/exp_new', ttl => '2 s')}),
	qr/^\d+$/, 'the 1.5 instance takes an explicit lock of 2 s');
my $index = zk_path('zklock.explicit');
for my $res ('roll/exp_pre', 'roll/exp_old', 'roll/exp_new')
{
	ok(zk_wait_no_locks(zk_path($res), 20), "the explicit lock on $res expired: no node left");
}
ok( wait_until(sub { my @e = grep { $_ ne $index } zk_list_znodes($index); !@e }, timeout => 20),
	'and no index entry left under zklock.explicit')
  or diag(join("\n", zk_list_znodes($index)));

$new->stop;
$old->stop;
zk_done_check();
done_testing();
