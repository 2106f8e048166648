// SPDX-License-Identifier: MIT
/*
 * Writes the seed inputs of the report fuzzer (not a test): `seed_report DIR` records a small trace
 * with every kind of record lowkey's JSON and Perfetto outputs have -- two named threads, nested
 * spans with CPU time, integer and double counters (one NaN), an event with every argument type,
 * events lost to a full buffer and, where perf_event_open allows it, context switches -- and
 * converts it into DIR/small.json and DIR/small.pftrace (and DIR/sched.json, DIR/sched.pftrace).
 * Kept small (a few KB) so that test_fuzz_report_mutations can cut and flip every byte.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "internal/trace_convert.h"

static void nap(void)
{
	struct timespec us200 = { 0, 200 * 1000 };

	LK_SPAN(seed, nap);
	nanosleep(&us200, NULL);
}

static void *worker(void *arg)
{
	char big[600];

	(void)arg;
	pthread_setname_np(pthread_self(), "seed-worker");
	for (int i = 0; i < 3; i++) {
		LK_SPAN(seed, outer);
		LK_COUNTER(seed, level, i);
		{
			LK_SPAN(seed, inner);
			LK_PROBE(seed, args, (long)-i, (unsigned long)i, i / 2.0, "text",
				 (void *)&big);
		}
	}
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	for (int i = 0; i < 24; i++) /* more than the 4 KiB ring holds: some are lost */
		LK_PROBE(seed, burst, big);
	return NULL;
}

static int record(const char *dir, const char *name, unsigned int flags)
{
	struct lk_trace_config c = { .buffer_size = 4096,
				     .flags = LK_TRACE_CPUTIME | LK_TRACE_FIXED_BUFFER | flags,
				     .flush_ms = 50 };
	char ctf[512], out[512], err[512];
	pthread_t t;
	int rc;

	snprintf(ctf, sizeof(ctf), "%s/%s.ctf", dir, name);
	c.path = ctf;
	if ((rc = lk_trace_start(&c)) != 0) {
		fprintf(stderr, "seed_report: %s: %s\n", name, lk_last_error());
		return rc;
	}
	pthread_setname_np(pthread_self(), "seed-main");
	if (flags & LK_TRACE_SCHED) {
		for (int i = 0; i < 3; i++)
			nap();
	} else {
		pthread_create(&t, NULL, worker, NULL);
		pthread_join(t, NULL);
		LK_COUNTER(seed, ratio, NAN);
		LK_COUNTER(seed, ratio, 0.5);
	}
	lk_trace_stop();
	for (int f = LK_TRACE_JSON; f <= LK_TRACE_PERFETTO; f++) {
		snprintf(out, sizeof(out), "%s/%s.%s", dir, name, lk__trace_format_extension(f));
		if (lk__trace_convert(ctf, out, f, err, sizeof(err)) != 0) {
			fprintf(stderr, "seed_report: %s\n", err);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seed_report DIR\n");
		return 2;
	}
	lk_probe_enable("seed");
	if (record(argv[1], "small", 0) != 0)
		return 1;
	if (record(argv[1], "sched", LK_TRACE_SCHED) != 0)
		fprintf(stderr,
			"seed_report: no context switches here: sched.json and sched.pftrace not written\n");
	return 0;
}
