// SPDX-License-Identifier: MIT
/*
 * The locks inside a semaphore set: the three-state futex lock of lk_mutex_t (see
 * src/lock/mutex.c), in the set's memory, with the figures seed 004 printed for the ipc lock.
 * A shared set's locks use process-shared futexes.
 */
#include "sem/sem_internal.h"

#define SPINS 64

void lk__semlock_slow(struct semlock *l, bool shared)
{
	uint64_t start = lk__lock_ticks();
	bool got = false;

	for (int i = 0; i < SPINS && !got; i++) {
		uint32_t free_word = 0;

		lk__cpu_relax();
		got = __atomic_load_n(&l->word, __ATOMIC_RELAXED) == 0 &&
		      __atomic_compare_exchange_n(&l->word, &free_word, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
	}
	if (!got)
		while (__atomic_exchange_n(&l->word, 2, __ATOMIC_ACQUIRE) != 0)
			lk__futex_wait(&l->word, 2, shared);
	/* holding it now: the figures are ours to change */
	LK__ST(l->contended, LK__LD(l->contended) + 1);
	LK__ST(l->wait, LK__LD(l->wait) + (lk__lock_ticks() - start));
}
