// SPDX-License-Identifier: MIT
/*
 * Without membarrier(SYNC_CORE) (a seccomp filter denies it here, as an old kernel would lack
 * it), a single-threaded process still flips keys -- no other core can hold stale code -- and a
 * multi-threaded one gets -ENOSYS with a message, its keys and code unchanged.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "sites.h"

static LK_DEFINE_KEY_FALSE(sc_key);

static __attribute__((noinline)) int sc_site(void)
{
	return lk_branch_unlikely(&sc_key) ? 1 : 0;
}

/* 0, or -1 (errno) if no filter could be installed (qemu-user has no seccomp). */
static int deny_membarrier(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

static void *idle(void *arg)
{
	pause();
	return arg;
}

/* The child has never created a thread: single-threaded until it starts one. */
static int child(void)
{
	pthread_t t;

	if (deny_membarrier() != 0) {
		printf("skipped: no seccomp filter can be installed here (%s): qemu-user, or a kernel "
		       "without CONFIG_SECCOMP_FILTER\n",
		       strerror(errno));
		fflush(stdout);
		return 77;
	}
	if (lk_key_enable(&sc_key) != 0 || sc_site() != 1)
		return 1;
	if (lk_key_disable(&sc_key) != 0 || sc_site() != 0)
		return 2;

	if (pthread_create(&t, NULL, idle, NULL) != 0)
		return 3;
#if LKT_PATCHING
	if (lk_key_enable(&sc_key) != -ENOSYS)
		return 4;
	if (!strstr(lk_last_error(), "membarrier") || !strstr(lk_last_error(), "LK_KEYS_PORTABLE"))
		return 5;
	if (lk_key_enabled(&sc_key) || sc_site() != 0 || lkt_check_sites(&sc_key) != 1)
		return 6;
#else
	if (lk_key_enable(&sc_key) != 0 || sc_site() != 1)
		return 7;
#endif
	return 0;
}

static void single_thread_flips_multi_thread_refused(void **state)
{
	int status;
	pid_t pid;

	(void)state;
	pid = fork();
	if (pid == 0)
		_exit(child());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(single_thread_flips_multi_thread_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
