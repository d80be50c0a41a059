/*-------------------------------------------------------------------------
 *
 * worker_signals.c
 *		The worker's process as the postmaster sees it: its registration,
 *		and its signals.
 *
 * A SIGTERM from the postmaster (a shutdown) ends the worker with exit
 * code 0; from anyone else with 1, so that the postmaster starts it again:
 * the handler notes who sent it (stop_by_postmaster, written by the
 * handler only, read by the worker's main loop once it stops).  SIGHUP is
 * PostgreSQL's own handler (the main loop reads the configuration again).
 * Nothing here knows zklock's state: the registration names the worker's
 * entry point by its name.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "postmaster/postmaster.h"
#include "storage/latch.h"

#include "worker.h"

/* SIGTERM came from the postmaster: a shutdown, not a restart */
static volatile sig_atomic_t stop_by_postmaster = false;

/* At the library's load (zklock.c): the worker, started with the postmaster */
void
zklock_register_worker(void)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS;
	bgw.bgw_start_time = BgWorkerStart_PostmasterStart;
	bgw.bgw_restart_time = 1;
	strlcpy(bgw.bgw_library_name, "zklock", BGW_MAXLEN);
	strlcpy(bgw.bgw_function_name, "zklock_worker_main", BGW_MAXLEN);
	strlcpy(bgw.bgw_name, "zklock worker", BGW_MAXLEN);
	strlcpy(bgw.bgw_type, "zklock worker", BGW_MAXLEN);
	RegisterBackgroundWorker(&bgw);
}

/*
 * SIGTERM: as SignalHandlerForShutdownRequest, and note whether the
 * postmaster sent it.
 */
static void
worker_sigterm(int signo, siginfo_t *info, void *context)
{
	int			save_errno = errno;

	if (info != NULL && info->si_pid == PostmasterPid)
		stop_by_postmaster = true;
	ShutdownRequestPending = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

static void
set_sigterm_handler(void)
{
	struct sigaction act;

	memset(&act, 0, sizeof(act));
	act.sa_sigaction = worker_sigterm;
	sigemptyset(&act.sa_mask);
	act.sa_flags = SA_SIGINFO | SA_RESTART;
	if (sigaction(SIGTERM, &act, NULL) != 0)
		elog(FATAL, "zklock: could not set the SIGTERM handler: %m");
}

/* The worker's signals, set and unblocked at its start */
void
zklock_worker_signals(void)
{
	set_sigterm_handler();
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
}

/* Did the postmaster send the SIGTERM (a shutdown)? */
bool
zklock_worker_stopped_by_postmaster(void)
{
	return stop_by_postmaster;
}
