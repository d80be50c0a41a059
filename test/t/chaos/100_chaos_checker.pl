
# The chaos suite's checker (ZkChaos::judge) on made-up histories: it must
# find what it is there to find, or the chaos tests prove nothing.  No
# server is started.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkChaos;

use Test::More;

# A row: [client, seq, token, start, end] (microseconds).
sub rows
{
	return [
		map {
			{
				client   => $_->[0],
				instance => ($_->[0] =~ s/_c\d+$//r),
				seq      => $_->[1],
				token    => $_->[2],
				start    => $_->[3],
				end      => $_->[4]
			}
		} @_
	];
}

# The client log matching rows (all committed), plus extra transactions.
sub txns_for
{
	my ($rows, @extra) = @_;
	return [
		(map {
			{ client => $_->{client}, seq => $_->{seq}, outcome => 'commit',
			  token => $_->{token}, t_sec => '0.01', t_com => '0.002', msg => '' }
		} @$rows),
		@extra
	];
}

sub violations
{
	my ($rows, $txns, %p) = @_;
	my ($v) = ZkChaos::judge(rows => $rows, txns => $txns // txns_for($rows), %p);
	note "  $_" for @$v;
	return scalar @$v;
}

my $good = rows(
	[ 'node1_c1', 1, 100, 1000, 1100 ],
	[ 'node2_c1', 1, 105, 1150, 1200 ],
	[ 'node1_c2', 1, 230, 1201, 1300 ],
	[ 'node2_c2', 1, 231, 1400, 1500 ]);
is(violations($good), 0, 'a clean history has no violation');

# shuffled input is sorted by the checker
is(violations([ reverse @$good ]), 0, 'order of the rows does not matter');

is( violations(rows(
			[ 'node1_c1', 1, 100, 1000, 1100 ],
			[ 'node2_c1', 1, 105, 1099, 1200 ])),
	1, 'two sections overlapping by 1 us: one violation');

# a long section (a commit after its lock was lost) overlaps several later ones
is( violations(rows(
			[ 'node1_c1', 1, 100, 1000, 5000 ],
			[ 'node2_c1', 1, 105, 1100, 1200 ],
			[ 'node2_c2', 1, 106, 1300, 1400 ],
			[ 'node2_c3', 1, 107, 6000, 6100 ])),
	2, 'a section spanning two later ones: two overlaps');

is( violations(rows(
			[ 'node1_c1', 1, 100, 1000, 1100 ],
			[ 'node2_c1', 1, 99,  1200, 1300 ])),
	1, 'a token going backwards');

is( violations(rows(
			[ 'node1_c1', 1, 100, 1000, 1100 ],
			[ 'node2_c1', 1, 100, 1200, 1300 ])),
	1, 'the same token granted twice');

{
	my $r = rows([ 'node1_c1', 1, 100, 1000, 1100 ], [ 'node1_c1', 2, 101, 1200, 1300 ]);
	my $t = txns_for($r);
	$t->[1]{outcome} = 'fenced';
	is(violations($r, $t), 1, 'a row for a transaction whose COMMIT raised 55P03');
	$t->[1]{outcome} = 'conn_lost:commit';
	is(violations($r, $t), 0, 'a row for a transaction whose connection died in COMMIT is fine');
	$t->[1]{outcome} = 'conn_lost:section';
	is(violations($r, $t), 1, 'a row for a transaction that died before COMMIT');
}

{
	my $r = rows([ 'node1_c1', 1, 100, 1000, 1100 ]);
	my $t = txns_for($r,
		{ client => 'node1_c1', seq => 2, outcome => 'commit', token => 101,
		  t_sec => '0.01', t_com => '0.01', msg => '' });
	is(violations($r, $t), 1, 'a successful COMMIT without its row');
	$t = txns_for($r);
	$t->[0]{token} = 99;
	is(violations($r, $t), 1, 'a row whose token is not the one returned');
	is(violations($r, []), 1, 'a row no client knows of');
	is(violations($r, [], killed => { node1_c1 => 1 }), 0,
		'... unless that client was killed');
}

{
	my $r = rows([ 'node1_c1', 1, 100, 1000, 1100 ]);
	my $t = txns_for($r,
		{ client => 'node1_c1', seq => 2, outcome => 'hang:section', token => '',
		  t_sec => '40.0', t_com => '', msg => 'no answer' });
	my ($v, $hangs) = ZkChaos::judge(rows => $r, txns => $t);
	is($hangs, 1, 'a hung statement is counted');
	is(scalar @$v, 1, '... and is a violation');
	$t = txns_for($r);
	$t->[0]{t_com} = $ZkChaos::SESSION_TIMEOUT + $ZkChaos::CONNECT_TIMEOUT + $ZkChaos::MARGIN + 1;
	is(violations($r, $t), 1, 'a COMMIT that waited past its bound');
	$t = txns_for($r);
	$t->[0]{t_sec} = $ZkChaos::ACQUIRE_TIMEOUT + $ZkChaos::CONNECT_TIMEOUT + $ZkChaos::MARGIN + 1;
	is(violations($r, $t), 1, 'an acquire that waited past its bound');
}

# A commit after another instance was granted the lock, where that other
# transaction did not commit (no row of its own to overlap with): the grant
# in the clients' log is held against the committed sections.
{
	my $r = rows([ 'node1_c1', 1, 100, 1000, 5000 ], [ 'node2_c1', 2, 102, 6000, 6100 ]);
	my $granted = sub {
		my ($at, $outcome) = @_;
		return { client => 'node2_c1', seq => 1, outcome => $outcome, token => 101,
			t_sec => '0.01', t_com => '0.01', grant => $at, msg => '' };
	};
	is(violations($r, txns_for($r, $granted->(3000, 'fenced'))), 1,
		'a commit that lands after another (fenced) transaction was granted');
	is(violations($r, txns_for($r, $granted->(3000, 'conn_lost:section'))), 1,
		'... or after a grant whose connection was lost');
	is(violations($r, txns_for($r, $granted->(5500, 'fenced'))), 0,
		'a grant after the commit is fine');
	is(violations($r, txns_for($r, $granted->('', 'acquire_error:55P03'))), 0,
		'a request that was not granted is fine');
	my $t = txns_for($r, $granted->(3000, 'fenced'));
	$_->{grant} = $_->{client} eq 'node1_c1' ? 1000 : 6000 for @$t[0, 1];
	is(violations($r, $t), 1, '... the committed sections\' own grants count once (as rows)');
}

# A writer: one session-lock hold (one token, its grant as every row's
# start) over several transactions is one section.
{
	my @w = map { [ 'writer_node1_1', $_, 200, 1000, 1000 + 100 * $_ ] } 1 .. 3;
	my $r = rows(@w, [ 'node2_c1', 1, 201, 1400, 1500 ]);
	$_->{instance} = 'node1' for grep { $_->{client} =~ /^writer/ } @$r;
	is(violations($r), 0, 'a writer\'s transactions under one hold are one section');
	$r = rows(@w, [ 'node2_c1', 1, 201, 1250, 1260 ]);
	$_->{instance} = 'node1' for grep { $_->{client} =~ /^writer/ } @$r;
	is(violations($r), 1, 'a writer that commits after another was granted');
	my $t = txns_for($r,
		{ client => 'writer_node1_1', seq => 4, outcome => 'fenced', token => 200,
		  t_sec => '', t_com => '0.01', grant => 1000, msg => '' });
	$r = rows(@w);
	is(violations($r, txns_for($r, $t->[-1])), 0,
		'... its fenced transaction (same hold) is not another grant');
}

done_testing();
