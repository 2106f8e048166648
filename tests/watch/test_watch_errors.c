// SPDX-License-Identifier: MIT
/*
 * Bad input and hostile environments: malformed requests fail with -EINVAL before any system call
 * (a seccomp filter kills the child if lowkey so much as tries), with a message that lists what
 * this CPU accepts; a kernel without perf sigtrap gives -EOPNOTSUPP naming 5.13; a denied
 * perf_event_open names the cause; an unprivileged user can watch its own memory at
 * perf_event_paranoid 2; a fork()ed child starts with no watchpoints and inert handles.
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/personality.h>
#include <grp.h>
#include <sys/prctl.h>
#include <cmocka.h>

#include <lowkey/error.h>

#include "watch/watch_test.h"

static long aligned_var;
static struct recorder rec;

/* perf_event_open() in this (child) process: kill it (action) or fail with errno err. */
static void filter_perf(unsigned int action)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* In the child: each expectation that fails exits with its own code, so the parent can say which. */
static int expect(int line, int got, int want, const char *needle)
{
	if (got == want && (!needle || strstr(lk_last_error(), needle)))
		return 0;
	fprintf(stderr, "line %d: got %d (want %d), message: %s\n", line, got, want,
		lk_last_error());
	return 1;
}

#define EXPECT(call, want, needle)                              \
	do {                                                    \
		struct lk_watch *w_ = NULL;                     \
		(void)w_;                                       \
		if (expect(__LINE__, (call), (want), (needle))) \
			return 1;                               \
	} while (0)

#define ACCEPTS "1, 2, 4 or 8 bytes"

static int bad_input_in_child(void)
{
	char *base = (char *)&aligned_var;
	struct lk_watch *w = NULL;

	filter_perf(SECCOMP_RET_KILL_PROCESS); /* any perf_event_open() ends the test here */
	EXPECT(lk_watch_add(&w, base, 3, LK_WATCH_WRITE, NULL, NULL), -EINVAL,
	       "cannot watch 3 bytes");
	EXPECT(lk_watch_add(&w, base, 3, LK_WATCH_WRITE, NULL, NULL), -EINVAL, ACCEPTS);
	EXPECT(lk_watch_add(&w, base, 0, LK_WATCH_WRITE, NULL, NULL), -EINVAL, ACCEPTS);
	EXPECT(lk_watch_add(&w, base, 16, LK_WATCH_READWRITE, NULL, NULL), -EINVAL, ACCEPTS);
	EXPECT(lk_watch_add(&w, base + 4, 8, LK_WATCH_WRITE, NULL, NULL), -EINVAL,
	       "not a multiple of 8");
	EXPECT(lk_watch_add(&w, base + 2, 4, LK_WATCH_WRITE, NULL, NULL), -EINVAL,
	       "not a multiple of 4");
	EXPECT(lk_watch_add(&w, base + 1, 2, LK_WATCH_WRITE, NULL, NULL), -EINVAL, ACCEPTS);
	EXPECT(lk_watch_add(&w, (void *)bad_input_in_child, 8, LK_WATCH_EXEC, NULL, NULL), -EINVAL,
	       "len 1");
	EXPECT(lk_watch_add(&w, (void *)0xffffffff81000000ul, 8, LK_WATCH_WRITE, NULL, NULL),
	       -EINVAL, "not a user-space address");
	EXPECT(lk_watch_add(&w, base, 8, 0, NULL, NULL), -EINVAL, "exactly one of");
	EXPECT(lk_watch_add(&w, base, 8, LK_WATCH_WRITE | LK_WATCH_EXEC, NULL, NULL), -EINVAL,
	       "exactly one");
	EXPECT(lk_watch_add(&w, base, 8, LK_WATCH_WRITE | 0x8000, NULL, NULL), -EINVAL, "unknown");
	EXPECT(lk_watch_add(NULL, base, 8, LK_WATCH_WRITE, NULL, NULL), -EINVAL, NULL);
	if (w)
		return 2; /* *out stays NULL on failure */
	EXPECT(lk_watch_move(NULL, base, 8), -EINVAL, NULL);
	EXPECT(lk_watch_remove(NULL), -EINVAL, NULL);

	/* The sampler (lowkey watch -p) checks the same way. */
	struct lk_watch_sampler *s = NULL;
	EXPECT(lk_watch_sampler_open(&s, getppid(), (uintptr_t)base + 2, 4, LK_WATCH_WRITE),
	       -EINVAL, ACCEPTS);
	EXPECT(lk_watch_sampler_open(&s, getppid(), (uintptr_t)base, 8, 0), -EINVAL, "exactly one");
	EXPECT(lk_watch_sampler_open(&s, 0, (uintptr_t)base, 8, LK_WATCH_WRITE), -EINVAL, NULL);
	if (s)
		return 2;
	uint64_t counted;
	EXPECT(lk_watch_sampler_stop(NULL), -EINVAL, NULL);
	EXPECT(lk_watch_sampler_counted(NULL, &counted), -EINVAL, NULL);
	return 0;
}

static void bad_input_fails_before_any_system_call(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(bad_input_in_child), 0);
}

static int bad_move_in_child(void)
{
	struct lk_watch *w;

	if (lk_watch_add(&w, &aligned_var, 8, LK_WATCH_WRITE, NULL, NULL) != 0)
		return 3;
	filter_perf(SECCOMP_RET_KILL_PROCESS);
	EXPECT(lk_watch_move(w, (char *)&aligned_var + 2, 4), -EINVAL, "not a multiple of 4");
	EXPECT(lk_watch_move(w, &aligned_var, 5), -EINVAL, ACCEPTS);
	return 0;
}

static void bad_move_fails_before_any_system_call(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(bad_move_in_child), 0);
}

/*
 * A kernel before 5.13 answers EINVAL to the sigtrap bits. Here: a filter answers EINVAL to every
 * perf_event_open, and the UNAME26 personality makes uname() report a 2.6 kernel.
 */
static int old_kernel_in_child(void)
{
	struct lk_watch *w;

	filter_perf(SECCOMP_RET_ERRNO | EINVAL);
	if (personality(PER_LINUX | UNAME26) < 0)
		return 3;
	EXPECT(lk_watch_add(&w, &aligned_var, 8, LK_WATCH_WRITE, NULL, NULL), -EOPNOTSUPP,
	       "Linux 5.13");
	return 0;
}

static void kernel_without_sigtrap_is_eopnotsupp(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(old_kernel_in_child), 0);
}

static int seccomp_denied_in_child(void)
{
	struct lk_watch_sampler *sampler;
	struct lk_watch *w;

	filter_perf(SECCOMP_RET_ERRNO | EACCES);
	EXPECT(lk_watch_add(&w, &aligned_var, 8, LK_WATCH_WRITE, NULL, NULL), -EACCES, "seccomp");
	/* Refused by the kernel: the slot lowkey reserved is given back. */
	struct lk_watch_slots s;
	if (lk_watch_slots(&s) != 0 || s.thread != 0)
		return 4;
	EXPECT(lk_watch_add(&w, &aligned_var, 8, LK_WATCH_WRITE | LK_WATCH_PROCESS, NULL, NULL),
	       -EACCES, "seccomp");
	if (lk_watch_slots(&s) != 0 || s.process != 0)
		return 5;
	EXPECT(lk_watch_sampler_open(&sampler, getppid(), (uintptr_t)&aligned_var, 8,
				     LK_WATCH_WRITE),
	       -EACCES, "seccomp");
	return 0;
}

static void sampler_of_a_process_that_does_not_exist(void **state)
{
	struct lk_watch_sampler *s = NULL;

	(void)state;
	assert_int_equal(lk_watch_sampler_open(&s, 0x3ffffe, (uintptr_t)&aligned_var, 8,
					       LK_WATCH_WRITE),
			 -ESRCH);
	assert_non_null(strstr(lk_last_error(), "no process"));
	assert_null(s);
	lk_watch_sampler_close(NULL); /* ignored */
}

static void denied_names_the_cause(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(seccomp_denied_in_child), 0);
}

/* As nobody, with no capabilities: paranoid 2 lets a user watch its own memory. */
static int unprivileged_in_child(void)
{
	struct lk_watch *w;

	if (getuid() == 0 && (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
			      setresuid(65534, 65534, 65534) != 0))
		return 3;
	if (lk_watch_add(&w, &aligned_var, 8, LK_WATCH_WRITE, record_hit, &rec) != 0) {
		fprintf(stderr, "as uid %d: %s\n", (int)getuid(), lk_last_error());
		return 4;
	}
	WRITE_ONCE(aligned_var, 1);
	if (hits_of(&rec) != 1)
		return 5;
	return lk_watch_remove(w) == 0 ? 0 : 6;
}

static int read_paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	int level = 99;

	if (f) {
		if (fscanf(f, "%d", &level) != 1)
			level = 99;
		fclose(f);
	}
	return level;
}

static void unprivileged_user_watches_own_memory(void **state)
{
	(void)state;
	if (read_paranoid() > 2)
		skip(); /* levels 3 and 4 deny every unprivileged perf_event_open */
	assert_int_equal(run_in_child(unprivileged_in_child), 0);
}

/* fork(): the child has none of the parent's watchpoints and can add its own. */
static struct lk_watch *parent_thread_watch, *parent_process_watch;

static int forked_child(void)
{
	struct lk_watch_slots s;
	struct lk_watch *mine;

	WRITE_ONCE(aligned_var, 42); /* the kernel gave the child no copy: no signal, no hit */
	if (hits_of(&rec) != 0)
		return 3;
	if (lk_watch_slots(&s) != 0 || s.thread != 0 || s.process != 0)
		return 4;
	EXPECT(lk_watch_move(parent_thread_watch, &aligned_var, 8), -ESRCH, "fork");
	if (lk_watch_remove(parent_thread_watch) != 0 || lk_watch_remove(parent_process_watch) != 0)
		return 5;
	/* All four slots are the child's. */
	for (int i = 0; i < 4; i++)
		if (lk_watch_add(&mine, &aligned_var, 8, LK_WATCH_WRITE, record_hit, &rec) != 0)
			return 6;
	WRITE_ONCE(aligned_var, 43);
	return hits_of(&rec) == 1 ? 0 : 7; /* four watchpoints, one SIGTRAP: merged */
}

static void fork_child_starts_clean(void **state)
{
	(void)state;
	memset(&rec, 0, sizeof(rec));
	assert_int_equal(lk_watch_add(&parent_thread_watch, &aligned_var, 8, LK_WATCH_WRITE,
				      record_hit, &rec),
			 0);
	assert_int_equal(lk_watch_add(&parent_process_watch, &aligned_var, 8,
				      LK_WATCH_WRITE | LK_WATCH_PROCESS, record_hit, &rec),
			 0);
	assert_int_equal(run_in_child(forked_child), 0);
	/* The parent's are untouched. */
	WRITE_ONCE(aligned_var, 1);
	assert_int_equal(hits_of(&rec), 1);
	assert_int_equal(lk_watch_remove(parent_thread_watch), 0);
	assert_int_equal(lk_watch_remove(parent_process_watch), 0);
}

/*
 * exec(): remove_on_exec. Stage 2 (this binary again, with address randomization off so both
 * images lay out alike) adds a watchpoint and execs stage 3, which writes the same address. Had
 * the watchpoint survived, stage 3 would die of a SIGTRAP it has no handler for.
 */
static int exec_stage2(void)
{
	struct lk_watch *w;
	char addr[32];

	if (lk_watch_add(&w, &aligned_var, 8, LK_WATCH_WRITE | LK_WATCH_PROCESS, record_hit,
			 &rec) != 0)
		return 3;
	snprintf(addr, sizeof(addr), "%p", (void *)&aligned_var);
	execl("/proc/self/exe", "test_watch_errors", "--exec-stage3", addr, (char *)NULL);
	return 4;
}

static int exec_stage3(const char *addr)
{
	char here[32];

	snprintf(here, sizeof(here), "%p", (void *)&aligned_var);
	if (strcmp(here, addr) != 0)
		return 5; /* not the same address: the test would prove nothing */
	WRITE_ONCE(aligned_var, 1);
	return 0;
}

static int exec_child(void)
{
	if (personality(PER_LINUX | ADDR_NO_RANDOMIZE) < 0)
		return 6;
	execl("/proc/self/exe", "test_watch_errors", "--exec-stage2", (char *)NULL);
	return 7;
}

static void exec_removes_watchpoints(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(exec_child), 0);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--exec-stage2") == 0)
		return exec_stage2();
	if (argc == 3 && strcmp(argv[1], "--exec-stage3") == 0)
		return exec_stage3(argv[2]);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bad_input_fails_before_any_system_call),
		cmocka_unit_test(bad_move_fails_before_any_system_call),
		cmocka_unit_test(kernel_without_sigtrap_is_eopnotsupp),
		cmocka_unit_test(denied_names_the_cause),
		cmocka_unit_test(sampler_of_a_process_that_does_not_exist),
		cmocka_unit_test(unprivileged_user_watches_own_memory),
		cmocka_unit_test(fork_child_starts_clean),
		cmocka_unit_test(exec_removes_watchpoints),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
