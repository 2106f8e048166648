// SPDX-License-Identifier: MIT
/* The lowkey command line: exit status 0/1/2, help, errors with hints, --json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run.h"

static struct lkt_run r;

static void version_and_help(void **state)
{
	(void)state;
	assert_int_equal(lkt_sh(&r, "%s --version", LOWKEY), 0);
	assert_non_null(strstr(r.out, "lowkey 0."));
	assert_int_equal(lkt_sh(&r, "%s version", LOWKEY), 0);
	assert_int_equal(lkt_sh(&r, "%s --help", LOWKEY), 0);
	assert_non_null(strstr(r.out, "bench"));
	assert_int_equal(lkt_sh(&r, "%s help", LOWKEY), 0);
	assert_non_null(strstr(r.out, "bench"));
	assert_int_equal(lkt_sh(&r, "%s help bench", LOWKEY), 0);
	assert_non_null(strstr(r.out, "usage: lowkey bench"));
	assert_int_equal(lkt_sh(&r, "%s bench --help", LOWKEY), 0);
	assert_non_null(strstr(r.out, "usage: lowkey bench"));
	assert_int_equal(lkt_sh(&r, "%s bench branch --help", LOWKEY), 0);
	assert_non_null(strstr(r.out, "--json"));
	assert_int_equal(lkt_sh(&r, "%s bench list", LOWKEY), 0);
	assert_non_null(strstr(r.out, "branch"));
}

static void usage_errors_exit_2(void **state)
{
	(void)state;
	assert_int_equal(lkt_sh(&r, "%s", LOWKEY), 2);
	assert_non_null(strstr(r.out, "usage:"));
	assert_int_equal(lkt_sh(&r, "%s benhc", LOWKEY), 2);
	assert_non_null(strstr(r.out, "not a lowkey command"));
	assert_non_null(strstr(r.out, "did you mean 'lowkey bench'"));
	assert_int_equal(lkt_sh(&r, "%s help nosuch", LOWKEY), 2);
	assert_int_equal(lkt_sh(&r, "%s bench nosuch", LOWKEY), 2);
	assert_non_null(strstr(r.out, "hint:"));
	assert_int_equal(lkt_sh(&r, "%s bench branch --runs 0", LOWKEY), 2);
	assert_int_equal(lkt_sh(&r, "%s bench branch --bogus", LOWKEY), 2);
}

static void bench_branch_json(void **state)
{
	(void)state;
	assert_int_equal(lkt_sh(&r, "%s bench branch --runs 1 --flips 3 --json", LOWKEY), 0);
	assert_non_null(strstr(r.out, "\"bench\": \"branch\""));
	assert_non_null(strstr(r.out, "\"static key off\""));
	assert_non_null(strstr(r.out, "\"flip_us\""));
	if (lkt_sh(&r, "command -v python3 >/dev/null") != 0)
		skip(); /* no JSON parser to check the syntax with */
	assert_int_equal(
		lkt_sh(&r,
		       "%s bench branch --runs 1 --flips 3 --json | python3 -c "
		       "'import json,sys; d=json.load(sys.stdin); assert len(d[\"loop\"]) == 9'",
		       LOWKEY),
		0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(version_and_help),
		cmocka_unit_test(usage_errors_exit_2),
		cmocka_unit_test(bench_branch_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
