
# Review of instance leadership (issue 17): attacks that the authors' tests
# did not make.
#  (a) Names kept for itself: another ZooKeeper client creates a group's
#      node first, letting anyone create children but not list them.  The
#      worker's create succeeds, its listing fails (NOAUTH).  It must not
#      make a new candidate node at each retry (nodes that grow, each one a
#      candidate ahead of the next in the same session, so that once the
#      node can be listed again the instance waits behind itself forever):
#      at most one node of the instance, and it leads once the ACL is
#      opened.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $hosts = zk_start();
my $node1 = zk_node('node1');

# --- (a) a group node squatted with create-but-not-read rights ---------------
my $squatter = 'squatter:secret';
my $gpath = zk_path('zklock.elections/squat');
my ($rc, $out, $err) = zkutil('create-acl', $gpath, 'cdwa', $squatter);
is($rc, 0, 'another client makes the group node: anyone may create, nobody else list')
  or diag($err);

my $log_at = -s $node1->logfile;
$node1->safe_psql('postgres',
	q{ALTER SYSTEM SET zklock.elections = 'squat'; SELECT pg_reload_conf()});
ok($node1->wait_for_log(qr/could not join election group "squat"/, $log_at),
	'the worker cannot join the group and says so');

# three retries' worth (the worker tries again every 5 s)
sleep(16);

sub own_nodes
{
	local $ENV{ZKUTIL_AUTH} = $squatter;
	my ($rc, $out, $err) = zkutil('ls-r', $gpath);
	die "zkutil ls-r: $err" if $rc != 0;
	return scalar(grep { m{/cand-[^/]+$} } split /\n/, $out);
}
my $n = own_nodes();
cmp_ok($n, '<=', 1, "the instance has at most one candidate node in the group ($n)");
is(psql1($node1, q{SELECT zk_is_leader('squat')}), 'f', 'and does not claim to lead it');

($rc, $out, $err) = zkutil('open-acl', $gpath, $squatter);
is($rc, 0, 'the group node is opened to everyone') or diag($err);
ok(wait_until(sub { psql1($node1, q{SELECT zk_is_leader('squat')}) eq 't' }, timeout => 20),
	'then the only candidate leads the group');
$n = own_nodes();
is($n, 1, "with one node ($n)");

done_testing();
