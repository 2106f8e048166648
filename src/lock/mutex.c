// SPDX-License-Identifier: MIT
/*
 * lk_mutex_t and lk_spinlock_t: the slow paths (see include/lowkey/lock.h for the fast ones).
 *
 * The mutex word is the classic three-state futex lock: 0 free, 1 held, 2 held and a waiter may
 * sleep. A contended locker spins a little (most holds are short), then swaps in 2 and sleeps
 * until it swaps 2 into a free word. An unlocker that swaps out a 2 wakes one sleeper. Taking the
 * lock with 1 while others sleep is safe: the unlock that freed the word already woke one of
 * them, and that one marks the word 2 again before it sleeps.
 *
 * The waiter times its wait from entering the slow path to holding the lock, and books it on the
 * lock's second cache line while it holds the lock: no atomics needed for the figures.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "core/error.h"
#include "lock/lock_internal.h"

#define MUTEX_SPINS 64 /* rounds of pause before sleeping (a few microseconds) */
#define SPIN_ROUND 256 /* rounds of pause between two sched_yield() of a spinlock */

LK_API int lk_mutex_init(lk_mutex_t *m, const char *name)
{
	if (!m)
		return lk__fail(-EINVAL, "lk_mutex_init: NULL mutex");
	memset(m, 0, sizeof(*m));
	lk__lockmeta_init(&m->lk__meta, name, LK_LOCK_MUTEX);
	return 0;
}

LK_API int lk_mutex_destroy(lk_mutex_t *m)
{
	if (!m)
		return lk__fail(-EINVAL, "lk_mutex_destroy: NULL mutex");
	if (__atomic_load_n(&m->lk__word, __ATOMIC_ACQUIRE))
		return lk__fail(-EBUSY, "lk_mutex_destroy: mutex '%s' is held; unlock it first",
				m->lk__meta.name ? m->lk__meta.name : "");
	lk__lock_unregister(&m->lk__meta);
	return 0;
}

static bool mutex_spin(lk_mutex_t *m)
{
	for (int i = 0; i < MUTEX_SPINS; i++) {
		uint32_t free_word = 0;

		lk__cpu_relax();
		if (__atomic_load_n(&m->lk__word, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&m->lk__word, &free_word, 1, false,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return true;
	}
	return false;
}

LK_API void lk__mutex_lock_slow(lk_mutex_t *m)
{
	uint64_t start = lk__lock_ticks();

	if (!mutex_spin(m)) {
		while (__atomic_exchange_n(&m->lk__word, 2, __ATOMIC_ACQUIRE) != 0)
			lk__futex_wait(&m->lk__word, 2, false);
	}
	lk__wait_account(&m->lk__meta, lk__lock_ticks() - start);
	lk__exclusive_acquired(&m->lk__acq, &m->lk__owner, &m->lk__owner_changes, &m->lk__hold,
			       &m->lk__meta);
}

LK_API void lk__mutex_wake(lk_mutex_t *m)
{
	lk__futex_wake(&m->lk__word, 1, false);
}

LK_API int lk_spinlock_init(lk_spinlock_t *s, const char *name)
{
	if (!s)
		return lk__fail(-EINVAL, "lk_spinlock_init: NULL spinlock");
	memset(s, 0, sizeof(*s));
	lk__lockmeta_init(&s->lk__meta, name, LK_LOCK_SPINLOCK);
	return 0;
}

LK_API int lk_spinlock_destroy(lk_spinlock_t *s)
{
	if (!s)
		return lk__fail(-EINVAL, "lk_spinlock_destroy: NULL spinlock");
	if (__atomic_load_n(&s->lk__word, __ATOMIC_ACQUIRE))
		return lk__fail(-EBUSY,
				"lk_spinlock_destroy: spinlock '%s' is held; unlock it first",
				s->lk__meta.name ? s->lk__meta.name : "");
	lk__lock_unregister(&s->lk__meta);
	return 0;
}

LK_API void lk__spin_lock_slow(lk_spinlock_t *s)
{
	uint64_t start = lk__lock_ticks();

	for (;;) {
		for (int i = 0; i < SPIN_ROUND; i++) {
			uint32_t free_word = 0;

			if (__atomic_load_n(&s->lk__word, __ATOMIC_RELAXED) == 0 &&
			    __atomic_compare_exchange_n(&s->lk__word, &free_word, 1, false,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
				goto acquired;
			lk__cpu_relax();
		}
		/* The holder may have been preempted: spinning on would only delay it. */
		sched_yield();
	}
acquired:
	lk__wait_account(&s->lk__meta, lk__lock_ticks() - start);
	lk__exclusive_acquired(&s->lk__acq, &s->lk__owner, &s->lk__owner_changes, &s->lk__hold,
			       &s->lk__meta);
}
