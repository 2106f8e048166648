/* SPDX-License-Identifier: MIT */
/* Internal: what the CPU offers, read once. */
#ifndef LK_CORE_CPU_H
#define LK_CORE_CPU_H

#include <stdbool.h>
#include <stdint.h>

struct lk__cpu {
	char vendor[13];
	bool hypervisor; /* running as a guest */
	bool tsc;	 /* rdtsc exists */
	bool rdtscp;
	bool invariant_tsc; /* constant rate in all P-/C-states (CPUID 0x80000007 EDX[8]) */
	uint64_t tsc_hz;    /* from CPUID (0x15, or the hypervisor leaf 0x40000010); 0 if unknown */
	const char *tsc_hz_source; /* which leaf gave tsc_hz, or NULL */
};

/* The CPU's features, read on first call. Thread-safe; the result is static. */
const struct lk__cpu *lk__cpu(void);

#endif
