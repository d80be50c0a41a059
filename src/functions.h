/*-------------------------------------------------------------------------
 *
 * functions.h
 *		What the files of SQL-callable functions (functions.c, status.c,
 *		advisory.c) share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_FUNCTIONS_H
#define ZKLOCK_FUNCTIONS_H

/* a name in the database encoding, as UTF-8 (functions.c) */
extern char *zklock_utf8_in(char *name);

#endif							/* ZKLOCK_FUNCTIONS_H */
