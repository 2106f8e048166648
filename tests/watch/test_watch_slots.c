// SPDX-License-Identifier: MIT
/*
 * Slot accounting: four debug registers per thread; process-scope watchpoints take one in every
 * thread; -ENOSPC says who uses them; a removed slot can be used again; a thread's slots come back
 * when it exits; threads adding and removing at once never corrupt the counts.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include <lowkey/error.h>

#include "watch/watch_test.h"

#define SLOTS 4

static long vars[8];
static struct recorder rec;

static int reset(void **state)
{
	(void)state;
	memset(&rec, 0, sizeof(rec));
	return 0;
}

static void assert_slots(unsigned int thread, unsigned int process, unsigned int max_thread)
{
	struct lk_watch_slots s;

	assert_int_equal(lk_watch_slots(&s), 0);
	assert_int_equal(s.total, SLOTS);
	assert_int_equal(s.thread, thread);
	assert_int_equal(s.process, process);
	assert_int_equal(s.max_thread, max_thread);
}

static void fifth_in_a_thread_is_enospc(void **state)
{
	struct lk_watch *w[SLOTS], *extra = (struct lk_watch *)&rec;

	(void)state;
	for (int i = 0; i < SLOTS; i++)
		assert_int_equal(lk_watch_add(&w[i], &vars[i], 8, LK_WATCH_WRITE, record_hit, &rec),
				 0);
	assert_slots(4, 0, 4);
	assert_int_equal(lk_watch_add(&extra, &vars[4], 8, LK_WATCH_WRITE, record_hit, &rec),
			 -ENOSPC);
	assert_null(extra);
	assert_non_null(strstr(lk_last_error(),
			       "all 4 are in use, 4 by its thread-scope watchpoints "
			       "and 0 by process-scope"));
	/* Every one of the four works. */
	for (int i = 0; i < SLOTS; i++)
		WRITE_ONCE(vars[i], i + 1);
	assert_int_equal(hits_of(&rec), SLOTS);
	for (int i = 0; i < SLOTS; i++)
		assert_int_equal(lk_watch_remove(w[i]), 0);
	assert_slots(0, 0, 0);
}

static void remove_then_reuse(void **state)
{
	struct lk_watch *w[SLOTS], *again;

	(void)state;
	for (int i = 0; i < SLOTS; i++)
		assert_int_equal(lk_watch_add(&w[i], &vars[i], 8, LK_WATCH_WRITE, record_hit, &rec),
				 0);
	assert_int_equal(lk_watch_remove(w[2]), 0);
	assert_slots(3, 0, 3);
	assert_int_equal(lk_watch_add(&again, &vars[5], 8, LK_WATCH_WRITE, record_hit, &rec), 0);
	assert_slots(4, 0, 4);
	WRITE_ONCE(vars[2], 1); /* the removed one is gone */
	assert_int_equal(hits_of(&rec), 0);
	WRITE_ONCE(vars[5], 1); /* the new one fires */
	assert_int_equal(hits_of(&rec), 1);
	assert_ptr_equal(rec.hits[0].watch, again);
	assert_ptr_equal(rec.hits[0].addr, &vars[5]);
	assert_int_equal(lk_watch_remove(again), 0);
	for (int i = 0; i < SLOTS; i++)
		if (i != 2)
			assert_int_equal(lk_watch_remove(w[i]), 0);
	assert_slots(0, 0, 0);
}

/* The kernel agrees: after lowkey's four, a raw perf_event_open fails too (no hidden slack). */
static void process_scope_takes_one_in_every_thread(void **state)
{
	struct lk_watch *p, *t[SLOTS], *extra;

	(void)state;
	assert_int_equal(lk_watch_add(&p, &vars[0], 8, LK_WATCH_WRITE | LK_WATCH_PROCESS,
				      record_hit, &rec),
			 0);
	assert_slots(0, 1, 0);
	for (int i = 0; i < SLOTS - 1; i++)
		assert_int_equal(
			lk_watch_add(&t[i], &vars[i + 1], 8, LK_WATCH_WRITE, record_hit, &rec), 0);
	assert_int_equal(lk_watch_add(&extra, &vars[5], 8, LK_WATCH_WRITE, record_hit, &rec),
			 -ENOSPC);
	assert_non_null(strstr(lk_last_error(),
			       "3 by its thread-scope watchpoints and 1 by process-scope"));
	/* Another process-scope one would need a fourth slot in this thread as well. */
	assert_int_equal(lk_watch_add(&extra, &vars[5], 8, LK_WATCH_WRITE | LK_WATCH_PROCESS,
				      record_hit, &rec),
			 -ENOSPC);
	assert_non_null(strstr(lk_last_error(), "1 are used by process-scope watchpoints and the "
						"fullest thread uses 3 more"));
	for (int i = 0; i < SLOTS - 1; i++)
		assert_int_equal(lk_watch_remove(t[i]), 0);
	assert_int_equal(lk_watch_remove(p), 0);
	assert_slots(0, 0, 0);
}

/* A thread that takes n thread-scope slots, then waits until told to let them go and exit. */
struct holder {
	int n;
	struct lk_watch *w[SLOTS];
	pthread_barrier_t holding, release;
	int err;
};

static void *holder_main(void *p)
{
	struct holder *h = p;

	for (int i = 0; i < h->n && !h->err; i++)
		h->err = lk_watch_add(&h->w[i], &vars[i], 8, LK_WATCH_WRITE, NULL, NULL);
	pthread_barrier_wait(&h->holding);
	pthread_barrier_wait(&h->release);
	return NULL; /* exits with its watchpoints still added */
}

static void fullest_thread_limits_process_scope(void **state)
{
	struct holder h = { .n = 3 };
	struct lk_watch *p1, *p2;
	pthread_t t;

	(void)state;
	pthread_barrier_init(&h.holding, NULL, 2);
	pthread_barrier_init(&h.release, NULL, 2);
	assert_int_equal(pthread_create(&t, NULL, holder_main, &h), 0);
	pthread_barrier_wait(&h.holding);
	assert_int_equal(h.err, 0);
	assert_slots(0, 0, 3);

	/* This thread has room for four, but the other thread has only one left. */
	assert_int_equal(
		lk_watch_add(&p1, &vars[4], 8, LK_WATCH_WRITE | LK_WATCH_PROCESS, NULL, NULL), 0);
	assert_int_equal(lk_watch_add(&p2, &vars[5], 8, LK_WATCH_WRITE | LK_WATCH_PROCESS, NULL,
				      NULL),
			 -ENOSPC);
	assert_non_null(strstr(lk_last_error(), "fullest thread uses 3"));

	/* When the thread exits its slots come back; its handles stay valid but inert. */
	pthread_barrier_wait(&h.release);
	pthread_join(t, NULL);
	assert_slots(0, 1, 0);
	assert_int_equal(lk_watch_move(h.w[0], &vars[6], 8), -ESRCH);
	assert_non_null(strstr(lk_last_error(), "has exited"));
	for (int i = 0; i < h.n; i++)
		assert_int_equal(lk_watch_remove(h.w[i]), 0);
	assert_int_equal(
		lk_watch_add(&p2, &vars[5], 8, LK_WATCH_WRITE | LK_WATCH_PROCESS, NULL, NULL), 0);
	assert_slots(0, 2, 0);
	assert_int_equal(lk_watch_remove(p2), 0);
	assert_int_equal(lk_watch_remove(p1), 0);
	pthread_barrier_destroy(&h.holding);
	pthread_barrier_destroy(&h.release);
}

/* Another thread's watchpoint, removed from here: its own thread's slot comes back. */
static void remove_from_another_thread(void **state)
{
	struct holder h = { .n = 2 };
	pthread_t t;

	(void)state;
	pthread_barrier_init(&h.holding, NULL, 2);
	pthread_barrier_init(&h.release, NULL, 2);
	assert_int_equal(pthread_create(&t, NULL, holder_main, &h), 0);
	pthread_barrier_wait(&h.holding);
	assert_int_equal(h.err, 0);
	assert_slots(0, 0, 2);
	assert_int_equal(lk_watch_remove(h.w[0]), 0);
	assert_slots(0, 0, 1);
	pthread_barrier_wait(&h.release);
	pthread_join(t, NULL);
	assert_int_equal(lk_watch_remove(h.w[1]), 0);
	assert_slots(0, 0, 0);
	pthread_barrier_destroy(&h.holding);
	pthread_barrier_destroy(&h.release);
}

/*
 * Threads adding and removing thread-scope watchpoints while others add and remove process-scope
 * ones: every add that lowkey accepts, the kernel accepts too (lowkey's counts never fall behind
 * the kernel's), and at the end every count is back to zero.
 */
#define CHURNERS 4
#define ROUNDS 300

static int kernel_refused; /* an add lowkey let through but the kernel did not */

static void *thread_churn(void *p)
{
	long *var = p;

	for (int r = 0; r < ROUNDS; r++) {
		struct lk_watch *w[SLOTS + 1];
		int n = 0, err;

		/* Until lowkey says no: then it must be lowkey's own count that said it. */
		while (n <= SLOTS &&
		       !(err = lk_watch_add(&w[n], var, 8, LK_WATCH_WRITE, NULL, NULL)))
			n++;
		if (n > SLOTS || err != -ENOSPC || strstr(lk_last_error(), "kernel")) {
			print_error("thread add %d: %d %s\n", n, err, lk_last_error());
			__atomic_store_n(&kernel_refused, 1, __ATOMIC_RELAXED);
		}
		while (n)
			lk_watch_remove(w[--n]);
	}
	return NULL;
}

static void *process_churn(void *p)
{
	for (int r = 0; r < ROUNDS / 10; r++) {
		struct lk_watch *w;
		int err = lk_watch_add(&w, p, 8, LK_WATCH_WRITE | LK_WATCH_PROCESS, NULL, NULL);

		if (err == 0)
			lk_watch_remove(w);
		else if (err != -ENOSPC || strstr(lk_last_error(), "kernel")) {
			print_error("process add: %d %s\n", err, lk_last_error());
			__atomic_store_n(&kernel_refused, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

static void concurrent_adds_keep_exact_counts(void **state)
{
	pthread_t t[CHURNERS], p;

	(void)state;
	for (int i = 0; i < CHURNERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, thread_churn, &vars[i]), 0);
	assert_int_equal(pthread_create(&p, NULL, process_churn, &vars[7]), 0);
	for (int i = 0; i < CHURNERS; i++)
		pthread_join(t[i], NULL);
	pthread_join(p, NULL);
	assert_false(kernel_refused);
	assert_slots(0, 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(fifth_in_a_thread_is_enospc, reset),
		cmocka_unit_test_setup(remove_then_reuse, reset),
		cmocka_unit_test_setup(process_scope_takes_one_in_every_thread, reset),
		cmocka_unit_test_setup(fullest_thread_limits_process_scope, reset),
		cmocka_unit_test_setup(remove_from_another_thread, reset),
		cmocka_unit_test_setup(concurrent_adds_keep_exact_counts, reset),
	};
	lkt_watch_require();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
