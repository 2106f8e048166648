/* SPDX-License-Identifier: MIT */
/*
 * For tests that flip keys in a process of their own (a seccomp filter, blocked signals or a
 * SIGTRAP handler must not reach the other tests): lkt_in_child(call) runs call in a forked
 * child, which exits with its value, and expects 0; a child killed by a signal fails with the
 * signal's name. Include after <cmocka.h>.
 */
#ifndef LKT_KEY_CHILD_H
#define LKT_KEY_CHILD_H

#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static inline void lkt_child_exited_0(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("the process was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

#define lkt_in_child(call)                    \
	do {                                  \
		pid_t lkt_pid = fork();       \
                                              \
		assert_true(lkt_pid >= 0);    \
		if (lkt_pid == 0)             \
			_exit(call);          \
		lkt_child_exited_0(lkt_pid);  \
	} while (0)

#endif
