/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Differences between the PostgreSQL versions zklock builds against.
 *
 * zklock is developed and tested on PostgreSQL 15; these macros keep the
 * rest of the code free of version tests for 15 and later.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_COMPAT_H
#define ZKLOCK_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "zklock requires PostgreSQL 15 or later"
#endif

/* PostgreSQL 17 renamed pgprocno to the proc number of MyProc */
#if PG_VERSION_NUM >= 170000
#define ZKLOCK_MY_PROCNO		MyProcNumber
#define ZKLOCK_PROC_LATCH(no)	(&GetPGProcByNumber(no)->procLatch)
#else
#define ZKLOCK_MY_PROCNO		(MyProc->pgprocno)
#define ZKLOCK_PROC_LATCH(no)	(&ProcGlobal->allProcs[(no)].procLatch)
#endif

/* PostgreSQL 17 gave extensions named wait events */
#define ZKLOCK_WAIT_EVENT		PG_WAIT_EXTENSION

#endif							/* ZKLOCK_COMPAT_H */
