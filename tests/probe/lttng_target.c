// SPDX-License-Identifier: MIT
/*
 * An LTTng-UST program for test_probe_foreign_ctf: THREADS threads (the main one and others,
 * each named), each making SPANS spans with a note inside each. Prints each thread's tid, one a
 * line ("tid N NAME"), once every thread is done.
 */
#define _GNU_SOURCE
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "lttng_tp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 3

static int spans;
static int tids[THREADS];

static void *work(void *arg)
{
	long k = (long)arg;
	char name[16];

	snprintf(name, sizeof(name), "lkf-%ld", k);
	pthread_setname_np(pthread_self(), name);
	tids[k] = (int)syscall(SYS_gettid);
	for (int i = 0; i < spans * (int)(k + 1); i++) {
		lttng_ust_tracepoint(lkforeign, work_begin, i);
		lttng_ust_tracepoint(lkforeign, note, i, &name, "inside");
		lttng_ust_tracepoint(lkforeign, work_end, i);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[THREADS];

	spans = argc > 1 ? atoi(argv[1]) : 10;
	for (long k = 1; k < THREADS; k++)
		pthread_create(&t[k], NULL, work, (void *)k);
	work(0);
	for (long k = 1; k < THREADS; k++)
		pthread_join(t[k], NULL);
	for (int k = 0; k < THREADS; k++)
		printf("tid %d lkf-%d\n", tids[k], k);
	return 0;
}
