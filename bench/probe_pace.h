/* SPDX-License-Identifier: MIT */
/*
 * The paced producer of `lowkey bench probe`'s sustained rates: the same source compiled into the
 * CLI (lowkey's rows) and into lowkey-bench-lttng (LTTng-UST's rows), so that both tracers are
 * driven alike: batches of events whenever the thread has emitted fewer than the rate asks for
 * the time spent, a look at the clock between batches.
 */
#ifndef LOWKEY_BENCH_PROBE_PACE_H
#define LOWKEY_BENCH_PROBE_PACE_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

/* Events a batch emits, between two looks at the clock. */
#define LKB_PACE_BATCH 64

struct lkb_pace {
	double rate;	/* events per second asked */
	double seconds; /* how long to emit */
	int cpu;	/* pinned to this CPU, or -1 */
	uint64_t emitted;
	double achieved; /* events per second emitted */
};

static inline uint64_t lkb_pace_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Emit for p->seconds at p->rate on the calling thread (pinned to p->cpu first), then fill
 * p->emitted and p->achieved. batch(n) emits LKB_PACE_BATCH events, numbered from n.
 */
static inline void lkb_pace_run(struct lkb_pace *p, void (*batch)(uint64_t n))
{
	uint64_t t0, end, n = 0;
	double per_ns = p->rate / 1e9;

	if (p->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(p->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	t0 = lkb_pace_now_ns();
	end = t0 + (uint64_t)(p->seconds * 1e9);
	for (;;) {
		uint64_t now = lkb_pace_now_ns();

		if (now >= end)
			break;
		if ((double)n > (double)(now - t0) * per_ns)
			continue;
		batch(n);
		n += LKB_PACE_BATCH;
	}
	p->emitted = n;
	p->achieved = (double)n / ((double)(lkb_pace_now_ns() - t0) / 1e9);
}

#endif
