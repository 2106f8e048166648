// SPDX-License-Identifier: MIT
/*
 * What a traced program chose -- its trace's names, its thread's name in /proc -- reaches a
 * terminal with its control characters escaped: C0 (ESC starts a sequence that retitles or clears
 * the terminal), DEL, and C1, as UTF-8 (U+009B, CSI) and as a byte 0x9b in text that is not UTF-8.
 * `lowkey report` in every output, and the commands that name a process (snapshot, trace, list
 * --pid), print no such byte; the text stays readable, as \xHH.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/run.h"

/* ESC ] 0 ; PWN BEL: retitle; ESC [ 2 J: clear; CSI as one byte of text that is not UTF-8 */
#define HOSTILE_COMM "\x1b]0;PWN\x07\x1b[2J\x9b"

static char scratch[] = "/tmp/lkt-escapes-XXXXXX";
static struct lkt_run r;
static pid_t named; /* the process with the hostile name */

static int setup(void **state)
{
	(void)state;
	return mkdtemp(scratch) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

/* The first byte a terminal would act on in out (C0 but newline, DEL, C1 in either form), or NULL. */
static const char *control_in(const char *out)
{
	const unsigned char *p = (const unsigned char *)out;

	for (; *p; p++) {
		if ((*p < 0x20 && *p != '\n') || *p == 0x7f || (*p >= 0x80 && *p <= 0x9f))
			return (const char *)p; /* a C0, DEL, or a C1 byte not inside a sequence */
		if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return (const char *)p; /* U+0080..U+009F */
		if (*p >= 0xc2 && *p <= 0xf4)	/* a lead byte: its continuation bytes are no C1 */
			while (p[1] >= 0x80 && p[1] <= 0xbf)
				p++;
	}
	return NULL;
}

static void expect_no_control(const char *what)
{
	const char *c = control_in(r.out);

	if (c)
		print_error("%s printed the byte 0x%02x at offset %td:\n%s\n", what,
			    (unsigned char)*c, c - r.out, r.out);
	assert_null(c);
}

static void report_of_hostile_names(void **state)
{
	char path[256];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/trace.json", scratch);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"traceEvents\":[\n"
	      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"p\\u001b]0;PWN\\u0007\"}},\n"
	      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,"
	      "\"args\":{\"name\":\"t\\u001b[2J\\u009b\x7f\"}},\n"
	      "{\"name\":\"ev\\u001b[31m\",\"cat\":\"prov\\u0085\",\"ph\":\"i\",\"ts\":1.000,\"pid\":1,\"tid\":1},\n"
	      "{\"name\":\"span\\u009b2J\",\"cat\":\"prov\",\"ph\":\"B\",\"ts\":2.000,\"pid\":1,\"tid\":1},\n"
	      "{\"name\":\"span\\u009b2J\",\"cat\":\"prov\",\"ph\":\"E\",\"ts\":3.000,\"pid\":1,\"tid\":1},\n"
	      "{\"name\":\"level\\u001b\",\"cat\":\"prov\",\"ph\":\"C\",\"ts\":4.000,\"pid\":1,\"tid\":1,"
	      "\"args\":{\"v\":1}}\n"
	      "],\"otherData\":{\"tracer\":\"lowkey\"}}\n",
	      f);
	assert_int_equal(fclose(f), 0);

	lkt_sh(&r, "%s report '%s'", LOWKEY, path);
	lkt_expect(&r, 0, "ev\\x1b[31m");
	expect_no_control("lowkey report");
	assert_non_null(
		strstr(r.out, "t\\x1b[2J\\xc2\\x9b\\x7f")); /* the thread's name, readable */
	assert_non_null(strstr(r.out, "p\\x1b]0;PWN\\x07"));

	lkt_sh(&r, "%s report --json '%s'", LOWKEY, path);
	lkt_expect(&r, 0, "\\u001b");
	expect_no_control("lowkey report --json");

	lkt_sh(&r, "%s report --html - '%s'", LOWKEY, path);
	lkt_expect(&r, 0, "</html>");
	expect_no_control("lowkey report --html");
}

static int end_named(void **state)
{
	(void)state;
	if (named > 0) {
		kill(named, SIGKILL);
		waitpid(named, NULL, 0);
	}
	named = 0;
	return 0;
}

/* A process whose name (/proc/PID/comm) is hostile, named by the commands that take --pid. */
static void hostile_process_name(void **state)
{
	char comm[32];
	pid_t pid;
	int ready[2];

	(void)state;
	assert_int_equal(pipe(ready), 0);
	pid = named = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_NAME, HOSTILE_COMM);
		close(ready[0]);
		close(ready[1]);
		freopen("/dev/null", "w",
			stdout); /* nothing held open that a caller reads to its end */
		freopen("/dev/null", "w", stderr);
		for (;;)
			pause();
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], comm, 1), 0); /* its name is set */
	close(ready[0]);
	snprintf(comm, sizeof(comm), "/proc/%d/comm", (int)pid);
	lkt_sh(&r, "cat %s", comm);
	assert_non_null(strstr(r.out, "PWN"));

	lkt_sh(&r, "%s snapshot --pid %d", LOWKEY, (int)pid);
	assert_int_not_equal(r.status, 0);
	assert_non_null(strstr(r.out, "\\x1b]0;PWN\\x07\\x1b[2J\\x9b"));
	expect_no_control("lowkey snapshot --pid");

	lkt_sh(&r, "timeout 60 %s trace --pid %d -o '%s/out'", LOWKEY, (int)pid, scratch);
	assert_int_not_equal(r.status, 0);
	assert_non_null(strstr(r.out, "PWN"));
	expect_no_control("lowkey trace --pid");

	lkt_sh(&r, "%s list --pid %d", LOWKEY, (int)pid);
	expect_no_control("lowkey list --pid");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(report_of_hostile_names),
		cmocka_unit_test_teardown(hostile_process_name, end_named),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
