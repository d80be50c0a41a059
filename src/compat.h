/*-------------------------------------------------------------------------
 *
 * compat.h
 *		What depends on the PostgreSQL version zklock builds against.
 *
 * zklock is built and tested on PostgreSQL 15 only (the version Debian 12
 * packages); nothing else is claimed.  The few places that would differ
 * in other versions go through these macros, so that a port has one file
 * to start from; they hold only what is compiled and tested.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_COMPAT_H
#define ZKLOCK_COMPAT_H

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 160000
#error "zklock is built and tested on PostgreSQL 15 only"
#endif

/* this backend's PGPROC number, and the latch of another's */
#define ZKLOCK_MY_PROCNO		(MyProc->pgprocno)
#define ZKLOCK_PROC_LATCH(no)	(&ProcGlobal->allProcs[(no)].procLatch)

/* the wait event zklock's waits show in pg_stat_activity */
#define ZKLOCK_WAIT_EVENT		PG_WAIT_EXTENSION

#endif							/* ZKLOCK_COMPAT_H */
