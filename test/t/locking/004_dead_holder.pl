
# A holder that goes away passes the lock to the next waiter, on the other
# instance, promptly (the instance's ZooKeeper session lives on, so nothing
# but the extension's own cleanup can remove the dead holder's node):
#  - holder backend killed with pg_terminate_backend (transaction scope)
#  - holder backend killed with pg_terminate_backend (session scope)
#  - holder's psql quits (\q) while holding a session-scope lock
#  - holder's psql client is SIGKILLed inside a transaction (the connection
#    just drops)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use Test::More;
use Time::HiRes qw(sleep time);

zk_start();
my $node1 = zk_node('node1');
my $node2 = zk_node('node2');

# How long the next waiter may take to get a dead holder's lock.
my $PROMPT = 5;

my @cases = (
	{ name => 'terminated backend, transaction scope', scope => 'xact',    how => 'terminate' },
	{ name => 'terminated backend, session scope',     scope => 'session', how => 'terminate' },
	{ name => 'client quits, session scope',           scope => 'session', how => 'quit' },
	{ name => 'client SIGKILLed, transaction scope',   scope => 'xact',    how => 'sigkill' },
	{ name => 'client SIGKILLed, session scope',       scope => 'session', how => 'sigkill' },
);

my $caseno = 0;
foreach my $case (@cases)
{
	foreach my $dir ([ $node1, $node2 ], [ $node2, $node1 ])
	{
		my ($hnode, $wnode) = @$dir;
		$caseno++;
		my $what = "$case->{name}, holder on " . $hnode->name;
		my $res  = "dead/case$caseno";
		my $path = zk_path($res);

		my $h = zk_session($hnode, "holder$caseno");
		if ($case->{scope} eq 'xact')
		{
			$h->query_ok('BEGIN');
			$h->query_ok(qq{SELECT zk_lock_acquire('$res')});
		}
		else
		{
			$h->query_ok(qq{SELECT zk_lock_acquire_session('$res')});
		}
		ok(zk_wait_count($path, 1, 10), "$what: holder's node");

		my $w = zk_session($wnode, "waiter$caseno");
		$w->query_ok('BEGIN');
		$w->send(qq{SELECT zk_lock_acquire('$res')});
		ok(wait_for_waiting($wnode, $w->pid, 10), "$what: waiter waits");
		ok(zk_wait_count($path, 2, 10), "$what: waiter queued");

		my $t0 = time();
		if ($case->{how} eq 'terminate')
		{
			is(psql1($hnode, 'SELECT pg_terminate_backend(' . $h->pid . ')'),
				't', "$what: holder terminated");
		}
		elsif ($case->{how} eq 'quit')
		{
			$h->quit;
		}
		else
		{
			$h->kill_client('KILL');
		}

		my $r = $w->wait($PROMPT);
		my $ok = defined $r && !$r->{exited} && $r->{sqlstate} eq '00000'
		  && $r->{out} =~ /^\d+$/;
		ok($ok, sprintf("$what: waiter got the lock (%.2f s)", time() - $t0))
		  or diag(explain($r // "not within $PROMPT s"));
		if (!defined $r)
		{
			# collect it anyway (bounded), to go on with a clean slate
			$r = $w->wait(10);
			diag(explain($r // 'still waiting after 10 more seconds'));
		}
		ok(zk_wait_count($path, 1, 10), "$what: the dead holder's node is gone");
		ok( wait_until(
				sub {
					psql1($hnode,
						'SELECT count(*) FROM pg_stat_activity WHERE pid = ' . $h->pid)
					  eq '0';
				},
				timeout => 10),
			"$what: holder backend is gone");

		$w->query_ok('COMMIT') if defined $r && !$r->{exited};
		ok(zk_wait_no_locks($path, 10), "$what: no lock node left");
		$h->quit;
		$w->quit;
	}
}

zk_done_check();
done_testing();
