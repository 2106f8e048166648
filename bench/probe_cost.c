// SPDX-License-Identifier: MIT
/*
 * `lowkey bench probe`: what one event costs. A disabled site against the empty loop, a site on
 * for a USDT tracer while no lowkey trace runs, and enabled events timed in bursts that fit the
 * buffers, with a pause between bursts for the consumer: an event dropped because a buffer is
 * full costs less than one written, and would flatter either tracer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe_bench.h"

__attribute__((noinline)) uint64_t probe_loop_empty(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		asm volatile("" : : "r"(i));
	return n;
}

__attribute__((noinline)) uint64_t probe_loop_disabled(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_PROBE(lkbench_off, two_ints, (long)i, (long)n);
		asm volatile("" : : "r"(i));
	}
	return n;
}

/* A site on for a USDT tracer (lk_probe_usdt_enable) while no lowkey trace runs. */
__attribute__((noinline)) uint64_t probe_loop_usdt(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_PROBE(lkbench_usdt, two_ints, (long)i, (long)n);
		asm volatile("" : : "r"(i));
	}
	return n;
}

/* A scoped span on for a USDT tracer while no lowkey trace runs: its end goes through the stub. */
__attribute__((noinline)) uint64_t probe_loop_usdt_span(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_SPAN(lkbench_usdt, span);
		asm volatile("" : : "r"(i));
	}
	return n;
}

__attribute__((noinline)) uint64_t probe_loop_span(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		LK_SPAN(lkbench, span);
		asm volatile("" : : "r"(i));
	}
	return n;
}

static double median_of(double *v, int n)
{
	return lkb_median(v, (size_t)n);
}

double probe_time_unrecorded(const struct probe_options *o, uint64_t (*loop)(uint64_t))
{
	int runs = o->runs;
	double v[64];
	uint64_t n = 20 * 1000 * 1000;

	for (int r = 0; r < runs && r < 64; r++) {
		uint64_t t0 = lkb_now_ns();

		loop(n);
		v[r] = (double)(lkb_now_ns() - t0) / (double)n;
	}
	return median_of(v, runs < 64 ? runs : 64);
}

/* Wait until the consumer has written everything recorded so far. */
static void wait_drained(uint64_t expected)
{
	struct lk_trace_stats st;

	for (int i = 0; i < 2000; i++) {
		lk_trace_stats(&st);
		if (st.events + st.lost >= expected)
			return;
		usleep(500);
	}
}

int probe_start_trace(const struct probe_options *o, const char *name, unsigned int flags,
		      size_t buffer, char *dir, size_t dirlen)
{
	struct lk_trace_config c = {
		.path = dir, .flags = flags, .buffer_size = buffer, .flush_ms = 5
	};

	snprintf(dir, dirlen, "%s/lowkey-bench-%s-%d", o->trace_dir, name, (int)getpid());
	return lk_trace_start(&c);
}

void probe_remove_trace(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "lowkey bench probe: could not remove %s\n", dir);
}

/* Time o->runs bursts of loop(burst) inside a trace; records_per_iter records per iteration. */
struct burst_result probe_time_bursts(const struct probe_options *o, const char *name,
				      uint64_t (*loop)(uint64_t), unsigned int flags,
				      unsigned int records_per_iter)
{
	long burst = o->burst;
	int runs = o->runs;
	struct burst_result res = { 0 };
	struct lk_trace_stats st;
	char dir[4096];
	double v[64];
	int n = runs < 64 ? runs : 64;

	res.err = probe_start_trace(o, name, flags, 0, dir, sizeof(dir));
	if (res.err)
		return res;
	loop((uint64_t)burst / records_per_iter); /* the thread's first event sets up its buffer */
	wait_drained((uint64_t)burst / records_per_iter * records_per_iter + 1);
	for (int r = 0; r < n; r++) {
		uint64_t t0, recorded;

		lk_trace_stats(&st);
		recorded = st.events + st.lost;
		t0 = lkb_now_ns();
		loop((uint64_t)burst / records_per_iter);
		v[r] = (double)(lkb_now_ns() - t0) / (double)((uint64_t)burst / records_per_iter);
		wait_drained(recorded + (uint64_t)burst / records_per_iter * records_per_iter);
	}
	lk_trace_stop();
	lk_trace_stats(&st);
	res.lost = st.lost;
	res.ns = median_of(v, n);
	probe_remove_trace(dir);
	return res;
}
