
# A batch of try-locks sent at once (acquire.c's first step, in acquire_batch.c, recorded by
# wait.c so that an error or exit withdraws it), whose nodes ZooKeeper has
# made but whose answers the worker has not published yet (failpoint
# after-create-reply=pause), interrupted by
#  (a) pg_cancel_backend (PG_CATCH in ask_at_once)
#  (b) statement_timeout, caught by a PL/pgSQL exception block, after
#      which the same backend takes the same locks in a batch again
#  (c) lock_timeout on a waiting lock set (zk_lock_acquire_all)
#  (d) pg_terminate_backend inside a transaction (FATAL: the exit
#      callback, then ShutdownPostgres's abort)
# Each time: while the worker is still paused, every entry of the backend
# is already withdrawn (zk_lock_local says releasing); once it resumes,
# every entry comes back, no lock node is left, and another backend is
# granted the same locks at once.  (Fails, 19 of 51, if wait.c does not
# record the batch; (d) fails if the exit callback does not withdraw it.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $hosts = zk_start();
my $node = zk_node('node1', extra_conf => "zklock.connect_timeout = '20s'");
my $mon = zk_session($node, 'mon');

sub entries_in_use
{
	return $mon->query_ok('SELECT entries_in_use FROM zk_lock_status');
}

# The backend's entries (zk_lock_local) by state: "releasing 3" etc.
sub entries_of
{
	my ($pid) = @_;
	return $mon->query_ok(qq{SELECT coalesce(string_agg(state || ' ' || n, ', ' ORDER BY state), '')
		FROM (SELECT state, count(*) AS n FROM zk_lock_local() WHERE pid = $pid GROUP BY state) e});
}

# Start $sql in $s with the worker paused after the batch's first create
# reply; returns once the nodes exist and the backend waits.
sub start_paused
{
	my ($case, $s, $sql) = @_;
	my $from = -s $node->logfile;
	ok(zk_set_failpoints($node, 'after-create-reply=pause'), "($case) worker set to pause after a create reply");
	$s->send($sql);
	ok(zk_wait_log($node, qr/failpoint "after-create-reply" reached \(pause\)/, $from),
		"($case) the worker paused on the batch's create reply");
	ok(wait_for_waiting($node, $s->pid), "($case) the backend waits for the batch's answers");
	cmp_ok(zk_count_locks(zk_path($case)), '>=', 1, "($case) precondition: the batch's nodes exist in ZooKeeper");
}

sub resume_and_check
{
	my ($case, @resources) = @_;
	ok(zk_set_failpoints($node, ''), "($case) worker resumed");
	ok(zk_wait_no_locks(zk_path($case), 15), "($case) no lock node left under $case");
	ok(wait_until(sub { entries_in_use() eq '0' }, timeout => 15),
		"($case) every entry came back") or diag('entries_in_use: ' . entries_in_use());
	my $o = zk_session($node, "${case}_other");
	my $arr = join(',', map { "'$_'" } @resources);
	is($o->query(qq{SELECT array_length(zk_lock_try_acquire_all_session(ARRAY[$arr]), 1)})->{out},
		scalar(@resources), "($case) another backend takes the same locks at once");
	$o->query_ok('SELECT zk_lock_release_all()');
	$o->quit;
	ok(zk_wait_no_locks(zk_path($case), 15), "($case) and gives them back");
}

# (a) cancel during a session-level try with parents (3 nodes at once)
{
	my $s = zk_session($node, 'ba');
	start_paused('ba', $s, q{SELECT zk_lock_try_acquire_session('ba/x/y')});
	$node->safe_psql('postgres', 'SELECT pg_cancel_backend(' . $s->pid . ')');
	my $r = $s->wait(30);
	is($r && $r->{sqlstate}, '57014', '(ba) the try ends with 57014');
	is(entries_of($s->pid), 'releasing 3', '(ba) the worker still paused: all three entries withdrawn by the backend');
	resume_and_check('ba', 'ba', 'ba/x', 'ba/x/y');
	$s->quit;
}

# (b) statement_timeout caught in an exception block, then the batch again
{
	my $s = zk_session($node, 'bb');
	$s->query_ok('CREATE TEMP TABLE r (what text)');
	$s->query_ok('BEGIN');
	$s->query_ok("SET LOCAL statement_timeout = '1500ms'");
	my $from = -s $node->logfile;
	ok(zk_set_failpoints($node, 'after-create-reply=pause'), '(bb) worker set to pause after a create reply');
	$s->send(q{DO $$
		BEGIN
			PERFORM zk_lock_try_acquire_all(ARRAY['bb/p', 'bb/q', 'bb/r']);
			INSERT INTO r VALUES ('granted');
		EXCEPTION WHEN query_canceled THEN
			INSERT INTO r VALUES ('caught ' || SQLSTATE);
		END $$});
	ok(zk_wait_log($node, qr/failpoint "after-create-reply" reached \(pause\)/, $from),
		'(bb) the worker paused on the batch\'s create reply');
	my $r = $s->wait(30);
	is($r && $r->{sqlstate}, '00000', '(bb) the block caught the timeout');
	is($s->query_ok('SELECT what FROM r'), 'caught 57014', '(bb) as 57014');
	$s->query_ok('RESET statement_timeout');
	is(entries_of($s->pid), 'releasing 4', '(bb) the worker still paused: all four entries (bb and three below) withdrawn');
	ok(zk_set_failpoints($node, ''), '(bb) worker resumed');
	ok(zk_wait_no_locks(zk_path('bb'), 15), '(bb) the interrupted batch left no node');
	# the same backend, same transaction: the batch again, granted and held
	is($s->query_ok(q{SELECT array_length(zk_lock_try_acquire_all(ARRAY['bb/p', 'bb/q', 'bb/r']), 1)}),
		'3', '(bb) the same batch again in the same transaction: granted');
	is(zk_count_locks(zk_path('bb')), 4, '(bb) its four nodes (the parent bb too)');
	is(entries_of($s->pid), 'granted 4', '(bb) held');
	$s->query_ok('COMMIT');
	resume_and_check('bb', 'bb/p', 'bb/q', 'bb/r');
	$s->quit;
}

# (c) lock_timeout on a waiting set: ask_at_once's own timer
{
	my $s = zk_session($node, 'bc');
	$s->query_ok("SET lock_timeout = '1500ms'");
	start_paused('bc', $s, q{SELECT zk_lock_acquire_all_session(ARRAY['bc/p', 'bc/q/r'])});
	my $r = $s->wait(30);
	is($r && $r->{sqlstate}, '55P03', '(bc) the set ends with 55P03 by lock_timeout');
	is(entries_of($s->pid), 'releasing 4', '(bc) the worker still paused: all four entries withdrawn');
	resume_and_check('bc', 'bc/p', 'bc/q', 'bc/q/r');
	$s->quit;
}

# (d) pg_terminate_backend inside a transaction
{
	my $s = zk_session($node, 'bd');
	$s->query_ok('BEGIN');
	is($s->query_ok(q{SELECT zk_lock_try_acquire('bd/held') > 0}), 't', '(bd) a lock held before');
	start_paused('bd', $s, q{SELECT zk_lock_try_acquire_all(ARRAY['bd/p', 'bd/q', 'bd/s/t'])});
	$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . $s->pid . ')');
	my $r = $s->wait(30);
	ok($r && ($r->{exited} || $r->{err} =~ /terminating connection/), '(bd) the backend is terminated');
	ok(wait_until(sub { entries_of($s->pid) eq 'releasing 6' }, timeout => 10),
		'(bd) the worker still paused: the held lock (and bd) and the batch\'s four entries withdrawn at exit')
	  or diag('entries: ' . entries_of($s->pid));
	resume_and_check('bd', 'bd/held', 'bd/p', 'bd/q', 'bd/s/t');
}

my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile);
unlike($log, qr/TRAP|PANIC|server process .* was terminated by signal|zklock batch of more than/,
	'no crash, no batch overflow');
$mon->quit;
zk_done_check();
done_testing();
