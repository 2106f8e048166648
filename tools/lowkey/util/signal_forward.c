// SPDX-License-Identifier: MIT
/* Passing SIGTERM and SIGHUP on to the command lowkey waits for (signal_forward.h). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "signal_forward.h"

static const int handled_signals[SIGNAL_FORWARD_N] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP };

/* The signal held back since signal_forward_defer(); 0 when none. */
static volatile sig_atomic_t deferred;
/* The dispositions before signal_forward_defer(), for the command; NULL outside a defer. */
static const struct sigaction *defer_old;

/* The command forward_signal() passes signals on to; 0 when none. */
static volatile sig_atomic_t forward_pid;

/* The first is held back; a second means it (a long report): it acts at once, as undeferred. */
static void defer_signal(int sig)
{
	if (!deferred) {
		deferred = sig;
		return;
	}
	for (int i = 0; i < SIGNAL_FORWARD_N; i++)
		if (handled_signals[i] == sig && defer_old)
			sigaction(sig, &defer_old[i], NULL);
	raise(sig); /* blocked in its own handler: acts when the handler returns */
}

/* To the command; once it is reaped (before signal_forward_end()), held back as no command runs. */
static void forward_signal(int sig)
{
	int saved_errno = errno;

	if (forward_pid > 0)
		kill((pid_t)forward_pid, sig);
	else if (defer_old)
		defer_signal(sig);
	errno = saved_errno;
}

void signal_forward_defer(struct signal_defer *sd)
{
	struct sigaction hold = { .sa_handler = defer_signal, .sa_flags = SA_RESTART };

	sigemptyset(&hold.sa_mask);
	for (int i = 0; i < SIGNAL_FORWARD_N; i++)
		sigaddset(&hold.sa_mask, handled_signals[i]);
	deferred = 0;
	for (int i = 0; i < SIGNAL_FORWARD_N; i++) {
		sigaction(handled_signals[i], NULL, &sd->old[i]);
		if (sd->old[i].sa_handler != SIG_IGN)
			sigaction(handled_signals[i], &hold, NULL);
	}
	defer_old = sd->old;
}

void signal_forward_undefer(const struct signal_defer *sd)
{
	int sig;

	for (int i = 0; i < SIGNAL_FORWARD_N; i++)
		sigaction(handled_signals[i], &sd->old[i], NULL);
	defer_old = NULL;
	sig = deferred;
	deferred = 0;
	if (!sig)
		return;
	fflush(NULL);
	raise(sig); /* a handler lowkey was started with runs, as it would have */
}

bool signal_forward_held(void)
{
	return deferred != 0;
}

static bool passed_on(int sig)
{
	return sig == SIGTERM || sig == SIGHUP;
}

bool signal_forward_start(struct signal_forward *sf)
{
	sigset_t block;

	sigemptyset(&block);
	for (int i = 0; i < SIGNAL_FORWARD_N; i++)
		sigaddset(&block, handled_signals[i]);
	sigprocmask(SIG_BLOCK, &block, &sf->old_mask);
	if (deferred) {
		sigprocmask(SIG_SETMASK, &sf->old_mask, NULL);
		return false;
	}
	for (int i = 0; i < SIGNAL_FORWARD_N; i++) {
		sigaction(handled_signals[i], NULL, &sf->old[i]);
		sf->child[i] = defer_old ? defer_old[i] : sf->old[i];
	}
	return true;
}

void signal_forward_to(const struct signal_forward *sf, pid_t pid)
{
	struct sigaction forward = { .sa_handler = forward_signal, .sa_flags = SA_RESTART };
	struct sigaction ignore = { .sa_handler = SIG_IGN };

	sigemptyset(&forward.sa_mask);
	sigemptyset(&ignore.sa_mask);
	for (int i = 0; i < SIGNAL_FORWARD_N; i++)
		if (passed_on(handled_signals[i]))
			sigaddset(&forward.sa_mask, handled_signals[i]);
	forward_pid = pid;
	for (int i = 0; i < SIGNAL_FORWARD_N; i++) {
		int sig = handled_signals[i];

		/* ignoring a pending SIGINT discards it: it was the command's */
		if (!passed_on(sig))
			sigaction(sig, &ignore, NULL);
		else if (sf->old[i].sa_handler != SIG_IGN)
			sigaction(sig, &forward, NULL);
	}
	sigprocmask(SIG_SETMASK, &sf->old_mask, NULL);
}

/* Whether pid has ended (or cannot be waited for), leaving it to be reaped. */
static bool has_ended(pid_t pid)
{
	siginfo_t info = { 0 };
	int rc;

	do
		rc = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT | WNOHANG);
	while (rc < 0 && errno == EINTR);
	return rc < 0 || info.si_pid != 0;
}

/*
 * Until pid has ended, in poll() on its pidfd rather than in a waitid() that blocks:
 * ThreadSanitizer's runtime runs a signal's handler only inside the calls it knows may block, and
 * waitid() is not one of them, so the SIGTERM meant for the command would wait for the command's
 * end. Without pidfds (Linux < 5.3), a look every 100 ms.
 */
static void await_end(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (!has_ended(pid))
		poll(&p, fd >= 0 ? 1 : 0, fd >= 0 ? -1 : 100);
	if (fd >= 0)
		close(fd);
}

bool signal_forward_wait4(pid_t pid, bool block, int *status, struct rusage *ru)
{
	if (block)
		await_end(pid);
	else if (!has_ended(pid))
		return false;
	forward_pid = 0;
	while (wait4(pid, status, 0, ru) < 0 && errno == EINTR)
		;
	return true;
}

bool signal_forward_wait(pid_t pid, bool block, int *status)
{
	return signal_forward_wait4(pid, block, status, NULL);
}

void signal_forward_end(const struct signal_forward *sf)
{
	forward_pid = 0;
	for (int i = 0; i < SIGNAL_FORWARD_N; i++)
		sigaction(handled_signals[i], &sf->old[i], NULL);
	sigprocmask(SIG_SETMASK, &sf->old_mask, NULL);
}

void signal_forward_child(const struct signal_forward *sf)
{
	forward_pid = 0;
	for (int i = 0; i < SIGNAL_FORWARD_N; i++)
		sigaction(handled_signals[i], &sf->child[i], NULL);
	sigprocmask(SIG_SETMASK, &sf->old_mask, NULL);
}

static const int stop_signals[SIGNAL_STOP_N] = { SIGINT, SIGTERM, SIGHUP };

void signal_stop_catch(struct signal_stop *ss, void (*handler)(int), int flags)
{
	struct sigaction catch = { .sa_handler = handler, .sa_flags = flags };

	sigemptyset(&catch.sa_mask);
	for (int i = 0; i < SIGNAL_STOP_N; i++) {
		sigaction(stop_signals[i], NULL, &ss->old[i]);
		if (ss->old[i].sa_handler != SIG_IGN)
			sigaction(stop_signals[i], &catch, NULL);
	}
}

void signal_stop_set(sigset_t *set)
{
	struct sigaction now;

	sigemptyset(set);
	for (int i = 0; i < SIGNAL_STOP_N; i++)
		if (sigaction(stop_signals[i], NULL, &now) == 0 && now.sa_handler != SIG_IGN)
			sigaddset(set, stop_signals[i]);
}

void signal_stop_restore(const struct signal_stop *ss)
{
	for (int i = 0; i < SIGNAL_STOP_N; i++)
		sigaction(stop_signals[i], &ss->old[i], NULL);
}

void signal_stop_restore_one(const struct signal_stop *ss, int sig)
{
	for (int i = 0; i < SIGNAL_STOP_N; i++)
		if (stop_signals[i] == sig)
			sigaction(sig, &ss->old[i], NULL);
}
