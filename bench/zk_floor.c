/*
 * zk_floor.c -- what ZooKeeper itself costs, measured with the C client
 * (libzookeeper_mt), as the floor under every lock recipe in the benchmark.
 *
 *   zk_floor HOSTS sync  SECS N   N threads, each with its own session, each
 *                                 looping: synchronous zoo_create of an
 *                                 EPHEMERAL_SEQUENTIAL node, then zoo_delete.
 *   zk_floor HOSTS async SECS W   one session, W create+delete cycles in
 *                                 flight at once (zoo_acreate / zoo_adelete).
 *   zk_floor HOSTS watch SECS     two sessions: A creates a node, B sets a
 *                                 watch on it, A deletes it; measures from
 *                                 A's delete to B's watch event, and to B's
 *                                 getChildren after it (what any queue
 *                                 recipe pays at a handoff).
 *
 * Latency is the create's (the "acquire") for sync/async, the handoff for
 * watch.  Prints one JSON line: cycles, secs, p50_ms, p99_ms, samples (and
 * more per mode).  Every loop is bounded by SECS; connecting is bounded too.
 *
 * The client library's defaults are kept (so the floor is what any user of
 * libzookeeper_mt gets), except that ZK_FLOOR_RESOLUTION_DELAY=ms, if set,
 * is passed to zoo_set_servers_resolution_delay() (by default the library
 * re-resolves the host list each time it polls its socket).
 *
 * Build: gcc -O2 -Wall -Werror -o zk_floor zk_floor.c -lzookeeper_mt -lpthread
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* the synchronous API of the multi-threaded client */
#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

#define CONNECT_TIMEOUT_S 15
#define SESSION_TIMEOUT_MS 10000

static const char *hosts;
static double secs;
static int	resolution_delay;	/* ZK_FLOOR_RESOLUTION_DELAY; 0: the library's default */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
die(const char *fmt, const char *arg, int rc)
{
	fprintf(stderr, "zk_floor: ");
	fprintf(stderr, fmt, arg);
	if (rc != 0)
		fprintf(stderr, ": %s", zerror(rc));
	fprintf(stderr, "\n");
	exit(1);
}

/* ---------------------------------------------------------------- samples */

typedef struct Samples
{
	double	   *v;
	size_t		n;
	size_t		cap;
} Samples;

static void
sample_add(Samples *s, double x)
{
	if (s->n == s->cap)
	{
		s->cap = s->cap ? s->cap * 2 : 4096;
		s->v = realloc(s->v, s->cap * sizeof(double));
		if (s->v == NULL)
			die("out of memory%s", "", 0);
	}
	s->v[s->n++] = x;
}

static void
sample_merge(Samples *dst, const Samples *src)
{
	for (size_t i = 0; i < src->n; i++)
		sample_add(dst, src->v[i]);
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* nearest-rank percentile of sorted samples, in ms */
static double
pct(const Samples *s, double p)
{
	size_t		k;

	if (s->n == 0)
		return -1;
	k = (size_t) (p * s->n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > s->n)
		k = s->n;
	return s->v[k - 1] * 1000.0;
}

/* ---------------------------------------------------------------- sessions */

typedef struct Conn
{
	zhandle_t  *zh;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int			connected;
	int			expired;
} Conn;

static void
session_watcher(zhandle_t *zh, int type, int state, const char *path,
				void *ctx)
{
	Conn	   *c = ctx;

	(void) zh;
	(void) path;
	if (type != ZOO_SESSION_EVENT)
		return;
	pthread_mutex_lock(&c->mu);
	if (state == ZOO_CONNECTED_STATE)
		c->connected = 1;
	else if (state == ZOO_EXPIRED_SESSION_STATE ||
			 state == ZOO_AUTH_FAILED_STATE)
		c->expired = 1;
	else
		c->connected = 0;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void
conn_open(Conn *c)
{
	struct timespec deadline;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->zh = zookeeper_init(hosts, session_watcher, SESSION_TIMEOUT_MS, NULL,
						   c, 0);
	if (c->zh == NULL)
		die("zookeeper_init(%s) failed", hosts, 0);
	if (resolution_delay != 0)
		zoo_set_servers_resolution_delay(c->zh, resolution_delay);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += CONNECT_TIMEOUT_S;
	pthread_mutex_lock(&c->mu);
	while (!c->connected && !c->expired)
	{
		if (pthread_cond_timedwait(&c->cv, &c->mu, &deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&c->mu);
	if (!c->connected)
		die("could not connect to %s", hosts, 0);
}

static void
conn_close(Conn *c)
{
	zookeeper_close(c->zh);
}

/* create a persistent node, NODEEXISTS is fine */
static void
ensure_node(zhandle_t *zh, const char *path)
{
	int			rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0,
								NULL, 0);

	if (rc != ZOK && rc != ZNODEEXISTS)
		die("could not create %s", path, rc);
}

static char base[128];			/* /zkfloor/<pid> */

static void
make_base(zhandle_t *zh)
{
	ensure_node(zh, "/zkfloor");
	snprintf(base, sizeof(base), "/zkfloor/%d", (int) getpid());
	ensure_node(zh, base);
}

/* delete the children of path, then path (one level deep is all we make) */
static void
remove_tree(zhandle_t *zh, const char *path)
{
	struct String_vector kids;
	char		child[512];

	if (zoo_get_children(zh, path, 0, &kids) == ZOK)
	{
		for (int i = 0; i < kids.count; i++)
		{
			snprintf(child, sizeof(child), "%s/%s", path, kids.data[i]);
			remove_tree(zh, child);
		}
		deallocate_String_vector(&kids);
	}
	(void) zoo_delete(zh, path, -1);
}

/* ---------------------------------------------------------------- sync */

typedef struct SyncArg
{
	int			id;
	double		start;			/* measuring from here ... */
	double		end;			/* ... to here */
	long		cycles;
	long		every;			/* warm-up included */
	Samples		lat;
	pthread_barrier_t *ready;	/* every thread connected */
	pthread_barrier_t *go;		/* start/end are set */
} SyncArg;

static void *
sync_thread(void *p)
{
	SyncArg    *a = p;
	Conn		c;
	char		parent[256];
	char		path[300];
	char		created[300];
	int			rc;

	conn_open(&c);
	snprintf(parent, sizeof(parent), "%s/t%d", base, a->id);
	ensure_node(c.zh, parent);
	snprintf(path, sizeof(path), "%s/lock-", parent);
	pthread_barrier_wait(a->ready);
	pthread_barrier_wait(a->go);
	for (;;)
	{
		double		t0 = now_s(),
					t1;

		if (t0 >= a->end)
			break;
		rc = zoo_create(c.zh, path, "x", 1, &ZOO_OPEN_ACL_UNSAFE,
						ZOO_EPHEMERAL_SEQUENTIAL, created, sizeof(created));
		if (rc != ZOK)
			die("create under %s failed", parent, rc);
		t1 = now_s();
		rc = zoo_delete(c.zh, created, -1);
		if (rc != ZOK)
			die("delete of %s failed", created, rc);
		a->every++;
		if (t0 >= a->start && t1 <= a->end)
		{
			a->cycles++;
			sample_add(&a->lat, t1 - t0);
		}
	}
	(void) zoo_delete(c.zh, parent, -1);
	conn_close(&c);
	return NULL;
}

static void
run_sync(int n)
{
	pthread_t  *th = calloc(n, sizeof(pthread_t));
	SyncArg    *args = calloc(n, sizeof(SyncArg));
	pthread_barrier_t ready,
				go;
	Samples		all = {0};
	long		cycles = 0,
				every = 0;
	Conn		c;
	double		start,
				end;

	conn_open(&c);
	make_base(c.zh);
	pthread_barrier_init(&ready, NULL, n + 1);
	pthread_barrier_init(&go, NULL, n + 1);
	for (int i = 0; i < n; i++)
	{
		args[i].id = i;
		args[i].ready = &ready;
		args[i].go = &go;
		if (pthread_create(&th[i], NULL, sync_thread, &args[i]) != 0)
			die("pthread_create failed%s", "", 0);
	}
	/* the window is fixed once every thread is connected */
	pthread_barrier_wait(&ready);
	start = now_s() + 0.2;		/* a short warm-up, not counted */
	end = start + secs;
	for (int i = 0; i < n; i++)
	{
		args[i].start = start;
		args[i].end = end;
	}
	pthread_barrier_wait(&go);
	for (int i = 0; i < n; i++)
	{
		pthread_join(th[i], NULL);
		cycles += args[i].cycles;
		every += args[i].every;
		sample_merge(&all, &args[i].lat);
	}
	qsort(all.v, all.n, sizeof(double), cmp_double);
	printf("{\"mode\": \"sync\", \"clients\": %d, \"cycles\": %ld, \"all_cycles\": %ld, "
		   "\"secs\": %.3f, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"samples\": %zu}\n",
		   n, cycles, every, secs, pct(&all, 0.50), pct(&all, 0.99), all.n);
	remove_tree(c.zh, base);
	conn_close(&c);
}

/* ---------------------------------------------------------------- async */

typedef struct Slot
{
	int			id;
	double		t0;
	char		path[300];
} Slot;

static zhandle_t *azh;
static double a_start,
			a_end;
static long a_cycles;			/* touched by the completion thread only */
static long a_every;			/* warm-up included */
static Samples a_lat;
static long a_errors;
static pthread_mutex_t a_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t a_cv = PTHREAD_COND_INITIALIZER;
static int	a_active;			/* slots still cycling */
static char a_prefix[256];

static void a_issue(Slot *s);

static void
a_slot_done(void)
{
	pthread_mutex_lock(&a_mu);
	a_active--;
	pthread_cond_broadcast(&a_cv);
	pthread_mutex_unlock(&a_mu);
}

static void
a_deleted(int rc, const void *data)
{
	Slot	   *s = (Slot *) data;

	if (rc != ZOK)
		a_errors++;
	else
	{
		a_every++;
		if (s->t0 >= a_start && now_s() <= a_end)
			a_cycles++;
	}
	a_issue(s);
}

static void
a_created(int rc, const char *value, const void *data)
{
	Slot	   *s = (Slot *) data;
	double		t1 = now_s();

	if (rc != ZOK)
	{
		a_errors++;
		a_slot_done();
		return;
	}
	if (s->t0 >= a_start && t1 <= a_end)
		sample_add(&a_lat, t1 - s->t0);
	strncpy(s->path, value, sizeof(s->path) - 1);
	s->path[sizeof(s->path) - 1] = '\0';
	if (zoo_adelete(azh, s->path, -1, a_deleted, s) != ZOK)
	{
		a_errors++;
		a_slot_done();
	}
}

static void
a_issue(Slot *s)
{
	s->t0 = now_s();
	if (s->t0 >= a_end || a_errors > 0)
	{
		a_slot_done();
		return;
	}
	if (zoo_acreate(azh, a_prefix, "x", 1, &ZOO_OPEN_ACL_UNSAFE,
					ZOO_EPHEMERAL_SEQUENTIAL, a_created, s) != ZOK)
	{
		a_errors++;
		a_slot_done();
	}
}

static void
run_async(int window)
{
	Conn		c;
	Slot	   *slots = calloc(window, sizeof(Slot));
	struct timespec deadline;

	conn_open(&c);
	azh = c.zh;
	make_base(c.zh);
	snprintf(a_prefix, sizeof(a_prefix), "%s/a", base);
	ensure_node(c.zh, a_prefix);
	strcat(a_prefix, "/lock-");
	a_start = now_s() + 0.2;	/* warm-up, not counted */
	a_end = a_start + secs;
	a_active = window;
	for (int i = 0; i < window; i++)
	{
		slots[i].id = i;
		a_issue(&slots[i]);
	}
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += (time_t) secs + 30;
	pthread_mutex_lock(&a_mu);
	while (a_active > 0)
	{
		if (pthread_cond_timedwait(&a_cv, &a_mu, &deadline) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&a_mu);
	if (a_active > 0 || a_errors > 0)
		die("async run did not finish cleanly%s", "", 0);
	/* the completion thread is idle now */
	qsort(a_lat.v, a_lat.n, sizeof(double), cmp_double);
	printf("{\"mode\": \"async\", \"window\": %d, \"cycles\": %ld, \"all_cycles\": %ld, "
		   "\"secs\": %.3f, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"samples\": %zu}\n",
		   window, a_cycles, a_every, secs, pct(&a_lat, 0.50), pct(&a_lat, 0.99),
		   a_lat.n);
	remove_tree(c.zh, base);
	conn_close(&c);
}

/* ---------------------------------------------------------------- watch */

static pthread_mutex_t w_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t w_cv = PTHREAD_COND_INITIALIZER;
static int	w_fired;
static double w_t1;

static void
node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void) zh;
	(void) state;
	(void) path;
	(void) ctx;
	if (type != ZOO_DELETED_EVENT)
		return;
	pthread_mutex_lock(&w_mu);
	w_t1 = now_s();
	w_fired = 1;
	pthread_cond_signal(&w_cv);
	pthread_mutex_unlock(&w_mu);
}

static void
run_watch(void)
{
	Conn		a,
				b;
	char		parent[256];
	char		node[300];
	Samples		notified = {0};
	Samples		relisted = {0};
	long		cycles = 0;
	double		start,
				end;

	conn_open(&a);
	conn_open(&b);
	make_base(a.zh);
	snprintf(parent, sizeof(parent), "%s/w", base);
	ensure_node(a.zh, parent);
	snprintf(node, sizeof(node), "%s/lock-0000000000", parent);
	start = now_s() + 0.2;
	end = start + secs;
	for (;;)
	{
		struct Stat st;
		struct String_vector kids;
		struct timespec deadline;
		double		t0,
					t2;
		int			rc;

		if (now_s() >= end)
			break;
		rc = zoo_create(a.zh, node, "x", 1, &ZOO_OPEN_ACL_UNSAFE,
						ZOO_EPHEMERAL, NULL, 0);
		if (rc != ZOK)
			die("create of %s failed", node, rc);
		w_fired = 0;
		rc = zoo_wexists(b.zh, node, node_watcher, NULL, &st);
		if (rc != ZOK)
			die("exists of %s failed", node, rc);
		t0 = now_s();
		rc = zoo_delete(a.zh, node, -1);
		if (rc != ZOK)
			die("delete of %s failed", node, rc);
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += 5;
		pthread_mutex_lock(&w_mu);
		while (!w_fired)
		{
			if (pthread_cond_timedwait(&w_cv, &w_mu, &deadline) == ETIMEDOUT)
				break;
		}
		pthread_mutex_unlock(&w_mu);
		if (!w_fired)
			die("no watch event for %s within 5 s", node, 0);
		rc = zoo_get_children(b.zh, parent, 0, &kids);
		if (rc != ZOK)
			die("getChildren of %s failed", parent, rc);
		deallocate_String_vector(&kids);
		t2 = now_s();
		if (t0 >= start && t2 <= end)
		{
			cycles++;
			sample_add(&notified, w_t1 - t0);
			sample_add(&relisted, t2 - t0);
		}
	}
	qsort(notified.v, notified.n, sizeof(double), cmp_double);
	qsort(relisted.v, relisted.n, sizeof(double), cmp_double);
	printf("{\"mode\": \"watch\", \"cycles\": %ld, \"secs\": %.3f, "
		   "\"p50_ms\": %.4f, \"p99_ms\": %.4f, \"samples\": %zu, "
		   "\"watch_p50_ms\": %.4f, \"watch_p99_ms\": %.4f}\n",
		   cycles, secs, pct(&relisted, 0.50), pct(&relisted, 0.99),
		   relisted.n, pct(&notified, 0.50), pct(&notified, 0.99));
	remove_tree(a.zh, base);
	conn_close(&b);
	conn_close(&a);
}

int
main(int argc, char **argv)
{
	const char *mode;
	int			n = 1;

	if (argc < 4)
	{
		fprintf(stderr, "usage: zk_floor HOSTS sync|async|watch SECS [N]\n");
		return 2;
	}
	hosts = argv[1];
	mode = argv[2];
	secs = atof(argv[3]);
	if (argc > 4)
		n = atoi(argv[4]);
	if (secs <= 0 || secs > 600 || n < 1 || n > 1024)
	{
		fprintf(stderr, "zk_floor: SECS must be in (0, 600], N in [1, 1024]\n");
		return 2;
	}
	if (getenv("ZK_FLOOR_RESOLUTION_DELAY"))
		resolution_delay = atoi(getenv("ZK_FLOOR_RESOLUTION_DELAY"));
	zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(mode, "sync") == 0)
		run_sync(n);
	else if (strcmp(mode, "async") == 0)
		run_async(n);
	else if (strcmp(mode, "watch") == 0)
		run_watch();
	else
	{
		fprintf(stderr, "zk_floor: unknown mode %s\n", mode);
		return 2;
	}
	return 0;
}
