
# Names and node data across database encodings (issue 11, review item 1).
# zklock keeps names and node data in UTF-8; a database in another encoding
# shows them converted:
#  - a name that database cannot hold (locked from a UTF8 database) is
#    shown with each character it cannot hold as \uXXXX, and never fails a
#    listing (zk_locks, zk_lock_nodes, zk_lock_local) of a LATIN1 database;
#  - zk_lock_revoke, zk_lock_release_explicit and zk_lock_force_release
#    still work on a subtree holding such a name; a literal name that looks
#    like the escape is another resource, and nothing of the real one goes;
#  - text the encoding can hold is converted, not replaced: "é" in a
#    query stays "é" in LATIN1, and a non-ASCII role sees the details of its
#    own lock (zk_locks matches the role by name);
#  - bytes another client wrote that are not UTF-8 are shown as "?";
#  - zk_lock_revoke from a LATIN1 database writes node data in UTF-8.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

zk_start();
my $node = zk_node('enc');
$node->safe_psql('postgres', q{
	CREATE DATABASE u8 TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C';
	CREATE DATABASE lat TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
});
$node->safe_psql($_, 'CREATE EXTENSION zklock') foreach qw(u8 lat);

# UTF-8 bytes, as psql sends and shows them with client_encoding UTF8
my $e_acute = "\xc3\xa9";        # é, U+00E9: LATIN1 has it
my $a_hira  = "\xe3\x81\x82";    # あ, U+3042: LATIN1 has not
# a role named in LATIN1's catalog bytes (created from the LATIN1 database)
$node->safe_psql('lat', qq{SET client_encoding = 'UTF8'; CREATE ROLE "rol$e_acute"});

my $u = zk_session($node, 'u8_holder', dbname => 'u8');
$u->query_ok(q{SET client_encoding = 'UTF8'});
my $l = zk_session($node, 'lat_viewer', dbname => 'lat');
$l->query_ok(q{SET client_encoding = 'UTF8'});

$u->query_ok("SELECT zk_lock_acquire_session('enc/jp/' || chr(12354)) /* $e_acute $a_hira */");
$u->query_ok(q{SELECT zk_lock_acquire_session('enc/fr/' || chr(233))});

# --- listings of the LATIN1 database ----------------------------------------
my $r = $l->query(q{SELECT resource FROM zk_locks WHERE resource LIKE 'enc%' ORDER BY resource});
is($r->{sqlstate}, '00000', 'LATIN1: zk_locks lists a name LATIN1 cannot hold (was 22P05)')
  or diag($r->{err});
is( $r->{out},
	join("\n", 'enc', 'enc/fr', "enc/fr/$e_acute", 'enc/jp', 'enc/jp/\u3042'),
	'LATIN1: é is shown as itself, あ as \u3042');
$r = $l->query(q{SELECT count(*) FROM zk_lock_nodes('enc/jp')});
is($r->{out}, '2', 'LATIN1: zk_lock_nodes of the subtree too');
$r = $l->query(q{SELECT resource FROM zk_lock_local WHERE resource LIKE 'enc/%/%' ORDER BY resource});
is($r->{out}, join("\n", "enc/fr/$e_acute", 'enc/jp/\u3042'),
	'LATIN1: zk_lock_local shows the names converted (was the UTF-8 bytes as LATIN1 characters)');
$r = $l->query(q{SELECT query FROM zk_locks WHERE resource = 'enc/jp/\u3042'});
is($r->{out}, "SELECT zk_lock_acquire_session('enc/jp/' || chr(12354)) /* $e_acute \\u3042 */;",
	'LATIN1: node data is converted (é kept, was "?"), what LATIN1 cannot hold escaped');
$r = $u->query(q{SELECT resource FROM zk_locks WHERE resource LIKE 'enc/jp/%'});
is($r->{out}, "enc/jp/$a_hira", 'UTF8: the same name as itself');

# a role named with é sees its own lock in LATIN1 (matched by name)
$l->query_ok(qq{SET ROLE "rol$e_acute"});
$l->query_ok(q{SELECT zk_lock_acquire_session('enc/mask')});
$r = $l->query(q{SELECT username, pid = pg_backend_pid() FROM zk_locks WHERE resource = 'enc/mask'});
is($r->{out}, "rol$e_acute|t",
	'LATIN1: a non-ASCII role sees the details of its own lock (was masked: "rol?")');
$l->query_ok(q{SELECT zk_lock_release('enc/mask')});
$l->query_ok(q{RESET ROLE});

# bytes another client wrote that are not UTF-8
my ($rc, $made) = ZkLockTest::zkutil('create-seq-hex', zk_path('enc/raw/x-LOCK-EXCLUSIVE-'),
	unpack('H*', "user=bad\xffname\nquery=q $e_acute \xff"));
is($rc, 0, 'another client writes a node with bytes that are not UTF-8');
$r = $l->query(q{SELECT username, query FROM zk_lock_nodes('enc/raw')});
is($r->{out}, "bad?name|q $e_acute ?", 'LATIN1: each invalid byte shown as "?"');
ZkLockTest::zkutil('delete-r', zk_path('enc/raw'));

# --- the admin functions on a subtree holding such a name -------------------
$l->query_ok(q{SELECT zk_lock_acquire_explicit('enc/jp', 'shared', ttl => '10 minutes', timeout => '10 s')});
$r = $l->query(q{SELECT zk_lock_revoke('enc/jp')});
is($r->{sqlstate} . ' ' . $r->{out}, '00000 1',
	'LATIN1: zk_lock_revoke works on the subtree (was 22P05)')
  or diag($r->{err});
# a revocation from the LATIN1 database writes the holder's details back
# in UTF-8 (they were written in LATIN1's bytes, shown as "?" everywhere)
$u->query_ok("SELECT zk_lock_acquire_session('enc/rv') /* $e_acute */");
$r = $l->query(q{SELECT zk_lock_revoke('enc/rv')});
is($r->{sqlstate} . ' ' . $r->{out}, '00000 1', 'LATIN1: zk_lock_revoke of a UTF8 database\'s lock');
# (read from another session: the revocation cancels what the holder runs
# next, which may be a query sent right after it)
my $u2 = zk_session($node, 'u8_viewer', dbname => 'u8');
$u2->query_ok(q{SET client_encoding = 'UTF8'});
$r = $u2->query(q{SELECT query FROM zk_lock_nodes('enc/rv') WHERE resource = 'enc/rv'});
is($r->{out}, "SELECT zk_lock_acquire_session('enc/rv') /* $e_acute */;",
	'UTF8: the revoked node\'s query still shows é (was "?")');
$u2->quit;
$r = $l->query(q{SELECT query FROM zk_lock_nodes('enc/rv') WHERE resource = 'enc/rv'});
is($r->{out}, "SELECT zk_lock_acquire_session('enc/rv') /* $e_acute */;", 'LATIN1: and so does LATIN1');
$r = $u->query(q{SELECT zk_lock_release('enc/rv')});
$u->query_ok(q{SELECT zk_lock_release('enc/rv')}) if $r->{sqlstate} eq '57014';

$r = $l->query(q{SELECT zk_lock_release_explicit('enc/jp', 'shared')});
is($r->{sqlstate} . ' ' . $r->{out}, '00000 1',
	'LATIN1: zk_lock_release_explicit works on the subtree (was 22P05)')
  or diag($r->{err});
# the escape is not the name: a resource literally named so is another one
$r = $l->query(q{SELECT zk_lock_force_release('enc/jp/\u3042')});
is($r->{sqlstate} . ' ' . $r->{out}, '00000 0',
	'LATIN1: force release of the literal text \u3042 removes nothing');
is(zk_count_locks(zk_path("enc/jp/$a_hira")), 1, '... the real holder keeps its node');
$r = $l->query(q{SELECT zk_lock_force_release('enc/jp')});
is($r->{sqlstate} . ' ' . $r->{out}, '00000 1',
	'LATIN1: zk_lock_force_release works on the subtree (was 22P05)')
  or diag($r->{err});

$u->query(q{SELECT zk_lock_release_all()});
$l->query(q{SELECT zk_lock_release_all()});

# --- node data that grows in UTF-8 (issue 20, finding 2) -------------------
# An instance, a database and a role named with 63 LATIN1 characters
# "é" (126 bytes each in UTF-8) and a 12-character application_name: the
# fields of an explicit lock's node data do not fit in UTF-8.  zklock cut
# the data after converting it, through ttl= ("ttl=3": a lock of a year
# swept within a second, or no ttl= at all: never swept); now the request
# is refused (54000) and nothing reaches ZooKeeper.  With names that fit,
# only the query is cut, and ttl= is whole.
my $e_latin = "\xe9";
my $node_e = zk_node('enc_names', node_name => $e_latin x 63,
	extra_conf => "zklock.sweep_interval = '500ms'");
$node_e->safe_psql('postgres', q{
	CREATE DATABASE lat TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
});
my $long_db = $e_acute x 63;
my $long_role = 'r' . ($e_acute x 62);
$node_e->safe_psql('lat', qq{SET client_encoding = 'UTF8';
	CREATE DATABASE "$long_db" TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
	CREATE ROLE "$long_role"});
# the database's name in its catalog bytes (LATIN1), as a client names it
$node_e->safe_psql($e_latin x 63, 'CREATE EXTENSION zklock');
my $ln = zk_session($node_e, 'holder_lat12', dbname => $e_latin x 63);
$ln->query_ok(q{SET client_encoding = 'UTF8'});
$ln->query_ok(qq{SET ROLE "$long_role"});
$r = $ln->query(q{SELECT zk_lock_acquire_explicit('enc/orders/2026', ttl => '1 year')});
is($r->{sqlstate}, '54000',
	'long names that grow in UTF-8: the explicit lock is refused (was stored with its ttl= cut)')
  or diag("got: $r->{out} $r->{err}");
like($r->{err}, qr/zklock lock node data would be too long/, '... saying why');
is(zk_count_locks(zk_path('enc/orders')), 0, '... and nothing is in ZooKeeper');
# the same names with a session lock (no ttl=, waiter=): these fit
$r = $ln->query(q{SELECT zk_lock_acquire_session('enc/orders/s')});
is($r->{sqlstate}, '00000', 'a session lock with the same names is taken');
$ln->query_ok(q{SELECT zk_lock_release('enc/orders/s')});

# names that fit once converted, and a long non-ASCII query: only it is cut
$ln->query_ok(q{RESET ROLE});
$ln->query_ok('/* x' . ($e_acute x 300) . " */ SELECT zk_lock_acquire_explicit('enc/orders/2027', ttl => '1 year')");
my ($node_path) = zk_lock_nodes(zk_path('enc/orders/2027'));
my ($rc2, $data) = ZkLockTest::zkutil('get', $node_path);
like($data, qr/^ttl=31536000000$/m, 'the node data keeps ttl= whole');
like($data, qr/^query=\/\* x($e_acute)+\n\z/m, '... and the query, cut between characters');
cmp_ok(length($data), '<=', 512, '... within the limit');
sleep(2);    # several sweeps
is(psql1($node_e, q{SELECT count(*) FROM zk_locks WHERE resource = 'enc/orders/2027' AND granted}),
	'1', 'the lock of a year is still there after several sweeps');
is($ln->query_ok(q{SELECT zk_lock_release_explicit('enc/orders/2027')}), '1', 'released');
$ln->quit;

zk_done_check();
done_testing();
