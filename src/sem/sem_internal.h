/* SPDX-License-Identifier: MIT */
/*
 * Internal to the sem module: the layout of a set and the helpers every part uses.
 *
 * A set is one region: a header, then nsems semaphore slots, then (shared sets) the waiter slots.
 * A private set's region is malloc()ed and its sleepers wait in structures on their own stacks; a
 * shared set's region is a POSIX shared memory object mapped at a different address in each
 * process, so everything in it that points at something else is a "ref": an offset from the
 * region's start in a shared set, a plain address in a private one (refs are added to ref_base,
 * which is the region for a shared set and 0 for a private one). 0 is no ref.
 *
 * Queues are circular doubly linked lists through refs, with their heads in the semaphore slots
 * and the header. Whoever can open a shared set can rewrite any byte of it at any time, so in a
 * shared set nothing read from the region is trusted: a ref is followed only if it is exactly
 * where a list head or a waiter is (node_of, waiter_of); a waiter's operations are copied out and
 * checked before they are used (read_request, queue.c); values, counts and slot indexes are
 * checked against the set's geometry, which each process keeps in its own memory; every walk is
 * bounded. A corrupted region makes calls fail with -EINVAL, never crash or write outside it.
 */
#ifndef LK_SEM_INTERNAL_H
#define LK_SEM_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <lowkey/sem.h>

#include "lock/lock_internal.h"

#define SEMSET_MAGIC 0x31746573736d656bull /* "kemssets1"-ish: "kemsset1" */
#define SEMSET_VERSION 2u
#define SEM_HYSTERESIS 10 /* set-lock sections without a complex op before leaving */
#define WAKE_BATCH 128	  /* wake-ups collected under a lock before being done */
#define PENDING 1u	  /* a waiter's status until its result is in */
#define CANCELLED 2u	  /* its sleeper left without the lock (semop.c) */
#define SHARED_WAIT_SLICE_NS 1000000000ull /* shared sleepers re-check this often (see semop.c) */
#define LOCK_FIRST_SLICE_NS 1000000ull /* a shared lock's waiters look at its holder after this, */
#define LOCK_SLICE_NS 10000000ull      /* then this often */
#define NO_DEADLINE UINT64_MAX
#define MAX_WAITERS (1u << 16)

typedef uint64_t lk__ref;

struct node {
	lk__ref next, prev;
};

/*
 * A lock with its figures: free, contended and wait, as ipc/sem.c's contention figures. Figures
 * change under the lock. The word is 0 when free; held, it names its holder -- the thread id, in a
 * shared set whose users share a PID namespace, so that a waiter can tell a dead holder (semlock.c)
 * -- and has LOCK_WAITERS set once someone may sleep on it.
 */
#define LOCK_WAITERS 0x80000000u
#define LOCK_NOCHECK 0x40000000u /* holder not named: a private set, or another PID namespace */
#define LOCK_TID 0x3fffffffu

struct semlock {
	uint32_t word;
	uint32_t spare;
	uint64_t free;
	uint64_t contended;
	uint64_t wait; /* ticks */
};

struct sem {
	/* first line: what every operation on this semaphore touches */
	struct semlock lock;
	int32_t value;
	uint32_t spare;
	struct node pending_alter; /* sleeping single-semaphore operations that change the value */
	/* second line */
	struct node pending_const; /* sleeping single-semaphore waits for zero */
	uint64_t simple_ops;	   /* under lock */
	uint64_t sleeps;
	uint64_t wakeups;
	uint64_t multi_ops; /* complex calls done under semaphore locks, counted on the first */
	uint64_t spare2[2];
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct sem) == 128, "a semaphore is two cache lines");

struct semset_header {
	/* identity: written once at creation, then only read */
	uint64_t magic;
	uint32_t version;
	uint32_t header_size;
	uint32_t sem_size;
	uint32_t waiter_size;
	uint32_t nsems;
	uint32_t nwaiters;
	uint64_t size;
	uint64_t sems_offset;
	uint64_t waiters_offset;
	uint64_t created_ticks;
	uint32_t removed; /* set once, by IPC_RMID */
	uint32_t shared;
	uint32_t broken; /* set once: a lock's holder died (semlock.c) */
	uint32_t spare;
	uint64_t pid_ns; /* the creator's PID namespace (inode), 0 unknown */
	/* the set lock and what it guards */
	struct semlock lock __attribute__((aligned(64)));
	int32_t complex_count;	 /* sleeping operations on several semaphores */
	int32_t use_global_lock; /* > 0: every call takes the set lock (hysteresis countdown) */
	struct node
		pending_alter; /* complex sleepers, and every alter sleeper while complex ones exist */
	struct node pending_const; /* complex waits for zero */
	uint64_t global_ops, mode_entries, sleeps, wakeups;
	/* free waiter slots of a shared set: a stack of index + 1, tagged against ABA */
	uint64_t free_slots __attribute__((aligned(64)));
} __attribute__((aligned(64)));

/*
 * A sleeping call. On the sleeper's stack in a private set, in a slot of the region in a shared
 * one. The sleeper fills it and queues it under the lock; the waker does its operations, unlinks
 * it and stores the result in status, all under the lock; the sleeper watches status.
 */
struct waiter {
	struct node node; /* first: a ref to the node is a ref to the waiter */
	uint32_t status;  /* futex word: PENDING, then 0 or -errno; or CANCELLED */
	uint16_t nops;
	uint8_t alter; /* some operation changes a value */
	uint8_t queued;
	uint16_t blocking; /* index of the operation it waits on (GETNCNT, GETZCNT) */
	uint16_t spare;
	uint32_t next_free;    /* shared: free-stack link, index + 1 */
	uint32_t parked;       /* the sleeper is (about to be) in futex_wait: wake it */
	struct {	       /* shared: see robust.c */
		uint32_t word; /* the sleeper's tid; FUTEX_OWNER_DIED once it died; 0 free */
		uint32_t spare;
		uint64_t entry[7]; /* its robust list entry, for the kernel only */
	} alive;
	struct lk_sembuf ops[LK_SEMOPM];
} __attribute__((aligned(64)));

/* A process's handle on a set. */
struct lk_semset {
	struct semset_header *hdr;
	struct sem *sems;
	struct waiter *slots; /* shared sets */
	uintptr_t ref_base;   /* the region (shared) or 0 (private) */
	size_t size;
	unsigned int nsems;
	unsigned int nwaiters;
	bool shared;
	bool owners;  /* lock words name their holders (a shared set, our PID namespace) */
	bool corrupt; /* a bad ref was met: calls fail with -EINVAL */
	char name[256];
};

/* Wake-ups collected under a lock, done after it is released. */
struct wakelist {
	unsigned int n;
	uint32_t *status[WAKE_BATCH];
};

/* ---- refs and lists ---- */

/* Something in a shared region is not what this process wrote: calls fail with -EINVAL. */
static inline void set_corrupt(struct lk_semset *s)
{
	__atomic_store_n(&s->corrupt, true, __ATOMIC_RELAXED);
}

static inline lk__ref ref_of(const struct lk_semset *s, const void *p)
{
	return (lk__ref)((uintptr_t)p - s->ref_base);
}

/* Whether ref is exactly where waiter k < nwaiters starts (its node is its first member). */
static inline bool is_waiter_ref(const struct lk_semset *s, lk__ref ref)
{
	uint64_t off = ref - ref_of(s, s->slots);

	return off < (uint64_t)s->nwaiters * sizeof(struct waiter) &&
	       off % sizeof(struct waiter) == 0;
}

/* Whether ref is one of the set's list heads. */
static inline bool is_head_ref(const struct lk_semset *s, lk__ref ref)
{
	uint64_t off = ref - ref_of(s, s->sems);

	if (ref == ref_of(s, &s->hdr->pending_alter) || ref == ref_of(s, &s->hdr->pending_const))
		return true;
	if (off >= (uint64_t)s->nsems * sizeof(struct sem))
		return false;
	off %= sizeof(struct sem);
	return off == offsetof(struct sem, pending_alter) ||
	       off == offsetof(struct sem, pending_const);
}

/* The node at ref: a list head or a waiter; anything else in a shared set is corruption. */
static inline struct node *node_of(struct lk_semset *s, lk__ref ref)
{
	if (s->shared && !is_waiter_ref(s, ref) && !is_head_ref(s, ref)) {
		set_corrupt(s);
		return NULL;
	}
	return (struct node *)(s->ref_base + ref);
}

static inline void list_init(struct lk_semset *s, struct node *head)
{
	head->next = head->prev = ref_of(s, head);
}

static inline bool list_empty(const struct lk_semset *s, const struct node *head)
{
	return head->next == ref_of(s, head);
}

static inline void list_add_tail(struct lk_semset *s, struct node *head, struct node *n)
{
	struct node *last = node_of(s, head->prev);

	if (!last)
		return;
	n->next = ref_of(s, head);
	n->prev = head->prev;
	last->next = ref_of(s, n);
	head->prev = ref_of(s, n);
}

static inline void list_del(struct lk_semset *s, struct node *n)
{
	struct node *next = node_of(s, n->next), *prev = node_of(s, n->prev);

	if (!next || !prev)
		return;
	prev->next = n->next;
	next->prev = n->prev;
	n->next = n->prev = 0;
}

/* Move every node of from to the end of to; from is left empty. */
static inline void list_splice_tail(struct lk_semset *s, struct node *from, struct node *to)
{
	struct node *first, *last, *to_last;

	if (list_empty(s, from))
		return;
	first = node_of(s, from->next);
	last = node_of(s, from->prev);
	to_last = node_of(s, to->prev);
	if (!first || !last || !to_last)
		return;
	first->prev = to->prev;
	to_last->next = from->next;
	last->next = ref_of(s, to);
	to->prev = from->prev;
	list_init(s, from);
}

/* The waiter at ref, which a list walk met before reaching its own head. */
static inline struct waiter *waiter_of(struct lk_semset *s, lk__ref ref)
{
	if (s->shared && !is_waiter_ref(s, ref)) {
		set_corrupt(s);
		return NULL;
	}
	return (struct waiter *)(s->ref_base + ref);
}

/* A count in the region that a peer may have set to anything: change it without overflow. */
static inline void count_add(int32_t *count, int32_t delta)
{
	LK__ST(*count, (int32_t)((uint32_t)LK__LD(*count) + (uint32_t)delta));
}

/* ---- locks ---- */

uint32_t lk__sem_tid(void);
int lk__semlock_slow(struct lk_semset *s, struct semlock *l, uint32_t owner, uint64_t deadline);

static inline uint32_t semlock_owner(const struct lk_semset *s)
{
	return s->owners ? lk__sem_tid() : LOCK_NOCHECK;
}

/* 0, or (waits that reached the deadline or met a dead holder) -ETIMEDOUT, -ENOTRECOVERABLE, -EIDRM */
static inline int semlock_lock(struct lk_semset *s, struct semlock *l, uint64_t deadline)
{
	uint32_t free_word = 0, owner = semlock_owner(s);

	if (LK__LIKELY(__atomic_compare_exchange_n(&l->word, &free_word, owner, false,
						   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
		LK__ST(l->free, LK__LD(l->free) + 1);
		return 0;
	}
	return lk__semlock_slow(s, l, owner, deadline);
}

static inline void semlock_unlock(struct lk_semset *s, struct semlock *l)
{
	if (LK__UNLIKELY(__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) & LOCK_WAITERS))
		lk__futex_wake(&l->word, 1, s->shared);
}

/* ---- shared between the files ---- */

#define LOCK_GLOBAL (-1)

int lk__try_ops(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops, size_t *blocking);
void lk__queue_waiter(struct lk_semset *s, struct waiter *w, const struct lk_sembuf *ops,
		      size_t nops, bool alter);
void lk__unqueue_waiter(struct lk_semset *s, struct waiter *w, size_t nops);
int lk__slot_alloc(struct lk_semset *s);
void lk__slot_free(struct lk_semset *s, unsigned int index);
int lk__sem_lock(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops, uint64_t deadline,
		 int *locknum);
#define LK__SEM_USE_SET_LOCK 1
int lk__sem_try_multi(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops, bool alter,
		      uint64_t deadline, struct wakelist *wl);
void lk__sem_unlock(struct lk_semset *s, int locknum);
void lk__wake_all(struct lk_semset *s, struct wakelist *w);
int lk__sem_value(struct lk_semset *s, unsigned int semnum);
void lk__changed(struct lk_semset *s, const struct lk_sembuf *ops, size_t nops, struct wakelist *w);
int lk__sem_count(struct lk_semset *s, unsigned int semnum, bool zero);
void lk__sem_remove(struct lk_semset *s, struct wakelist *w);
int lk__semset_check(struct lk_semset *s);
int lk__semset_check_removable(struct lk_semset *s);
uint64_t lk__pid_ns(void);
uint64_t lk__monotonic_ns(void);
void lk__reap_all(struct lk_semset *s, int locknum);

/* robust.c: the sleeper's liveness word in its waiter slot */
struct alive_token {
	void *head, *entry, *first;
};
bool lk__alive_begin(struct waiter *w, struct alive_token *t);
void lk__alive_unlink(struct alive_token *t);
void lk__alive_end(struct waiter *w, struct alive_token *t);

#endif
