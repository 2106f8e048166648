// SPDX-License-Identifier: MIT
/*
 * Batched wake-ups: one call that serves many sleepers wakes them all -- with io_uring where the
 * kernel offers futex wake-ups through it, with one futex call each where it does not: when
 * io_uring_setup() is refused (a seccomp filter, as containers have), and when the ring exists
 * but io_uring_enter() is refused later.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/sem.h>

#define SLEEPERS 40

struct sleeper {
	struct lk_semset *s;
	unsigned short num;
	int result;
	pthread_t thread;
};

static void *sleep_on(void *arg)
{
	struct sleeper *z = arg;
	struct lk_sembuf down = { z->num, -1, 0 };

	z->result = lk_semop(z->s, &down, 1, NULL);
	return NULL;
}

static int total_waiting(struct lk_semset *s)
{
	int n = 0;

	for (unsigned int i = 0; i < SLEEPERS; i++)
		n += lk_semctl(s, i, LK_GETNCNT);
	return n;
}

/* SLEEPERS threads each wait on their own semaphore; one call wakes them all. 0 if all went well. */
static int wake_many(void)
{
	struct lk_sembuf ups[SLEEPERS];
	struct sleeper z[SLEEPERS];
	struct lk_semset *s;
	int bad = 0;

	if (lk_semset_create(&s, NULL, SLEEPERS, 0))
		return 1;
	for (int round = 0; round < 20; round++) {
		for (unsigned short i = 0; i < SLEEPERS; i++) {
			z[i] = (struct sleeper){ s, i, -1 };
			if (pthread_create(&z[i].thread, NULL, sleep_on, &z[i]))
				return 2;
			ups[i] = (struct lk_sembuf){ i, 1, 0 };
		}
		while (total_waiting(s) != SLEEPERS)
			sched_yield();
		if (lk_semop(s, ups, SLEEPERS, NULL))
			return 3;
		for (int i = 0; i < SLEEPERS; i++) {
			pthread_join(z[i].thread, NULL);
			bad += z[i].result != 0;
		}
		for (unsigned int i = 0; i < SLEEPERS; i++)
			bad += lk_semctl(s, i, LK_GETVAL) != 0;
	}
	lk_semset_close(s);
	return bad ? 4 : 0;
}

/* In a child: refuse syscall nr with err, then wake_many(); the child's exit status. */
static int with_refused(long nr, int err)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct sock_filter filter[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned int)nr, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned int)err),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

		if (nr >= 0 && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
				syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)) {
			printf("skipped: no seccomp filter can be installed here (%s): qemu-user, or a "
			       "kernel without CONFIG_SECCOMP_FILTER\n",
			       strerror(errno));
			fflush(stdout);
			_exit(77);
		}
		_exit(wake_many());
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		skip();
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void batch_wakes_everyone(void **state)
{
	(void)state;
	assert_int_equal(with_refused(-1, 0), 0);
}

static void without_io_uring(void **state)
{
	(void)state;
	assert_int_equal(with_refused(SYS_io_uring_setup, ENOSYS), 0);
	assert_int_equal(with_refused(SYS_io_uring_setup, EPERM), 0);
}

static void io_uring_refused_later(void **state)
{
	(void)state;
	assert_int_equal(with_refused(SYS_io_uring_enter, EPERM), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(batch_wakes_everyone),
		cmocka_unit_test(without_io_uring),
		cmocka_unit_test(io_uring_refused_later),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
