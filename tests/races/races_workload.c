// SPDX-License-Identifier: MIT
/*
 * A CPU-bound multithreaded workload without races, to measure what `lowkey races` costs
 * (docs/BENCHMARKS.md): THREADS threads each run ROUNDS rounds over an array of their own,
 * reading a table they share, and the program prints a checksum. Not a test: built beside them.
 *	races_workload THREADS ROUNDS
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CELLS 4096 /* per thread: 32 KiB, in the L1/L2 caches */

struct worker {
	pthread_t thread;
	long rounds;
	uint64_t cells[CELLS];
	uint64_t sum;
};

static uint64_t table[256];

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t x = (uint64_t)(uintptr_t)w | 1;

	for (long r = 0; r < w->rounds; r++) {
		for (unsigned int i = 0; i < CELLS; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			w->cells[i] += table[x & 255] ^ x;
		}
	}
	for (unsigned int i = 0; i < CELLS; i++)
		w->sum += w->cells[i];
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc == 3 ? atoi(argv[1]) : 0;
	long rounds = argc == 3 ? atol(argv[2]) : 0;
	struct worker *w;
	uint64_t sum = 0;

	if (threads <= 0 || threads > 256 || rounds <= 0) {
		fprintf(stderr, "usage: races_workload THREADS ROUNDS\n");
		return 2;
	}
	for (unsigned int i = 0; i < 256; i++)
		table[i] = i * 0x9e3779b97f4a7c15ull;
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
