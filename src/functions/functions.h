/*-------------------------------------------------------------------------
 *
 * functions.h
 *		What the files of SQL-callable functions (functions.c, status.c,
 *		advisory.c, semaphore.c) share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_FUNCTIONS_H
#define ZKLOCK_FUNCTIONS_H

#include "fmgr.h"

/* a name in the database encoding, as UTF-8 (functions.c) */
extern char *zklock_utf8_in(char *name);

/*
 * Arguments (functions.c): the resource (argument 0; NULL is an error), a
 * timeout interval in ms (-1 for NULL or absent)
 */
extern char *zklock_resource_arg(FunctionCallInfo fcinfo);
extern int	zklock_timeout_arg(FunctionCallInfo fcinfo, int argno);

/* status.c: a name from ZooKeeper (UTF-8) in the database encoding */
extern char *zklock_text_out(char *s);

#endif							/* ZKLOCK_FUNCTIONS_H */
