// SPDX-License-Identifier: MIT
/*
 * `lowkey list --pid` and `lowkey watch -p` read the files a process maps, and whoever owns those
 * files may cut and rewrite them while lowkey reads. Were a file mapped by the reader, a page past
 * the file's new end would kill it with SIGBUS: lowkey must read them instead, and report a file
 * that changed under it as an error. A peer (churn.h) cuts one ELF file it maps before its section
 * headers and writes the rest back, over and over, while lowkey reads the process and the file many
 * times.
 */
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "churn.h"
#include "cli/run.h"

#ifndef RUNS
/*
 * A reader that mapped the file died in one run in 15 to 50: 150 runs miss it once in 20 at
 * worst, and CI's ASan build makes 100 more (CMakeLists.txt).
 */
#define RUNS 150
#endif

static char scratch[] = "/tmp/lkt-changing-XXXXXX";
static char victim[256];
static struct lkt_run r;
static pid_t peer = -1;
volatile unsigned long lkt_churned; /* the peer's rounds: what `lowkey watch` looks up */
static bool as_peer;		    /* run lowkey as the peer's user */

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(scratch) || chmod(scratch, 0755) != 0)
		return -1;
	snprintf(victim, sizeof(victim), "%s/victim.so", scratch);
	if (lkt_sh(&r, "cp '%s' '%s'", LIBLOWKEY, victim) != 0)
		return -1;
	if (lkt_churn_own(victim) != 0)
		return -1;
	peer = lkt_churn_start(victim, &lkt_churned);
	return peer > 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	lkt_churn_stop(peer);
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

/* Run lowkey with args (NULL-terminated; as the peer's user if as_peer), its output discarded, its
 * errors in scratch/errors; its wait status. */
static int run_lowkey(const char *first, ...)
{
	const char *argv[12] = { LOWKEY, first };
	int n = 2, status = 0;
	va_list ap;
	pid_t pid;

	va_start(ap, first);
	while (n < 11 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		char errors[300];
		int null = open("/dev/null", O_WRONLY), err;

		snprintf(errors, sizeof(errors), "%s/errors", scratch);
		err = open(errors, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(null, 1);
		dup2(err, 2);
		if (as_peer && (setgroups(0, NULL) != 0 ||
				setresgid(LKT_NOBODY, LKT_NOBODY, LKT_NOBODY) != 0 ||
				setresuid(LKT_NOBODY, LKT_NOBODY, LKT_NOBODY) != 0))
			_exit(126);
		execv(LOWKEY, (char **)argv);
		_exit(127);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/* Whether text shows a sanitizer's report (whose exit status, 1, is also lowkey's for a failure). */
static bool sanitizer_report(const char *text)
{
	return strstr(text, "Sanitizer") || strstr(text, "runtime error:");
}

static void expect_clean_exit(int status, const char *what)
{
	char errors[300], text[4096] = "";
	FILE *f;

	if (WIFSIGNALED(status))
		print_error("`lowkey %s` died of signal %d (%s)\n", what, WTERMSIG(status),
			    strsignal(WTERMSIG(status)));
	else if (WEXITSTATUS(status) > 1 && lkt_sh(&r, "cat '%s/errors'", scratch) == 0)
		print_error("`lowkey %s` exited with %d:\n%s\n", what, WEXITSTATUS(status), r.out);
	assert_false(WIFSIGNALED(status));
	assert_true(WIFEXITED(status));
	assert_in_range(WEXITSTATUS(status), 0, 1);
	snprintf(errors, sizeof(errors), "%s/errors", scratch);
	f = fopen(errors, "r");
	if (f) {
		text[fread(text, 1, sizeof(text) - 1, f)] = 0;
		fclose(f);
	}
	if (sanitizer_report(text))
		print_error("`lowkey %s`:\n%s\n", what, text);
	assert_false(sanitizer_report(text));
}

static void a_file_cut_while_its_process_is_listed(void **state)
{
	char pid[16];

	(void)state;
	assert_int_equal(kill(peer, 0), 0);
	snprintf(pid, sizeof(pid), "%d", (int)peer);
	for (int i = 0; i < RUNS; i++)
		expect_clean_exit(run_lowkey("list", "--pid", pid, NULL), "list --pid");
	assert_int_equal(kill(peer, 0), 0); /* still churning: the runs above raced it */
}

/* Read by name, the file's errors are shown: each run lists it or says why not, in words. */
static void a_file_cut_while_it_is_listed(void **state)
{
	(void)state;
	for (int i = 0; i < RUNS; i++) {
		lkt_sh(&r, "'%s' list '%s'", LOWKEY, victim);
		if (r.status >= 128)
			print_error("`lowkey list %s` died of signal %d:\n%s\n", victim,
				    r.status - 128, r.out);
		assert_in_range(r.status, 0, 1);
		if (r.status == 1 && !strstr(r.out, "lowkey list:"))
			print_error("a failure without a message:\n%s\n", r.out);
		assert_true(r.status == 0 || strstr(r.out, "lowkey list:"));
		if (sanitizer_report(r.out))
			print_error("`lowkey list %s`:\n%s\n", victim, r.out);
		assert_false(sanitizer_report(r.out));
	}
	assert_int_equal(kill(peer, 0), 0);
}

#ifdef HAVE_WATCH
/* lowkey watch reads every object of the process (libdwfl) to find the symbol. */
static void a_file_cut_while_its_process_is_watched(void **state)
{
	char pid[16];

	(void)state;
	snprintf(pid, sizeof(pid), "%d", (int)peer);
	for (int i = 0; i < RUNS / 2; i++)
		expect_clean_exit(run_lowkey("watch", "-p", pid, "--symbol", "lkt_churned", "-d",
					     "0.01", NULL),
				  "watch -p");
	assert_int_equal(kill(peer, 0), 0);
}

/*
 * The peer's own user watching it: not root, lowkey cannot open the links of /proc/PID/map_files
 * and reads the objects by name; the symbol must still be found (exit 2 if not).
 */
static void a_file_cut_while_its_own_user_watches(void **state)
{
	char pid[16];

	(void)state;
	if (geteuid() != 0)
		skip(); /* the peer is this user's own child: the case above */
	if (lkt_sh(&r, "setpriv --reuid=%d --regid=%d --clear-groups test -x '%s'", LKT_NOBODY,
		   LKT_NOBODY, LOWKEY) != 0)
		skip(); /* the build tree is not readable by nobody */
	snprintf(pid, sizeof(pid), "%d", (int)peer);
	as_peer = true;
	for (int i = 0; i < RUNS / 10; i++)
		expect_clean_exit(run_lowkey("watch", "-p", pid, "--symbol", "lkt_churned", "-d",
					     "0.01", NULL),
				  "watch -p (as the process's user)");
	as_peer = false;
	assert_int_equal(kill(peer, 0), 0);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_file_cut_while_its_process_is_listed),
		cmocka_unit_test(a_file_cut_while_it_is_listed),
#ifdef HAVE_WATCH
		cmocka_unit_test(a_file_cut_while_its_process_is_watched),
		cmocka_unit_test(a_file_cut_while_its_own_user_watches),
#endif
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
