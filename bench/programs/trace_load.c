// SPDX-License-Identifier: MIT
/*
 * The load of the trace-reading figures (docs/BENCHMARKS.md): THREADS threads each run ROUNDS
 * rounds of a span around a counter, an event of two integers and an event of a string, five
 * events a round, yielding every 1,024 rounds. Traced from outside:
 *
 *   lowkey trace -o t1.ctf -- bench/trace_load 1 200000     # 1,000,000 events
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include <lowkey/lowkey.h>

static long rounds;

static void *thread_main(void *arg)
{
	(void)arg;
	for (long i = 0; i < rounds; i++) {
		LK_SPAN(load, round);
		LK_COUNTER(load, depth, i % 16);
		LK_PROBE(load, pair, i, i * 3);
		LK_PROBE(load, text, i & 1 ? "odd" : "even");
		if ((i & 1023) == 1023)
			sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[64];
	long threads;

	if (argc != 3 || (threads = atol(argv[1])) < 1 || threads > 64 ||
	    (rounds = atol(argv[2])) < 1) {
		fprintf(stderr, "usage: %s THREADS(1-64) ROUNDS\n", argv[0]);
		return 2;
	}
	for (long i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, thread_main, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	for (long i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}
