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
 * The session's identity is kept in pg_stat_tmp/zklock.session.  A worker
 * that starts after a crash (of itself, a backend or the postmaster) first
 * reattaches to the previous session and closes it, which makes ZooKeeper
 * delete every lock node of the crashed incarnation at once, instead of
 * after the session timeout.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "port.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "zklock.h"
#include "zk_client.h"
#include "protocol.h"
#include "lease.h"
#include "failpoint.h"

#define SESSION_FILE		PG_STAT_TMP_DIR "/zklock.session"
#define SESSION_FILE_TMP	PG_STAT_TMP_DIR "/zklock.session.tmp"
#define RECONNECT_DELAY_MS	500
#define STILL_DOWN_LOG_MS	10000

typedef enum WorkerPhase
{
	WP_CLOSING_OLD,				/* reattached to a crashed incarnation's session */
	WP_SESSION,					/* our own session, connecting or connected */
	WP_WAIT_RECONNECT			/* no handle; make one at reconnect_at */
} WorkerPhase;

static WorkerPhase phase;
static bool was_connected = false;
static TimestampTz phase_since;
static TimestampTz disconnected_since;
static TimestampTz reconnect_at;
static TimestampTz last_down_log;
static int64 session_asked_at;	/* CLOCK_BOOTTIME us of zkc_connect */

static void worker_exit(int code, Datum arg);
static void open_session(void);
static void handle_session_event(ZkEvent *ev);
static void session_gone(const char *why);

void
zklock_register_worker(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS;
	bgw.bgw_start_time = BgWorkerStart_PostmasterStart;
	bgw.bgw_restart_time = 1;
	strlcpy(bgw.bgw_library_name, "zklock", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "zklock_worker_main", BGW_MAXLEN);
	strlcpy(bgw.bgw_name, "zklock worker", BGW_MAXLEN);
	strlcpy(bgw.bgw_type, "zklock worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&bgw);
}

/*
 * "user:password" for the digest scheme, or NULL: from zklock.auth_file or
 * (deprecated) zklock.auth, checked without ever quoting them (zklock.c)
 */
static const char *
auth_credentials(void)
{
	return zklock_credentials();
}

static void
set_session_state(ZkSessionState state, int64 session_id, const char *error)
{
	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	if (zklock_shared->session_state != state)
		zklock_shared->state_since = GetCurrentTimestamp();
	if (state == ZKS_CONNECTED)
		zklock_shared->disconnected_since = 0;
	else if (zklock_shared->disconnected_since == 0)
		zklock_shared->disconnected_since = GetCurrentTimestamp();
	zklock_shared->session_state = state;
	zklock_shared->session_id = session_id;
	zklock_shared->negotiated_timeout = zkc_negotiated_timeout();
	if (error)
		strlcpy(zklock_shared->last_error, error,
				sizeof(zklock_shared->last_error));
	LWLockRelease(zklock_shared->lock);
}

/*
 * The session file: session id and password, written atomically.
 */
static void
save_session(void)
{
	char		buf[8 + 64];
	int64		id = zkc_session_id();
	int			len;
	int			fd;

	memcpy(buf, &id, sizeof(id));
	len = sizeof(id) + zkc_session_passwd(buf + sizeof(id), 64);
	fd = OpenTransientFile(SESSION_FILE_TMP, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0 || write(fd, buf, len) != len || pg_fsync(fd) != 0)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("zklock: could not write \"%s\": %m", SESSION_FILE_TMP)));
		if (fd >= 0)
			CloseTransientFile(fd);
		return;
	}
	CloseTransientFile(fd);
	(void) durable_rename(SESSION_FILE_TMP, SESSION_FILE, WARNING);
}

static bool
load_session(int64 *id, char *passwd)
{
	char		buf[8 + 64];
	int			fd = OpenTransientFile(SESSION_FILE, O_RDONLY | PG_BINARY);
	int			len;

	if (fd < 0)
		return false;
	len = read(fd, buf, sizeof(buf));
	CloseTransientFile(fd);
	if (len != 8 + 16)
		return false;
	memcpy(id, buf, sizeof(*id));
	memcpy(passwd, buf + 8, 16);
	return *id != 0;
}

/*
 * Entries left by an earlier worker of this instance belong to a session
 * that is being closed: held locks are lost, requests fail, releases are
 * done.
 */
static void
adopt_orphaned_entries(void)
{
	for (int i = 0; i < zklock_shared->nentries; i++)
	{
		ZkLockEntry *e = &zklock_shared->entries[i];

		switch (e->state)
		{
			case ZKE_REQUESTED:
				e->state = ZKE_FAILED;
				e->sqlstate = ERRCODE_CONNECTION_FAILURE;
				strlcpy(e->error, "the zklock worker restarted while the request was pending",
						sizeof(e->error));
				zklock_wake_owner(e);
				break;
			case ZKE_GRANTED:
				e->state = ZKE_LOST;
				zklock_shared->n_lost++;
				zklock_wake_owner(e);
				break;
			case ZKE_RELEASING:
				zklock_entry_free(i);
				break;
			default:
				break;
		}
	}
	zklock_shared->queue_count = 0;
	zklock_shared->queue_head = 0;
	for (int i = 0; i < zklock_shared->nentries; i++)
		zklock_shared->entries[i].queued = false;
}

void
zklock_worker_main(Datum main_arg)
{
	WaitEventSet *wes;
	uint32		incarnation;
	int64		old_id;
	char		old_passwd[16];
	int		   *batch;
	long		timeout = 1000;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

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
	zklock_shared->incarnation = incarnation;
	zklock_shared->session_state = ZKS_CONNECTING;
	zklock_shared->state_since = GetCurrentTimestamp();
	adopt_orphaned_entries();
	LWLockRelease(zklock_shared->lock);

	before_shmem_exit(worker_exit, (Datum) 0);

	zklock_protocol_init(incarnation);
	zkc_set_log_level(0);
	batch = palloc(sizeof(int) * zklock_shared->nentries);

	wes = CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(wes, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wes, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(wes, WL_SOCKET_READABLE, zkc_wake_fd(), NULL, NULL);

	/* first, end the session of a crashed predecessor, if there was one */
	phase_since = last_down_log = GetCurrentTimestamp();
	if (load_session(&old_id, old_passwd))
	{
		char		err[128];

		ereport(LOG,
				(errmsg("zklock: closing the ZooKeeper session 0x%llx of the previous worker",
						(unsigned long long) old_id)));
		if (zkc_connect(zklock_hosts, zklock_session_timeout, &old_id,
						old_passwd, auth_credentials(), err, sizeof(err)))
			phase = WP_CLOSING_OLD;
		else
			open_session();
	}
	else
		open_session();

	for (;;)
	{
		WaitEvent	events[3];
		int			nevents;
		long		ms;
		ZkEvent    *ev;
		int			n;
		TimestampTz now;

		nevents = WaitEventSetWait(wes, timeout, events, lengthof(events),
								   ZKLOCK_WAIT_EVENT);
		pg_atomic_write_u64(&zklock_shared->worker_alive_at,
							(uint64) zklock_boottime_us());
		for (int i = 0; i < nevents; i++)
		{
			if (events[i].events & WL_LATCH_SET)
				ResetLatch(MyLatch);
			if (events[i].events & WL_SOCKET_READABLE)
				zkc_drain_wake_fd();
		}
		CHECK_FOR_INTERRUPTS();
		if (ShutdownRequestPending)
			break;
		if (ConfigReloadPending)
		{
			char	   *old_hosts = pstrdup(zklock_hosts);

			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (strcmp(old_hosts, zklock_hosts) != 0 && phase == WP_SESSION)
			{
				ereport(LOG,
						(errmsg("zklock: zklock.hosts changed to \"%s\"; starting a new session",
								zklock_hosts)));
				session_gone("zklock.hosts changed");
			}
			pfree(old_hosts);
		}

		/* ZooKeeper's replies, watches and session changes */
		while ((ev = zkc_next_event()) != NULL)
		{
			if (ev->kind == ZKEV_SESSION)
				handle_session_event(ev);
			else if (phase == WP_SESSION && ev->kind == ZKEV_SYNCED)
				zklock_lease_event(ev);
			else if (phase == WP_SESSION && TAG_IDX(ev->tag) == ROOT_IDX)
			{
				/* requests go once the root is known to be safe */
				if (zklock_root_event(ev))
					zklock_protocol_connected(zkc_session_id());
			}
			else if (phase == WP_SESSION)
				zklock_protocol_event(ev);
			zkc_free_event(ev);
		}

		/* what backends queued */
		n = 0;
		LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
		while ((batch[n] = zklock_dequeue()) >= 0)
			n++;
		LWLockRelease(zklock_shared->lock);
		for (int i = 0; i < n; i++)
			zklock_protocol_request(batch[i]);

		/* timers */
		now = GetCurrentTimestamp();
		if (phase == WP_CLOSING_OLD &&
			TimestampDifferenceExceeds(phase_since, now, zklock_connect_timeout))
		{
			ereport(LOG,
					(errmsg("zklock: could not reach ZooKeeper to close the previous session; its nodes go when it times out")));
			zkc_close();
			open_session();
		}
		else if (phase == WP_WAIT_RECONNECT && now >= reconnect_at)
			open_session();
		else if (phase == WP_SESSION && was_connected &&
				 zklock_shared->session_state == ZKS_CONNECTING &&
				 TimestampDifferenceExceeds(disconnected_since, now,
											Max(zkc_negotiated_timeout(),
												zklock_session_timeout)))
		{
			/* the server has expired it by now, whatever the client says */
			session_gone("disconnected from ZooKeeper for longer than the session timeout");
		}
		if (zklock_shared->session_state != ZKS_CONNECTED &&
			TimestampDifferenceExceeds(last_down_log, now, STILL_DOWN_LOG_MS))
		{
			char		why[256];
			bool		have_why = zkc_last_error(why, sizeof(why));

			last_down_log = now;
			if (have_why)
				set_session_state(zklock_shared->session_state,
								  zklock_shared->session_id, why);
			ereport(LOG,
					(errmsg("zklock: not connected to ZooKeeper at \"%s\" since %s",
							zklock_hosts,
							timestamptz_to_str(zklock_shared->state_since)),
					 have_why ? errdetail("The ZooKeeper client says: %s", why) : 0));
		}
		/* fail requests that waited too long for a connection */
		ms = zklock_protocol_tick();
		timeout = (ms >= 0 && ms < 1000) ? ms + 1 : 1000;
		/* keep the session's lease fresh */
		ms = zklock_lease_tick(phase == WP_SESSION &&
							   zklock_shared->session_state == ZKS_CONNECTED);
		if (ms >= 0 && ms < timeout)
			timeout = ms + 1;
	}

	proc_exit(1);
}

static void
open_session(void)
{
	char		err[128];

	phase_since = GetCurrentTimestamp();
	was_connected = false;
	session_asked_at = zklock_boottime_us();
	if (zkc_connect(zklock_hosts, zklock_session_timeout, NULL, NULL,
					auth_credentials(), err, sizeof(err)))
	{
		phase = WP_SESSION;
		set_session_state(ZKS_CONNECTING, 0, NULL);
	}
	else
	{
		ereport(LOG,
				(errmsg("zklock: could not start a ZooKeeper session with \"%s\": %s",
						zklock_hosts, err)));
		set_session_state(ZKS_CONNECTING, 0, err);
		phase = WP_WAIT_RECONNECT;
		reconnect_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
												   RECONNECT_DELAY_MS);
	}
}

/*
 * The session is over (expired, or given up): first withdraw its lease and
 * mark what it held as lost, so that no commit trusts it any more; only
 * then close the handle (which, for a live session, lets ZooKeeper grant
 * its locks to others), drop whatever it still had in flight, and start a
 * new session.
 */
static void
session_gone(const char *why)
{
	ZkEvent    *ev;

	zklock_lease_end_session();
	zklock_protocol_session_lost(why);
	set_session_state(ZKS_EXPIRED, 0, why);
	(void) ZKLOCK_FAILPOINT("session-lost-before-close");
	zkc_close();
	while ((ev = zkc_next_event()) != NULL)
		zkc_free_event(ev);
	(void) unlink(SESSION_FILE);
	open_session();
}

static void
handle_session_event(ZkEvent *ev)
{
	if (phase == WP_CLOSING_OLD)
	{
		if (ev->state == ZKC_STATE_CONNECTED || ev->state == ZKC_STATE_EXPIRED ||
			ev->state == ZKC_STATE_AUTH_FAILED)
		{
			ZkEvent    *rest;

			/* closing it deletes its ephemeral nodes at once */
			zkc_close();
			while ((rest = zkc_next_event()) != NULL)
				zkc_free_event(rest);
			(void) unlink(SESSION_FILE);
			ereport(LOG,
					(errmsg("zklock: previous ZooKeeper session %s",
							ev->state == ZKC_STATE_CONNECTED ? "closed" : "had already expired")));
			open_session();
		}
		return;
	}
	if (phase != WP_SESSION)
		return;

	switch (ev->state)
	{
		case ZKC_STATE_CONNECTED:
			set_session_state(ZKS_CONNECTED, zkc_session_id(), NULL);
			if (!was_connected)
			{
				save_session();
				ereport(LOG,
						(errmsg("zklock: connected to ZooKeeper at \"%s\", session 0x%llx, timeout %d ms",
								zklock_hosts,
								(unsigned long long) zkc_session_id(),
								zkc_negotiated_timeout())));
			}
			else
				ereport(LOG,
						(errmsg("zklock: reconnected to ZooKeeper, session 0x%llx",
								(unsigned long long) zkc_session_id())));
			if (!was_connected)
			{
				zklock_lease_session_started(zkc_session_id(),
											 session_asked_at);
				if (zkc_negotiated_timeout() < 3 * zklock_lease_margin)
					ereport(WARNING,
							(errmsg("zklock: the negotiated session timeout (%d ms) is less than three times zklock.lease_margin (%d ms)",
									zkc_negotiated_timeout(), zklock_lease_margin),
							 errdetail("Commits under zklock locks will wait for the lease, or fail."),
							 errhint("Raise zklock.session_timeout (and ZooKeeper's maxSessionTimeout), or lower zklock.lease_margin.")));
			}
			was_connected = true;
			if (zklock_root_needs_check(zkc_session_id()))
				zklock_root_check_start(zkc_session_id());
			else
				zklock_protocol_connected(zkc_session_id());
			break;

		case ZKC_STATE_CONNECTING:
			if (zklock_shared->session_state == ZKS_CONNECTED)
			{
				disconnected_since = GetCurrentTimestamp();
				ereport(LOG,
						(errmsg("zklock: lost the connection to ZooKeeper; reconnecting")));
			}
			set_session_state(ZKS_CONNECTING, zkc_session_id(), NULL);
			zklock_protocol_disconnected();
			break;

		case ZKC_STATE_EXPIRED:
			ereport(LOG,
					(errmsg("zklock: ZooKeeper session 0x%llx expired; every lock it held is lost",
							(unsigned long long) zkc_session_id())));
			session_gone("ZooKeeper session expired");
			break;

		case ZKC_STATE_AUTH_FAILED:
			ereport(LOG,
					(errmsg("zklock: ZooKeeper authentication failed")));
			zklock_lease_end_session();
			zklock_protocol_session_lost("ZooKeeper authentication failed");
			set_session_state(ZKS_AUTH_FAILED, 0, "authentication failed");
			zkc_close();
			phase = WP_WAIT_RECONNECT;
			reconnect_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   RECONNECT_DELAY_MS * 10);
			break;
	}
}

/*
 * Leaving: closing the session deletes every node of this instance now.
 * What it held is marked lost first, and the lease withdrawn, so that no
 * commit passes between the close and the marking.
 */
static void
worker_exit(int code, Datum arg)
{
	bool		had_session = zkc_is_open() && phase == WP_SESSION;

	LWLockAcquire(zklock_shared->lock, LW_EXCLUSIVE);
	zklock_shared->lease_session = 0;
	zklock_shared->lease_end = 0;
	zklock_shared->worker_pid = 0;
	zklock_shared->session_state = ZKS_STOPPED;
	zklock_shared->session_id = 0;
	zklock_shared->state_since = GetCurrentTimestamp();
	for (int i = 0; i < zklock_shared->nentries; i++)
	{
		ZkLockEntry *e = &zklock_shared->entries[i];

		if (e->state == ZKE_GRANTED)
		{
			e->state = ZKE_LOST;
			zklock_shared->n_lost++;
			zklock_wake_owner(e);
		}
		else if (e->state == ZKE_REQUESTED)
		{
			e->state = ZKE_FAILED;
			e->sqlstate = ERRCODE_CONNECTION_FAILURE;
			strlcpy(e->error, "the zklock worker stopped", sizeof(e->error));
			zklock_wake_owner(e);
		}
		else if (e->state == ZKE_RELEASING)
			zklock_entry_free(i);
	}
	LWLockRelease(zklock_shared->lock);

	(void) ZKLOCK_FAILPOINT("session-lost-before-close");
	zkc_close();
	if (had_session)
		(void) unlink(SESSION_FILE);
}
