// SPDX-License-Identifier: MIT
/*
 * Keys and the application's own SIGTRAP handler: flips while threads run the sites never send the
 * application a trap, and the application's traps (raise, its own int3) always reach it -- whether
 * it installed its handler before its first flip or after.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "breakpoint.h"

static LK_DEFINE_KEY_FALSE(trap_key);

static volatile int app_traps, app2_traps;
static int stop;

static void app_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	app_traps++;
	if (si->si_code == LKT_BREAKPOINT_CODE)
		lkt_breakpoint_resume(ctx);
}

static void app2_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	app2_traps++;
	if (si->si_code == LKT_BREAKPOINT_CODE)
		lkt_breakpoint_resume(ctx);
}

static __attribute__((noinline)) int trap_site(void)
{
	return lk_branch_unlikely(&trap_key) ? 1 : 0;
}

static void *run_sites(void *arg)
{
	unsigned long *runs = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		(void)trap_site();
		__atomic_fetch_add(runs, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Flip trap_key many times while two threads run its site. */
static void flip_under_fire(int flips)
{
	unsigned long runs[2] = { 0, 0 };
	pthread_t t[2];

	__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, run_sites, &runs[i]), 0);
	/* flip only once both threads are in their loops */
	while (!__atomic_load_n(&runs[0], __ATOMIC_RELAXED) ||
	       !__atomic_load_n(&runs[1], __ATOMIC_RELAXED))
		sched_yield();
	for (int i = 0; i < flips; i++) {
		assert_int_equal(lk_key_enable(&trap_key), 0);
		assert_int_equal(lk_key_disable(&trap_key), 0);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}

static void handler_installed_before(void **state)
{
	struct sigaction sa;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);

	flip_under_fire(2000);
	assert_int_equal(app_traps, 0); /* lowkey's own traps stayed with lowkey */

	raise(SIGTRAP);
	assert_int_equal(app_traps, 1);
	LKT_BREAKPOINT(); /* the application's breakpoint */
	assert_int_equal(app_traps, 2);
}

static void handler_installed_after(void **state)
{
	struct sigaction sa;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app2_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL); /* replaces lowkey's dispatcher */

	flip_under_fire(2000); /* lowkey puts itself back in front before rewriting */
	assert_int_equal(app2_traps, 0);
	raise(SIGTRAP);
	assert_int_equal(app2_traps, 1);
	LKT_BREAKPOINT();
	assert_int_equal(app2_traps, 2);
	assert_int_equal(app_traps, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(handler_installed_before),
		cmocka_unit_test(handler_installed_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
