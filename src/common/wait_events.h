/*-------------------------------------------------------------------------
 *
 * wait_events.h
 *		The wait events zklock's waits show in pg_stat_activity.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WAIT_EVENTS_H
#define ZKLOCK_WAIT_EVENTS_H

#include "utils/wait_event.h"

typedef enum ZkWaitEvent
{
	ZKLOCK_WAIT_ACQUIRE,		/* a backend: a lock another holder has */
	ZKLOCK_WAIT_WORKER,			/* a backend: the worker's answer */
	ZKLOCK_WAIT_LEASE,			/* a backend's fence: proof of the lease */
	ZKLOCK_WAIT_EVENT_COUNT
} ZkWaitEvent;

/*
 * The worker's own waits: it never connects to a database, so it has no
 * row in pg_stat_activity, and a name would show nowhere.
 */
#define ZKLOCK_WORKER_WAIT_EVENT	PG_WAIT_EXTENSION

extern uint32 zklock_wait_event(ZkWaitEvent which);
extern void zklock_wait_events_init(void);

#endif							/* ZKLOCK_WAIT_EVENTS_H */
