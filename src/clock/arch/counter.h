/* SPDX-License-Identifier: MIT */
/*
 * Internal: what the arch code knows about the cycle counter. The counter itself is read with
 * lowkey/bits/arch.h: lk__arch_counter() but at the ends of a rebase's bracket around its system
 * call, lk__arch_counter_ordered() (that header says why).
 */
#ifndef LK_CLOCK_ARCH_COUNTER_H
#define LK_CLOCK_ARCH_COUNTER_H

#include <stdbool.h>
#include <stdint.h>
#include <lowkey/bits/arch.h>

/* What the architecture says about its counter (src/clock/arch/<arch>.c). */
struct lk__counter_info {
	const char *name;    /* "TSC", "CNTVCT", "time", "none" */
	bool usable;	     /* present and counting at a constant rate */
	const char *why_not; /* when !usable: a sentence */
	uint64_t hz; /* from the hardware (CPUID, CNTFRQ, the device tree), 0 if it does not say */
	const char *hz_source;	 /* where hz came from */
	const char *clocksource; /* the kernel's clocksource name when it reads this counter */
};

void lk__counter_probe(struct lk__counter_info *info);

#endif
