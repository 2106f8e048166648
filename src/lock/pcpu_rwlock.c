// SPDX-License-Identifier: MIT
/*
 * The per-CPU reader-writer lock (see include/lowkey/lock.h).
 *
 * Each reader adds 1 to its CPU's slot, then looks at `writer`; a writer sets `writer`, then adds
 * up the slots. Both sides use sequentially consistent operations, so at least one of them sees
 * the other: either the reader sees the writer and backs out, or the writer counts the reader and
 * waits. On x86 the reader's locked add is that fence already; nothing else is paid.
 *
 * A reader may be migrated between lock and unlock; it then decrements another CPU's slot. Single
 * slots can go negative, their sum cannot, and only the sum is ever read.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/sysinfo.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <lowkey/lock.h>

#define CACHE_LINE 64

struct lk__pcpu_slot {
	long count;
} __attribute__((aligned(CACHE_LINE)));

static void futex_wait(int *word, int expected)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(int *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static unsigned int possible_cpus(void)
{
	int n = get_nprocs_conf();

	return n > 0 ? (unsigned int)n : 1;
}

/* Install slots for l once; a lost race frees its own allocation. */
static struct lk__pcpu_slot *slots_of(lk_pcpu_rwlock_t *l)
{
	struct lk__pcpu_slot *s = __atomic_load_n(&l->slots, __ATOMIC_ACQUIRE), *fresh,
			     *none = NULL;
	unsigned int n;

	if (__builtin_expect(s != NULL, 1))
		return s;
	n = possible_cpus();
	fresh = aligned_alloc(CACHE_LINE, n * sizeof(*fresh));
	if (!fresh)
		return NULL;
	for (unsigned int i = 0; i < n; i++)
		fresh[i].count = 0;
	__atomic_store_n(&l->nslots, n, __ATOMIC_RELAXED);
	/* nslots is published by the release below, before anyone can use the slots */
	if (__atomic_compare_exchange_n(&l->slots, &none, fresh, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return fresh;
	free(fresh);
	return none;
}

static long *my_slot(lk_pcpu_rwlock_t *l)
{
	struct lk__pcpu_slot *s = slots_of(l);
	int cpu;

	if (!s)
		return &l->fallback_count;
	cpu = sched_getcpu(); /* glibc reads it from rseq: no system call */
	if (cpu < 0)
		cpu = 0;
	return &s[(unsigned int)cpu % __atomic_load_n(&l->nslots, __ATOMIC_RELAXED)].count;
}

LK_API int lk_pcpu_rwlock_init(lk_pcpu_rwlock_t *l)
{
	*l = (lk_pcpu_rwlock_t)LK_PCPU_RWLOCK_INIT;
	slots_of(l);
	return 0;
}

LK_API void lk_pcpu_rwlock_destroy(lk_pcpu_rwlock_t *l)
{
	free(l->slots);
	l->slots = NULL;
}

LK_API void lk_pcpu_read_lock(lk_pcpu_rwlock_t *l)
{
	for (;;) {
		long *slot = my_slot(l);

		__atomic_fetch_add(slot, 1, __ATOMIC_SEQ_CST);
		if (__builtin_expect(!__atomic_load_n(&l->writer, __ATOMIC_SEQ_CST), 1))
			return;
		/* A writer is in or coming: step back out, let it drain us, wait for it to leave. */
		lk_pcpu_read_unlock(l);
		while (__atomic_load_n(&l->writer, __ATOMIC_ACQUIRE))
			futex_wait(&l->writer, 1);
	}
}

LK_API void lk_pcpu_read_unlock(lk_pcpu_rwlock_t *l)
{
	__atomic_fetch_sub(my_slot(l), 1, __ATOMIC_SEQ_CST);
	if (__builtin_expect(__atomic_load_n(&l->writer, __ATOMIC_SEQ_CST), 0)) {
		__atomic_fetch_add(&l->drained, 1, __ATOMIC_SEQ_CST);
		futex_wake((int *)&l->drained, INT_MAX);
	}
}

static long readers_inside(lk_pcpu_rwlock_t *l)
{
	struct lk__pcpu_slot *s = __atomic_load_n(&l->slots, __ATOMIC_ACQUIRE);
	long sum = __atomic_load_n(&l->fallback_count, __ATOMIC_SEQ_CST);

	if (s)
		for (unsigned int i = 0; i < __atomic_load_n(&l->nslots, __ATOMIC_RELAXED); i++)
			sum += __atomic_load_n(&s[i].count, __ATOMIC_SEQ_CST);
	return sum;
}

static void writer_mutex_lock(lk_pcpu_rwlock_t *l)
{
	int unlocked = 0;

	/* 0 free, 1 held, 2 held with waiters */
	if (__atomic_compare_exchange_n(&l->writer_mutex, &unlocked, 1, false, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return;
	while (__atomic_exchange_n(&l->writer_mutex, 2, __ATOMIC_ACQUIRE) != 0)
		futex_wait(&l->writer_mutex, 2);
}

static void writer_mutex_unlock(lk_pcpu_rwlock_t *l)
{
	if (__atomic_exchange_n(&l->writer_mutex, 0, __ATOMIC_RELEASE) == 2)
		futex_wake(&l->writer_mutex, 1);
}

LK_API void lk_pcpu_write_lock(lk_pcpu_rwlock_t *l)
{
	writer_mutex_lock(l);
	__atomic_store_n(&l->writer, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		unsigned int seen = __atomic_load_n(&l->drained, __ATOMIC_SEQ_CST);

		if (readers_inside(l) == 0)
			return;
		futex_wait((int *)&l->drained, (int)seen);
	}
}

LK_API void lk_pcpu_write_unlock(lk_pcpu_rwlock_t *l)
{
	__atomic_store_n(&l->writer, 0, __ATOMIC_SEQ_CST);
	futex_wake(&l->writer, INT_MAX);
	writer_mutex_unlock(l);
}
