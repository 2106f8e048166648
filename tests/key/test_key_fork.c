// SPDX-License-Identifier: MIT
/*
 * fork(): a child flips keys in its own copy of the code, the parent's stay as they were, and a
 * child forked while another thread is flipping starts from complete code and can flip too.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "sites.h"

static LK_DEFINE_KEY_FALSE(fork_key);
static LK_DEFINE_KEY_FALSE(busy_key);

static __attribute__((noinline)) int fork_site(void)
{
	return lk_branch_unlikely(&fork_key) ? 1 : 0;
}

static __attribute__((noinline)) int busy_site(void)
{
	return lk_branch_unlikely(&busy_key) ? 1 : 0;
}

/* In the child: flip fork_key both ways; exit 0 when every check holds. */
static int child_flips(void)
{
	int before = fork_site();

	if (lk_key_enable(&fork_key) != 0 || fork_site() != 1 || lkt_check_sites(&fork_key) < 0)
		return 1;
	if (lk_key_disable(&fork_key) != 0 || fork_site() != 0 || lkt_check_sites(&fork_key) < 0)
		return 2;
	if (lk_key_enable(&fork_key) != 0)
		return 3;
	return before == 0 ? 0 : 4;
}

static int wait_exit_code(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

static void child_flips_its_own_copy(void **state)
{
	pid_t pid;

	(void)state;
	pid = fork();
	if (pid == 0)
		_exit(child_flips());
	assert_int_equal(wait_exit_code(pid), 0);
	/* the child left its key on; ours is untouched */
	assert_int_equal(fork_site(), 0);
	assert_false(lk_key_enabled(&fork_key));
	assert_int_equal(lkt_check_sites(&fork_key), LKT_PATCHING ? 1 : 0);

	/* and the parent still flips after its child did */
	assert_int_equal(lk_key_enable(&fork_key), 0);
	assert_int_equal(fork_site(), 1);
	assert_int_equal(lk_key_disable(&fork_key), 0);
}

static int stop;

static void *keep_flipping(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		lk_key_enable(&busy_key);
		lk_key_disable(&busy_key);
	}
	return NULL;
}

static void fork_during_flips(void **state)
{
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, keep_flipping, NULL), 0);
	for (int i = 0; i < 50; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			/* Complete code: busy_key's site holds a whole instruction, not a trap. */
			if (lkt_check_sites(&busy_key) < 0)
				_exit(10);
			(void)busy_site();
			_exit(child_flips());
		}
		assert_int_equal(wait_exit_code(pid), 0);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
}

static void grandchild_flips(void **state)
{
	pid_t pid;

	(void)state;
	pid = fork();
	if (pid == 0) {
		pid_t inner = fork();

		if (inner == 0)
			_exit(child_flips());
		_exit(wait_exit_code(inner) == 0 && fork_site() == 0 ? child_flips() : 20);
	}
	assert_int_equal(wait_exit_code(pid), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(child_flips_its_own_copy),
		cmocka_unit_test(fork_during_flips),
		cmocka_unit_test(grandchild_flips),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
