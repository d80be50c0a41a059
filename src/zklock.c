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

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include "zklock.h"
#include "failpoint.h"

PG_MODULE_MAGIC;

char	   *zklock_hosts = NULL;
char	   *zklock_root = NULL;
int			zklock_session_timeout = 10000;
int			zklock_connect_timeout = 5000;
char	   *zklock_node_name = NULL;
char	   *zklock_auth = NULL;
char	   *zklock_node_naming = NULL;
int			zklock_max_locks_per_backend = 32;
int			zklock_max_locks = 0;
char	   *zklock_allowed_subtrees = NULL;
int			zklock_sweep_interval = 60000;
int			zklock_lease_margin = 2000;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

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

static bool
check_auth(char **newval, void **extra, GucSource source)
{
	const char *a = *newval;

	if (a == NULL || a[0] == '\0')
		return true;
	if (strncmp(a, "digest:", 7) != 0)
	{
		if (strncmp(a, "sasl:", 5) == 0 || strncmp(a, "x509:", 5) == 0 ||
			strncmp(a, "tls:", 4) == 0)
			GUC_check_errdetail("ZooKeeper's C client, as Debian builds it, supports neither SASL nor TLS.");
		else
			GUC_check_errdetail("zklock.auth must be \"digest:user:password\", or empty.");
		return false;
	}
	if (strchr(a + 7, ':') == NULL || a[7] == ':')
	{
		GUC_check_errdetail("zklock.auth must be \"digest:user:password\", or empty.");
		return false;
	}
	return true;
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
	if (!zklock_check_node_naming(*newval))
	{
		GUC_check_errdetail("zklock.node_naming is a comma-separated list of resource=style, where style is hive, curator, curator-mutex, kazoo or recipe.");
		return false;
	}
	return true;
}

static bool
check_allowed_subtrees(char **newval, void **extra, GucSource source)
{
	const char *why = NULL;

	if (!zklock_check_allowed_subtrees(*newval, &why))
	{
		GUC_check_errdetail("zklock.allowed_subtrees is \"*\" or a comma-separated list of resource names (%s).",
							why);
		return false;
	}
	return true;
}

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

	DefineCustomStringVariable("zklock.auth",
							   "ZooKeeper credentials, as digest:user:password.",
							   "When set, lock nodes are created readable and writable by these credentials only.",
							   &zklock_auth,
							   "",
							   PGC_POSTMASTER,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL,
							   check_auth, NULL, NULL);

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

	DefineCustomIntVariable("zklock.sweep_interval",
							"How often the worker removes expired explicit locks.",
							"Each sweep lists every resource node under zklock.root.",
							&zklock_sweep_interval,
							60000, 100, 3600000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("zklock.lease_margin",
							"How much of the session lease a commit under a zklock lock must find left.",
							"It must cover half of ZooKeeper's tickTime and the longest pause between the commit fence and the commit record.",
							&zklock_lease_margin,
							2000, 0, 600000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
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
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	zklock_define_settings();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = zklock_shmem_request_hook;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = zklock_shmem_startup_hook;

	if (!IsBinaryUpgrade)
		zklock_register_worker();
}
