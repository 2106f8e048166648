/* SPDX-License-Identifier: MIT */
/*
 * Internal: reading the cycle counter (lk__arch_counter) and a POSIX clock at one instant, the
 * one way every module that converts counter ticks to time takes its reference points.
 */
#ifndef LK_CORE_COUNTER_PAIR_H
#define LK_CORE_COUNTER_PAIR_H

#include <stdint.h>

/*
 * The counter value *at at which `clock` read *ns: the middle of the narrowest of `tries`
 * brackets (counter, clock_gettime, counter). Returns that bracket's width in counter ticks; the
 * pair is within half of it. A preemption or host steal inside every try leaves it wide, and a
 * caller that needs the pair precise must check it. *ns is 0 if the clock cannot be read.
 * Costs `tries` vDSO calls. Async-signal-safe.
 */
uint64_t lk__counter_pair(int clock, uint64_t *at, uint64_t *ns, int tries);

#endif
