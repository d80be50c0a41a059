/*-------------------------------------------------------------------------
 *
 * zk_secure.c
 *		The transport of the worker's ZooKeeper session: whether this
 *		build's client speaks TLS and SASL, the refusals and the Cyrus SASL
 *		set-up before a handle is asked for, and the handle itself, made by
 *		zookeeper_init_ssl (TLS), zookeeper_init_sasl (SASL) or
 *		zookeeper_init2 (plain TCP); and what a client certificate says
 *		of the identity ZooKeeper gives it (zkc_cert_identity).
 *
 * Moved out of zk_client.c (issue 29's limit), whose zkc_connect and
 * zkc_close call it; it calls nothing of zk_client.c (the session watcher
 * comes as an argument).  Runs on the worker's main thread only.  Its one
 * state, the handle's SASL callbacks (sasl_callbacks), is this process's:
 * made before the handle, freed after it is closed; no lock.  The files
 * the settings name (zklock.ssl_*_file, zklock.sasl_password_file,
 * zklock.sasl_keytab) are checked before by the worker (worker/secure.c)
 * and read by the client library itself.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>
#include <stdlib.h>

#include "zk_client.h"
#include "zk_client_int.h"
#include "zk_events.h"

/* the Makefile defines both, or neither (make ZK_CLIENT=...) */
#if defined(ZKLOCK_SECURE_CLIENT) != defined(HAVE_OPENSSL_H)
#error "ZKLOCK_SECURE_CLIENT and HAVE_OPENSSL_H: both or neither"
#endif

#ifdef HAVE_OPENSSL_H
#include <openssl/pem.h>
#include <openssl/x509.h>
#endif

#ifdef HAVE_CYRUS_SASL_H
static sasl_callback_t *sasl_callbacks = NULL;	/* the handle's: freed after it */
#endif

/* Whether this build's client speaks TLS (make ZK_CLIENT=...) */
bool
zkc_has_tls(void)
{
#ifdef HAVE_OPENSSL_H
	return true;
#else
	return false;
#endif
}

/* Whether this build's client authenticates with SASL (make ZK_CLIENT=...) */
bool
zkc_has_sasl(void)
{
#ifdef HAVE_CYRUS_SASL_H
	return true;
#else
	return false;
#endif
}

/*
 * Before a handle is asked for (zkc_connect): refuse what this build's
 * client cannot do, and make the SASL callbacks; false, with errbuf set,
 * when it cannot connect so.
 */
bool
zklock_zkc_secure_prepare(const ZkcTls *tls, const ZkcSasl *sasl,
						  char *errbuf, int errlen)
{
#ifndef HAVE_OPENSSL_H
	if (tls)
	{
		strlcpy(errbuf, "zklock.ssl is on, but this zklock is built with a ZooKeeper client without TLS (Debian's libzookeeper-mt); build it with make ZK_CLIENT=$(scripts/build-zkclient.sh)",
				errlen);
		return false;
	}
#endif
#ifndef HAVE_CYRUS_SASL_H
	if (sasl)
	{
		strlcpy(errbuf, "zklock.sasl_mechanism is set, but this zklock is built with a ZooKeeper client without SASL (Debian's libzookeeper-mt); build it with make ZK_CLIENT=$(scripts/build-zkclient.sh)",
				errlen);
		return false;
	}
#else
	if (sasl)
	{
		static bool sasl_ready = false;
		int			r;

		/* ZooKeeper's C client 3.8 has no call that takes both */
		if (tls)
		{
			strlcpy(errbuf, "zklock.ssl and zklock.sasl_mechanism together: ZooKeeper's C client cannot do SASL over TLS",
					errlen);
			return false;
		}
		if (!sasl_ready)
		{
			r = sasl_client_init(NULL);
			if (r != SASL_OK)
			{
				snprintf(errbuf, errlen, "could not initialize Cyrus SASL: %s",
						 sasl_errstring(r, NULL, NULL));
				return false;
			}
			sasl_ready = true;
		}
		Assert(sasl_callbacks == NULL);
		/*
		 * Kerberos: MIT's GSSAPI takes the client's credentials from the
		 * client keytab, for the principal of a credential cache of this
		 * process alone (zk_krb5.c)
		 */
		if (sasl->keytab &&
			!zklock_zkc_krb5_prepare(sasl->keytab, sasl->principal,
									 errbuf, errlen))
			return false;
		sasl_callbacks = zoo_sasl_make_basic_callbacks(sasl->user, NULL,
													   sasl->password_file);
		if (sasl_callbacks == NULL)
		{
			strlcpy(errbuf, "out of memory", errlen);
			return false;
		}
	}
#endif
	return true;
}

/*
 * The handle (zkc_connect, signals blocked): over TLS when tls is given,
 * with SASL when sasl is, else plain; NULL (errno set) when the client
 * library could not make one.
 */
zhandle_t *
zklock_zkc_init(const char *hosts, watcher_fn watcher, int session_timeout_ms,
				const clientid_t *cid, const ZkcTls *tls, const ZkcSasl *sasl)
{
	zhandle_t  *zh;

#ifdef HAVE_OPENSSL_H
	if (tls)
	{
		/*
		 * "ca,cert,key": the client splits it at the commas (zklock.c
		 * refuses paths with one).  zookeeper_init_ssl takes no log
		 * callback: set just after, so a line logged in between goes to
		 * stderr (the server's log) instead of last_error.  The host check
		 * (scripts/zkclient/04-tls-host-check.patch) is the client's
		 * process-wide flag, read at each handshake: set before the handle
		 * exists, and this process has one handle at a time.
		 */
		char		certs[3 * MAXPGPATH + 3];

		snprintf(certs, sizeof(certs), "%s,%s,%s", tls->ca_file,
				 tls->cert_file, tls->key_file);
		zoo_ssl_verify_host(tls->verify_host ? 1 : 0);
		zh = zookeeper_init_ssl(hosts, certs, watcher, session_timeout_ms,
								cid, NULL, 0);
		if (zh)
			zoo_set_log_callback(zh, zkc_log_callback);
	}
	else
#endif
#ifdef HAVE_CYRUS_SASL_H
	if (sasl)
	{
		zoo_sasl_params_t params;

		params.service = sasl->service;
		params.host = sasl->host;
		params.mechlist = sasl->mechanism;
		params.callbacks = sasl_callbacks;
		zh = zookeeper_init_sasl(hosts, watcher, session_timeout_ms, cid,
								 NULL, 0, zkc_log_callback, &params);
	}
	else
#endif
		zh = zookeeper_init2(hosts, watcher, session_timeout_ms, cid, NULL, 0,
							 zkc_log_callback);
	return zh;
}

/* The SASL callbacks, once no handle uses them (none made: nothing) */
void
zklock_zkc_secure_release(void)
{
#ifdef HAVE_CYRUS_SASL_H
	free(sasl_callbacks);
	sasl_callbacks = NULL;
#endif
}

/*
 * The subject of the first certificate of a PEM file as ZooKeeper's
 * X509AuthenticationProvider names the client (its x509 id: Java's
 * X500Principal.getName(), the RFC 2253 form, most specific part first,
 * UTF-8 unescaped), into subject; and its notAfter (Unix seconds) into
 * *not_after.  False when the file cannot be read or this build has no
 * OpenSSL.  Attribute types Java knows by a keyword (CN, C, L, ST, O, OU,
 * STREET, DC, UID) come out the same; others (emailAddress) Java writes
 * as an OID: OpenSSL's short name differs from what ZooKeeper records.
 */
bool
zkc_cert_identity(const char *path, char *subject, int len, int64 *not_after)
{
#ifdef HAVE_OPENSSL_H
	FILE	   *f;
	X509	   *cert;
	BIO		   *bio;
	struct tm	tm;
	int			n;
	bool		ok = false;

	if ((f = fopen(path, "r")) == NULL)
		return false;
	cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	if (cert == NULL)
		return false;
	bio = BIO_new(BIO_s_mem());
	if (bio != NULL &&
		X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0,
						   XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) >= 0 &&
		ASN1_TIME_to_tm(X509_get0_notAfter(cert), &tm) == 1)
	{
		n = BIO_read(bio, subject, len - 1);
		subject[n > 0 ? n : 0] = '\0';
		*not_after = (int64) timegm(&tm);
		ok = true;
	}
	BIO_free(bio);
	X509_free(cert);
	return ok;
#else
	return false;
#endif
}
