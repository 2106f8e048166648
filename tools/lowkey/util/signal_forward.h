/* SPDX-License-Identifier: MIT */
/*
 * The signals that would stop lowkey: for a command it runs, passed on as time(1) does, held back
 * while none runs; for work on a process it did not start (--pid) or until stopped (agent), caught
 * as a request to stop (signal_stop_catch(), at the end).
 *
 * From signal_forward_start() to signal_forward_end():
 *   SIGINT, SIGQUIT  ignored by lowkey: the terminal sends them to the command too;
 *   SIGTERM, SIGHUP  sent on to the command (`kill PID`, a closed terminal), which lowkey still
 *                    waits for and reports on; one that lowkey was started ignoring (nohup) stays
 *                    ignored, and is not sent on.
 * The command starts with the dispositions and the signal mask lowkey was started with.
 *
 * Use, around fork():
 *	signal_forward_defer(&sd);		from the command's set-up on
 *	if (!signal_forward_start(&sf))		a signal came during the set-up: clean up
 *	pid = fork();
 *	child:		signal_forward_child(&sf); ... exec
 *	lowkey:		signal_forward_to(&sf, pid); ... signal_forward_wait(pid, true, &status);
 *			signal_forward_end(&sf);
 *	fork failed:	signal_forward_end(&sf);
 *	... the report, the files removed ...
 *	signal_forward_undefer(&sd);		a signal held back ends lowkey now
 *
 * One command at a time per process: the pid signals go to is a process-wide variable.
 * Costs about fifteen sigaction() and sigprocmask() calls per command, a pidfd polled while
 * waiting (its waitid() calls never block: see signal_forward.c), and a kill() per signal passed
 * on; no thread. A signal passed on interrupts what lowkey was blocked in: read() and waitpid()
 * resume (SA_RESTART), poll() returns EINTR.
 */
#ifndef LOWKEY_CLI_SIGNAL_FORWARD_H
#define LOWKEY_CLI_SIGNAL_FORWARD_H

#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#define SIGNAL_FORWARD_N 4 /* SIGINT, SIGQUIT, SIGTERM, SIGHUP */

/* The caller's signal state, as it was before signal_forward_start(), and the command's. */
struct signal_forward {
	sigset_t old_mask;
	struct sigaction old[SIGNAL_FORWARD_N];
	struct sigaction child[SIGNAL_FORWARD_N]; /* as lowkey was started: not the defer's */
};

/* The dispositions before signal_forward_defer(). */
struct signal_defer {
	struct sigaction old[SIGNAL_FORWARD_N];
};

/*
 * signal_forward_defer - from now until signal_forward_undefer(), outside
 * signal_forward_start()..signal_forward_end() (the command's set-up, its report, the gaps between
 * lowkey stat -r's runs), SIGINT, SIGQUIT, SIGTERM and SIGHUP are held back instead of ending lowkey
 * halfway with the files it made left behind; one lowkey was started ignoring stays ignored. A
 * second one acts at once, as it would have without the defer (whoever sends two means it).
 * Async-signal-safe; one defer at a time per process.
 */
void signal_forward_defer(struct signal_defer *sd);

/*
 * signal_forward_undefer - the dispositions as they were before signal_forward_defer(); then a
 * signal held back is raised and ends lowkey as it would have at once (stdio flushed first, so
 * that what lowkey printed is not lost). Not async-signal-safe (fflush).
 */
void signal_forward_undefer(const struct signal_defer *sd);

/*
 * signal_forward_held - whether a signal was held back since signal_forward_defer(): lowkey was
 * asked to stop, and what has not started yet (a process to attach to) should not start. To close
 * the window, block the four signals first, then ask. Async-signal-safe.
 */
bool signal_forward_held(void);

/*
 * signal_forward_start - before fork(): the four signals blocked, the caller's state saved. They
 * stay blocked until signal_forward_to(), so that none is lost in between and none reaches the
 * child before it has the caller's dispositions back. false, and nothing changed, when a signal
 * was held back since signal_forward_defer(): lowkey was asked to stop, so the command is not
 * started. Async-signal-safe.
 */
bool signal_forward_start(struct signal_forward *sf);

/*
 * signal_forward_to - in lowkey after fork(): SIGINT and SIGQUIT ignored, SIGTERM and SIGHUP
 * caught and sent to pid, then the four unblocked (a SIGTERM or SIGHUP that came since
 * signal_forward_start() is sent on now). One that comes once pid is reaped is held back, as
 * signal_forward_defer() holds them, if a defer is on. Async-signal-safe.
 */
void signal_forward_to(const struct signal_forward *sf, pid_t pid);

/*
 * signal_forward_wait - whether pid has ended, waiting for it if block; if so it is reaped, its
 * wait status in *status (left as it was when pid cannot be waited for), and no signal is passed
 * on any more: the pid is forgotten while pid is still a zombie, before it can be reused.
 * Async-signal-safe.
 */
bool signal_forward_wait(pid_t pid, bool block, int *status);

/*
 * signal_forward_wait4 - signal_forward_wait(), with pid's resource usage in *ru as wait4() gives
 * it (left as it was when pid has not ended or cannot be waited for). Async-signal-safe.
 */
bool signal_forward_wait4(pid_t pid, bool block, int *status, struct rusage *ru);

/*
 * signal_forward_end - in lowkey after the command was reaped or fork() failed: the dispositions
 * and the mask as they were before signal_forward_start(). Async-signal-safe.
 */
void signal_forward_end(const struct signal_forward *sf);

/*
 * signal_forward_child - in the child before exec: the mask as it was before
 * signal_forward_start(), and the dispositions lowkey was started with (before any
 * signal_forward_defer()). Async-signal-safe.
 */
void signal_forward_child(const struct signal_forward *sf);

/*
 * The stop signals of a command that works on a process it did not start (--pid) or runs until
 * stopped (agent): SIGINT, SIGTERM and SIGHUP ask it to stop; one lowkey was started ignoring
 * (nohup) stays ignored.
 */
#define SIGNAL_STOP_N 3

struct signal_stop {
	struct sigaction old[SIGNAL_STOP_N];
};

/*
 * signal_stop_catch - handler for SIGINT, SIGTERM and SIGHUP, but for one that is ignored; the
 * dispositions before in *ss. flags: the handler's sa_flags (without SA_RESTART, a blocking call
 * returns EINTR). Async-signal-safe.
 */
void signal_stop_catch(struct signal_stop *ss, void (*handler)(int), int flags);

/*
 * signal_stop_set - the same signals, but for one that is ignored, as a set: for a command that
 * blocks them and reads them (signalfd). A blocked signal is queued even if ignored, so an ignored
 * one must stay out. Async-signal-safe.
 */
void signal_stop_set(sigset_t *set);

/* signal_stop_restore - the dispositions signal_stop_catch() found. Async-signal-safe. */
void signal_stop_restore(const struct signal_stop *ss);

/*
 * signal_stop_restore_one - sig's disposition as signal_stop_catch() found it, for a handler whose
 * second signal should act at once. Async-signal-safe.
 */
void signal_stop_restore_one(const struct signal_stop *ss, int sig);

#endif
