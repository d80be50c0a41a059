/*-------------------------------------------------------------------------
 *
 * zklock.c
 *		Module load: settings, shared memory hooks, the background worker.
 *
 * zklock must be loaded through shared_preload_libraries: the worker and
 * the shared entry table exist only then.  Loaded any other way, the SQL
 * functions report that (see backend.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "settings.h"
#include "zklock.h"
#include "shmem.h"
#include "election.h"
#include "resource.h"
#include "worker.h"
#include "backend.h"
#include "failpoint.h"
#include "wait_events.h"
#include "stats.h"

ZKLOCK_MODULE_MAGIC;

char	   *zklock_hosts = NULL;
char	   *zklock_root = NULL;
int			zklock_session_timeout = 10000;
int			zklock_connect_timeout = 5000;
char	   *zklock_node_name = NULL;
char	   *zklock_auth = NULL;
char	   *zklock_auth_file = NULL;
char	   *zklock_node_naming = NULL;
int			zklock_max_locks_per_backend = 32;
int			zklock_max_locks = 0;
char	   *zklock_allowed_subtrees = NULL;
char	   *zklock_allowed_queues = NULL;
int			zklock_sweep_interval = 60000;
int			zklock_deadlock_timeout = -1;
bool		zklock_guard_by_listing = true;
int			zklock_lease_margin = 2000;
int			zklock_max_explicit_locks_per_role = 100;
int			zklock_max_queue_items = -1;
char	   *zklock_advisory_namespace = NULL;
char	   *zklock_elections = NULL;
bool		zklock_track_stats = true;
int			zklock_stats_max = 1000;
bool		zklock_ssl = false;
char	   *zklock_ssl_ca_file = NULL;
char	   *zklock_ssl_cert_file = NULL;
char	   *zklock_ssl_key_file = NULL;
bool		zklock_ssl_verify_host = true;
char	   *zklock_sasl_mechanism = NULL;
char	   *zklock_sasl_user = NULL;
char	   *zklock_sasl_password_file = NULL;
char	   *zklock_sasl_service = NULL;
char	   *zklock_sasl_host = NULL;
char	   *zklock_sasl_keytab = NULL;
char	   *zklock_sasl_principal = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static object_access_hook_type prev_object_access_hook = NULL;

void		_PG_init(void);

static bool
check_root(char **newval, void **extra, GucSource source)
{
	const char *r = *newval;

	if (r == NULL || r[0] != '/' || strlen(r) > ZKLOCK_MAX_ROOT_LEN)
	{
		GUC_check_errdetail("zklock.root must be an absolute ZooKeeper path of at most %d bytes.",
							ZKLOCK_MAX_ROOT_LEN);
		return false;
	}
	if (strcmp(r, "/") == 0)
	{
		GUC_check_errdetail("zklock.root cannot be the ZooKeeper root \"/\".");
		return false;
	}
	for (const char *p = r; *p; p++)
	{
		if ((unsigned char) *p < 0x20 || *p == 0x7f ||
			(p[0] == '/' && (p[1] == '/' || p[1] == '\0')))
		{
			GUC_check_errdetail("zklock.root must not contain control characters, empty segments or a trailing \"/\".");
			return false;
		}
		if (p[0] == '/' && p[1] == '.' &&
			(p[2] == '/' || p[2] == '\0' ||
			 (p[2] == '.' && (p[3] == '/' || p[3] == '\0'))))
		{
			GUC_check_errdetail("zklock.root must not contain \".\" or \"..\" segments.");
			return false;
		}
		if (strncmp(p, "/zookeeper", 10) == 0 && p == r &&
			(p[10] == '/' || p[10] == '\0'))
		{
			GUC_check_errdetail("zklock.root must not be under /zookeeper, which ZooKeeper reserves.");
			return false;
		}
	}
	return true;
}

static bool
check_hosts(char **newval, void **extra, GucSource source)
{
	const char *h = *newval;

	if (h == NULL)
		return true;
	if (strlen(h) > ZKLOCK_MAX_HOSTS_LEN)
	{
		GUC_check_errdetail("zklock.hosts is longer than %d bytes.",
							ZKLOCK_MAX_HOSTS_LEN);
		return false;
	}
	for (const char *p = h; *p; p++)
	{
		if (*p == ' ' || (unsigned char) *p < 0x20)
		{
			GUC_check_errdetail("zklock.hosts is a comma-separated list of host:port with no spaces, optionally followed by a chroot path.");
			return false;
		}
	}
	return true;
}

/*
 * zklock.ssl_*_file: the client library takes the three paths as one
 * comma-separated string, so a path may not hold a comma.
 */
static bool
check_ssl_file(char **newval, void **extra, GucSource source)
{
	const char *f = *newval;

	if (f == NULL)
		return true;
	if (strlen(f) >= MAXPGPATH)
	{
		GUC_check_errdetail("The path is longer than %d bytes.", MAXPGPATH - 1);
		return false;
	}
	if (strchr(f, ',') != NULL)
	{
		GUC_check_errdetail("ZooKeeper's C client takes no path with a comma in it.");
		return false;
	}
	return true;
}

/*
 * zklock.auth (deprecated: zklock.auth_file) holds a password, so no value
 * of it may reach anyone but the server's OS user:
 *
 *	- SHOW and current_setting() show a mask, whoever asks (on PostgreSQL 15
 *	  GUC_SUPERUSER_ONLY still shows the value to pg_read_all_settings, i.e.
 *	  to pg_monitor); GUC_NO_SHOW_ALL keeps it out of pg_settings and SHOW
 *	  ALL;
 *	- there is no check hook: core logs a rejected value in full ("invalid
 *	  value for parameter"), so every value is accepted here and the worker
 *	  judges it when it uses it (worker/credentials.c), in messages that
 *	  never quote it.
 *
 * pg_file_settings still shows the line of the configuration file to whoever
 * may read that view (superusers, unless granted): hence zklock.auth_file.
 */
static const char *
show_auth(void)
{
	return (zklock_auth != NULL && zklock_auth[0] != '\0') ? "********" : "";
}

static bool
check_node_name(char **newval, void **extra, GucSource source)
{
	const char *n = *newval;

	if (n == NULL)
		return true;
	if (strlen(n) > 63)
	{
		GUC_check_errdetail("zklock.node_name is at most 63 bytes long.");
		return false;
	}
	for (const unsigned char *p = (const unsigned char *) n; *p; p++)
	{
		if (*p < 0x20 || *p == 0x7f)
		{
			GUC_check_errdetail("zklock.node_name may not contain control characters.");
			return false;
		}
	}
	return true;
}

static bool
check_node_naming(char **newval, void **extra, GucSource source)
{
	char	   *why = zklock_check_node_naming(*newval);

	if (why)
	{
		GUC_check_errdetail("%s", why);
		GUC_check_errhint("zklock.node_naming is a comma-separated list of resource=style, where style is hive, curator, curator-mutex, kazoo or recipe.");
		return false;
	}
	return true;
}

/* zklock.elections: the election groups (election_common.c parses it) */
static bool
check_elections(char **newval, void **extra, GucSource source)
{
	char		names[ZKLOCK_MAX_ELECTIONS][ZKLOCK_MAX_GROUP_LEN + 1];
	char		why[256];

	if (zklock_election_parse(*newval, names, why, sizeof(why)) < 0)
	{
		GUC_check_errdetail("%s", why);
		GUC_check_errhint("zklock.elections is a comma-separated list of at most %d group names, each 1 to %d bytes of A-Z, a-z, 0-9, \"_\", \".\" and \"-\".",
						  ZKLOCK_MAX_ELECTIONS, ZKLOCK_MAX_GROUP_LEN);
		return false;
	}
	return true;
}

/*
 * zklock.allowed_subtrees and zklock.allowed_queues (1.9), one syntax
 * (resource.c's walk).  A value written before items had to be resource
 * names, in the configuration file, on the command line, or with ALTER
 * ROLE/DATABASE SET, is applied as it is (its bad item matches nothing):
 * refused, it would fall back to the default, "*", and allow everything (a
 * placeholder from the file is applied with a mere WARNING when the
 * library defines the setting).  Every value being set in a session or
 * stored by ALTER ROLE/DATABASE ... SET (tested with PGC_S_TEST) is
 * checked in full.
 */
static bool
check_allowed_list(const char *setting, const char *names, char **newval,
				   GucSource source)
{
	const char *why = NULL;
	bool		strict = source > PGC_S_DATABASE_USER;

	if (!zklock_check_allowed_subtrees(*newval, &why, strict))
	{
		GUC_check_errdetail("%s is \"*\" or a comma-separated list of %s (%s).",
							setting, names, why);
		return false;
	}
	return true;
}

static bool
check_allowed_subtrees(char **newval, void **extra, GucSource source)
{
	return check_allowed_list("zklock.allowed_subtrees", "resource names",
							  newval, source);
}

static bool
check_allowed_queues(char **newval, void **extra, GucSource source)
{
	return check_allowed_list("zklock.allowed_queues", "queue names",
							  newval, source);
}

/*
 * zklock.advisory_namespace (advisory.c checks it): in full where it is
 * being set (SET, ALTER DATABASE/ROLE ... SET, tested with PGC_S_TEST) in
 * a transaction; a stored value applied at login only by its form, since
 * refusing it would fall back to the database's name (its key is then
 * refused at use, with the reason).
 */
static bool
check_advisory_namespace(char **newval, void **extra, GucSource source)
{
	const char *why;

	if (source > PGC_S_DATABASE_USER && IsTransactionState())
		why = zklock_advisory_namespace_problem(*newval);
	else
		why = zklock_advisory_namespace_form(*newval);
	if (why)
	{
		GUC_check_errdetail("%s", why);
		return false;
	}
	return true;
}

/*
 * Define every zklock.* setting.  Long only because it is a list: one
 * DefineCustom*Variable call per setting, each with its help text, which
 * reads best in one place.
 */
static void
zklock_define_settings(void)
{
	DefineCustomStringVariable("zklock.hosts",
							   "ZooKeeper ensemble to connect to, as host:port[,host:port...].",
							   NULL,
							   &zklock_hosts,
							   "127.0.0.1:2181",
							   PGC_SIGHUP,
							   0,
							   check_hosts, NULL, NULL);

	DefineCustomStringVariable("zklock.root",
							   "ZooKeeper path under which all lock nodes live.",
							   "Every instance that must see the same locks uses the same root.",
							   &zklock_root,
							   "/zklock",
							   PGC_POSTMASTER,
							   0,
							   check_root, NULL, NULL);

	DefineCustomIntVariable("zklock.session_timeout",
							"ZooKeeper session timeout requested by the worker.",
							"The server may negotiate it into its own bounds.",
							&zklock_session_timeout,
							10000, 2000, 600000,
							PGC_POSTMASTER,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.connect_timeout",
							"How long a lock request waits for a ZooKeeper connection before it fails.",
							NULL,
							&zklock_connect_timeout,
							5000, 100, 600000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.node_name",
							   "Name of this instance in lock node data.",
							   "Empty means the host name and port.",
							   &zklock_node_name,
							   "",
							   PGC_POSTMASTER,
							   0,
							   check_node_name, NULL, NULL);

	DefineCustomStringVariable("zklock.auth_file",
							   "File holding the ZooKeeper credentials, as digest:user:password.",
							   "Read by the worker when it starts; readable only by the server's OS user (or root-owned with mode 0640). When set, lock nodes are created readable and writable by these credentials only.",
							   &zklock_auth_file,
							   "",
							   PGC_POSTMASTER,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.auth",
							   "Deprecated: ZooKeeper credentials, as digest:user:password; use zklock.auth_file.",
							   "Never shown; checked by the worker, which refuses to start a session with a malformed value.",
							   &zklock_auth,
							   "",
							   PGC_POSTMASTER,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   NULL, NULL, show_auth);

	DefineCustomBoolVariable("zklock.ssl",
							 "Connect to ZooKeeper over TLS (zklock.hosts then names the servers' secureClientPort).",
							 "Needs zklock built with make ZK_CLIENT=... (scripts/build-zkclient.sh); a change at reload starts a new session.",
							 &zklock_ssl,
							 false,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.ssl_ca_file",
							   "PEM file of the certificate authorities that sign the ZooKeeper servers' certificates.",
							   "Relative paths are from the data directory.",
							   &zklock_ssl_ca_file,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   check_ssl_file, NULL, NULL);

	DefineCustomStringVariable("zklock.ssl_cert_file",
							   "PEM file of zklock's client certificate (and its chain) for ZooKeeper.",
							   "Relative paths are from the data directory.",
							   &zklock_ssl_cert_file,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   check_ssl_file, NULL, NULL);

	DefineCustomStringVariable("zklock.ssl_key_file",
							   "PEM file of the private key of zklock.ssl_cert_file (not encrypted).",
							   "Owned by the server's OS user with mode 0600 or less, or by root with 0640 or less, as ssl_key_file.",
							   &zklock_ssl_key_file,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   check_ssl_file, NULL, NULL);

	DefineCustomBoolVariable("zklock.ssl_verify_host",
							 "Check that a ZooKeeper server's certificate names it as zklock.hosts does (a name, or an address).",
							 "On by default, as ZooKeeper's Java client; off accepts any certificate of zklock.ssl_ca_file from any server. A change at reload starts a new session.",
							 &zklock_ssl_verify_host,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	/*
	 * No check hooks: a value refused at startup would fall back to the
	 * default, i.e. to no authentication; the worker checks them instead,
	 * and does not connect with a value it cannot use (secure.c).
	 */
	DefineCustomStringVariable("zklock.sasl_mechanism",
							   "SASL mechanism to authenticate to ZooKeeper with: empty (none), DIGEST-MD5 or GSSAPI (Kerberos).",
							   "Needs zklock built with make ZK_CLIENT=... (scripts/build-zkclient.sh).",
							   &zklock_sasl_mechanism,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.sasl_user",
							   "SASL user name zklock authenticates as (DIGEST-MD5).",
							   NULL,
							   &zklock_sasl_user,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.sasl_password_file",
							   "File whose first line is the SASL password (DIGEST-MD5).",
							   "Owned by the server's OS user with mode 0600 or less, or by root with 0640 or less, as ssl_key_file.",
							   &zklock_sasl_password_file,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.sasl_keytab",
							   "Kerberos keytab of zklock's principal (GSSAPI).",
							   "Owned by the server's OS user with mode 0600 or less, or by root with 0640 or less, as ssl_key_file.",
							   &zklock_sasl_keytab,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.sasl_principal",
							   "Kerberos principal zklock authenticates as (GSSAPI), from zklock.sasl_keytab.",
							   "Empty: the keytab's first principal.",
							   &zklock_sasl_principal,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.sasl_service",
							   "SASL service name of the ZooKeeper servers.",
							   NULL,
							   &zklock_sasl_service,
							   "zookeeper",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.sasl_host",
							   "Server name in the SASL exchange.",
							   "Empty: zk-sasl-md5 for DIGEST-MD5, ZooKeeper's own convention.",
							   &zklock_sasl_host,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.node_naming",
							   "How zklock names its lock nodes under given resource subtrees.",
							   "A comma-separated list of resource=style (hive, curator, curator-mutex, kazoo, recipe); Hive's naming elsewhere.",
							   &zklock_node_naming,
							   "",
							   PGC_SIGHUP,
							   0,
							   check_node_naming, NULL, NULL);

	DefineCustomIntVariable("zklock.max_locks_per_backend",
							"Lock nodes one backend may hold or wait for at once.",
							"Entries still being released after the backend ended count too.  Unless zklock.max_locks is set, the shared table has this times the number of backends entries.",
							&zklock_max_locks_per_backend,
							32, 1, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.max_locks",
							"Lock nodes all backends of this instance may hold or wait for at once.",
							"Sizes the shared table.  0 means zklock.max_locks_per_backend times the number of backends.",
							&zklock_max_locks,
							0, 0, 0xffffff - ZKLOCK_ADMIN_RESERVE,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.allowed_subtrees",
							   "Resource subtrees the current role may lock.",
							   "A comma-separated list of resource names, each allowing itself and everything below it; \"*\" allows any resource.  Set per role with ALTER ROLE ... SET.",
							   &zklock_allowed_subtrees,
							   "*",
							   PGC_SUSET,
							   0,
							   check_allowed_subtrees, NULL, NULL);

	DefineCustomStringVariable("zklock.allowed_queues",
							   "Queues the current role may use.",
							   "A comma-separated list of queue names, each allowing itself and every queue below it; \"*\" allows any queue.  Set per role with ALTER ROLE ... SET.",
							   &zklock_allowed_queues,
							   "*",
							   PGC_SUSET,
							   0,
							   check_allowed_queues, NULL, NULL);

	DefineCustomStringVariable("zklock.advisory_namespace",
							   "Namespace of the keys of zk_advisory_lock and its kin.",
							   "Empty means the current database's name.  Databases with the same namespace, on any instance, share keys.",
							   &zklock_advisory_namespace,
							   "",
							   PGC_SUSET,
							   0,
							   check_advisory_namespace, NULL, NULL);

	DefineCustomIntVariable("zklock.max_explicit_locks_per_role",
							"Explicit locks a role may hold or wait for at once, across all instances.",
							"Counts the explicit lock nodes under zklock.root whose holder is the role (by name), granted or waiting, with a listing at each explicit acquire.  Superusers are not limited.  -1 means no limit.",
							&zklock_max_explicit_locks_per_role,
							100, -1, 1000000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.max_queue_items",
							"Items a queue may have when an item is put into it.",
							"A put (zk_queue_put_now, zk_queue_put) into a queue with this many items, waiting or held, fails.  -1 means no limit.",
							&zklock_max_queue_items,
							-1, -1, INT_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("zklock.guard_by_listing",
							 "Guards a lock granted alone by its listing's child watch.",
							 "Off: every held lock is guarded by a watch on its own node (one request more per cycle), so that a revocation written by zklock 1.4 or earlier, which posts no note to the holder's mailbox, is acted on at once: for a rolling upgrade.",
							 &zklock_guard_by_listing,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.sweep_interval",
							"How often the worker removes expired explicit locks.",
							"One instance sweeps for all: it lists the index of explicit locks under zklock.root.",
							&zklock_sweep_interval,
							60000, 100, 3600000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.deadlock_timeout",
							"How long a zklock lock wait lasts before it looks for a deadlock across instances.",
							"-1 uses deadlock_timeout; 0 turns zklock's deadlock detection off.",
							&zklock_deadlock_timeout,
							-1, -1, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("zklock.elections",
							   "The election groups this instance is a candidate in.",
							   "A comma-separated list of group names; the worker keeps a candidacy in each on the instance's ZooKeeper session (zk_is_leader, zk_elections).",
							   &zklock_elections,
							   "",
							   PGC_SIGHUP,
							   0,
							   check_elections, NULL, NULL);

	DefineCustomIntVariable("zklock.lease_margin",
							"How much of the session lease a commit under a zklock lock must find left.",
							"It must cover half of ZooKeeper's tickTime and the longest pause between the commit fence and the commit record.",
							&zklock_lease_margin,
							2000, 0, 600000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("zklock.track_stats",
							 "Counts the acquisitions, waits and holds of zklock locks per resource and mode.",
							 "zk_lock_stats shows the counts of this instance.",
							 &zklock_track_stats,
							 true,
							 PGC_SUSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.stats_max",
							"Resource and mode pairs zk_lock_stats tracks at most.",
							"Sizes the shared table of statistics; when it is full, the least used pairs give way.",
							&zklock_stats_max,
							1000, 100, 1000000,
							PGC_POSTMASTER,
							0,
							NULL, NULL, NULL);

#ifdef ZKLOCK_FAILPOINTS
	zklock_define_failpoints();
#endif

	MarkGUCPrefixReserved("zklock");
}

static void
zklock_shmem_request_hook(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	zklock_shmem_request();
}

static void
zklock_shmem_startup_hook(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	zklock_shmem_startup();
	zklock_wait_events_init();
}

/*
 * Dropping the extension while it is in use.  Two things would be lost
 * for good:
 *
 *	- the locks that backends of this instance hold or wait for in this
 *	  database: with the functions gone, a session lock could not be
 *	  released until CREATE EXTENSION (or the end of the session);
 *	- the fencing tokens in zk_lock_fences: after CREATE EXTENSION the
 *	  table would be empty, and a token older than one already written
 *	  with would pass zk_lock_fence again.
 *
 * So the drop is refused (55006) while either is there; deleting the rows
 * of zk_lock_fences is the deliberate way on.  The check runs in the
 * object access hook, where every path that drops the extension passes:
 * DROP EXTENSION (with CASCADE, or in a list), DROP SCHEMA ... CASCADE and
 * DROP OWNED BY.  Dependent objects are dropped before what they depend
 * on, so zk_lock_fences (a member) goes before the extension: its rows are
 * looked at when the table is about to go, the locks at either event.
 * This needs zklock in shared_preload_libraries (as everything else does),
 * else no process has the hook.
 */
static void
check_drop_locks(void)
{
	int			first_pid;
	int			n = zklock_database_locks(MyDatabaseId, &first_pid);
	char	   *dbname;

	if (n == 0)
		return;
	dbname = get_database_name(MyDatabaseId);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("cannot drop extension zklock while zklock locks are held in this database"),
			 errdetail_plural("%d zklock lock is held or waited for by a backend of this instance in database \"%s\" (pid %d).",
							  "%d zklock locks are held or waited for by backends of this instance in database \"%s\" (pid %d among them).",
							  n, n, dbname ? dbname : "", first_pid),
			 errhint("Release them first: zk_lock_release_all() in the sessions that hold session locks, the end of the transactions that hold transaction locks, or pg_terminate_backend(); zk_lock_local shows them.")));
}

static void
check_drop_fences(Oid relid)
{
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	Snapshot	snapshot;
	bool		any;
	char	   *nspname;

	rel = table_open(relid, AccessShareLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snapshot, 0, NULL);
	slot = table_slot_create(rel, NULL);
	any = table_scan_getnextslot(scan, ForwardScanDirection, slot);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	if (!any)
		return;
	nspname = get_namespace_name(get_rel_namespace(relid));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 errmsg("cannot drop extension zklock while zk_lock_fences holds fencing tokens"),
			 errdetail("The table holds the newest token written with, per resource; after CREATE EXTENSION an older token would pass zk_lock_fence again."),
			 errhint("If no writer can still hold a token taken before now, delete them first: DELETE FROM %s.zk_lock_fences;",
					 quote_identifier(nspname ? nspname : "public"))));
}

static void
zklock_object_access(ObjectAccessType access, Oid classId, Oid objectId,
					 int subId, void *arg)
{
	ObjectAccessDrop *drop = (ObjectAccessDrop *) arg;

	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access != OAT_DROP || subId != 0 ||
		(drop != NULL && (drop->dropflags & PERFORM_DELETION_INTERNAL)))
		return;
	if (classId == ExtensionRelationId)
	{
		if (objectId == get_extension_oid("zklock", true))
			check_drop_locks();
	}
	else if (classId == RelationRelationId)
	{
		char	   *relname = get_rel_name(objectId);
		Oid			ext;

		if (relname == NULL || strcmp(relname, "zk_lock_fences") != 0)
			return;
		ext = get_extension_oid("zklock", true);
		if (!OidIsValid(ext) ||
			getExtensionOfObject(RelationRelationId, objectId) != ext)
			return;
		check_drop_locks();
		check_drop_fences(objectId);
	}
}


/*
 * zklock.node_name left unset: its computed default, host name and port
 * (zklock_instance_name), becomes the setting's value as a dynamic default
 * -- as PostgreSQL does for wal_buffers -- so that SHOW and pg_settings
 * show the name the node data carry.  A value from the configuration
 * (even an empty one) stays; so does an empty value when the computed
 * name is longer than the setting allows (63 bytes): the node data then
 * carry the computed name, which zk_locks shows.
 */
static void
node_name_default(void)
{
	const char *name;

	if (zklock_node_name != NULL && zklock_node_name[0] != '\0')
		return;
	name = zklock_instance_name();
	if (strlen(name) > 63)
		return;
	SetConfigOption("zklock.node_name", name, PGC_POSTMASTER,
					PGC_S_DYNAMIC_DEFAULT);
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	zklock_define_settings();
	node_name_default();
#ifndef ZKLOCK_SECURE_CLIENT
	if (zklock_sasl_mechanism[0] != '\0')
		ereport(LOG,
				(errmsg("zklock: zklock.sasl_mechanism is set, but this zklock is built with a ZooKeeper client without SASL; it will not connect"),
				 errhint("Build zklock with make ZK_CLIENT=$(scripts/build-zkclient.sh), or install the package the project builds.")));
	if (zklock_ssl)
		ereport(LOG,
				(errmsg("zklock: zklock.ssl is on, but this zklock is built with a ZooKeeper client without TLS; it will not connect"),
				 errhint("Build zklock with make ZK_CLIENT=$(scripts/build-zkclient.sh), or install the package the project builds.")));
#endif

	prev_object_access_hook = object_access_hook;
	object_access_hook = zklock_object_access;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = zklock_shmem_request_hook;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = zklock_shmem_startup_hook;

	if (!IsBinaryUpgrade)
		zklock_register_worker();
}
