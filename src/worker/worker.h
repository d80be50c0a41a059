/*-------------------------------------------------------------------------
 *
 * worker.h
 *		The background worker that owns the ZooKeeper session: its
 *		registration and signals (worker_signals.c) and entry point
 *		(worker.c).
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

/* worker_signals.c: for worker.c */
extern void zklock_worker_signals(void);
extern bool zklock_worker_stopped_by_postmaster(void);

#endif							/* ZKLOCK_WORKER_H */
