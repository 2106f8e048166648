// SPDX-License-Identifier: MIT
/*
 * Finding the functions the wrappers stand in for.
 *
 * The mutex and rwlock functions glibc also exports as __pthread_mutex_lock and so on: those we
 * bind at load time (weak references, so another libc simply leaves them NULL), and they need no
 * dlsym. That matters because dlsym may allocate, and an allocator built on pthread mutexes
 * (jemalloc, for one) would call back into our pthread_mutex_lock while we resolve.
 *
 * Everything else comes from dlsym(RTLD_NEXT) -- the condition variables by version, so that we
 * hand the program the same pthread_cond_wait its link chose (GLIBC_2.3.2, not the 2.2.5 compat
 * one). Every thread that finds a pointer missing resolves it itself: nobody waits for another
 * thread to finish resolving, which could otherwise deadlock with a thread that holds the loader's
 * lock. A call that arrives while the same thread is inside dlsym finds its pointer NULL: for the
 * functions without an alias that cannot happen with glibc's malloc, and the wrapper then fails
 * with ENOSYS rather than recursing.
 */
#include <dlfcn.h>

#include "preload.h"

struct lkl_real lkl_real;

extern int __pthread_mutex_lock(pthread_mutex_t *) __attribute__((weak));
extern int __pthread_mutex_trylock(pthread_mutex_t *) __attribute__((weak));
extern int __pthread_mutex_unlock(pthread_mutex_t *) __attribute__((weak));
extern int __pthread_mutex_init(pthread_mutex_t *, const pthread_mutexattr_t *)
	__attribute__((weak));
extern int __pthread_mutex_destroy(pthread_mutex_t *) __attribute__((weak));
extern int __pthread_rwlock_rdlock(pthread_rwlock_t *) __attribute__((weak));
extern int __pthread_rwlock_tryrdlock(pthread_rwlock_t *) __attribute__((weak));
extern int __pthread_rwlock_wrlock(pthread_rwlock_t *) __attribute__((weak));
extern int __pthread_rwlock_trywrlock(pthread_rwlock_t *) __attribute__((weak));
extern int __pthread_rwlock_unlock(pthread_rwlock_t *) __attribute__((weak));
extern int __pthread_rwlock_init(pthread_rwlock_t *, const pthread_rwlockattr_t *)
	__attribute__((weak));
extern int __pthread_rwlock_destroy(pthread_rwlock_t *) __attribute__((weak));

static __thread int resolving __attribute__((tls_model("initial-exec")));

#define SET(field, value) __atomic_store_n(&lkl_real.field, (value), __ATOMIC_RELAXED)

static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static void *next_cond(const char *name)
{
	void *f = dlvsym(RTLD_NEXT, name, "GLIBC_2.3.2");

	return f ? f : dlsym(RTLD_NEXT, name);
}

/* The aliases first: they need nothing, and they are what an allocator would call back into. */
static void bind_aliases(void)
{
	if (__pthread_mutex_lock) {
		SET(mutex_lock, __pthread_mutex_lock);
		SET(mutex_trylock, __pthread_mutex_trylock);
		SET(mutex_unlock, __pthread_mutex_unlock);
	}
	if (__pthread_mutex_init) {
		SET(mutex_init, __pthread_mutex_init);
		SET(mutex_destroy, __pthread_mutex_destroy);
	}
	if (__pthread_rwlock_rdlock) {
		SET(rwlock_rdlock, __pthread_rwlock_rdlock);
		SET(rwlock_tryrdlock, __pthread_rwlock_tryrdlock);
		SET(rwlock_wrlock, __pthread_rwlock_wrlock);
		SET(rwlock_trywrlock, __pthread_rwlock_trywrlock);
		SET(rwlock_unlock, __pthread_rwlock_unlock);
	}
	if (__pthread_rwlock_init) {
		SET(rwlock_init, __pthread_rwlock_init);
		SET(rwlock_destroy, __pthread_rwlock_destroy);
	}
}

#define LOOKUP(field, name)                                                 \
	do {                                                                \
		if (!__atomic_load_n(&lkl_real.field, __ATOMIC_RELAXED))    \
			SET(field, (__typeof__(lkl_real.field))next(name)); \
	} while (0)

bool lkl_resolve(void)
{
	if (resolving)
		return false;
	resolving = 1;
	bind_aliases();
	LOOKUP(mutex_lock, "pthread_mutex_lock");
	LOOKUP(mutex_trylock, "pthread_mutex_trylock");
	LOOKUP(mutex_unlock, "pthread_mutex_unlock");
	LOOKUP(mutex_init, "pthread_mutex_init");
	LOOKUP(mutex_destroy, "pthread_mutex_destroy");
	LOOKUP(mutex_timedlock, "pthread_mutex_timedlock");
	LOOKUP(mutex_clocklock, "pthread_mutex_clocklock");
	LOOKUP(rwlock_rdlock, "pthread_rwlock_rdlock");
	LOOKUP(rwlock_tryrdlock, "pthread_rwlock_tryrdlock");
	LOOKUP(rwlock_timedrdlock, "pthread_rwlock_timedrdlock");
	LOOKUP(rwlock_clockrdlock, "pthread_rwlock_clockrdlock");
	LOOKUP(rwlock_wrlock, "pthread_rwlock_wrlock");
	LOOKUP(rwlock_trywrlock, "pthread_rwlock_trywrlock");
	LOOKUP(rwlock_timedwrlock, "pthread_rwlock_timedwrlock");
	LOOKUP(rwlock_clockwrlock, "pthread_rwlock_clockwrlock");
	LOOKUP(rwlock_unlock, "pthread_rwlock_unlock");
	LOOKUP(rwlock_init, "pthread_rwlock_init");
	LOOKUP(rwlock_destroy, "pthread_rwlock_destroy");
	LOOKUP(spin_lock, "pthread_spin_lock");
	LOOKUP(spin_trylock, "pthread_spin_trylock");
	LOOKUP(spin_unlock, "pthread_spin_unlock");
	LOOKUP(spin_init, "pthread_spin_init");
	LOOKUP(spin_destroy, "pthread_spin_destroy");
	if (!__atomic_load_n(&lkl_real.cond_wait, __ATOMIC_RELAXED))
		SET(cond_wait, (__typeof__(lkl_real.cond_wait))next_cond("pthread_cond_wait"));
	if (!__atomic_load_n(&lkl_real.cond_timedwait, __ATOMIC_RELAXED))
		SET(cond_timedwait,
		    (__typeof__(lkl_real.cond_timedwait))next_cond("pthread_cond_timedwait"));
	LOOKUP(cond_clockwait, "pthread_cond_clockwait");
	LOOKUP(sem_wait, "sem_wait");
	LOOKUP(sem_trywait, "sem_trywait");
	LOOKUP(sem_timedwait, "sem_timedwait");
	LOOKUP(sem_clockwait, "sem_clockwait");
	LOOKUP(sem_post, "sem_post");
	LOOKUP(sem_init, "sem_init");
	LOOKUP(sem_destroy, "sem_destroy");
	resolving = 0;
	return true;
}
