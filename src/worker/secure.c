/*-------------------------------------------------------------------------
 *
 * secure.c
 *		The worker's TLS settings (zklock.ssl, zklock.ssl_*_file), checked
 *		before each session is asked for, so that a file the client library
 *		could not use is said in words in last_error and the log, and a key
 *		file others may read is refused as PostgreSQL refuses its own.
 *
 * And what zk_lock_status says of the session (zklock_identity_publish):
 * its transport and the identity ZooKeeper gives it, written under the
 * shared lock by the worker, their only writer, each time it asks for a
 * session.
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
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "settings.h"
#include "secure.h"
#include "credentials.h"
#include "zklock.h"
#include "shmem.h"

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
		sasl->principal = zklock_sasl_principal;
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
	sasl->principal = NULL;
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
		appendStringInfo(&s, " sasl=%s service=%s host=%s user=%s file=%s keytab=%s principal=%s",
						 zklock_sasl_mechanism, zklock_sasl_service,
						 zklock_sasl_host, zklock_sasl_user,
						 zklock_sasl_password_file, zklock_sasl_keytab,
						 zklock_sasl_principal);
	return s.data;
}

/* A big-endian integer of n bytes from f; false at the end of the file */
static bool
keytab_int(FILE *f, int n, uint32 *v)
{
	int			c;

	*v = 0;
	while (n-- > 0)
	{
		if ((c = getc(f)) == EOF)
			return false;
		*v = (*v << 8) | (uint32) c;
	}
	return true;
}

/*
 * The first principal of an MIT keytab (format 0x0502), "a/b@REALM" -- the
 * one MIT's GSSAPI takes the client's credentials for -- into buf; false
 * when the file is not such a keytab.
 */
static bool
keytab_principal(const char *path, char *buf, int len)
{
	FILE	   *f = fopen(path, "rb");
	uint32		v,
				ncomp,
				size;
	char		realm[256];
	bool		ok = false;

	buf[0] = '\0';
	if (f == NULL)
		return false;
	if (keytab_int(f, 2, &v) && v == 0x0502 && keytab_int(f, 4, &size) &&
		keytab_int(f, 2, &ncomp) && keytab_int(f, 2, &size) &&
		size < sizeof(realm) && fread(realm, 1, size, f) == size)
	{
		realm[size] = '\0';
		ok = true;
		for (uint32 i = 0; ok && i < ncomp; i++)
		{
			char		comp[256];

			ok = keytab_int(f, 2, &size) && size < sizeof(comp) &&
				fread(comp, 1, size, f) == size;
			if (ok)
			{
				comp[size] = '\0';
				snprintf(buf + strlen(buf), len - strlen(buf), "%s%s",
						 i > 0 ? "/" : "", comp);
			}
		}
		if (ok)
			snprintf(buf + strlen(buf), len - strlen(buf), "@%s", realm);
	}
	fclose(f);
	return ok;
}

/*
 * What ZooKeeper authenticates the next session as, by the settings: its
 * digest user, its SASL user or principal, else the x509 subject of its
 * client certificate; "" for none.  With several (TLS and digest), the
 * one named is the first of these: ZooKeeper records them all.
 */
static void
session_identity(const ZkcTls *tls, const ZkcSasl *sasl, const char *digest,
				 char *buf, int len, int64 *expires)
{
	char		subject[ZKLOCK_MAX_IDENTITY_LEN + 1];
	char		principal[ZKLOCK_MAX_IDENTITY_LEN + 1];

	buf[0] = '\0';
	*expires = 0;
	if (tls && zkc_cert_identity(tls->cert_file, subject, sizeof(subject),
								 expires))
		snprintf(buf, len, "x509:%s", subject);
	if (sasl && sasl->user)
		snprintf(buf, len, "sasl:%s", sasl->user);
	else if (sasl && sasl->keytab &&
			 keytab_principal(sasl->keytab, principal, sizeof(principal)))
		snprintf(buf, len, "sasl:%s", principal);
	if (digest && strchr(digest, ':'))
		snprintf(buf, len, "digest:%.*s", (int) (strchr(digest, ':') - digest),
				 digest);
}

/*
 * zk_lock_status.transport, identity and tls_expires: those of the
 * session the worker has just asked for (worker.c, open_session).
 */
void
zklock_identity_publish(const ZkcTls *tls, const ZkcSasl *sasl,
						const char *digest)
{
	char		identity[ZKLOCK_MAX_IDENTITY_LEN + 1];
	int64		expires;

	session_identity(tls, sasl, digest, identity, sizeof(identity), &expires);
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	strlcpy(zklock_shared->transport, tls ? "tls" : "tcp",
			sizeof(zklock_shared->transport));
	strlcpy(zklock_shared->identity, identity,
			sizeof(zklock_shared->identity));
	zklock_shared->tls_expires =
		expires ? time_t_to_timestamptz((pg_time_t) expires) : 0;
	LWLockRelease(zklock_shared->lock);
}
