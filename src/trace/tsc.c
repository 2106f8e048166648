// SPDX-License-Identifier: MIT
/*
 * The TSC rate a trace starts with (lk_trace_stop replaces it with the rate measured over the
 * whole trace): the clock module's calibration (CPUID, the hypervisor's leaf, the perf page, or
 * its measurement), else a 20 ms measurement against CLOCK_MONOTONIC_RAW.
 */
#include <time.h>

#include <lowkey/clock.h>

#include "probe/probe_internal.h"

static uint64_t raw_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t measure(void)
{
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	uint64_t t0 = raw_ns(), c0 = lk__probe_tsc(), t1, c1;

	nanosleep(&pause, NULL);
	t1 = raw_ns();
	c1 = lk__probe_tsc();
	return (uint64_t)((double)(c1 - c0) * 1e9 / (double)(t1 - t0));
}

uint64_t lk__probe_tsc_hz(void)
{
	struct lk_clock_info info;

	if (lk_clock_info(&info) == 0 && info.tsc_hz)
		return info.tsc_hz;
	return measure();
}
