// SPDX-License-Identifier: MIT
/*
 * Named locks and their statistics: exclusion under threads, exact counts, waits and holds of a
 * known length, owner changes, the hold sampling rate, the registry, the report, bad input.
 *
 * Durations are only bounded from below by what the test itself guarantees (a thread that sleeps
 * H while holding the lock, with the waiter known to be waiting), never from above: the machine is
 * shared. The 2% slack on those bounds is for converting TSC ticks to nanoseconds.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/error.h>
#include <lowkey/lock.h>

#define HOLD_NS (40 * 1000 * 1000ull) /* the known hold: 40 ms */
#define SLACK 0.98

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static int setup_exact(void **state)
{
	(void)state;
	lk_lockstat_set_hold_sampling(1);
	return 0;
}

/* ---- known contention: a holder sleeps HOLD_NS while the waiter is known to be waiting ---- */

struct waiter {
	void *lock;
	void (*lock_fn)(void *);
	void (*unlock_fn)(void *);
	uint64_t wall_ns; /* the waiter's lock call, timed from outside */
	int started;
};

static void *waiter_thread(void *arg)
{
	struct waiter *w = arg;
	uint64_t t0;

	__atomic_store_n(&w->started, 1, __ATOMIC_SEQ_CST);
	t0 = now_ns();
	w->lock_fn(w->lock);
	w->wall_ns = now_ns() - t0;
	w->unlock_fn(w->lock);
	return NULL;
}

static void mutex_lock_fn(void *l)
{
	lk_mutex_lock(l);
}
static void mutex_unlock_fn(void *l)
{
	lk_mutex_unlock(l);
}
static void read_lock_fn(void *l)
{
	lk_rwlock_read_lock(l);
}
static void read_unlock_fn(void *l)
{
	lk_rwlock_read_unlock(l);
}
static void write_lock_fn(void *l)
{
	lk_rwlock_write_lock(l);
}
static void write_unlock_fn(void *l)
{
	lk_rwlock_write_unlock(l);
}
static void spin_lock_fn(void *l)
{
	lk_spin_lock(l);
}
static void spin_unlock_fn(void *l)
{
	lk_spin_unlock(l);
}

/* Wait until *word has any of bits: the waiter has announced it sleeps. */
static void await_bits(uint32_t *word, uint32_t bits)
{
	while (!(__atomic_load_n(word, __ATOMIC_SEQ_CST) & bits))
		sched_yield();
}

static void mutex_known_contention(void **state)
{
	static lk_mutex_t m;
	struct waiter w = { &m, mutex_lock_fn, mutex_unlock_fn };
	struct lk_lockstat st;
	pthread_t t;

	(void)state;
	assert_int_equal(lk_mutex_init(&m, "known"), 0);
	lk_mutex_lock(&m);
	assert_int_equal(pthread_create(&t, NULL, waiter_thread, &w), 0);
	await_bits(&m.lk__word,
		   2); /* the waiter swapped in 2: it is in the slow path, about to sleep */
	sleep_ns(HOLD_NS);
	lk_mutex_unlock(&m);
	assert_int_equal(pthread_join(t, NULL), 0);

	assert_int_equal(lk_mutex_stat(&m, &st), 0);
	assert_string_equal(st.name, "known");
	assert_ptr_equal(st.lock, &m);
	assert_int_equal(st.kind, LK_LOCK_MUTEX);
	assert_int_equal(st.acquisitions, 2);
	assert_int_equal(st.contended, 1);
	assert_true(st.wait_max_ns >= SLACK * HOLD_NS);
	assert_true(st.wait_total_ns <= w.wall_ns / SLACK);
	assert_int_equal(st.wait_mean_ns, st.wait_total_ns);
	assert_int_equal(st.hold_samples, 2);
	assert_true(st.hold_max_ns >= SLACK * HOLD_NS);
	assert_true(st.hold_total_ns >= st.hold_max_ns);
	assert_int_equal(st.owner_changes, 1);
	assert_true(st.lifetime_ns >= st.wait_total_ns);
	assert_true(st.wait_fraction > 0 && st.wait_fraction <= 1);
	assert_int_equal(lk_mutex_destroy(&m), 0);
}

static void rwlock_reader_waits_for_writer(void **state)
{
	static lk_rwlock_t l;
	struct waiter w = { &l, read_lock_fn, read_unlock_fn };
	struct lk_lockstat st;
	pthread_t t;

	(void)state;
	assert_int_equal(lk_rwlock_init(&l, "rw-reader-waits"), 0);
	lk_rwlock_write_lock(&l);
	assert_int_equal(pthread_create(&t, NULL, waiter_thread, &w), 0);
	await_bits(&l.lk__state, LK__RW_READERS_WAITING);
	sleep_ns(HOLD_NS);
	lk_rwlock_write_unlock(&l);
	assert_int_equal(pthread_join(t, NULL), 0);

	assert_int_equal(lk_rwlock_stat(&l, &st), 0);
	assert_int_equal(st.kind, LK_LOCK_RWLOCK);
	assert_int_equal(st.acquisitions, 1);
	assert_int_equal(st.read_acquisitions, 1);
	assert_int_equal(st.contended, 1);
	assert_true(st.wait_max_ns >= SLACK * HOLD_NS);
	assert_true(st.wait_total_ns <= w.wall_ns / SLACK);
	assert_true(st.hold_max_ns >= SLACK * HOLD_NS);
	assert_int_equal(st.read_hold_samples, 1);
	assert_int_equal(l.lk__state, 0);
	assert_int_equal(lk_rwlock_destroy(&l), 0);
}

static void rwlock_writer_waits_for_reader(void **state)
{
	static lk_rwlock_t l;
	struct waiter w = { &l, write_lock_fn, write_unlock_fn };
	struct lk_lockstat st;
	pthread_t t;

	(void)state;
	assert_int_equal(lk_rwlock_init(&l, "rw-writer-waits"), 0);
	lk_rwlock_read_lock(&l);
	assert_int_equal(pthread_create(&t, NULL, waiter_thread, &w), 0);
	await_bits(&l.lk__state, LK__RW_WRITERS_WAITING);
	/* a waiting writer keeps new readers out */
	assert_int_equal(lk_rwlock_read_trylock(&l), -EBUSY);
	sleep_ns(HOLD_NS);
	lk_rwlock_read_unlock(&l);
	assert_int_equal(pthread_join(t, NULL), 0);

	assert_int_equal(lk_rwlock_stat(&l, &st), 0);
	assert_int_equal(st.read_acquisitions, 1);
	assert_int_equal(st.acquisitions, 1);
	assert_int_equal(st.contended, 1);
	assert_true(st.wait_max_ns >= SLACK * HOLD_NS);
	assert_true(st.read_hold_max_ns >= SLACK * HOLD_NS);
	assert_int_equal(lk_rwlock_destroy(&l), 0);
}

/* A spinning waiter leaves no trace in the lock word, so its wait has no known lower bound. */
static void spinlock_known_hold(void **state)
{
	static lk_spinlock_t s;
	struct lk_lockstat st;
	pthread_t t;
	struct waiter w = { &s, spin_lock_fn, spin_unlock_fn };

	(void)state;
	assert_int_equal(lk_spinlock_init(&s, "spin-known"), 0);
	lk_spin_lock(&s);
	assert_int_equal(pthread_create(&t, NULL, waiter_thread, &w), 0);
	while (!__atomic_load_n(&w.started, __ATOMIC_SEQ_CST))
		sched_yield();
	sleep_ns(HOLD_NS);
	lk_spin_unlock(&s);
	assert_int_equal(pthread_join(t, NULL), 0);

	assert_int_equal(lk_spinlock_stat(&s, &st), 0);
	assert_int_equal(st.kind, LK_LOCK_SPINLOCK);
	assert_int_equal(st.acquisitions, 2);
	assert_true(st.contended <= 1);
	assert_true(st.wait_total_ns <= w.wall_ns / SLACK);
	assert_true(st.hold_max_ns >= SLACK * HOLD_NS);
	assert_int_equal(st.hold_samples, 2);
	assert_int_equal(lk_spinlock_destroy(&s), 0);
}

/* ---- exclusion and exact counts under threads ---- */

#define THREADS 4
#define ROUNDS 20000

static lk_mutex_t hammer_mutex = LK_MUTEX_INIT("hammer-mutex");
static lk_spinlock_t hammer_spin = LK_SPINLOCK_INIT("hammer-spin");
static lk_rwlock_t hammer_rw = LK_RWLOCK_INIT("hammer-rw");
static long guarded_m, guarded_s, guarded_a, guarded_b;
static int torn;

static void *hammer(void *arg)
{
	long id = (long)arg;

	for (int i = 0; i < ROUNDS; i++) {
		lk_mutex_lock(&hammer_mutex);
		guarded_m++;
		lk_mutex_unlock(&hammer_mutex);

		lk_spin_lock(&hammer_spin);
		guarded_s++;
		lk_spin_unlock(&hammer_spin);

		if ((i + id) % 4 == 0) {
			lk_rwlock_write_lock(&hammer_rw);
			guarded_a++;
			guarded_b++;
			lk_rwlock_write_unlock(&hammer_rw);
		} else {
			lk_rwlock_read_lock(&hammer_rw);
			if (__atomic_load_n(&guarded_a, __ATOMIC_RELAXED) !=
			    __atomic_load_n(&guarded_b, __ATOMIC_RELAXED))
				__atomic_store_n(&torn, 1, __ATOMIC_RELAXED);
			lk_rwlock_read_unlock(&hammer_rw);
		}
	}
	return NULL;
}

static void exclusion_and_counts(void **state)
{
	pthread_t t[THREADS];
	struct lk_lockstat st;
	uint64_t writes = 0;

	(void)state;
	for (long i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	for (long id = 0; id < THREADS; id++)
		for (int i = 0; i < ROUNDS; i++)
			writes += (i + id) % 4 == 0;

	assert_int_equal(guarded_m, THREADS * ROUNDS);
	assert_int_equal(guarded_s, THREADS * ROUNDS);
	assert_int_equal(guarded_a, (long)writes);
	assert_false(torn);

	assert_int_equal(lk_mutex_stat(&hammer_mutex, &st), 0);
	assert_int_equal(st.acquisitions, THREADS * ROUNDS);
	assert_true(st.contended <= st.acquisitions);
	assert_true(st.wait_max_ns <= st.wait_total_ns);
	assert_int_equal(st.hold_samples, THREADS * ROUNDS); /* exact timing in this group */
	assert_true(st.owner_changes < st.acquisitions);
	assert_int_equal(hammer_mutex.lk__word, 0);

	assert_int_equal(lk_spinlock_stat(&hammer_spin, &st), 0);
	assert_int_equal(st.acquisitions, THREADS * ROUNDS);
	assert_int_equal(st.hold_samples, THREADS * ROUNDS);

	assert_int_equal(lk_rwlock_stat(&hammer_rw, &st), 0);
	assert_int_equal(st.acquisitions, writes);
	assert_int_equal(st.read_acquisitions, (uint64_t)THREADS * ROUNDS - writes);
	assert_int_equal(st.hold_samples, writes);
	assert_int_equal(st.read_hold_samples, st.read_acquisitions);
	assert_int_equal(hammer_rw.lk__state, 0);
	assert_int_equal(hammer_rw.lk__read_timing, 0);
}

/* ---- owner changes ---- */

static lk_mutex_t pingpong = LK_MUTEX_INIT("pingpong");

static void *lock_once(void *arg)
{
	(void)arg;
	lk_mutex_lock(&pingpong);
	lk_mutex_unlock(&pingpong);
	return NULL;
}

static void owner_changes(void **state)
{
	struct lk_lockstat st;
	pthread_t t;

	(void)state;
	for (int i = 0; i < 3; i++) {
		lk_mutex_lock(&pingpong);
		lk_mutex_unlock(&pingpong);
	}
	assert_int_equal(lk_mutex_stat(&pingpong, &st), 0);
	assert_int_equal(st.owner_changes, 0); /* one thread: never changes hands */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_create(&t, NULL, lock_once, NULL), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		lk_mutex_lock(&pingpong);
		lk_mutex_unlock(&pingpong);
	}
	assert_int_equal(lk_mutex_stat(&pingpong, &st), 0);
	assert_int_equal(st.acquisitions, 7);
	assert_int_equal(st.owner_changes, 4); /* main -> t1 -> main -> t2 -> main */
}

/* ---- hold sampling ---- */

static void hold_sampling_rate(void **state)
{
	static lk_mutex_t m;
	struct lk_lockstat st;
	const uint64_t n = 16000;

	(void)state;
	assert_int_equal(lk_lockstat_set_hold_sampling(16), 1);
	assert_int_equal(lk_mutex_init(&m, "sampled"), 0);
	for (uint64_t i = 0; i < n; i++) {
		lk_mutex_lock(&m);
		lk_mutex_unlock(&m);
	}
	assert_int_equal(lk_mutex_stat(&m, &st), 0);
	/* one in 16, give or take the discrepancy of the Weyl sequence */
	assert_true(st.hold_samples >= n / 16 - 16 && st.hold_samples <= n / 16 + 16);
	/* the total is the mean over all acquisitions: the rounded mean times n, give or take rounding */
	assert_true(st.hold_total_ns > 0);
	assert_true(llabs((long long)st.hold_total_ns - (long long)(st.hold_mean_ns * n)) <=
		    (long long)n);
	assert_int_equal(lk_lockstat_set_hold_sampling(1), 16);
	assert_int_equal(lk_mutex_destroy(&m), 0);
}

/* ---- the registry and the report ---- */

struct seen {
	int alpha, beta, gamma, statik;
	const void *alpha_addr;
};

static int collect(const struct lk_lockstat *st, void *arg)
{
	struct seen *s = arg;

	if (strcmp(st->name, "alpha") == 0) {
		s->alpha++;
		s->alpha_addr = st->lock;
	}
	s->beta += strcmp(st->name, "beta") == 0;
	s->gamma += strcmp(st->name, "gamma") == 0;
	s->statik += strcmp(st->name, "static-unused") == 0;
	return 0;
}

static int stop_at_first(const struct lk_lockstat *st, void *arg)
{
	(void)st;
	(*(int *)arg)++;
	return 42;
}

static lk_mutex_t static_unused = LK_MUTEX_INIT("static-unused");

static void registry_and_iterator(void **state)
{
	static lk_mutex_t alpha;
	static lk_rwlock_t beta;
	static lk_spinlock_t gamma_;
	struct seen s = { 0 };
	int calls = 0;

	(void)state;
	assert_int_equal(lk_mutex_init(&alpha, "alpha"), 0);
	assert_int_equal(lk_rwlock_init(&beta, "beta"), 0);
	assert_int_equal(lk_spinlock_init(&gamma_, "gamma"), 0);
	assert_int_equal(lk_lockstat_foreach(collect, &s), 0);
	assert_int_equal(s.alpha, 1);
	assert_ptr_equal(s.alpha_addr, &alpha);
	assert_int_equal(s.beta, 1);
	assert_int_equal(s.gamma, 1);
	assert_int_equal(s.statik, 0); /* static and never used: not registered yet */

	lk_mutex_lock(&static_unused);
	lk_mutex_unlock(&static_unused);
	memset(&s, 0, sizeof(s));
	assert_int_equal(lk_lockstat_foreach(collect, &s), 0);
	assert_int_equal(s.statik, 1);

	assert_int_equal(lk_lockstat_foreach(stop_at_first, &calls), 42);
	assert_int_equal(calls, 1);

	assert_int_equal(lk_mutex_destroy(&alpha), 0);
	assert_int_equal(lk_rwlock_destroy(&beta), 0);
	assert_int_equal(lk_spinlock_destroy(&gamma_), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(lk_lockstat_foreach(collect, &s), 0);
	assert_int_equal(s.alpha + s.beta + s.gamma, 0);
	assert_int_equal(lk_mutex_destroy(&alpha), 0); /* twice: harmless */
}

static char *report(unsigned int flags)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(lk_lockstat_report(f, flags), 0);
	fclose(f);
	return buf;
}

static void report_text_and_json(void **state)
{
	static lk_mutex_t quiet, busy;
	struct waiter w = { &busy, mutex_lock_fn, mutex_unlock_fn };
	pthread_t t;
	char *text, *json, *contended;

	(void)state;
	assert_int_equal(lk_mutex_init(&quiet, "quiet \"lock\""), 0);
	assert_int_equal(lk_mutex_init(&busy, "busy"), 0);
	lk_mutex_lock(&quiet);
	lk_mutex_unlock(&quiet);
	lk_mutex_lock(&busy);
	assert_int_equal(pthread_create(&t, NULL, waiter_thread, &w), 0);
	await_bits(&busy.lk__word, 2);
	lk_mutex_unlock(&busy);
	assert_int_equal(pthread_join(t, NULL), 0);

	text = report(0);
	assert_non_null(strstr(text, "1/1000cpu"));
	assert_non_null(strstr(text, "busy"));
	assert_non_null(strstr(text, "quiet"));
	/* sorted by total wait: the contended lock comes before the quiet one */
	assert_true(strstr(text, "busy") < strstr(text, "quiet"));

	json = report(LK_LOCKSTAT_JSON);
	assert_non_null(strstr(json, "\"name\": \"busy\""));
	assert_non_null(strstr(json, "\"name\": \"quiet \\\"lock\\\"\"")); /* escaped */
	assert_non_null(strstr(json, "\"wait_fraction\""));
	assert_non_null(strstr(json, "\"hold_sampling\": 1"));

	contended = report(LK_LOCKSTAT_CONTENDED | LK_LOCKSTAT_JSON);
	assert_non_null(strstr(contended, "\"busy\""));
	assert_null(strstr(contended, "quiet"));
	free(text);
	free(json);
	free(contended);
	lk_mutex_destroy(&quiet);
	lk_mutex_destroy(&busy);
}

/* ---- bad input ---- */

static void bad_input(void **state)
{
	static lk_mutex_t m;
	static lk_rwlock_t l;
	static lk_spinlock_t s;
	struct lk_lockstat st;

	(void)state;
	assert_int_equal(lk_mutex_init(NULL, "x"), -EINVAL);
	assert_int_equal(lk_rwlock_init(NULL, "x"), -EINVAL);
	assert_int_equal(lk_spinlock_init(NULL, "x"), -EINVAL);
	assert_int_equal(lk_mutex_stat(NULL, &st), -EINVAL);
	assert_int_equal(lk_mutex_stat(&m, NULL), -EINVAL);
	assert_int_equal(lk_lockstat_report(NULL, 0), -EINVAL);
	assert_int_equal(lk_lockstat_report(stdout, 0x100), -EINVAL);
	assert_int_equal(lk_lockstat_foreach(NULL, NULL), -EINVAL);
	assert_int_equal(lk_lockstat_set_hold_sampling(0), -EINVAL);
	assert_non_null(strstr(lk_last_error(), "period"));

	assert_int_equal(lk_mutex_init(&m, NULL), 0); /* unnamed is fine */
	lk_mutex_lock(&m);
	assert_int_equal(lk_mutex_trylock(&m), -EBUSY);
	assert_int_equal(lk_mutex_destroy(&m), -EBUSY);
	assert_non_null(strstr(lk_last_error(), "held"));
	lk_mutex_unlock(&m);
	assert_int_equal(lk_mutex_destroy(&m), 0);

	assert_int_equal(lk_rwlock_init(&l, "bad-rw"), 0);
	lk_rwlock_read_lock(&l);
	assert_int_equal(lk_rwlock_write_trylock(&l), -EBUSY);
	assert_int_equal(lk_rwlock_read_trylock(&l), 0);
	lk_rwlock_read_unlock(&l);
	assert_int_equal(lk_rwlock_destroy(&l), -EBUSY);
	lk_rwlock_read_unlock(&l);
	assert_int_equal(lk_rwlock_write_trylock(&l), 0);
	assert_int_equal(lk_rwlock_read_trylock(&l), -EBUSY);
	lk_rwlock_write_unlock(&l);
	assert_int_equal(lk_rwlock_destroy(&l), 0);

	assert_int_equal(lk_spinlock_init(&s, "bad-spin"), 0);
	assert_int_equal(lk_spin_trylock(&s), 0);
	assert_int_equal(lk_spin_trylock(&s), -EBUSY);
	assert_int_equal(lk_spinlock_destroy(&s), -EBUSY);
	lk_spin_unlock(&s);
	assert_int_equal(lk_spinlock_destroy(&s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mutex_known_contention),
		cmocka_unit_test(rwlock_reader_waits_for_writer),
		cmocka_unit_test(rwlock_writer_waits_for_reader),
		cmocka_unit_test(spinlock_known_hold),
		cmocka_unit_test(exclusion_and_counts),
		cmocka_unit_test(owner_changes),
		cmocka_unit_test(hold_sampling_rate),
		cmocka_unit_test(registry_and_iterator),
		cmocka_unit_test(report_text_and_json),
		cmocka_unit_test(bad_input),
	};
	return cmocka_run_group_tests(tests, setup_exact, NULL);
}
