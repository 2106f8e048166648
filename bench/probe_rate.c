// SPDX-License-Identifier: MIT
/*
 * `lowkey bench probe`: sustained events/s to a file without loss at the default buffer size,
 * from one and two producer threads (producers paced at a given rate, the rate raised until
 * events are lost), and the memory a recording thread uses. The search is the tracer's trial
 * function's: LTTng-UST's rows (probe_lttng_rate.c) go through it too.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe_bench.h"
#include "probe_pace.h"

static void lowkey_batch(uint64_t n)
{
	for (int i = 0; i < LKB_PACE_BATCH; i++)
		LK_PROBE(lkbench, rate, (long)n, (long)i);
}

static void *produce(void *arg)
{
	lkb_pace_run(arg, lowkey_batch);
	return NULL;
}

double probe_produce(int threads, double rate, double seconds, uint64_t *emitted)
{
	struct lkb_pace p[2];
	pthread_t thread[2];
	double achieved = 0;

	*emitted = 0;
	for (int i = 0; i < threads; i++) {
		p[i] = (struct lkb_pace){ .rate = rate,
					  .seconds = seconds,
					  .cpu = threads == 1 ? -1 : i };
		pthread_create(&thread[i], NULL, produce, &p[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(thread[i], NULL);
		achieved += p[i].achieved;
		*emitted += p[i].emitted;
	}
	return achieved;
}

/* A trial of lowkey's: ctx points to the trace's flags. */
static struct rate_trial run_rate(const struct probe_options *o, int threads, double rate,
				  const void *ctx)
{
	struct rate_trial t = { .rate_per_thread = rate };
	struct lk_trace_stats st;
	uint64_t emitted;
	char dir[4096];

	t.err = probe_start_trace(o, "rate", *(const unsigned int *)ctx, 0, dir, sizeof(dir));
	if (t.err)
		return t;
	t.achieved_total = probe_produce(threads, rate, o->seconds, &emitted);
	t.err = lk_trace_stop();
	lk_trace_stats(&st);
	t.events = st.events;
	t.lost = st.lost;
	t.bytes = st.bytes;
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
static struct rate_trial find_rate(const struct probe_options *o, int threads, rate_trial_fn trial,
				   const void *ctx, bool *lost_at_end)
{
	struct rate_trial best = { 0 }, t;
	double lo = 0, hi = 0, rate = 2.5e6;

	*lost_at_end = false;
	for (; rate < 1e9; rate *= 2) {
		t = trial(o, threads, rate, ctx);
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

		t = trial(o, threads, mid, ctx);
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

struct rate_summary probe_search_rate(const struct probe_options *o, int threads,
				      rate_trial_fn trial, const void *ctx)
{
	struct rate_summary s = { 0 };
	double v[SEARCHES];

	for (int i = 0; i < SEARCHES; i++) {
		bool lost_at_end;
		struct rate_trial t = find_rate(o, threads, trial, ctx, &lost_at_end);

		if (t.err) {
			s.err = t.err;
			return s;
		}
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

struct rate_summary probe_summarize_rate(const struct probe_options *o, int threads,
					 unsigned int flags)
{
	return probe_search_rate(o, threads, run_rate, &flags);
}
