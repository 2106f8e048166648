// SPDX-License-Identifier: MIT
/*
 * An application that (re)installs its own SIGTRAP handler while keys are flipped: its handler
 * must never receive a trap meant for lowkey (it would return into the middle of a site's
 * instruction), and nothing may crash. One thread installs the application's handler again and
 * again, two run a site, main flips the key.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "child.h"

#include <lowkey/lowkey.h>

#include "sites.h"

static LK_DEFINE_KEY_FALSE(act_key);

static int stop;
static unsigned long runs, installs, wrong;
static volatile sig_atomic_t app_traps;

static __attribute__((noinline)) int act_site(void)
{
	return lk_branch_unlikely(&act_key) ? 1 : 0;
}

static void app_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	(void)ctx;
	app_traps++;
}

static void install_app_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);
	__atomic_fetch_add(&installs, 1, __ATOMIC_RELAXED);
}

static void *reinstall(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		install_app_handler();
	return NULL;
}

static void *run_site(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if ((unsigned int)act_site() > 1)
			__atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&runs, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int child(void)
{
	pthread_t t[3];

	/* A crash shows as the signal it is, not through cmocka's handlers. */
	signal(SIGSEGV, SIG_DFL);
	signal(SIGILL, SIG_DFL);
	signal(SIGBUS, SIG_DFL);

	/* lowkey's dispatcher goes in front first; the application then takes SIGTRAP back, again
	 * and again, while the flips run. */
	if (lk_key_enable(&act_key) != 0 || lk_key_disable(&act_key) != 0)
		return 1;
	if (pthread_create(&t[0], NULL, reinstall, NULL) != 0)
		return 2;
	for (int i = 1; i < 3; i++)
		if (pthread_create(&t[i], NULL, run_site, NULL) != 0)
			return 2;
	while (__atomic_load_n(&runs, __ATOMIC_RELAXED) < 1000 ||
	       !__atomic_load_n(&installs, __ATOMIC_RELAXED))
		sched_yield();
	for (int i = 0; i < 3000; i++) {
		if (lk_key_enable(&act_key) != 0)
			return 3;
		if (lk_key_disable(&act_key) != 0)
			return 4;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	if (wrong != 0 || act_site() != 0 || lkt_check_sites(&act_key) != LKT_PATCHING)
		return 5;
	if (app_traps != 0)
		return 6; /* a trap of lowkey's reached the application */
	raise(SIGTRAP);	  /* the application's own traps still reach it */
	if (app_traps != 1)
		return 7;
	return 0;
}

static void handler_reinstalled_during_flips(void **state)
{
	(void)state;
	lkt_in_child(child());
}

static LK_DEFINE_KEY_FALSE(first_key);
static int installed_midway, int3_seen;
static unsigned long changes_seen;

static __attribute__((noinline)) int first_site(void)
{
	return lk_branch_unlikely(&first_key) ? 1 : 0;
}

/*
 * Installs the application's first SIGTRAP handler the moment a flip has changed the site, then
 * watches the site for as long as the flips go on: with another thread in the process, no flip
 * may ever put an int3 there (one that a thread blocking SIGTRAP ran into would kill it).
 */
static void *install_midway(void *arg)
{
	const volatile uint8_t *site = arg;
	uint8_t last = *site;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		uint8_t now = *site;

		if (LKT_TRAP_PROTOCOL && now == 0xcc)
			__atomic_store_n(&int3_seen, 1, __ATOMIC_RELAXED);
		if (now == last)
			continue;
		last = now;
		__atomic_fetch_add(&changes_seen, 1, __ATOMIC_RELAXED);
		if (!__atomic_load_n(&installed_midway, __ATOMIC_RELAXED)) {
			install_app_handler();
			__atomic_store_n(&installed_midway, 1, __ATOMIC_RELEASE);
		}
	}
	return NULL;
}

static int first_handler_child(void)
{
	const volatile uint8_t *site = lkt_first_site(&first_key);
	bool on = false;
	pthread_t t;
	int after = 0;

	if (!site || lk_key_enable(&first_key) != 0 || lk_key_disable(&first_key) != 0)
		return 1;
	if (pthread_create(&t, NULL, install_midway, (void *)site) != 0)
		return 2;
	/*
	 * Until 1000 flips have come since the watcher installed the handler, and it has seen the
	 * site change since (it may not run for a while: a loaded machine, an emulator).
	 */
	for (int flips = 0; flips < 100000 &&
			    (after < 1000 || __atomic_load_n(&changes_seen, __ATOMIC_RELAXED) < 2);
	     flips++) {
		on = !on;
		if ((on ? lk_key_enable(&first_key) : lk_key_disable(&first_key)) != 0)
			return 3;
		if (__atomic_load_n(&installed_midway, __ATOMIC_ACQUIRE))
			after++;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	if (!installed_midway || changes_seen < 2)
		return 4;
	if (int3_seen)
		return 5;
	if (first_site() != on || lkt_check_sites(&first_key) != 1)
		return 6;
	raise(SIGTRAP);
	return app_traps == 1 ? 0 : 7;
}

static void first_handler_installed_midway(void **state)
{
	(void)state;
	if (!LKT_PATCHING)
		skip();
	lkt_in_child(first_handler_child());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(handler_reinstalled_during_flips),
		cmocka_unit_test(first_handler_installed_midway),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
