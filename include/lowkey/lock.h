/* SPDX-License-Identifier: MIT */
/*
 * Locks.
 *
 * Per-CPU reader-writer lock (lk_pcpu_rwlock_t): for state that many threads read or update on
 * their own behalf and that changes globally only rarely -- the shape of the kernel's
 * percpu_rw_semaphore, which seed 000 used to stop thousands of tasks serializing on one mutex.
 * Readers touch only their CPU's cache line, so they do not contend with each other; a writer
 * shuts readers out and waits for those inside to leave. Writers are expected to be rare: a
 * writer costs a pass over every CPU's slot, and readers that arrive meanwhile wait.
 *
 *	static lk_pcpu_rwlock_t slots = LK_PCPU_RWLOCK_INIT;
 *
 *	lk_pcpu_read_lock(&slots);	// many threads at once
 *	...
 *	lk_pcpu_read_unlock(&slots);
 *
 *	lk_pcpu_write_lock(&slots);	// alone
 *	...
 *	lk_pcpu_write_unlock(&slots);
 */
#ifndef LOWKEY_LOCK_H
#define LOWKEY_LOCK_H

#include <stdbool.h>
#include <lowkey/bits/compiler.h>

LK_BEGIN_DECLS

struct lk__pcpu_slot;

typedef struct lk_pcpu_rwlock {
	struct lk__pcpu_slot *slots;	/* one cache line per CPU; allocated on first use */
	unsigned int nslots;
	int writer;			/* 1 while a writer holds or waits for the lock */
	int writer_mutex;		/* serializes writers (a futex word) */
	unsigned int drained;		/* bumped when a reader leaves while a writer waits (futex word) */
	long fallback_count;		/* readers' slot when allocation failed: still correct, shared */
} lk_pcpu_rwlock_t;

#define LK_PCPU_RWLOCK_INIT { 0, 0, 0, 0, 0, 0 }

/*
 * lk_pcpu_rwlock_init - initialize l (same as LK_PCPU_RWLOCK_INIT). Allocates the per-CPU slots,
 * one cache line per possible CPU. Returns 0; if memory is short the lock still works with one
 * shared slot (readers then contend on it). Not async-signal-safe.
 */
LK_API int lk_pcpu_rwlock_init(lk_pcpu_rwlock_t *l);

/* lk_pcpu_rwlock_destroy - free l's slots. No thread may hold or wait for l. */
LK_API void lk_pcpu_rwlock_destroy(lk_pcpu_rwlock_t *l);

/*
 * lk_pcpu_read_lock / lk_pcpu_read_unlock - shared access.
 * Cost without a writer: one atomic add on this CPU's cache line and one load (about 10 ns), no
 * system call; the first use of a statically initialized lock allocates its slots. While a writer
 * holds or waits for the lock, read_lock sleeps (futex) until it leaves. Readers may nest, unless
 * a writer arrives between (as with any reader-writer lock that keeps writers from starving).
 * A reader may unlock on another CPU than it locked on. Not async-signal-safe: a handler that
 * interrupts a writer would wait forever.
 */
LK_API void lk_pcpu_read_lock(lk_pcpu_rwlock_t *l);
LK_API void lk_pcpu_read_unlock(lk_pcpu_rwlock_t *l);

/*
 * lk_pcpu_write_lock / lk_pcpu_write_unlock - exclusive access.
 * Cost: serializes with other writers, then waits until every reader inside has left; a pass over
 * all CPUs' slots per check. Writers are not reentrant. Not async-signal-safe.
 */
LK_API void lk_pcpu_write_lock(lk_pcpu_rwlock_t *l);
LK_API void lk_pcpu_write_unlock(lk_pcpu_rwlock_t *l);

LK_END_DECLS

#endif
