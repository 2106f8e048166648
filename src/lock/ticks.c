// SPDX-License-Identifier: MIT
/*
 * Converting lk__lock_ticks() to nanoseconds.
 *
 * On x86 the ticks are the TSC. Its rate comes from CPUID where the CPU or the hypervisor
 * publishes it; otherwise it is measured against CLOCK_MONOTONIC_RAW over the time since the
 * library was loaded (at least 20 ms, longer while its two reference points leave it uncertain:
 * the first conversion may sleep to get them). On arm64 the ticks are
 * the generic timer, whose rate CNTFRQ_EL0 gives; on riscv64 the time CSR, whose rate is
 * measured; elsewhere they are nanoseconds already.
 */
#include <time.h>

#include "core/counter_pair.h"
#include "core/cpu.h"
#include "lock/lock_internal.h"

#define PAIR_TRIES 8
#define SPAN_NS_MIN (20 * 1000 * 1000ull)
#define SPAN_NS_MAX (1000 * 1000 * 1000ull)
#define RATE_ERROR_PPM 1000

static struct {
	uint64_t at, ns, width;
} origin;
static double ticks_per_ns; /* 0 until known */

__attribute__((constructor)) static void ticks_origin(void)
{
	origin.width = lk__counter_pair(CLOCK_MONOTONIC_RAW, &origin.at, &origin.ns, PAIR_TRIES);
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

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/*
 * Each pair is within half its bracket of the truth, so the rate is off by at most
 * (w0 + w1) / 2 / span: the span grows until that is under RATE_ERROR_PPM (a preempted origin
 * makes it longer), up to SPAN_NS_MAX.
 */
static double measured_rate(void)
{
	uint64_t at, ns, width;

	if (!origin.ns)
		return 0;
	for (;;) {
		width = lk__counter_pair(CLOCK_MONOTONIC_RAW, &at, &ns, PAIR_TRIES);
		if (!ns || ns <= origin.ns || at <= origin.at)
			return 0;
		if (ns - origin.ns >= SPAN_NS_MAX)
			break;
		if (ns - origin.ns >= SPAN_NS_MIN &&
		    (unsigned __int128)(origin.width + width) * 1000000 <=
			    (unsigned __int128)(at - origin.at) * 2 * RATE_ERROR_PPM)
			break;
		sleep_ns(ns - origin.ns < SPAN_NS_MIN ? SPAN_NS_MIN - (ns - origin.ns) :
							SPAN_NS_MIN);
	}
	return (double)(at - origin.at) / (double)(ns - origin.ns);
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
