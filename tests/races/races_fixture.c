// SPDX-License-Identifier: MIT
/*
 * The programs `lowkey races` is tested on: two threads add to one counter for a given time,
 *   races_fixture plain SECONDS    with a plain ++ (a race: lowkey races must find it)
 *   races_fixture mutex SECONDS    the same ++ under a mutex (no race)
 *   races_fixture atomic SECONDS   _Atomic counters, relaxed and sequentially consistent (no race)
 *   races_fixture lib SECONDS      the plain ++ in a shared library (races_lib.c): a race there
 * and print the total. Each thread runs a time rather than a count, so that a busy machine
 * shortens no run. The empty asm keeps each ++ a load and a store of its own (at -O1 too).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 4096

struct worker {
	void (*bump)(void);
	struct timespec end;
};

static int counter;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic long relaxed_counter, seq_cst_counter;

static void bump_plain(void)
{
	for (int i = 0; i < BATCH; i++) {
		counter++;
		__asm__ volatile("" ::: "memory");
	}
}

void races_lib_bump(int *counter, int times);

static void bump_lib(void)
{
	races_lib_bump(&counter, BATCH);
}

static void bump_mutex(void)
{
	for (int i = 0; i < BATCH; i++) {
		pthread_mutex_lock(&lock);
		counter++;
		pthread_mutex_unlock(&lock);
	}
}

static void bump_atomic(void)
{
	for (int i = 0; i < BATCH; i++) {
		atomic_fetch_add_explicit(&relaxed_counter, 1, memory_order_relaxed);
		atomic_fetch_add(&seq_cst_counter, 1);
	}
}

static int before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct timespec now;

	do {
		w->bump();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (before(&now, &w->end));
	return NULL;
}

int main(int argc, char **argv)
{
	struct worker w = { 0 };
	pthread_t threads[2];
	double seconds;

	if (argc != 3 || (seconds = atof(argv[2])) <= 0) {
		fprintf(stderr, "usage: races_fixture plain|mutex|atomic|lib SECONDS\n");
		return 2;
	}
	if (strcmp(argv[1], "plain") == 0)
		w.bump = bump_plain;
	else if (strcmp(argv[1], "mutex") == 0)
		w.bump = bump_mutex;
	else if (strcmp(argv[1], "atomic") == 0)
		w.bump = bump_atomic;
	else if (strcmp(argv[1], "lib") == 0)
		w.bump = bump_lib;
	else
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &w.end);
	w.end.tv_sec += (time_t)seconds;
	w.end.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
	if (w.end.tv_nsec >= 1000000000) {
		w.end.tv_sec++;
		w.end.tv_nsec -= 1000000000;
	}
	for (int i = 0; i < 2; i++)
		if (pthread_create(&threads[i], NULL, work, &w) != 0)
			return 1;
	for (int i = 0; i < 2; i++)
		pthread_join(threads[i], NULL);
	printf("%d %ld %ld\n", counter, atomic_load(&relaxed_counter),
	       atomic_load(&seq_cst_counter));
	return 0;
}
