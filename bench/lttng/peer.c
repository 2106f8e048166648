// SPDX-License-Identifier: MIT
/*
 * lowkey-bench-lttng: the LTTng-UST side of `lowkey bench probe`, a program of its own so that
 * liblttng-ust (which registers with the session daemon when it loads) never loads into the
 * lowkey CLI. It holds both tracers, so the comparison runs in one process, one thread:
 *
 *   lowkey-bench-lttng ROUNDS EVENTS_PER_BURST LOWKEY_TRACE_DIR|- [PAUSE_MS]
 *
 * After one untimed burst of each, ROUNDS rounds of one burst of lowkey's two-integer event
 * then one burst of LTTng-UST's two-integer tracepoint (lowkey, lttng, lowkey, lttng, ...), the
 * same number of events in each burst, with a pause of PAUSE_MS (default 20) after every burst
 * so each tracer's consumer can drain its buffers (events lost to full buffers would look cheap);
 * lowkey's pause also waits until its consumer has written the burst. Prints one line per round,
 * "LOWKEY_NS LTTNG_NS" (ns per event), then "lowkey_lost N".
 *
 * Whether the tracepoints record depends on the caller: with LOWKEY_TRACE_DIR, lowkey's sites
 * record into a trace written there; with "-" they stay off. LTTng-UST's record when the caller
 * set up a session with lkbench:two_ints enabled before starting this program.
 *
 *   lowkey-bench-lttng rate THREADS EVENTS_PER_S SECONDS
 *
 * LTTng-UST's side of the sustained rate: THREADS threads (one unpinned, or one per CPU from 0)
 * emit LTTng-UST's two-integer tracepoint at EVENTS_PER_S each for SECONDS, paced as lowkey's
 * producers are (probe_pace.h). Prints "emitted N" (events, all threads) and "achieved R" (their
 * rates added up, events/s); the caller's session counts what it discarded.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lk_tp.h"
#include "probe_loop.h"
#include "probe_pace.h"

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static __attribute__((noinline)) void lttng_two_ints(long n)
{
	for (long i = 0; i < n; i++) {
		lttng_ust_tracepoint(lkbench, two_ints, i, n);
		asm volatile("" : : "r"(i));
	}
}

static void lttng_batch(uint64_t n)
{
	for (long i = 0; i < LKB_PACE_BATCH; i++)
		lttng_ust_tracepoint(lkbench, two_ints, (long)n, i);
}

static void *lttng_produce(void *arg)
{
	lkb_pace_run(arg, lttng_batch);
	return NULL;
}

static int rate_main(int argc, char **argv)
{
	int threads = argc == 5 ? atoi(argv[2]) : 0;
	double rate = argc == 5 ? atof(argv[3]) : 0, seconds = argc == 5 ? atof(argv[4]) : 0;
	struct lkb_pace p[2];
	pthread_t thread[2];
	unsigned long long emitted = 0;
	double achieved = 0;

	if (threads < 1 || threads > 2 || rate <= 0 || seconds <= 0) {
		fprintf(stderr, "usage: lowkey-bench-lttng rate 1|2 EVENTS_PER_S SECONDS\n");
		return 2;
	}
	for (int i = 0; i < threads; i++) {
		p[i] = (struct lkb_pace){ .rate = rate,
					  .seconds = seconds,
					  .cpu = threads == 1 ? -1 : i };
		if (pthread_create(&thread[i], NULL, lttng_produce, &p[i]) != 0)
			return 1;
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(thread[i], NULL);
		emitted += p[i].emitted;
		achieved += p[i].achieved;
	}
	printf("emitted %llu\nachieved %.0f\n", emitted, achieved);
	return 0;
}

/* Events lowkey has written or lost so far. */
static unsigned long long lowkey_recorded(void)
{
	struct lk_trace_stats st;

	if (lk_trace_stats(&st) != 0)
		return 0;
	return (unsigned long long)(st.events + st.lost);
}

static void pause_after(bool tracing, unsigned long long expected, long pause_ms)
{
	struct timespec pause = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };

	for (int i = 0; tracing && i < 4000 && lowkey_recorded() < expected; i++)
		usleep(500);
	if (pause_ms > 0)
		nanosleep(&pause, NULL);
}

int main(int argc, char **argv)
{
	int rounds = argc > 3 ? atoi(argv[1]) : 0;
	long events = argc > 3 ? atol(argv[2]) : 0, pause_ms = argc > 4 ? atol(argv[4]) : 20;
	const char *dir = argc > 3 ? argv[3] : NULL;
	bool tracing = dir && strcmp(dir, "-") != 0;
	struct lk_trace_stats st;
	unsigned long long expected = 0;

	if (argc > 1 && strcmp(argv[1], "rate") == 0)
		return rate_main(argc, argv);
	if (argc < 4 || argc > 5 || rounds < 1 || events < 1 || pause_ms < 0) {
		fprintf(stderr,
			"usage: lowkey-bench-lttng ROUNDS EVENTS_PER_BURST LOWKEY_TRACE_DIR|- [PAUSE_MS]\n"
			"       lowkey-bench-lttng rate 1|2 EVENTS_PER_S SECONDS\n");
		return 2;
	}
	if (tracing) {
		struct lk_trace_config c = { .path = dir, .flush_ms = 5 };

		if (lk_probe_enable("lkbench:two_ints") < 0 || lk_trace_start(&c) != 0) {
			fprintf(stderr, "lowkey-bench-lttng: cannot trace to %s: %s\n", dir,
				lk_last_error());
			return 1;
		}
	}
	/* Untimed: each tracer sets up its thread's buffer at its first event. */
	lkb_loop_two_ints((uint64_t)events);
	expected += (unsigned long long)events;
	pause_after(tracing, expected, pause_ms);
	lttng_two_ints(events);
	pause_after(false, 0, pause_ms);
	for (int r = 0; r < rounds; r++) {
		unsigned long long t0 = now_ns();
		double lk, lt;

		lkb_loop_two_ints((uint64_t)events);
		lk = (double)(now_ns() - t0) / (double)events;
		expected += (unsigned long long)events;
		pause_after(tracing, expected, pause_ms);
		t0 = now_ns();
		lttng_two_ints(events);
		lt = (double)(now_ns() - t0) / (double)events;
		pause_after(false, 0, pause_ms);
		printf("%.4f %.4f\n", lk, lt);
	}
	memset(&st, 0, sizeof(st));
	if (tracing) {
		lk_trace_stop();
		lk_trace_stats(&st);
	}
	printf("lowkey_lost %llu\n", (unsigned long long)st.lost);
	return 0;
}
