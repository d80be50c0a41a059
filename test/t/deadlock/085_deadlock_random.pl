
# Deadlocks in random lock orders (issue 19): eight clients on two
# instances run a hundred jobs, each taking two of three resources in a
# random order, one call at a time; deadlocks happen and are broken (the
# victim's job catches 40P01 and is run again), every job completes, and
# the mutual-exclusion checker finds no two holders of a resource at once,
# with fencing tokens growing in grant order.
#
# Detection time: the victim of a cycle is its youngest request, the one
# whose wait closed the cycle, so its wait until 40P01 is the time the
# cycle took to be broken.  Over every deadlock of the run: the median is
# within zklock.deadlock_timeout + 1 s and the worst within twice it + 2 s
# (the issue's bounds); the figures are printed.
#
# Default run: the issue's hundred jobs with zklock.deadlock_timeout =
# 300 ms.  ZKLOCK_DEADLOCK_JOBS and ZKLOCK_DEADLOCK_TIMEOUT_MS change them
# (a hundred jobs with the 1 s of core's default took about 150 s).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $timeout_ms = $ENV{ZKLOCK_DEADLOCK_TIMEOUT_MS} // 300;
my $timeout_s = $timeout_ms / 1000;
my $jobs = $ENV{ZKLOCK_DEADLOCK_JOBS} // 100;
my $seed = $ENV{ZKLOCK_STRESS_SEED} // (time() ^ $$) % 1000000;
srand($seed);
diag("085_deadlock_random: seed $seed (ZKLOCK_STRESS_SEED), $jobs jobs");

my $conf = "zklock.deadlock_timeout = '${timeout_ms}ms'";
zk_start();
my @nodes = (zk_node('node1', extra_conf => $conf),
	zk_node('node2', extra_conf => $conf));
my %log_at = map { $_->name => -s $_->logfile } @nodes;

for my $n (@nodes)
{
	$n->safe_psql('postgres', q{
CREATE FUNCTION job(r1 text, r2 text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	tok1 bigint;
	tok2 bigint;
	t1 bigint;
	t2 bigint;
	tw timestamptz;
BEGIN
	tok1 := zk_lock_acquire(r1);
	t1 := (extract(epoch FROM clock_timestamp()) * 1e6)::bigint;
	PERFORM pg_sleep(0.05 + random() * 0.1);
	tw := clock_timestamp();
	BEGIN
		tok2 := zk_lock_acquire(r2);
	EXCEPTION WHEN deadlock_detected THEN
		RETURN 'D|' || extract(epoch FROM clock_timestamp() - tw) || '|'
			|| r1 || '|' || tok1 || '|' || t1 || '|'
			|| (extract(epoch FROM clock_timestamp()) * 1e6)::bigint;
	END;
	t2 := (extract(epoch FROM clock_timestamp()) * 1e6)::bigint;
	PERFORM pg_sleep(random() * 0.05);
	RETURN 'C|' || r1 || '|' || tok1 || '|' || t1 || '|' || r2 || '|' || tok2
		|| '|' || t2 || '|' || (extract(epoch FROM clock_timestamp()) * 1e6)::bigint;
END
$$;
	});
}

my @res = ('dr/a', 'dr/b', 'dr/c');
my @queue;
for (1 .. $jobs)
{
	my @r = sort { rand() <=> 0.5 } @res;
	push @queue, [ $r[0], $r[1] ];
}

my @clients;
for my $i (0 .. 7)
{
	my $node = $nodes[ $i % 2 ];
	push @clients, { s => zk_session($node, "c$i"), job => undef };
}

my (@sections, @detect);
my ($done, $errors) = (0, 0);
my $deadline = time() + 240;
while ($done < $jobs && time() < $deadline)
{
	my $busy = 0;
	for my $c (@clients)
	{
		if (defined $c->{job} && $c->{s}->done)
		{
			my $r = $c->{s}->wait(5);
			my $out = $r ? $r->{out} : '';
			if ($out =~ /^C\|([^|]+)\|(\d+)\|(\d+)\|([^|]+)\|(\d+)\|(\d+)\|(\d+)$/)
			{
				push @sections, { res => $1, token => $2, start => $3, end => $7 };
				push @sections, { res => $4, token => $5, start => $6, end => $7 };
				$done++;
				undef $c->{job};
			}
			elsif ($out =~ /^D\|([\d.]+)\|([^|]+)\|(\d+)\|(\d+)\|(\d+)$/)
			{
				push @detect, $1;
				push @sections, { res => $2, token => $3, start => $4, end => $5 };
				push @queue, $c->{job};		# run again
				undef $c->{job};
			}
			else
			{
				diag("c: unexpected result: " . explain($r));
				$errors++;
				undef $c->{job};
			}
		}
		if (!defined $c->{job} && @queue)
		{
			$c->{job} = shift @queue;
			$c->{s}->send("SELECT job('$c->{job}[0]', '$c->{job}[1]')");
		}
		$busy++ if defined $c->{job};
	}
	last if !$busy && !@queue;
	Time::HiRes::sleep(0.01);
}

is($done, $jobs, "all $jobs jobs completed");
is($errors, 0, 'no job ended in another error');

# The checker, per resource: sorted by start, each section starts after
# the previous one ended, and the fencing token grows.
my ($overlaps, $regressions) = (0, 0);
for my $r (@res)
{
	my @s = sort { $a->{start} <=> $b->{start} } grep { $_->{res} eq $r } @sections;
	for my $i (1 .. $#s)
	{
		my ($p, $q) = ($s[ $i - 1 ], $s[$i]);
		$overlaps++ if $q->{start} < $p->{end};
		$regressions++ if $q->{token} <= $p->{token};
	}
}
is($overlaps, 0, 'no two holders of a resource at once (across both instances)');
is($regressions, 0, 'fencing tokens grow in grant order');

my $n = scalar @detect;
my @d = sort { $a <=> $b } @detect;
my $median = $n ? $d[ int(($n - 1) / 2) ] : 0;
my $worst = $n ? $d[-1] : 0;
diag(sprintf("085_deadlock_random: %d deadlocks broken; detection median %.2f s, worst %.2f s (zklock.deadlock_timeout %d ms)",
		$n, $median, $worst, $timeout_ms));
# the issue's figures are over at least 20 deadlocks (a hundred jobs give
# about 110); the default run needs only some to have happened
my $want = $jobs >= 100 ? 20 : 5;
ok($n >= $want, "at least $want deadlocks happened ($n)");
ok($median <= $timeout_s + 1, "median detection within the timeout + 1 s");
ok($worst <= 2 * $timeout_s + 2, "worst detection within twice the timeout + 2 s");

# each 40P01 is one broken cycle, logged by its victim
my $broken = 0;
$broken += zk_log_count($_, qr/deadlock broken/, $log_at{ $_->name }) for @nodes;
is($broken, $n, 'one "deadlock broken" line per victim, no other 40P01');
is(scalar(zk_log_crashes($nodes[0])) + scalar(zk_log_crashes($nodes[1])), 0, 'no crash');
$_->{s}->quit for @clients;
done_testing();
