/* SPDX-License-Identifier: MIT */
/*
 * The bookkeeping every lock's fast path does, included by lowkey/lock.h: the lock's statistics
 * fields, the clock of hold times, the holder's identity, the sampling of holds. Nothing here is
 * API.
 */
#ifndef LOWKEY_BITS_LOCK_HOLD_H
#define LOWKEY_BITS_LOCK_HOLD_H

#ifndef LOWKEY_LOCK_H
#error "include <lowkey/lock.h>, not <lowkey/bits/lock_hold.h>"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <lowkey/bits/arch.h>
#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

struct lk__lockmeta { /* the lock's second cache line: written on slow paths */
	const char *name;
	struct lk__lockmeta *next, *prev; /* registry of named locks */
	uint64_t created;		  /* ticks */
	uint64_t contended;
	uint64_t wait_total; /* ticks */
	uint64_t wait_max;
	uint16_t kind;
	uint16_t registered;
	uint32_t spare;
};

struct lk__hold {	/* sampled hold times, in ticks */
	uint64_t start; /* when the current hold is being timed; else 0 */
	uint64_t samples;
	uint64_t total;
	uint64_t max;
};

/* Every field of a statically initialized lock: zero, but for the name and the kind. */
/* clang-format off */
#define LK__HOLD_INIT { 0, 0, 0, 0 }
#define LK__LOCKMETA_INIT(name_, kind_) { (name_), LK__NULL, LK__NULL, 0, 0, 0, 0, (kind_), 0, 0 }
/* clang-format on */

/* Lock times are in ticks of the cheapest counter read (why that one: lowkey/bits/arch.h). */
static inline uint64_t lk__lock_ticks(void)
{
	return lk__arch_counter();
}

/* Identifies the calling thread without a call: its thread pointer. */
static inline uintptr_t lk__lock_self(void)
{
	return lk__arch_thread_pointer();
}

#define LK__LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define LK__ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/* Holds are timed when acquisition n * 2^64/phi falls below this (see lk_lockstat_set_hold_sampling). */
LK_API extern uint64_t lk__hold_threshold;

static inline bool lk__hold_sampled(uint64_t n)
{
	return n * 0x9E3779B97F4A7C15ull <= LK__LD(lk__hold_threshold);
}

/* The holder's bookkeeping: only the thread holding the lock exclusively writes these. */
static inline void lk__hold_begin(struct lk__hold *h, uint64_t n)
{
	if (LK__UNLIKELY(lk__hold_sampled(n)))
		LK__ST(h->start, lk__lock_ticks());
}

static inline void lk__hold_end(struct lk__hold *h)
{
	uint64_t start = LK__LD(h->start), held;

	if (LK__LIKELY(!start))
		return;
	held = lk__lock_ticks() - start;
	LK__ST(h->samples, LK__LD(h->samples) + 1);
	LK__ST(h->total, LK__LD(h->total) + held);
	if (held > LK__LD(h->max))
		LK__ST(h->max, held);
	LK__ST(h->start, 0);
}

LK_API void lk__lock_first_use(struct lk__lockmeta *meta);

/* Count an exclusive acquisition; called holding the lock. */
static inline void lk__exclusive_acquired(uint64_t *acq, uintptr_t *owner, uint64_t *changes,
					  struct lk__hold *hold, struct lk__lockmeta *meta)
{
	uint64_t n = LK__LD(*acq);
	uintptr_t me = lk__lock_self(), last = LK__LD(*owner);

	LK__ST(*acq, n + 1);
	if (LK__UNLIKELY(n == 0))
		lk__lock_first_use(meta);
	LK__ST(*changes, LK__LD(*changes) + (last != me && last != 0));
	LK__ST(*owner, me);
	lk__hold_begin(hold, n);
}

LK_END_DECLS

#endif
