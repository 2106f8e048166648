// SPDX-License-Identifier: MIT
/*
 * A program of known shape for the HTML report tests: three threads named "worker-N", each
 * running requests (spans) that nest parse and execute spans, some of which sleep; a queue-depth
 * counter (the workers'), a latency counter (the main thread's) and a progress counter each of the
 * four threads counts up from 0; and an instant event. With an argument, the main thread takes
 * that name (prctl), which may be anything: the tests give it markup.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include <lowkey/lowkey.h>

static void spin_us(long us)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static void sleep_us(long us)
{
	struct timespec ts = { 0, us * 1000 };

	nanosleep(&ts, NULL);
}

static void request(int worker, int i)
{
	LK_SPAN(app, request);
	{
		LK_SPAN(app, parse);
		spin_us(20 + (i % 7) * 10);
	}
	{
		LK_SPAN(app, execute);
		if (i % 5 == 0)
			sleep_us(300 + worker * 100);
		else
			spin_us(50 + (i % 11) * 15);
	}
	LK_PROBE(app, done, i);
}

static void *worker(void *arg)
{
	int w = (int)(long)arg;
	char name[16];

	snprintf(name, sizeof(name), "worker-%d", w);
	prctl(PR_SET_NAME, name, 0, 0, 0);
	for (int i = 0; i < 120; i++) {
		request(w, i);
		LK_COUNTER(app, queue_depth, (i * 7 + w * 3) % 17);
		LK_COUNTER(app, progress, i);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[3];

	if (argc > 1)
		prctl(PR_SET_NAME, argv[1], 0, 0, 0);
	for (long w = 0; w < 3; w++)
		pthread_create(&t[w], NULL, worker, (void *)w);
	for (int i = 0; i < 50; i++) {
		LK_COUNTER(app, latency_us, 100.0 + 50.0 * (double)(i % 10));
		LK_COUNTER(app, progress, i);
		sleep_us(1000);
	}
	for (int w = 0; w < 3; w++)
		pthread_join(t[w], NULL);
	return 0;
}
