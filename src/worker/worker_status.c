/*-------------------------------------------------------------------------
 *
 * worker_status.c
 *		What the worker shows of its session: zk_lock_status's session
 *		fields and last_error, and the outage's lines in the log.
 *
 * The worker (worker.c) decides; this file publishes.  zklock_status_set
 * is the one writer of the session's fields in zklock_shared (under its
 * lock, exclusive): session_state, state_since, session_id,
 * negotiated_timeout, disconnected_since, n_connected (last_error has
 * other writers: root.c, the outage report below).  The outage's own
 * bookkeeping (when it began, how many log lines it had, what the client
 * last said) and the last handle error are this file's, static, in the
 * worker's memory.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/timestamp.h"

#include "worker_status.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "zk_client.h"
#include "lease.h"

/*
 * The outage: when it began, on CLOCK_BOOTTIME (durations; the shared
 * disconnected_since is the same moment by the wall clock, for display),
 * how many lines it has had in the log, and the client's last complaint.
 */
static int64 outage_since_us;
static int	outage_logs;
static char outage_why[256];

static char handle_error[512];	/* the last handle we could not make */

/*
 * The kinds of TLS failure (by what to check: the hint), and those this
 * outage has logged.  A kind is logged once per outage, not each failure
 * whose words differ: OpenSSL says the same cause in several ways (a server
 * that closes at once is "unexpected eof while reading" one time and
 * "connection closed during the TLS handshake" the next), and each server
 * of zklock.hosts is named, so words alternate at every retry.
 */
typedef enum TlsFailureKind
{
	TLSF_CERT_EXPIRED,
	TLSF_CERT_REFUSED,
	TLSF_SERVER_UNTRUSTED,
	TLSF_HOST_MISMATCH,
	TLSF_NOT_TLS,
	TLSF_OTHER
} TlsFailureKind;

static uint32 tls_logged_kinds;	/* 1 << TlsFailureKind, this outage */

/*
 * The kinds of SASL failure (by what to check), and those this outage has
 * logged, as the TLS failures': the worker tries again every 5 s.
 */
typedef enum SaslFailureKind
{
	SASLF_KDC_UNREACHABLE,
	SASLF_SERVER_UNKNOWN,
	SASLF_CLIENT_UNKNOWN,
	SASLF_OTHER
} SaslFailureKind;

static uint32 sasl_logged_kinds;	/* 1 << SaslFailureKind, this outage */

/*
 * A failed TLS handshake, as the client library said it ("Socket <server>
 * zk retcode=-15, ...: error in ssl connect: <OpenSSL's reason>", see
 * scripts/zkclient/01-*.patch), in words for last_error and the log, with
 * what to check and its kind; false when why is no TLS failure.
 */
static bool
tls_failure_words(const char *why, char *out, int outlen, const char **hint,
				  TlsFailureKind *kind)
{
	const char *reason = strstr(why, "error in ssl connect");
	char		server[64] = "";

	if (reason == NULL)
		return false;
	reason += strlen("error in ssl connect");
	if (reason[0] == ':')
		reason += 2;
	if (reason[0] == '\0')
		reason = "the TLS handshake failed";
	if (sscanf(why, "Socket %63s ", server) != 1)
		server[0] = '\0';
	snprintf(out, outlen, "TLS handshake with %s failed: %s",
			 server[0] ? server : "ZooKeeper", reason);
	if (strstr(reason, "certificate expired"))
	{
		*kind = TLSF_CERT_EXPIRED;
		*hint = "ZooKeeper refused zklock's certificate (zklock.ssl_cert_file) as expired: renew it, then reload.";
	}
	else if (strstr(reason, "certificate unknown") || strstr(reason, "unknown ca") ||
			 strstr(reason, "bad certificate") || strstr(reason, "certificate required"))
	{
		*kind = TLSF_CERT_REFUSED;
		*hint = "ZooKeeper refused zklock's certificate (zklock.ssl_cert_file): it must be signed by a CA in ZooKeeper's truststore, and valid.";
	}
	else if (strstr(reason, "no host of the list resolves"))
	{
		/* 04-tls-host-check.patch: the list resolved again before the
		 * handshake no longer gives the address connected to (DNS changed
		 * in between): refused, not unchecked; no certificate was seen */
		*kind = TLSF_HOST_MISMATCH;
		*hint = "The server connected to is no longer an address of zklock.hosts (DNS changed between the connection and the handshake?), so its name could not be checked: the client tries again.";
	}
	else if (strstr(reason, "hostname mismatch") || strstr(reason, "IP address mismatch"))
	{
		*kind = TLSF_HOST_MISMATCH;
		*hint = "ZooKeeper's certificate does not name the server as zklock.hosts does: give the server's certificate that name or address (subjectAltName), name the server as its certificate does, or set zklock.ssl_verify_host = off.";
	}
	else if (strstr(reason, "server certificate verify failed"))
	{
		*kind = TLSF_SERVER_UNTRUSTED;
		*hint = "zklock does not trust ZooKeeper's certificate: zklock.ssl_ca_file must hold the CA that signed it.";
	}
	else if (strstr(reason, "no TLS handshake within") || strstr(reason, "closed during") ||
			 strstr(reason, "unexpected eof") || strstr(reason, "wrong version number"))
	{
		*kind = TLSF_NOT_TLS;
		*hint = "Does zklock.hosts name the servers' secureClientPort, and do they serve TLS there?";
	}
	else
	{
		*kind = TLSF_OTHER;
		*hint = "Check zklock.ssl_ca_file, zklock.ssl_cert_file and ZooKeeper's ssl.* settings.";
	}
	return true;
}

/*
 * Publish the session's state.  error, when not NULL, becomes
 * zk_lock_status.last_error; connected clears it (root.c may set it again
 * for this session).
 */
void
zklock_status_set(ZkSessionState state, int64 session_id, const char *error)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (zklock_shared->session_state != state)
		zklock_shared->state_since = GetCurrentTimestamp();
	if (state == ZKS_CONNECTED)
	{
		if (zklock_shared->session_state != ZKS_CONNECTED)
			zklock_shared->n_connected++;
		zklock_shared->disconnected_since = 0;
		zklock_shared->last_error[0] = '\0';
	}
	else if (zklock_shared->disconnected_since == 0)
	{
		zklock_shared->disconnected_since = GetCurrentTimestamp();
		outage_since_us = zklock_boottime_us();
		outage_logs = 0;
	}
	zklock_shared->session_state = state;
	zklock_shared->session_id = session_id;
	zklock_shared->negotiated_timeout = zkc_negotiated_timeout();
	if (error)
		strlcpy(zklock_shared->last_error, error,
				sizeof(zklock_shared->last_error));
	LWLockRelease(zklock_shared->lock);
}

/* Forget what the client said during an outage (or about other hosts) */
static void
forget_outage_why(void)
{
	char		discard[8];

	(void) zkc_last_error(discard, sizeof(discard));
	outage_why[0] = '\0';
	tls_logged_kinds = 0;
	sasl_logged_kinds = 0;
}

/* milliseconds and seconds since the outage began */
int64
zklock_outage_ms(void)
{
	return (zklock_boottime_us() - outage_since_us) / 1000;
}

long
zklock_outage_seconds(void)
{
	return (long) (zklock_outage_ms() / 1000);
}

/*
 * While not connected: zk_lock_status.last_error follows what the client
 * says at once, and the log has a line after 10 s, after 60 s and then
 * every 10 minutes of the outage (counted from its true start).  Returns
 * whether the client complained since the last call.
 */
bool
zklock_outage_report(void)
{
	char		why[256];
	int64		down_ms;
	int64		next_ms;
	bool		complained = false;

	if (zklock_shared->session_state == ZKS_CONNECTED)
		return false;
	if (zkc_last_error(why, sizeof(why)))
	{
		char		words[256];
		const char *hint;
		TlsFailureKind kind;

		complained = true;

		/*
		 * A TLS failure is a setting to fix: logged at once, once per kind
		 * and outage (last_error follows every failure's own words)
		 */
		if (tls_failure_words(why, words, sizeof(words), &hint, &kind))
		{
			if ((tls_logged_kinds & (1U << kind)) == 0)
				ereport(LOG,
						(errmsg("zklock: %s", words), errhint("%s", hint)));
			tls_logged_kinds |= 1U << kind;
			strlcpy(why, words, sizeof(why));
		}
		strlcpy(outage_why, why, sizeof(outage_why));
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		strlcpy(zklock_shared->last_error, why,
				sizeof(zklock_shared->last_error));
		LWLockRelease(zklock_shared->lock);
	}
	down_ms = zklock_outage_ms();
	next_ms = outage_logs == 0 ? 10000 :
		outage_logs == 1 ? 60000 :
		60000 + (int64) (outage_logs - 1) * 600000;
	if (down_ms < next_ms)
		return complained;
	outage_logs++;
	ereport(LOG,
			(errmsg("zklock: not connected to ZooKeeper at \"%s\" since %s",
					zklock_hosts,
					timestamptz_to_str(zklock_shared->disconnected_since)),
			 outage_why[0] ?
			 errdetail("The ZooKeeper client says: %s", outage_why) : 0));
	return complained;
}

/* Connected (again): the end of an outage that the log mentioned */
void
zklock_outage_ended(void)
{
	if (outage_logs > 0)
		ereport(LOG,
				(errmsg("zklock: connected to ZooKeeper again after an outage of %ld s",
						zklock_outage_seconds())));
	outage_logs = 0;
	forget_outage_why();
}

/*
 * The client library could not make a handle (a host name that does not
 * resolve, no file descriptor left): logged once per distinct reason, not
 * at every retry; zk_lock_status.last_error shows it meanwhile.
 */
void
zklock_status_handle_failed(const char *what, const char *err, int retry_ms)
{
	zklock_status_set(ZKS_CONNECTING, 0, err);
	if (strcmp(err, handle_error) == 0)
		return;
	strlcpy(handle_error, err, sizeof(handle_error));
	ereport(LOG,
			(errmsg("zklock: could not %s with \"%s\": %s",
					what, zklock_hosts, err),
			 errdetail("The worker tries again every %d ms; this is logged again only if the reason changes.",
					   retry_ms)));
}

/* The outage counts from now (the worker's start) */
void
zklock_outage_from_now(void)
{
	outage_since_us = zklock_boottime_us();
}

/* Another outage, from now: nothing said of the last one is kept */
void
zklock_outage_restart(void)
{
	forget_outage_why();
	outage_logs = 0;
	outage_since_us = zklock_boottime_us();
}

/* A handle was made: the next failure is logged whatever its reason */
void
zklock_status_handle_made(void)
{
	handle_error[0] = '\0';
}

/*
 * A refused authentication (why: the client's words, or NULL): the hint
 * of its kind, what to check; NULL when this outage has logged that kind
 * already (the log has one line per kind and outage; last_error follows
 * every failure).
 */
const char *
zklock_auth_failure_hint(const char *why, bool kerberos)
{
	SaslFailureKind kind = SASLF_OTHER;
	const char *hint;

	if (why && strstr(why, "Cannot contact any KDC"))
	{
		kind = SASLF_KDC_UNREACHABLE;
		hint = "The KDC of zklock's realm does not answer: check that it runs, and the realm's kdc lines in krb5.conf (KRB5_CONFIG of the server).";
	}
	else if (why && strstr(why, "Server not found in Kerberos database"))
	{
		kind = SASLF_SERVER_UNKNOWN;
		hint = "The KDC does not know the servers' principal: zklock.sasl_service/zklock.sasl_host must name it (zookeeper/<host>).";
	}
	else if (why && strstr(why, "Client not found in Kerberos database"))
	{
		kind = SASLF_CLIENT_UNKNOWN;
		hint = "The KDC does not know zklock's principal (zklock.sasl_principal, or the first of zklock.sasl_keytab): create it (kadmin: addprinc), or name another.";
	}
	else if (kerberos)
		hint = "Check Kerberos: the KDC (krb5.conf), zklock.sasl_keytab and zklock.sasl_principal, and the servers' principal against zklock.sasl_service/zklock.sasl_host.";
	else
		hint = "Check the credentials: zklock.sasl_user and the password in zklock.sasl_password_file against the servers' JAAS configuration, or zklock.auth_file.";
	if (sasl_logged_kinds & (1U << kind))
		return NULL;
	sasl_logged_kinds |= 1U << kind;
	return hint;
}
