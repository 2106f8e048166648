// SPDX-License-Identifier: MIT
/*
 * `lowkey bench sem`: sembench (Chris Mason's, which Manfred Spraul ran for "ipc/sem.c:
 * Optimization for reducing spinlock contention" as `-t 250 -w 64 -o 0 -r 30`), re-done. THREADS
 * workers each sleep on a semaphore of their own; a main thread finds up to WAKE of them asleep
 * and wakes them with one call (one semop with WAKE operations). Workers count their wake-ups
 * ("burns"); the main thread counts the rounds in which it found nobody to wake ("main thread
 * burns"). One run with one implementation: the kernel's System V semaphores (ipc), lk_semset
 * (lowkey), bare futexes (futex) or polling workers (nanosleep).
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "sem_bench.h"

struct worker {
	struct sembench *b;
	int id;
	int waiting; /* set by the worker before it sleeps; cleared by the main thread as it wakes it */
	uint32_t word; /* futex and nanosleep modes */
	uint64_t burns;
	pthread_t thread;
} __attribute__((aligned(64)));

struct sembench {
	enum mode mode;
	int nthreads, wake;
	bool bind;
	int ncpus;
	struct worker *workers;
	int semid;
	struct lk_semset *set;
	int stop;
};

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void futex_wait(uint32_t *word, uint32_t expected)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void worker_wait(struct sembench *b, struct worker *w)
{
	struct lk_sembuf down = { (unsigned short)w->id, -1, 0 };
	struct timespec nap = { 0, 50 * 1000 };

	switch (b->mode) {
	case MODE_IPC:
		while (semop(b->semid, (struct sembuf *)&down, 1) != 0 && errno == EINTR)
			;
		break;
	case MODE_LOWKEY:
		while (lk_semop(b->set, &down, 1, NULL) == -EINTR)
			;
		break;
	case MODE_FUTEX:
		while (!__atomic_exchange_n(&w->word, 0, __ATOMIC_ACQUIRE))
			futex_wait(&w->word, 0);
		break;
	default:
		while (!__atomic_exchange_n(&w->word, 0, __ATOMIC_ACQUIRE))
			nanosleep(&nap, NULL);
		break;
	}
}

/* Wake the workers in batch[0..n): one call for the semaphores, one futex wake each for futex. */
static void wake_batch(struct sembench *b, const int *batch, int n)
{
	struct lk_sembuf ups[512];

	switch (b->mode) {
	case MODE_IPC:
	case MODE_LOWKEY:
		for (int i = 0; i < n; i++)
			ups[i] = (struct lk_sembuf){ (unsigned short)batch[i], 1, 0 };
		if (b->mode == MODE_IPC)
			semop(b->semid, (struct sembuf *)ups, (size_t)n);
		else
			lk_semop(b->set, ups, (size_t)n, NULL);
		break;
	case MODE_FUTEX:
		for (int i = 0; i < n; i++) {
			__atomic_store_n(&b->workers[batch[i]].word, 1, __ATOMIC_RELEASE);
			futex_wake(&b->workers[batch[i]].word);
		}
		break;
	default:
		for (int i = 0; i < n; i++)
			__atomic_store_n(&b->workers[batch[i]].word, 1, __ATOMIC_RELEASE);
		break;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct sembench *b = w->b;

	if (b->bind)
		lkb_pin(b->ncpus > 1 ? 1 + w->id % (b->ncpus - 1) : 0);
	for (;;) {
		__atomic_store_n(&w->waiting, 1, __ATOMIC_RELEASE);
		worker_wait(b, w);
		if (__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE))
			return NULL;
		w->burns++;
	}
}

static uint64_t now_ns(void)
{
	return lkb_now_ns();
}

/* The main thread: find sleepers round-robin, wake up to WAKE at a time. */
static uint64_t main_loop(struct sembench *b, uint64_t duration_ns)
{
	uint64_t end = now_ns() + duration_ns, burns = 0;
	int batch[512], cursor = 0;

	for (unsigned long round = 0;; round++) {
		int k = 0, n;

		if ((round & 63) == 0 && now_ns() >= end)
			break;
		for (n = 0; n < b->nthreads && k < b->wake; n++) {
			struct worker *w = &b->workers[(cursor + n) % b->nthreads];
			int one = 1;

			if (__atomic_load_n(&w->waiting, __ATOMIC_ACQUIRE) &&
			    __atomic_compare_exchange_n(&w->waiting, &one, 0, false,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				batch[k++] = w->id;
		}
		cursor = (cursor + n) % b->nthreads;
		if (!k) {
			burns++;
			relax();
			continue;
		}
		wake_batch(b, batch, k);
	}
	return burns;
}

/* Let every worker out: stop, then one up for each (more than WAKE at a time is fine here). */
static void release_all(struct sembench *b)
{
	int batch[128];

	__atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
	for (int base = 0; base < b->nthreads; base += 128) {
		int n = b->nthreads - base < 128 ? b->nthreads - base : 128;

		for (int i = 0; i < n; i++)
			batch[i] = base + i;
		wake_batch(b, batch, n);
	}
}

/* ---- one run ---- */

/* The measured loop's share of a set's figures: after - before, over `seconds`. */
static void stats_delta(struct lk_semset_stats *after, const struct lk_semset_stats *before,
			double seconds)
{
	int cpus = lkb_ncpus();

	after->free -= before->free;
	after->contended -= before->contended;
	after->wait_ns -= before->wait_ns;
	after->simple_ops -= before->simple_ops;
	after->global_ops -= before->global_ops;
	after->global_mode_entries -= before->global_mode_entries;
	after->sleeps -= before->sleeps;
	after->wakeups -= before->wakeups;
	after->wait_avg_ns = after->contended ? after->wait_ns / after->contended : 0;
	after->lifetime_ns = (uint64_t)(seconds * 1e9);
	after->wait_per_mille =
		seconds > 0 ?
			(double)after->wait_ns / (seconds * 1e9 * (cpus > 0 ? cpus : 1)) * 1000 :
			0;
}

static int setup_mode(struct sembench *b)
{
	int err;

	switch (b->mode) {
	case MODE_IPC:
		b->semid = semget(IPC_PRIVATE, b->nthreads, IPC_CREAT | 0600);
		if (b->semid < 0) {
			fprintf(stderr,
				"lowkey bench sem: semget of %d semaphores: %s\nhint: see kernel.sem (SEMMSL) in "
				"/proc/sys/kernel/sem\n",
				b->nthreads, strerror(errno));
			return -errno;
		}
		return 0;
	case MODE_LOWKEY:
		err = lk_semset_create(&b->set, NULL, (unsigned int)b->nthreads, 0);
		if (err)
			fprintf(stderr, "lowkey bench sem: lk_semset_create: %s\n",
				lk_last_error());
		return err;
	default:
		return 0;
	}
}

static void teardown_mode(struct sembench *b)
{
	if (b->mode == MODE_IPC)
		semctl(b->semid, 0, IPC_RMID);
	if (b->mode == MODE_LOWKEY)
		lk_semset_close(b->set);
}

/* Start the workers; returns how many started. */
static int start_workers(struct sembench *b)
{
	for (int i = 0; i < b->nthreads; i++) {
		b->workers[i].b = b;
		b->workers[i].id = i;
		if (pthread_create(&b->workers[i].thread, NULL, worker_main, &b->workers[i]) != 0)
			return i;
	}
	return b->nthreads;
}

/* The measured loop, with the kernel's tracepoints and lk_semset's counters on only around it. */
static void measure(struct sembench *b, struct ktrace *trace, double seconds, struct run_result *r)
{
	struct lk_semset_stats before;
	uint64_t t0;

	if (b->mode == MODE_LOWKEY)
		lk_semset_stats(b->set, &before);
	if (trace->ncpus)
		ktrace_enable(trace, true);
	t0 = now_ns();
	r->main_burns = main_loop(b, (uint64_t)(seconds * 1e9));
	r->seconds = (double)(now_ns() - t0) / 1e9;
	if (trace->ncpus)
		ktrace_enable(trace, false);
	if (b->mode == MODE_LOWKEY) {
		lk_semset_stats(b->set, &r->lk);
		stats_delta(&r->lk, &before, r->seconds);
	}
}

static void count_burns(const struct sembench *b, struct run_result *r)
{
	r->min_burns = UINT64_MAX;
	for (int i = 0; i < b->nthreads; i++) {
		uint64_t n = b->workers[i].burns;

		r->burns += n;
		r->min_burns = n < r->min_burns ? n : r->min_burns;
		r->max_burns = n > r->max_burns ? n : r->max_burns;
	}
}

int sembench_run(enum mode mode, const struct sem_options *o, struct run_result *r)
{
	struct sembench b = { .mode = mode,
			      .nthreads = o->nthreads,
			      .wake = o->wake,
			      .bind = o->bind,
			      .ncpus = lkb_ncpus() };
	struct ktrace trace;
	int err;

	memset(r, 0, sizeof(*r));
	b.workers = aligned_alloc(64, sizeof(*b.workers) * (size_t)b.nthreads);
	if (!b.workers)
		return -ENOMEM;
	memset(b.workers, 0, sizeof(*b.workers) * (size_t)b.nthreads);
	err = setup_mode(&b);
	if (err) {
		free(b.workers);
		return err;
	}
	if (b.bind)
		lkb_pin(0);
	/* opened (disabled) before the threads exist so that they inherit it; enabling it reaches
	 * the inherited copies too, so only the measured loop is traced */
	if (ktrace_open(&trace, &r->kernel) != 0)
		trace.ncpus = 0;
	b.nthreads = start_workers(&b);
	measure(&b, &trace, o->seconds, r);
	release_all(&b);
	for (int i = 0; i < b.nthreads; i++)
		pthread_join(b.workers[i].thread, NULL);
	if (trace.ncpus) {
		ktrace_figures(&trace, &r->kernel);
		ktrace_close(&trace);
	}
	count_burns(&b, r);
	teardown_mode(&b);
	free(b.workers);
	return b.nthreads > 0 ? 0 : -EAGAIN;
}
