// SPDX-License-Identifier: MIT
/*
 * A traced program for test_html_counters: THREADS threads named "counter-N", each counting the
 * same counter up from 0, SAMPLES times.
 */
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>

#include <lowkey/lowkey.h>

#include "html_counters.h"

static void *count_up(void *arg)
{
	char name[16];

	snprintf(name, sizeof(name), "counter-%d", (int)(long)arg);
	prctl(PR_SET_NAME, name, 0, 0, 0);
	for (int i = 0; i < SAMPLES; i++)
		LK_COUNTER(app, progress, i);
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS];

	for (long i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, count_up, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
