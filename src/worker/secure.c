/*-------------------------------------------------------------------------
 *
 * secure.c
 *		The worker's TLS settings (zklock.ssl, zklock.ssl_*_file), checked
 *		before each session is asked for, so that a file the client library
 *		could not use is said in words in last_error and the log, and a key
 *		file others may read is refused as PostgreSQL refuses its own.
 *
 * The worker calls this on its main thread; the files themselves are read
 * by the client library at each connection (client/zk_secure.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "lib/stringinfo.h"

#include "settings.h"
#include "secure.h"
#include "credentials.h"

/* Whether the file that setting names can be used; if not, err says why */
static bool
file_usable(const char *setting, const char *path, bool secret,
			const char *asker, char *err, int errlen)
{
	struct stat st;
	const char *why;
	const char *detail;

	if (path == NULL || path[0] == '\0')
	{
		snprintf(err, errlen, "%s, but %s is empty", asker, setting);
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
	if (!file_usable("zklock.ssl_ca_file", zklock_ssl_ca_file, false,
					 "zklock.ssl is on", err, errlen) ||
		!file_usable("zklock.ssl_cert_file", zklock_ssl_cert_file, false,
					 "zklock.ssl is on", err, errlen) ||
		!file_usable("zklock.ssl_key_file", zklock_ssl_key_file, true,
					 "zklock.ssl is on", err, errlen))
		return NULL;
	tls->ca_file = zklock_ssl_ca_file;
	tls->cert_file = zklock_ssl_cert_file;
	tls->key_file = zklock_ssl_key_file;
	tls->verify_host = zklock_ssl_verify_host;
	*failed = false;
	return tls;
}

/*
 * The SASL of the next session, as zklock_tls_config: NULL with *failed
 * false when zklock.sasl_mechanism is empty; sasl (filled in) when it can
 * be used; NULL with *failed and err when not (never unauthenticated when
 * authentication was asked for).
 */
const ZkcSasl *
zklock_sasl_config(ZkcSasl *sasl, char *err, int errlen, bool *failed)
{
	const char *mech = zklock_sasl_mechanism;

	*failed = false;
	if (mech == NULL || mech[0] == '\0')
		return NULL;
	*failed = true;
	if (pg_strcasecmp(mech, "GSSAPI") != 0 && pg_strcasecmp(mech, "DIGEST-MD5") != 0)
	{
		snprintf(err, errlen, "zklock.sasl_mechanism is '%s': it must be empty, DIGEST-MD5 or GSSAPI", mech);
		return NULL;
	}
	if (!zkc_has_sasl())
	{
		snprintf(err, errlen, "zklock.sasl_mechanism is set, but this zklock is built with a ZooKeeper client without SASL (Debian's libzookeeper-mt); build it with make ZK_CLIENT=$(scripts/build-zkclient.sh)");
		return NULL;
	}
	if (pg_strcasecmp(mech, "GSSAPI") == 0)
	{
		if (!file_usable("zklock.sasl_keytab", zklock_sasl_keytab, true,
						 "zklock.sasl_mechanism is GSSAPI", err, errlen))
			return NULL;
		if (zklock_sasl_host[0] == '\0')
		{
			snprintf(err, errlen, "zklock.sasl_mechanism is GSSAPI, but zklock.sasl_host (the host name in the servers' principal) is empty");
			return NULL;
		}
		sasl->mechanism = "GSSAPI";
		sasl->service = zklock_sasl_service[0] ? zklock_sasl_service : "zookeeper";
		sasl->host = zklock_sasl_host;
		sasl->user = NULL;
		sasl->password_file = NULL;
		sasl->keytab = zklock_sasl_keytab;
		*failed = false;
		return sasl;
	}
	if (zklock_sasl_user == NULL || zklock_sasl_user[0] == '\0')
	{
		snprintf(err, errlen, "zklock.sasl_mechanism is DIGEST-MD5, but zklock.sasl_user is empty");
		return NULL;
	}
	if (!file_usable("zklock.sasl_password_file", zklock_sasl_password_file,
					 true, "zklock.sasl_mechanism is DIGEST-MD5", err, errlen))
		return NULL;
	sasl->mechanism = "DIGEST-MD5";
	sasl->service = zklock_sasl_service[0] ? zklock_sasl_service : "zookeeper";
	sasl->host = zklock_sasl_host[0] ? zklock_sasl_host : "zk-sasl-md5";
	sasl->user = zklock_sasl_user;
	sasl->password_file = zklock_sasl_password_file;
	sasl->keytab = NULL;
	*failed = false;
	return sasl;
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
		appendStringInfo(&s, "ssl ca=%s cert=%s key=%s host=%d", zklock_ssl_ca_file,
						 zklock_ssl_cert_file, zklock_ssl_key_file,
						 (int) zklock_ssl_verify_host);
	if (zklock_sasl_mechanism[0])
		appendStringInfo(&s, " sasl=%s service=%s host=%s user=%s file=%s keytab=%s",
						 zklock_sasl_mechanism, zklock_sasl_service,
						 zklock_sasl_host, zklock_sasl_user,
						 zklock_sasl_password_file, zklock_sasl_keytab);
	return s.data;
}
