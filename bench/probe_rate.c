// SPDX-License-Identifier: MIT
/*
 * `lowkey bench probe`: sustained events/s to a file without loss at the default buffer size,
 * from one and two producer threads (producers paced at a given rate, the rate raised until
 * events are lost), and the memory a recording thread uses.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe_bench.h"

struct producer {
	double rate; /* events per second */
	double seconds;
	uint64_t emitted;
	double achieved;
	pthread_t thread;
	int cpu;
};

/* Emit at `rate`, in batches of 64 between looks at the clock. */
static void *produce(void *arg)
{
	struct producer *p = arg;
	uint64_t t0 = lkb_now_ns(), end = t0 + (uint64_t)(p->seconds * 1e9), n = 0;
	double per_ns = p->rate / 1e9;

	if (p->cpu >= 0)
		lkb_pin(p->cpu);
	for (;;) {
		uint64_t now = lkb_now_ns();

		if (now >= end)
			break;
		if ((double)n > (double)(now - t0) * per_ns)
			continue;
		for (int i = 0; i < 64; i++)
			LK_PROBE(lkbench, rate, (long)n, (long)i);
		n += 64;
	}
	p->emitted = n;
	p->achieved = (double)n / ((double)(lkb_now_ns() - t0) / 1e9);
	return NULL;
}

static struct rate_trial run_rate(const struct probe_options *o, int threads, double rate,
				  unsigned int flags)
{
	struct rate_trial t = { rate, 0, 0, 0, 0 };
	struct producer p[2];
	struct lk_trace_stats st;
	char dir[4096];

	t.err = probe_start_trace(o, "rate", flags, 0, dir, sizeof(dir));
	if (t.err)
		return t;
	for (int i = 0; i < threads; i++) {
		p[i] = (struct producer){ .rate = rate,
					  .seconds = o->seconds,
					  .cpu = threads == 1 ? -1 : i };
		pthread_create(&p[i].thread, NULL, produce, &p[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(p[i].thread, NULL);
		t.achieved_total += p[i].achieved;
	}
	t.err = lk_trace_stop();
	lk_trace_stats(&st);
	t.events = st.events;
	t.lost = st.lost;
	probe_remove_trace(dir);
	return t;
}

/* A trial at this rate failed: events were lost, or the producers fell below the rate. */
static bool trial_failed(const struct rate_trial *t, int threads)
{
	return t->lost || t->achieved_total < 0.95 * t->rate_per_thread * threads;
}

/* The highest per-thread rate with no loss: double until loss or the producers cannot keep up,
 * then bisect. *lost_at_end: the lowest rate that failed had lost events. */
static struct rate_trial find_rate(const struct probe_options *o, int threads, unsigned int flags,
				   bool *lost_at_end)
{
	struct rate_trial best = { 0 }, t;
	double lo = 0, hi = 0, rate = 2.5e6;

	*lost_at_end = false;
	for (; rate < 1e9; rate *= 2) {
		t = run_rate(o, threads, rate, flags);
		if (t.err)
			return t;
		if (trial_failed(&t, threads)) {
			hi = rate;
			*lost_at_end = t.lost != 0;
			break;
		}
		best = t;
		lo = rate;
	}
	for (int step = 0; step < 4 && hi > 0; step++) {
		double mid = (lo + hi) / 2;

		t = run_rate(o, threads, mid, flags);
		if (t.err)
			return t;
		if (trial_failed(&t, threads)) {
			hi = mid;
			*lost_at_end = t.lost != 0;
		} else {
			best = t;
			lo = mid;
		}
	}
	return best;
}

/* ---- memory ---- */

static long resident_pages(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%ld %ld", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident;
}

static void *record_once(void *arg)
{
	long *delta = arg;
	long before = resident_pages();

	LK_PROBE(lkbench, rate, 1L, 2L);
	*delta = resident_pages() - before;
	return NULL;
}

long probe_memory_per_thread(const struct probe_options *o)
{
	struct lk_trace_config c = { .flush_ms = 5 };
	char dir[4096];
	pthread_t t;
	long delta = 0;

	snprintf(dir, sizeof(dir), "%s/lowkey-bench-mem-%d", o->trace_dir, (int)getpid());
	c.path = dir;
	if (lk_trace_start(&c) != 0)
		return -1;
	pthread_create(&t, NULL, record_once, &delta);
	pthread_join(t, NULL);
	lk_trace_stop();
	probe_remove_trace(dir);
	return delta * sysconf(_SC_PAGESIZE);
}

/* The no-loss rate, searched SEARCHES times: trials are short and a busy machine's stalls are
 * not. */
struct rate_summary probe_summarize_rate(const struct probe_options *o, int threads,
					 unsigned int flags)
{
	struct rate_summary s = { 0 };
	double v[SEARCHES];

	for (int i = 0; i < SEARCHES; i++) {
		bool lost_at_end;
		struct rate_trial t = find_rate(o, threads, flags, &lost_at_end);

		s.ended_by_loss += lost_at_end;
		v[i] = t.achieved_total;
		if (i == 0 || t.achieved_total > s.best.achieved_total)
			s.best = t;
	}
	s.median = lkb_median(v, SEARCHES);
	s.min = v[0];
	s.max = v[SEARCHES - 1];
	return s;
}
