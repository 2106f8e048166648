// SPDX-License-Identifier: MIT
/*
 * lk_rwlock_t: the slow paths.
 *
 * One 32-bit state word: the number of readers inside (or all ones, LK__RW_WRITE_LOCKED, while a
 * writer is), plus two flags, READERS_WAITING and WRITERS_WAITING, that sleepers set before they
 * sleep. Readers sleep on the state word itself; writers on writer_seq, which a waker bumps before
 * it wakes one, so a writer that is about to sleep sees the bump and does not sleep.
 *
 * A set WRITERS_WAITING keeps new readers out, so writers do not starve. When the lock becomes
 * free with sleepers, lk__rw_wake() hands it on: to one writer if one is asleep, else to all the
 * readers. A waking writer that takes the lock sets WRITERS_WAITING again, because it cannot know
 * whether other writers still sleep: at worst that costs one wake-up that finds nobody, after
 * which the readers are woken.
 *
 * All orderings on the slow paths are sequentially consistent: a sleeper's "set flag, read
 * writer_seq, read state" must not pass a waker's "change state, bump writer_seq".
 */
#include <errno.h>
#include <string.h>

#include "core/error.h"
#include "lock/lock_internal.h"

#define RW_SPINS 64
#define SEQ __ATOMIC_SEQ_CST

LK_API int lk_rwlock_init(lk_rwlock_t *l, const char *name)
{
	if (!l)
		return lk__fail(-EINVAL, "lk_rwlock_init: NULL rwlock");
	memset(l, 0, sizeof(*l));
	lk__lockmeta_init(&l->lk__meta, name, LK_LOCK_RWLOCK);
	return 0;
}

LK_API int lk_rwlock_destroy(lk_rwlock_t *l)
{
	if (!l)
		return lk__fail(-EINVAL, "lk_rwlock_destroy: NULL rwlock");
	if (__atomic_load_n(&l->lk__state, __ATOMIC_ACQUIRE) & LK__RW_READERS)
		return lk__fail(-EBUSY, "lk_rwlock_destroy: rwlock '%s' is held; unlock it first",
				l->lk__meta.name ? l->lk__meta.name : "");
	lk__lock_unregister(&l->lk__meta);
	return 0;
}

LK_API void lk__rw_read_lock_slow(lk_rwlock_t *l)
{
	uint64_t start = lk__lock_ticks();
	uint32_t s = __atomic_load_n(&l->lk__state, SEQ);
	bool waited = false;
	int spins = 0;

	for (;;) {
		if (lk__rw_readable(s)) {
			if (__atomic_compare_exchange_n(&l->lk__state, &s, s + 1, true, SEQ, SEQ))
				break;
			continue; /* another reader moved the count: not contention */
		}
		waited = true;
		if (spins++ < RW_SPINS) {
			lk__cpu_relax();
			s = __atomic_load_n(&l->lk__state, SEQ);
			continue;
		}
		if (!(s & LK__RW_READERS_WAITING)) {
			if (!__atomic_compare_exchange_n(
				    &l->lk__state, &s, s | LK__RW_READERS_WAITING, false, SEQ, SEQ))
				continue;
			s |= LK__RW_READERS_WAITING;
		}
		lk__futex_wait(&l->lk__state, s, false);
		s = __atomic_load_n(&l->lk__state, SEQ);
	}
	if (waited)
		lk__wait_account_atomic(&l->lk__meta, lk__lock_ticks() - start);
	lk__rw_read_acquired(l);
}

LK_API void lk__rw_write_lock_slow(lk_rwlock_t *l)
{
	uint64_t start = lk__lock_ticks();
	uint32_t also = 0; /* WRITERS_WAITING once we have slept: others may sleep too */
	bool waited = false;
	int spins = 0;

	for (;;) {
		uint32_t s = __atomic_load_n(&l->lk__state, SEQ), seq;

		while (!(s & LK__RW_READERS)) {
			if (__atomic_compare_exchange_n(&l->lk__state, &s,
							s | LK__RW_WRITE_LOCKED | also, true, SEQ,
							SEQ))
				goto acquired;
		}
		waited = true;
		if (spins++ < RW_SPINS) {
			lk__cpu_relax();
			continue;
		}
		if (!(s & LK__RW_WRITERS_WAITING) &&
		    !__atomic_compare_exchange_n(&l->lk__state, &s, s | LK__RW_WRITERS_WAITING,
						 false, SEQ, SEQ))
			continue;
		seq = __atomic_load_n(&l->lk__writer_seq, SEQ);
		s = __atomic_load_n(&l->lk__state, SEQ);
		if ((s & LK__RW_READERS) && (s & LK__RW_WRITERS_WAITING))
			lk__futex_wait(&l->lk__writer_seq, seq, false);
		also = LK__RW_WRITERS_WAITING;
	}
acquired:
	if (waited)
		lk__wait_account_atomic(&l->lk__meta, lk__lock_ticks() - start);
	lk__exclusive_acquired(&l->lk__acq, &l->lk__owner, &l->lk__owner_changes, &l->lk__hold,
			       &l->lk__meta);
}

/* Wake one sleeping writer; whether one was asleep. */
static bool wake_writer(lk_rwlock_t *l)
{
	__atomic_fetch_add(&l->lk__writer_seq, 1, SEQ);
	return lk__futex_wake(&l->lk__writer_seq, 1, false) > 0;
}

/* The lock was just left free with waiting flags in s: hand it on. */
LK_API void lk__rw_wake(lk_rwlock_t *l, uint32_t s)
{
	for (;;) {
		if (s & LK__RW_READERS)
			return; /* taken again: its unlock will hand it on */
		if (s & LK__RW_WRITERS_WAITING) {
			if (!__atomic_compare_exchange_n(&l->lk__state, &s,
							 s & ~LK__RW_WRITERS_WAITING, false, SEQ,
							 SEQ))
				continue;
			if (wake_writer(l))
				return;
			/* no writer was asleep (the flag was left by one that no longer waits): readers */
			s = __atomic_load_n(&l->lk__state, SEQ);
			continue;
		}
		if (s & LK__RW_READERS_WAITING) {
			if (!__atomic_compare_exchange_n(&l->lk__state, &s,
							 s & ~LK__RW_READERS_WAITING, false, SEQ,
							 SEQ))
				continue;
			lk__futex_wake(&l->lk__state, INT_MAX, false);
		}
		return;
	}
}

/* ---- timing shared holds: the start is kept per thread ---- */

#define READ_SAMPLES 4

static __thread struct {
	const lk_rwlock_t *lock;
	uint64_t start;
} read_samples[READ_SAMPLES];

LK_API void lk__rw_read_sample_begin(lk_rwlock_t *l)
{
	for (int i = 0; i < READ_SAMPLES; i++) {
		if (!read_samples[i].lock) {
			__atomic_fetch_add(&l->lk__read_timing, 1, __ATOMIC_RELAXED);
			read_samples[i].lock = l;
			read_samples[i].start = lk__lock_ticks();
			return;
		}
	}
	/* this thread already times READ_SAMPLES nested holds: this one goes untimed */
}

LK_API void lk__rw_read_sample_end(lk_rwlock_t *l)
{
	for (int i = 0; i < READ_SAMPLES; i++) {
		if (read_samples[i].lock == l) {
			uint64_t held = lk__lock_ticks() - read_samples[i].start;
			struct lk__hold *h = &l->lk__read_hold;

			__atomic_fetch_add(&h->samples, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&h->total, held, __ATOMIC_RELAXED);
			lk__atomic_max(&h->max, held);
			read_samples[i].lock = NULL;
			__atomic_fetch_sub(&l->lk__read_timing, 1, __ATOMIC_RELAXED);
			return;
		}
	}
}
