/*-------------------------------------------------------------------------
 *
 * compat.h
 *		What depends on the PostgreSQL version zklock builds against.
 *
 * zklock is built and tested on PostgreSQL 15, 17 and 18.  Every
 * difference between them is here, as a macro; the rest of the code is the
 * same on every version.  16 takes the code of 15 (each difference below
 * came with 17 or 18), but is neither built nor tested.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_COMPAT_H
#define ZKLOCK_COMPAT_H

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "zklock builds on PostgreSQL 15 to 18"
#endif

/*
 * The varlena macros (VARDATA, VARSIZE_ANY_EXHDR: the queue's bytea items)
 * have their own header from 16; before, postgres.h defines them.
 */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * This backend's PGPROC number (the index of its PGPROC in allProcs), and
 * the latch of another's.  17 calls it MyProcNumber; MyBackendId of older
 * versions is not the same number (it counts from 1).
 */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_MY_PROCNO		MyProcNumber
#else
#define ZKLOCK_MY_PROCNO		(MyProc->pgprocno)
#endif
#define ZKLOCK_PROC_LATCH(no)	(&ProcGlobal->allProcs[(no)].procLatch)

/* the shared transaction counters (access/transam.h): 17 renamed them */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_TRANSAM_VARIABLES	TransamVariables
#else
#define ZKLOCK_TRANSAM_VARIABLES	ShmemVariableCache
#endif

/* the two halves of this backend's virtual transaction id, as pg_locks */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_MY_VXID_PROC		(MyProc->vxid.procNumber)
#define ZKLOCK_MY_VXID_LXID		(MyProc->vxid.lxid)
#else
#define ZKLOCK_MY_VXID_PROC		(MyProc->backendId)
#define ZKLOCK_MY_VXID_LXID		(MyProc->lxid)
#endif

/*
 * A wait event set in TopMemoryContext, owned by no resource owner: 17
 * takes a ResourceOwner where older versions take a memory context (and
 * a memory context passed to 17 compiles, and corrupts memory).
 */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_CREATE_WAIT_EVENT_SET(n)	CreateWaitEventSet(NULL, (n))
#else
#define ZKLOCK_CREATE_WAIT_EVENT_SET(n)	CreateWaitEventSet(TopMemoryContext, (n))
#endif

/*
 * The module's magic block: 18 also records the name and version that
 * pg_get_loaded_modules() shows.
 */
#if PG_VERSION_NUM >= 180000
#define ZKLOCK_MODULE_MAGIC \
	PG_MODULE_MAGIC_EXT(.name = "zklock", .version = ZKLOCK_VERSION)
#else
#define ZKLOCK_MODULE_MAGIC		PG_MODULE_MAGIC
#endif

/*
 * A function that never returns: 18 has the prefix pg_noreturn and no
 * longer pg_attribute_noreturn(), which 15 and 17 have (placed after the
 * declarator; GCC takes the attribute before it as well).
 */
#if PG_VERSION_NUM >= 180000
#define zklock_noreturn			pg_noreturn
#else
#define zklock_noreturn			pg_attribute_noreturn()
#endif

/*
 * Named wait events (WaitEventExtensionNew) exist from 17; before, every
 * wait of zklock shows as PG_WAIT_EXTENSION ("Extension").  See
 * wait_events.c.
 */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_HAVE_NAMED_WAIT_EVENTS 1
#endif

#endif							/* ZKLOCK_COMPAT_H */
