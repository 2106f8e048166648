/* SPDX-License-Identifier: MIT */
/* Order statistics shared by the CLI's reports and the benches, which must print the same figures. */
#ifndef LK_CORE_STATS_H
#define LK_CORE_STATS_H

#include <stddef.h>

/*
 * lk__sort_doubles - sort v ascending in place; n may be 0, v then NULL. O(n) from 256 values: a
 * radix sort of the doubles' bits, with a buffer of 2n values (qsort below that, or without the
 * buffer); 16 KiB of stack. -0 comes before +0; values with a NaN among them in no set order.
 */
void lk__sort_doubles(double *v, size_t n);

/*
 * lk__percentile_sorted - the p-th percentile (0 to 100) of n ascending values: linear between
 * the two values around rank p/100 * (n - 1); the largest for p = 100; NAN when n is 0. O(1).
 */
double lk__percentile_sorted(const double *v, size_t n, double p);

#endif
