
# Kerberos completed (issue 30): zklock.sasl_principal, and a reload that
# names another keytab or principal used by the next session.  The realm
# and ZooKeeper as in 117_kerberos.pl (an MIT KDC on loopback), with two
# client principals, zklock and zklock2, in keytabs a (zklock), b (zklock2)
# and both (zklock first):
#  - keytab a: ZooKeeper authenticates zklock;
#  - reload to keytab b: the next session is zklock2's (before, the
#    worker's credential cache kept zklock's tickets, and the session was
#    zklock's again);
#  - keytab both with zklock.sasl_principal = 'zklock', then 'zklock2':
#    the session is that principal's; 'nobody': refused before
#    connecting, said in last_error and the log in words, and lock
#    requests fail with 08006 within zklock.connect_timeout.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;
use ZkKerberos;

use File::Copy qw(copy);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

# --- the realm, and ZooKeeper with Kerberos (test/ZkKerberos.pm) ----------------
my $dir = krb_start(principals => [ 'zklock', 'zklock2', 'zklocx' ]);
# (krb_keytab: ktadd -norandkey, so every keytab of a principal holds its
# one key; "both" holds zklock's first)
krb_keytab('zklock', "$dir/a.keytab");
krb_keytab('zklock2', "$dir/b.keytab");
krb_keytab('zklock zklock2', "$dir/both.keytab");
krb_keytab('zklocx', "$dir/x.keytab");
krb_zk_start();

my $zklog = zk_dir() . '/server1.log';
sub authenticated
{
	my ($who) = @_;
	my @n = slurp_file($zklog) =~ /Successfully authenticated client: authenticationID=\Q$who\E\@ZKLOCK\.TEST;/g;
	return scalar(@n);
}
sub set_krb
{
	my ($node, $keytab, $principal) = @_;
	$node->append_conf('postgresql.conf',
		"zklock.sasl_keytab = '$dir/$keytab.keytab'\nzklock.sasl_principal = '$principal'\n");
	$node->reload;
	return;
}

my $node = zk_node('node1', extra_conf => <<"EOC");
zklock.sasl_mechanism = 'GSSAPI'
zklock.sasl_keytab = '$dir/a.keytab'
zklock.sasl_host = 'localhost'
zklock.connect_timeout = '2s'
zklock.session_timeout = '4s'
EOC
cmp_ok(authenticated('zklock'), '>=', 1, 'keytab a: ZooKeeper authenticated zklock');
is(authenticated('zklock2'), 0, 'and not zklock2');

# --- another keytab at reload --------------------------------------------------------
set_krb($node, 'b', '');
ok(wait_until(sub { authenticated('zklock2') >= 1 }, timeout => 30),
	'reload to keytab b: the next session authenticates as zklock2, its principal')
  or diag('zklock sessions: ' . authenticated('zklock') . ', zklock2: ' . authenticated('zklock2'));

# --- the principal named --------------------------------------------------------------
my $before = authenticated('zklock');
set_krb($node, 'both', 'zklock');
ok(wait_until(sub { authenticated('zklock') > $before }, timeout => 30),
	"keytab both, zklock.sasl_principal = 'zklock': the session is zklock's")
  or diag('zklock sessions: ' . authenticated('zklock') . ', zklock2: ' . authenticated('zklock2'));
$before = authenticated('zklock2');
set_krb($node, 'both', 'zklock2@ZKLOCK.TEST');
ok(wait_until(sub { authenticated('zklock2') > $before }, timeout => 30),
	"zklock.sasl_principal = 'zklock2\@ZKLOCK.TEST': the session is zklock2's");

# --- a principal the keytab does not hold ---------------------------------------------------
set_krb($node, 'both', 'nobody');
my $last = '';
ok( wait_until(
		sub {
			$last = psql1($node, q{SELECT coalesce(last_error, '') FROM zk_lock_status});
			$last =~ /zklock.sasl_principal "nobody" is not in zklock.sasl_keytab/;
		},
		timeout => 30),
	'a principal not in the keytab: last_error says so')
  or diag("last_error: $last");
ok(zk_wait_log($node, qr/zklock.sasl_principal "nobody" is not in zklock.sasl_keytab ".*both.keytab": add its key/, 0, 10),
	'and the log');
my $s = zk_session($node, 'refused');
my $t0 = time();
my $r = $s->query(q{SELECT zk_lock_acquire('krb/r')});
my $took = time() - $t0;
is($r->{sqlstate}, '08006', 'an acquire fails with 08006');
cmp_ok($took, '<', 2 + 3, 'within zklock.connect_timeout (2 s) and some slack')
  or diag("took ${took}s");


# --- review: a keytab that is no keytab -------------------------------------------------
# (its error is not "the principal is not in it")
krb_write_file("$dir/bad.keytab", "-----BEGIN PRIVATE KEY-----\nMIIE\n", 0600);
set_krb($node, 'bad', 'zklock');
ok( wait_until(
		sub {
			$last = psql1($node, q{SELECT coalesce(last_error, '') FROM zk_lock_status});
			$last =~ /could not read zklock.sasl_keytab ".*bad.keytab": /;
		},
		timeout => 30),
	'a keytab that cannot be read: last_error says so, in Kerberos\'s words')
  or diag("last_error: $last");
unlike($last, qr/is not in zklock.sasl_keytab/, 'and not that the principal is missing');

# --- review: a keytab rewritten in place, same inode, size and mtime -------------------
# (cp -p, a restore, a coarse-mtime file system): the next session takes the
# principal of what the file now holds, zklocx, not the cache of zklock
copy("$dir/a.keytab", "$dir/cur.keytab") or die "copy: $!";
chmod(0600, "$dir/cur.keytab");
$before = authenticated('zklock');
set_krb($node, 'cur', '');
ok(wait_until(sub { authenticated('zklock') > $before }, timeout => 30),
	'keytab cur (a copy of a): the session is zklock\'s');
ok(wait_until(sub { psql1($node, 'SELECT state FROM zk_lock_status') eq 'connected' }, timeout => 30),
	'connected');
my @st0 = stat("$dir/cur.keytab");
is(-s "$dir/x.keytab", $st0[7], 'keytab x (zklocx) has the size of keytab a (zklock)');
system('touch', '-r', "$dir/cur.keytab", "$dir/ref") == 0 or die 'touch';
{
	open(my $in, '<:raw', "$dir/x.keytab") or die $!;
	local $/;
	my $bytes = <$in>;
	close($in);
	open(my $out, '+<:raw', "$dir/cur.keytab") or die $!;
	print $out $bytes;
	close($out);
}
system('touch', '-r', "$dir/ref", "$dir/cur.keytab") == 0 or die 'touch';
my @st1 = stat("$dir/cur.keytab");
is(join(',', @st1[1, 7, 9]), join(',', @st0[1, 7, 9]), 'rewritten: same inode, size and mtime');
# the next session: the worker stopped past the session timeout
my $worker = psql1($node, 'SELECT worker_pid FROM zk_lock_status');
my $sid = psql1($node, 'SELECT session_id FROM zk_lock_status');
kill 'STOP', $worker;
sleep(7);
kill 'CONT', $worker;
ok(wait_until(sub { authenticated('zklocx') >= 1 }, timeout => 40),
	'a keytab rewritten in place with the same inode, size and mtime: the next session is zklocx\'s')
  or diag('last_error: ' . psql1($node, q{SELECT coalesce(last_error, '') FROM zk_lock_status}));
ok(wait_until(sub { psql1($node, 'SELECT state FROM zk_lock_status') eq 'connected' }, timeout => 30),
	'and connected')
  or diag('last_error: ' . psql1($node, q{SELECT coalesce(last_error, '') FROM zk_lock_status}));
isnt(psql1($node, 'SELECT session_id FROM zk_lock_status'), $sid, 'a new session');

zk_done_check();
done_testing();
