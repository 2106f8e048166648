// SPDX-License-Identifier: MIT
/*
 * The per-CPU reader-writer lock: writers exclude everyone, readers exclude only writers and do
 * run together, and a steady stream of readers does not starve a writer.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lock.h>

#define READERS 4
#define WRITERS 2
#define ROUNDS 20000

static lk_pcpu_rwlock_t lock = LK_PCPU_RWLOCK_INIT; /* statically initialized: lazy slots */

/* Guarded state: a writer moves both halves; readers must never see them differ. */
static struct {
	long a, b;
} guarded;
static int readers_in, writers_in;
static int torn, overlap;
static int stop_readers;

static void *reader(void *arg)
{
	long rounds = 0;

	(void)arg;
	while (!__atomic_load_n(&stop_readers, __ATOMIC_RELAXED)) {
		lk_pcpu_read_lock(&lock);
		__atomic_add_fetch(&readers_in, 1, __ATOMIC_RELAXED);
		if (__atomic_load_n(&writers_in, __ATOMIC_RELAXED))
			__atomic_store_n(&overlap, 1, __ATOMIC_RELAXED);
		if (__atomic_load_n(&guarded.a, __ATOMIC_RELAXED) !=
		    __atomic_load_n(&guarded.b, __ATOMIC_RELAXED))
			__atomic_store_n(&torn, 1, __ATOMIC_RELAXED);
		if ((++rounds & 63) == 0)
			sched_yield(); /* linger now and then, so readers overlap */
		__atomic_sub_fetch(&readers_in, 1, __ATOMIC_RELAXED);
		lk_pcpu_read_unlock(&lock);
	}
	return NULL;
}

static void *writer(void *arg)
{
	(void)arg;
	for (int i = 0; i < ROUNDS / 10; i++) {
		lk_pcpu_write_lock(&lock);
		if (__atomic_add_fetch(&writers_in, 1, __ATOMIC_RELAXED) != 1 ||
		    __atomic_load_n(&readers_in, __ATOMIC_RELAXED) != 0)
			__atomic_store_n(&overlap, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&guarded.a, guarded.a + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&guarded.b, guarded.b + 1, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&writers_in, 1, __ATOMIC_RELAXED);
		lk_pcpu_write_unlock(&lock);
	}
	return NULL;
}

static void exclusion_under_contention(void **state)
{
	pthread_t r[READERS], w[WRITERS];

	(void)state;
	for (int i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&r[i], NULL, reader, NULL), 0);
	/* Writers finish their rounds while readers never stop coming: no starvation. */
	for (int i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, writer, NULL), 0);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(w[i], NULL);
	__atomic_store_n(&stop_readers, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);

	assert_int_equal(guarded.a, WRITERS * (ROUNDS / 10));
	assert_int_equal(guarded.b, guarded.a);
	assert_false(torn);
	assert_false(overlap);
}

static int second_reader_in;

static void *second_reader(void *arg)
{
	lk_pcpu_rwlock_t *l = arg;

	lk_pcpu_read_lock(l);
	__atomic_store_n(&second_reader_in, 1, __ATOMIC_RELEASE);
	lk_pcpu_read_unlock(l);
	return NULL;
}

/* A reader gets in while another holds the lock: readers share it. */
static void readers_share(void **state)
{
	lk_pcpu_rwlock_t l = LK_PCPU_RWLOCK_INIT;
	pthread_t t;
	int waited_ms = 0;

	(void)state;
	lk_pcpu_read_lock(&l);
	assert_int_equal(pthread_create(&t, NULL, second_reader, &l), 0);
	while (!__atomic_load_n(&second_reader_in, __ATOMIC_ACQUIRE) && waited_ms < 60000) {
		usleep(1000);
		waited_ms++;
	}
	assert_true(__atomic_load_n(&second_reader_in, __ATOMIC_ACQUIRE)); /* not blocked by us */
	lk_pcpu_read_unlock(&l);
	pthread_join(t, NULL);
	lk_pcpu_rwlock_destroy(&l);
}

static void init_and_destroy(void **state)
{
	lk_pcpu_rwlock_t l;

	(void)state;
	assert_int_equal(lk_pcpu_rwlock_init(&l), 0);
	lk_pcpu_read_lock(&l);
	lk_pcpu_read_lock(&l); /* nested read, no writer */
	lk_pcpu_read_unlock(&l);
	lk_pcpu_read_unlock(&l);
	lk_pcpu_write_lock(&l);
	lk_pcpu_write_unlock(&l);
	lk_pcpu_rwlock_destroy(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(init_and_destroy),
		cmocka_unit_test(exclusion_under_contention),
		cmocka_unit_test(readers_share),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
