/*-------------------------------------------------------------------------
 *
 * queue_name.h
 *		A queue entry's name (entry-PPP-<seq>) and the order of entries,
 *		as pure functions (queue_name.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_QUEUE_NAME_H
#define ZKLOCK_QUEUE_NAME_H

extern bool zklock_queue_parse_entry(const char *name, int *priority,
									 int32 *seq);
extern int	zklock_queue_entry_cmp(const char *a, const char *b);

#endif							/* ZKLOCK_QUEUE_NAME_H */
