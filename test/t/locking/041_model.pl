
# Model-based checker (issue 9, "Tests that find the next bug"): random
# operation sequences from eight backends on two instances (four each) and
# one controller per instance, checked against a model of what may be held.
#
# Operations: acquire and try-acquire in both scopes (with and without
# parents, timeouts from 0 to 3 s), lock sets (all four functions),
# BEGIN / COMMIT / ROLLBACK, SAVEPOINT / ROLLBACK TO / RELEASE, zk_lock_release
# and zk_lock_release_all, explicit locks and zk_lock_release_explicit; from
# the controllers: pg_cancel_backend, pg_terminate_backend, zk_lock_revoke
# (cancel, terminate) and zk_lock_force_release.
#
# The model only learns from outcomes: a hold is "definite" from the moment
# its acquire returned a token until a command that may release it is sent
# (COMMIT, ROLLBACK, ROLLBACK TO, a release, a terminate) or until an error
# aborts the (sub)transaction that took it; a waiting acquire
# is pending and claims nothing; a cancelled or failed one adds nothing.  A
# backend touched by a force release or a revocation is set aside (its holds
# are no longer claimed) and reset after a grace period.  Checked:
#  - never two conflicting definite holders of a resource across all
#    backends and explicit locks (Hive's rule: EXCLUSIVE conflicts with
#    everything, SHARED with EXCLUSIVE; parents are held SHARED implicitly);
#  - every definite hold is backed by its node, granted, in ZooKeeper
#    (snapshots of the tree read with zkutil.py while the load runs, not
#    through the extension);
#  - the fencing tokens of conflicting grants of a resource increase in the
#    order the grants are seen (tokens follow the grants, not the replies:
#    an explicit grant whose reply comes late may have been removed by an
#    UNLOCK meanwhile, and others granted after it, with higher tokens; a
#    conflict of a late explicit grant is excused only by an UNLOCK of its
#    resource and mode, sent before the conflicting grant was seen, that
#    removed a node, see check_grant);
#  - a transaction whose lock node was force-released cannot COMMIT once the
#    worker has had 1.5 s to notice;
#  - every error has an expected SQLSTATE; no crash in the server logs; the
#    worker pid is unchanged; nothing is left in ZooKeeper at the end.
#
# Default: at most 3000 operations or 30 s (about 45 s in all).  Longer:
#   ZKLOCK_MODEL_STEPS=50000        (then at most ZKLOCK_MODEL_SECONDS, 3600)
#   ZKLOCK_MODEL_SEED=N             replay the random choices of a run (the
#                                   seed is printed; timing still differs)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $SEED  = $ENV{ZKLOCK_MODEL_SEED} // (time() ^ $$) % 1000000;
my $STEPS = $ENV{ZKLOCK_MODEL_STEPS} // 3000;
my $MAXSECS = $ENV{ZKLOCK_MODEL_SECONDS} // ($ENV{ZKLOCK_MODEL_STEPS} ? 3600 : 30);
my $PER_NODE = 4;
my $GRACE = 1.5;    # seconds a worker gets to notice a force-released node
srand($SEED);
diag("041_model: seed $SEED (ZKLOCK_MODEL_SEED), at most $STEPS steps or $MAXSECS s");

# 40P01: since 1.6 a deadlock among the backends' random orders (one call
# at a time, so lock sets do not avoid it) is broken by zklock's detector
# instead of ending by a timeout (55P03); either ends the request unmet.
my %EXPECTED = map { $_ => 1 } qw(55P03 57014 57P01 25P02 40P01);

zk_start();
my $conf = "zklock.sweep_interval = '500ms'\nrestart_after_crash = on\n";
my @nodes = (zk_node('node1', extra_conf => $conf), zk_node('node2', extra_conf => $conf));
my %worker_pid = map { $_->name => psql1($_, 'SELECT worker_pid FROM zk_lock_status') } @nodes;

# ---------------------------------------------------------------------------
# Directed checks: an acquire of a child that fails (timeout or cancel)
# inside a savepoint aborts that subtransaction only: the parent lock the
# transaction took before the savepoint stays held until ROLLBACK TO and
# after it.  (Without a savepoint the error aborts the whole transaction and
# its locks go at once, as PostgreSQL's own locks do.)  Session locks stay.
{
	my $blk = zk_session($nodes[0], 'directed_blocker');
	$blk->query_ok(q{SELECT zk_lock_acquire_session('dp/a', 'shared', parents => false)});
	my $a = zk_session($nodes[0], 'directed_holder');
	my $refused = sub {
		return psql1($nodes[1], q{SELECT coalesce(zk_lock_try_acquire('dp', 'exclusive')::text, 'refused')});
	};
	foreach my $case (['savepoint', 'timeout'], ['savepoint', 'cancel'], ['session', 'timeout'])
	{
		my ($scope, $how) = @$case;
		my $sfx = $scope eq 'session' ? '_session' : '';
		$a->query_ok('BEGIN') if $scope eq 'savepoint';
		$a->query_ok("SELECT zk_lock_acquire$sfx('dp', 'shared')");
		$a->query_ok('SAVEPOINT s1') if $scope eq 'savepoint';
		# (the cancel must come before the timeout: on a loaded machine the
		# wait for the waiting state and the cancel took over 1 s)
		my $tmo = $how eq 'cancel' ? '15 s' : '1 s';
		$a->send("SELECT zk_lock_acquire$sfx('dp/a', 'exclusive', '$tmo')");
		if ($how eq 'cancel')
		{
			wait_for_waiting($nodes[0], $a->pid);
			psql1($nodes[0], 'SELECT pg_cancel_backend(' . $a->pid . ')');
		}
		my $r = $a->wait(20);
		is($r && $r->{sqlstate}, $how eq 'cancel' ? '57014' : '55P03', "directed: the child's acquire fails ($scope, $how)");
		is($refused->(), 'refused',
			"directed: a failed acquire of a child ($scope, $how) leaves the parent lock taken before it");
		if ($scope eq 'savepoint')
		{
			$a->query_ok('ROLLBACK TO SAVEPOINT s1');
			is($refused->(), 'refused', "directed: ... and after ROLLBACK TO SAVEPOINT ($how)");
		}
		$a->query_ok($scope eq 'session' ? 'SELECT zk_lock_release_all()' : 'ROLLBACK');
	}
	$a->quit;
	$blk->quit;
	ok(zk_wait_no_locks(zk_path('dp'), 10), 'directed: nothing left');
}

my @RES = qw(h h/a h/b h/a/x h/a/y h/b/z q q/r);
my @LEAF = qw(h/a/x h/a/y h/b/z q/r h/a h/b);

sub parents_of
{
	my ($r) = @_;
	my @p;
	my @seg = split m{/}, $r;
	push @p, join('/', @seg[ 0 .. $_ ]) for 0 .. $#seg - 1;
	return @p;
}
sub conflicts { return $_[0] eq 'exclusive' || $_[1] eq 'exclusive'; }
sub pick { return $_[ int(rand(@_)) ]; }
sub rres { return rand() < 0.6 ? pick(@LEAF) : pick(@RES); }
sub rmode { return rand() < 0.5 ? 'shared' : 'exclusive'; }
sub rtmo { return pick('0', '50 ms', '300 ms', '1 s', '3 s'); }

# ---------------------------------------------------------------------------
# state

my @B;           # backends: slot, node, s, units, in_txn, aborted, sp, pending, gen, ...
my @C;           # controllers, one per node
my @explicit;    # { res, mode, token, slot }
my %disturbed;   # resource -> time of the last force release / revocation sent
my %grants;      # resource -> [ [token, mode, time seen] ... ] grants seen
my @violations;
my (%errors, %unexpected, @trace, %stats, %notes);
my %unlocks;     # "res|mode" -> zk_lock_release_explicit commands sent
my @suspects;    # conflicts of late explicit grants an UNLOCK may explain
my $t0 = time();

sub tlog
{
	my ($msg) = @_;
	push @trace, sprintf('%8.3f %s', time() - $t0, $msg);
	return;
}

sub violation
{
	my ($what) = @_;
	tlog("VIOLATION $what");
	push @violations, "$what (seed $SEED, at +" . sprintf('%.1f', time() - $t0) . ' s)';
	return;
}

sub new_session
{
	my ($node, $name) = @_;
	my $s = eval {
		my $s = zk_session_as($node, $name, undef);
		$s->query_ok("SET statement_timeout = '30s'");
		$s;
	};
	return $s;
}

sub reset_backend_state
{
	my ($b) = @_;
	$b->{units}   = [];
	$b->{in_txn}  = 0;
	$b->{aborted} = 0;
	$b->{sp}      = [];
	$b->{pending} = undef;
	$b->{tainted} = 0;
	$b->{dying}   = 0;
	$b->{revoked} = 0;
	$b->{taint_ops} = [];
	delete $b->{dying_since};
	delete $b->{probed};
	delete $b->{fence_op};
	delete $b->{fence_res};
	$b->{gen}++;
	return;
}

for my $ni (0 .. $#nodes)
{
	for my $k (1 .. $PER_NODE)
	{
		my $b = { slot => scalar(@B), node => $nodes[$ni], inst => $nodes[$ni]->name, gen => 0 };
		$b->{name} = "b$b->{slot}";
		$b->{s} = new_session($b->{node}, $b->{name}) or BAIL_OUT("session $b->{name}");
		reset_backend_state($b);
		push @B, $b;
	}
	push @C, { node => $nodes[$ni], name => 'ctl' . $nodes[$ni]->name,
		s => new_session($nodes[$ni], 'ctl' . $nodes[$ni]->name) };
}
$_->{s} or BAIL_OUT("controller session") foreach @C;

# what a backend holds for sure: resource -> mode
sub effective
{
	my ($b, $for_claim) = @_;
	my %eff;
	# while a command runs in a transaction it may fail, and the error
	# aborts the innermost (sub)transaction at once: its locks go before
	# the model hears of the error, so they are not claimed meanwhile
	my $inner = $for_claim && $b->{pending} && $b->{in_txn} ? scalar(@{ $b->{sp} }) : undef;
	foreach my $u (@{ $b->{units} })
	{
		next if defined $inner && $u->{scope} eq 't' && $u->{level} >= $inner;
		my @add = ([ $u->{res}, $u->{mode} ]);
		push @add, map { [ $_, 'shared' ] } parents_of($u->{res}) if $u->{parents};
		foreach my $a (@add)
		{
			$eff{ $a->[0] } = 'exclusive' if $a->[1] eq 'exclusive';
			$eff{ $a->[0] } //= 'shared';
		}
	}
	return \%eff;
}

# a backend whose holds the model claims now
sub claimable
{
	my ($b) = @_;
	return 0 if $b->{tainted} || $b->{dying} || !$b->{s};
	return 0 if $b->{pending} && $b->{pending}{releasing};
	return 1;
}

# When the model first saw $b hold $res (itself or as a parent) in a mode
# that conflicts with $mode, of the holds it has now
sub held_since
{
	my ($b, $res, $mode) = @_;
	my $since;
	foreach my $u (@{ $b->{units} })
	{
		my $m;
		$m = $u->{mode} if $u->{res} eq $res;
		$m //= 'shared' if $u->{parents} && grep { $_ eq $res } parents_of($u->{res});
		next unless defined $m && conflicts($m, $mode);
		$since = $u->{obs} if !defined $since || $u->{obs} < $since;
	}
	return $since;
}

# A new grant of (res, mode) to $who seen now: no other definite holder may
# conflict; its token must be above every conflicting earlier grant's.
#
# An explicit grant is seen when its reply comes, which may be long after
# the grant (its backend stalled, or the model's loop was busy elsewhere):
# meanwhile its node, a granted lock, may have been removed by an UNLOCK of
# its resource and mode (doc/sql.md, zk_lock_release_explicit: UNLOCK
# removes the granted explicit locks), and conflicting locks granted after
# that, with higher tokens, seen before this reply.  $removers are the
# UNLOCKs that may have removed it (sent while it was pending and not held
# off by an EXCLUSIVE explicit lock, or running when it was sent).  A
# conflict with a grant seen at time T is explained so only by one of them
# sent before T (the removal came before that grant); it is kept in
# @suspects and judged when they are done: if none of them removed a node,
# it is a violation after all.
sub check_grant
{
	my ($who, $b, $res, $mode, $token, $sent, $pending_kind, $removers) = @_;
	return if ($disturbed{$res} // -1) >= $sent;
	my $report = sub {
		my ($msg, $seen) = @_;
		my @by = grep { defined $seen && $_->{sent} < $seen } @{ $removers // [] };
		if (@by) { push @suspects, { msg => $msg, by => \@by }; }
		else { violation($msg); }
	};
	foreach my $o (@B)
	{
		next if defined $b && $o == $b;
		next unless claimable($o);
		my $m = effective($o, 1)->{$res} or next;
		$report->("$who was granted $res $mode while $o->{name} ($o->{inst} pid "
			  . $o->{s}->pid . ") holds it $m" . ($pending_kind ? ' (finding 4: an explicit lock granted without its node)' : ''),
			held_since($o, $res, $mode))
		  if conflicts($m, $mode);
	}
	foreach my $e (@explicit)
	{
		next unless $e->{res} eq $res;
		next if defined $pending_kind && $pending_kind eq 'explicit' && defined $token && $e->{token} == $token;
		next if ($e->{released} // 0);
		$report->("$who was granted $res $mode while explicit lock $e->{mode} (token $e->{token}, taken by $e->{by}) holds it"
			  . ' (finding 4: explicit locks granted twice or without a node)', $e->{obs})
		  if conflicts($e->{mode}, $mode);
	}
	if (defined $token)
	{
		foreach my $g (@{ $grants{$res} // [] })
		{
			next unless conflicts($g->[1], $mode) && $g->[0] != $token;
			$report->("fencing token of $res went backwards: $who got $token ($mode) after $g->[0] ($g->[1]"
				  . sprintf(', seen at +%.3f s; this request was sent at +%.3f s)', $g->[2] - $t0, $sent - $t0)
				  . ($pending_kind ? ' (finding 4: an explicit request granted after its node was deleted)' : ''), $g->[2])
			  if $g->[0] > $token;
		}
		push @{ $grants{$res} }, [ $token, $mode, time() ];
	}
	return;
}

# Judge the suspects whose UNLOCKs are done (all of them, at the end): one
# that removed a node explains the conflict; none did: a violation.
sub judge_suspects
{
	my ($final) = @_;
	my @keep;
	foreach my $x (@suspects)
	{
		next if grep { ($_->{removed} // 0) > 0 } @{ $x->{by} };
		if (grep { !defined $_->{done} } @{ $x->{by} })
		{
			push @keep, $x unless $final;    # (an UNLOCK lost with its session: unknown)
			next;
		}
		violation("$x->{msg}; no UNLOCK that could explain it removed a node");
	}
	@suspects = @keep;
	return;
}

# ---------------------------------------------------------------------------
# operations of a backend

sub plain_arr { return "ARRAY['" . join("','", @_) . "']"; }

sub choose_op
{
	my ($b) = @_;
	my @w;    # [weight, sub returning an op]
	my $scope_t = $b->{in_txn} ? 1 : 0;
	my $acq = sub {
		my ($session, $try) = @_;
		my ($r, $m) = (rres(), rmode());
		my $par = rand() < 0.8 ? 'true' : 'false';
		my $fn = ($try ? 'zk_lock_try_acquire' : 'zk_lock_acquire') . ($session ? '_session' : '');
		my $sql = $try ? "SELECT $fn('$r', '$m', $par)" : "SELECT $fn('$r', '$m', '" . rtmo() . "', $par)";
		return { kind => 'acquire', sql => $sql, items => [ [ $r, $m, $par eq 'true' ] ],
			scope => $session ? 's' : 't' };
	};
	my $set = sub {
		my ($session, $try) = @_;
		my %seen;
		my @r = grep { !$seen{$_}++ } map { rres() } 1 .. 1 + int(rand(3));
		my @m = map { rmode() } @r;
		my $fn = ($try ? 'zk_lock_try_acquire_all' : 'zk_lock_acquire_all') . ($session ? '_session' : '');
		my $sql = "SELECT $fn(" . plain_arr(@r) . ', ' . plain_arr(@m) . ($try ? '' : ", '" . rtmo() . "'") . ')';
		return { kind => 'acquire', set => 1, sql => $sql,
			items => [ map { [ $r[$_], $m[$_], 1 ] } 0 .. $#r ], scope => $session ? 's' : 't' };
	};
	push @w, [ 10, sub { $acq->(1, 0) } ], [ 5, sub { $acq->(1, 1) } ];
	push @w, [ 3, sub { $set->(1, 0) } ], [ 2, sub { $set->(1, 1) } ];
	my @su = grep { $_->{scope} eq 's' } @{ $b->{units} };
	push @w, [ 8, sub {
			my $u = @su && rand() < 0.9 ? pick(@su) : { res => rres(), mode => rmode() };
			return { kind => 'release', sql => "SELECT zk_lock_release('$u->{res}', '$u->{mode}')",
				res => $u->{res}, mode => $u->{mode}, releasing => 1 };
		} ];
	push @w, [ 2, sub { { kind => 'release_all', sql => 'SELECT zk_lock_release_all()', releasing => 1 } } ];
	push @w, [ 4, sub {
			my ($r, $m) = (pick(@LEAF), rmode());
			return { kind => 'explicit', sql => "SELECT zk_lock_acquire_explicit('$r', '$m', ttl => '1 hour', timeout => '"
				  . pick('0', '100 ms', '1 s', '3 s') . "')", items => [ [ $r, $m, 0 ] ] };
		} ];
	push @w, [ 4, sub {
			my $e = @explicit && rand() < 0.8 ? pick(@explicit) : { res => pick(@LEAF), mode => rmode() };
			return { kind => 'release_explicit', sql => "SELECT zk_lock_release_explicit('$e->{res}', '$e->{mode}')",
				res => $e->{res}, mode => $e->{mode} };
		} ];
	if (!$b->{in_txn})
	{
		push @w, [ 12, sub { { kind => 'begin', sql => 'BEGIN' } } ];
	}
	else
	{
		push @w, [ 12, sub { $acq->(0, 0) } ], [ 5, sub { $acq->(0, 1) } ];
		push @w, [ 3, sub { $set->(0, 0) } ], [ 2, sub { $set->(0, 1) } ];
		push @w, [ 6, sub { { kind => 'commit', sql => 'COMMIT', releasing => 1 } } ];
		push @w, [ 3, sub { { kind => 'rollback', sql => 'ROLLBACK', releasing => 1 } } ];
		push @w, [ 4, sub { my $n = 'sp' . int(rand(1000)); { kind => 'savepoint', sql => "SAVEPOINT $n", name => $n } } ]
		  if @{ $b->{sp} } < 4;
		if (@{ $b->{sp} })
		{
			push @w, [ 4, sub {
					my $i = int(rand(@{ $b->{sp} }));
					{ kind => 'rollback_to', sql => "ROLLBACK TO SAVEPOINT $b->{sp}[$i]", idx => $i, releasing => 1 };
				} ];
			push @w, [ 2, sub {
					my $i = int(rand(@{ $b->{sp} }));
					{ kind => 'release_sp', sql => "RELEASE SAVEPOINT $b->{sp}[$i]", idx => $i };
				} ];
		}
	}
	my $tot = 0;
	$tot += $_->[0] for @w;
	my $x = rand($tot);
	foreach my $c (@w)
	{
		return $c->[1]->() if ($x -= $c->[0]) < 0;
	}
	return $w[-1][1]->();
}

sub send_op
{
	my ($b, $op) = @_;
	$op->{sent} = time();
	$op->{gen_at_send} = $b->{gen};
	$b->{gen}++ if $op->{releasing};
	if ($op->{kind} eq 'release_explicit')
	{
		# A waiting explicit request of (res, mode) is not the caller's lock
		# and must survive.  It cannot have been granted before the release
		# lists the nodes when an EXCLUSIVE one is held now (finding 4's
		# case); otherwise it may have been granted and released: not judged.
		my $blocked = $op->{mode} eq 'exclusive'
		  && grep { $_->{res} eq $op->{res} && $_->{mode} eq 'exclusive' && !$_->{released} } @explicit;
		foreach my $o (@B)
		{
			my $p = $o->{pending} or next;
			next unless $p->{kind} eq 'explicit' && $p->{items}[0][0] eq $op->{res} && $p->{items}[0][1] eq $op->{mode};
			next if $blocked;
			$p->{maybe_released} = 1;
			push @{ $p->{removers} }, $op;
		}
		push @{ $unlocks{"$op->{res}|$op->{mode}"} }, $op;
		# every explicit lock of (res, mode) may go from now on
		$_->{released} = 1 foreach grep { $_->{res} eq $op->{res} && $_->{mode} eq $op->{mode} } @explicit;
	}
	$b->{pending} = $op;
	$b->{s}->send($op->{sql});
	$stats{ops}++;
	tlog("$b->{name}/$b->{inst}/" . $b->{s}->pid . " > $op->{sql}");
	return;
}

sub tokens_of
{
	my ($out) = @_;
	$out //= '';
	return () if $out eq '';
	$out =~ s/^\{|\}$//g;
	return split /,/, $out;
}

# The worker of a node stopped (crashed: reported on its own): every lock of
# the node is lost, so the model claims none of them any more.
sub worker_gone
{
	my ($node) = @_;
	my $op = { sent => time(), done => time() };
	foreach my $b (grep { $_->{node} == $node } @B)
	{
		taint($b, 'worker restart', $op);
	}
	$disturbed{$_} = time() + 10 foreach @RES;
	return;
}

# An error in a transaction aborts the innermost (sub)transaction at once:
# its transaction-level locks go (PostgreSQL releases its own locks there
# too); the block then ignores commands until ROLLBACK (TO SAVEPOINT).
sub txn_error
{
	my ($b) = @_;
	return unless $b->{in_txn};
	if (!$b->{aborted})
	{
		my $inner = scalar(@{ $b->{sp} });
		$b->{units} = [ grep { $_->{scope} eq 's' || $_->{level} < $inner } @{ $b->{units} } ];
		$b->{gen}++;
	}
	$b->{aborted} = 1;
	return;
}

# the result of a backend's command
sub on_result
{
	my ($b, $r) = @_;
	my $op = $b->{pending};
	$b->{pending} = undef;
	my @errs = zk_errors_of($r->{err});
	tlog("$b->{name} < " . ($r->{exited} ? 'EXITED ' : '') . "$r->{sqlstate} "
		  . substr($r->{out} // '', 0, 60) . ' ' . join(' ', map { "$_->[1] $_->[2]" } @errs));
	foreach my $e (@errs)
	{
		$errors{ $e->[1] }++;
		worker_gone($b->{node}) if $e->[1] eq '08006' || $e->[1] eq '55000' || $e->[1] eq '57P02';
		next if $EXPECTED{ $e->[1] };
		push @{ $unexpected{ $e->[1] } }, "$b->{name}: $e->[0] $e->[1] $e->[2] [$op->{sql}]";
	}
	my $failed = @errs || $r->{sqlstate} ne '00000';

	if ($r->{exited} || !$b->{s}->alive)
	{
		push @{ $unexpected{'session lost'} }, "$b->{name}: psql exited without a terminate: $r->{err}"
		  unless $b->{dying} || $b->{revoked} || $r->{err} =~ /57P01/;
		$stats{exits}++;
		$b->{s} = undef;
		return;
	}

	my $k = $op->{kind};
	if ($k eq 'begin')
	{
		($b->{in_txn}, $b->{aborted}, $b->{sp}) = (1, 0, []) unless $failed;
	}
	elsif ($k eq 'commit' || $k eq 'rollback')
	{
		if ($k eq 'commit' && !$failed && !$b->{aborted} && $op->{fence_res})
		{
			violation("$b->{name} ($b->{inst}) committed although its lock on $op->{fence_res} was force-released "
				  . sprintf('%.1f', $op->{sent} - $op->{fence_at}) . ' s before (commit fence)');
		}
		$b->{units} = [ grep { $_->{scope} eq 's' } @{ $b->{units} } ];
		($b->{in_txn}, $b->{aborted}, $b->{sp}) = (0, 0, []);
	}
	elsif ($k eq 'savepoint')
	{
		if ($failed) { txn_error($b); }
		else { push @{ $b->{sp} }, $op->{name}; }
	}
	elsif ($k eq 'rollback_to')
	{
		if (!$failed)
		{
			my $depth = $op->{idx} + 1;
			$b->{units} = [ grep { $_->{scope} eq 's' || $_->{level} < $depth } @{ $b->{units} } ];
			splice(@{ $b->{sp} }, $depth);
			$b->{aborted} = 0;
		}
	}
	elsif ($k eq 'release_sp')
	{
		if ($failed) { txn_error($b); }
		else
		{
			my $depth = $op->{idx};
			$_->{level} = $depth foreach grep { $_->{scope} eq 't' && $_->{level} > $depth } @{ $b->{units} };
			splice(@{ $b->{sp} }, $depth);
		}
	}
	elsif ($k eq 'acquire')
	{
		if ($failed)
		{
			txn_error($b);
			return;
		}
		my @tok = tokens_of($r->{out});
		return unless @tok;    # a try that was not granted
		# outside a transaction a transaction-level lock ends with the statement
		return if $op->{scope} eq 't' && !$b->{in_txn};
		my $before = effective($b);
		my $level = scalar(@{ $b->{sp} });
		for my $i (0 .. $#{ $op->{items} })
		{
			my ($res, $mode, $par) = @{ $op->{items}[$i] };
			push @{ $b->{units} }, { res => $res, mode => $mode, parents => $par,
				scope => $op->{scope}, level => $level, token => $tok[$i], obs => time() };
		}
		my $after = effective($b);
		my %tok_of = map { $op->{items}[$_][0] => $tok[$_] } 0 .. $#{ $op->{items} };
		foreach my $res (sort keys %$after)
		{
			next if $before->{$res} && $before->{$res} eq $after->{$res};
			check_grant("$b->{name} ($b->{inst} pid " . $b->{s}->pid . ")", $b, $res, $after->{$res},
				$before->{$res} ? undef : $tok_of{$res}, $op->{sent});
		}
	}
	elsif ($k eq 'explicit')
	{
		if ($failed)
		{
			txn_error($b);
			return;
		}
		my ($res, $mode) = @{ $op->{items}[0] };
		my ($tok) = tokens_of($r->{out});
		return unless defined $tok;
		# an UNLOCK of (res, mode) or a force release of res that ran
		# after this request was sent may have removed it legitimately
		my @running = grep { $_->{sent} < $op->{sent} && (!defined $_->{done} || $_->{done} > $op->{sent}) }
		  @{ $unlocks{"$res|$mode"} // [] };
		check_grant("explicit lock of $b->{name} ($b->{inst})", undef, $res, $mode, $tok, $op->{sent}, 'explicit',
			[ @{ $op->{removers} // [] }, @running ]);
		my $gone = $op->{maybe_released} || ($disturbed{$res} // -1) >= $op->{sent} || @running;
		push @explicit, { res => $res, mode => $mode, token => $tok, by => $b->{name}, obs => time(),
			released => $gone };
	}
	elsif ($k eq 'release_explicit')
	{
		$op->{done} = time();
		$op->{removed} = $failed ? 0 : (($r->{out} // '') =~ /^(\d+)$/ ? $1 : 0);
		@explicit = grep { !($_->{res} eq $op->{res} && $_->{mode} eq $op->{mode} && $_->{released}) } @explicit;
		txn_error($b) if $failed;
	}
	elsif ($k eq 'release')
	{
		if ($failed) { txn_error($b); return; }
		my ($i) = grep { $b->{units}[$_]{scope} eq 's' && $b->{units}[$_]{res} eq $op->{res}
			  && $b->{units}[$_]{mode} eq $op->{mode} } 0 .. $#{ $b->{units} };
		my $got = $r->{out} eq 't';
		if ($got != defined($i))
		{
			push @{ $unexpected{'model mismatch'} },
			  "$b->{name}: zk_lock_release('$op->{res}', '$op->{mode}') returned '$r->{out}', the model "
			  . (defined $i ? 'has' : 'has no') . ' such session hold';
		}
		splice(@{ $b->{units} }, $i, 1) if defined $i;
	}
	elsif ($k eq 'release_all')
	{
		if ($failed) { txn_error($b); return; }
		$b->{units} = [ grep { $_->{scope} eq 't' } @{ $b->{units} } ];
	}
	elsif ($k eq 'reset_commit')
	{
		# handled like commit, then the session holds go
		if (!$failed && !$b->{aborted} && $op->{fence_res})
		{
			violation("$b->{name} ($b->{inst}) committed although its lock on $op->{fence_res} was force-released "
				  . sprintf('%.1f', $op->{sent} - $op->{fence_at}) . ' s before (commit fence)');
		}
		$b->{units} = [ grep { $_->{scope} eq 's' } @{ $b->{units} } ];
		($b->{in_txn}, $b->{aborted}, $b->{sp}) = (0, 0, []);
	}
	elsif ($k eq 'reset_release')
	{
		$b->{units} = [];
		$b->{tainted} = 0 unless $failed;
	}
	return;
}

# ---------------------------------------------------------------------------
# controllers: cancel, terminate, revoke, force release

my @ctl_pending = map { undef } @C;

sub taint
{
	my ($b, $why, $op) = @_;
	$b->{tainted} ||= 1;
	$b->{taint_why} = $why;
	push @{ $b->{taint_ops} }, $op;
	$b->{gen}++;
	# a revocation with terminate ends its holders' sessions: an idle
	# one's psql may only say "no connection to the server" (no 57P01)
	# at its next command
	$b->{revoked} = 1 if $op->{terminate};
	# a transaction holding the force-released node must not commit (the
	# first force release decides)
	if ($op->{force} && !$b->{fence_res} && $b->{in_txn} && !$b->{aborted})
	{
		my $r = $op->{force};
		my $t = grep {
			$_->{scope} eq 't' && $_->{obs} < $op->{sent}
			  && ($_->{res} eq $r || ($_->{parents} && grep { $_ eq $r } parents_of($_->{res})))
		} @{ $b->{units} };
		$b->{fence_res} = $r if $t;
		$b->{fence_op} = $op if $t;
	}
	return;
}

# everyone who holds r, or may be granted it by a pending command
sub taint_holders
{
	my ($r, $op) = @_;
	foreach my $b (@B)
	{
		next unless $b->{s};
		my $holds = effective($b)->{$r};
		my $pend = $b->{pending} && $b->{pending}{kind} =~ /acquire|explicit/;
		taint($b, "admin on $r", $op) if $holds || $pend;
	}
	return;
}

sub ctl_op
{
	my ($ci) = @_;
	my $c = $C[$ci];
	my $p = rand();
	my @mine = grep { $_->{s} && $_->{node} == $c->{node} && !$_->{dying} } @B;
	if ($p < 0.45 && @mine)
	{
		my @w = grep { $_->{pending} } @mine;
		my $b = @w && rand() < 0.8 ? pick(@w) : pick(@mine);
		return { sql => 'SELECT pg_cancel_backend(' . $b->{s}->pid . ')', what => "cancel $b->{name}" };
	}
	if ($p < 0.55 && @mine)
	{
		my $b = pick(@mine);
		$b->{dying} = 1;
		$b->{gen}++;
		return { sql => 'SELECT pg_terminate_backend(' . $b->{s}->pid . ')', what => "terminate $b->{name}", dying => $b };
	}
	my $r = rand() < 0.7 ? pick(@LEAF) : pick(@RES);
	my $op = { res => $r, sent => time() };
	# until the command is done (and a grace after), grants of r are not judged
	$disturbed{$r} = 9e18;
	if ($p < 0.8)
	{
		$op->{force} = $r;
		$op->{sql} = "SELECT zk_lock_force_release('$r')";
		$op->{what} = "force release $r";
		$_->{released} = 1 foreach grep { $_->{res} eq $r } @explicit;
	}
	else
	{
		my $act = rand() < 0.5 ? 'cancel' : 'terminate';
		$op->{sql} = "SELECT zk_lock_revoke('$r', '$act')";
		$op->{terminate} = ($act eq 'terminate');
		$op->{what} = "revoke ($act) $r";
	}
	taint_holders($r, $op);
	return $op;
}

# a controller's command is done
sub ctl_done
{
	my ($op, $r) = @_;
	$op->{done} = time();
	if ($op->{dying} && $r->{out} ne 't')
	{
		$op->{dying}{dying} = 0;    # it had gone already
	}
	return unless defined $op->{res};
	$disturbed{ $op->{res} } = $op->{done};
	# holders granted while it ran may have been hit too
	taint_holders($op->{res}, $op);
	$op->{removed} = $r->{out} if $op->{force};
	return;
}

# ---------------------------------------------------------------------------
# the checker: every definite hold has its node, granted, in ZooKeeper

my $snap;
sub snapshot_send
{
	my %exp;
	foreach my $b (@B)
	{
		next unless claimable($b) && $b->{s};
		my $eff = effective($b, 1);
		$exp{ $b->{slot} } = { gen => $b->{gen}, pid => $b->{s}->pid, eff => $eff };
	}
	my @ex = map { { %$_ } } grep { !$_->{released} } @explicit;
	# the tree is read straight from ZooKeeper (zkutil.py), not through
	# the extension
	$snap = { exp => \%exp, explicit => \@ex, sent => time(), h => zk_dump_start() };
	return;
}

sub snapshot_check
{
	my ($rows) = @_;
	$stats{snapshots}++;
	my (%rows, %tok);
	foreach my $n (@$rows)
	{
		my $d = $n->{data};
		my $g = $n->{granted} ? 't' : 'f';
		if (($d->{scope} // '') eq 'explicit')
		{
			$tok{ $n->{czxid} } = [ $n->{resource}, $n->{mode}, $g ];
		}
		elsif (defined $d->{instance} && defined $d->{pid})
		{
			$rows{"$d->{instance}|$d->{pid}|$n->{resource}"} = [ $n->{mode} // '?', $g ];
		}
	}
	foreach my $slot (sort keys %{ $snap->{exp} })
	{
		my $e = $snap->{exp}{$slot};
		my $b = $B[$slot];
		next unless $b->{s} && $b->{gen} == $e->{gen} && claimable($b) && $b->{s}->pid == $e->{pid};
		foreach my $res (sort keys %{ $e->{eff} })
		{
			next if ($disturbed{$res} // -1) >= $snap->{sent} - $GRACE;
			my $row = $rows{"$b->{inst}|$e->{pid}|$res"};
			if (!$row)
			{
				violation("$b->{name} ($b->{inst} pid $e->{pid}) holds $res $e->{eff}{$res} but has no node in ZooKeeper");
			}
			elsif ($row->[1] ne 't')
			{
				violation("$b->{name} ($b->{inst} pid $e->{pid}) holds $res $e->{eff}{$res} but its node is not granted");
			}
			elsif ($row->[0] ne $e->{eff}{$res} && $e->{eff}{$res} eq 'shared' && $row->[0] eq 'exclusive')
			{
				# more than it needs, not unsafe: a parent once held
				# EXCLUSIVE stays so while a child needs it after the
				# EXCLUSIVE hold was released (a note, not a failure)
				$notes{"$res held EXCLUSIVE where only SHARED is still needed (its EXCLUSIVE hold was released while a child keeps the parent)"}++;
			}
			elsif ($row->[0] ne $e->{eff}{$res})
			{
				violation("$b->{name} ($b->{inst} pid $e->{pid}) holds $res $e->{eff}{$res} but its node is $row->[0]");
			}
		}
	}
	foreach my $x (@{ $snap->{explicit} })
	{
		next if ($disturbed{ $x->{res} } // -1) >= $snap->{sent} - $GRACE;
		next unless grep { $_->{token} == $x->{token} && !$_->{released} } @explicit;
		my $row = $tok{ $x->{token} };
		if (!$row)
		{
			violation("explicit lock $x->{res} $x->{mode} (token $x->{token}, taken by $x->{by}) has no node in ZooKeeper"
				  . ' (finding 4: explicit locks granted without a node)');
		}
		elsif ($row->[2] ne 't')
		{
			violation("explicit lock $x->{res} $x->{mode} (token $x->{token}) is not granted in ZooKeeper (finding 4)");
		}
	}
	return;
}

# ---------------------------------------------------------------------------
# Directed check of the checker: an explicit grant whose reply comes late
# (seed 473328 failed so).  b0's explicit request waits behind b4's session
# lock; b0's backend stalls (SIGSTOP) while the worker grants it; b5's
# UNLOCK removes the lock (it is granted); b4 takes the resource again,
# with a higher token; only then does b0's reply come, with the lower
# token.  zklock kept its promises (granted once, by a write to its node;
# removed by UNLOCK; tokens in the order of the grants): no violation.  A
# conflict of a late explicit grant that no UNLOCK explains still is one.
{
	my ($b0, $b4, $b5) = @B[ 0, 4, 5 ];
	my $run = sub {
		my ($b, $op) = @_;
		send_op($b, $op);
		my $r = $b->{s}->wait(30);
		on_result($b, $r) if $r;
		return $r;
	};
	my $take = { kind => 'acquire', scope => 's', items => [ [ 'h/a/y', 'exclusive', 0 ] ],
		sql => q{SELECT zk_lock_acquire_session('h/a/y', 'exclusive', '3 s', false)} };
	my $r = $run->($b4, { %$take });
	send_op($b0, { kind => 'explicit', items => [ [ 'h/a/y', 'exclusive', 0 ] ],
		sql => q{SELECT zk_lock_acquire_explicit('h/a/y', 'exclusive', ttl => '1 hour', timeout => '30 s')} });
	ok(wait_for_waiting($b0->{node}, $b0->{s}->pid), 'directed (late explicit grant): b0 waits behind b4');
	kill 'STOP', $b0->{s}->pid;
	$run->($b4, { kind => 'release', res => 'h/a/y', mode => 'exclusive', releasing => 1,
		sql => q{SELECT zk_lock_release('h/a/y', 'exclusive')} });
	# granted: the grant's write is done and its waiter child gone
	ok( wait_until(
			sub {
				my @n = zk_list_znodes(zk_path('h/a/y'));
				return (grep { /LOCK-EXCLUSIVE-\d+$/ } @n) == 1 && !grep { m{/waiter$} } @n;
			}),
		'directed: the worker grants b0\'s request while b0 is stopped');
	$r = $run->($b5, { kind => 'release_explicit', res => 'h/a/y', mode => 'exclusive',
		sql => q{SELECT zk_lock_release_explicit('h/a/y', 'exclusive')} });
	is($r && $r->{out}, '1', 'directed: b5\'s UNLOCK removes it');
	$r = $run->($b4, { %$take });
	my $t2 = $r && $r->{out};
	kill 'CONT', $b0->{s}->pid;
	$r = $b0->{s}->wait(30);
	on_result($b0, $r) if $r;
	my $t1 = $r && $r->{out};
	ok(defined $t1 && defined $t2 && $t1 =~ /^\d+$/ && $t2 =~ /^\d+$/ && $t1 < $t2,
		'directed: b0\'s reply comes last, with the lower token (tokens follow the grants)')
	  or diag("b0: " . explain($r) . " b4: " . ($t2 // 'none'));
	judge_suspects(1);
	ok(!@violations, 'directed: a late explicit grant removed by an UNLOCK before a conflicting grant is no violation')
	  or diag(join("\n", @violations));

	# the same reply with no UNLOCK that removed anything: a violation
	@violations = ();
	check_grant('explicit lock (no UNLOCK)', undef, 'h/a/y', 'exclusive', $t1, time() - 5, 'explicit', []);
	ok(scalar(grep { /went backwards/ } @violations), 'directed: ... but without an UNLOCK it is one');
	@violations = ();
	my $nothing = { sent => time() - 10, done => time(), removed => 0 };
	check_grant('explicit lock (empty UNLOCK)', undef, 'h/a/y', 'exclusive', $t1, time() - 5, 'explicit', [$nothing]);
	judge_suspects(1);
	ok(scalar(grep { /went backwards/ } @violations), 'directed: ... and with an UNLOCK that removed nothing');

	$run->($b4, { kind => 'release_all', releasing => 1, sql => 'SELECT zk_lock_release_all()' });
	ok(zk_wait_no_locks(zk_path('h'), 10), 'directed: nothing left');
	(@violations, @explicit, @suspects, %grants, %unlocks, @trace) = ();
	reset_backend_state($_) foreach $b0, $b4, $b5;
}

# ---------------------------------------------------------------------------
# the run

my $quiet = zk_quiet_sessions();
my $end = $t0 + $MAXSECS;
my $steps = 0;
my $next_ctl = time() + 1;
my $next_snap = time() + 0.3;
while ($steps < $STEPS && time() < $end && @violations < 20)
{
	my $busy = 0;
	foreach my $b (@B)
	{
		if (!$b->{s})
		{
			$b->{s} = new_session($b->{node}, $b->{name}) or next;
			reset_backend_state($b);
			tlog("$b->{name} respawned as pid " . $b->{s}->pid);
			next;
		}
		if ($b->{pending})
		{
			next unless $b->{s}->done;
			on_result($b, $b->{s}->wait(1));
			$busy++;
			next unless $b->{s};
		}
		elsif (!$b->{s}->alive)
		{
			$b->{s} = undef;
			next;
		}
		if ($b->{dying})
		{
			# a terminated backend gets no more work; it goes soon
			$b->{dying_since} //= time();
			# psql notices that its idle backend went only when it sends
			# something: a probe
			if (time() - $b->{dying_since} > 0.3 && time() - ($b->{probed} // 0) > 1)
			{
				$b->{probed} = time();
				send_op($b, { kind => 'probe', sql => 'SELECT 1' });
				next;
			}
			if (time() - $b->{dying_since} > 10 && $b->{dying} == 1)
			{
				push @{ $unexpected{'terminate ignored'} }, "$b->{name} survived pg_terminate_backend for 10 s";
				$b->{s}->_kill;
				$b->{s} = undef;
			}
			elsif ($b->{dying} == 2 && time() - $b->{dying_since} > 3)
			{
				# a revocation may not have reached it: it lives on, tainted
				$b->{dying} = 0;
				delete $b->{dying_since};
			}
			next;
		}
		if ($b->{tainted})
		{
			# wait until the admin commands are done, plus the grace
			next if grep { !defined $_->{done} || time() - $_->{done} < $GRACE } @{ $b->{taint_ops} };
			if ($b->{in_txn})
			{
				my $fo = $b->{fence_op};
				my $judge = $fo && ($fo->{removed} // 0) > 0;
				send_op($b, { kind => 'reset_commit', sql => 'COMMIT', releasing => 1,
					fence_res => $judge ? $b->{fence_res} : undef, fence_at => $fo ? $fo->{done} : 0 });
				delete $b->{fence_op};
				delete $b->{fence_res};
			}
			else
			{
				send_op($b, { kind => 'reset_release', sql => 'SELECT zk_lock_release_all()', releasing => 1 });
				$b->{taint_ops} = [];
			}
			next;
		}
		send_op($b, choose_op($b));
		$steps++;
	}
	# a controller lost with its instance (a crash, reported
	# on its own) is started again
	foreach my $c (@C)
	{
		next if $c->{s} && ($c->{s}{pending} || $c->{s}->alive);
		$c->{s} = new_session($c->{node}, $c->{name});
		if (!$c->{s}) { $c->{s} = undef; next; }
		worker_gone($c->{node});
	}
	for my $ci (0 .. $#C)
	{
		my $c = $C[$ci];
		next unless $c->{s};
		if ($ctl_pending[$ci])
		{
			next unless $c->{s}->done;
			my $r = $c->{s}->wait(1);
			my $op = $ctl_pending[$ci];
			$ctl_pending[$ci] = undef;
			tlog("$c->{name} < $op->{what}: $r->{out} $r->{err}");
			foreach my $e (zk_errors_of($r->{err}))
			{
				$errors{ $e->[1] }++;
				push @{ $unexpected{ $e->[1] } }, "$c->{name}: $e->[1] $e->[2] [$op->{sql}]"
				  unless $EXPECTED{ $e->[1] };
			}
			ctl_done($op, $r);
		}
		elsif (time() >= $next_ctl)
		{
			next unless $c->{s}->alive;
			my $op = ctl_op($ci);
			$ctl_pending[$ci] = $op;
			tlog("$c->{name} > $op->{sql}");
			$c->{s}->send($op->{sql});
			$stats{ctl}++;
			$next_ctl = time() + 0.3 + rand(0.7);
		}
	}
	if ($snap && $snap->{h})
	{
		my $rows = zk_dump_done($snap->{h});
		if ($rows)
		{
			delete $snap->{h};
			snapshot_check($rows);
		}
	}
	elsif (time() >= $next_snap)
	{
		snapshot_send();
		$next_snap = time() + 0.3;
	}
	judge_suspects(0);
	sleep(0.002) unless $busy;
}

# ---------------------------------------------------------------------------
# wind down: let everything finish, then release what is left

if ($snap && $snap->{h})
{
	my $rows;
	wait_until(sub { $rows = zk_dump_done($snap->{h}) }, timeout => 60);
	snapshot_check($rows) if $rows;
}

foreach my $x (@B, @C)
{
	next unless $x->{s} && defined $x->{s}{pending};
	if (!$x->{s}->alive && $x->{s}->done)
	{
		$x->{s}->wait(1);
		next;
	}
	my $r = $x->{s}->wait(40);
	push @{ $unexpected{'hung'} }, "$x->{name}: a command did not end within 40 s" unless defined $r;
	on_result($x, $r) if defined $r && grep { $_ == $x } @B;
}
undef $quiet;
my $elapsed = time() - $t0;
diag(sprintf('041_model: %d steps (%d controller actions, %d snapshots) in %.0f s; errors: %s; %d sessions ended',
		$steps, $stats{ctl} // 0, $stats{snapshots} // 0, $elapsed,
		join(', ', map { "$_ x$errors{$_}" } sort keys %errors) || 'none', $stats{exits} // 0));

foreach my $b (@B)
{
	next unless $b->{s} && $b->{s}->alive;
	# (a terminate sent at the very end may still end it here)
	eval { $b->{s}->query('ROLLBACK', 30); $b->{s}->query('SELECT zk_lock_release_all()', 30); };
}
my %exseen;
foreach my $e (@explicit, map { { res => $_, mode => 'shared' }, { res => $_, mode => 'exclusive' } } @LEAF)
{
	next if $exseen{"$e->{res}|$e->{mode}"}++;
	psql1($nodes[0], "SET client_min_messages = error; SELECT zk_lock_release_explicit('$e->{res}', '$e->{mode}')");
}

judge_suspects(1);
diag("041_model: note: $_ (seen $notes{$_} times)") foreach sort keys %notes;
ok(!@violations, 'no violation of the model') or diag(join("\n", @violations[ 0 .. ($#violations < 19 ? $#violations : 19) ]));
foreach my $k (sort keys %unexpected)
{
	my @l = @{ $unexpected{$k} };
	my %why = (
		'XX000' => 'finding 2 or an unknown bug',
		'57P02' => 'finding 2: the worker crashed under concurrent listings and the instance restarted',
		'08006' => 'finding 2: "the zklock worker stopped" (it crashed)',
		'55000' => 'finding 2: the worker was not running or not responding',
		'session lost' => 'finding 2: the instance restarted after a crash',
	);
	fail("unexpected: $k (seed $SEED)" . ($why{$k} ? " ($why{$k})" : ''));
	diag(join("\n", @l[ 0 .. ($#l < 4 ? $#l : 4) ]));
}
if (@violations || %unexpected)
{
	diag("041_model: replay with ZKLOCK_MODEL_SEED=$SEED; the last operations:");
	diag(join("\n", @trace[ ($#trace > 120 ? $#trace - 120 : 0) .. $#trace ]));
}
# the whole history, for the post-mortem
{
	my $f = "$PostgreSQL::Test::Utils::log_path/041_model_trace_$SEED.txt";
	open(my $fh, '>', $f) or die "$f: $!";
	print $fh "$_\n" foreach @trace;
	close($fh);
	note("041_model: the whole history is in $f");
}

foreach my $n (@nodes)
{
	my @crash = zk_log_crashes($n);
	ok(!@crash, $n->name . ': no crash in the server log (finding 2: the worker crashes under concurrent listings)') or diag(join("\n", @crash[ 0 .. ($#crash < 5 ? $#crash : 5) ]));
	my $pid = eval { psql1($n, 'SELECT worker_pid FROM zk_lock_status') } // 'unreachable';
	is($pid, $worker_pid{ $n->name }, $n->name . ': the zklock worker pid is unchanged');
}

zk_done_check();
done_testing();
