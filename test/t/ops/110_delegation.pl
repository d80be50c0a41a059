
# Delegated revocation and forced release (issue 28, finding 7): the recipe
# of doc/sql.md -- a superuser's SECURITY DEFINER function that calls
# zk_lock_revoke, granted to a role that is not a superuser -- run as it is
# written there (read from the doc at test time), called by a member of the
# granted role:
#  - a holder on the other instance, sleeping in its transaction with the
#    lock, is canceled (57014) and the function returns 1 (before 1.7 it
#    returned 0: zk_lock_revoke listed the holders through zk_locks, which
#    masked their pids by the caller's role, and skipped them all);
#  - the same wrapper around zk_lock_force_release (the doc's sentence
#    says how) removes a session holder's node, returns 1, and the holder's
#    instance finds its lock lost;
#  - the wrapper's own check refuses another resource (42501) and leaves
#    its holder alone; a role without the grant is refused (42501); a
#    member of the granted role calling zk_lock_revoke or
#    zk_lock_force_release itself is refused (42501);
#  - the same wrapper owned by a role that is not a superuser (even one
#    granted EXECUTE on zk_lock_revoke and zk_lock_force_release by hand)
#    gives nobody revoke power: 42501 for its owner and for the role it is
#    granted to, and the holder keeps its lock.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../..";
use ZkLockTest;

use PostgreSQL::Test::Utils;
use Test::More;

zk_start();
my $node1 = zk_node('node1', session_timeout => '10s');    # the delegate's
my $node2 = zk_node('node2', session_timeout => '10s');    # the holders'

# the recipe, as doc/sql.md writes it
my $doc = slurp_file("$FindBin::RealBin/../../../doc/sql.md");
my ($recipe) = $doc =~
  /To delegate revocation to a role that is not a superuser.*?```sql\n(.*?)```/s;
ok(defined $recipe && $recipe =~ /CREATE FUNCTION etl_revoke/,
	'doc/sql.md has the delegation recipe');
like($doc, qr/The same function with `zk_lock_force_release\(resource\)` in place of\s+`zk_lock_revoke\(resource, 'cancel'\)`/,
	'doc/sql.md says how the same wrapper delegates zk_lock_force_release');
(my $force_recipe = $recipe) =~ s/etl_revoke/etl_force_release/g;
$force_recipe =~ s/zk_lock_revoke\(resource, 'cancel'\)/zk_lock_force_release(resource)/;

$node1->safe_psql('postgres', q{
	CREATE ROLE etl_admin;
	CREATE ROLE etl_ops LOGIN IN ROLE etl_admin;   -- a member of the granted role
	CREATE ROLE bystander LOGIN;});
$node1->safe_psql('postgres', $recipe);
$node1->safe_psql('postgres', $force_recipe);

# $sql as $role on node1: (SQLSTATE, output)
sub as_role
{
	my ($role, $sql) = @_;
	my ($rc, $out, $err) = $node1->psql('postgres',
		"\\set VERBOSITY verbose\n$sql", extra_params => [ '-U', $role ]);
	my ($code) = $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ($code // ($rc == 0 ? '00000' : "rc=$rc"), $out);
}

# a holder on node2 sleeping in its transaction with the lock on $res
sub sleeping_holder
{
	my ($name, $res) = @_;
	my $h = zk_session($node2, $name);
	$h->send("BEGIN; SELECT zk_lock_acquire('$res') > 0; SELECT pg_sleep(60);");
	ok( wait_until(
			sub {
				psql1($node2, 'SELECT wait_event FROM pg_stat_activity WHERE pid = '
					  . $h->pid) eq 'PgSleep';
			},
			timeout => 30),
		"$name sleeps holding $res on the other instance");
	return $h;
}

# --- revocation, delegated ---------------------------------------------------
my $h = sleeping_holder('holder', 'etl/nightly');
my ($code, $out) = as_role('etl_ops', q{SELECT etl_revoke('etl/nightly')});
is("$code $out", '00000 1', 'etl_revoke, called by a member of etl_admin, revokes one holder');
my $r = $h->wait(30);
is($r && $r->{sqlstate}, '57014', "the holder's statement is canceled");
$h->query('ROLLBACK');
ok(zk_wait_no_locks(zk_path('etl/nightly'), 20), "and the holder's lock is released");

# the wrapper's own check; a role without the grant; the function itself
my $other = sleeping_holder('other', 'billing/close');
($code) = as_role('etl_ops', q{SELECT etl_revoke('billing/close')});
is($code, '42501', "the wrapper's check refuses a resource outside etl/");
($code) = as_role('bystander', q{SELECT etl_revoke('etl/nightly')});
is($code, '42501', 'a role without the grant is refused');
($code) = as_role('etl_ops', q{SELECT zk_lock_revoke('billing/close')});
is($code, '42501', 'a member of etl_admin calling zk_lock_revoke itself is refused');
($code) = as_role('etl_ops', q{SELECT zk_lock_force_release('billing/close')});
is($code, '42501', 'a member of etl_admin calling zk_lock_force_release itself is refused');
# the recipe again, owned by a role that is not a superuser
$node1->safe_psql('postgres', q{
	CREATE ROLE etl_owner LOGIN;
	CREATE SCHEMA etl_own AUTHORIZATION etl_owner;
	GRANT EXECUTE ON FUNCTION zk_lock_revoke(text, text),
	  zk_lock_force_release(text, text) TO etl_owner;});
foreach my $which ([ 'etl_revoke', $recipe ], [ 'etl_force_release', $force_recipe ])
{
	my ($fn, $text) = @$which;
	(my $own = $text) =~ s/\b$fn\b/etl_own.$fn/g;
	$own =~ s/'etl\/%'/'%'/;    # and no check of its own
	my ($rc, $o, $e) = $node1->psql('postgres', $own, extra_params => [ '-U', 'etl_owner', '-v', 'ON_ERROR_STOP=1' ]);
	is($rc, 0, "etl_owner creates its own $fn") or diag($e);
	foreach my $caller (qw(etl_ops etl_owner))
	{
		($code) = as_role($caller, qq{SELECT etl_own.$fn('billing/close')});
		is($code, '42501', "$caller calling etl_owner's $fn is refused (its owner is no superuser)");
	}
}
($code) = as_role('etl_ops', q{SELECT etl_force_release('billing/close')});
is($code, '42501', "the force-release wrapper's check refuses a resource outside etl/");
is(zk_count_locks(zk_path('billing/close')), 1, 'the other holder still has its lock node');
is(psql1($node2, q{SELECT count(*) FROM zk_lock_local WHERE resource = 'billing/close' AND state = 'granted'}),
	'1', 'and its instance still counts it granted');
ok($other->alive && !$other->done, 'and it still sleeps');

# --- forced release, delegated -----------------------------------------------
my $s = zk_session($node2, 'session_holder');
$s->query_ok(q{SELECT zk_lock_acquire_session('etl/weekly') > 0});
($code, $out) = as_role('etl_ops', q{SELECT etl_force_release('etl/weekly')});
is("$code $out", '00000 1',
	'etl_force_release, called by a member of etl_admin, removes one holder node');
ok(zk_wait_no_locks(zk_path('etl/weekly'), 20), 'the holder node is gone');
ok( wait_until(
		sub {
			psql1($node2, q{SELECT count(*) FROM zk_lock_local WHERE resource = 'etl/weekly' AND state = 'lost'}) eq '1';
		},
		timeout => 30),
	"the holder's instance finds the lock lost");
$s->query('SELECT zk_lock_release_all()');

# the superuser's own call still works as before
is(psql1($node1, q{SELECT zk_lock_revoke('billing/close')}), '1',
	'a superuser revokes the other holder');
$r = $other->wait(30);
is($r && $r->{sqlstate}, '57014', 'that holder is canceled');
$other->query('ROLLBACK');

zk_done_check();
done_testing();
