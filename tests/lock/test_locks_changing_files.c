// SPDX-License-Identifier: MIT
/*
 * `lowkey locks` names call sites from the files of the profiled program's objects, and one of
 * them may be another user's, who may cut it while lowkey reads: were it mapped, lowkey would die
 * of SIGBUS. The program loads a library through a symbolic link and then points the link at a
 * copy that a peer (churn.h) cuts and rewrites over and over; lowkey locks runs it many times.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "churn.h"
#include "cli/run.h"

#define RUNS 100 /* a reader that mapped the file died in about one run in four */

static char scratch[] = "/tmp/lkt-locks-changing-XXXXXX";
static char stable[256], victim[256], link_path[256], errors[256];
static volatile unsigned long rounds;
static struct lkt_run r;
static pid_t peer = -1;

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(scratch) || chmod(scratch, 0755) != 0)
		return -1;
	snprintf(stable, sizeof(stable), "%s/stable.so", scratch);
	snprintf(victim, sizeof(victim), "%s/victim.so", scratch);
	snprintf(link_path, sizeof(link_path), "%s/link.so", scratch);
	snprintf(errors, sizeof(errors), "%s/errors", scratch);
	if (lkt_sh(&r, "cp '%s' '%s' && cp '%s' '%s'", CTOR_LIB, stable, CTOR_LIB, victim) != 0 ||
	    lkt_churn_own(victim) != 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	lkt_churn_stop(peer);
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

/* `lowkey locks -- DLOPEN_SWAP LINK VICTIM`, its report discarded, its errors in scratch; its
 * wait status. */
static int run_locks(void)
{
	int status = 0;
	pid_t pid;

	unlink(link_path);
	assert_int_equal(symlink(stable, link_path), 0);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY),
		    err = open(errors, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(null, 1);
		dup2(err, 2);
		execl(LOWKEY, LOWKEY, "locks", "--", DLOPEN_SWAP, link_path, victim, (char *)NULL);
		_exit(127);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void a_library_cut_while_its_sites_are_named(void **state)
{
	(void)state;
	unlink(link_path);
	assert_int_equal(symlink(stable, link_path), 0);
	if (lkt_sh(&r, "'%s' '%s' '%s'", DLOPEN_SWAP, link_path, stable) != 0)
		skip(); /* no library loads from here (a noexec /tmp?): nothing for lowkey to name */

	/* The premise, before the peer starts: lowkey reads the library through the link, in the
	 * other user's file. Under the churn it finds that file whole only by chance. */
	assert_int_equal(run_locks(), 0);
	assert_int_equal(lkt_sh(&r, "cat '%s'", errors), 0);
	assert_non_null(strstr(r.out, "taken_when_loaded"));

	peer = lkt_churn_start(victim, &rounds);
	assert_true(peer > 0);
	for (int i = 0; i < RUNS; i++) {
		int status = run_locks();

		if (WIFSIGNALED(status))
			print_error("`lowkey locks` died of signal %d (%s)\n", WTERMSIG(status),
				    strsignal(WTERMSIG(status)));
		else if (WEXITSTATUS(status) != 0 && lkt_sh(&r, "cat '%s'", errors) == 0)
			print_error("`lowkey locks` exited with %d:\n%s\n", WEXITSTATUS(status),
				    r.out);
		assert_false(WIFSIGNALED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		assert_int_equal(lkt_sh(&r, "cat '%s'", errors), 0);
		if (strstr(r.out, "Sanitizer") || strstr(r.out, "runtime error:"))
			print_error("`lowkey locks`:\n%s\n", r.out);
		assert_null(strstr(r.out, "Sanitizer"));
		assert_null(strstr(r.out, "runtime error:"));
	}
	assert_int_equal(kill(peer, 0), 0); /* still churning: the runs above raced it */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_library_cut_while_its_sites_are_named),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
