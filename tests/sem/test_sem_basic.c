// SPDX-License-Identifier: MIT
/*
 * lk_semset: semantics on private and shared sets, waiting and waking, timeouts and signals,
 * removal, every bad input the header lists, corrupted shared headers, the waiter slots of
 * shared sets, the statistics, and exclusion under threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/error.h>
#include <lowkey/sem.h>

static char shm_name[64];

/* Each test runs on a private set, then again on a shared one (state: the name, or NULL). */
static int make_set(struct lk_semset **s, void **state, unsigned int nsems)
{
	const char *name = *state;

	if (name)
		lk_semset_unlink(name);
	return lk_semset_create(s, name, nsems, 0600);
}

static void done_with(struct lk_semset *s, void **state)
{
	assert_int_equal(lk_semset_close(s), 0);
	if (*state)
		lk_semset_unlink(*state);
}

static int op(struct lk_semset *s, unsigned short num, short delta, short flags)
{
	struct lk_sembuf b = { num, delta, flags };

	return lk_semop(s, &b, 1, NULL);
}

static int val(struct lk_semset *s, unsigned int num)
{
	return lk_semctl(s, num, LK_GETVAL);
}

/* ---- a thread that makes one call ---- */

struct call {
	struct lk_semset *s;
	struct lk_sembuf ops[4];
	size_t nops;
	const struct timespec *timeout;
	int result;
	int done;
	pthread_t thread;
};

static void *call_main(void *arg)
{
	struct call *c = arg;

	c->result = lk_semop(c->s, c->ops, c->nops, c->timeout);
	__atomic_store_n(&c->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void start(struct call *c)
{
	assert_int_equal(pthread_create(&c->thread, NULL, call_main, c), 0);
}

static int finish(struct call *c)
{
	assert_int_equal(pthread_join(c->thread, NULL), 0);
	return c->result;
}

/* Wait until n sleepers wait on semnum (zero: for zero). No timing: the count is the state. */
static void await_sleepers(struct lk_semset *s, unsigned int semnum, bool zero, int n)
{
	while (lk_semctl(s, semnum, zero ? LK_GETZCNT : LK_GETNCNT) != n)
		sched_yield();
}

/* ---- semantics ---- */

static void values_and_nowait(void **state)
{
	struct lk_semset *s;
	struct lk_sembuf both[2] = { { 0, -1, LK_IPC_NOWAIT }, { 1, -1, LK_IPC_NOWAIT } };
	unsigned short all[3] = { 4, 5, 6 }, got[3];

	assert_int_equal(make_set(&s, state, 3), 0);
	assert_int_equal(val(s, 0), 0);
	assert_int_equal(op(s, 0, 2, 0), 0);
	assert_int_equal(val(s, 0), 2);
	assert_int_equal(op(s, 0, -3, LK_IPC_NOWAIT), -EAGAIN);
	assert_non_null(strstr(lk_last_error(), "LK_IPC_NOWAIT"));
	assert_int_equal(val(s, 0), 2);
	/* all or nothing: sem 1 is 0, so sem 0 is not touched */
	assert_int_equal(lk_semop(s, both, 2, NULL), -EAGAIN);
	assert_int_equal(val(s, 0), 2);
	assert_int_equal(op(s, 1, 1, 0), 0);
	assert_int_equal(lk_semop(s, both, 2, NULL), 0);
	assert_int_equal(val(s, 0), 1);
	assert_int_equal(val(s, 1), 0);
	/* the same semaphore twice in one call: the second sees the first */
	{
		struct lk_sembuf twice[2] = { { 2, 3, 0 }, { 2, -2, 0 } };

		assert_int_equal(lk_semop(s, twice, 2, NULL), 0);
		assert_int_equal(val(s, 2), 1);
	}
	assert_int_equal(lk_semctl(s, 0, LK_SETALL, all), 0);
	assert_int_equal(lk_semctl(s, 0, LK_GETALL, got), 0);
	assert_memory_equal(all, got, sizeof(all));
	assert_int_equal(lk_semctl(s, 1, LK_SETVAL, LK_SEMVMX), 0);
	assert_int_equal(op(s, 1, 1, 0), -ERANGE);
	assert_int_equal(val(s, 1), LK_SEMVMX);
	/* wait for zero on a zero semaphore: immediate */
	assert_int_equal(lk_semctl(s, 2, LK_SETVAL, 0), 0);
	assert_int_equal(op(s, 2, 0, 0), 0);
	assert_int_equal(op(s, 0, 0, LK_IPC_NOWAIT), -EAGAIN);
	done_with(s, state);
}

static void sleep_and_wake(void **state)
{
	struct lk_semset *s;
	struct call down = { 0 }, zero = { 0 };

	assert_int_equal(make_set(&s, state, 2), 0);
	down = (struct call){ s, { { 0, -2, 0 } }, 1 };
	start(&down);
	await_sleepers(s, 0, false, 1);
	assert_int_equal(op(s, 0, 1, 0), 0); /* not enough yet */
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 1);
	assert_int_equal(op(s, 0, 1, 0), 0); /* now it is: the waker does the sleeper's -2 */
	assert_int_equal(finish(&down), 0);
	assert_int_equal(val(s, 0), 0);
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 0);

	assert_int_equal(lk_semctl(s, 1, LK_SETVAL, 2), 0);
	zero = (struct call){ s, { { 1, 0, 0 } }, 1 };
	start(&zero);
	await_sleepers(s, 1, true, 1);
	assert_int_equal(op(s, 1, -1, 0), 0);
	assert_int_equal(lk_semctl(s, 1, LK_GETZCNT), 1);
	assert_int_equal(lk_semctl(s, 1, LK_SETVAL, 0), 0); /* SETVAL serves sleepers too */
	assert_int_equal(finish(&zero), 0);
	assert_int_equal(lk_semctl(s, 1, LK_GETZCNT), 0);
	done_with(s, state);
}

static void complex_sleeper(void **state)
{
	struct lk_semset *s;
	struct call both = { 0 }, single = { 0 };
	struct lk_semset_stats st;

	assert_int_equal(make_set(&s, state, 2), 0);
	both = (struct call){ s, { { 0, -1, 0 }, { 1, -1, 0 } }, 2 };
	start(&both);
	await_sleepers(s, 0, false, 1); /* it waits on its first operation */
	assert_int_equal(op(s, 0, 1, 0), 0);
	/* now it waits on the second one; sem 0 stays 1 */
	await_sleepers(s, 1, false, 1);
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 0);
	assert_int_equal(val(s, 0), 1);
	/* a simple sleeper arriving while a complex one sleeps queues behind it, in order */
	single = (struct call){ s, { { 1, -1, 0 } }, 1 };
	start(&single);
	await_sleepers(s, 1, false, 2);
	assert_int_equal(op(s, 1, 1, 0), 0); /* the complex one came first: it gets it */
	assert_int_equal(finish(&both), 0);
	assert_int_equal(val(s, 0), 0);
	assert_int_equal(lk_semctl(s, 1, LK_GETNCNT), 1);
	assert_int_equal(op(s, 1, 1, 0), 0);
	assert_int_equal(finish(&single), 0);
	assert_int_equal(val(s, 1), 0);
	assert_int_equal(lk_semset_stats(s, &st), 0);
	assert_true(st.global_ops >= 2);
	assert_true(st.global_mode_entries >= 1);
	assert_int_equal(st.sleeps, 2);
	assert_int_equal(st.wakeups, 2);
	done_with(s, state);
}

/* A call on several semaphores that completes at once takes their locks, not the set lock. */
static void complex_without_set_lock(void **state)
{
	struct lk_semset *s;
	struct lk_sembuf ups[3] = { { 2, 1, 0 }, { 0, 1, 0 }, { 2, 1, 0 } },
			 downs[2] = { { 0, -1, 0 }, { 2, -2, 0 } };
	struct lk_semset_stats st;

	assert_int_equal(make_set(&s, state, 3), 0);
	assert_int_equal(lk_semop(s, ups, 3, NULL), 0); /* repeats a semaphore: locked once */
	assert_int_equal(lk_semop(s, downs, 2, NULL), 0);
	assert_int_equal(lk_semset_stats(s, &st), 0);
	assert_int_equal(st.multi_ops, 2);
	assert_int_equal(st.global_ops, 0);
	assert_int_equal(st.global_mode_entries, 0);
	assert_int_equal(val(s, 0), 0);
	assert_int_equal(val(s, 2), 0);
	/* one that must wait goes the set lock's way, and the set enters global mode */
	{
		struct call c = { s, { { 0, -1, 0 }, { 1, -1, 0 } }, 2 };

		start(&c);
		await_sleepers(s, 0, false, 1);
		assert_int_equal(lk_semset_stats(s, &st), 0);
		assert_int_equal(st.global_mode_entries, 1);
		assert_int_equal(
			lk_semop(s, (struct lk_sembuf[]){ { 0, 1, 0 }, { 1, 1, 0 } }, 2, NULL), 0);
		assert_int_equal(finish(&c), 0);
	}
	done_with(s, state);
}

static void timeouts(void **state)
{
	struct lk_semset *s;
	struct lk_sembuf down = { 0, -1, 0 };
	struct timespec short_wait = { 0, 20 * 1000 * 1000 }, none = { 0, 0 };

	assert_int_equal(make_set(&s, state, 1), 0);
	assert_int_equal(lk_semop(s, &down, 1, &short_wait), -ETIMEDOUT);
	assert_non_null(strstr(lk_last_error(), "timed out"));
	assert_int_equal(lk_semop(s, &down, 1, &none), -ETIMEDOUT);
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 0); /* it left the queue */
	assert_int_equal(val(s, 0), 0);
	assert_int_equal(op(s, 0, 1, 0), 0);
	assert_int_equal(lk_semop(s, &down, 1, &short_wait), 0); /* possible at once: no wait */
	done_with(s, state);
}

static void on_signal(int sig)
{
	(void)sig;
}

static void interrupted(void **state)
{
	struct lk_semset *s;
	int flags[2] = { 0, SA_RESTART };

	assert_int_equal(make_set(&s, state, 1), 0);
	for (int i = 0; i < 2; i++) {
		struct sigaction sa = { .sa_handler = on_signal, .sa_flags = flags[i] }, old;
		struct call c = { s, { { 0, -1, 0 } }, 1 };

		sigemptyset(&sa.sa_mask);
		assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
		start(&c);
		await_sleepers(s, 0, false, 1);
		/* the handler may run before the futex wait begins: signal until the call returns */
		while (!__atomic_load_n(&c.done, __ATOMIC_SEQ_CST)) {
			pthread_kill(c.thread, SIGUSR1);
			sched_yield();
		}
		/* EINTR with or without SA_RESTART, as semop */
		assert_int_equal(finish(&c), -EINTR);
		assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 0);
		assert_int_equal(val(s, 0), 0);
		sigaction(SIGUSR1, &old, NULL);
	}
	done_with(s, state);
}

static void removal(void **state)
{
	struct lk_semset *s;
	struct call c = { 0 };
	unsigned short values[1];

	assert_int_equal(make_set(&s, state, 1), 0);
	c = (struct call){ s, { { 0, -1, 0 } }, 1 };
	start(&c);
	await_sleepers(s, 0, false, 1);
	assert_int_equal(lk_semctl(s, 0, LK_IPC_RMID), 0);
	assert_int_equal(finish(&c), -EIDRM);
	assert_int_equal(op(s, 0, 1, 0), -EIDRM);
	assert_int_equal(val(s, 0), -EIDRM);
	assert_int_equal(lk_semctl(s, 0, LK_GETALL, values), -EIDRM);
	assert_int_equal(lk_semctl(s, 0, LK_IPC_RMID), -EIDRM);
	if (*state) {
		struct lk_semset *again;

		assert_int_equal(lk_semset_open(&again, *state), -ENOENT); /* the name is gone */
	}
	assert_int_equal(lk_semset_close(s), 0);
}

static void bad_input(void **state)
{
	struct lk_semset *s, *none;
	struct lk_sembuf many[LK_SEMOPM + 1], one = { 0, 1, 0 };
	struct timespec bad_ts = { 0, 1000000000 };

	assert_int_equal(make_set(&s, state, 2), 0);
	memset(many, 0, sizeof(many));
	assert_int_equal(lk_semop(s, many, LK_SEMOPM + 1, NULL), -E2BIG);
	assert_int_equal(op(s, 2, 1, 0), -EFBIG);
	assert_int_equal(op(s, 0, 1, LK_SEM_UNDO), -ENOTSUP);
	assert_non_null(strstr(lk_last_error(), "SEM_UNDO"));
	assert_int_equal(lk_semop(s, &one, 0, NULL), -EINVAL);
	assert_int_equal(lk_semop(s, NULL, 1, NULL), -EINVAL);
	assert_int_equal(lk_semop(s, &one, 1, &bad_ts), -EINVAL);
	assert_int_equal(lk_semop(NULL, &one, 1, NULL), -EINVAL);
	assert_int_equal(lk_semctl(s, 0, LK_SETVAL, LK_SEMVMX + 1), -ERANGE);
	assert_int_equal(lk_semctl(s, 0, LK_SETVAL, -1), -ERANGE);
	assert_int_equal(lk_semctl(s, 2, LK_GETVAL), -EINVAL); /* semctl's error for this */
	assert_int_equal(lk_semctl(s, 0, 999), -EINVAL);
	assert_int_equal(lk_semctl(s, 0, LK_GETALL, NULL), -EINVAL);
	{
		unsigned short too_big[2] = { 1, LK_SEMVMX + 1 };

		assert_int_equal(lk_semctl(s, 0, LK_SETALL, too_big), -ERANGE);
		assert_int_equal(val(s, 0), 0);
	}
	assert_int_equal(lk_semctl(NULL, 0, LK_GETVAL), -EINVAL);
	assert_int_equal(lk_semset_stats(NULL, NULL), -EINVAL);
	assert_int_equal(lk_semset_create(&none, NULL, 0, 0), -EINVAL);
	assert_int_equal(lk_semset_create(&none, NULL, LK_SEMMSL + 1, 0), -EINVAL);
	assert_int_equal(lk_semset_create(&none, NULL, 1, 0x80000000u), -EINVAL);
	assert_int_equal(lk_semset_create(&none, "no-slash", 1, 0), -EINVAL);
	assert_int_equal(lk_semset_create(&none, "/a/b", 1, 0), -EINVAL);
	assert_int_equal(lk_semset_create(NULL, NULL, 1, 0), -EINVAL);
	assert_int_equal(lk_semset_open(&none, "/lowkey-test-does-not-exist"), -ENOENT);
	assert_int_equal(lk_semset_close(NULL), -EINVAL);
	done_with(s, state);
}

/* ---- shared sets only ---- */

static void existing_names(void **state)
{
	struct lk_semset *a, *b;

	(void)state;
	lk_semset_unlink(shm_name);
	assert_int_equal(lk_semset_create(&a, shm_name, 3, 0600), 0);
	assert_int_equal(lk_semset_create(&b, shm_name, 3, 0600 | LK_SEMSET_EXCL), -EEXIST);
	assert_int_equal(lk_semset_create(&b, shm_name, 4, 0600), -EINVAL); /* fewer than asked */
	assert_int_equal(lk_semset_create(&b, shm_name, 2, 0600), 0); /* opens the existing one */
	assert_int_equal(op(a, 2, 7, 0), 0);
	assert_int_equal(val(b, 2), 7); /* the same memory */
	assert_int_equal(lk_semset_close(b), 0);
	assert_int_equal(lk_semset_close(a), 0);
	assert_int_equal(lk_semset_unlink(shm_name), 0);
	assert_int_equal(lk_semset_unlink(shm_name), -ENOENT);
}

/* Overwrite a field of the shared header through a separate mapping; returns what was there. */
static uint32_t scribble(const char *name, size_t offset, uint32_t value)
{
	int fd = shm_open(name, O_RDWR, 0);
	uint32_t *p, old;

	assert_true(fd >= 0);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(p != MAP_FAILED);
	old = p[offset / 4];
	p[offset / 4] = value;
	munmap(p, 4096);
	return old;
}

static void corrupted_header(void **state)
{
	struct lk_semset *a, *b;
	/* struct semset_header: magic u64 @0, version u32 @8, ..., nsems u32 @24 */
	const size_t magic = 0, version = 8, nsems = 24;
	uint32_t ours;

	(void)state;
	lk_semset_unlink(shm_name);
	assert_int_equal(lk_semset_create(&a, shm_name, 2, 0600), 0);

	ours = scribble(shm_name, version, 99);
	assert_int_equal(lk_semset_open(&b, shm_name), -EINVAL);
	assert_non_null(strstr(lk_last_error(), "version"));
	assert_int_equal(op(a, 0, 1, 0), -EINVAL); /* a handle that was open notices too */
	scribble(shm_name, version, ours);
	assert_int_equal(op(a, 0, 1, 0), 0);

	scribble(shm_name, nsems, 60000);
	assert_int_equal(lk_semset_open(&b, shm_name), -EINVAL);
	assert_int_equal(op(a, 0, 1, 0), -EINVAL);
	scribble(shm_name, nsems, 2);

	scribble(shm_name, magic, 0xdeadbeef);
	assert_int_equal(lk_semset_open(&b, shm_name), -EINVAL);
	assert_non_null(strstr(lk_last_error(), "magic"));
	assert_int_equal(val(a, 0), -EINVAL);
	assert_int_equal(lk_semset_close(a), 0);
	assert_int_equal(lk_semset_unlink(shm_name), 0); /* a broken set can still be removed */
}

static void waiter_slots_run_out(void **state)
{
	struct lk_semset *s;
	struct call c[2];
	struct lk_semset_stats st;

	(void)state;
	lk_semset_unlink(shm_name);
	assert_int_equal(lk_semset_create(&s, shm_name, 1, 0600 | LK_SEMSET_WAITERS(2)), 0);
	assert_int_equal(lk_semset_stats(s, &st), 0);
	assert_int_equal(st.waiter_slots, 2);
	for (int i = 0; i < 2; i++) {
		c[i] = (struct call){ s, { { 0, -1, 0 } }, 1 };
		start(&c[i]);
		await_sleepers(s, 0, false, i + 1);
	}
	assert_int_equal(op(s, 0, -1, 0), -ENOSPC);
	assert_non_null(strstr(lk_last_error(), "LK_SEMSET_WAITERS"));
	assert_int_equal(op(s, 0, 2, 0), 0);
	assert_int_equal(finish(&c[0]), 0);
	assert_int_equal(finish(&c[1]), 0);
	/* slots come back */
	c[0] = (struct call){ s, { { 0, -1, 0 } }, 1 };
	start(&c[0]);
	await_sleepers(s, 0, false, 1);
	assert_int_equal(op(s, 0, 1, 0), 0);
	assert_int_equal(finish(&c[0]), 0);
	assert_int_equal(lk_semset_close(s), 0);
	assert_int_equal(lk_semset_unlink(shm_name), 0);
}

/* ---- threads ---- */

#define WORKERS 4
#define ROUNDS 3000

struct hammer {
	struct lk_semset *s;
	long *counter;
	int id;
};

/* sem 0 is a mutex; sems 1 and 2 are taken together now and then */
static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	struct lk_sembuf p = { 0, -1, 0 }, v = { 0, 1, 0 };
	struct lk_sembuf p2[2] = { { 1, -1, 0 }, { 2, -1, 0 } },
			 v2[2] = { { 1, 1, 0 }, { 2, 1, 0 } };

	for (int i = 0; i < ROUNDS; i++) {
		if ((i + h->id) % 16 == 0) {
			assert_int_equal(lk_semop(h->s, p2, 2, NULL), 0);
			assert_int_equal(lk_semop(h->s, v2, 2, NULL), 0);
		}
		assert_int_equal(lk_semop(h->s, &p, 1, NULL), 0);
		(*h->counter)++;
		assert_int_equal(lk_semop(h->s, &v, 1, NULL), 0);
	}
	return NULL;
}

static void exclusion_under_threads(void **state)
{
	struct lk_semset *s;
	struct hammer h[WORKERS];
	pthread_t t[WORKERS];
	struct lk_semset_stats st;
	long counter = 0;
	uint64_t calls = 3; /* the three ups below */

	for (int id = 0; id < WORKERS; id++)
		for (int i = 0; i < ROUNDS; i++)
			calls += 2 + ((i + id) % 16 == 0 ? 2 : 0);
	assert_int_equal(make_set(&s, state, 3), 0);
	assert_int_equal(op(s, 0, 1, 0), 0);
	assert_int_equal(op(s, 1, 1, 0), 0);
	assert_int_equal(op(s, 2, 1, 0), 0);
	for (int i = 0; i < WORKERS; i++) {
		h[i] = (struct hammer){ s, &counter, i };
		assert_int_equal(pthread_create(&t[i], NULL, hammer_main, &h[i]), 0);
	}
	for (int i = 0; i < WORKERS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(counter, WORKERS * ROUNDS);
	assert_int_equal(val(s, 0), 1);
	assert_int_equal(val(s, 1), 1);
	assert_int_equal(val(s, 2), 1);
	assert_int_equal(lk_semset_stats(s, &st), 0);
	assert_int_equal(st.nsems, 3);
	assert_true(st.free + st.contended >= (uint64_t)WORKERS * ROUNDS * 2);
	assert_int_equal(st.simple_ops + st.multi_ops + st.global_ops, calls);
	assert_true(st.multi_ops > 0); /* pairs taken at once need no set lock */
	assert_true(st.wait_ns >= st.wait_avg_ns);
	assert_true(st.lifetime_ns > 0);
	done_with(s, state);
}

#define BOTH(test) cmocka_unit_test_prestate(test, NULL), cmocka_unit_test_prestate(test, shm_name)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(values_and_nowait),
		BOTH(sleep_and_wake),
		BOTH(complex_sleeper),
		BOTH(complex_without_set_lock),
		BOTH(timeouts),
		BOTH(interrupted),
		BOTH(removal),
		BOTH(bad_input),
		BOTH(exclusion_under_threads),
		cmocka_unit_test(existing_names),
		cmocka_unit_test(corrupted_header),
		cmocka_unit_test(waiter_slots_run_out),
	};

	snprintf(shm_name, sizeof(shm_name), "/lowkey-test-sem-%d", (int)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
