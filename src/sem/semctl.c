// SPDX-License-Identifier: MIT
/*
 * lk_semctl and lk_semset_stats.
 *
 * Commands on one semaphore take the lock a single-semaphore lk_semop on it would take; GETALL,
 * SETALL and IPC_RMID the set lock. After SETVAL and SETALL the sleepers the new values satisfy
 * are served, as after an lk_semop. They wait for locks without a deadline, but not for a dead
 * holder (semlock.c); removal not even for a stuck one.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

#include "core/error.h"
#include "sem/sem_internal.h"

#define REMOVE_PATIENCE_NS 1000000000ull /* removal waits this long for a shared set's lock */

static int lock_one(struct lk_semset *s, unsigned int semnum, int *locknum)
{
	struct lk_sembuf op = { (unsigned short)semnum, 0, 0 };

	return lk__sem_lock(s, &op, 1, NO_DEADLINE, locknum);
}

static int lock_all(struct lk_semset *s, uint64_t deadline, int *locknum)
{
	return lk__sem_lock(s, NULL, 0, deadline, locknum);
}

static int finish(struct lk_semset *s, int locknum, struct wakelist *wl, int result)
{
	lk__sem_unlock(s, locknum);
	lk__wake_all(s, wl);
	if (__atomic_load_n(&s->corrupt, __ATOMIC_RELAXED))
		return lk__semset_check(s);
	return result;
}

static int one_semaphore(struct lk_semset *s, unsigned int semnum, int cmd, int value)
{
	struct wakelist wl = { 0 };
	struct lk_sembuf op = { (unsigned short)semnum, 1, 0 };
	int locknum, result = 0;

	result = lock_one(s, semnum, &locknum);
	if (result)
		return result;
	if (__atomic_load_n(&s->hdr->removed, __ATOMIC_ACQUIRE))
		return finish(s, locknum, &wl,
			      lk__fail(-EIDRM, "lk_semctl: the semaphore set was removed"));
	switch (cmd) {
	case LK_GETVAL:
		result = lk__sem_value(s, semnum);
		break;
	case LK_SETVAL:
		LK__ST(s->sems[semnum].value, value);
		/*
		 * In global mode, serve as after any change (as the kernel does): complex sleepers
		 * are re-tried, which also moves their blocking operation, which GETNCNT and GETZCNT
		 * report. Otherwise only semnum's own lists can have changed: serve them as if it had
		 * been increased (harmless if it was not).
		 */
		if (locknum == LOCK_GLOBAL)
			lk__changed(s, NULL, 0, &wl);
		else
			lk__changed(s, &op, 1, &wl);
		break;
	case LK_GETNCNT:
		result = lk__sem_count(s, semnum, false);
		break;
	case LK_GETZCNT:
		result = lk__sem_count(s, semnum, true);
		break;
	}
	return finish(s, locknum, &wl, result);
}

static int all_semaphores(struct lk_semset *s, int cmd, unsigned short *values)
{
	struct wakelist wl = { 0 };
	int locknum, err;

	if (!values)
		return lk__fail(-EINVAL, "lk_semctl %s: NULL array",
				cmd == LK_GETALL ? "GETALL" : "SETALL");
	if (cmd == LK_SETALL)
		for (unsigned int i = 0; i < s->nsems; i++)
			if (values[i] > LK_SEMVMX)
				return lk__fail(
					-ERANGE,
					"lk_semctl SETALL: value %u of semaphore %u is past LK_SEMVMX (%d)",
					values[i], i, LK_SEMVMX);
	err = lock_all(s, NO_DEADLINE, &locknum);
	if (err)
		return err;
	if (__atomic_load_n(&s->hdr->removed, __ATOMIC_ACQUIRE))
		return finish(s, locknum, &wl,
			      lk__fail(-EIDRM, "lk_semctl: the semaphore set was removed"));
	for (unsigned int i = 0; i < s->nsems; i++) {
		if (cmd == LK_GETALL)
			values[i] = (unsigned short)lk__sem_value(s, i);
		else
			LK__ST(s->sems[i].value, values[i]);
	}
	if (cmd == LK_SETALL)
		lk__changed(s, NULL, 0, &wl);
	return finish(s, locknum, &wl, 0);
}

/*
 * Removal goes through corrupted queues as far as they can be followed: the set is gone either
 * way. A shared set whose lock is held by a dead or stuck holder is removed without it: removed
 * is set for every call to see, and its sleepers see it within SHARED_WAIT_SLICE_NS.
 */
static int remove_set(struct lk_semset *s)
{
	uint64_t patience = s->shared ? lk__monotonic_ns() + REMOVE_PATIENCE_NS : NO_DEADLINE;
	struct wakelist wl = { 0 };
	int locknum, err = lock_all(s, patience, &locknum);
	bool removed;

	if (err) {
		removed = __atomic_exchange_n(&s->hdr->removed, 1, __ATOMIC_ACQ_REL);
	} else {
		removed = __atomic_load_n(&s->hdr->removed, __ATOMIC_ACQUIRE);
		if (!removed)
			lk__sem_remove(s, &wl);
		lk__sem_unlock(s, locknum);
		lk__wake_all(s, &wl);
	}
	if (removed)
		return lk__fail(-EIDRM, "lk_semctl: the semaphore set was removed already");
	if (s->shared && shm_unlink(s->name) != 0 && errno != ENOENT)
		return lk__fail(-errno,
				"removed semaphore set %s, but could not unlink its name: %s",
				s->name, strerror(errno));
	return 0;
}

LK_API int lk_semctl(struct lk_semset *s, unsigned int semnum, int cmd, ...)
{
	va_list ap;
	int err, value = 0;
	unsigned short *values = NULL;

	if (!s)
		return lk__fail(-EINVAL, "lk_semctl: NULL set");
	va_start(ap, cmd);
	if (cmd == LK_SETVAL)
		value = va_arg(ap, int);
	else if (cmd == LK_GETALL || cmd == LK_SETALL)
		values = va_arg(ap, unsigned short *);
	va_end(ap);
	/* in semctl's order: the value's range, then the set, then the semaphore number */
	if (cmd == LK_SETVAL && (value < 0 || value > LK_SEMVMX))
		return lk__fail(-ERANGE, "lk_semctl SETVAL %d: values run from 0 to LK_SEMVMX (%d)",
				value, LK_SEMVMX);
	err = cmd == LK_IPC_RMID ? lk__semset_check_removable(s) : lk__semset_check(s);
	if (err)
		return err;
	switch (cmd) {
	case LK_GETVAL:
	case LK_SETVAL:
	case LK_GETNCNT:
	case LK_GETZCNT:
		if (semnum >= s->nsems)
			return lk__fail(-EINVAL, "lk_semctl: semaphore %u is past the set's %u",
					semnum, s->nsems);
		return one_semaphore(s, semnum, cmd, value);
	case LK_GETALL:
	case LK_SETALL:
		return all_semaphores(s, cmd, values);
	case LK_IPC_RMID:
		return remove_set(s);
	default:
		return lk__fail(-EINVAL, "lk_semctl: unknown command %d", cmd);
	}
}

static void add_lock(struct lk_semset_stats *st, const struct semlock *l, uint64_t *wait_ticks)
{
	st->free += LK__LD(l->free);
	st->contended += LK__LD(l->contended);
	*wait_ticks += LK__LD(l->wait);
}

LK_API int lk_semset_stats(struct lk_semset *s, struct lk_semset_stats *out)
{
	const struct semset_header *h;
	uint64_t wait_ticks = 0, now = lk__lock_ticks();
	int cpus = get_nprocs();

	if (!s || !out)
		return lk__fail(-EINVAL, "lk_semset_stats: NULL %s", s ? "out" : "set");
	h = s->hdr;
	memset(out, 0, sizeof(*out));
	add_lock(out, &h->lock, &wait_ticks);
	for (unsigned int i = 0; i < s->nsems; i++) {
		const struct sem *sem = &s->sems[i];

		add_lock(out, &sem->lock, &wait_ticks);
		out->simple_ops += LK__LD(sem->simple_ops);
		out->sleeps += LK__LD(sem->sleeps);
		out->wakeups += LK__LD(sem->wakeups);
		out->multi_ops += LK__LD(sem->multi_ops);
	}
	out->global_ops = LK__LD(h->global_ops);
	out->global_mode_entries = LK__LD(h->mode_entries);
	out->sleeps += LK__LD(h->sleeps);
	out->wakeups += LK__LD(h->wakeups);
	out->wait_ns = lk__ticks_to_ns(wait_ticks);
	out->wait_avg_ns = out->contended ? out->wait_ns / out->contended : 0;
	out->lifetime_ns = now > h->created_ticks ? lk__ticks_to_ns(now - h->created_ticks) : 0;
	out->wait_per_mille = out->lifetime_ns ?
				      1000.0 * (double)out->wait_ns /
					      ((double)out->lifetime_ns * (cpus > 0 ? cpus : 1)) :
				      0;
	out->nsems = s->nsems;
	out->waiter_slots = s->shared ? s->nwaiters : 0;
	return 0;
}
