/*-------------------------------------------------------------------------
 *
 * worker.h
 *		The background worker that owns the ZooKeeper session: its
 *		registration and entry point (see worker.c).
 *
 * Portions Copyright (c) 2026, zklock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef ZKLOCK_WORKER_H
#define ZKLOCK_WORKER_H

#include "postgres.h"

extern void zklock_register_worker(void);
extern PGDLLEXPORT void zklock_worker_main(Datum main_arg);

#endif							/* ZKLOCK_WORKER_H */
