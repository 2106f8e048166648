// SPDX-License-Identifier: MIT
/* lk__proc_comm: the one reader of /proc/PID/comm, for the counters and the CLI. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "internal/proc.h"

static void name(const char *set)
{
	assert_int_equal(prctl(PR_SET_NAME, set, 0, 0, 0), 0);
}

static void reads_process_and_thread(void **state)
{
	char out[16];

	(void)state;
	name("lkt-comm");
	assert_int_equal(lk__proc_comm(getpid(), 0, out, sizeof(out)), 8);
	assert_string_equal(out, "lkt-comm");
	assert_int_equal(lk__proc_comm(getpid(), (pid_t)syscall(SYS_gettid), out, sizeof(out)), 8);
	assert_string_equal(out, "lkt-comm");
}

/* Only the kernel's line end goes: a newline the thread put in its name stays. */
static void keeps_a_newline_in_the_name(void **state)
{
	char out[16];

	(void)state;
	name("a\nb");
	assert_int_equal(lk__proc_comm(getpid(), getpid(), out, sizeof(out)), 3);
	assert_string_equal(out, "a\nb");
	name("fifteen-bytes\n\n"); /* 15 bytes, the most a name holds, ending in a newline */
	assert_int_equal(lk__proc_comm(getpid(), 0, out, sizeof(out)), 15);
	assert_string_equal(out, "fifteen-bytes\n\n");
}

static void cuts_to_the_buffer(void **state)
{
	char out[5];

	(void)state;
	name("lkt-comm");
	assert_int_equal(lk__proc_comm(getpid(), 0, out, sizeof(out)), 4);
	assert_string_equal(out, "lkt-");
}

static void no_task_leaves_the_buffer(void **state)
{
	char out[16] = "kept";

	(void)state;
	assert_int_equal(lk__proc_comm(getpid(), 0x7ffffff0, out, sizeof(out)), -ENOENT);
	assert_string_equal(out, "kept");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_process_and_thread),
		cmocka_unit_test(keeps_a_newline_in_the_name),
		cmocka_unit_test(cuts_to_the_buffer),
		cmocka_unit_test(no_task_leaves_the_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
