// SPDX-License-Identifier: MIT
/*
 * The locking modes and the queues of sleepers: the algorithm of Linux's ipc/sem.c (since 4.x),
 * which Manfred Spraul's series "ipc/sem.c: Optimization for reducing spinlock contention" started.
 *
 * Locking. A call on one semaphore takes only that semaphore's lock -- unless the set is in
 * "global mode" (use_global_lock > 0), where every call takes the set lock. A call on several
 * semaphores always takes the set lock and enters global mode: it sets use_global_lock, then
 * takes and releases every semaphore lock once, which waits out any single-semaphore call that got
 * in before. A single-semaphore call that takes its semaphore's lock afterwards sees
 * use_global_lock set (its lock acquisition follows the release that came after the store) and
 * backs off to the set lock. Global mode ends after SEM_HYSTERESIS set-lock sections in a row with
 * no complex sleeper, so a workload that mixes both kinds does not pay the switch each time.
 *
 * Queues. A sleeping single-semaphore call waits on its semaphore's own list (alter or
 * wait-for-zero); a sleeping complex call on the set's lists. While a complex call sleeps, every
 * new alter sleeper goes on the set's list too, and the semaphores' alter lists are merged into
 * it, so that they are served in arrival order with the complex ones; they are split again when
 * the last complex sleeper leaves.
 *
 * Serving. After a call changed values, only the lists that can have become satisfiable are walked:
 * the wait-for-zero lists of semaphores now at zero, and the alter lists of semaphores it increased
 * (or the set's list while complex sleepers exist). A walk of a semaphore's own list stops at the
 * first sleeper it cannot serve once the value is 0, and is not restarted after a simple decrement
 * succeeds (it cannot have helped anyone before it): bulk wake-ups are linear, not the O(N^2)
 * rescan that series removed. The woken sleeper's operations are done by the waker, under the lock;
 * its status is set there too, and the futex wake-up happens after the lock is released.
 */
#include <errno.h>
#include <string.h>

#include "sem/sem_internal.h"

/* ---- locking modes ---- */

/*
 * Under the set lock. A semaphore lock that cannot be had (a stuck or dead holder in a shared set)
 * leaves the set out of global mode, as it was: a single-semaphore call may still be inside.
 */
static int complexmode_enter(struct lk_semset *s, uint64_t deadline)
{
	struct semset_header *h = s->hdr;

	if (LK__LD(h->use_global_lock) > 0) {
		LK__ST(h->use_global_lock,
		       SEM_HYSTERESIS); /* already there: restart the countdown */
		return 0;
	}
	LK__ST(h->use_global_lock, SEM_HYSTERESIS);
	LK__ST(h->mode_entries, LK__LD(h->mode_entries) + 1);
	for (unsigned int i = 0; i < s->nsems; i++) {
		int err = semlock_lock(s, &s->sems[i].lock, deadline);

		if (err) {
			__atomic_store_n(&h->use_global_lock, 0, __ATOMIC_RELEASE);
			return err;
		}
		semlock_unlock(s, &s->sems[i].lock);
	}
	return 0;
}

static void complexmode_tryleave(struct lk_semset *s)
{
	struct semset_header *h = s->hdr;
	int32_t mode = LK__LD(h->use_global_lock);

	if (LK__LD(h->complex_count))
		return;
	if (mode == 1) /* pairs with the acquire in lk__sem_lock: our writes before it are seen */
		__atomic_store_n(&h->use_global_lock, 0, __ATOMIC_RELEASE);
	else if (mode > 1)
		LK__ST(h->use_global_lock, mode - 1);
}

static int set_lock(struct lk_semset *s, uint64_t deadline, int *locknum)
{
	int err = semlock_lock(s, &s->hdr->lock, deadline);

	if (err)
		return err;
	err = complexmode_enter(s, deadline);
	if (err) {
		semlock_unlock(s, &s->hdr->lock);
		return err;
	}
	*locknum = LOCK_GLOBAL;
	return 0;
}

/*
 * Take the lock a call on ops needs: *locknum is the semaphore's, or LOCK_GLOBAL. 0, or what the
 * lock's wait ended with (semlock_lock); then nothing is held.
 */
int lk__sem_lock(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops, uint64_t deadline,
		 int *locknum)
{
	struct semset_header *h = s->hdr;
	struct sem *sem;
	int err;

	if (nops != 1)
		return set_lock(s, deadline, locknum);
	sem = &s->sems[ops[0].sem_num];
	*locknum = ops[0].sem_num;
	if (!LK__LD(h->use_global_lock)) {
		err = semlock_lock(s, &sem->lock, deadline);
		if (err || !__atomic_load_n(&h->use_global_lock, __ATOMIC_ACQUIRE))
			return err;
		semlock_unlock(s, &sem->lock);
	}
	err = semlock_lock(s, &h->lock, deadline);
	if (err)
		return err;
	if (LK__LD(h->use_global_lock) == 0) {
		/* global mode ended while we waited; it cannot start again while we hold the set lock */
		err = semlock_lock(s, &sem->lock, deadline);
		semlock_unlock(s, &h->lock);
		return err;
	}
	*locknum = LOCK_GLOBAL;
	return 0;
}

/*
 * A call on several semaphores that can complete at once does not need the set lock: taking the
 * locks of its own semaphores, in ascending order, excludes every other call that could touch
 * them (single-semaphore calls hold one of those locks; set-lock holders take every semaphore
 * lock, in the same order, when they enter global mode). So the sets of sembench's main thread --
 * one call that increments 64 semaphores -- do not force global mode on everyone else. Only
 * while the set is not in global mode; a call that would sleep backs out and takes the set lock,
 * since complex sleepers live on the set's lists. Lock order everywhere: set lock, then
 * semaphore locks in ascending order; a caller here holds no set lock and takes none.
 *
 * Returns LK__SEM_USE_SET_LOCK if the caller must go the set-lock way, else the call's result.
 */
int lk__sem_try_multi(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops, bool alter,
		      uint64_t deadline, struct wakelist *wl)
{
	unsigned short nums[LK_SEMOPM];
	size_t n = 0, locked, blocking;
	int r;

	if (LK__LD(s->hdr->use_global_lock))
		return LK__SEM_USE_SET_LOCK;
	/* the semaphores, sorted and without repeats (insertion sort: nops is small) */
	for (size_t i = 0; i < nops; i++) {
		unsigned short v = ops[i].sem_num;
		size_t j = n;

		while (j > 0 && nums[j - 1] > v)
			j--;
		if (j > 0 && nums[j - 1] == v)
			continue;
		memmove(&nums[j + 1], &nums[j], (n - j) * sizeof(nums[0]));
		nums[j] = v;
		n++;
	}
	for (locked = 0; locked < n; locked++) {
		r = semlock_lock(s, &s->sems[nums[locked]].lock, deadline);
		if (r)
			goto unlock;
	}
	r = LK__SEM_USE_SET_LOCK;
	if (!__atomic_load_n(&s->hdr->use_global_lock, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&s->hdr->removed, __ATOMIC_ACQUIRE)) {
		r = lk__try_ops(s, ops, nops, &blocking);
		if (r == 0 && alter)
			lk__changed(s, ops, nops, wl); /* in this mode the set's lists are empty */
		if (r > 0)
			r = LK__SEM_USE_SET_LOCK; /* it must sleep: the set lock's way */
		else
			LK__ST(s->sems[nums[0]].multi_ops, LK__LD(s->sems[nums[0]].multi_ops) + 1);
	}
unlock:
	while (locked-- > 0)
		semlock_unlock(s, &s->sems[nums[locked]].lock);
	return r;
}

/* No complex sleeper left: give the alter sleepers back to their semaphores' lists. */
static void unmerge_queues(struct lk_semset *s)
{
	struct node *head = &s->hdr->pending_alter;
	unsigned long budget = s->nwaiters + 1ul;

	if (LK__LD(s->hdr->complex_count))
		return;
	while (!list_empty(s, head) && budget--) {
		struct waiter *q = waiter_of(s, head->next);
		unsigned int semnum;

		if (!q)
			return;
		semnum = __atomic_load_n(&q->ops[0].sem_num, __ATOMIC_RELAXED);
		if (semnum >= s->nsems) {
			set_corrupt(s);
			return;
		}
		list_del(s, &q->node);
		list_add_tail(s, &s->sems[semnum].pending_alter, &q->node);
	}
}

/* A complex call is about to sleep: every alter sleeper joins the set's list, in order. */
static void merge_queues(struct lk_semset *s)
{
	struct node *head = &s->hdr->pending_alter;

	for (unsigned int i = 0; i < s->nsems; i++) {
		struct node *from = &s->sems[i].pending_alter;

		if (list_empty(s, from))
			continue;
		/* at the front, as the kernel's list_splice_init: the order between semaphores does
		 * not change any result, the order on each one is kept */
		{
			struct node *first = node_of(s, from->next), *last = node_of(s, from->prev);
			struct node *old_first = node_of(s, head->next);

			if (!first || !last || !old_first)
				return;
			last->next = head->next;
			old_first->prev = from->prev;
			first->prev = ref_of(s, head);
			head->next = from->next;
			list_init(s, from);
		}
	}
}

void lk__sem_unlock(struct lk_semset *s, int locknum)
{
	if (locknum == LOCK_GLOBAL) {
		unmerge_queues(s);
		complexmode_tryleave(s);
		semlock_unlock(s, &s->hdr->lock);
	} else {
		semlock_unlock(s, &s->sems[locknum].lock);
	}
}

/* Queue w, which the caller filled with ops (read from the caller's copy, not from w). */
void lk__queue_waiter(struct lk_semset *s, struct waiter *w, const struct lk_sembuf *ops,
		      size_t nops, bool alter)
{
	struct semset_header *h = s->hdr;

	if (nops == 1) {
		struct sem *sem = &s->sems[ops[0].sem_num];

		if (!alter)
			list_add_tail(s, &sem->pending_const, &w->node);
		else if (LK__LD(h->complex_count))
			list_add_tail(s, &h->pending_alter, &w->node);
		else
			list_add_tail(s, &sem->pending_alter, &w->node);
	} else {
		if (!LK__LD(h->complex_count))
			merge_queues(s);
		list_add_tail(s, alter ? &h->pending_alter : &h->pending_const, &w->node);
		count_add(&h->complex_count, 1);
	}
	w->queued = 1;
}

void lk__unqueue_waiter(struct lk_semset *s, struct waiter *w, size_t nops)
{
	list_del(s, &w->node);
	w->queued = 0;
	if (nops > 1)
		count_add(&s->hdr->complex_count, -1);
}

/* What a queued sleeper asks for, read once (a shared set's waiter may change under us) and checked. */
struct request {
	const struct lk_sembuf *ops;
	size_t nops;
	struct lk_sembuf copy[LK_SEMOPM];
};

static bool read_request(struct lk_semset *s, struct waiter *q, struct request *r)
{
	if (!s->shared) {
		r->ops = q->ops;
		r->nops = q->nops;
		return true;
	}
	r->nops = __atomic_load_n(&q->nops, __ATOMIC_RELAXED);
	if (r->nops == 0 || r->nops > LK_SEMOPM) {
		set_corrupt(s);
		return false;
	}
	memcpy(r->copy, q->ops, r->nops * sizeof(r->copy[0]));
	for (size_t i = 0; i < r->nops; i++) {
		if (r->copy[i].sem_num >= s->nsems) {
			set_corrupt(s);
			return false;
		}
	}
	r->ops = r->copy;
	return true;
}

/* ---- doing operations ---- */

/* Take back ops[0..n), done by lk__try_ops. */
static void undo_ops(struct lk_semset *s, const struct lk_sembuf *ops, size_t n)
{
	while (n-- > 0) {
		int32_t *value = &s->sems[ops[n].sem_num].value;

		/* unsigned: a peer may have changed the value meanwhile; no overflow, whatever it holds */
		LK__ST(*value,
		       (int32_t)((uint32_t)LK__LD(*value) - (uint32_t)(int32_t)ops[n].sem_op));
	}
}

/*
 * Try ops: 0 done (values changed), 1 must wait (*blocking: the operation it waits on), or
 * -EAGAIN (that operation has LK_IPC_NOWAIT), -ERANGE (a value would pass LK_SEMVMX), -EINVAL
 * (a queued operation names no semaphore: a corrupted shared set). Values are changed as it
 * goes and put back on failure, so repeated semaphores in one call see each other's effect.
 */
int lk__try_ops(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops, size_t *blocking)
{
	size_t i;
	int result;

	for (i = 0; i < nops; i++) {
		struct sem *sem;
		int value;

		if (ops[i].sem_num >= s->nsems) {
			set_corrupt(s);
			result = -EINVAL;
			goto undo;
		}
		sem = &s->sems[ops[i].sem_num];
		value = LK__LD(sem->value);
		if (value < 0 || value > LK_SEMVMX) {
			set_corrupt(s);
			result = -EINVAL;
			goto undo;
		}
		if (ops[i].sem_op == 0 && value != 0)
			goto would_block;
		value += ops[i].sem_op;
		if (value < 0)
			goto would_block;
		if (value > LK_SEMVMX) {
			result = -ERANGE;
			goto undo;
		}
		LK__ST(sem->value, value);
	}
	return 0;

would_block:
	*blocking = i;
	result = (ops[i].sem_flg & LK_IPC_NOWAIT) ? -EAGAIN : 1;
undo:
	undo_ops(s, ops, i);
	return result;
}

/* The value of semaphore semnum, or -EINVAL if it is out of range (a corrupted shared set). */
int lk__sem_value(struct lk_semset *s, unsigned int semnum)
{
	int value = LK__LD(s->sems[semnum].value);

	if (value >= 0 && value <= LK_SEMVMX)
		return value;
	set_corrupt(s);
	return -EINVAL;
}

/* ---- wake-ups ---- */

/* Free the slot of unqueued shared waiter q, whose sleeper is gone. */
static void drop(struct lk_semset *s, struct waiter *q)
{
	__atomic_store_n(&q->alive.word, 0, __ATOMIC_RELEASE);
	lk__slot_free(s, (unsigned int)(q - s->slots));
}

/*
 * Give unqueued sleeper q its result, to be woken after the lock is released. False if q is no
 * longer waiting for it: its sleeper gave up without the lock (CANCELLED, semop.c) and q is
 * dropped -- the caller takes back what it did for q.
 */
static bool hand_over(struct lk_semset *s, struct wakelist *wl, struct waiter *q, int result,
		      unsigned int semnum)
{
	uint32_t status = PENDING;

	/*
	 * Once the result is in, the sleeper may return and reuse q at any time, so parked may
	 * then be another call's (a wake-up too many: harmless). Sequentially consistent against
	 * the sleeper's store to parked and load of status (semop.c).
	 */
	if (!__atomic_compare_exchange_n(&q->status, &status, (uint32_t)result, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
		if (status == CANCELLED)
			drop(s, q);
		else
			set_corrupt(s);
		return false;
	}
	if (result == 0) {
		struct sem *sem = &s->sems[semnum];

		LK__ST(sem->wakeups, LK__LD(sem->wakeups) + 1);
	}
	if (!__atomic_load_n(&q->parked, __ATOMIC_SEQ_CST))
		return true; /* still looking: it will see the result without a system call */
	if (wl->n < WAKE_BATCH)
		wl->status[wl->n++] = &q->status;
	else
		lk__futex_wake(&q->status, 1, s->shared); /* a burst past the batch: wake it now */
	return true;
}

enum { ALIVE, REAPED, BROKEN };

/*
 * Shared sets: whether sleeper q is gone -- dead (the kernel marked its word, robust.c) or left
 * without the lock (CANCELLED); if so, q is taken off its list and its slot freed, and its
 * operations are never done. A queued sleeper always has a word: none is corruption.
 */
static int reap_dead(struct lk_semset *s, struct waiter *q, size_t nops)
{
	uint32_t word;

	if (!s->shared)
		return ALIVE;
	word = __atomic_load_n(&q->alive.word, __ATOMIC_ACQUIRE);
	if (!word) {
		set_corrupt(s);
		return BROKEN;
	}
	if (!(word & FUTEX_OWNER_DIED) &&
	    __atomic_load_n(&q->status, __ATOMIC_ACQUIRE) != CANCELLED)
		return ALIVE;
	lk__unqueue_waiter(s, q, nops);
	drop(s, q);
	return REAPED;
}

static unsigned long walk_budget(const struct lk_semset *s)
{
	return s->shared ? s->nwaiters + 1ul : ULONG_MAX;
}

enum served { SERVE_STOP, SERVE_NEXT, SERVE_DONE };

/*
 * One sleeper met by a walk: reaped if its task died, left waiting if its operations would block
 * (noting on which semaphore), else taken off the queues and handed its result, undone if it can
 * no longer take it. SERVE_DONE: its operations were applied and it has them; SERVE_STOP: the
 * queue is broken, the walk ends.
 */
static enum served serve(struct lk_semset *s, struct waiter *q, const struct request *req,
			 struct wakelist *wl)
{
	size_t blocking;
	int r = reap_dead(s, q, req->nops);

	if (r == BROKEN)
		return SERVE_STOP;
	if (r == REAPED)
		return SERVE_NEXT;
	r = lk__try_ops(s, req->ops, req->nops, &blocking);
	if (r > 0) {
		q->blocking = (uint16_t)blocking;
		return SERVE_NEXT;
	}
	lk__unqueue_waiter(s, q, req->nops);
	if (!hand_over(s, wl, q, r, req->ops[0].sem_num)) {
		if (r == 0)
			undo_ops(s, req->ops, req->nops);
		return SERVE_NEXT;
	}
	return r == 0 ? SERVE_DONE : SERVE_NEXT;
}

/* Serve the wait-for-zero sleepers of semaphore semnum (-1: the set's complex ones). */
static bool wake_const_ops(struct lk_semset *s, int semnum, struct wakelist *wl)
{
	struct node *head = semnum < 0 ? &s->hdr->pending_const : &s->sems[semnum].pending_const;
	lk__ref end = ref_of(s, head), ref = head->next;
	unsigned long budget = walk_budget(s);
	bool completed = false;

	while (ref != end) {
		struct waiter *q = waiter_of(s, ref);
		struct request req;
		enum served served;

		if (!q || !budget-- || !read_request(s, q, &req)) {
			set_corrupt(s);
			break;
		}
		ref = q->node.next;
		served = serve(s, q, &req, wl);
		if (served == SERVE_STOP)
			break;
		completed |= served == SERVE_DONE;
	}
	return completed;
}

/* Semaphores that ops left at zero may satisfy wait-for-zero sleepers (ops NULL: any semaphore). */
static bool wake_zero_waiters(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops,
			      struct wakelist *wl)
{
	bool got_zero = false, completed = false;

	if (ops) {
		for (size_t i = 0; i < nops; i++) {
			if (ops[i].sem_num < s->nsems && s->sems[ops[i].sem_num].value == 0) {
				got_zero = true;
				completed |= wake_const_ops(s, ops[i].sem_num, wl);
			}
		}
	} else {
		for (unsigned int i = 0; i < s->nsems; i++) {
			if (s->sems[i].value == 0) {
				got_zero = true;
				completed |= wake_const_ops(s, (int)i, wl);
			}
		}
	}
	if (got_zero)
		completed |= wake_const_ops(s, -1, wl);
	return completed;
}

/*
 * After a sleeper's operations succeeded: must the walk start over? Only where an earlier sleeper
 * may now succeed. A simple sleeper on a semaphore's list only decremented: those before it
 * already failed with a larger value. Complex sleepers, and any list with complex ones, are not
 * worth the analysis (as in the kernel).
 */
static bool needs_restart(struct lk_semset *s, size_t nops)
{
	return !list_empty(s, &s->hdr->pending_alter) || nops > 1;
}

/* Serve the alter sleepers of semaphore semnum (-1: the set's list). */
static bool update_queue(struct lk_semset *s, int semnum, struct wakelist *wl)
{
	struct node *head = semnum < 0 ? &s->hdr->pending_alter : &s->sems[semnum].pending_alter;
	lk__ref end = ref_of(s, head), ref;
	unsigned long budget = walk_budget(s);
	bool completed = false;

again:
	ref = head->next;
	while (ref != end) {
		struct waiter *q = waiter_of(s, ref);
		struct request req;
		enum served served;

		if (!q || !budget-- || !read_request(s, q, &req)) {
			set_corrupt(s);
			break;
		}
		ref = q->node.next;
		/* on its own list: every sleeper decrements it, none can go on at zero */
		if (semnum >= 0 && LK__LD(s->sems[semnum].value) == 0)
			break;
		served = serve(s, q, &req, wl);
		if (served == SERVE_STOP)
			break;
		if (served == SERVE_DONE) {
			completed = true;
			wake_zero_waiters(s, req.ops, req.nops, wl);
			if (needs_restart(s, req.nops))
				goto again;
		}
	}
	return completed;
}

/* ops (NULL: values set by lk_semctl, any of them) changed values: serve who can go on now. */
void lk__changed(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops, struct wakelist *wl)
{
	wake_zero_waiters(s, ops, nops, wl);
	if (!list_empty(s, &s->hdr->pending_alter)) {
		update_queue(s, -1, wl);
	} else if (!ops) {
		for (unsigned int i = 0; i < s->nsems; i++)
			update_queue(s, (int)i, wl);
	} else {
		for (size_t i = 0; i < nops; i++)
			if (ops[i].sem_op > 0)
				update_queue(s, ops[i].sem_num, wl);
	}
}

/* ---- counting and removing sleepers ---- */

/* GETNCNT (zero false) and GETZCNT: sleepers whose blocking operation is on semnum. */
int lk__sem_count(struct lk_semset *s, unsigned int semnum, bool zero)
{
	struct node *lists[3] = {
		zero ? &s->sems[semnum].pending_const : &s->sems[semnum].pending_alter,
		&s->hdr->pending_alter,
		zero ? &s->hdr->pending_const : NULL,
	};
	int count = 0;

	for (int l = 0; l < 3; l++) {
		lk__ref end, ref;
		unsigned long budget = walk_budget(s);

		if (!lists[l])
			continue;
		end = ref_of(s, lists[l]);
		ref = lists[l]->next;
		while (ref != end) {
			struct waiter *q = waiter_of(s, ref);
			const struct lk_sembuf *op;
			struct request req;
			size_t blocking;
			int r;

			if (!q || !budget-- || !read_request(s, q, &req)) {
				set_corrupt(s);
				return count;
			}
			ref = q->node.next;
			r = reap_dead(s, q, req.nops);
			if (r == BROKEN)
				return count;
			if (r == REAPED)
				continue;
			if (l == 0) { /* a semaphore's own list: all wait on it */
				count++;
				continue;
			}
			blocking = __atomic_load_n(&q->blocking, __ATOMIC_RELAXED);
			op = &req.ops[blocking < req.nops ? blocking : 0];
			if (op->sem_num == semnum && (zero ? op->sem_op == 0 : op->sem_op < 0))
				count++;
		}
	}
	return count;
}

static void reap_list(struct lk_semset *s, struct node *head)
{
	lk__ref end = ref_of(s, head), ref = head->next;
	unsigned long budget = walk_budget(s);

	while (ref != end) {
		struct waiter *q = waiter_of(s, ref);
		struct request req;

		if (!q || !budget-- || !read_request(s, q, &req)) {
			set_corrupt(s);
			return;
		}
		ref = q->node.next;
		if (reap_dead(s, q, req.nops) == BROKEN)
			return;
	}
}

/*
 * A shared set ran out of waiter slots: take the dead and the departed off the lists the caller
 * holds (every list under the set lock, a semaphore's own two under its lock).
 */
void lk__reap_all(struct lk_semset *s, int locknum)
{
	if (locknum != LOCK_GLOBAL) {
		reap_list(s, &s->sems[locknum].pending_alter);
		reap_list(s, &s->sems[locknum].pending_const);
		return;
	}
	reap_list(s, &s->hdr->pending_alter);
	reap_list(s, &s->hdr->pending_const);
	for (unsigned int i = 0; i < s->nsems; i++) {
		reap_list(s, &s->sems[i].pending_alter);
		reap_list(s, &s->sems[i].pending_const);
	}
}

static void fail_all(struct lk_semset *s, struct node *head, int result, struct wakelist *wl)
{
	unsigned long budget = walk_budget(s);

	while (!list_empty(s, head) && budget--) {
		struct waiter *q = waiter_of(s, head->next);
		struct request req;

		if (!q || !read_request(s, q, &req))
			return;
		lk__unqueue_waiter(s, q, req.nops);
		hand_over(s, wl, q, result, req.ops[0].sem_num);
	}
}

/* IPC_RMID, under the set lock in global mode: every later call fails, every sleeper wakes. */
void lk__sem_remove(struct lk_semset *s, struct wakelist *wl)
{
	__atomic_store_n(&s->hdr->removed, 1, __ATOMIC_RELEASE);
	fail_all(s, &s->hdr->pending_alter, -EIDRM, wl);
	fail_all(s, &s->hdr->pending_const, -EIDRM, wl);
	for (unsigned int i = 0; i < s->nsems; i++) {
		fail_all(s, &s->sems[i].pending_alter, -EIDRM, wl);
		fail_all(s, &s->sems[i].pending_const, -EIDRM, wl);
	}
}
