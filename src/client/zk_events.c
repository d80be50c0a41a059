/*-------------------------------------------------------------------------
 *
 * zk_events.c
 *		The events that carry ZooKeeper's answers from the client library's
 *		threads to the worker's main thread, without ZooKeeper's headers.
 *
 * zk_client.c's completions and watchers (on libzookeeper_mt's threads:
 * "ZooKeeper thread" below) make each answer one malloc'd ZkEvent
 * (zkc_event_new), append it to the queue and write a byte to the wake
 * pipe (zkc_push_event); the worker waits for the pipe and takes the
 * events on its main thread (zkc_next_event).  The functions of the
 * ZooKeeper threads never call a PostgreSQL function.  The queue, the
 * wake flag and the client library's last log line are guarded by
 * queue_mutex; the pipe is made once, by the main thread.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "zk_client.h"
#include "zk_events.h"

static int	wake_pipe[2] = {-1, -1};

/* The event queue; guarded by queue_mutex */
static pthread_mutex_t queue_mutex = PTHREAD_MUTEX_INITIALIZER;
static ZkEvent *event_head = NULL;
static ZkEvent *event_tail = NULL;

/*
 * A byte is in the wake pipe, or the main thread has not yet seen the queue
 * empty since one was: no further write is needed to wake it.  Guarded by
 * queue_mutex.  Replies that arrive together (a create and the listing
 * behind it) so cost the main thread one wake-up, not one each.
 */
static bool wake_pending = false;

/* The highest mark taken off the queue; the main thread's alone */
static uint64 mark_seen = 0;

/* The client library's last error message; guarded by queue_mutex */
static char last_log[256];

/*
 * Kerberos's own words in the last failed GSSAPI exchange (the minor
 * status Cyrus SASL puts in parentheses at the end of its detail), which
 * the length of last_log would cut off; guarded by queue_mutex.
 */
static char sasl_detail[256];

/*
 * Wake pipe: created once, non-blocking at both ends.
 */
int
zkc_wake_fd(void)
{
	if (wake_pipe[0] < 0)
	{
		if (pipe(wake_pipe) != 0)
			return -1;
		for (int i = 0; i < 2; i++)
		{
			fcntl(wake_pipe[i], F_SETFL,
				  fcntl(wake_pipe[i], F_GETFL) | O_NONBLOCK);
			fcntl(wake_pipe[i], F_SETFD, FD_CLOEXEC);
		}
	}
	return wake_pipe[0];
}

void
zkc_drain_wake_fd(void)
{
	char		buf[256];

	while (read(wake_pipe[0], buf, sizeof(buf)) > 0)
		;
}

/*
 * ZooKeeper thread: one malloc'd event with room for the path, the children
 * and the data behind it.  rc is folded (ZkResult), zoo_rc ZooKeeper's own.
 */
ZkEvent *
zkc_event_new(ZkEventKind kind, uint64 tag, int rc, int zoo_rc,
			  const char *path, const ZkNodeStat *stat,
			  int nchildren, char *const *children,
			  const char *data, int datalen)
{
	size_t		size = sizeof(ZkEvent);
	size_t		pathlen = path ? strlen(path) + 1 : 0;
	ZkEvent    *ev;
	char	   *p;

	size += pathlen;
	size += sizeof(char *) * nchildren;
	for (int i = 0; i < nchildren; i++)
		size += strlen(children[i]) + 1;
	if (datalen < 0)
		datalen = 0;
	size += datalen + 1;

	ev = malloc(size);
	if (ev == NULL)
		return NULL;
	memset(ev, 0, sizeof(ZkEvent));
	ev->kind = kind;
	ev->tag = tag;
	ev->rc = rc;
	ev->zoo_rc = zoo_rc;
	if (stat)
	{
		ev->czxid = stat->czxid;
		ev->ephemeral_owner = stat->ephemeral_owner;
		ev->mtime = stat->mtime;
		ev->num_children = stat->num_children;
		ev->version = stat->version;
	}

	p = (char *) (ev + 1);
	ev->children = (char **) p;
	ev->nchildren = nchildren;
	p += sizeof(char *) * nchildren;
	for (int i = 0; i < nchildren; i++)
	{
		size_t		len = strlen(children[i]) + 1;

		memcpy(p, children[i], len);
		ev->children[i] = p;
		p += len;
	}
	if (path)
	{
		memcpy(p, path, pathlen);
		ev->path = p;
		p += pathlen;
	}
	if (data)
		memcpy(p, data, datalen);
	p[datalen] = '\0';
	ev->data = p;
	ev->datalen = datalen;
	return ev;
}

/* ZooKeeper thread: queue an event and wake the main thread */
void
zkc_push_event(ZkEvent *ev)
{
	char		b = 0;
	bool		wake;

	ev->next = NULL;
	pthread_mutex_lock(&queue_mutex);
	if (event_tail)
		event_tail->next = ev;
	else
		event_head = ev;
	event_tail = ev;
	wake = !wake_pending;
	wake_pending = true;
	pthread_mutex_unlock(&queue_mutex);

	if (wake)
	{
		/* a full pipe already means "wake up" */
		ssize_t		rc = write(wake_pipe[1], &b, 1);

		(void) rc;
	}
}

/* ZooKeeper thread: push an event, or drop it if memory ran out */
void
zkc_deliver(ZkEvent *ev)
{
	if (ev)
		zkc_push_event(ev);
	else
		fprintf(stderr, "zklock: out of memory for a ZooKeeper event\n");
}

ZkEvent *
zkc_next_event(void)
{
	ZkEvent    *ev;

	for (;;)
	{
		pthread_mutex_lock(&queue_mutex);
		ev = event_head;
		if (ev)
		{
			event_head = ev->next;
			if (event_head == NULL)
				event_tail = NULL;
		}
		else
			wake_pending = false;	/* seen empty: the next must wake us */
		pthread_mutex_unlock(&queue_mutex);
		if (ev == NULL || ev->kind != ZKEV_MARK)
			return ev;
		/* a mark (zk_client.c): noted, never handed out */
		if (ev->tag > mark_seen)
			mark_seen = ev->tag;
		zkc_free_event(ev);
	}
}

/* Main thread: the highest serial of a mark taken (zkc_send_mark) */
uint64
zkc_mark_seen(void)
{
	return mark_seen;
}

void
zkc_free_event(ZkEvent *ev)
{
	free(ev);
}

/*
 * ZooKeeper thread: the client library's log lines (errors only) are kept,
 * not printed: the worker reports the last one in its own log lines and in
 * zk_lock_status, instead of one line per reconnection attempt.
 */
void
zkc_log_callback(const char *message)
{
	const char *gss = strstr(message, "GSSAPI Error: ");
	/* the first " (": Kerberos's words may hold parentheses themselves */
	const char *krb = gss ? strstr(gss, " (") : NULL;
	const char *end = krb ? strrchr(krb, ')') : NULL;	/* the last ")" */

	pthread_mutex_lock(&queue_mutex);
	strlcpy(last_log, message, sizeof(last_log));
	/* GSSAPI: "GSSAPI Error: <GSS's words> (Cannot contact any KDC ...)" */
	if (krb && end)
		snprintf(sasl_detail, sizeof(sasl_detail), "Kerberos: %.*s",
				 (int) (end - krb - 2), krb + 2);
	pthread_mutex_unlock(&queue_mutex);
}

/* The last error the client library logged, and forget it; false if none */
bool
zkc_last_error(char *buf, int buflen)
{
	bool		found;

	pthread_mutex_lock(&queue_mutex);
	found = last_log[0] != '\0';
	if (found)
	{
		/* keep what follows the client's "file@line: " prefix */
		const char *p = strstr(last_log, ": ");

		strlcpy(buf, p ? p + 2 : last_log, buflen);
		/* a failed SASL exchange: with Cyrus's (Kerberos's) detail */
		if (sasl_detail[0] != '\0' && strstr(buf, "SASL authentication"))
		{
			char	   *colon = strstr(strstr(buf, "SASL authentication"), ": ");

			if (colon)
				*colon = '\0';
			snprintf(buf + strlen(buf), buflen - strlen(buf), ": %s",
					 sasl_detail);
		}
		last_log[0] = '\0';
		sasl_detail[0] = '\0';
	}
	pthread_mutex_unlock(&queue_mutex);
	return found;
}
