// SPDX-License-Identifier: MIT
/* lk__percentile_sorted and lk__sort_doubles: the one percentile of the CLI's reports and the benches. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Enough values for the radix sort: of both signs, every magnitude (subnormal to infinite),
 * repeated, in the order qsort puts them.
 */
static void many_values_sort_as_qsort_sorts_them(void **state)
{
	enum { N = 5000 };
	static double v[N], want[N];
	uint64_t x = 88172645463325252u;

	(void)state;
	for (size_t i = 0; i < N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
		switch (x % 6) {
		case 0:
			v[i] = (double)(x >> 40) - 8388608.0; /* small integers, repeated */
			break;
		case 1:
			v[i] = ldexp((double)(x >> 11), (int)(x % 2100) - 1100); /* any exponent */
			break;
		case 2:
			v[i] = -ldexp((double)(x >> 11), (int)(x % 2100) - 1100);
			break;
		case 3:
			v[i] = x % 2 ? INFINITY : -INFINITY;
			break;
		case 4:
			v[i] = 5e-324 * (double)(x % 4); /* subnormals and +0 */
			break;
		default:
			v[i] = (double)(x >> 12) * 1e-9; /* times in seconds */
			break;
		}
		want[i] = v[i];
	}
	qsort(want, N, sizeof(*want), by_value);
	lk__sort_doubles(v, N);
	assert_memory_equal(v, want, sizeof(v));
}

/* Whole numbers of ns, as the report's spans: the bytes of their bits that differ are 3 of 8. */
static void durations_sort_as_qsort_sorts_them(void **state)
{
	enum { N = 1000 };
	double v[N], want[N];
	uint64_t x = 2463534242u;

	(void)state;
	for (size_t i = 0; i < N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		v[i] = want[i] = (double)(256 + x % 65280);
	}
	qsort(want, N, sizeof(*want), by_value);
	lk__sort_doubles(v, N);
	assert_memory_equal(v, want, sizeof(v));
}

/* Negative zeros before positive ones, the rest in order. */
static void negative_zero_before_zero(void **state)
{
	double v[512];

	(void)state;
	for (size_t i = 0; i < 512; i++)
		v[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? -0.0 : (double)(511 - i);
	lk__sort_doubles(v, 512);
	for (size_t i = 0; i < 171; i++)
		assert_true(v[i] == 0 && signbit(v[i]));
	for (size_t i = 171; i < 342; i++)
		assert_true(v[i] == 0 && !signbit(v[i]));
	for (size_t i = 342; i < 511; i++)
		assert_true(v[i] > 0 && v[i] < v[i + 1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(none_is_nan),
		cmocka_unit_test(one_value_is_every_percentile),
		cmocka_unit_test(interpolates_between_neighbours),
		cmocka_unit_test(many_values_sort_as_qsort_sorts_them),
		cmocka_unit_test(durations_sort_as_qsort_sorts_them),
		cmocka_unit_test(negative_zero_before_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
