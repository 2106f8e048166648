// SPDX-License-Identifier: MIT
/*
 * lk_semset_create on a name that exists: it opens the set only if the caller owns it and its
 * mode grants no more than the one asked for; anything else -- another user's set, a set opened
 * to more users than asked, something that is not a set -- is refused, and lk_semset_open remains
 * the way to join a set on purpose.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/error.h>
#include <lowkey/sem.h>

#define NOBODY 65534

static char name[64];

static int setup(void **state)
{
	(void)state;
	lk_semset_unlink(name);
	return 0;
}

static int teardown(void **state)
{
	char path[128];

	(void)state;
	lk_semset_unlink(name);
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	unlink(path);
	return 0;
}

/* In a child that became nobody: make the set, as a user squatting on the name would. */
static void create_as_nobody(mode_t mode)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct lk_semset *s;

		if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
		    setresuid(NOBODY, NOBODY, NOBODY))
			_exit(10);
		_exit(lk_semset_create(&s, name, 2, mode) ? 11 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void another_users_set_is_not_taken_over(void **state)
{
	struct lk_semset *s;

	(void)state;
	if (geteuid() != 0) {
		print_message("[  SKIP    ] needs root to make a set as another user\n");
		skip();
	}
	create_as_nobody(0666);
	/* root asking to create "its" set must not silently get nobody's */
	assert_int_equal(lk_semset_create(&s, name, 2, 0600), -EEXIST);
	assert_non_null(strstr(lk_last_error(), "65534"));
	assert_int_equal(lk_semset_create(&s, name, 2, 0666), -EEXIST);
	/* joining it on purpose is still possible */
	assert_int_equal(lk_semset_open(&s, name), 0);
	assert_int_equal(lk_semset_close(s), 0);
}

static void wider_mode_is_refused(void **state)
{
	struct lk_semset *a, *b;

	(void)state;
	assert_int_equal(lk_semset_create(&a, name, 2, 0660), 0);
	assert_int_equal(lk_semset_create(&b, name, 2, 0600), -EEXIST);
	assert_non_null(strstr(lk_last_error(), "0660"));
	assert_int_equal(lk_semset_create(&b, name, 2, 0640), -EEXIST);
	/* the same mode, or a wider request: the existing set gives no one more than asked */
	assert_int_equal(lk_semset_create(&b, name, 2, 0660), 0);
	assert_int_equal(lk_semset_close(b), 0);
	assert_int_equal(lk_semset_create(&b, name, 2, 0666), 0);
	assert_int_equal(lk_semset_close(b), 0);
	assert_int_equal(lk_semset_close(a), 0);
	/* the default mode is 0600 */
	assert_int_equal(lk_semset_unlink(name), 0);
	assert_int_equal(lk_semset_create(&a, name, 2, 0), 0);
	assert_int_equal(lk_semset_create(&b, name, 2, 0), 0);
	assert_int_equal(lk_semset_close(b), 0);
	assert_int_equal(lk_semset_close(a), 0);
}

static void not_a_set_is_refused(void **state)
{
	char path[128];
	struct lk_semset *s;

	(void)state;
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	if (mkfifo(path, 0600) != 0) {
		print_message("[  SKIP    ] cannot make a FIFO in /dev/shm: %s\n", strerror(errno));
		skip();
	}
	/* refused at once, not after waiting a second for a "creator" */
	assert_int_equal(lk_semset_create(&s, name, 2, 0600), -EINVAL);
	assert_non_null(strstr(lk_last_error(), "not a regular file"));
	assert_int_equal(lk_semset_open(&s, name), -EINVAL);
	assert_int_equal(unlink(path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(another_users_set_is_not_taken_over, setup,
						teardown),
		cmocka_unit_test_setup_teardown(wider_mode_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(not_a_set_is_refused, setup, teardown),
	};

	snprintf(name, sizeof(name), "/lowkey-test-semown-%d", (int)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
