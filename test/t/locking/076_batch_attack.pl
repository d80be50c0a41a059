
# Attacks on group commit (src/worker/batch.c, src/client/zk_multi.c) by a reviewer who
# did not write it.
#
#  (a) fencing tokens grow strictly with every grant of a resource, many
#      backends on two instances taking the same and nested resources
#      (grants numbered in one table, node2 writing it through dblink
#      while it holds the lock)
#  (b) the anchor node (<root>/zklock.zxid-...) deleted by another client,
#      and squatted (deleted and made again in one transaction by another
#      client: persistent, with an ACL that refuses us), again and again
#      under load: no request fails, and the instance never has more than
#      one anchor of its own (an abandoned one would live as long as the
#      session)
#  (c) a member that fails every time (a resource node whose ACL refuses
#      our creates, asked for again and again) does not delay the others'
#      requests beyond a bound
#  (d) the worker SIGTERMed (restarted) while backends release and take
#      nested locks: nothing granted twice, tokens grow, nothing left
#  (e) the worker stopped past the session timeout (expiry) with requests
#      and releases queued: the same
#  and at the end, after the restarts, expiries and connection changes,
#  no more anchors alive than instances (one per live session)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkChaos;

use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
my $conf = ZkChaos::node_conf() . "zklock.sweep_interval = '1h'\n";
my $node1 = zk_node('node1', extra_conf => $conf);
my $node2 = zk_node('node2', extra_conf => $conf);

# Another ZooKeeper client (kazoo, digest identity other:secret) on the
# anchors of one session: list, delete, squat, clean up
my $helper = "$PostgreSQL::Test::Utils::tmp_check/anchors_076.py";
open(my $fh, '>', $helper) or die "$helper: $!";
print $fh <<'EOPY';
import logging, sys
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl
logging.basicConfig(level=logging.CRITICAL)
hosts, root, cmd = sys.argv[1:4]
owner = sys.argv[4] if len(sys.argv) > 4 else None
zk = KazooClient(hosts=hosts, timeout=10.0, auth_data=[("digest", "other:secret")])
zk.start(timeout=10)
acl = [make_digest_acl("other", "secret", all=True)]
n = 0
for c in zk.get_children(root):
    if not c.startswith("zklock.zxid-"):
        continue
    p = root + "/" + c
    st = zk.exists(p)
    if st is None:
        continue
    mine = owner is not None and "%x" % st.ephemeralOwner == owner
    if cmd == "count" and mine:
        n += 1
    elif cmd == "delete" and mine:
        try:
            zk.delete(p)
            n += 1
        except Exception:
            pass
    elif cmd == "squat" and mine:
        t = zk.transaction()
        t.delete(p)
        t.create(p, b"squatter", acl=acl)
        r = t.commit()
        if not any(isinstance(x, Exception) for x in r):
            n += 1
    elif cmd == "live" and st.ephemeralOwner != 0:
        n += 1
    elif cmd == "cleanup" and st.ephemeralOwner == 0:
        zk.delete(p)
        n += 1
print(n)
zk.stop()
EOPY
close($fh);

sub anchors
{
	my ($cmd, $owner) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ '/usr/bin/python3', $helper, $hosts, zk_root(), $cmd,
			defined $owner ? $owner : () ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or diag("anchors $cmd: $err");
	chomp $out;
	return $out eq '' ? -1 : $out + 0;
}

sub session_hex
{
	my ($node) = @_;
	my $s = lc(psql1($node, 'SELECT session_id FROM zk_lock_status') // '');
	$s =~ s/^0x//;
	$s =~ s/^0+//;
	return $s;
}

# cyc(resource, seconds): session acquire + release until the time is up;
# the cycles, the errors and the slowest acquire (ms)
my $cyc_sql = q{
	CREATE FUNCTION cyc(r text, secs float8, OUT cycles int, OUT errs int,
						OUT max_ms float8) LANGUAGE plpgsql AS $$
	DECLARE t_end timestamptz := clock_timestamp() + secs * interval '1 s';
			t0 timestamptz; ms float8;
	BEGIN
		cycles := 0; errs := 0; max_ms := 0;
		WHILE clock_timestamp() < t_end LOOP
			t0 := clock_timestamp();
			BEGIN
				PERFORM zk_lock_acquire_session(r, timeout => '20 s');
				ms := extract(epoch FROM clock_timestamp() - t0) * 1000;
				max_ms := greatest(max_ms, ms);
				PERFORM zk_lock_release(r);
				cycles := cycles + 1;
			EXCEPTION WHEN OTHERS THEN
				errs := errs + 1;
				RAISE WARNING 'cyc %: % %', r, SQLSTATE, SQLERRM;
			END;
		END LOOP;
	END $$;};
$_->safe_psql('postgres', $cyc_sql) for ($node1, $node2);

# Run cyc on each [session, resource] for $secs; $during->() meanwhile.
# Returns (cycles, errors, slowest ms, every session answered)
sub run_cycles
{
	my ($pairs, $secs, $during) = @_;
	$_->[0]->send("SELECT cycles || ' ' || errs || ' ' || round(max_ms::numeric, 1) FROM cyc('$_->[1]', $secs)")
	  for @$pairs;
	$during->() if $during;
	my ($c, $e, $m, $all) = (0, 0, 0, 1);
	foreach my $p (@$pairs)
	{
		my $r = $p->[0]->wait($secs + 60);
		if ($r && $r->{sqlstate} eq '00000' && $r->{out} =~ /^(\d+) (\d+) ([\d.]+)$/)
		{
			$c += $1;
			$e += $2;
			$m = $3 if $3 > $m;
		}
		else
		{
			$all = 0;
			diag('cyc of ' . $p->[1] . ': ' . ($r ? "$r->{sqlstate} $r->{err}" : 'no answer'));
		}
	}
	return ($c, $e, $m, $all);
}

# ---------------------------------------------------------------------------
# (a) tokens of the same and nested resources, two instances
{
	$node1->safe_psql('postgres', q{
		CREATE TABLE grants (id bigserial PRIMARY KEY, res text, token bigint, inst text);});
	my $c1 = $node1->connstr('postgres');
	$node2->safe_psql('postgres', 'CREATE EXTENSION dblink');
	foreach my $n ($node1, $node2)
	{
		my $ins = $n == $node1
		  ? q{INSERT INTO grants (res, token, inst) VALUES (r, t, 'node1')}
		  : qq{PERFORM dblink_exec(\$cs\$$c1\$cs\$, format('INSERT INTO grants (res, token, inst) VALUES (%L, %s, %L)', r, t, 'node2'))};
		$n->safe_psql('postgres', qq{
			CREATE FUNCTION grab(r text) RETURNS void LANGUAGE plpgsql AS \$\$
			DECLARE t bigint;
			BEGIN
				t := zk_lock_acquire(r, timeout => '60 s');
				-- the id is drawn while the lock is held
				$ins;
			END \$\$;});
	}
	my @res = qw(ft/a ft/a/b ft/a/b/c ft/d ft/d/e);
	my $k = 10;
	my @s;
	push @s, zk_session($node1, "ft1_$_") for 1 .. 6;
	push @s, zk_session($node2, "ft2_$_") for 1 .. 6;
	my $i = 0;
	foreach my $x (@s)
	{
		$x->send(join(' ', map { "BEGIN; SELECT grab('" . $res[ ($i * 3 + $_) % @res ] . "'); COMMIT;" } 1 .. $k));
		$i++;
	}
	my $ok = 1;
	foreach my $x (@s)
	{
		my $r = $x->wait(120);
		unless ($r && $r->{sqlstate} eq '00000')
		{
			$ok = 0;
			diag('(a) ' . $x->name . ': ' . ($r ? "$r->{sqlstate} $r->{err}" : 'no answer'));
		}
		$x->quit;
	}
	ok($ok, '(a) 12 backends on two instances, 5 same and nested resources: every transaction committed');
	is(psql1($node1, 'SELECT count(*) FROM grants'), 12 * $k, '(a) every grant recorded');
	is(psql1($node1, q{SELECT count(DISTINCT inst) FROM grants}), '2', '(a) from both instances');
	my $bad = psql1($node1, q{
		SELECT coalesce(string_agg(res || ': ' || prev || ' then ' || token, ', '), '')
		FROM (SELECT res, token, lag(token) OVER (PARTITION BY res ORDER BY id) AS prev
			  FROM grants) g WHERE token <= prev});
	is($bad, '', '(a) each resource\'s tokens grow strictly with its grants');
	ok(zk_wait_no_locks(zk_path('ft'), 15), '(a) no lock node left');
}

# ---------------------------------------------------------------------------
# (b) the anchor deleted and squatted under load
{
	my $sid = session_hex($node1);
	my @pairs = map { [ zk_session($node1, "an$_"), "an$_/r" ] } 1 .. 8;
	my ($deleted, $squatted, $most, $rounds) = (0, 0, 0, 0);
	my ($c, $e, $m, $all) = run_cycles(\@pairs, 8, sub {
		sleep(1);
		for my $round (1 .. 10)
		{
			if ($round % 2)
			{
				my $n = anchors('delete', $sid);
				$deleted += $n if $n > 0;
			}
			else
			{
				my $n = anchors('squat', $sid);
				$squatted += $n if $n > 0;
			}
			sleep(0.3);
			my $own = anchors('count', $sid);
			$most = $own if $own > $most;
			$rounds++;
		}
	});
	note("(b) $c cycles, $e errors, slowest acquire $m ms; anchors deleted $deleted, squatted $squatted");
	ok($all, '(b) every session answered');
	cmp_ok($deleted, '>=', 1, '(b) another client deleted our anchor');
	cmp_ok($squatted, '>=', 1, '(b) and squatted it (persistent, refusing us)');
	is($e, 0, "(b) no request failed ($c cycles)");
	cmp_ok($c, '>=', 8 * 10, '(b) and they went on');
	# quiet, then every one of the instance's anchors is counted
	sleep(1);
	my $own = anchors('count', $sid);
	$most = $own if $own > $most;
	cmp_ok($most, '<=', 1, "(b) never more than one anchor of the session at once (most: $most)");
	# the instance still works
	my $s = zk_session($node1, 'an_after');
	is($s->query(q{SELECT zk_lock_acquire_session('an_after/r') > 0})->{out}, 't',
		'(b) a lock after the attack is granted');
	$s->query_ok(q{SELECT zk_lock_release('an_after/r')});
	$s->quit;
	$_->[0]->quit for @pairs;
	ok(anchors('cleanup') >= 1, '(b) the squatter\'s nodes removed');
	ok(zk_wait_no_locks(zk_root(), 15), '(b) no lock node left');
}

# ---------------------------------------------------------------------------
# (c) one member that fails every time
{
	my ($rc) = zkutil('create-acl', zk_path('rbad/r'), 'r', 'other:secret');
	is($rc, 0, '(c) another client made a resource node that refuses our creates');
	my @pairs = map { [ zk_session($node1, "rg$_"), "rg$_/r" ] } 1 .. 8;
	my $bad = zk_session($node1, 'rbad');
	$bad->send(q{DO $$
		DECLARE n int := 0; other text := '';
			t_end timestamptz := clock_timestamp() + interval '5 s';
		BEGIN
			WHILE clock_timestamp() < t_end LOOP
				BEGIN
					PERFORM zk_lock_acquire_session('rbad/r', timeout => '5 s');
				EXCEPTION WHEN OTHERS THEN
					IF SQLSTATE = '38000' THEN n := n + 1; ELSE other := SQLSTATE; END IF;
				END;
			END LOOP;
			RAISE NOTICE 'refused % other %', n, other;
		END $$});
	my ($c, $e, $m, $all) = run_cycles(\@pairs, 5);
	my $r = $bad->wait(60);
	note("(c) $c cycles, $e errors, slowest acquire $m ms; the bad one: " . ($r ? $r->{err} : 'no answer'));
	ok($all, '(c) every session answered');
	is($e, 0, "(c) none of the others' requests failed ($c cycles)");
	cmp_ok($m, '<', 2000, '(c) none waited 2 s or more (the worker passes at least every second)');
	like($r && $r->{err}, qr/refused [1-9]\d* other\s*(\n|$)/, '(c) the refused requests fail with 38000, nothing else');
	$_->[0]->quit for @pairs;
	$bad->quit;
	ok(zk_wait_no_locks(zk_root(), 15), '(c) no lock node left');
}

# ---------------------------------------------------------------------------
# (d) the worker SIGTERMed while backends release and take nested locks
my $chaos = ZkChaos->new(nodes => [ $node1, $node2 ], clients_per_node => 6);
{
	my $run = $chaos->start('ba_sigterm', duration => 10, settle => 5,
		resource => 'bax/chaos/r');
	$run->sleep_until(2);
	$run->fault_begin('node1\'s worker SIGTERMed three times');
	for (1 .. 3)
	{
		my $w = ZkChaos::worker_pid($node1);
		kill('TERM', $w) if $w;
		sleep(2);
	}
	$run->fault_end;
	$run->check;
	ok(ZkChaos::wait_node_ready($node1, 30), '(d) node1 connected at the end');
}

# ---------------------------------------------------------------------------
# (e) the worker stopped past the session timeout
{
	my $run = $chaos->start('ba_expire', duration => 12, settle => 5,
		resource => 'bay/chaos/r');
	$run->sleep_until(2);
	$run->fault_begin('node2\'s worker stopped past the session timeout (4 s)');
	my $w = ZkChaos::worker_pid($node2);
	kill('STOP', $w);
	sleep(6);
	kill('CONT', $w);
	$run->fault_end;
	$run->check;
	ok(ZkChaos::wait_node_ready($node2, 30), '(e) node2 connected at the end');
}

# one anchor per live session at most: those of the sessions ended above
# (restarted workers, an expiry) are gone
{
	my $live = -1;
	my $ok = wait_until(sub { $live = anchors('live'); $live >= 0 && $live <= 2 },
		timeout => 20);
	ok($ok, "no more anchors alive than instances ($live)");
}

my $log = PostgreSQL::Test::Utils::slurp_file($node1->logfile)
  . PostgreSQL::Test::Utils::slurp_file($node2->logfile);
unlike($log, qr/TRAP|server process .* was terminated by signal/, 'no crash');
zk_done_check();
done_testing();
