// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>

#include "internal/stats.h"
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

void samples_sort(struct samples *s)
{
	lk__sort_doubles(s->v, s->n);
}

double samples_pct(const struct samples *s, double p)
{
	return lk__percentile_sorted(s->v, s->n, p);
}
