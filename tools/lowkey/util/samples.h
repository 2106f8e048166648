/* SPDX-License-Identifier: MIT */
/*
 * Samples of a duration (ns) and their percentiles, for `lowkey report` and its HTML page, which
 * must print the same figures.
 */
#ifndef LOWKEY_CLI_SAMPLES_H
#define LOWKEY_CLI_SAMPLES_H

#include <stddef.h>

struct samples {
	double *v;
	size_t n, cap;
};

/* Append v; 0 or -ENOMEM. */
int samples_push(struct samples *s, double v);

/* Sort ascending: samples_pct() needs it. */
void samples_sort(struct samples *s);

/* The p-th percentile (0 to 100) of sorted samples, interpolated between neighbours; NAN if none. */
double samples_pct(const struct samples *s, double p);

#endif
