// SPDX-License-Identifier: MIT
/*
 * A lock of a shared set left held: by a process that died inside it, or by one that stopped.
 * Calls with a timeout return by it; every call returns -ENOTRECOVERABLE once the holder is
 * known to be dead (reaped or a zombie); removal always completes, even past a live holder that
 * never lets go; a sleeper that gives up while the lock is stuck leaves without it, and its
 * waiter is reaped later without its operations being done.
 *
 * The child takes the lock as the library's fast path does -- a compare-and-swap of its thread id
 * into the lock word (sem_internal.h) -- and is then killed, or stops, holding it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/error.h>
#include <lowkey/sem.h>

#include "sem/sem_internal.h"

static char name[64];

static int setup(void **state)
{
	(void)state;
	lk_semset_unlink(name);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	lk_semset_unlink(name);
	return 0;
}

static int op(struct lk_semset *s, unsigned short num, short delta, const struct timespec *timeout)
{
	struct lk_sembuf b = { num, delta, 0 };

	return lk_semop(s, &b, 1, timeout);
}

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * A child that takes lock l and holds it: until it is killed, or (stop) it stops itself and,
 * once continued, lets go and exits 0.
 */
static pid_t holder(struct lk_semset *s, struct semlock *l, bool stop)
{
	int fds[2], status;
	char c;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint32_t free_word = 0;

		if (!__atomic_compare_exchange_n(&l->word, &free_word, (uint32_t)gettid(), false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			_exit(10);
		if (write(fds[1], "h", 1) != 1)
			_exit(11);
		if (!stop)
			for (;;)
				pause();
		raise(SIGSTOP);
		semlock_unlock(s, l);
		_exit(0);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], &c, 1), 1);
	close(fds[0]);
	if (stop) {
		assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
		assert_true(WIFSTOPPED(status));
	}
	return pid;
}

static void reap(pid_t pid, int expected_signal)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (expected_signal) {
		assert_true(WIFSIGNALED(status));
		assert_int_equal(WTERMSIG(status), expected_signal);
	} else {
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
}

/* Every call on a broken set fails at once; removal still works. */
static void broken_then_removed(struct lk_semset *s)
{
	struct lk_semset *again;
	unsigned short values[2];

	assert_int_equal(op(s, 1, 1, NULL),
			 -ENOTRECOVERABLE); /* another semaphore: the whole set */
	assert_int_equal(lk_semctl(s, 1, LK_GETVAL), -ENOTRECOVERABLE);
	assert_int_equal(lk_semctl(s, 0, LK_GETALL, values), -ENOTRECOVERABLE);
	assert_int_equal(lk_semset_open(&again, name), 0);
	assert_int_equal(op(again, 1, 1, NULL), -ENOTRECOVERABLE);
	assert_int_equal(lk_semset_close(again), 0);
	assert_int_equal(lk_semset_unlink(name), 0);
	assert_int_equal(lk_semset_open(&again, name), -ENOENT);
	assert_int_equal(op(s, 1, 1, NULL), -EIDRM);
}

static void dead_holder_of_a_semaphore_lock(void **state)
{
	struct timespec second = { 1, 0 }, t0;
	struct lk_semset *s;
	pid_t pid;

	(void)state;
	assert_int_equal(lk_semset_create(&s, name, 2, 0600), 0);
	pid = holder(s, &s->sems[0].lock, false);
	assert_int_equal(kill(pid, SIGKILL), 0);
	reap(pid, SIGKILL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(op(s, 0, 1, &second), -ENOTRECOVERABLE);
	print_message("a dead holder found in %.3f s\n", since(&t0));
	assert_non_null(strstr(lk_last_error(), "died holding"));
	assert_non_null(strstr(lk_last_error(), "lk_semset_unlink"));
	broken_then_removed(s);
	assert_int_equal(lk_semset_close(s), 0);
}

/* A holder that is dead but not waited for (a zombie); the set lock; calls without a timeout. */
static void dead_holder_not_yet_waited_for(void **state)
{
	struct lk_sembuf both[2] = { { 0, -1, 0 }, { 1, -1, 0 } };
	struct lk_semset *s;
	pid_t pid;

	(void)state;
	assert_int_equal(lk_semset_create(&s, name, 2, 0600), 0);
	pid = holder(s, &s->hdr->lock, false);
	assert_int_equal(kill(pid, SIGKILL), 0);
	/* until it is a zombie, it may still be dying */
	while (waitid(P_PID, (id_t)pid, &(siginfo_t){ 0 }, WEXITED | WNOWAIT) != 0)
		assert_int_equal(errno, EINTR);
	/* must sleep: the set lock's way, without a timeout */
	assert_int_equal(lk_semop(s, both, 2, NULL), -ENOTRECOVERABLE);
	broken_then_removed(s);
	assert_int_equal(lk_semset_close(s), 0);
	reap(pid, SIGKILL);
}

/* A live holder that never lets go: timeouts are kept, and removal goes ahead without the lock. */
static void stopped_holder(void **state)
{
	struct timespec short_wait = { 0, 50 * 1000 * 1000 }, t0;
	struct lk_semset *s, *again;
	pid_t pid;

	(void)state;
	assert_int_equal(lk_semset_create(&s, name, 2, 0600), 0);
	pid = holder(s, &s->sems[0].lock, true);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(op(s, 0, 1, &short_wait), -ETIMEDOUT);
	print_message("timed out after %.3f s (asked: 0.050)\n", since(&t0));
	assert_int_equal(op(s, 1, 1, NULL), 0); /* the other semaphore's lock is free */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(lk_semset_unlink(name), 0);
	print_message("removed past the holder in %.3f s\n", since(&t0));
	assert_int_equal(lk_semset_open(&again, name), -ENOENT);
	assert_int_equal(op(s, 1, 1, NULL), -EIDRM);
	assert_int_equal(op(s, 0, 1, &short_wait), -EIDRM);
	assert_int_equal(kill(pid, SIGCONT), 0);
	reap(pid, 0);
	assert_int_equal(lk_semset_close(s), 0);
}

/* ---- a sleeper that gives up while the lock is stuck ---- */

struct call {
	struct lk_semset *s;
	short delta;
	int result;
	int done;
	pthread_t thread;
};

static void *call_main(void *arg)
{
	struct call *c = arg;

	c->result = op(c->s, 0, c->delta, NULL);
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

static void await_sleepers(struct lk_semset *s, int n)
{
	while (lk_semctl(s, 0, LK_GETNCNT) != n)
		sched_yield();
}

static void on_signal(int sig)
{
	(void)sig;
}

static void sleeper_gives_up_while_the_lock_is_stuck(void **state)
{
	struct sigaction sa = { .sa_handler = on_signal }, old;
	struct lk_semset *s;
	struct call c = { 0 }, two[2];
	pid_t pid;

	(void)state;
	assert_int_equal(lk_semset_create(&s, name, 1, 0600 | LK_SEMSET_WAITERS(2)), 0);
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	c = (struct call){ s, -1 };
	start(&c);
	await_sleepers(s, 1);
	pid = holder(s, &s->sems[0].lock, true);
	/* the handler may run before the futex wait begins: signal until the call returns */
	while (!__atomic_load_n(&c.done, __ATOMIC_SEQ_CST)) {
		pthread_kill(c.thread, SIGUSR1);
		sched_yield();
	}
	assert_int_equal(finish(&c), -EINTR);
	sigaction(SIGUSR1, &old, NULL);
	/* it could not take the lock to leave the queue: its waiter stays there, cancelled */
	assert_true(s->slots[0].status == CANCELLED || s->slots[1].status == CANCELLED);
	assert_int_equal(kill(pid, SIGCONT), 0);
	reap(pid, 0); /* it let go */
	/* the sleeper left behind is not counted, its -1 is never done, its slot comes back */
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 0);
	assert_int_equal(op(s, 0, 1, NULL), 0);
	assert_int_equal(lk_semctl(s, 0, LK_GETVAL), 1);
	for (int i = 0; i < 2; i++) {
		two[i] = (struct call){ s, -2 };
		start(&two[i]);
	}
	/* both slots in use: neither got -ENOSPC */
	while (lk_semctl(s, 0, LK_GETNCNT) != 2) {
		assert_false(__atomic_load_n(&two[0].done, __ATOMIC_SEQ_CST) ||
			     __atomic_load_n(&two[1].done, __ATOMIC_SEQ_CST));
		sched_yield();
	}
	assert_int_equal(op(s, 0, 3, NULL), 0);
	assert_int_equal(finish(&two[0]), 0);
	assert_int_equal(finish(&two[1]), 0);
	assert_int_equal(lk_semctl(s, 0, LK_GETVAL), 0);
	assert_int_equal(lk_semset_close(s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(dead_holder_of_a_semaphore_lock, setup, teardown),
		cmocka_unit_test_setup_teardown(dead_holder_not_yet_waited_for, setup, teardown),
		cmocka_unit_test_setup_teardown(stopped_holder, setup, teardown),
		cmocka_unit_test_setup_teardown(sleeper_gives_up_while_the_lock_is_stuck, setup,
						teardown),
	};

	snprintf(name, sizeof(name), "/lowkey-test-semdead-%d", (int)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
