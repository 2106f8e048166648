// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "samples.h"

int samples_push(struct samples *s, double v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		double *grown = realloc(s->v, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		s->v = grown;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void samples_sort(struct samples *s)
{
	if (s->n)	/* qsort's base may not be NULL, even for none */
		qsort(s->v, s->n, sizeof(double), cmp_double);
}

double samples_pct(const struct samples *s, double p)
{
	double rank;
	size_t lo;

	if (!s->n)
		return NAN;
	rank = p / 100.0 * (double)(s->n - 1);
	lo = (size_t)rank;
	if (lo + 1 >= s->n)
		return s->v[s->n - 1];
	return s->v[lo] + (rank - (double)lo) * (s->v[lo + 1] - s->v[lo]);
}
