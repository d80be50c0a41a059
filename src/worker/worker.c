/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The zklock background worker: one ZooKeeper session per instance.
 *
 * The main loop waits on three things at once: its latch (set by backends
 * that queued an entry), the wake pipe of zk_client.c (ZooKeeper replies
 * and watches) and postmaster death.  It never blocks on ZooKeeper: every
 * operation is asynchronous and many backends' requests are in flight on
 * the one session.
 *
 * The session's identity is kept in pg_stat_tmp/zklock.session
 * (session_file.c).  A worker
 * that starts after a crash (of itself, a backend or the postmaster) first
 * reattaches to the previous session and closes it, which makes ZooKeeper
 * delete every lock node of the crashed incarnation at once, instead of
 * after the session timeout.  A session the worker gives up (no connection
 * for longer than the session timeout) is closed the same way: ZooKeeper
 * restores sessions from its disk when it restarts, so the worker keeps
 * the file and reattaches to the session as soon as ZooKeeper can be
 * reached again, however long that takes, and closes it before it starts
 * a new one.
 *
 * An outage is logged after 10 s, after 60 s and then every 10 minutes,
 * and its end once; zk_lock_status.last_error says why at once.  A session
 * that no answer has proven alive for a session timeout is given up as
 * well, connected or not: a connection that is made and lost again at once
 * (a handshake the server refuses) does not keep it.
 *
 * The worker never ends a session that may still be alive (closing it
 * makes ZooKeeper grant its locks to others at once) while a commit that
 * passed the commit fence under it can still land: it withdraws the lease,
 * marks the locks lost, then waits for the commit windows (lease.c) to
 * close, and only then closes the handle.  That holds for a restart, a
 * reload of zklock.hosts, a refused authentication, a shutdown, an ERROR in
 * the worker and the postmaster's death alike (wait_for_fenced_commits).
 *
 * A SIGTERM from the postmaster (a shutdown) ends the worker with exit
 * code 0; from anyone else (kill; pg_terminate_backend does not reach a
 * worker without a database connection) with 1, so that the
 * postmaster starts it again (worker_signals.c, with the worker's
 * registration).  What the worker shows of its session, zk_lock_status and
 * the outage's lines in the log, is worker_status.c's; the recipes it runs
 * on the session are reached through recipe.c alone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "worker.h"
#include "worker_status.h"
#include "session_file.h"
#include "channel.h"
#include "compat.h"
#include "wait_events.h"
#include "zklock.h"
#include "settings.h"
#include "shmem.h"
#include "zk_client.h"
#include "secure.h"
#include "credentials.h"
#include "recipe.h"
#include "lease.h"
#include "failpoint.h"
#include "batch.h"

#define RECONNECT_DELAY_MS	500
/* after a refusal of our credentials: retrying sooner would not help */
#define AUTH_RETRY_DELAY_MS	5000
#define MAX_LOST_PIDS		10	/* PIDs named in the lost-locks WARNING */
#define CLOSING_RETRY_MS	1000	/* a fresh reattach handle this often */

typedef enum WorkerPhase
{
	WP_CLOSING_OLD,				/* reattached to an earlier session, to close
								 * it */
	WP_SESSION,					/* our own session, connecting or connected */
	WP_WAIT_RECONNECT			/* no handle; make one at reconnect_at_us */
} WorkerPhase;

static WorkerPhase worker_phase;
static bool was_connected = false;
static int64 worker_phase_since_us;	/* CLOCK_BOOTTIME us: durations only */
static int64 reconnect_at_us;
static int64 session_asked_at;	/* CLOCK_BOOTTIME us of zkc_connect */
static int64 connected_at_us;	/* CLOCK_BOOTTIME us of the last connect */

/*
 * WP_CLOSING_OLD: the session being closed (until it is, however long
 * ZooKeeper takes to come back; the session file names it meanwhile)
 */
static int64 closing_id;
static char closing_passwd[16];
static int	closing_retry_ms;	/* when to try a fresh handle */
static bool closing_refused;	/* the client complained meanwhile */

/* the main loop's room for the entries it takes off the queue */
static int *worker_batch;

/* How a session ends (session_gone) */
typedef enum SessionEnd
{
	SE_EXPIRED,					/* ZooKeeper expired it: nothing left to close */
	SE_GIVEN_UP,				/* not proven alive for a session timeout */
	SE_CLOSED					/* closed on purpose (zklock.hosts changed) */
} SessionEnd;

static void worker_exit(int code, Datum arg);
static void open_session(void);
static void handle_session_event(ZkEvent *ev);
static void session_connected(void);
static void session_gone(const char *why, SessionEnd end);
static void worker_take_requests(int *batch);
static void wait_for_fenced_commits(int64 session_id, bool serve);
static void serve_while_waiting(void);
static void hosts_changed(const char *what);
static void worker_timers(void);
static void give_up_if_silent(int64 now_us);
static void start_closing(int64 id, const char *passwd);
static void attach_to_close(void);

/*
 * "user:password" for the digest scheme, or NULL: from zklock.auth_file or
 * (deprecated) zklock.auth, checked without ever quoting them (zklock.c)
 */
static const char *
auth_credentials(void)
{
	return zklock_credentials();
}

/*
 * Entries left by an earlier worker of this instance belong to a session
 * that is being closed: held locks are lost, requests fail, releases are
 * done.
 */
static void
adopt_orphaned_entries(void)
{
	zklock_channel_worker_gone(ZKLOCK_WORKER_GONE "restarted while the request was pending");
	zklock_channel_clear_queue();
}

/*
 * Start: take the worker's place in shared memory (a second worker leaves),
 * and set up the recipes' table.
 */
static void
worker_start(void)
{
	uint32		incarnation;

	zklock_worker_signals();

	if (!pg_strong_random(&incarnation, sizeof(incarnation)))
		incarnation = (uint32) (GetCurrentTimestamp() ^ MyProcPid);

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (zklock_shared->worker_pid != 0)
	{
		LWLockRelease(zklock_shared->lock);
		ereport(LOG,
				(errmsg("zklock worker is already running under PID %d",
						zklock_shared->worker_pid)));
		proc_exit(0);
	}
	zklock_shared->worker_pid = MyProcPid;
	zklock_shared->worker_procno = ZKLOCK_MY_PROCNO;
	zklock_shared->session_state = ZKS_CONNECTING;
	zklock_shared->state_since = GetCurrentTimestamp();
	/* an outage that outlived the previous worker goes on */
	if (zklock_shared->disconnected_since == 0)
		zklock_shared->disconnected_since = zklock_shared->state_since;
	zklock_outage_from_now();
	adopt_orphaned_entries();
	LWLockRelease(zklock_shared->lock);

	before_shmem_exit(worker_exit, (Datum) 0);

	zklock_recipe_init(incarnation);
	zkc_set_log_level(0);
}

/* What the main loop waits on: its latch, the client's wake pipe, death */
static WaitEventSet *
worker_wait_set(void)
{
	WaitEventSet *wes;

	wes = ZKLOCK_CREATE_WAIT_EVENT_SET(3);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(wes, WL_SOCKET_READABLE, zkc_wake_fd(), NULL, NULL);
	return wes;
}

/* The first session: end a crashed predecessor's first, if there was one */
static void
worker_first_session(void)
{
	int64		old_id;
	char		old_passwd[16];

	/* first, end the session of a crashed predecessor, if there was one */
	worker_phase_since_us = zklock_boottime_us();
	if (zklock_session_file_load(&old_id, old_passwd))
	{
		ereport(LOG,
				(errmsg("zklock: closing the ZooKeeper session 0x%llx of the previous worker",
						(unsigned long long) old_id)));
		start_closing(old_id, old_passwd);
	}
	else
		open_session();
}

/*
 * Wait for the latch, the wake pipe or the timeout, and say that the worker
 * is alive.
 */
static void
worker_wait(WaitEventSet *wes, long timeout)
{
	WaitEvent	events[3];
	int			nevents;

	nevents = WaitEventSetWait(wes, timeout, events, lengthof(events),
							   ZKLOCK_WORKER_WAIT_EVENT);
	pg_atomic_write_u64(&zklock_shared->worker_alive_at,
						(uint64) zklock_boottime_us());
	for (int i = 0; i < nevents; i++)
	{
		if (events[i].events & WL_LATCH_SET)
			ResetLatch(MyLatch);
		if (events[i].events & WL_SOCKET_READABLE)
			zkc_drain_wake_fd();
	}
}

/*
 * A WARNING when the session's negotiated timeout is under three times
 * zklock.lease_margin: commits wait for the lease, and at half of it or
 * more no lease can cover the margin at all (lease.c).  At the session's
 * start, and at a reload that changed the margin (the timeout stays the
 * session's).
 */
static void
warn_lease_margin(void)
{
	int			timeout = zkc_negotiated_timeout();

	if (timeout > 0 && timeout < 3 * zklock_lease_margin)
		ereport(WARNING,
				(errmsg("zklock: the negotiated session timeout (%d ms) is less than three times zklock.lease_margin (%d ms)",
						timeout, zklock_lease_margin),
				 errdetail("Commits under zklock locks will wait for the lease, or fail."),
				 errhint("Raise zklock.session_timeout (and ZooKeeper's maxSessionTimeout), or lower zklock.lease_margin.")));
}

/* SIGHUP: read the configuration again; new hosts mean a new session */
static void
worker_reload(void)
{
	char	   *old_hosts = pstrdup(zklock_hosts);
	int			old_margin = zklock_lease_margin;
	char	   *old_transport = zklock_transport_signature();
	char	   *new_transport;

	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	zklock_recipe_reload();
	new_transport = zklock_transport_signature();
	if (strcmp(old_hosts, zklock_hosts) != 0)
		hosts_changed("zklock.hosts");
	else if (strcmp(old_transport, new_transport) != 0)
		hosts_changed("a TLS setting (zklock.ssl, its files, zklock.ssl_verify_host) or a zklock.sasl_* setting");
	else if (zklock_lease_margin != old_margin && was_connected)
		warn_lease_margin();
	pfree(old_hosts);
	pfree(old_transport);
	pfree(new_transport);
}

/* ZooKeeper's replies, watches and session changes */
static void
worker_pump_events(void)
{
	ZkEvent    *ev;

	while ((ev = zkc_next_event()) != NULL)
	{
		if (ev->kind == ZKEV_SESSION)
			handle_session_event(ev);
		else if (worker_phase == WP_SESSION && ev->kind == ZKEV_SYNCED)
			zklock_lease_event(ev);
		else if (worker_phase == WP_SESSION)
			zklock_recipe_event(ev);
		zkc_free_event(ev);
	}
}

/*
 * What backends queued, taken off the queue in one locked section into
 * batch[] (room for every entry), then handed to the recipes.
 */
static void
worker_take_requests(int *batch)
{
	int			n;

	n = 0;
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	while ((batch[n] = zklock_channel_dequeue()) >= 0)
		n++;
	LWLockRelease(zklock_shared->lock);
	for (int i = 0; i < n; i++)
		zklock_recipe_request(batch[i]);
}

/*
 * The timers: the session's, the requests' waits for a connection and the
 * lease.  Returns how long the main loop may wait (ms).
 */
static long
worker_tick(void)
{
	long		timeout;
	long		ms;

	worker_timers();
	/* fail requests that waited too long for a connection */
	ms = zklock_recipe_tick();
	timeout = (ms >= 0 && ms < 1000) ? ms + 1 : 1000;
	/* keep the session's lease fresh */
	ms = zklock_lease_tick(worker_phase == WP_SESSION &&
						   zklock_shared->session_state == ZKS_CONNECTED);
	if (ms >= 0 && ms < timeout)
		timeout = ms + 1;
	return timeout;
}

/*
 * The worker: start, then wait, read the configuration again on SIGHUP,
 * handle ZooKeeper's events and what backends queued, run the timers, until
 * a SIGTERM.
 */
void
zklock_worker_main(Datum main_arg)
{
	WaitEventSet *wes;
	long		timeout = 1000;

	worker_start();
	worker_batch = MemoryContextAlloc(TopMemoryContext,
									  sizeof(int) * zklock_shared->nentries);
	wes = worker_wait_set();
	worker_first_session();

	for (;;)
	{
		worker_wait(wes, timeout);
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
			worker_reload();
		worker_pump_events();
		worker_take_requests(worker_batch);
		timeout = worker_tick();
		/* what backends queued meanwhile joins this pass's writes */
		worker_take_requests(worker_batch);
		zklock_batch_flush();	/* the pass's writes, as few transactions */
	}

	/* a shutdown is a clean exit; otherwise the postmaster restarts us */
	proc_exit(zklock_worker_stopped_by_postmaster() ? 0 : 1);
}

static void
open_session(void)
{
	char		err[512];
	ZkcTls		tls_buf;
	const ZkcTls *tls;
	ZkcSasl		sasl_buf;
	const ZkcSasl *sasl = NULL;
	bool		tls_failed;		/* TLS's or SASL's settings unusable */

	worker_phase_since_us = zklock_boottime_us();
	was_connected = false;
	session_asked_at = zklock_boottime_us();
	tls = zklock_tls_config(&tls_buf, err, sizeof(err), &tls_failed);
	if (!tls_failed)
		sasl = zklock_sasl_config(&sasl_buf, err, sizeof(err), &tls_failed);
	if (!tls_failed &&
		zkc_connect(zklock_hosts, zklock_session_timeout, NULL, NULL,
					auth_credentials(), tls, sasl, err, sizeof(err)))
	{
		worker_phase = WP_SESSION;
		zklock_identity_publish(tls, sasl, auth_credentials());
		zklock_status_handle_made();
		zklock_status_set(ZKS_CONNECTING, 0, NULL);
	}
	else
	{
		zklock_status_handle_failed("start a ZooKeeper session", err,
									RECONNECT_DELAY_MS);
		worker_phase = WP_WAIT_RECONNECT;
		reconnect_at_us = zklock_boottime_us() + RECONNECT_DELAY_MS * INT64CONST(1000);
	}
}

/* Drop what a closed handle still had queued */
static void
drop_events(void)
{
	ZkEvent    *ev;

	while ((ev = zkc_next_event()) != NULL)
		zkc_free_event(ev);
}

/*
 * Reattach to an earlier session of this instance (a crashed predecessor's,
 * or one this worker gave up), to close it: closing deletes its ephemeral
 * nodes at once, instead of after its timeout.  No credentials are needed
 * for that.  It waits for ZooKeeper however long that takes: ZooKeeper
 * restores sessions from its disk, and requests fail with 08006 meanwhile
 * as they would while a new session connects.  The session file names the
 * session until it is closed.
 */
static void
start_closing(int64 id, const char *passwd)
{
	closing_id = id;
	memcpy(closing_passwd, passwd, sizeof(closing_passwd));
	closing_retry_ms = CLOSING_RETRY_MS;
	worker_phase = WP_CLOSING_OLD;
	zklock_status_set(ZKS_CONNECTING, 0, NULL);
	attach_to_close();
}

/* A (fresh) handle on the session being closed; the timer tries again */
static void
attach_to_close(void)
{
	char		err[512];
	ZkcTls		tls_buf;
	const ZkcTls *tls;
	ZkcSasl		sasl_buf;
	const ZkcSasl *sasl = NULL;
	bool		tls_failed;		/* TLS's or SASL's settings unusable */

	worker_phase_since_us = zklock_boottime_us();
	closing_refused = false;
	tls = zklock_tls_config(&tls_buf, err, sizeof(err), &tls_failed);
	if (!tls_failed)
		sasl = zklock_sasl_config(&sasl_buf, err, sizeof(err), &tls_failed);
	if (!tls_failed &&
		zkc_connect(zklock_hosts, zklock_session_timeout, &closing_id,
					closing_passwd, NULL, tls, sasl, err, sizeof(err)))
		zklock_status_handle_made();
	else
	{
		closing_refused = true; /* no handle: again in CLOSING_RETRY_MS */
		zklock_status_handle_failed("reattach to the previous ZooKeeper session",
									err, CLOSING_RETRY_MS);
	}
}

/*
 * The reattached session answered (connected: close it now; expired or
 * refused: nothing left to close): forget it and start our own.
 */
static void
finish_closing(const char *outcome)
{
	zkc_close();
	drop_events();
	zklock_session_file_remove();
	ereport(LOG,
			(errmsg("zklock: previous ZooKeeper session 0x%llx %s",
					(unsigned long long) closing_id, outcome)));
	open_session();
}

/*
 * Still waiting to reattach to an earlier session: make a fresh handle
 * every CLOSING_RETRY_MS while ZooKeeper refuses the client.  A client
 * that reaches a ZooKeeper server while it is still starting waits two
 * thirds of the session timeout before it tries again; a fresh handle
 * tries at once.  An attempt that met no refusal may just be slow: the
 * next one gets twice as long, up to the session timeout, so a slow
 * handshake still completes.  (Closing a handle that has just reattached
 * closes the session, which is what we want.)
 */
static void
retry_closing(void)
{
	closing_retry_ms = closing_refused ? CLOSING_RETRY_MS :
		Min(closing_retry_ms * 2, Max(zklock_session_timeout, CLOSING_RETRY_MS));
	zkc_close();
	drop_events();
	attach_to_close();
}

/*
 * The worker's timers, once per pass of its main loop.
 */
static void
worker_timers(void)
{
	int64		now_us = zklock_boottime_us();

	if (worker_phase == WP_CLOSING_OLD &&
		now_us - worker_phase_since_us >= closing_retry_ms * INT64CONST(1000))
		retry_closing();
	else if (worker_phase == WP_WAIT_RECONNECT && now_us >= reconnect_at_us)
		open_session();
	else if (worker_phase == WP_SESSION && was_connected)
		give_up_if_silent(now_us);
	if (zklock_outage_report())
		closing_refused = true;
}

/*
 * Give our session up when it has had no connection, or no answer that
 * proved it alive (lease.c), for longer than the session timeout:
 * ZooKeeper has expired it by now, or will when it is back.  The second
 * catches a connection that the server accepts and drops again at once
 * (every handshake resets the outage): each handshake keeps the session
 * alive on the server, but nothing is answered on it.  A connection made
 * less than a third of the bound ago (the client's ping interval) has its
 * chance first: the lease's sync is on its way.
 */
static void
give_up_if_silent(int64 now_us)
{
	int64		bound_ms = Max(zkc_negotiated_timeout(), zklock_session_timeout);
	int64		answered = zklock_lease_last_answer();

	if (zklock_shared->session_state == ZKS_CONNECTING &&
		zklock_outage_ms() >= bound_ms)
	{
		ereport(LOG,
				(errmsg("zklock: gave up ZooKeeper session 0x%llx after %ld s without a connection",
						(unsigned long long) zkc_session_id(),
						zklock_outage_seconds()),
				 errdetail("It is closed as soon as ZooKeeper can be reached again; a new session follows.")));
		session_gone("no connection to ZooKeeper for longer than the session timeout",
					 SE_GIVEN_UP);
	}
	else if (answered != 0 && (now_us - answered) / 1000 >= bound_ms &&
			 !(zklock_shared->session_state == ZKS_CONNECTED &&
			   (now_us - connected_at_us) / 1000 < bound_ms / 3))
	{
		ereport(LOG,
				(errmsg("zklock: gave up ZooKeeper session 0x%llx after %ld s without an answer that proved it alive",
						(unsigned long long) zkc_session_id(),
						(long) ((now_us - answered) / 1000000)),
				 errdetail("Connections were made, but no request was answered on them. It is closed as soon as ZooKeeper answers again; a new session follows.")));
		session_gone("no answer from ZooKeeper for longer than the session timeout",
					 SE_GIVEN_UP);
	}
}

/*
 * Mark what the session held as lost (after withdrawing its lease, so that
 * no commit trusts it any more), and say so in the log: once, naming the
 * session, why, and the backends that held locks.
 */
static void
mark_session_lost(int64 id, const char *why)
{
	int			pids[MAX_LOST_PIDS];
	int			npids;
	int			nlost;

	zklock_lease_end_session();
	nlost = zklock_recipe_session_lost(why, pids, MAX_LOST_PIDS, &npids);
	if (nlost > 0)
	{
		StringInfoData list;

		initStringInfo(&list);
		for (int i = 0; i < npids; i++)
			appendStringInfo(&list, "%s%d", i > 0 ? ", " : "", pids[i]);
		if (npids == MAX_LOST_PIDS)
			appendStringInfoString(&list, " and perhaps others");
		ereport(WARNING,
				(errmsg_plural("zklock: %d zklock lock lost with ZooKeeper session 0x%llx",
							   "zklock: %d zklock locks lost with ZooKeeper session 0x%llx",
							   nlost, nlost, (unsigned long long) id),
				 errdetail("The locks were lost because of this: %s. Backends that held them (PID): %s.",
						   why, list.data)));
		pfree(list.data);
	}
}

/*
 * The session is over (expired, given up, or closed on purpose): first
 * withdraw its lease and mark what it held as lost, so that no commit
 * trusts it any more; then, unless ZooKeeper expired it, wait for the
 * commits that passed the fence under it; only then close the handle
 * (which, for a live session, lets ZooKeeper grant its locks to others),
 * drop whatever it still had in flight, and start a new session.  A session
 * given up may live on in ZooKeeper (which may restore it from its disk):
 * reattach to it and close it, before a new session.  Only an end that is
 * a fault is zk_lock_status.last_error.
 */
static void
session_gone(const char *why, SessionEnd end)
{
	int64		id = zkc_session_id();
	char		passwd[16];
	bool		have_passwd;

	have_passwd = zkc_session_passwd(passwd, sizeof(passwd)) == sizeof(passwd);
	mark_session_lost(id, why);
	zklock_status_set(ZKS_EXPIRED, 0, end == SE_CLOSED ? NULL : why);
	if (end != SE_EXPIRED)
		wait_for_fenced_commits(id, true);
	(void) ZKLOCK_FAILPOINT("session-lost-before-close");
	zkc_close();
	drop_events();
	if (end == SE_GIVEN_UP && id != 0 && have_passwd)
	{
		start_closing(id, passwd);
		return;					/* the session file still names it */
	}
	zklock_session_file_remove();
	if (ShutdownRequestPending)
	{
		worker_phase = WP_WAIT_RECONNECT;	/* leaving: no new session */
		reconnect_at_us = zklock_boottime_us();
		return;
	}
	open_session();
}

/*
 * Before zklock ends a session that may still be alive: wait until no
 * commit that passed the commit fence under it can still land (lease.c).
 * serve: from the main loop, which goes on taking requests meanwhile (they
 * wait for the next session, as in an outage, within their bounds); from
 * worker_exit the worker takes none (they have been failed).
 */
static void
wait_for_fenced_commits(int64 session_id, bool serve)
{
	zklock_lease_wait_for_commits(session_id,
								  serve ? serve_while_waiting : NULL);
}

/* The main loop's work while it waits for commits: requests, timers */
static void
serve_while_waiting(void)
{
	pg_atomic_write_u64(&zklock_shared->worker_alive_at,
						(uint64) zklock_boottime_us());
	worker_take_requests(worker_batch);
	(void) zklock_recipe_tick();
	zklock_batch_flush();
}

/*
 * zklock.hosts changed: a session is not carried over to other servers.
 * A connected session is closed (its nodes go at once); one that is not
 * connected is left to time out on the old servers.  Nothing the client
 * said about the old servers stays in the log or zk_lock_status.
 */
static void
hosts_changed(const char *what)
{
	/* what changed, as the log says it: zklock.hosts with its new value */
	char	   *changed = strcmp(what, "zklock.hosts") == 0 ?
		psprintf("zklock.hosts changed to \"%s\"", zklock_hosts) :
		psprintf("%s changed", what);

	zklock_outage_restart();
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->last_error[0] = '\0';
	LWLockRelease(zklock_shared->lock);

	if (worker_phase == WP_SESSION)
	{
		if (zkc_session_id() != 0)
			ereport(LOG,
					(errmsg("zklock: %s; closing ZooKeeper session 0x%llx and starting a new one",
							changed, (unsigned long long) zkc_session_id())));
		else
			ereport(LOG,
					(errmsg("zklock: %s; starting a new session", changed)));
		session_gone(strcmp(what, "zklock.hosts") == 0 ?
					 "zklock.hosts changed" : "a TLS or SASL setting changed",
					 SE_CLOSED);
	}
	else if (worker_phase == WP_CLOSING_OLD)
	{
		ereport(LOG,
				(errmsg("zklock: %s; the previous ZooKeeper session 0x%llx is left to time out",
						changed, (unsigned long long) closing_id)));
		zkc_close();
		drop_events();
		zklock_session_file_remove();
		open_session();
	}
	pfree(changed);
}

/*
 * Our session is connected, for the first time or again: say so, start its
 * lease, and let requests go (after the check of the root, when due).
 */
static void
session_connected(void)
{
	zklock_status_set(ZKS_CONNECTED, zkc_session_id(), NULL);
	connected_at_us = zklock_boottime_us();
	if (!was_connected)
	{
		zklock_session_file_save();
		ereport(LOG,
				(errmsg("zklock: connected to ZooKeeper at \"%s\", session 0x%llx, timeout %d ms",
						zklock_hosts,
						(unsigned long long) zkc_session_id(),
						zkc_negotiated_timeout())));
		zklock_lease_session_started(zkc_session_id(),
									 session_asked_at);
		warn_lease_margin();
	}
	else
		ereport(LOG,
				(errmsg("zklock: reconnected to ZooKeeper at \"%s\", session 0x%llx",
						zklock_hosts,
						(unsigned long long) zkc_session_id())));
	zklock_outage_ended();
	was_connected = true;
	/* the recipes go (after the check of the root, when due: root.c) */
	zklock_recipe_connected(zkc_session_id());
}

/*
 * A change of the session's state: of the session being closed, or of our
 * own.
 */
static void
handle_session_event(ZkEvent *ev)
{
	if (worker_phase == WP_CLOSING_OLD)
	{
		/* closing it deletes its ephemeral nodes at once */
		if (ev->state == ZKC_STATE_CONNECTED)
			finish_closing("closed");
		else if (ev->state == ZKC_STATE_EXPIRED ||
				 ev->state == ZKC_STATE_AUTH_FAILED)
			finish_closing("had already expired");
		return;
	}
	if (worker_phase != WP_SESSION)
		return;

	switch (ev->state)
	{
		case ZKC_STATE_CONNECTED:
			session_connected();
			break;

		case ZKC_STATE_CONNECTING:
			if (zklock_shared->session_state == ZKS_CONNECTED)
				ereport(LOG,
						(errmsg("zklock: lost the connection to ZooKeeper at \"%s\", session 0x%llx; reconnecting",
								zklock_hosts,
								(unsigned long long) zkc_session_id())));
			zklock_status_set(ZKS_CONNECTING, zkc_session_id(), NULL);
			zklock_recipe_disconnected();
			break;

		case ZKC_STATE_EXPIRED:
			ereport(LOG,
					(errmsg("zklock: ZooKeeper session 0x%llx expired",
							(unsigned long long) zkc_session_id())));
			session_gone("the ZooKeeper session expired", SE_EXPIRED);
			break;

		case ZKC_STATE_AUTH_FAILED:
			{
				int64		id = zkc_session_id();
				char		why[256];
				bool		said = zkc_last_error(why, sizeof(why));
				char	   *error = said ?
					psprintf("authentication failed: %s", why) :
					pstrdup("authentication failed");

				const char *hint = zklock_auth_failure_hint(said ? why : NULL,
															pg_strcasecmp(zklock_sasl_mechanism, "GSSAPI") == 0);

				/* once per kind and outage: it is tried again every 5 s */
				if (hint)
					ereport(LOG,
							(errmsg("zklock: ZooKeeper authentication failed"),
							 said ? errdetail("The ZooKeeper client says: %s", why) : 0,
							 errhint("%s", hint)));
				mark_session_lost(id, "ZooKeeper authentication failed");
				zklock_status_set(ZKS_AUTH_FAILED, 0, error);
				pfree(error);
				wait_for_fenced_commits(id, true);
			}
			zkc_close();
			worker_phase = WP_WAIT_RECONNECT;
			reconnect_at_us = zklock_boottime_us() +
				AUTH_RETRY_DELAY_MS * INT64CONST(1000);
			break;
	}
}

/*
 * Leaving: closing the session deletes every node of this instance now.
 * An ERROR in the worker is one way here: PostgreSQL's background worker
 * code (bgworker.c's sigsetjmp block) reports it and calls proc_exit(1),
 * which runs this callback.  The ERROR may have been raised while the
 * worker held an LWLock (zklock_shared->lock, shared in
 * deadlock_publish.c's rebuild and around the dsm_attach of a request's
 * segment, in recipe.c and queue_util.c, or the statistics' lock).  The minor
 * releases we build (15.20, 17, 18) release LWLocks in shmem_exit before
 * any callback runs; releases without that change release them only in
 * ProcKill, after this callback, so that the LWLockAcquire below would
 * wait for the worker itself, for good, while the client library kept the
 * session alive.  This callback therefore releases them itself first, as
 * an auxiliary process's error handler does.  What it held is marked lost first, and the lease withdrawn, so that no
 * commit passes the fence from then on, and the commits that passed it
 * before have ended (wait_for_fenced_commits) before the close.  The
 * session file goes only when the session could be closed (it was
 * connected); otherwise the next worker reattaches to the session to close
 * it.
 */
static void
worker_exit(int code, Datum arg)
{
	bool		closes_session = zkc_is_open() && worker_phase == WP_SESSION &&
		zklock_shared->session_state == ZKS_CONNECTED;
	int64		id = (zkc_is_open() && worker_phase == WP_SESSION) ?
		zkc_session_id() : 0;

	LWLockReleaseAll();
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->lease_session = 0;
	zklock_shared->lease_end = 0;
	zklock_shared->worker_pid = 0;
	zklock_shared->session_state = ZKS_STOPPED;
	zklock_shared->session_id = 0;
	zklock_shared->state_since = GetCurrentTimestamp();
	zklock_channel_worker_gone(ZKLOCK_WORKER_GONE "stopped while the request was pending");
	LWLockRelease(zklock_shared->lock);

	wait_for_fenced_commits(id, false);
	(void) ZKLOCK_FAILPOINT("session-lost-before-close");
	zkc_close();
	if (closes_session)
		zklock_session_file_remove();
}
