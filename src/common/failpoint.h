/*-------------------------------------------------------------------------
 *
 * failpoint.h
 *		Named points where a test can pause, slow down, fail or end the
 *		worker (see failpoint.c).  Compiled in only with
 *		"make FAILPOINTS=1", as the test command builds; otherwise
 *		ZKLOCK_FAILPOINT(name) is the constant false.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_FAILPOINT_H
#define ZKLOCK_FAILPOINT_H

#ifdef ZKLOCK_FAILPOINTS
extern char *zklock_failpoints;
extern void zklock_define_failpoints(void);
extern bool zklock_failpoint(const char *name);
#define ZKLOCK_FAILPOINT(name)	zklock_failpoint(name)
#else
#define ZKLOCK_FAILPOINT(name)	false
#endif

#endif							/* ZKLOCK_FAILPOINT_H */
