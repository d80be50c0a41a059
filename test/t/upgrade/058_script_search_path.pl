
# Review of 1.3 (issue 20, finding 3; REVIEW.md classes 8 and 15): what a
# role with no special rights can do through the extension's scripts and
# its new members.  No ZooKeeper is needed: nothing here takes a lock.
#
#  - zk_lock_status_watches() (1.3, EXECUTE to PUBLIC; since 1.7 to
#    pg_read_all_stats) without zklock in shared_preload_libraries, called
#    by a role that is not a superuser: 55000 like every other function
#    (test 005), not a crash that restarts the whole instance.
#  - A role with CREATE on the extension's schema plants operators there
#    for the argument types the scripts' DO blocks compare without an exact
#    pg_catalog operator (oid = regclass, oid = regprocedure, oid = integer,
#    text[] || text).  The extension scripts run with that schema first in
#    search_path (pg_catalog is searched implicitly before it, but has no
#    exact match for these pairs), as the superuser who runs CREATE
#    EXTENSION or ALTER EXTENSION UPDATE: the role's function must not run
#    as that superuser, on a fresh install and on every update path.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('plain58');
$node->init;
$node->start;
my ($ret, $out, $err);

# --- trojan operators in the extension's schema
$node->safe_psql('postgres', q{CREATE ROLE app LOGIN});

# app's operators: each makes app a superuser when it runs as one
my $plant = q{
	CREATE FUNCTION zs.trojan() RETURNS boolean
	LANGUAGE plpgsql AS $f$
	BEGIN
	  IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
	     AND NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'app') THEN
	    EXECUTE 'ALTER ROLE app SUPERUSER';
	  END IF;
	  RETURN NULL;
	END $f$;
	CREATE FUNCTION zs.t_oid_regclass(oid, regclass) RETURNS boolean
	  LANGUAGE sql AS $f$ SELECT zs.trojan() OR $1 OPERATOR(pg_catalog.=) $2::pg_catalog.oid $f$;
	CREATE FUNCTION zs.t_oid_regproc(oid, regprocedure) RETURNS boolean
	  LANGUAGE sql AS $f$ SELECT zs.trojan() OR $1 OPERATOR(pg_catalog.=) $2::pg_catalog.oid $f$;
	CREATE FUNCTION zs.t_oid_int(oid, integer) RETURNS boolean
	  LANGUAGE sql AS $f$ SELECT zs.trojan() OR $1 OPERATOR(pg_catalog.=) $2::pg_catalog.oid $f$;
	CREATE FUNCTION zs.t_oid_int_ne(oid, integer) RETURNS boolean
	  LANGUAGE sql AS $f$ SELECT zs.trojan() OR $1 OPERATOR(pg_catalog.<>) $2::pg_catalog.oid $f$;
	CREATE FUNCTION zs.t_cat(text[], text) RETURNS text[]
	  LANGUAGE sql AS $f$ SELECT CASE WHEN zs.trojan() THEN NULL END;
	                      SELECT pg_catalog.array_append($1, $2) $f$;
	CREATE OPERATOR zs.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = zs.t_oid_regclass);
	CREATE OPERATOR zs.= (LEFTARG = oid, RIGHTARG = regprocedure, FUNCTION = zs.t_oid_regproc);
	CREATE OPERATOR zs.= (LEFTARG = oid, RIGHTARG = integer, FUNCTION = zs.t_oid_int);
	CREATE OPERATOR zs.<> (LEFTARG = oid, RIGHTARG = integer, FUNCTION = zs.t_oid_int_ne);
	CREATE OPERATOR zs.|| (LEFTARG = text[], RIGHTARG = text, FUNCTION = zs.t_cat);};

# name, version installed (undef: the default), the updates (undef: the
# default), whether an administrator granted an admin function by hand
# before the update (1.2 documented no other way to delegate it)
my @paths = (
	[ 'fresh',     undef, [] ],
	[ 'v10_once',  '1.0', [undef] ],
	[ 'v11_once',  '1.1', [undef] ],
	[ 'v11_steps', '1.1', [ '1.2', undef ] ],
	[ 'v12',       '1.2', [undef] ],
);
foreach my $path (@paths)
{
	my ($name, $version, $updates) = @$path;
	my $db = "s_$name";
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
		CREATE SCHEMA zs;
		GRANT USAGE, CREATE ON SCHEMA zs TO app;
		CREATE ROLE ops_} . $name . q{;});
	if (@$updates)
	{
		$node->safe_psql($db,
			"CREATE EXTENSION zklock SCHEMA zs VERSION '$version'");
		$node->safe_psql($db,
			"GRANT EXECUTE ON FUNCTION zs.zk_lock_force_release(text, text) TO ops_$name");
	}
	# app plants its operators, as app
	my ($prc, $pout, $perr) = $node->psql($db, $plant, extra_params => [ '-U', 'app' ]);
	is($prc, 0, "$name: app can create operators in the extension's schema") or diag($perr);

	my $all_err = '';
	if (!@$updates)
	{
		my ($rc, $o, $e) = $node->psql($db, 'CREATE EXTENSION zklock SCHEMA zs');
		is($rc, 0, "$name: CREATE EXTENSION") or diag($e);
		$all_err .= $e;
	}
	foreach my $to (@$updates)
	{
		my ($rc, $o, $e) = $node->psql($db,
			'ALTER EXTENSION zklock UPDATE' . (defined $to ? " TO '$to'" : ''));
		is($rc, 0, "$name: ALTER EXTENSION zklock UPDATE TO " . ($to // 'the default'))
		  or diag($e);
		$all_err .= $e;
	}
	is($node->safe_psql($db, q{SELECT rolsuper FROM pg_roles WHERE rolname = 'app'}),
		'f', "$name: app's operators did not run as the superuser who ran the script");
	$node->safe_psql('postgres', 'ALTER ROLE app NOSUPERUSER');
}

# --- zk_lock_status_watches without the library (its own instance: a
# crash ends every backend of it)
my $plain = PostgreSQL::Test::Cluster->new('crash58');
$plain->init;
$plain->append_conf('postgresql.conf', 'restart_after_crash = on');
$plain->start;
$plain->safe_psql('postgres', q{
	CREATE ROLE plain LOGIN IN ROLE pg_read_all_stats;
	CREATE EXTENSION zklock;});
($ret, $out, $err) = $plain->psql('postgres',
	q{SELECT zk_lock_status_watches()},
	extra_params => [ '-U', 'plain', '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  55000: zklock is not loaded/,
	'zk_lock_status_watches() without the library: 55000, as every function');
$plain->poll_query_until('postgres', 'SELECT true');
unlike(slurp_file($plain->logfile), qr/terminated by signal/, 'no backend crashed');
$plain->stop;

$node->stop;
done_testing();
