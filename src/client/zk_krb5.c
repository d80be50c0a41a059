/*-------------------------------------------------------------------------
 *
 * zk_krb5.c
 *		The worker's Kerberos credential cache (GSSAPI): which principal of
 *		zklock.sasl_keytab zklock authenticates as (zklock.sasl_principal),
 *		and a fresh cache whenever the keytab, its file or the principal
 *		changed, so that the next session uses them.
 *
 * How the principal is chosen.  Cyrus SASL's GSSAPI plugin asks MIT's
 * GSSAPI for the default credentials (GSS_C_NO_CREDENTIAL): those of the
 * default credential cache (KRB5CCNAME), which MIT fills, and renews, from
 * the client keytab (KRB5_CLIENT_KTNAME) for the cache's principal, or for
 * the keytab's first when the cache has none.  So this file initializes a
 * MEMORY cache with the principal (krb5_cc_initialize: a principal, no
 * tickets) and names it in KRB5CCNAME: the tickets are still fetched from
 * the KDC by the client library's thread, during the SASL exchange, never
 * here on the worker's main thread.  Before that, the keytab is read here
 * for the principal, so that one it does not hold is said at once, in
 * words (MIT would say only "No Kerberos credentials available").
 *
 * A change of zklock.sasl_keytab, zklock.sasl_principal or of the keytab
 * file (its inode, size, mtime or bytes) makes a cache of a new name
 * (MEMORY:zklock-<pid>-<n>) and destroys the old one: the tickets of the
 * previous principal or key are not used again.
 *
 * Runs on the worker's main thread only (zk_secure.c's prepare, before a
 * handle is made: no client thread reads the environment meanwhile).  Its
 * state (the cache's name and what it was made from) is this process's
 * statics; no lock.  Only with the client of scripts/build-zkclient.sh
 * (HAVE_CYRUS_SASL_H): the plain build has no SASL.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef HAVE_CYRUS_SASL_H

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <krb5.h>

#include "zk_client.h"
#include "zk_client_int.h"

static char krb5_cache[64];		/* "MEMORY:zklock-<pid>-<n>", or "" */
static char krb5_made_from[2 * MAXPGPATH + 128];	/* keytab, file, principal */
static int	krb5_generation = 0;

/* Say a krb5 failure in err: what, and the library's words */
static void
krb5_say(krb5_context ctx, krb5_error_code code, const char *what,
		 char *err, int errlen)
{
	const char *msg = krb5_get_error_message(ctx, code);

	snprintf(err, errlen, "%s: %s", what, msg);
	krb5_free_error_message(ctx, msg);
}

/*
 * The principal of the keytab zklock authenticates as: principal parsed
 * and looked up in it, or the keytab's first when principal is empty.
 * false, with err, when the keytab does not hold it.
 */
static bool
krb5_keytab_principal(krb5_context ctx, const char *keytab,
					  const char *principal, krb5_principal *out,
					  char *err, int errlen)
{
	krb5_keytab kt;
	krb5_keytab_entry entry;
	krb5_kt_cursor cursor;
	krb5_error_code code;

	code = krb5_kt_resolve(ctx, keytab, &kt);
	if (code)
	{
		krb5_say(ctx, code, "could not open zklock.sasl_keytab", err, errlen);
		return false;
	}
	if (principal[0] != '\0')
	{
		code = krb5_parse_name(ctx, principal, out);
		if (code)
			krb5_say(ctx, code, "zklock.sasl_principal is no principal name",
					 err, errlen);
		else if ((code = krb5_kt_get_entry(ctx, kt, *out, 0, 0, &entry)) != 0)
		{
			if (code == KRB5_KT_NOTFOUND)
				snprintf(err, errlen, "zklock.sasl_principal \"%s\" is not in zklock.sasl_keytab \"%s\": add its key to that keytab (kadmin: ktadd -k), or name a principal the keytab holds (klist -k)",
					 principal, keytab);
			else
			{
				/* no keytab (garbage, a bad version): not "not in it" */
				char		what[MAXPGPATH + 64];

				snprintf(what, sizeof(what),
						 "could not read zklock.sasl_keytab \"%s\"", keytab);
				krb5_say(ctx, code, what, err, errlen);
			}
			krb5_free_principal(ctx, *out);
			*out = NULL;
		}
		else
			krb5_free_keytab_entry_contents(ctx, &entry);
	}
	else if ((code = krb5_kt_start_seq_get(ctx, kt, &cursor)) != 0)
		krb5_say(ctx, code, "could not read zklock.sasl_keytab", err, errlen);
	else
	{
		code = krb5_kt_next_entry(ctx, kt, &entry, &cursor);
		if (code)
			snprintf(err, errlen, "zklock.sasl_keytab \"%s\" holds no key",
					 keytab);
		else
		{
			code = krb5_copy_principal(ctx, entry.principal, out);
			krb5_free_keytab_entry_contents(ctx, &entry);
			if (code)
				krb5_say(ctx, code, "out of memory", err, errlen);
		}
		krb5_kt_end_seq_get(ctx, kt, &cursor);
	}
	krb5_kt_close(ctx, kt);
	return code == 0;
}

/* A new MEMORY cache holding principal (no tickets); the old one destroyed */
static bool
krb5_new_cache(krb5_context ctx, krb5_principal principal,
			   char *err, int errlen)
{
	char		name[sizeof(krb5_cache)];
	krb5_ccache cc;
	krb5_error_code code;

	snprintf(name, sizeof(name), "MEMORY:zklock-%d-%d", (int) getpid(),
			 ++krb5_generation);
	code = krb5_cc_resolve(ctx, name, &cc);
	if (code == 0)
	{
		code = krb5_cc_initialize(ctx, cc, principal);
		krb5_cc_close(ctx, cc);
	}
	if (code)
	{
		krb5_say(ctx, code, "could not make the Kerberos credential cache",
				 err, errlen);
		return false;
	}
	if (krb5_cache[0] != '\0' && krb5_cc_resolve(ctx, krb5_cache, &cc) == 0)
		(void) krb5_cc_destroy(ctx, cc);
	strlcpy(krb5_cache, name, sizeof(krb5_cache));
	return true;
}

/*
 * A digest of the keytab's bytes (FNV-1a, 64 bits): a file rewritten in
 * place with the same inode, size and mtime (cp -p, a restore, a file
 * system of coarse mtimes) is still a change.  false when it cannot be read.
 */
static bool
krb5_keytab_digest(const char *keytab, uint64 *digest)
{
	unsigned char buf[8192];
	uint64		h = UINT64CONST(14695981039346656037);
	ssize_t		n;
	int			save_errno;
	int			fd = open(keytab, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	while ((n = read(fd, buf, sizeof(buf))) != 0)
	{
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			save_errno = errno;
			close(fd);
			explicit_bzero(buf, sizeof(buf));
			errno = save_errno;
			return false;
		}
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * UINT64CONST(1099511628211);
	}
	close(fd);
	explicit_bzero(buf, sizeof(buf));	/* keys */
	*digest = h;
	return true;
}

/*
 * Before a GSSAPI session's handle is made: the client keytab, and a
 * credential cache of zklock's principal, fresh when the keytab, its file
 * or the principal changed since the last.  false, with err, when the
 * keytab does not hold the principal (or cannot be read).
 */
bool
zklock_zkc_krb5_prepare(const char *keytab, const char *principal,
						char *err, int errlen)
{
	char		made_from[sizeof(krb5_made_from)];
	struct stat st;
	uint64		digest;
	int			len;
	krb5_context ctx;
	krb5_principal p = NULL;
	krb5_error_code code;
	bool		ok;

	if (principal == NULL)
		principal = "";
	if (stat(keytab, &st) != 0)
	{
		snprintf(err, errlen, "could not stat zklock.sasl_keytab \"%s\": %m",
				 keytab);
		return false;
	}
	if (!krb5_keytab_digest(keytab, &digest))
	{
		snprintf(err, errlen, "could not read zklock.sasl_keytab \"%s\": %m",
				 keytab);
		return false;
	}
	len = snprintf(made_from, sizeof(made_from), "%s|%lu|%lld|%lld.%09ld|%016llx|%s",
			 keytab, (unsigned long) st.st_ino, (long long) st.st_size,
			 (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
			 (unsigned long long) digest, principal);
	setenv("KRB5_CLIENT_KTNAME", keytab, 1);
	/* cut (a principal longer than the room): never taken as the same */
	if (krb5_cache[0] != '\0' && len < (int) sizeof(made_from) &&
		strcmp(made_from, krb5_made_from) == 0)
		return true;			/* the same: its tickets serve on */

	code = krb5_init_context(&ctx);
	if (code)
	{
		snprintf(err, errlen, "could not initialize Kerberos: error %d", (int) code);
		return false;
	}
	ok = krb5_keytab_principal(ctx, keytab, principal, &p, err, errlen) &&
		krb5_new_cache(ctx, p, err, errlen);
	if (p)
		krb5_free_principal(ctx, p);
	krb5_free_context(ctx);
	if (!ok)
		return false;
	setenv("KRB5CCNAME", krb5_cache, 1);
	strlcpy(krb5_made_from, made_from, sizeof(krb5_made_from));
	return true;
}

#endif							/* HAVE_CYRUS_SASL_H */
