// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdlib.h>

#include "internal/stats.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void lk__sort_doubles(double *v, size_t n)
{
	if (n) /* qsort's base may not be NULL, even for none */
		qsort(v, n, sizeof(*v), cmp_double);
}

double lk__percentile_sorted(const double *v, size_t n, double p)
{
	double rank;
	size_t lo;

	if (n == 0)
		return NAN;
	rank = p / 100.0 * (double)(n - 1);
	lo = (size_t)rank;
	if (lo + 1 >= n)
		return v[n - 1];
	return v[lo] + (rank - (double)lo) * (v[lo + 1] - v[lo]);
}
