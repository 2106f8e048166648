/* SPDX-License-Identifier: MIT */
/*
 * The inline fast paths of lk_mutex_t, lk_spinlock_t and lk_rwlock_t, included by lowkey/lock.h
 * after their declarations: an uncontended acquisition or release never leaves these; contention
 * goes to the library's slow paths, declared here too. Nothing here is API.
 */
#ifndef LOWKEY_BITS_LOCK_INLINE_H
#define LOWKEY_BITS_LOCK_INLINE_H

#ifndef LOWKEY_LOCK_H
#error "include <lowkey/lock.h>, not <lowkey/bits/lock_inline.h>"
#endif

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <lowkey/bits/compiler.h>
#include <lowkey/bits/lock_hold.h>

LK_BEGIN_DECLS

LK_API void lk__mutex_lock_slow(lk_mutex_t *m);
LK_API void lk__mutex_wake(lk_mutex_t *m);

static inline void lk_mutex_lock(lk_mutex_t *m)
{
	uint32_t expected = 0;

	if (LK__UNLIKELY(!__atomic_compare_exchange_n(&m->lk__word, &expected, 1, false,
						      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
		lk__mutex_lock_slow(m);
		return;
	}
	lk__exclusive_acquired(&m->lk__acq, &m->lk__owner, &m->lk__owner_changes, &m->lk__hold,
			       &m->lk__meta);
}

static inline int lk_mutex_trylock(lk_mutex_t *m)
{
	uint32_t expected = 0;

	if (!__atomic_compare_exchange_n(&m->lk__word, &expected, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return -EBUSY;
	lk__exclusive_acquired(&m->lk__acq, &m->lk__owner, &m->lk__owner_changes, &m->lk__hold,
			       &m->lk__meta);
	return 0;
}

static inline void lk_mutex_unlock(lk_mutex_t *m)
{
	lk__hold_end(&m->lk__hold);
	if (LK__UNLIKELY(__atomic_exchange_n(&m->lk__word, 0, __ATOMIC_RELEASE) == 2))
		lk__mutex_wake(m);
}

LK_API void lk__spin_lock_slow(lk_spinlock_t *s);

static inline void lk_spin_lock(lk_spinlock_t *s)
{
	uint32_t expected = 0;

	if (LK__UNLIKELY(!__atomic_compare_exchange_n(&s->lk__word, &expected, 1, false,
						      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
		lk__spin_lock_slow(s);
		return;
	}
	lk__exclusive_acquired(&s->lk__acq, &s->lk__owner, &s->lk__owner_changes, &s->lk__hold,
			       &s->lk__meta);
}

static inline int lk_spin_trylock(lk_spinlock_t *s)
{
	uint32_t expected = 0;

	if (!__atomic_compare_exchange_n(&s->lk__word, &expected, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return -EBUSY;
	lk__exclusive_acquired(&s->lk__acq, &s->lk__owner, &s->lk__owner_changes, &s->lk__hold,
			       &s->lk__meta);
	return 0;
}

static inline void lk_spin_unlock(lk_spinlock_t *s)
{
	lk__hold_end(&s->lk__hold);
	__atomic_store_n(&s->lk__word, 0, __ATOMIC_RELEASE);
}

#define LK__RW_READERS 0x3fffffffu /* reader count; all ones: write-locked */
#define LK__RW_WRITE_LOCKED LK__RW_READERS
#define LK__RW_READERS_WAITING 0x40000000u
#define LK__RW_WRITERS_WAITING 0x80000000u

LK_API void lk__rw_read_lock_slow(lk_rwlock_t *l);
LK_API void lk__rw_write_lock_slow(lk_rwlock_t *l);
LK_API void lk__rw_read_sample_begin(lk_rwlock_t *l);
LK_API void lk__rw_read_sample_end(lk_rwlock_t *l);
LK_API void lk__rw_wake(lk_rwlock_t *l, uint32_t state);

static inline bool lk__rw_readable(uint32_t s)
{
	return !(s & (LK__RW_READERS_WAITING | LK__RW_WRITERS_WAITING)) &&
	       (s & LK__RW_READERS) < LK__RW_READERS - 1;
}

static inline void lk__rw_read_acquired(lk_rwlock_t *l)
{
	uint64_t n = __atomic_fetch_add(&l->lk__read_acq, 1, __ATOMIC_RELAXED);

	if (LK__UNLIKELY(n == 0))
		lk__lock_first_use(&l->lk__meta);
	if (LK__UNLIKELY(lk__hold_sampled(n)))
		lk__rw_read_sample_begin(l);
}

static inline void lk_rwlock_read_lock(lk_rwlock_t *l)
{
	uint32_t s = LK__LD(l->lk__state);

	if (LK__LIKELY(lk__rw_readable(s)) &&
	    LK__LIKELY(__atomic_compare_exchange_n(&l->lk__state, &s, s + 1, false,
						   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
		lk__rw_read_acquired(l);
		return;
	}
	lk__rw_read_lock_slow(l);
}

static inline int lk_rwlock_read_trylock(lk_rwlock_t *l)
{
	uint32_t s = LK__LD(l->lk__state);

	while (lk__rw_readable(s)) {
		if (__atomic_compare_exchange_n(&l->lk__state, &s, s + 1, true, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			lk__rw_read_acquired(l);
			return 0;
		}
	}
	return -EBUSY;
}

static inline void lk_rwlock_read_unlock(lk_rwlock_t *l)
{
	uint32_t s;

	if (LK__UNLIKELY(LK__LD(l->lk__read_timing)))
		lk__rw_read_sample_end(l);
	s = __atomic_sub_fetch(&l->lk__state, 1, __ATOMIC_RELEASE);
	if (LK__UNLIKELY(!(s & LK__RW_READERS) && s)) /* the last reader out, and someone waits */
		lk__rw_wake(l, s);
}

static inline void lk_rwlock_write_lock(lk_rwlock_t *l)
{
	uint32_t expected = 0;

	if (LK__UNLIKELY(!__atomic_compare_exchange_n(&l->lk__state, &expected, LK__RW_WRITE_LOCKED,
						      false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
		lk__rw_write_lock_slow(l);
		return;
	}
	lk__exclusive_acquired(&l->lk__acq, &l->lk__owner, &l->lk__owner_changes, &l->lk__hold,
			       &l->lk__meta);
}

static inline int lk_rwlock_write_trylock(lk_rwlock_t *l)
{
	uint32_t s = LK__LD(l->lk__state);

	while (!(s & LK__RW_READERS)) {
		/* keep the waiting bits: sleepers still need their wake-up at unlock */
		if (__atomic_compare_exchange_n(&l->lk__state, &s, s | LK__RW_WRITE_LOCKED, true,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			lk__exclusive_acquired(&l->lk__acq, &l->lk__owner, &l->lk__owner_changes,
					       &l->lk__hold, &l->lk__meta);
			return 0;
		}
	}
	return -EBUSY;
}

static inline void lk_rwlock_write_unlock(lk_rwlock_t *l)
{
	uint32_t s;

	lk__hold_end(&l->lk__hold);
	s = __atomic_sub_fetch(&l->lk__state, LK__RW_WRITE_LOCKED, __ATOMIC_RELEASE);
	if (LK__UNLIKELY(s))
		lk__rw_wake(l, s);
}

LK_END_DECLS

#endif
