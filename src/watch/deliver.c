// SPDX-License-Identifier: MIT
/*
 * Deferred delivery: signal handlers in any thread queue hits, one lowkey thread runs the
 * callbacks.
 *
 * The queue is a bounded multi-producer, single-consumer ring of cells with sequence numbers
 * (D. Vyukov's bounded queue): a producer claims a position with one CAS, writes the cell and
 * publishes it by storing its sequence; the consumer reads cells in order. Nothing blocks a
 * producer: when the ring is full the hit is dropped and counted. A producer interrupted by a
 * signal between claiming and publishing (a nested hit in the same thread) only delays the
 * consumer until it resumes. Producers wake the consumer with a futex only when it said it sleeps.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "watch/watch_internal.h"

#define TLS_IE __attribute__((tls_model("initial-exec")))
#define QUEUE_MASK (LK_WATCH_QUEUE_LEN - 1)

_Static_assert((LK_WATCH_QUEUE_LEN & QUEUE_MASK) == 0, "LK_WATCH_QUEUE_LEN is a power of two");

struct cell {
	uint64_t seq;
	struct lk__watch_item item;
};

static struct cell *cells; /* published with release once the thread runs */

/* Each on its own cache line: producers hammer enq_pos, the consumer deq_pos and done. */
static struct {
	uint64_t enq_pos __attribute__((aligned(64)));
	uint64_t deq_pos __attribute__((aligned(64)));
	uint64_t done;	    /* items the consumer finished (delivered or discarded) */
	uint32_t done_word; /* futex: bumped for lk_watch_sync() waiters */
	int sync_waiters;
	uint32_t wake_word __attribute__((aligned(64))); /* futex: producers wake the consumer */
	int consumer_sleeping;
} q;

static bool started;
static pthread_mutex_t start_mutex = PTHREAD_MUTEX_INITIALIZER;

static __thread bool is_delivery_thread TLS_IE;
static __thread struct lk_watch *delivering TLS_IE;

static void futex_wait(uint32_t *word, uint32_t expected)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake(uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

bool lk__watch_on_delivery_thread(void)
{
	return is_delivery_thread;
}

struct lk_watch *lk__watch_delivering(void)
{
	return delivering;
}

bool lk__watch_enqueue(const struct lk__watch_item *item)
{
	struct cell *ring = __atomic_load_n(&cells, __ATOMIC_ACQUIRE), *c;
	uint64_t pos = __atomic_load_n(&q.enq_pos, __ATOMIC_RELAXED);

	if (!ring)
		return false;
	for (;;) {
		int64_t diff;

		c = &ring[pos & QUEUE_MASK];
		diff = (int64_t)(__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) - pos);
		if (diff == 0) {
			if (__atomic_compare_exchange_n(&q.enq_pos, &pos, pos + 1, true,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
				break;
		} else if (diff < 0) {
			return false; /* the cell still holds a hit from the previous lap: full */
		} else {
			pos = __atomic_load_n(&q.enq_pos, __ATOMIC_RELAXED);
		}
	}
	c->item = *item;
	/*
	 * Sequentially consistent publish, then look: paired with the consumer's store of
	 * consumer_sleeping and its second look at the cell, either it sees this cell or we see it
	 * asleep.
	 */
	__atomic_store_n(&c->seq, pos + 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&q.consumer_sleeping, __ATOMIC_SEQ_CST)) {
		__atomic_fetch_add(&q.wake_word, 1, __ATOMIC_RELAXED);
		futex_wake(&q.wake_word, 1);
	}
	return true;
}

static void deliver(const struct lk__watch_item *item)
{
	struct lk_watch *w = lk__watch_entry_lookup(item->index);
	struct lk_watch_hit hit;

	if (!w)
		return;
	delivering = w;
	__atomic_fetch_add(&w->inflight, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&w->live, __ATOMIC_SEQ_CST) &&
	    __atomic_load_n(&w->gen, __ATOMIC_ACQUIRE) == item->gen) {
		memset(&hit, 0, sizeof(hit));
		hit.watch = w;
		hit.addr = (const void *)item->addr;
		hit.len = item->len;
		hit.ip = (const void *)item->ip;
		hit.tid = item->tid;
		hit.access = w->flags & LK__WATCH_ACCESS_MASK;
		hit.has_value = item->has_value;
		hit.late = item->late;
		hit.value = item->value;
		hit.time_ns = item->time_ns;
		/* Counted first: the callback may remove w, after which w is not ours to touch. */
		__atomic_fetch_add(&w->delivered, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&lk__watch_total_delivered, 1, __ATOMIC_RELAXED);
		w->fn(&hit, w->arg);
	}
	__atomic_fetch_sub(&w->inflight, 1, __ATOMIC_RELEASE);
	delivering = NULL;
}

static void finished_one(void)
{
	__atomic_fetch_add(&q.done, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&q.sync_waiters, __ATOMIC_SEQ_CST)) {
		__atomic_fetch_add(&q.done_word, 1, __ATOMIC_RELEASE);
		futex_wake(&q.done_word, INT_MAX);
	}
}

/* The next published cell, or NULL. */
static struct cell *peek(void)
{
	struct cell *c = &cells[q.deq_pos & QUEUE_MASK];

	return __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) == q.deq_pos + 1 ? c : NULL;
}

static bool peek_seq_cst(void)
{
	struct cell *c = &cells[q.deq_pos & QUEUE_MASK];

	return __atomic_load_n(&c->seq, __ATOMIC_SEQ_CST) == q.deq_pos + 1;
}

static void sleep_until_queued(void)
{
	uint32_t seen = __atomic_load_n(&q.wake_word, __ATOMIC_RELAXED);

	__atomic_store_n(&q.consumer_sleeping, 1, __ATOMIC_SEQ_CST);
	if (!peek_seq_cst())
		futex_wait(&q.wake_word, seen);
	__atomic_store_n(&q.consumer_sleeping, 0, __ATOMIC_RELAXED);
}

static void *delivery_thread(void *arg)
{
	(void)arg;
	is_delivery_thread = true;
	for (;;) {
		struct cell *c = peek();
		struct lk__watch_item item;

		if (!c) {
			sleep_until_queued();
			continue;
		}
		item = c->item;
		__atomic_store_n(&c->seq, q.deq_pos + LK_WATCH_QUEUE_LEN, __ATOMIC_RELEASE);
		__atomic_store_n(&q.deq_pos, q.deq_pos + 1, __ATOMIC_RELAXED);
		deliver(&item);
		finished_one();
	}
	return NULL;
}

/* Asynchronous signals go to the application's threads; faults and traps stay deliverable. */
static void block_async_signals(sigset_t *saved)
{
	sigset_t set;

	sigfillset(&set);
	sigdelset(&set, SIGTRAP);
	sigdelset(&set, SIGSEGV);
	sigdelset(&set, SIGBUS);
	sigdelset(&set, SIGILL);
	sigdelset(&set, SIGFPE);
	pthread_sigmask(SIG_SETMASK, &set, saved);
}

static int start_locked(void)
{
	struct cell *ring;
	pthread_attr_t attr;
	pthread_t thread;
	sigset_t saved;
	int err;

	ring = calloc(LK_WATCH_QUEUE_LEN, sizeof(*ring));
	if (!ring)
		return lk__fail(-ENOMEM, "out of memory for the deferred watchpoint queue");
	for (uint64_t i = 0; i < LK_WATCH_QUEUE_LEN; i++)
		ring[i].seq = i;
	memset(&q, 0, sizeof(q));
	__atomic_store_n(&cells, ring, __ATOMIC_RELEASE);

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	block_async_signals(&saved);
	err = pthread_create(&thread, &attr, delivery_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		__atomic_store_n(&cells, NULL, __ATOMIC_RELEASE);
		free(ring);
		return lk__fail(-EAGAIN, "cannot start the watchpoint delivery thread: %s",
				strerror(err));
	}
	pthread_setname_np(thread, "lk-watch");
	return 0;
}

int lk__watch_deliver_start(void)
{
	int err = 0;

	if (__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&start_mutex);
	if (!started) {
		err = start_locked();
		if (!err)
			__atomic_store_n(&started, true, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&start_mutex);
	return err;
}

LK_API int lk_watch_sync(void)
{
	uint64_t target;

	if (is_delivery_thread)
		return lk__fail(-EDEADLK,
				"lk_watch_sync() called from a deferred callback: the delivery "
				"thread cannot wait for itself");
	if (!__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		return 0;
	target = __atomic_load_n(&q.enq_pos, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&q.sync_waiters, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		uint32_t seen = __atomic_load_n(&q.done_word, __ATOMIC_ACQUIRE);

		if (__atomic_load_n(&q.done, __ATOMIC_SEQ_CST) >= target)
			break;
		futex_wait(&q.done_word, seen);
	}
	__atomic_fetch_sub(&q.sync_waiters, 1, __ATOMIC_SEQ_CST);
	return 0;
}

void lk__watch_deliver_fork_child(void)
{
	/* The thread is gone; the queue (and anything in it) belonged to the parent. */
	__atomic_store_n(&cells, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&started, false, __ATOMIC_RELAXED);
	pthread_mutex_init(&start_mutex, NULL);
	is_delivery_thread = false;
	delivering = NULL;
}
