// SPDX-License-Identifier: MIT
/*
 * pthread_mutex_* and pthread_cond_*wait.
 *
 * A blocking lock first tries the lock: if that succeeds, the acquisition was not contended and
 * the blocking call is not made; if it fails with EBUSY, the blocking call is made and timed. Any
 * other result of the try (EAGAIN for a recursion count at its limit, EOWNERDEAD from a robust
 * mutex, EINVAL for a priority ceiling) is what the blocking call would have returned too.
 *
 * The mutex kind is read from the mutex (glibc's public __data.__kind): re-locks of a recursive
 * mutex by its owner are nesting, not acquisitions; and for the kinds whose unlock checks the
 * owner, an unlock by a non-owner changes nothing (the real unlock fails with EPERM).
 */
#include "preload.h"

/* glibc's kind bits, beyond the PTHREAD_MUTEX_* type in the low two */
#define KIND_TYPE_MASK 3
#define KIND_ROBUST 16
#define KIND_PRIO_INHERIT 32
#define KIND_PRIO_PROTECT 64

static int mutex_kind(const pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED);
}

static bool recursive(const pthread_mutex_t *m)
{
	return (mutex_kind(m) & KIND_TYPE_MASK) == PTHREAD_MUTEX_RECURSIVE;
}

static bool checks_owner(const pthread_mutex_t *m)
{
	int k = mutex_kind(m), type = k & KIND_TYPE_MASK;

	return type == PTHREAD_MUTEX_RECURSIVE || type == PTHREAD_MUTEX_ERRORCHECK ||
	       (k & (KIND_ROBUST | KIND_PRIO_INHERIT | KIND_PRIO_PROTECT));
}

static void book(pthread_mutex_t *m, uint64_t waited, uintptr_t ra)
{
	struct lkl_entry *e = lkl_find(m, LKL_MUTEX, true);

	if (e)
		lkl_exclusive_acquired(e, waited, ra, recursive(m));
}

/* the try-lock; *busy set when it found the mutex taken and the blocking call must follow */
static int try_first(pthread_mutex_t *m, uintptr_t ra, bool *busy)
{
	int ret = lkl_real.mutex_trylock(m); /* resolved: lkl_ready() resolves everything */

	*busy = ret == EBUSY;
	if (lkl_acquired(ret))
		book(m, LKL_NO_WAIT, ra);
	return ret;
}

LKL_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	int (*lock)(pthread_mutex_t *) = REAL(mutex_lock);
	uintptr_t ra = LKL_RA();
	uint64_t t0;
	bool busy;
	int ret;

	if (!lock)
		return ENOSYS;
	if (!lkl_ready())
		return lock(m);
	ret = try_first(m, ra, &busy);
	if (!busy)
		return ret;
	t0 = lk__lock_ticks();
	ret = lock(m);
	if (lkl_acquired(ret))
		book(m, lk__lock_ticks() - t0, ra);
	return ret;
}

LKL_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
	int (*timedlock)(pthread_mutex_t *, const struct timespec *) = REAL(mutex_timedlock);
	uintptr_t ra = LKL_RA();
	uint64_t t0;
	bool busy;
	int ret;

	if (!timedlock)
		return ENOSYS;
	if (!lkl_ready())
		return timedlock(m, abstime);
	ret = try_first(m, ra, &busy);
	if (!busy)
		return ret;
	t0 = lk__lock_ticks();
	ret = timedlock(m, abstime);
	if (lkl_acquired(ret))
		book(m, lk__lock_ticks() - t0, ra);
	return ret;
}

LKL_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock,
				       const struct timespec *abstime)
{
	int (*clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *) =
		REAL(mutex_clocklock);
	uintptr_t ra = LKL_RA();
	uint64_t t0;
	bool busy;
	int ret;

	if (!clocklock)
		return ENOSYS;
	if (!lkl_ready())
		return clocklock(m, clock, abstime);
	ret = try_first(m, ra, &busy);
	if (!busy)
		return ret;
	t0 = lk__lock_ticks();
	ret = clocklock(m, clock, abstime);
	if (lkl_acquired(ret))
		book(m, lk__lock_ticks() - t0, ra);
	return ret;
}

LKL_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
	int (*trylock)(pthread_mutex_t *) = REAL(mutex_trylock);
	uintptr_t ra = LKL_RA();
	int ret;

	if (!trylock)
		return ENOSYS;
	ret = trylock(m);
	if (!lkl_ready())
		return ret;
	if (lkl_acquired(ret)) {
		book(m, LKL_NO_WAIT, ra);
	} else if (ret == EBUSY) {
		struct lkl_entry *e = lkl_find(m, LKL_MUTEX, true);

		if (e)
			lkl_try_failed(e);
	}
	return ret;
}

LKL_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	int (*unlock)(pthread_mutex_t *) = REAL(mutex_unlock);

	if (!unlock)
		return ENOSYS;
	if (lkl_ready()) {
		struct lkl_entry *e = lkl_find(m, LKL_MUTEX, false);

		/* book it before the real unlock: after it, the next holder owns the entry */
		if (e)
			lkl_exclusive_released(e, checks_owner(m));
	}
	return unlock(m);
}

LKL_EXPORT int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
{
	int (*init)(pthread_mutex_t *, const pthread_mutexattr_t *) = REAL(mutex_init);

	if (!init)
		return ENOSYS;
	if (lkl_ready())
		lkl_retire(m, LKL_MUTEX);
	return init(m, attr);
}

LKL_EXPORT int pthread_mutex_destroy(pthread_mutex_t *m)
{
	int (*destroy)(pthread_mutex_t *) = REAL(mutex_destroy);
	int ret;

	if (!destroy)
		return ENOSYS;
	ret = destroy(m);
	if (ret == 0 && lkl_ready())
		lkl_retire(m, LKL_MUTEX);
	return ret;
}

/* ---- condition variables: the wait releases the mutex and takes it again ---- */

/* Book the release inside the wait; the entry to book the re-acquisition on, or NULL. */
static struct lkl_entry *cond_release(pthread_mutex_t *m)
{
	struct lkl_entry *e;

	if (!lkl_ready())
		return NULL;
	e = lkl_find(m, LKL_MUTEX, false);
	/* a recursive mutex locked more than once is not released by the wait */
	if (!e || LD(e->owner) != lk__lock_self() || LD(e->depth))
		return NULL;
	lkl_exclusive_released(e, true);
	return e;
}

/* The wait returned with the mutex held again (0, ETIMEDOUT, or EOWNERDEAD). */
static void cond_reacquired(struct lkl_entry *e, int ret, uintptr_t ra)
{
	if (ret != 0 && ret != ETIMEDOUT && ret != EOWNERDEAD)
		return;
	__atomic_fetch_add(&e->cond_reacquires, 1, __ATOMIC_RELAXED);
	lkl_exclusive_acquired(e, LKL_NO_WAIT, ra, false);
}

LKL_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	int (*wait)(pthread_cond_t *, pthread_mutex_t *) = REAL(cond_wait);
	uintptr_t ra = LKL_RA();
	struct lkl_entry *e;
	int ret;

	if (!wait)
		return ENOSYS;
	e = cond_release(m);
	ret = wait(c, m);
	if (e)
		cond_reacquired(e, ret, ra);
	return ret;
}

LKL_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
				      const struct timespec *abstime)
{
	int (*wait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *) =
		REAL(cond_timedwait);
	uintptr_t ra = LKL_RA();
	struct lkl_entry *e;
	int ret;

	if (!wait)
		return ENOSYS;
	e = cond_release(m);
	ret = wait(c, m, abstime);
	if (e)
		cond_reacquired(e, ret, ra);
	return ret;
}

LKL_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clock,
				      const struct timespec *abstime)
{
	int (*wait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *) =
		REAL(cond_clockwait);
	uintptr_t ra = LKL_RA();
	struct lkl_entry *e;
	int ret;

	if (!wait)
		return ENOSYS;
	e = cond_release(m);
	ret = wait(c, m, clock, abstime);
	if (e)
		cond_reacquired(e, ret, ra);
	return ret;
}
