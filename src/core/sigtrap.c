// SPDX-License-Identifier: MIT
/*
 * The shared SIGTRAP dispatcher.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/sigtrap.h"

#define MAX_TRAP_HANDLERS 8

static lk__trap_handler trap_handlers[MAX_TRAP_HANDLERS];
static unsigned int nr_trap_handlers;
static pthread_mutex_t sigtrap_mutex = PTHREAD_MUTEX_INITIALIZER;

/*
 * The action to chain to. Written only under sigtrap_mutex, into the slot the dispatcher is not
 * reading, then published by flipping chain_slot.
 */
static struct sigaction chain[2];
static unsigned int chain_slot;
static bool installed;

static void dispatcher(int sig, siginfo_t *si, void *ctx);

static void chain_to_default(int sig)
{
	struct sigaction dfl;
	sigset_t set;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(sig); /* terminates with a core dump, as SIGTRAP would have */
}

static void chain_to_previous(int sig, siginfo_t *si, void *ctx)
{
	const struct sigaction *prev = &chain[__atomic_load_n(&chain_slot, __ATOMIC_ACQUIRE)];
	sigset_t saved;

	if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler == SIG_IGN)
		return;
	if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler == SIG_DFL) {
		chain_to_default(sig);
		return;
	}
	if (prev->sa_sigaction == dispatcher)
		return;

	pthread_sigmask(SIG_BLOCK, &prev->sa_mask, &saved);
	if (prev->sa_flags & SA_SIGINFO)
		prev->sa_sigaction(sig, si, ctx);
	else
		prev->sa_handler(sig);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

static void dispatcher(int sig, siginfo_t *si, void *ctx)
{
	unsigned int n = __atomic_load_n(&nr_trap_handlers, __ATOMIC_ACQUIRE);
	int saved_errno = errno;

	for (unsigned int i = 0; i < n; i++) {
		if (trap_handlers[i](si, ctx)) {
			errno = saved_errno;
			return;
		}
	}
	errno = saved_errno;
	chain_to_previous(sig, si, ctx);
}

/* Install the dispatcher, saving whatever was there as the action to chain to. */
static int install_locked(void)
{
	struct sigaction ours, prev;
	unsigned int next = !__atomic_load_n(&chain_slot, __ATOMIC_RELAXED);

	memset(&ours, 0, sizeof(ours));
	ours.sa_sigaction = dispatcher;
	/*
	 * SA_NODEFER: a trap may nest in another (a site rewritten while a watchpoint callback runs
	 * it). A blocked synchronous SIGTRAP would kill the process instead.
	 */
	ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
	sigemptyset(&ours.sa_mask);
	if (sigaction(SIGTRAP, NULL, &prev) != 0)
		return lk__fail(-errno, "sigaction(SIGTRAP) failed: %s", strerror(errno));
	if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction == dispatcher)
		return 0;
	chain[next] = prev;
	__atomic_store_n(&chain_slot, next, __ATOMIC_RELEASE);
	if (sigaction(SIGTRAP, &ours, NULL) != 0)
		return lk__fail(-errno, "sigaction(SIGTRAP) failed: %s", strerror(errno));
	__atomic_store_n(&installed, true, __ATOMIC_RELEASE);
	return 0;
}

static bool dispatcher_in_place(struct sigaction *cur)
{
	return sigaction(SIGTRAP, NULL, cur) == 0 && (cur->sa_flags & SA_SIGINFO) &&
	       cur->sa_sigaction == dispatcher;
}

int lk__sigtrap_add(lk__trap_handler fn)
{
	int err = 0;

	pthread_mutex_lock(&sigtrap_mutex);
	for (unsigned int i = 0; i < nr_trap_handlers; i++)
		if (trap_handlers[i] == fn)
			goto out;
	if (nr_trap_handlers == MAX_TRAP_HANDLERS) {
		err = lk__fail(-ENOSPC, "internal: too many SIGTRAP handlers");
		goto out;
	}
	trap_handlers[nr_trap_handlers] = fn;
	__atomic_store_n(&nr_trap_handlers, nr_trap_handlers + 1, __ATOMIC_RELEASE);
	err = install_locked();
out:
	pthread_mutex_unlock(&sigtrap_mutex);
	return err;
}

int lk__sigtrap_ensure(void)
{
	struct sigaction cur;
	int err = 0;

	/* The usual case, without the mutex: lowkey's dispatcher is still the handler. */
	if (!__atomic_load_n(&installed, __ATOMIC_ACQUIRE))
		return 0;
	if (dispatcher_in_place(&cur))
		return 0;
	pthread_mutex_lock(&sigtrap_mutex);
	if (installed)
		err = install_locked();
	pthread_mutex_unlock(&sigtrap_mutex);
	return err;
}

static const int sync_signals[] = { SIGTRAP, SIGSEGV, SIGBUS, SIGILL, SIGFPE };

void lk__sigtrap_hold_async(sigset_t *saved)
{
	sigset_t set;

	pthread_sigmask(SIG_SETMASK, NULL, saved);
	sigfillset(&set);
	for (size_t i = 0; i < sizeof(sync_signals) / sizeof(sync_signals[0]); i++)
		if (!sigismember(saved, sync_signals[i]))
			sigdelset(&set, sync_signals[i]);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
}
