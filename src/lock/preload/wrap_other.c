// SPDX-License-Identifier: MIT
/*
 * pthread_spin_* and POSIX semaphores (sem_*).
 *
 * A semaphore wait is booked like a shared acquisition: many threads may pass at once. The try
 * before a blocking wait sets errno to EAGAIN when it fails; errno is put back before the real
 * wait, so the program sees exactly the errno of the call it made.
 */
#include "preload.h"

/* ---- spinlocks ---- */

static void spin_book(pthread_spinlock_t *s, uint64_t waited, uintptr_t ra)
{
	struct lkl_entry *e = lkl_find((const void *)s, LKL_SPIN, true);

	if (e)
		lkl_exclusive_acquired(e, waited, ra, false);
}

LKL_EXPORT int pthread_spin_lock(pthread_spinlock_t *s)
{
	int (*lock)(pthread_spinlock_t *) = REAL(spin_lock);
	uintptr_t ra = LKL_RA();
	uint64_t t0;
	int ret;

	if (!lock)
		return ENOSYS;
	if (!lkl_ready())
		return lock(s);
	ret = lkl_real.spin_trylock(s);
	if (ret == 0)
		spin_book(s, LKL_NO_WAIT, ra);
	if (ret != EBUSY)
		return ret;
	t0 = lk__lock_ticks();
	ret = lock(s);
	if (ret == 0)
		spin_book(s, lk__lock_ticks() - t0, ra);
	return ret;
}

LKL_EXPORT int pthread_spin_trylock(pthread_spinlock_t *s)
{
	int (*trylock)(pthread_spinlock_t *) = REAL(spin_trylock);
	uintptr_t ra = LKL_RA();
	int ret;

	if (!trylock)
		return ENOSYS;
	ret = trylock(s);
	if (!lkl_ready())
		return ret;
	if (ret == 0) {
		spin_book(s, LKL_NO_WAIT, ra);
	} else if (ret == EBUSY) {
		struct lkl_entry *e = lkl_find((const void *)s, LKL_SPIN, true);

		if (e)
			lkl_try_failed(e);
	}
	return ret;
}

LKL_EXPORT int pthread_spin_unlock(pthread_spinlock_t *s)
{
	int (*unlock)(pthread_spinlock_t *) = REAL(spin_unlock);

	if (!unlock)
		return ENOSYS;
	if (lkl_ready()) {
		struct lkl_entry *e = lkl_find((const void *)s, LKL_SPIN, false);

		if (e)
			lkl_exclusive_released(e, false);
	}
	return unlock(s);
}

LKL_EXPORT int pthread_spin_init(pthread_spinlock_t *s, int pshared)
{
	int (*init)(pthread_spinlock_t *, int) = REAL(spin_init);

	if (!init)
		return ENOSYS;
	if (lkl_ready())
		lkl_retire((const void *)s, LKL_SPIN);
	return init(s, pshared);
}

LKL_EXPORT int pthread_spin_destroy(pthread_spinlock_t *s)
{
	int (*destroy)(pthread_spinlock_t *) = REAL(spin_destroy);
	int ret;

	if (!destroy)
		return ENOSYS;
	ret = destroy(s);
	if (ret == 0 && lkl_ready())
		lkl_retire((const void *)s, LKL_SPIN);
	return ret;
}

/* ---- semaphores: the functions return -1 and set errno ---- */

static void sem_book(sem_t *s, uint64_t waited, uintptr_t ra)
{
	struct lkl_entry *e = lkl_find(s, LKL_SEM, true);

	if (e)
		lkl_shared_acquired(e, waited, ra, false);
}

enum how { PLAIN, TIMED, CLOCK };

static int sem_blocking(sem_t *s, enum how how, clockid_t clock, const struct timespec *abstime)
{
	int (*plain)(sem_t *);
	int (*timed)(sem_t *, const struct timespec *);
	int (*clocked)(sem_t *, clockid_t, const struct timespec *);

	switch (how) {
	case PLAIN:
		plain = REAL(sem_wait);
		if (plain)
			return plain(s);
		break;
	case TIMED:
		timed = REAL(sem_timedwait);
		if (timed)
			return timed(s, abstime);
		break;
	case CLOCK:
		clocked = REAL(sem_clockwait);
		if (clocked)
			return clocked(s, clock, abstime);
		break;
	}
	errno = ENOSYS;
	return -1;
}

static int sem_acquire(sem_t *s, enum how how, clockid_t clock, const struct timespec *abstime,
		       uintptr_t ra)
{
	int saved_errno = errno, ret;
	uint64_t t0;

	if (!lkl_ready())
		return sem_blocking(s, how, clock, abstime);
	if (lkl_real.sem_trywait(s) == 0) {
		sem_book(s, LKL_NO_WAIT, ra);
		return 0;
	}
	if (errno != EAGAIN) /* EINVAL: let the call the program made say so */
		return sem_blocking(s, how, clock, abstime);
	errno = saved_errno;
	t0 = lk__lock_ticks();
	ret = sem_blocking(s, how, clock, abstime);
	if (ret == 0)
		sem_book(s, lk__lock_ticks() - t0, ra);
	return ret;
}

LKL_EXPORT int sem_wait(sem_t *s)
{
	return sem_acquire(s, PLAIN, 0, NULL, LKL_RA());
}

LKL_EXPORT int sem_timedwait(sem_t *s, const struct timespec *abstime)
{
	return sem_acquire(s, TIMED, 0, abstime, LKL_RA());
}

LKL_EXPORT int sem_clockwait(sem_t *s, clockid_t clock, const struct timespec *abstime)
{
	return sem_acquire(s, CLOCK, clock, abstime, LKL_RA());
}

LKL_EXPORT int sem_trywait(sem_t *s)
{
	int (*trywait)(sem_t *) = REAL(sem_trywait);
	uintptr_t ra = LKL_RA();
	int ret, err;

	if (!trywait) {
		errno = ENOSYS;
		return -1;
	}
	ret = trywait(s);
	err = errno;
	if (!lkl_ready())
		return ret;
	if (ret == 0) {
		sem_book(s, LKL_NO_WAIT, ra);
	} else if (err == EAGAIN) {
		struct lkl_entry *e = lkl_find(s, LKL_SEM, true);

		if (e)
			lkl_try_failed(e);
	}
	errno = err;
	return ret;
}

LKL_EXPORT int sem_post(sem_t *s)
{
	int (*post)(sem_t *) = REAL(sem_post);
	int ret, err;

	if (!post) {
		errno = ENOSYS;
		return -1;
	}
	ret = post(s);
	err = errno;
	if (ret == 0 && lkl_ready()) {
		struct lkl_entry *e = lkl_find(s, LKL_SEM, true);

		if (e)
			__atomic_fetch_add(&e->posts, 1, __ATOMIC_RELAXED);
	}
	errno = err;
	return ret;
}

LKL_EXPORT int sem_init(sem_t *s, int pshared, unsigned int value)
{
	int (*init)(sem_t *, int, unsigned int) = REAL(sem_init);

	if (!init) {
		errno = ENOSYS;
		return -1;
	}
	if (lkl_ready())
		lkl_retire(s, LKL_SEM);
	return init(s, pshared, value);
}

LKL_EXPORT int sem_destroy(sem_t *s)
{
	int (*destroy)(sem_t *) = REAL(sem_destroy);
	int ret, err;

	if (!destroy) {
		errno = ENOSYS;
		return -1;
	}
	ret = destroy(s);
	err = errno;
	if (ret == 0 && lkl_ready())
		lkl_retire(s, LKL_SEM);
	errno = err;
	return ret;
}
