// SPDX-License-Identifier: MIT
/*
 * A tiny two-thread "server" with probes: spans per request, an event per query, a counter for
 * the queue. Traces itself when given a path; otherwise its probes cost a NOP each and
 * `lowkey trace -- ./probes` can trace it from outside.
 *
 *   cc probes.c $(pkg-config --cflags --libs lowkey) -o probes
 *   ./probes server.ctf && lowkey report server.ctf && babeltrace2 server.ctf | head
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include <lowkey/lowkey.h>

static void query(long id, const char *table)
{
	struct timespec io = { 0, 50 * 1000 }; /* 50 µs "waiting for the disk" */
	volatile double x = 1;

	LK_SPAN(demo, query);
	LK_PROBE(demo, query_start, id, table);
	for (int i = 0; i < 20000; i++) /* some CPU work */
		x *= 1.000001;
	(void)x; /* read once, so the work is used (clang: -Wunused-but-set-variable) */
	if (id % 4 == 0)
		nanosleep(&io, NULL);
}

static void *worker(void *arg)
{
	long base = (long)arg;

	for (long id = base; id < base + 500; id++) {
		LK_SPAN(demo, request);
		LK_COUNTER(demo, in_flight, id % 8);
		query(id, id % 2 ? "users" : "orders");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[2];
	int err;

	if (argc > 1) {
		struct lk_trace_config c = { .path = argv[1], .flags = LK_TRACE_CPUTIME };

		lk_probe_enable("demo");
		err = lk_trace_start(&c);
		if (err) {
			fprintf(stderr, "cannot trace to %s: %s\n", argv[1], lk_last_error());
			return 1;
		}
	}
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i * 1000));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	if (argc > 1 && (err = lk_trace_stop()) != 0) {
		fprintf(stderr, "tracing failed: %s\n", lk_last_error());
		return 1;
	}
	return 0;
}
