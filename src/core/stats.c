// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal/stats.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A double's bits made a key whose unsigned order is the doubles' order: negatives flipped. */
static uint64_t key_of(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u >> 63 ? ~u : u | (uint64_t)1 << 63;
}

static double double_of(uint64_t key)
{
	uint64_t u = key >> 63 ? key & ~((uint64_t)1 << 63) : ~key;
	double d;

	memcpy(&d, &u, sizeof(d));
	return d;
}

/*
 * Sort by the keys' bytes, the lowest first (a stable pass each), into tmp and back: every
 * byte's counts made in one pass, and a byte every key has the same skipped.
 */
static void radix_sort(uint64_t *keys, uint64_t *tmp, size_t (*count)[256], size_t n)
{
	uint64_t *from = keys, *to = tmp;

	memset(count, 0, 8 * sizeof(*count));
	for (size_t i = 0; i < n; i++)
		for (unsigned int b = 0; b < 8; b++)
			count[b][keys[i] >> (8 * b) & 0xff]++;
	for (unsigned int b = 0; b < 8; b++) {
		size_t at = 0;
		uint64_t *swap;

		if (count[b][keys[0] >> (8 * b) & 0xff] == n)
			continue;
		for (unsigned int d = 0; d < 256; d++) {
			size_t c = count[b][d];

			count[b][d] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++)
			to[count[b][from[i] >> (8 * b) & 0xff]++] = from[i];
		swap = from, from = to, to = swap;
	}
	if (from != keys)
		memcpy(keys, from, n * sizeof(*keys));
}

void lk__sort_doubles(double *v, size_t n)
{
	size_t count[8][256];
	uint64_t *keys = n >= 256 && n <= SIZE_MAX / 16 ? malloc(2 * n * sizeof(*keys)) : NULL;

	if (!keys) {   /* few values, or no memory for the radix sort's */
		if (n) /* qsort's base may not be NULL, even for none */
			qsort(v, n, sizeof(*v), cmp_double);
		return;
	}
	for (size_t i = 0; i < n; i++)
		keys[i] = key_of(v[i]);
	radix_sort(keys, keys + n, count, n);
	for (size_t i = 0; i < n; i++)
		v[i] = double_of(keys[i]);
	free(keys);
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
