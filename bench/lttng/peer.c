// SPDX-License-Identifier: MIT
/*
 * lowkey-bench-lttng: the LTTng-UST side of `lowkey bench probe`, a program of its own so that
 * liblttng-ust (which registers with the session daemon when it loads) never loads into lowkey.
 *
 *   lowkey-bench-lttng BURSTS EVENTS_PER_BURST
 *
 * Times BURSTS bursts of the same two-integer tracepoint, pausing between bursts so a session's
 * consumer can drain its buffers (events lost to full buffers would look cheap), and prints the
 * median ns per tracepoint. Whether the tracepoint records depends on the session the caller set
 * up: none (disabled), or one with lkbench:two_ints enabled.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lk_tp.h"

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int bursts = argc > 1 ? atoi(argv[1]) : 21;
	long events = argc > 2 ? atol(argv[2]) : 100000;
	struct timespec drain = { 0, 50 * 1000 * 1000 };
	double *ns;

	if (bursts < 1 || events < 1) {
		fprintf(stderr, "usage: lowkey-bench-lttng BURSTS EVENTS_PER_BURST\n");
		return 2;
	}
	ns = calloc((size_t)bursts, sizeof(*ns));
	if (!ns)
		return 1;
	for (int b = 0; b < bursts; b++) {
		unsigned long long t0 = now_ns();

		for (long i = 0; i < events; i++)
			lttng_ust_tracepoint(lkbench, two_ints, i, b);
		ns[b] = (double)(now_ns() - t0) / (double)events;
		nanosleep(&drain, NULL);
	}
	qsort(ns, (size_t)bursts, sizeof(*ns), cmp);
	printf("%.3f\n", ns[bursts / 2]);
	return 0;
}
