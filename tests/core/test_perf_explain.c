// SPDX-License-Identifier: MIT
/*
 * perf_event_open()'s failures come back as -errno with a sentence that says what to change.
 * Run as root here, so the denied cases are produced with a seccomp filter in a child.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
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

#include <lowkey/error.h>

#include "core/perf.h"

static void task_clock_opens(void **state)
{
	struct perf_event_attr attr;
	int fd;

	(void)state;
	memset(&attr, 0, sizeof(attr));
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.exclude_kernel = 1;
	fd = lk__perf_open(&attr, 0, -1, -1, 0, "task-clock");
	if (fd < 0)
		skip(); /* perf denied on this machine: the other cases say why */
	close(fd);
}

/* Deny perf_event_open with errno `err` for the rest of this (child) process: 0, or -1 (errno) if
 * no filter could be installed (qemu-user has no seccomp). */
static int deny_perf(int err)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* In a child: open task-clock under a filter answering err; exit 0 if the message has `needle`. */
static void expect_message(int err, const char *needle)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		struct perf_event_attr attr;
		int rc;

		memset(&attr, 0, sizeof(attr));
		attr.type = PERF_TYPE_SOFTWARE;
		attr.config = PERF_COUNT_SW_TASK_CLOCK;
		attr.exclude_kernel = 1;
		if (deny_perf(err) != 0) {
			printf("skipped: no seccomp filter can be installed here (%s): qemu-user, or a "
			       "kernel without CONFIG_SECCOMP_FILTER\n",
			       strerror(errno));
			fflush(stdout);
			_exit(77);
		}
		rc = lk__perf_open(&attr, 0, -1, -1, 0, "task-clock");
		_exit(rc == -err && strstr(lk_last_error(), needle) ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void seccomp_enosys_is_named(void **state)
{
	(void)state;
	expect_message(ENOSYS, "seccomp");
}

static void seccomp_eperm_is_named(void **state)
{
	(void)state;
	/* As root or with paranoid <= 2 the kernel would allow it: the message blames the filter. */
	if (lk__perf_paranoid() > 2 && !lk__has_perfmon())
		expect_message(EPERM, "perf_event_paranoid");
	else
		expect_message(EPERM, "seccomp");
}

static void fd_limit_is_named(void **state)
{
	(void)state;
	expect_message(EMFILE, "ulimit -n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(task_clock_opens),
		cmocka_unit_test(seccomp_enosys_is_named),
		cmocka_unit_test(seccomp_eperm_is_named),
		cmocka_unit_test(fd_limit_is_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
