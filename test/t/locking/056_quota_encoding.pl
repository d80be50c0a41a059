
# Review of issue 20 (finding 7, zklock.max_explicit_locks_per_role): the
# quota counts a role's explicit lock nodes by the user= of their data, and
# user= is the role's name converted from the DATABASE encoding to UTF-8.
# Role names live in a shared catalog, with no encoding of their own: the
# same role, non-ASCII name, gets another user= in a LATIN1 database than
# in a UTF8 one, so each database encoding has a quota of its own.
# Fixed: a shared catalog's name goes into node data as its bytes when
# they are UTF-8.  (Left: zk_lock_release_explicit, in SQL, matches
# zk_locks.username, shown in the database encoding, so a non-ASCII role
# cannot release from a LATIN1 database a lock it took from a UTF8 one.)
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node = zk_node('quota_enc');
$node->safe_psql('postgres', q{
	CREATE DATABASE u8 TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C';
	CREATE DATABASE lat TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
});
$node->safe_psql($_, 'CREATE EXTENSION zklock') foreach qw(u8 lat);

my $e_acute = "\xc3\xa9";    # é in UTF-8
# a role created from the UTF8 database (its catalog bytes are UTF-8)
$node->safe_psql('u8', qq{SET client_encoding = 'UTF8'; CREATE ROLE "q$e_acute"});
my $oid = $node->safe_psql('u8', qq{SET client_encoding = 'UTF8';
	SELECT oid FROM pg_roles WHERE rolname = 'q$e_acute'});

# act as that role (by OID: its catalog bytes, whatever the encoding),
# limited to 2 explicit locks
sub as_role
{
	my ($db) = @_;
	my $s = zk_session($node, "quota_$db", dbname => $db);
	$s->query_ok('SET zklock.max_explicit_locks_per_role = 2');
	$s->query_ok("SELECT set_config('role', rolname::text, false) FROM pg_roles WHERE oid = $oid");
	is($s->query_ok('SELECT current_user = session_user'), 'f', "$db: acting as the role");
	return $s;
}

my $u = as_role('u8');
$u->query_ok(q{SELECT zk_lock_acquire_explicit('qe/1', ttl => '1 hour')});
$u->query_ok(q{SELECT zk_lock_acquire_explicit('qe/2', ttl => '1 hour')});
my $r = $u->query(q{SELECT zk_lock_acquire_explicit('qe/3', ttl => '1 hour')});
is($r->{sqlstate}, '53400', 'UTF8: the third explicit lock of the role is refused');

my $l = as_role('lat');
$r = $l->query(q{SELECT zk_lock_acquire_explicit('qe/4', ttl => '1 hour')});
is($r->{sqlstate}, '53400',
	'LATIN1: the same role is over its limit too (it holds 2 explicit locks)');
is(zk_count_locks(zk_path('qe')), 2, '... and no third node is made');

$_->quit for ($u, $l);
$node->safe_psql('postgres', q{SELECT zk_lock_force_release(r) FROM
	(VALUES ('qe/1'), ('qe/2'), ('qe/4')) v(r)});
zk_done_check();
done_testing();
