// SPDX-License-Identifier: MIT
/*
 * `lowkey report` of a JSON or Perfetto file tells its progress as the CTF reader does, through
 * lk__reader_packet_hook (internal/trace_file.h): the file's bytes once as they are read into memory,
 * once more as they are parsed, in steps while the parse goes (not only at its end), so a status
 * line can say how far it is. Counted here, not timed: the steps depend on the bytes only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cli/run.h"
#include "internal/trace_file.h"

#define STEP (256u << 10) /* src/format/trace_file.c's RT_PROGRESS_STEP */

static char scratch[] = "/tmp/lkt-report-progress-XXXXXX";
static struct lkt_run r;
static uint64_t told, calls;

static void count(uint64_t bytes)
{
	told += bytes;
	calls++;
}

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

static void file_told_twice_in_steps(const char *format)
{
	struct lk__trace_file t;
	char path[1024], err[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/trace.%s", scratch, format);
	lkt_sh(&r, "%s trace --format %s -o '%s' -- %s emit 200000", LOWKEY, format, path, TARGET);
	lkt_expect(&r, 0, NULL);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 4 * STEP);

	told = calls = 0;
	lk__reader_packet_hook = count;
	if (lk__trace_file_open(&t, path, err, sizeof(err)) != 0)
		fail_msg("%s: %s", path, err);
	lk__reader_packet_hook = NULL;
	assert_int_equal(told, 2 * (uint64_t)st.st_size);
	/* the read (4 MiB a step) and the parse (one a step, the rest at the end) */
	assert_true(calls >= (uint64_t)st.st_size / STEP);
	lk__trace_file_close(&t);

	/* no hook: nothing told, the same trace */
	told = calls = 0;
	assert_int_equal(lk__trace_file_open(&t, path, err, sizeof(err)), 0);
	assert_int_equal(calls, 0);
	lk__trace_file_close(&t);
}

static void json_file(void **state)
{
	(void)state;
	file_told_twice_in_steps("json");
}

static void perfetto_file(void **state)
{
	(void)state;
	file_told_twice_in_steps("perfetto");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_file),
		cmocka_unit_test(perfetto_file),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
