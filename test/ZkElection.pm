# ZkElection.pm -- what the leadership tests (test/t/recipes/065, 066) share:
# sampling zk_is_leader on several instances at once, and checking that no
# two of them were ever true at the same time.
package ZkElection;

use strict;
use warnings;
use Exporter 'import';
use Test::More;
use Time::HiRes qw(time sleep);
use ZkLockTest;

our @EXPORT = qw(leaders_now start_sampling finish_sampling true_runs
  overlaps first_true_after);

# The names of the nodes whose zk_is_leader($group) is true now, asked one
# after the other (a quick look, not proof of anything at one instant).
sub leaders_now
{
	my ($group, @nodes) = @_;
	my @l;
	foreach my $n (@nodes)
	{
		my ($rc, $out) = $n->psql('postgres',
			"SELECT zk_is_leader('$group')", timeout => 20);
		push @l, $n->name if $rc == 0 && $out eq 't';
	}
	return @l;
}

# Start a sampler on each node: one statement that asks zk_is_leader every
# 20 ms for $secs seconds and returns "epoch:0|1" pairs.  A sampler whose
# backend dies (its postmaster killed) returns what it can: nothing.
sub start_sampling
{
	my ($group, $secs, @nodes) = @_;
	my $n = int($secs / 0.02);
	my @s;
	foreach my $node (@nodes)
	{
		my $s = zk_session($node, 'sampler_' . $node->name);
		$s->send(qq{SELECT string_agg(extract(epoch FROM t)::text || ':' || l::int, ' ' ORDER BY i)
FROM (SELECT i, clock_timestamp() AS t, zk_is_leader('$group') AS l, pg_sleep(0.02)
      FROM generate_series(1, $n) i) s});
		push @s, [ $node->name, $s ];
	}
	return \@s;
}

# Collect the samplers: { node name => [[epoch, 0|1], ...] }
sub finish_sampling
{
	my ($samplers, $timeout) = @_;
	my %r;
	foreach my $p (@$samplers)
	{
		my ($name, $s) = @$p;
		my $res = $s->wait($timeout // 60);
		my @pairs;
		if ($res && !$res->{exited} && $res->{sqlstate} eq '00000')
		{
			@pairs = map { [ split /:/ ] } split / /, $res->{out};
		}
		$r{$name} = \@pairs;
		eval { $s->quit; } if $res && !$res->{exited};
	}
	return \%r;
}

# Runs of true samples per node: [[name, first, last], ...]
sub true_runs
{
	my ($samples) = @_;
	my @runs;
	foreach my $name (sort keys %$samples)
	{
		my $cur;
		foreach my $p (@{ $samples->{$name} })
		{
			if ($p->[1])
			{
				$cur //= [ $name, $p->[0], $p->[0] ];
				$cur->[2] = $p->[0];
			}
			elsif ($cur)
			{
				push @runs, $cur;
				undef $cur;
			}
		}
		push @runs, $cur if $cur;
	}
	return @runs;
}

# Pairs of runs of different nodes that overlap in time (two leaders)
sub overlaps
{
	my @runs = true_runs(@_);
	my @o;
	for my $i (0 .. $#runs)
	{
		for my $j ($i + 1 .. $#runs)
		{
			my ($a, $b) = ($runs[$i], $runs[$j]);
			next if $a->[0] eq $b->[0];
			push @o, sprintf('%s [%.3f, %.3f] and %s [%.3f, %.3f]',
				$a->[0], $a->[1], $a->[2], $b->[0], $b->[1], $b->[2])
			  if $a->[1] <= $b->[2] && $b->[1] <= $a->[2];
		}
	}
	return @o;
}

# The first epoch at or after $t when node $name's samples say true
sub first_true_after
{
	my ($samples, $name, $t) = @_;
	foreach my $p (@{ $samples->{$name} // [] })
	{
		return $p->[0] if $p->[1] && $p->[0] >= $t;
	}
	return undef;
}

1;
