// SPDX-License-Identifier: MIT
/*
 * `lowkey races` end to end on races_fixture.c, with the order of the sampled instructions fixed
 * (--seed) and a stated rate, window and run time: two threads adding to a plain int without a
 * lock are reported, with both accesses named (function, file) and the global they touch; the
 * same under a mutex, and _Atomic counters (relaxed and seq_cst), are not; the ++ in a shared
 * library is reported with --lib naming it, and not sampled without. Skipped where this
 * process cannot have a process-wide execute watchpoint (perf_event_paranoid, seccomp, no
 * breakpoints, a kernel before 5.13, qemu-user), saying why.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <lowkey/error.h>
#include <lowkey/watch.h>

#include "cli/run.h"

/* What each run states: the seed, 500 instructions armed a second, 1 ms windows, 1 s of work. */
#define RACES_OPTS LOWKEY " races --seed 1 --rate 500 --window 1 -j"
#define RACES RACES_OPTS " -- " FIXTURE_BIN
#define SECONDS "1"

static struct lkt_run r;

static void a_function(void)
{
}

static int can_sample(void **state)
{
	struct lk_watch *w;
	int err = lk_watch_add(&w, (const void *)a_function, 1,
			       LK_WATCH_EXEC | LK_WATCH_PROCESS | LK_WATCH_DISABLED, NULL, NULL);

	(void)state;
	if (err) {
		print_message("skipped: no process-wide execute watchpoint here: %s\n",
			      lk_last_error());
		return -1;
	}
	lk_watch_remove(w);
	return 0;
}

static void plain_counter_is_a_race(void **state)
{
	const char *other;

	(void)state;
	lkt_sh(&r, "%s plain %s", RACES, SECONDS);
	lkt_expect(&r, 66, "\"symbol\": \"counter\"");
	lkt_expect(&r, 66, "\"function\": \"bump_plain\"");
	lkt_expect(&r, 66, "races_fixture.c\"");
	/* the other thread's access is named too, not only the held one's */
	other = strstr(r.out, "\"other\": {");
	assert_non_null(other);
	assert_non_null(strstr(other, "\"function\": \"bump_plain\""));
}

static void counter_under_a_mutex_is_not(void **state)
{
	(void)state;
	lkt_sh(&r, "%s mutex %s", RACES, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
}

static void atomic_counters_are_not(void **state)
{
	(void)state;
	lkt_sh(&r, "%s atomic %s", RACES, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
	assert_null(strstr(r.out, "\"atomic\": 0,")); /* their lock-prefixed adds were seen */
}

static void race_in_a_library_with_lib(void **state)
{
	(void)state;
	lkt_sh(&r, "%s --lib %s -- %s lib %s", RACES_OPTS, FIXTURE_LIB, FIXTURE_BIN, SECONDS);
	lkt_expect(&r, 66, "\"function\": \"races_lib_bump\"");
	lkt_expect(&r, 66, "\"symbol\": \"counter\"");
	lkt_expect(&r, 66, "races_lib.c\"");
	lkt_sh(&r, "%s lib %s", RACES, SECONDS);
	lkt_expect(&r, 0, "\"races\": []");
}

static void bad_usage(void **state)
{
	(void)state;
	lkt_sh(&r, "%s races --rate 0 -- true", LOWKEY);
	lkt_expect(&r, 2, "bad number '0'");
	lkt_sh(&r, "%s races", LOWKEY);
	lkt_expect(&r, 2, "no command to run");
	lkt_sh(&r, "%s races -- lowkey-no-such-command", LOWKEY);
	lkt_expect(&r, 127, "command not found");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_usage),
		cmocka_unit_test(plain_counter_is_a_race),
		cmocka_unit_test(counter_under_a_mutex_is_not),
		cmocka_unit_test(atomic_counters_are_not),
		cmocka_unit_test(race_in_a_library_with_lib),
	};

	if (can_sample(NULL))
		return 77;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
