// SPDX-License-Identifier: MIT
/*
 * Deferred delivery: callbacks run on lowkey's delivery thread in the order the hits happened;
 * a flood beyond the queue is dropped and counted (hits = delivered + dropped); removal waits for a
 * callback that is running, and a callback may remove its own watchpoint.
 */
#include <errno.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include <lowkey/error.h>

#include "watch/watch_test.h"
#include "watch/watch_attempts.h"

static long watched;

struct seen {
	int n;
	pid_t delivery_tid;
	pid_t hit_tid;
	uint64_t values[MAX_HITS];
	bool ordered;
	bool had_context;
	sem_t go; /* the first callback waits on it, when blocking */
	bool block_first;
	sem_t entered;
};

static void deferred_callback(const struct lk_watch_hit *hit, void *arg)
{
	struct seen *s = arg;

	if (s->n == 0) {
		s->delivery_tid = test_gettid();
		s->hit_tid = hit->tid;
		if (s->block_first) {
			sem_post(&s->entered);
			sem_wait(&s->go);
		}
	}
	if (s->n > 0 && s->n < MAX_HITS && hit->value <= s->values[s->n - 1])
		s->ordered = false;
	if (s->n < MAX_HITS)
		s->values[s->n] = hit->value;
	if (hit->context)
		s->had_context = true; /* there is no signal context on the delivery thread */
	s->n++;
}

static void init_seen(struct seen *s, bool block_first)
{
	memset(s, 0, sizeof(*s));
	s->ordered = true;
	s->block_first = block_first;
	sem_init(&s->go, 0, 0);
	sem_init(&s->entered, 0, 0);
}

static enum attempt delivery_thread_in_order(void)
{
	struct lk_watch_stats st, before, after;
	struct lk_watch *w;
	struct seen s;
	enum attempt got;

	init_seen(&s, false);
	assert_int_equal(lk_watch_stats(NULL, &before), 0);
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_DEFERRED,
				      deferred_callback, &s),
			 0);
	for (int i = 1; i <= 20; i++)
		WRITE_ONCE(watched, i);
	assert_int_equal(lk_watch_sync(), 0);
	assert_int_equal(lk_watch_stats(NULL, &after), 0);
	got = burst_counted(w, 20, after.unattributed - before.unattributed);
	assert_int_equal(lk_watch_stats(w, &st), 0);
	assert_int_equal(lk_watch_remove(w), 0);
	if (got == MACHINE_MISSED)
		return got;
	assert_int_equal(s.n, st.hits);
	assert_true(s.ordered);
	assert_false(s.had_context);
	if (st.hits == 20)
		assert_int_equal(s.values[19], 20);
	assert_int_equal(s.hit_tid, test_gettid());
	assert_true(s.delivery_tid > 0);
	assert_int_not_equal(s.delivery_tid, test_gettid());
	assert_int_equal(st.delivered, st.hits);
	assert_int_equal(st.dropped, 0);
	return got;
}

static void runs_on_delivery_thread_in_order(void **state)
{
	(void)state;
	with_attempts(delivery_thread_in_order, "20 deferred hits");
}

/* Write until the first (blocking) callback has started; returns the number of writes. */
static int write_until_entered(struct seen *s)
{
	struct timespec deadline;
	int writes = 0;

	do {
		WRITE_ONCE(watched, writes++);
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_nsec += 100 * 1000 * 1000;
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
	} while (sem_timedwait(&s->entered, &deadline) != 0);
	return writes;
}

static enum attempt flood_while_callback_blocks(void)
{
	const int flood = 3 * LK_WATCH_QUEUE_LEN;
	struct lk_watch_stats st, total_before, total_after;
	struct lk_watch *w;
	struct seen s;
	enum attempt got;
	int writes;

	init_seen(&s, true);
	assert_int_equal(lk_watch_stats(NULL, &total_before), 0);
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_DEFERRED,
				      deferred_callback, &s),
			 0);
	writes = write_until_entered(&s); /* the delivery thread is stuck in the first callback */
	for (int i = 0; i < flood; i++)
		WRITE_ONCE(watched, writes++);
	sem_post(&s.go);
	assert_int_equal(lk_watch_sync(), 0);
	assert_int_equal(lk_watch_stats(w, &st), 0);
	assert_int_equal(lk_watch_stats(NULL, &total_after), 0);
	got = burst_counted(w, (uint64_t)writes,
			    total_after.unattributed - total_before.unattributed);
	assert_int_equal(lk_watch_remove(w), 0);
	if (got == MACHINE_MISSED)
		return got;
	assert_int_equal(st.delivered + st.dropped, st.hits);
	assert_int_equal(st.delivered, s.n);
	/* The queue held LK_WATCH_QUEUE_LEN while the first callback blocked: the rest were dropped. */
	assert_int_equal(st.delivered, LK_WATCH_QUEUE_LEN + 1);
	assert_true(st.dropped >= (uint64_t)flood - LK_WATCH_QUEUE_LEN - 64);
	assert_true(s.ordered);
	assert_int_equal(total_after.dropped - total_before.dropped, st.dropped);
	return got;
}

/* Space again after a flood: nothing more is dropped. */
static enum attempt ten_after_flood(void)
{
	struct lk_watch_stats st, before, after;
	struct lk_watch *w;
	struct seen s;
	enum attempt got;

	init_seen(&s, false);
	assert_int_equal(lk_watch_stats(NULL, &before), 0);
	assert_int_equal(lk_watch_add(&w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_DEFERRED,
				      deferred_callback, &s),
			 0);
	for (int i = 1; i <= 10; i++)
		WRITE_ONCE(watched, i);
	assert_int_equal(lk_watch_sync(), 0);
	assert_int_equal(lk_watch_stats(w, &st), 0);
	assert_int_equal(lk_watch_stats(NULL, &after), 0);
	got = burst_counted(w, 10, after.unattributed - before.unattributed);
	assert_int_equal(lk_watch_remove(w), 0);
	assert_int_equal(st.delivered, st.hits);
	assert_int_equal(st.dropped, 0);
	return got;
}

static void flood_drops_and_counts(void **state)
{
	(void)state;
	with_attempts(flood_while_callback_blocks, "a flood while the callback blocks");
	with_attempts(ten_after_flood, "10 hits after the flood");
}

/* lk_watch_remove() while the callback runs: it returns only after the callback did. */
struct remover {
	struct lk_watch *w;
	int done;
};

static void *remove_main(void *p)
{
	struct remover *r = p;

	lk_watch_remove(r->w);
	__atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void remove_waits_for_running_callback(void **state)
{
	struct remover r = { 0 };
	struct seen s;
	pthread_t t;

	(void)state;
	init_seen(&s, true);
	assert_int_equal(lk_watch_add(&r.w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_DEFERRED,
				      deferred_callback, &s),
			 0);
	write_until_entered(&s);
	WRITE_ONCE(watched, -1); /* queued behind the blocked one: discarded by the removal */
	assert_int_equal(pthread_create(&t, NULL, remove_main, &r), 0);
	usleep(20000);
	assert_int_equal(__atomic_load_n(&r.done, __ATOMIC_SEQ_CST), 0); /* still waiting */
	sem_post(&s.go);
	pthread_join(t, NULL);
	assert_int_equal(r.done, 1);
	assert_int_equal(lk_watch_sync(), 0);
	assert_int_equal(s.n, 1); /* the second hit never reached the removed watchpoint */
}

/* A deferred callback may do anything, removing its own watchpoint included. */
struct self_remove {
	struct lk_watch *w;
	int calls, remove_result, sync_result;
};

static void removing_callback(const struct lk_watch_hit *hit, void *arg)
{
	struct self_remove *sr = arg;

	(void)hit;
	sr->calls++;
	sr->sync_result = lk_watch_sync();
	sr->remove_result = lk_watch_remove(sr->w);
}

static void callback_removes_its_own(void **state)
{
	struct self_remove sr = { 0 };

	(void)state;
	assert_int_equal(lk_watch_add(&sr.w, &watched, 8, LK_WATCH_WRITE | LK_WATCH_DEFERRED,
				      removing_callback, &sr),
			 0);
	WRITE_ONCE(watched, 1);
	WRITE_ONCE(watched, 2);
	assert_int_equal(lk_watch_sync(), 0);
	assert_int_equal(sr.calls, 1);
	assert_int_equal(sr.remove_result, 0);
	assert_int_equal(sr.sync_result, -EDEADLK);
}

/* Writes by the delivery thread itself (a process-scope watchpoint's callback) are not reported. */
static void writing_callback(const struct lk_watch_hit *hit, void *arg)
{
	int *calls = arg;

	(void)hit;
	(*calls)++;
	WRITE_ONCE(watched, 0); /* would loop forever if it were reported */
}

static void delivery_thread_writes_are_ignored(void **state)
{
	struct lk_watch_stats st;
	struct lk_watch *w;
	int calls = 0;

	(void)state;
	assert_int_equal(lk_watch_add(&w, &watched, 8,
				      LK_WATCH_WRITE | LK_WATCH_PROCESS | LK_WATCH_DEFERRED,
				      writing_callback, &calls),
			 0);
	WRITE_ONCE(watched, 5);
	assert_int_equal(lk_watch_sync(), 0);
	assert_int_equal(calls, 1);
	assert_int_equal(lk_watch_stats(w, &st), 0);
	assert_int_equal(st.hits, 1);
	assert_int_equal(lk_watch_remove(w), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(runs_on_delivery_thread_in_order),
		cmocka_unit_test(flood_drops_and_counts),
		cmocka_unit_test(remove_waits_for_running_callback),
		cmocka_unit_test(callback_removes_its_own),
		cmocka_unit_test(delivery_thread_writes_are_ignored),
	};
	lkt_watch_require();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
