/* SPDX-License-Identifier: MIT */
/*
 * The enabled-event loop of `lowkey bench probe`: lowkey's two-integer event, the same source
 * compiled into the CLI (its own rows) and into lowkey-bench-lttng (the rounds that alternate
 * with LTTng-UST's tracepoint in one process), so both measure the same code.
 */
#ifndef LOWKEY_BENCH_PROBE_LOOP_H
#define LOWKEY_BENCH_PROBE_LOOP_H

#include <stdint.h>

#include <lowkey/lowkey.h>

/* Events per timed burst, unless --burst says otherwise: 384 KiB of two-integer events, well
 * inside lowkey's default 2 MiB buffer and LTTng's 4 x 8 MiB sub-buffers. */
#define LKB_DEFAULT_BURST 16384

static __attribute__((noinline, unused)) uint64_t lkb_loop_two_ints(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_PROBE(lkbench, two_ints, (long)i, (long)n);
		asm volatile("" : : "r"(i));
	}
	return n;
}

#endif
