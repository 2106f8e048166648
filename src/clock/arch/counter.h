/* SPDX-License-Identifier: MIT */
/*
 * Internal: the cycle counter, read inline on the hot paths, and what the arch code knows about it.
 * The reads are not serializing: callers that need an order with memory accesses put a compiler
 * barrier next to them (same-CPU ordering is all the clocks need, see cputime.c).
 */
#ifndef LK_CLOCK_ARCH_COUNTER_H
#define LK_CLOCK_ARCH_COUNTER_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#define LK__HAVE_COUNTER 1
static inline __attribute__((always_inline)) uint64_t lk__counter(void)
{
	uint32_t lo, hi;

	asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}
#elif defined(__aarch64__)
#define LK__HAVE_COUNTER 1
static inline __attribute__((always_inline)) uint64_t lk__counter(void)
{
	uint64_t v;

	asm volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
#elif defined(__riscv) && __riscv_xlen == 64
#define LK__HAVE_COUNTER 1
/* The time CSR: the platform's constant-rate timebase, readable from U-mode on Linux (the kernel
 * sets scounteren.TM). Not the cycle CSR, which Linux 6.6 and later no longer let U-mode read. */
static inline __attribute__((always_inline)) uint64_t lk__counter(void)
{
	uint64_t v;

	asm volatile("rdtime %0" : "=r"(v));
	return v;
}
#else
#define LK__HAVE_COUNTER 0
static inline uint64_t lk__counter(void)
{
	return 0;
}
#endif

/* What the architecture says about its counter (src/clock/arch/<arch>.c). */
struct lk__counter_info {
	const char *name;		/* "TSC", "CNTVCT", "time", "none" */
	bool usable;			/* present and counting at a constant rate */
	const char *why_not;		/* when !usable: a sentence */
	uint64_t hz;			/* from the hardware (CPUID, CNTFRQ, the device tree), 0 if it does not say */
	const char *hz_source;		/* where hz came from */
	const char *clocksource;	/* the kernel's clocksource name when it reads this counter */
};

void lk__counter_probe(struct lk__counter_info *info);

#endif
