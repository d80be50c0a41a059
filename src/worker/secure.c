/*-------------------------------------------------------------------------
 *
 * secure.c
 *		The worker's TLS settings (zklock.ssl, zklock.ssl_*_file), checked
 *		before each session is asked for, so that a file the client library
 *		could not use is said in words in last_error and the log, and a key
 *		file others may read is refused as PostgreSQL refuses its own.
 *
 * The worker calls this on its main thread; the files themselves are read
 * by the client library at each connection (client/zk_client.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "lib/stringinfo.h"

#include "settings.h"
#include "secure.h"

/* Whether the file that setting names can be used; if not, err says why */
static bool
file_usable(const char *setting, const char *path, bool secret,
			char *err, int errlen)
{
	struct stat st;
	const char *why;
	const char *detail;

	if (path == NULL || path[0] == '\0')
	{
		snprintf(err, errlen, "zklock.ssl is on, but %s is empty", setting);
		return false;
	}
	if (stat(path, &st) != 0)
	{
		snprintf(err, errlen, "could not stat %s \"%s\": %m", setting, path);
		return false;
	}
	if (!S_ISREG(st.st_mode))
	{
		snprintf(err, errlen, "%s \"%s\" is not a regular file", setting, path);
		return false;
	}
	if (secret && (why = zklock_secret_file_problem(&st, &detail)) != NULL)
	{
		snprintf(err, errlen, "%s \"%s\" %s%s%s", setting, path, why,
				 detail ? ": " : "", detail ? detail : "");
		return false;
	}
	if (access(path, R_OK) != 0)
	{
		snprintf(err, errlen, "could not read %s \"%s\": %m", setting, path);
		return false;
	}
	return true;
}

/*
 * The TLS of the next session: NULL with *failed false when zklock.ssl is
 * off; tls (filled in) when on and its files can be used; NULL with
 * *failed and err when not (the session is not asked for: never in the
 * clear when TLS was asked for).
 */
const ZkcTls *
zklock_tls_config(ZkcTls *tls, char *err, int errlen, bool *failed)
{
	*failed = false;
	if (!zklock_ssl)
		return NULL;
	*failed = true;
	if (!zkc_has_tls())
	{
		snprintf(err, errlen, "zklock.ssl is on, but this zklock is built with a ZooKeeper client without TLS (Debian's libzookeeper-mt); build it with make ZK_CLIENT=$(scripts/build-zkclient.sh)");
		return NULL;
	}
	if (!file_usable("zklock.ssl_ca_file", zklock_ssl_ca_file, false, err, errlen) ||
		!file_usable("zklock.ssl_cert_file", zklock_ssl_cert_file, false, err, errlen) ||
		!file_usable("zklock.ssl_key_file", zklock_ssl_key_file, true, err, errlen))
		return NULL;
	tls->ca_file = zklock_ssl_ca_file;
	tls->cert_file = zklock_ssl_cert_file;
	tls->key_file = zklock_ssl_key_file;
	*failed = false;
	return tls;
}

/*
 * What, besides zklock.hosts, a session's connection depends on: a change
 * at reload starts a new session (palloc'd).
 */
char *
zklock_transport_signature(void)
{
	StringInfoData s;

	initStringInfo(&s);
	if (zklock_ssl)
		appendStringInfo(&s, "ssl ca=%s cert=%s key=%s", zklock_ssl_ca_file,
						 zklock_ssl_cert_file, zklock_ssl_key_file);
	return s.data;
}
