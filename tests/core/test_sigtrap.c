// SPDX-License-Identifier: MIT
/*
 * The shared SIGTRAP dispatcher: offers traps to lowkey's handlers, and passes every trap none of
 * them claims to what the application had, before or after lowkey installed itself.
 */
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "breakpoint.h"
#include "core/sigtrap.h"

#define CLAIM_MAGIC 0x6c6b

static volatile int lowkey_seen, lowkey_claimed, app_seen, app2_seen, app_last_code;

/* Claims traps sent with sigqueue(CLAIM_MAGIC), like a module claiming its own traps. */
static bool claiming_handler(siginfo_t *si, ucontext_t *uc)
{
	(void)uc;
	lowkey_seen++;
	if (si->si_code == SI_QUEUE && si->si_value.sival_int == CLAIM_MAGIC) {
		lowkey_claimed++;
		return true;
	}
	return false;
}

static void app_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	app_seen++;
	app_last_code = si->si_code;
	if (si->si_code == LKT_BREAKPOINT_CODE)
		lkt_breakpoint_resume(ctx);
}

static void app2_handler(int sig)
{
	(void)sig;
	app2_seen++;
}

static void install_app(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);
}

static void reset(void)
{
	lowkey_seen = lowkey_claimed = app_seen = app2_seen = 0;
}

static void chains_to_handler_installed_before(void **state)
{
	union sigval v = { .sival_int = CLAIM_MAGIC };

	(void)state;
	install_app();
	assert_int_equal(lk__sigtrap_add(claiming_handler), 0);
	reset();

	raise(SIGTRAP); /* not ours: the application's handler gets it */
	assert_int_equal(lowkey_seen, 1);
	assert_int_equal(app_seen, 1);

	sigqueue(getpid(), SIGTRAP, v); /* ours: claimed, not passed on */
	assert_int_equal(lowkey_claimed, 1);
	assert_int_equal(app_seen, 1);

	LKT_BREAKPOINT(); /* a breakpoint in the application's own code */
	assert_int_equal(app_seen, 2);
	assert_int_equal(app_last_code, LKT_BREAKPOINT_CODE);
}

static void reclaims_from_handler_installed_after(void **state)
{
	struct sigaction sa;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app2_handler;
	sigaction(SIGTRAP, &sa, NULL); /* the application replaces lowkey's handler */
	reset();

	assert_int_equal(lk__sigtrap_ensure(), 0);
	raise(SIGTRAP);
	assert_int_equal(lowkey_seen, 1); /* lowkey is first again ... */
	assert_int_equal(app2_seen, 1);	  /* ... and chains to the new handler */
	assert_int_equal(app_seen, 0);
}

static void ignored_stays_ignored(void **state)
{
	struct sigaction sa;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGTRAP, &sa, NULL);
	assert_int_equal(lk__sigtrap_ensure(), 0);
	reset();
	raise(SIGTRAP);
	assert_int_equal(lowkey_seen, 1);
	assert_int_equal(app_seen + app2_seen, 0);
}

static void default_still_terminates(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	if (pid == 0) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sigaction(SIGTRAP, &sa, NULL);
		lk__sigtrap_ensure();
		raise(SIGTRAP);
		_exit(0); /* not reached */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGTRAP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chains_to_handler_installed_before),
		cmocka_unit_test(reclaims_from_handler_installed_after),
		cmocka_unit_test(ignored_stays_ignored),
		cmocka_unit_test(default_still_terminates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
