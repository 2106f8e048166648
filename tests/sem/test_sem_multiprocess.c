// SPDX-License-Identifier: MIT
/*
 * Shared sets across processes: processes that open a set by name and use it as a mutex and as
 * a pair (with sleeps and wake-ups between processes); a sleeper woken by another process; a
 * sleeper that is killed (its operations must not be done, its slot must come back); removal
 * while another process sleeps.
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/sem.h>

#define PROCS 4
#define ROUNDS 2000

static char name[64];

static int op(struct lk_semset *s, unsigned short num, short delta)
{
	struct lk_sembuf b = { num, delta, 0 };

	return lk_semop(s, &b, 1, NULL);
}

static void await_count(struct lk_semset *s, unsigned int semnum, int n)
{
	while (lk_semctl(s, semnum, LK_GETNCNT) != n)
		sched_yield();
}

static int exit_code(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

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

/* The child's side of the hammer: open by name, then P/V around a shared counter. */
static int hammer_child(long *counter, int id)
{
	struct lk_semset *s;
	struct lk_sembuf p2[2] = { { 1, -1, 0 }, { 2, -1, 0 } },
			 v2[2] = { { 1, 1, 0 }, { 2, 1, 0 } };

	if (lk_semset_open(&s, name) != 0)
		return 10;
	for (int i = 0; i < ROUNDS; i++) {
		if ((i + id) % 8 == 0) {
			if (lk_semop(s, p2, 2, NULL) || lk_semop(s, v2, 2, NULL))
				return 11;
		}
		if (op(s, 0, -1))
			return 12;
		(*counter)++;
		if (op(s, 0, 1))
			return 13;
	}
	return lk_semset_close(s) ? 14 : 0;
}

static void processes_share_a_set(void **state)
{
	long *counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct lk_semset_stats st;
	struct lk_semset *s;
	pid_t pids[PROCS];

	(void)state;
	assert_true(counter != MAP_FAILED);
	assert_int_equal(lk_semset_create(&s, name, 3, 0600), 0);
	assert_int_equal(op(s, 0, 1), 0);
	assert_int_equal(op(s, 1, 1), 0);
	assert_int_equal(op(s, 2, 1), 0);
	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			_exit(hammer_child(counter, i));
	}
	for (int i = 0; i < PROCS; i++)
		assert_int_equal(exit_code(pids[i]), 0);
	assert_int_equal(*counter, PROCS * ROUNDS);
	assert_int_equal(lk_semctl(s, 0, LK_GETVAL), 1);
	assert_int_equal(lk_semctl(s, 1, LK_GETVAL), 1);
	assert_int_equal(lk_semset_stats(s, &st), 0);
	{
		uint64_t calls = 3; /* the three ups above */

		for (int id = 0; id < PROCS; id++)
			for (int i = 0; i < ROUNDS; i++)
				calls += 2 + ((i + id) % 8 == 0 ? 2 : 0);
		/* every call from every process is counted in the one set */
		assert_int_equal(st.simple_ops + st.multi_ops + st.global_ops, calls);
		assert_true(st.multi_ops > 0); /* pairs taken at once need no set lock */
	}
	assert_int_equal(lk_semset_close(s), 0);
	munmap(counter, 4096);
}

static void woken_by_another_process(void **state)
{
	struct lk_semset *s;
	pid_t pid;

	(void)state;
	assert_int_equal(lk_semset_create(&s, name, 1, 0600), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct lk_semset *c;

		if (lk_semset_open(&c, name))
			_exit(10);
		_exit(op(c, 0, -2) == 0 ? 0 : 11);
	}
	await_count(s, 0, 1);
	assert_int_equal(op(s, 0, 1), 0);
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 1);
	assert_int_equal(op(s, 0, 1), 0);
	assert_int_equal(exit_code(pid), 0);
	assert_int_equal(lk_semctl(s, 0, LK_GETVAL), 0);
	assert_int_equal(lk_semset_close(s), 0);
}

static void killed_sleeper_is_dropped(void **state)
{
	struct lk_semset *s;
	void *head;
	size_t len;
	pid_t pid;

	(void)state;
	/* A dead sleeper is found through its robust futex list (src/sem/robust.c). */
	if (syscall(SYS_get_robust_list, 0, &head, &len) != 0 && errno == ENOSYS) {
		print_message(
			"skipped: no robust futex lists here (get_robust_list: %s): qemu-user "
			"has none\n",
			strerror(errno));
		skip();
	}
	/* two waiter slots: the dead sleeper's must come back for the test to end */
	assert_int_equal(lk_semset_create(&s, name, 1, 0600 | LK_SEMSET_WAITERS(2)), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct lk_semset *c;

		if (lk_semset_open(&c, name))
			_exit(10);
		op(c, 0, -1);
		_exit(11); /* never reached: killed while asleep */
	}
	await_count(s, 0, 1);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(exit_code(pid), 128 + SIGKILL);
	/* the dead sleeper is not counted, and its -1 is never done */
	assert_int_equal(lk_semctl(s, 0, LK_GETNCNT), 0);
	assert_int_equal(op(s, 0, 1), 0);
	assert_int_equal(lk_semctl(s, 0, LK_GETVAL), 1);
	/* both slots usable again */
	for (int round = 0; round < 2; round++) {
		pid_t kids[2];

		for (int i = 0; i < 2; i++) {
			kids[i] = fork();
			assert_true(kids[i] >= 0);
			if (kids[i] == 0) {
				struct lk_semset *c;

				if (lk_semset_open(&c, name))
					_exit(10);
				_exit(op(c, 0, -2) == 0 ? 0 : 12);
			}
		}
		await_count(s, 0, 2);
		assert_int_equal(op(s, 0, 3), 0);
		for (int i = 0; i < 2; i++)
			assert_int_equal(exit_code(kids[i]), 0);
		assert_int_equal(lk_semctl(s, 0, LK_GETVAL), 0);
		assert_int_equal(op(s, 0, 1), 0);
	}
	assert_int_equal(lk_semset_close(s), 0);
}

static void removed_while_another_process_sleeps(void **state)
{
	struct lk_semset *s;
	pid_t pid;

	(void)state;
	assert_int_equal(lk_semset_create(&s, name, 1, 0600), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct lk_semset *c;

		if (lk_semset_open(&c, name))
			_exit(10);
		_exit(op(c, 0, -1) == -EIDRM ? 0 : 11);
	}
	await_count(s, 0, 1);
	assert_int_equal(lk_semset_unlink(name), 0);
	assert_int_equal(exit_code(pid), 0);
	assert_int_equal(op(s, 0, 1), -EIDRM);
	assert_int_equal(lk_semset_close(s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(processes_share_a_set, setup, teardown),
		cmocka_unit_test_setup_teardown(woken_by_another_process, setup, teardown),
		cmocka_unit_test_setup_teardown(killed_sleeper_is_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(removed_while_another_process_sleeps, setup,
						teardown),
	};

	snprintf(name, sizeof(name), "/lowkey-test-semproc-%d", (int)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
