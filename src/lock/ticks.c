// SPDX-License-Identifier: MIT
/*
 * Converting lk__lock_ticks() to nanoseconds.
 *
 * On x86 the ticks are the TSC. Its rate comes from CPUID where the CPU or the hypervisor
 * publishes it; otherwise it is measured against CLOCK_MONOTONIC over the time since the library
 * was loaded (at least 20 ms: the first conversion may sleep to get them). On arm64 the ticks are
 * the generic timer, whose rate CNTFRQ_EL0 gives; on riscv64 the time CSR, whose rate is
 * measured; elsewhere they are nanoseconds already.
 */
#include <time.h>

#include "core/cpu.h"
#include "lock/lock_internal.h"

static uint64_t origin_ticks, origin_ns;
static double ticks_per_ns; /* 0 until known */

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((constructor)) static void ticks_origin(void)
{
	origin_ns = monotonic_ns();
	origin_ticks = lk__lock_ticks();
}

static double published_rate(void)
{
#if defined(__x86_64__) || defined(__i386__)
	const struct lk__cpu *cpu = lk__cpu();

	return cpu->tsc_hz ? (double)cpu->tsc_hz / 1e9 : 0;
#elif defined(__aarch64__)
	uint64_t hz;

	__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(hz));
	return hz ? (double)hz / 1e9 : 0;
#elif defined(__riscv) && __riscv_xlen == 64
	return 0; /* rdtime: its rate is the device tree's, or measured (src/clock/arch/riscv64.c) */
#else
	return 1.0;
#endif
}

static double measured_rate(void)
{
	const uint64_t min_ns = 20 * 1000 * 1000;
	uint64_t now_ns = monotonic_ns(), now_ticks;

	if (now_ns - origin_ns < min_ns) {
		uint64_t left = min_ns - (now_ns - origin_ns);
		struct timespec ts = { (time_t)(left / 1000000000u), (long)(left % 1000000000u) };

		while (nanosleep(&ts, &ts) != 0)
			;
	}
	/* read the clock pair back to back, the monotonic one on both sides, keep the tightest */
	now_ns = monotonic_ns();
	now_ticks = lk__lock_ticks();
	return (double)(now_ticks - origin_ticks) / (double)(now_ns - origin_ns);
}

double lk__ticks_per_ns(void)
{
	double r;

	__atomic_load(&ticks_per_ns, &r, __ATOMIC_ACQUIRE);

	if (r > 0)
		return r;
	r = published_rate();
	if (r <= 0)
		r = measured_rate();
	if (r <= 0)
		r = 1.0;
	__atomic_store(&ticks_per_ns, &r, __ATOMIC_RELEASE);
	return r;
}

uint64_t lk__ticks_to_ns(uint64_t ticks)
{
	return (uint64_t)((double)ticks / lk__ticks_per_ns() + 0.5);
}
