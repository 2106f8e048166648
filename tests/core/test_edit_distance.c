// SPDX-License-Identifier: MIT
/* lk__edit_distance: the one distance behind the library's and the CLI's "did you mean" hints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "internal/edit_distance.h"

static void counts_single_byte_edits(void **state)
{
	(void)state;
	assert_int_equal(lk__edit_distance("cycles", "cycles", true), 0);
	assert_int_equal(lk__edit_distance("cyles", "cycles", true), 1);   /* insertion */
	assert_int_equal(lk__edit_distance("cycless", "cycles", true), 1); /* deletion */
	assert_int_equal(lk__edit_distance("task-clok", "task-clock", true), 1);
	assert_int_equal(lk__edit_distance("stst", "stat", false), 1); /* substitution */
	assert_int_equal(lk__edit_distance("", "abc", false), 3);
	assert_int_equal(lk__edit_distance("abc", "", false), 3);
	assert_int_equal(lk__edit_distance("kitten", "sitting", false), 3);
}

static void case_folds_only_when_asked(void **state)
{
	(void)state;
	assert_int_equal(lk__edit_distance("CYCLES", "cycles", true), 0);
	assert_int_equal(lk__edit_distance("CYCLES", "cycles", false), 6);
	assert_int_equal(lk__edit_distance("Stat", "stat", false), 1);
}

static void long_names_are_out_of_reach(void **state)
{
	char measured[128], too_long[129];

	(void)state;
	memset(measured, 'a', sizeof(measured) - 1); /* 127 bytes: the longest measured */
	measured[sizeof(measured) - 1] = 0;
	memset(too_long, 'a', sizeof(too_long) - 1); /* 128 bytes */
	too_long[sizeof(too_long) - 1] = 0;
	assert_int_equal(lk__edit_distance(measured, measured, false), 0);
	assert_int_equal(lk__edit_distance(measured, "", true), 127);
	assert_int_equal(lk__edit_distance(too_long, "a", false), (size_t)-1);
	assert_int_equal(lk__edit_distance("a", too_long, true), (size_t)-1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(counts_single_byte_edits),
		cmocka_unit_test(case_folds_only_when_asked),
		cmocka_unit_test(long_names_are_out_of_reach),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
