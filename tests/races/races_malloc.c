// SPDX-License-Identifier: MIT
/*
 * A malloc-heavy multithreaded workload without races, to measure what `lowkey races --heap`
 * costs (docs/BENCHMARKS.md): THREADS threads each run ROUNDS rounds; a round allocates BATCH
 * blocks of 16 to 1024 bytes (malloc, calloc or realloc in turn), writes into each, and frees
 * them in another order, the thread keeping KEEP blocks live across rounds. The program prints a
 * checksum. Not a test: built beside them.
 *	races_malloc THREADS ROUNDS
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 64
#define KEEP 256

struct worker {
	pthread_t thread;
	long rounds;
	void *keep[KEEP];
	uint64_t sum;
};

static uint64_t next_random(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *allocate(uint64_t r, unsigned int i)
{
	size_t size = 16 + (size_t)(r % 1009);
	unsigned char *p;

	switch (i % 3) {
	case 0:
		p = malloc(size);
		break;
	case 1:
		p = calloc(1, size);
		break;
	default:
		p = realloc(malloc(size / 2), size);
		break;
	}
	if (p)
		memset(p, (int)i, size);
	return p;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t x = (uint64_t)(uintptr_t)w | 1;
	unsigned char *batch[BATCH];

	for (long r = 0; r < w->rounds; r++) {
		for (unsigned int i = 0; i < BATCH; i++)
			batch[i] = allocate(next_random(&x), i);
		for (unsigned int i = 0; i < BATCH; i++) {
			unsigned int k = (i * 37 + (unsigned int)r) % BATCH; /* another order */

			if (batch[k])
				w->sum += batch[k][0];
		}
		for (unsigned int i = 0; i < BATCH; i++) {
			unsigned int k = (i * 37 + (unsigned int)r) % BATCH, slot;

			if (i ==
			    0) { /* one goes to the blocks kept; the one it replaces is freed */
				slot = (unsigned int)(next_random(&x) % KEEP);
				free(w->keep[slot]);
				w->keep[slot] = batch[k];
			} else {
				free(batch[k]);
			}
		}
	}
	for (unsigned int i = 0; i < KEEP; i++)
		free(w->keep[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc == 3 ? atoi(argv[1]) : 0;
	long rounds = argc == 3 ? atol(argv[2]) : 0;
	struct worker *w;
	uint64_t sum = 0;

	if (threads <= 0 || threads > 256 || rounds <= 0) {
		fprintf(stderr, "usage: races_malloc THREADS ROUNDS\n");
		return 2;
	}
	w = calloc((size_t)threads, sizeof(*w));
	if (!w)
		return 1;
	for (int i = 0; i < threads; i++) {
		w[i].rounds = rounds;
		if (pthread_create(&w[i].thread, NULL, work, &w[i]) != 0)
			return 1;
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(w[i].thread, NULL);
		sum += w[i].sum;
	}
	printf("%llx\n", (unsigned long long)sum);
	free(w);
	return 0;
}
