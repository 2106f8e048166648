// SPDX-License-Identifier: MIT
/*
 * Flips while the other threads change their signal masks under lowkey's feet: no flip may kill a
 * thread whatever the program does with its masks. Running sites meanwhile:
 *  - togglers, which block every signal around a critical section holding a site (as servers do
 *    with pthread_sigmask(SIG_BLOCK, &all, ...)) and unblock them after, again and again: a flip
 *    that looked at the masks before one of them blocked must not trap it;
 *  - handlers: threads that run the sites inside a SIGUSR1 handler whose sa_mask holds every
 *    signal, entered again and again;
 *  - in a second process, blockers as well, which block every signal for good.
 * The main thread flips a FALSE and a TRUE key in one batch, the build's count of times (flips.h) in
 * the first process and a fifth of it in the second. The process must survive and every run of a
 * site must go one way or the other, the key's way once the flip has returned (generation below,
 * as in test_key_stress).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "child.h"

#include <lowkey/lowkey.h>

#include "flips.h"
#include "settled.h"
#include "sites.h"

static LK_DEFINE_KEY_FALSE(mask_off);
static LK_DEFINE_KEY_TRUE(mask_on);

/*
 * Odd while a flip is under way, even once it has returned; an even generation g means mask_off is
 * on (and mask_on off) iff g / 2 is odd.
 */
static unsigned long generation;
static int stop;
static unsigned long runs, wrong, stale, handled;
static bool emulated; /* under qemu-user: a run of the previous direction is stale (settled.h) */

/* 0 or 1: whether mask_off is on, by its site; mask_on's site says the same, inverted. */
static __attribute__((noinline)) int off_site(void)
{
	return lk_branch_unlikely(&mask_off) ? 1 : 0;
}

static __attribute__((noinline)) int on_site(void)
{
	return lk_branch_likely(&mask_on) ? 0 : 1;
}

static void observe(int (*site)(void))
{
	unsigned long before = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
	int got = site();
	unsigned long after = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
	enum lkt_run verdict = lkt_judge_run(before, got, after, emulated);

	if (verdict == LKT_RUN_WRONG)
		__atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
	if (verdict == LKT_RUN_STALE)
		__atomic_fetch_add(&stale, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&runs, 1, __ATOMIC_RELAXED);
}

static bool stopping(void)
{
	return __atomic_load_n(&stop, __ATOMIC_RELAXED);
}

static void mask_all(int how)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(how, &all, NULL);
}

static void *toggler(void *arg)
{
	(void)arg;
	while (!stopping()) {
		mask_all(SIG_BLOCK);
		observe(off_site);
		observe(on_site);
		mask_all(SIG_UNBLOCK);
		observe(off_site);
	}
	return NULL;
}

static void *blocker(void *arg)
{
	(void)arg;
	while (!stopping())
		observe(on_site);
	return NULL;
}

static void usr1_handler(int sig)
{
	(void)sig;
	for (int i = 0; i < 64; i++) {
		observe(off_site);
		observe(on_site);
	}
	__atomic_fetch_add(&handled, 1, __ATOMIC_RELAXED);
}

static void *in_handler(void *arg)
{
	(void)arg;
	while (!stopping())
		pthread_kill(pthread_self(), SIGUSR1);
	return NULL;
}

/* Both keys in one batch (lk_key_enable and friends are batches of one). */
static int flip(unsigned long i)
{
	bool on = !(i & 1); /* mask_off's direction after this flip */
	struct lk_key_change batch[] = {
		{ LK_KEY(&mask_off), on ? LK_KEY_ENABLE : LK_KEY_DISABLE },
		{ LK_KEY(&mask_on), on ? LK_KEY_DISABLE : LK_KEY_ENABLE },
	};
	int err;

	__atomic_fetch_add(&generation, 1, __ATOMIC_RELEASE);
	err = lk_key_apply(batch, 2);
	__atomic_fetch_add(&generation, 1, __ATOMIC_RELEASE);
	return err;
}

#define THREADS 4

/* Exits 0, or the step that failed; a thread killed by a trap kills the child with SIGTRAP. */
static int child(void *(*const fn[THREADS])(void *), unsigned long flips)
{
	struct sigaction sa;
	pthread_t t[THREADS];
	unsigned long i;

	emulated = lkt_under_emulator();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = usr1_handler;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return 1;
	for (int k = 0; k < THREADS; k++) {
		if (fn[k] == blocker)
			mask_all(SIG_BLOCK); /* inherited by the blocker */
		if (pthread_create(&t[k], NULL, fn[k], NULL) != 0)
			return 2;
		mask_all(SIG_UNBLOCK);
	}
	/* Every kind of thread under way first: a flip in a portable build takes no time at all. */
	while (__atomic_load_n(&runs, __ATOMIC_RELAXED) < 1000 ||
	       !__atomic_load_n(&handled, __ATOMIC_RELAXED))
		sched_yield();
	for (i = 0; i < flips; i++)
		if (flip(i) != 0)
			return 3;
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int k = 0; k < THREADS; k++)
		pthread_join(t[k], NULL);
	lkt_print_runs(runs, stale, wrong);
	if (wrong != 0 || handled == 0)
		return 4;
	if (off_site() != (int)(flips & 1) || on_site() != (int)(flips & 1))
		return 5;
	if (lkt_check_sites(&mask_off) < 0 || lkt_check_sites(&mask_on) < 0)
		return 6;
	return 0;
}

static void threads_that_block_now_and_then(void **state)
{
	void *(*const fn[THREADS])(void *) = { toggler, toggler, in_handler, in_handler };

	(void)state;
	lkt_in_child(child(fn, lkt_flips()));
}

static void threads_that_block_for_good_beside_them(void **state)
{
	void *(*const fn[THREADS])(void *) = { blocker, toggler, in_handler, blocker };

	(void)state;
	lkt_in_child(child(fn, lkt_flips() / 5));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(threads_that_block_now_and_then),
		cmocka_unit_test(threads_that_block_for_good_beside_them),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
