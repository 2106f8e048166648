// SPDX-License-Identifier: MIT
/*
 * The TSC rate a trace starts with (lk_trace_stop replaces it with the rate measured over the
 * whole trace): the clock module's calibration (CPUID, the hypervisor's leaf, the perf page, or
 * its measurement), else a 20 ms measurement against CLOCK_MONOTONIC_RAW.
 */
#include <time.h>

#include <lowkey/clock.h>

#include "core/counter_pair.h"
#include "probe/probe_internal.h"

static uint64_t measure(void)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	uint64_t c0, t0, c1, t1;

	lk__counter_pair(CLOCK_MONOTONIC_RAW, &c0, &t0, 8);
	nanosleep(&pause, NULL);
	lk__counter_pair(CLOCK_MONOTONIC_RAW, &c1, &t1, 8);
	if (!t0 || t1 <= t0)
		return 0;
	return (uint64_t)((double)(c1 - c0) * 1e9 / (double)(t1 - t0));
}

uint64_t lk__probe_tsc_hz(void)
{
	struct lk_clock_info info;

	if (lk_clock_info(&info) == 0 && info.tsc_hz)
		return info.tsc_hz;
	return measure();
}
