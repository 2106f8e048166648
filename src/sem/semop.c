// SPDX-License-Identifier: MIT
/*
 * lk_semop: check the call, take the lock it needs (queue.c), try the operations; if they must
 * wait, queue a waiter and sleep on its status word until a waker has done them for us (or the
 * set is removed, the timeout passes, a signal handler runs).
 *
 * Sleeping is FUTEX_WAIT_BITSET with an absolute CLOCK_MONOTONIC deadline, always (a far one when
 * the caller gave none): with a deadline, the kernel returns EINTR for every signal handler, as
 * semop() does, instead of restarting the wait for SA_RESTART ones.
 *
 * A waker stores a sleeper's result under the lock and wakes it after releasing the lock. In a
 * shared set a waker process could die in between, or the set be removed without its lock (a
 * holder that died or is stuck: semctl.c); so sleepers of shared sets also wake once a second to
 * look at their status and at the set.
 *
 * A sleeper that gives up (timeout, signal, removal) leaves the queue under the lock. In a shared
 * set the lock may be held by a process that is stopped, dead or hostile: after a moment's wait
 * the sleeper leaves without it, marking its waiter CANCELLED with a compare-and-swap that races
 * the wakers' own (queue.c, hand_over): either the waker's result got in first and the call
 * succeeded, or the waiter is cancelled and the next call that meets it reaps it.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "sem/sem_internal.h"

#define CANCEL_PATIENCE_NS 1000000ull /* how long a sleeper that gave up waits for the lock */

static struct timespec to_timespec(uint64_t ns)
{
	return (struct timespec){ (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
}

/* Checks that need no lock; 0 or the error. *alter set if some operation changes a value. */
static int check_call(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops,
		      const struct timespec *timeout, bool *alter)
{
	unsigned int max = 0;
	bool undo = false;
	int err;

	if (!s)
		return lk__fail(-EINVAL, "lk_semop: NULL set");
	if (!ops || nops == 0)
		return lk__fail(-EINVAL, "lk_semop: %s",
				ops ? "no operations (nops 0)" : "NULL ops");
	if (nops > LK_SEMOPM)
		return lk__fail(-E2BIG,
				"lk_semop: %zu operations in one call; at most LK_SEMOPM (%d)",
				nops, LK_SEMOPM);
	if (timeout &&
	    (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000L))
		return lk__fail(-EINVAL, "lk_semop: bad timeout {%ld, %ld}", (long)timeout->tv_sec,
				timeout->tv_nsec);
	err = lk__semset_check(s);
	if (err)
		return err;
	*alter = false;
	for (size_t i = 0; i < nops; i++) {
		if (ops[i].sem_num > max)
			max = ops[i].sem_num;
		undo |= ops[i].sem_flg & LK_SEM_UNDO;
		*alter |= ops[i].sem_op != 0;
	}
	if (max >= s->nsems)
		return lk__fail(-EFBIG, "lk_semop: semaphore %u is past the set's %u", max,
				s->nsems);
	if (undo)
		return lk__fail(
			-ENOTSUP,
			"lk_semop: SEM_UNDO is not implemented (a process that crashes could not "
			"undo); release what you take explicitly");
	return 0;
}

static void count_op(struct lk_semset *s, int locknum)
{
	if (locknum == LOCK_GLOBAL)
		LK__ST(s->hdr->global_ops, LK__LD(s->hdr->global_ops) + 1);
	else
		LK__ST(s->sems[locknum].simple_ops, LK__LD(s->sems[locknum].simple_ops) + 1);
}

static void count_sleep(struct lk_semset *s, int locknum)
{
	if (locknum == LOCK_GLOBAL)
		LK__ST(s->hdr->sleeps, LK__LD(s->hdr->sleeps) + 1);
	else
		LK__ST(s->sems[locknum].sleeps, LK__LD(s->sems[locknum].sleeps) + 1);
}

/* What a sleeper is told: 0 or -errno from a waker; in a shared set, anything else is corruption. */
static int result_of(struct lk_semset *s, uint32_t status)
{
	switch ((int)status) {
	case 0:
	case -EAGAIN:
	case -ERANGE:
	case -EIDRM:
	case -EINVAL:
		return (int)status;
	default:
		set_corrupt(s);
		return -EINVAL;
	}
}

/* A sleeping call: its operations (the caller's, never read back from a shared slot), its waiter. */
struct sleep {
	const struct lk_sembuf *ops;
	size_t nops;
	struct waiter *w;
	struct alive_token alive;
};

/*
 * Leave the queue without the lock: the waiter is marked CANCELLED for the next call that meets
 * it to reap, and then belongs to the set (z->w cleared) -- unless a waker's result got in first.
 */
static int abandon(struct lk_semset *s, struct sleep *z, int why)
{
	uint32_t status = PENDING;

	lk__alive_unlink(&z->alive);
	if (__atomic_compare_exchange_n(&z->w->status, &status, CANCELLED, false, __ATOMIC_SEQ_CST,
					__ATOMIC_ACQUIRE)) {
		z->w = NULL;
		return why;
	}
	return result_of(s, status);
}

/* The wait ended early (timeout, signal, removal): leave the queue, unless the result came in meanwhile. */
static int cancel_wait(struct lk_semset *s, struct sleep *z, int why)
{
	uint64_t patience = s->shared ? lk__monotonic_ns() + CANCEL_PATIENCE_NS : NO_DEADLINE;
	int locknum, result;
	uint32_t status;

	if (lk__sem_lock(s, z->ops, z->nops, patience, &locknum))
		return abandon(s, z, why);
	status = __atomic_load_n(&z->w->status, __ATOMIC_ACQUIRE);
	if (status != PENDING) {
		result = result_of(s, status); /* done by a waker: the operations happened */
	} else {
		lk__unqueue_waiter(s, z->w, z->nops);
		result = why;
	}
	lk__sem_unlock(s, locknum);
	return result;
}

/*
 * Tell wakers to wake us, then look once more: a waker makes the futex system call only for a
 * sleeper that has parked. Both sides store, then load the other's word, sequentially
 * consistent, so at least one of them sees the other's store. (A sleeper that does not spin
 * first: with more threads than CPUs, as in sembench, spinning only takes the CPU from the
 * thread that would wake it.)
 */
static bool parked_already_done(struct waiter *w)
{
	__atomic_store_n(&w->parked, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&w->status, __ATOMIC_SEQ_CST) != PENDING;
}

static int wait_for_result(struct lk_semset *s, struct sleep *z, uint64_t deadline)
{
	struct waiter *w = z->w;

	if (parked_already_done(w))
		return result_of(s, __atomic_load_n(&w->status, __ATOMIC_ACQUIRE));
	for (;;) {
		uint32_t status = __atomic_load_n(&w->status, __ATOMIC_ACQUIRE);
		uint64_t now, until;
		struct timespec ts;
		int gone;

		if (status != PENDING)
			return result_of(s, status);
		/* a shared set removed or broken without its lock: no one wakes us for that */
		gone = s->shared ? lk__semset_check(s) : 0;
		if (gone)
			return cancel_wait(s, z, gone);
		now = lk__monotonic_ns();
		if (now >= deadline)
			return cancel_wait(s, z, -ETIMEDOUT);
		until = now + (s->shared ? SHARED_WAIT_SLICE_NS : 3600 * 1000000000ull);
		if (deadline < until)
			until = deadline;
		ts = to_timespec(until);
		if (lk__futex_wait_until(&w->status, PENDING, &ts, s->shared) != 0 &&
		    errno == EINTR)
			return cancel_wait(s, z, -EINTR);
		/* woken, value changed, deadline or slice over: look again */
	}
}

static void fill_waiter(struct waiter *w, const struct lk_sembuf *ops, size_t nops, bool alter,
			size_t blocking)
{
	memcpy(w->ops, ops, nops * sizeof(*ops));
	w->nops = (uint16_t)nops;
	w->alter = alter;
	w->blocking = (uint16_t)blocking;
	w->parked = 0;
	__atomic_store_n(&w->status, PENDING, __ATOMIC_RELAXED);
}

/*
 * A shared set's sleeper needs a slot, marked with its tid (robust.c) for as long as it is queued;
 * when none is free, the dead and departed are reaped from the lists the caller holds. A free
 * slot's word is 0; one that is not was handed out by a rewritten free-slot stack, and is left
 * alone.
 */
static struct waiter *take_slot(struct lk_semset *s, int locknum, struct alive_token *alive)
{
	int index = lk__slot_alloc(s);
	struct waiter *w;

	if (index < 0 && !__atomic_load_n(&s->corrupt, __ATOMIC_RELAXED)) {
		lk__reap_all(s, locknum);
		index = lk__slot_alloc(s);
	}
	if (index < 0)
		return NULL;
	w = &s->slots[index];
	if (!lk__alive_begin(w, alive)) {
		set_corrupt(s);
		return NULL;
	}
	return w;
}

static void give_slot(struct lk_semset *s, struct waiter *w, struct alive_token *alive)
{
	lk__alive_end(w, alive);
	lk__slot_free(s, (unsigned int)(w - s->slots));
}

/* lk_semop's return: r, with its message; a set found corrupt meanwhile says so instead. */
static int semop_result(struct lk_semset *s, int r)
{
	if (__atomic_load_n(&s->corrupt, __ATOMIC_RELAXED))
		return lk__semset_check(s);
	switch (r) {
	case 0:
		return 0;
	case -EAGAIN:
		return lk__fail(r, "lk_semop: an operation with LK_IPC_NOWAIT would have waited");
	case -ERANGE:
		return lk__fail(r, "lk_semop: a value would pass LK_SEMVMX (%d)", LK_SEMVMX);
	case -ETIMEDOUT:
		return lk__fail(r, "lk_semop: timed out waiting");
	case -EINTR:
		return lk__fail(r, "lk_semop: interrupted by a signal handler");
	case -EIDRM:
		return lk__fail(r, "lk_semop: the semaphore set was removed");
	case -ENOSPC:
		return lk__fail(
			r,
			"lk_semop: all %u waiter slots of shared set %s are in use: create it with more "
			"(LK_SEMSET_WAITERS)",
			s->nwaiters, s->name);
	default:
		return r;
	}
}

LK_API int lk_semop(struct lk_semset *s, struct lk_sembuf *ops, size_t nops,
		    const struct timespec *timeout)
{
	struct waiter stack_waiter;
	struct sleep z = { ops, nops, NULL, { NULL, NULL, NULL } };
	struct wakelist wl;
	uint64_t deadline = NO_DEADLINE;
	size_t blocking = 0;
	bool alter = false;
	int locknum, r;

	wl.n = 0; /* not the whole 1 KiB: the pointers are written before they are read */
	r = check_call(s, ops, nops, timeout, &alter);
	if (r)
		return r;
	if (timeout)
		deadline = lk__monotonic_ns() + (uint64_t)timeout->tv_sec * 1000000000u +
			   (uint64_t)timeout->tv_nsec;

	if (nops > 1) {
		r = lk__sem_try_multi(s, ops, nops, alter, deadline, &wl);
		if (r != LK__SEM_USE_SET_LOCK) {
			lk__wake_all(s, &wl);
			goto report;
		}
	}
	r = lk__sem_lock(s, ops, nops, deadline, &locknum);
	if (r)
		goto report;
	count_op(s, locknum);
	if (__atomic_load_n(&s->hdr->removed, __ATOMIC_ACQUIRE)) {
		r = -EIDRM;
		goto unlock;
	}
	r = lk__try_ops(s, ops, nops, &blocking);
	if (r == 0 && alter)
		lk__changed(s, ops, nops, &wl);
	if (r <= 0)
		goto unlock;

	/* must wait */
	z.w = s->shared ? take_slot(s, locknum, &z.alive) : &stack_waiter;
	if (!z.w) {
		r = -ENOSPC;
		goto unlock;
	}
	fill_waiter(z.w, ops, nops, alter, blocking);
	lk__queue_waiter(s, z.w, ops, nops, alter);
	count_sleep(s, locknum);
	lk__sem_unlock(s, locknum);
	if (__atomic_load_n(&s->corrupt, __ATOMIC_RELAXED))
		r = cancel_wait(s, &z,
				-EINVAL); /* the slot must leave the queue before it is freed */
	else
		r = wait_for_result(s, &z, deadline);
	if (s->shared && z.w)
		give_slot(s, z.w, &z.alive);
	goto report;

unlock:
	lk__sem_unlock(s, locknum);
	lk__wake_all(s, &wl);
report:
	return semop_result(s, r);
}
