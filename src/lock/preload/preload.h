/* SPDX-License-Identifier: MIT */
/*
 * Internal to liblowkey-locks.so, the LD_PRELOAD library behind `lowkey locks`.
 *
 * Rules every wrapper follows, so that the profiled program behaves as without us:
 *  - It calls the real function exactly as the program would have, returns its result and leaves
 *    errno as that call left it. The only extra call is a try-lock before a blocking lock, which is
 *    how contention is detected; it changes no lock's state unless it acquires, in which case the
 *    blocking call is not made.
 *  - Until the per-process table exists (start-up, fork children before their first lock, a
 *    missing $LOWKEY_LOCKS_DIR, a failed mmap) it passes straight through.
 *  - It takes no lock of its own, allocates nothing and makes no system call on its way; the table
 *    is claimed with compare-and-swap. So it cannot deadlock with the program, with malloc, with
 *    the dynamic loader, or in a fork child.
 */
#ifndef LK_LOCK_PRELOAD_H
#define LK_LOCK_PRELOAD_H

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <lowkey/lock.h> /* lk__lock_ticks(), lk__lock_self(): inline only, no link dependency */

#include "internal/lock_file.h"

#define LKL_EXPORT __attribute__((visibility("default")))

/* ---- the real functions ---- */

struct lkl_real {
	int (*mutex_lock)(pthread_mutex_t *);
	int (*mutex_trylock)(pthread_mutex_t *);
	int (*mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
	int (*mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
	int (*mutex_unlock)(pthread_mutex_t *);
	int (*mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
	int (*mutex_destroy)(pthread_mutex_t *);
	int (*rwlock_rdlock)(pthread_rwlock_t *);
	int (*rwlock_tryrdlock)(pthread_rwlock_t *);
	int (*rwlock_timedrdlock)(pthread_rwlock_t *, const struct timespec *);
	int (*rwlock_clockrdlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*rwlock_wrlock)(pthread_rwlock_t *);
	int (*rwlock_trywrlock)(pthread_rwlock_t *);
	int (*rwlock_timedwrlock)(pthread_rwlock_t *, const struct timespec *);
	int (*rwlock_clockwrlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*rwlock_unlock)(pthread_rwlock_t *);
	int (*rwlock_init)(pthread_rwlock_t *, const pthread_rwlockattr_t *);
	int (*rwlock_destroy)(pthread_rwlock_t *);
	int (*spin_lock)(pthread_spinlock_t *);
	int (*spin_trylock)(pthread_spinlock_t *);
	int (*spin_unlock)(pthread_spinlock_t *);
	int (*spin_init)(pthread_spinlock_t *, int);
	int (*spin_destroy)(pthread_spinlock_t *);
	int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
	int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	int (*cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
			      const struct timespec *);
	int (*sem_wait)(sem_t *);
	int (*sem_trywait)(sem_t *);
	int (*sem_timedwait)(sem_t *, const struct timespec *);
	int (*sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
	int (*sem_post)(sem_t *);
	int (*sem_init)(sem_t *, int, unsigned int);
	int (*sem_destroy)(sem_t *);
};

extern struct lkl_real lkl_real;

/* Fill lkl_real (idempotent; every thread may call it). false while this thread is inside it. */
bool lkl_resolve(void);

/*
 * REAL(fn): the real function, resolving on first use. A NULL result is only possible for a
 * function this libc lacks (pthread_mutex_clocklock before glibc 2.30) or for a call made from
 * inside the resolution itself; the wrappers then return ENOSYS/-1 (see real.c).
 */
#define REAL(fn)                                            \
	(__atomic_load_n(&lkl_real.fn, __ATOMIC_RELAXED) ?: \
		 (lkl_resolve(), __atomic_load_n(&lkl_real.fn, __ATOMIC_RELAXED)))

/* ---- the table ---- */

/* Whether wrappers should record: the table is ready. One load, except before the first start. */
extern int lkl_state;
enum { LKL_UNINIT, LKL_STARTING, LKL_READY, LKL_OFF };
void lkl_start(void);

static inline bool lkl_ready(void)
{
	int s = __atomic_load_n(&lkl_state, __ATOMIC_ACQUIRE);

	if (__builtin_expect(s == LKL_READY, 1))
		return true;
	if (s != LKL_UNINIT)
		return false;
	lkl_start();
	return __atomic_load_n(&lkl_state, __ATOMIC_ACQUIRE) == LKL_READY;
}

/* The entry of the lock at addr, claimed if create and there is room; NULL otherwise. */
struct lkl_entry *lkl_find(const void *addr, enum lkl_kind kind, bool create);

/* The lock at addr was destroyed or re-initialized: its figures stay, a new lock gets a new entry. */
void lkl_retire(const void *addr, enum lkl_kind kind);

/* ---- bookkeeping ---- */

#define LKL_NO_WAIT UINT64_MAX

#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

extern uint64_t lkl_hold_threshold;

static inline bool lkl_sampled(uint64_t n)
{
	return n * 0x9E3779B97F4A7C15ull <= lkl_hold_threshold;
}

static inline void lkl_max(uint64_t *p, uint64_t v)
{
	uint64_t cur = LD(*p);

	while (v > cur &&
	       !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* An acquisition succeeded (0, or EOWNERDEAD from a robust mutex: the caller holds it then too). */
static inline bool lkl_acquired(int ret)
{
	return ret == 0 || ret == EOWNERDEAD;
}

/*
 * Book an exclusive acquisition of e by the calling thread: `waited` ticks (LKL_NO_WAIT when the
 * try-lock got it), at return address ra. Runs holding the lock, so plain stores suffice, except
 * for the counters rwlock readers share (wait figures), which are atomic.
 */
void lkl_exclusive_acquired(struct lkl_entry *e, uint64_t waited, uintptr_t ra,
			    bool recursive_kind);

/* Book an exclusive release by the calling thread; `checks_owner`: the real unlock fails unless
 * the caller holds the lock (error-checking, recursive, robust mutexes). */
void lkl_exclusive_released(struct lkl_entry *e, bool checks_owner);

/* Shared acquisitions (rwlock readers, semaphore waits): atomic counters. */
void lkl_shared_acquired(struct lkl_entry *e, uint64_t waited, uintptr_t ra, bool time_hold);
void lkl_shared_released(struct lkl_entry *e);

void lkl_try_failed(struct lkl_entry *e);

#define LKL_RA() ((uintptr_t)__builtin_return_address(0))

#endif
