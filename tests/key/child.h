/* SPDX-License-Identifier: MIT */
/*
 * For tests that flip keys in a process of their own (a seccomp filter, blocked signals or a
 * SIGTRAP handler must not reach the other tests): wait for the forked child and expect it to
 * have exited 0; one killed by a signal fails with the signal's name. Include after <cmocka.h>.
 */
#ifndef LKT_KEY_CHILD_H
#define LKT_KEY_CHILD_H

#include <string.h>
#include <sys/wait.h>

static inline void lkt_child_exited_0(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("the process was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

#endif
