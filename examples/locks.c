// SPDX-License-Identifier: MIT
/*
 * A bounded work queue: producers wait for a free slot, put a job in the ring under a named mutex
 * and count it; consumers wait for a job, take it, and tally results under a named spinlock. The
 * two counts are the two semaphores of one set. At the end, the contention each lock saw and the
 * figures of the semaphore set.
 *
 *   cc locks.c $(pkg-config --cflags --libs lowkey) -o locks && ./locks
 *
 * Run it under `lowkey locks -- ./locks` to see the same program's pthread locks too (it has
 * none: its locks are lowkey's own, which report themselves).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <lowkey/lowkey.h>

#define JOBS 100000
#define PRODUCERS 2
#define CONSUMERS 2
#define SLOTS 1024
#define FREE_SLOTS 0 /* the semaphores of the set */
#define READY_JOBS 1

static lk_mutex_t queue_lock = LK_MUTEX_INIT("job queue");
static lk_spinlock_t tally_lock = LK_SPINLOCK_INIT("tally");
static struct lk_semset *counts;
static long queue[SLOTS], head, tail, tally;

static void *producer(void *arg)
{
	struct lk_sembuf take_slot = { FREE_SLOTS, -1, 0 }, add_job = { READY_JOBS, 1, 0 };

	for (long i = (long)arg; i < JOBS; i += PRODUCERS) {
		lk_semop(counts, &take_slot, 1, NULL); /* sleeps while the ring is full */
		lk_mutex_lock(&queue_lock);
		queue[tail++ % SLOTS] = i;
		lk_mutex_unlock(&queue_lock);
		lk_semop(counts, &add_job, 1, NULL);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	struct lk_sembuf take_job = { READY_JOBS, -1, 0 }, free_slot = { FREE_SLOTS, 1, 0 };

	for (long n = 0; n < JOBS / CONSUMERS; n++) {
		long job;

		lk_semop(counts, &take_job, 1, NULL); /* sleeps until a job is there */
		lk_mutex_lock(&queue_lock);
		job = queue[head++ % SLOTS];
		lk_mutex_unlock(&queue_lock);
		lk_semop(counts, &free_slot, 1, NULL);
		lk_spin_lock(&tally_lock);
		tally += job;
		lk_spin_unlock(&tally_lock);
	}
	(void)arg;
	return NULL;
}

int main(void)
{
	pthread_t p[PRODUCERS], c[CONSUMERS];
	struct lk_semset_stats st;
	int err = lk_semset_create(&counts, NULL, 2, 0);

	if (err || (err = lk_semctl(counts, FREE_SLOTS, LK_SETVAL, SLOTS))) {
		fprintf(stderr, "semaphore set: %s\n", lk_last_error());
		return 1;
	}
	for (long i = 0; i < CONSUMERS; i++)
		pthread_create(&c[i], NULL, consumer, (void *)i);
	for (long i = 0; i < PRODUCERS; i++)
		pthread_create(&p[i], NULL, producer, (void *)i);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(p[i], NULL);
	for (int i = 0; i < CONSUMERS; i++)
		pthread_join(c[i], NULL);
	printf("tally %ld (expected %ld)\n\n", tally, (long)JOBS * (JOBS - 1) / 2);

	lk_lockstat_report(stdout, 0);
	lk_semset_stats(counts, &st);
	printf("\nthe set: %lu calls on one semaphore, %lu sleeps, %lu wake-ups; its locks: free %lu, "
	       "contended %lu, waited %lu ns (%.2f/1000 of CPU time)\n",
	       (unsigned long)st.simple_ops, (unsigned long)st.sleeps, (unsigned long)st.wakeups,
	       (unsigned long)st.free, (unsigned long)st.contended, (unsigned long)st.wait_ns,
	       st.wait_per_mille);
	lk_semset_close(counts);
	return tally == (long)JOBS * (JOBS - 1) / 2 ? 0 : 1;
}
