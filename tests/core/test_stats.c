// SPDX-License-Identifier: MIT
/* lk__percentile_sorted and lk__sort_doubles: the one percentile of the CLI's reports and the benches. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "internal/stats.h"

static void none_is_nan(void **state)
{
	(void)state;
	lk__sort_doubles(NULL, 0); /* no values, no array: nothing to sort */
	assert_true(isnan(lk__percentile_sorted(NULL, 0, 50)));
}

static void one_value_is_every_percentile(void **state)
{
	const double v[] = { 7 };

	(void)state;
	assert_true(lk__percentile_sorted(v, 1, 0) == 7);
	assert_true(lk__percentile_sorted(v, 1, 50) == 7);
	assert_true(lk__percentile_sorted(v, 1, 100) == 7);
}

static void interpolates_between_neighbours(void **state)
{
	double v[] = { 40, 10, 30, 20, 50 };

	(void)state;
	lk__sort_doubles(v, 5);
	assert_true(v[0] == 10 && v[1] == 20 && v[2] == 30 && v[3] == 40 && v[4] == 50);
	assert_true(lk__percentile_sorted(v, 5, 0) == 10);
	assert_true(lk__percentile_sorted(v, 5, 50) == 30);
	assert_true(lk__percentile_sorted(v, 5, 100) == 50);
	/* rank 0.1 * 4 = 0.4: four tenths of the way from 10 to 20 */
	assert_float_equal(lk__percentile_sorted(v, 5, 10), 14, 1e-9);
	/* rank 0.99 * 4 = 3.96: from 40 towards 50 */
	assert_float_equal(lk__percentile_sorted(v, 5, 99), 49.6, 1e-9);
	/* two values: the median halfway */
	assert_float_equal(lk__percentile_sorted(v, 2, 50), 15, 1e-9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(none_is_nan),
		cmocka_unit_test(one_value_is_every_percentile),
		cmocka_unit_test(interpolates_between_neighbours),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
