
# Two PostgreSQL instances, one ZooKeeper: locks are global.
#  - a lock taken on one instance is a znode in ZooKeeper, visible from the
#    other instance, and its token is the znode's czxid
#  - mutual exclusion under concurrency: 8 clients (4 per instance) x 40
#    critical sections on one resource; a checker verifies that no two
#    critical sections overlap and that fencing tokens grow with each grant
#  - SHARED holders on both instances hold at the same time
#  - zk_locks' scope and implicit, as the other instance reads them from the
#    node data, follow the holder's holds when scopes mix; a revocation
#    written into the node is not overwritten by that rewrite
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

my $hosts = zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');

# ---------------------------------------------------------------------------
# A lock held on node1 is visible in ZooKeeper and from node2.
{
	my $h = zk_session($node1, 'visible_holder');
	$h->query_ok('BEGIN');
	my $token = $h->query_ok(q{SELECT zk_lock_acquire('vis/a')});
	like($token, qr/^\d+$/, 'zk_lock_acquire returns a token');

	my @info = zk_lock_info(zk_path('vis/a'));
	is(scalar(@info), 1, 'one lock node under the resource znode');
	like($info[0][0] // '', qr{^\Q${\ zk_path('vis/a')}\E/[^/]*LOCK-EXCLUSIVE-\d{10}$},
		'lock node is <root>/vis/a/...LOCK-EXCLUSIVE-<10 digits>');
	is($info[0][1], $token, 'token is the lock node\'s czxid');
	isnt($info[0][2] // '0', '0', 'lock node is ephemeral');

	is( psql1(
			$node2,
			q{SELECT count(*) FROM zk_locks WHERE resource = 'vis/a'
			    AND granted AND instance = 'node1' AND lower(mode) = 'exclusive'}),
		'1',
		'node2 sees node1\'s exclusive lock in zk_locks');
	is( psql1(
			$node2,
			q{SELECT zk_lock_try_acquire('vis/a') IS NULL}),
		't',
		'node2 cannot take the lock node1 holds');

	$h->query_ok('COMMIT');
	ok(zk_wait_no_locks(zk_path('vis/a'), 10), 'COMMIT released the lock node');
	$h->quit;
}

# ---------------------------------------------------------------------------
# Mixed scopes, seen from the other instance (which reads the node data):
# a lock taken for the transaction and then for the session shows
# "session" after COMMIT; a parent taken implicitly and then by name is no
# longer implicit (doc/sql.md, zk_locks).
{
	my $h = zk_session($node1, 'mixed_scopes');
	my $seen = sub {
		return psql1($node2,
			q{SELECT string_agg(resource || ':' || scope || ':' || implicit, ' ' ORDER BY resource)
			    FROM zk_locks WHERE resource LIKE 'mixx%' AND instance = 'node1'});
	};
	$h->query_ok('BEGIN');
	$h->query_ok(q{SELECT zk_lock_acquire('mixx/a')});
	is($seen->(), 'mixx:transaction:true mixx/a:transaction:false',
		'node2 sees the transaction lock and its implicit parent');
	$h->query_ok(q{SELECT zk_lock_acquire_session('mixx/a')});
	$h->query_ok('COMMIT');
	my $want = 'mixx:session:true mixx/a:session:false';
	ok(wait_until(sub { $seen->() eq $want }, timeout => 10),
		'after COMMIT node2 sees both as session locks')
	  or diag('node2 sees: ' . $seen->());
	$h->query_ok(q{SELECT zk_lock_acquire_session('mixx', 'shared')});
	$want = 'mixx:session:false mixx/a:session:false';
	ok(wait_until(sub { $seen->() eq $want }, timeout => 10),
		'node2 sees the parent taken by name as not implicit')
	  or diag('node2 sees: ' . $seen->());
	$h->query_ok(q{SELECT zk_lock_release_all()});
	ok(zk_wait_no_locks(zk_path('mixx'), 10), 'released');

	# A revocation written into the node is never overwritten by such a
	# rewrite (it is checked against the node's data version): the holder
	# is idle, so the cancel does nothing, and then it takes the revoked
	# parent by name.
	$h->query_ok(q{SELECT zk_lock_acquire_session('rvx/a')});
	is(psql1($node2, q{SELECT zk_lock_revoke('rvx', 'cancel')}), '1',
		'node2 revokes the implicit parent lock of an idle holder');
	my ($parent_node) = grep { $_->[0] =~ m{^\Q${\ zk_path('rvx')}\E/[^/]+$} }
	  zk_lock_info(zk_path('rvx'));
	my $get = sub { my ($rc, $out) = zkutil('get', $parent_node->[0]); return $out; };
	like($get->(), qr/^revoke=cancel$/m, 'the revocation is in the node');
	# the cancel must have reached the idle holder before it runs anything
	ok(wait_until(sub { slurp_file($node1->logfile) =~ m{rvx/[^"]*" was revoked; canceling} },
			timeout => 10),
		"node1's worker signalled the holder");
	$h->query_ok(q{SELECT zk_lock_acquire_session('rvx', 'shared')});
	sleep(1);	# the holder's worker would have rewritten it by now
	like($get->(), qr/^revoke=cancel$/m,
		'the revocation is still in the node after the holder\'s holds changed');
	$h->query_ok(q{SELECT zk_lock_release_all()});
	ok(zk_wait_no_locks(zk_path('rvx'), 10), 'released');
	$h->quit;
}

# ---------------------------------------------------------------------------
# Mutual exclusion under concurrency.
{
	my $per_node = 4;
	my $iters    = 40;
	my $dir      = PostgreSQL::Test::Utils::tempdir('mx');
	my (@clients);

	my $ci = 0;
	foreach my $node ($node1, $node2)
	{
		for my $k (1 .. $per_node)
		{
			$ci++;
			my $name = $node->name . "_c$k";
			# The last client of each instance uses session scope and an
			# explicit release, the others transaction scope.
			my $session_scope = ($k == $per_node);
			my $sql = "\\set ON_ERROR_STOP 1\n";
			for my $i (1 .. $iters)
			{
				if ($session_scope)
				{
					$sql .= "SELECT 'T|' || zk_lock_acquire_session('mx/one');\n";
				}
				else
				{
					$sql .= "BEGIN;\nSELECT 'T|' || zk_lock_acquire('mx/one');\n";
				}
				$sql .=
				    "SELECT 'S|' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;\n"
				  . "SELECT pg_sleep(0.003);\n"
				  . "SELECT 'E|' || (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;\n";
				if ($session_scope)
				{
					$sql .= "SELECT 'R|' || zk_lock_release('mx/one');\n";
				}
				else
				{
					$sql .= "COMMIT;\n";
				}
			}
			my $file = "$dir/$name.sql";
			open(my $fh, '>', $file) or die "$file: $!";
			print $fh $sql;
			close($fh);

			my %c = (name => $name, out => '', err => '', session => $session_scope);
			local $ENV{PGAPPNAME} = $name;
			$c{h} = IPC::Run::start(
				[
					'psql', '-XAtq', '-d', $node->connstr('postgres'),
					'-f', $file
				],
				'<', \undef, '>', \$c{out}, '2>', \$c{err},
				IPC::Run::timeout(240));
			push @clients, \%c;
		}
	}
	note "started " . scalar(@clients) . " clients";

	my @intervals;
	my $all_ok = 1;
	foreach my $c (@clients)
	{
		my $ok = eval { $c->{h}->finish; 1; };
		if (!$ok)
		{
			diag("$c->{name}: $@");
			eval { $c->{h}->kill_kill; };
			$all_ok = 0;
			next;
		}
		my $rc = $c->{h}->result(0);
		if ($rc != 0 || $c->{err} ne '')
		{
			diag("$c->{name}: psql exit $rc, stderr: $c->{err}");
			$all_ok = 0;
		}
		my $cur;
		foreach my $line (split /\n/, $c->{out})
		{
			if ($line =~ /^T\|(\d+)$/)
			{
				$cur = { client => $c->{name}, token => $1 };
			}
			elsif ($line =~ /^S\|(\d+)$/ && $cur)
			{
				$cur->{start} = $1;
			}
			elsif ($line =~ /^E\|(\d+)$/ && $cur && defined $cur->{start})
			{
				$cur->{end} = $1;
				push @intervals, $cur;
				undef $cur;
			}
			elsif ($line =~ /^R\|(.*)$/)
			{
				if ($1 ne 'true')
				{
					diag("$c->{name}: zk_lock_release returned '$1'");
					$all_ok = 0;
				}
			}
			elsif ($line ne '')
			{
				diag("$c->{name}: unexpected output line: $line");
				$all_ok = 0;
			}
		}
	}
	ok($all_ok, 'all clients ran their critical sections without error');
	is(scalar(@intervals), 2 * $per_node * $iters,
		'every critical section was recorded');

	# The checker: sorted by start, each critical section starts after the
	# previous one ended, and the fencing token grows with each grant.
	my @sorted = sort { $a->{start} <=> $b->{start} } @intervals;
	my ($overlaps, $token_regressions) = (0, 0);
	for my $i (1 .. $#sorted)
	{
		my ($p, $q) = ($sorted[$i - 1], $sorted[$i]);
		if ($q->{start} < $p->{end})
		{
			$overlaps++;
			diag("overlap: $p->{client} [$p->{start},$p->{end}] token $p->{token}"
				  . " and $q->{client} [$q->{start},$q->{end}] token $q->{token}")
			  if $overlaps <= 5;
		}
		if ($q->{token} <= $p->{token})
		{
			$token_regressions++;
			diag("token did not grow: $p->{client} $p->{token} then $q->{client} $q->{token}")
			  if $token_regressions <= 5;
		}
	}
	is($overlaps, 0, 'no two critical sections overlap (across both instances)');
	is($token_regressions, 0, 'fencing tokens strictly increase in grant order');

	my %per_instance;
	$per_instance{ $_->{client} =~ s/_c\d+$//r }++ for @intervals;
	ok(($per_instance{node1} // 0) > 0 && ($per_instance{node2} // 0) > 0,
		'both instances took the lock');
	if (@sorted)
	{
		my $span = ($sorted[-1]{end} - $sorted[0]{start}) / 1e6;
		note sprintf("%d critical sections in %.2f s", scalar(@sorted), $span);
	}

	ok(zk_wait_no_locks(zk_path('mx/one'), 10), 'no lock node left under mx/one');
}

# ---------------------------------------------------------------------------
# SHARED holders on both instances hold at the same time.
{
	my $sa = zk_session($node1, 'shared_a');
	my $sb = zk_session($node2, 'shared_b');
	$sa->query_ok('BEGIN');
	$sb->query_ok('BEGIN');
	like($sa->query_ok(q{SELECT zk_lock_acquire('sh/r', 'shared')}),
		qr/^\d+$/, 'node1 takes a shared lock');

	$sb->send(q{SELECT zk_lock_acquire('sh/r', 'shared')});
	my $r = $sb->wait(15);
	ok(defined $r && $r->{sqlstate} eq '00000' && $r->{out} =~ /^\d+$/,
		'node2 takes a shared lock while node1 holds one')
	  or diag(explain($r));

	my @locks = zk_lock_nodes(zk_path('sh/r'));
	is(scalar(@locks), 2, 'two lock nodes under sh/r');
	is(scalar(grep { /LOCK-SHARED-\d{10}$/ } @locks), 2, 'both are SHARED nodes');
	is( psql1(
			$node1,
			q{SELECT string_agg(instance || ':' || lower(mode) || ':' || granted, ','
			                    ORDER BY instance)
			    FROM zk_locks WHERE resource = 'sh/r'}),
		'node1:shared:true,node2:shared:true',
		'zk_locks shows both shared locks granted, one per instance');

	# An exclusive request can't be granted meanwhile, and leaves nothing.
	is(psql1($node2, q{SELECT zk_lock_try_acquire('sh/r', 'exclusive') IS NULL}),
		't', 'exclusive try-lock fails while shared locks are held');
	ok(zk_wait_count(zk_path('sh/r'), 2, 10), 'failed try-lock left no node');

	$sa->query_ok('COMMIT');
	$sb->query_ok('COMMIT');
	ok(zk_wait_no_locks(zk_path('sh/r'), 10), 'shared locks released');
	$sa->quit;
	$sb->quit;
}

zk_done_check();
done_testing();
