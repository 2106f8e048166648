// SPDX-License-Identifier: MIT
/*
 * pthread_rwlock_*: readers are shared acquisitions (atomic counters), writers exclusive ones.
 * An unlock is a writer's if the calling thread is the writer we booked, else a reader's.
 */
#include "preload.h"

enum how { PLAIN, TIMED, CLOCK };

/* The blocking call the program made; NULL function: ENOSYS. */
static int blocking(pthread_rwlock_t *l, bool write, enum how how, clockid_t clock,
		    const struct timespec *abstime)
{
	int (*plain)(pthread_rwlock_t *) = write ? REAL(rwlock_wrlock) : REAL(rwlock_rdlock);
	int (*timed)(pthread_rwlock_t *, const struct timespec *);
	int (*clocked)(pthread_rwlock_t *, clockid_t, const struct timespec *);

	switch (how) {
	case PLAIN:
		return plain ? plain(l) : ENOSYS;
	case TIMED:
		timed = write ? REAL(rwlock_timedwrlock) : REAL(rwlock_timedrdlock);
		return timed ? timed(l, abstime) : ENOSYS;
	case CLOCK:
		clocked = write ? REAL(rwlock_clockwrlock) : REAL(rwlock_clockrdlock);
		return clocked ? clocked(l, clock, abstime) : ENOSYS;
	}
	return EINVAL;
}

static void book(pthread_rwlock_t *l, bool write, uint64_t waited, uintptr_t ra)
{
	struct lkl_entry *e = lkl_find(l, LKL_RWLOCK, true);

	if (!e)
		return;
	if (write)
		lkl_exclusive_acquired(e, waited, ra, false);
	else
		lkl_shared_acquired(e, waited, ra, true);
}

static int acquire(pthread_rwlock_t *l, bool write, enum how how, clockid_t clock,
		   const struct timespec *abstime, uintptr_t ra)
{
	uint64_t t0;
	int ret;

	if (!lkl_ready())
		return blocking(l, write, how, clock, abstime);
	ret = write ? lkl_real.rwlock_trywrlock(l) : lkl_real.rwlock_tryrdlock(l);
	if (ret == 0)
		book(l, write, LKL_NO_WAIT, ra);
	if (ret != EBUSY)
		return ret; /* got it, or the error the blocking call would give (EAGAIN, EDEADLK) */
	t0 = lk__lock_ticks();
	ret = blocking(l, write, how, clock, abstime);
	if (ret == 0)
		book(l, write, lk__lock_ticks() - t0, ra);
	return ret;
}

LKL_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	return acquire(l, false, PLAIN, 0, NULL, LKL_RA());
}

LKL_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *abstime)
{
	return acquire(l, false, TIMED, 0, abstime, LKL_RA());
}

LKL_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t clock,
					  const struct timespec *abstime)
{
	return acquire(l, false, CLOCK, clock, abstime, LKL_RA());
}

LKL_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	return acquire(l, true, PLAIN, 0, NULL, LKL_RA());
}

LKL_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *abstime)
{
	return acquire(l, true, TIMED, 0, abstime, LKL_RA());
}

LKL_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t clock,
					  const struct timespec *abstime)
{
	return acquire(l, true, CLOCK, clock, abstime, LKL_RA());
}

static int try_acquire(pthread_rwlock_t *l, bool write, uintptr_t ra)
{
	int (*try)(pthread_rwlock_t *) = write ? REAL(rwlock_trywrlock) : REAL(rwlock_tryrdlock);
	int ret;

	if (!try)
		return ENOSYS;
	ret = try(l);
	if (!lkl_ready())
		return ret;
	if (ret == 0) {
		book(l, write, LKL_NO_WAIT, ra);
	} else if (ret == EBUSY) {
		struct lkl_entry *e = lkl_find(l, LKL_RWLOCK, true);

		if (e)
			lkl_try_failed(e);
	}
	return ret;
}

LKL_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *l)
{
	return try_acquire(l, false, LKL_RA());
}

LKL_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *l)
{
	return try_acquire(l, true, LKL_RA());
}

LKL_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	int (*unlock)(pthread_rwlock_t *) = REAL(rwlock_unlock);

	if (!unlock)
		return ENOSYS;
	if (lkl_ready()) {
		struct lkl_entry *e = lkl_find(l, LKL_RWLOCK, false);

		if (e) {
			if (LD(e->owner) == lk__lock_self())
				lkl_exclusive_released(e, true);
			else
				lkl_shared_released(e);
		}
	}
	return unlock(l);
}

LKL_EXPORT int pthread_rwlock_init(pthread_rwlock_t *l, const pthread_rwlockattr_t *attr)
{
	int (*init)(pthread_rwlock_t *, const pthread_rwlockattr_t *) = REAL(rwlock_init);

	if (!init)
		return ENOSYS;
	if (lkl_ready())
		lkl_retire(l, LKL_RWLOCK);
	return init(l, attr);
}

LKL_EXPORT int pthread_rwlock_destroy(pthread_rwlock_t *l)
{
	int (*destroy)(pthread_rwlock_t *) = REAL(rwlock_destroy);
	int ret;

	if (!destroy)
		return ENOSYS;
	ret = destroy(l);
	if (ret == 0 && lkl_ready())
		lkl_retire(l, LKL_RWLOCK);
	return ret;
}
