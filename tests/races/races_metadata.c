// SPDX-License-Identifier: MIT
/*
 * The program `lowkey races` reads Clang's sanitizer metadata of, built with
 * -fexperimental-sanitize-metadata=atomics,covered (tests/races/CMakeLists.txt):
 *   races_metadata atomic SECONDS  two threads load and store an _Atomic int with relaxed
 *                                  ordering (plain movs) through a pointer to the heap, where
 *                                  the debug information cannot say the access is atomic
 *   races_metadata plain SECONDS   the same with a plain int (a race: must be found)
 * Each thread runs a time rather than a count, as races_fixture.c's do.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 4096
#define BARRIER() __asm__ volatile("" ::: "memory")

struct shared {
	_Atomic int atomic;
	int plain;
};

struct worker {
	struct shared *s;
	void (*bump)(struct shared *s);
	struct timespec end;
	struct timespec pause; /* LKT_FIXTURE_PAUSE_US: a sleep after each batch */
};

__attribute__((noinline)) static void bump_atomic(struct shared *s)
{
	for (int i = 0; i < BATCH; i++) {
		int v = atomic_load_explicit(&s->atomic, memory_order_relaxed);

		atomic_store_explicit(&s->atomic, v + 1, memory_order_relaxed);
		BARRIER();
	}
}

__attribute__((noinline)) static void bump_plain(struct shared *s)
{
	for (int i = 0; i < BATCH; i++) {
		s->plain++;
		BARRIER();
	}
}

static int before(const struct timespec *end)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec < end->tv_sec ||
	       (now.tv_sec == end->tv_sec && now.tv_nsec < end->tv_nsec);
}

static void *run(void *arg)
{
	struct worker *w = arg;

	while (before(&w->end)) {
		w->bump(w->s);
		if (w->pause.tv_nsec)
			nanosleep(&w->pause, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct shared *s = calloc(1, sizeof(*s));
	struct worker w;
	pthread_t t[2];

	if (argc != 3 || !s || (strcmp(argv[1], "atomic") != 0 && strcmp(argv[1], "plain") != 0)) {
		fprintf(stderr, "usage: races_metadata atomic|plain SECONDS\n");
		return 2;
	}
	w.s = s;
	w.bump = strcmp(argv[1], "atomic") == 0 ? bump_atomic : bump_plain;
	w.pause = (struct timespec){ 0,
				     getenv("LKT_FIXTURE_PAUSE_US") ?
					     atol(getenv("LKT_FIXTURE_PAUSE_US")) % 1000000 * 1000 :
					     0 };
	clock_gettime(CLOCK_MONOTONIC, &w.end);
	w.end.tv_sec += atoi(argv[2]);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, run, &w);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("%d %d\n", atomic_load(&s->atomic), s->plain);
	free(s);
	return 0;
}
