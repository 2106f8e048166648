/* SPDX-License-Identifier: MIT */
/*
 * For tests that flip keys in a process of their own (a seccomp filter, blocked signals or a
 * SIGTRAP handler must not reach the other tests): lkt_in_child(call) runs call in a forked
 * child, which exits with its value, and expects 0; a child killed by a signal fails with the
 * signal's name. A child that exits 77 skips the test (what it needs is missing: it says what).
 * Include after <cmocka.h>.
 */
#ifndef LKT_KEY_CHILD_H
#define LKT_KEY_CHILD_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * In a child about to sandbox itself: installs a filter that allows everything, to learn whether
 * filters can be installed at all (qemu-user has no seccomp). 0, or 77 after saying why not.
 */
static inline int lkt_seccomp_or_skip(void)
{
	struct sock_filter allow[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { 1, allow };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0)
		return 0;
	printf("skipped: no seccomp filter can be installed here (%s): qemu-user, or a kernel without "
	       "CONFIG_SECCOMP_FILTER\n",
	       strerror(errno));
	fflush(stdout);
	return 77;
}

static inline void lkt_child_exited_0(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("the process was killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

#define lkt_in_child(call)                   \
	do {                                 \
		pid_t lkt_pid = fork();      \
                                             \
		assert_true(lkt_pid >= 0);   \
		if (lkt_pid == 0)            \
			_exit(call);         \
		lkt_child_exited_0(lkt_pid); \
	} while (0)

#endif
