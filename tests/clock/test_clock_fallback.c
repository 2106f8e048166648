// SPDX-License-Identifier: MIT
/*
 * Every degraded mode, each in a fresh process (the environment and perf's availability are read
 * once): LOWKEY_CLOCK / LOWKEY_CLOCK_NOW / LOWKEY_CLOCK_REBASE_US, good and bad values; a seccomp
 * filter that denies perf_event_open with EPERM, EACCES or ENOSYS; no file descriptor left
 * (EMFILE) and the retry once there is; an unprivileged user. In each, the values must be right
 * and lk_clock_info() must say what happened.
 *
 * This program is its own helper: `test_clock_fallback --child SCENARIO` runs one scenario and
 * prints what lk_clock_info() says; the tests run it with execve and read its output.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "clock_test.h"
#include "core/perf.h"

/* ---- the child ---- */

static void deny_perf(int err)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };

	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		_exit(90);
}

#define NOW_BOUND (LK__STEP_NS + LK__RESYNC_NS * 1000 / 1000000)

/* Both clocks, through sleeps and yields; 0 if every value is right. */
static int values_right(void)
{
	struct cputime_bounds b = cputime_bounds();
	uint64_t prev = 0, prev_now = 0;

	for (int i = 0; i < 3000; i++) {
		uint64_t c0, n, c1;

		if (!cputime_sample_ok(b, &prev))
			return 1;
		c0 = ref_ns(CLOCK_MONOTONIC);
		n = lk_now_ns();
		c1 = ref_ns(CLOCK_MONOTONIC);
		if (n + NOW_BOUND < c0 || n > c1 + NOW_BOUND || n < prev_now)
			return 2;
		prev_now = n;
		if (i % 300 == 0)
			usleep(200);
		if (i % 100 == 0)
			sched_yield();
	}
	return 0;
}

static void print_info(const char *tag)
{
	struct lk_clock_info info;

	if (lk_clock_info(&info) != 0)
		_exit(91);
	printf("%scputime=%s\n%sthread=%s\n%snow=%s\n%sperf_errno=%d\n%srebase_ns=%llu\n"
	       "%snote=%s\n%sreason=%s\n%sthread_reason=%s\n%snow_reason=%s\n",
	       tag, info.cputime_name, tag, info.thread_cputime_name, tag, info.now_name, tag,
	       info.perf_errno, tag, (unsigned long long)info.rebase_ns, tag, info.env_note, tag,
	       info.cputime_reason, tag, info.thread_reason, tag, info.now_reason);
	fflush(stdout);
}

/* Out of file descriptors at the first call, then not. */
static int emfile(void)
{
	struct rlimit rl;
	int status, fd;

	getrlimit(RLIMIT_NOFILE, &rl);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the lowest free fd */
	close(fd);
	rl.rlim_cur = (rlim_t)fd;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 92;
	status = values_right();
	print_info("");
	if (status)
		return status;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	usleep((useconds_t)(LK__SETUP_RETRY_NS / 1000 + 20000)); /* past the retry delay */
	status = values_right();
	print_info("after_");
	return status;
}

static int child(const char *scenario)
{
	int status;

	if (!strncmp(scenario, "seccomp-", 8)) {
		int err = !strcmp(scenario + 8, "EACCES") ? EACCES :
			  !strcmp(scenario + 8, "ENOSYS") ? ENOSYS :
							    EPERM;

		deny_perf(err);
	} else if (!strcmp(scenario, "emfile")) {
		return emfile();
	}
	status = values_right();
	print_info("");
	return status;
}

/* ---- the tests ---- */

static char self[PATH_MAX];

/* Run `self --child scenario` (under setpriv as nobody if unprivileged) with extra environment
 * entries; returns its exit status, its output in out. */
static int run(const char *scenario, const char *const *env, bool unprivileged, char *out,
	       size_t len)
{
	int pipefd[2], status;
	ssize_t n, got = 0;
	pid_t pid;

	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		const char *as_nobody[] = { "setpriv",	      "--reuid=65534",	 "--regid=65534",
					    "--clear-groups", "--inh-caps=-all", self,
					    "--child",	      scenario,		 NULL };
		const char *plain[] = { self, "--child", scenario, NULL };

		dup2(pipefd[1], 1);
		close(pipefd[0]);
		unsetenv("LOWKEY_CLOCK");
		unsetenv("LOWKEY_CLOCK_NOW");
		unsetenv("LOWKEY_CLOCK_REBASE_US");
		for (; env && *env; env++)
			putenv((char *)*env);
		if (unprivileged)
			execvp("setpriv", (char **)as_nobody);
		else
			execv(self, (char **)plain);
		_exit(93);
	}
	close(pipefd[1]);
	while (got + 1 < (ssize_t)len &&
	       (n = read(pipefd[0], out + got, len - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = 0;
	close(pipefd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fprintf(stderr, "child %s exited %d:\n%s", scenario, WEXITSTATUS(status), out);
	return WEXITSTATUS(status);
}

static char out[8192];

#define RUN(scenario, ...)                                        \
	({                                                        \
		const char *const env_[] = { __VA_ARGS__, NULL }; \
		run(scenario, env_, false, out, sizeof(out));     \
	})

static void expect(const char *text)
{
	if (!strstr(out, text)) {
		fprintf(stderr, "expected \"%s\" in:\n%s", text, out);
		fail();
	}
}

/* What the machine gives without any setting: page or seq, or syscall where perf is denied. */
static char auto_method[16];

static int find_auto(void **state)
{
	const char *p;

	(void)state;
	if (run("plain", NULL, false, out, sizeof(out)) != 0)
		return -1;
	p = strstr(out, "cputime=");
	if (!p)
		return -1;
	sscanf(p + 8, "%15s", auto_method);
	return 0;
}

static bool fast_here(void)
{
	return strcmp(auto_method, "syscall") != 0;
}

static void forced_syscall(void **state)
{
	(void)state;
	assert_int_equal(RUN("plain", "LOWKEY_CLOCK=syscall"), 0);
	expect("cputime=syscall\n");
	expect("thread=syscall\n");
	expect("reason=LOWKEY_CLOCK=syscall");
	expect("note=\n");
}

static void forced_seq(void **state)
{
	(void)state;
	if (!fast_here())
		skip();
	assert_int_equal(RUN("plain", "LOWKEY_CLOCK=seq"), 0);
	expect("cputime=seq\n");
	expect("thread=seq\n");
}

static void forced_page(void **state)
{
	(void)state;
	if (!fast_here())
		skip();
	assert_int_equal(RUN("plain", "LOWKEY_CLOCK=PAGE"), 0); /* any case */
	if (strcmp(auto_method, "page") == 0) {
		expect("cputime=page\n");
	} else {
		/* No cap_user_time here: seq, and the reason says page was asked for. */
		expect("cputime=seq\n");
		expect("LOWKEY_CLOCK=page asked for page-only");
	}
}

static void forced_vdso(void **state)
{
	(void)state;
	assert_int_equal(RUN("plain", "LOWKEY_CLOCK=syscall", "LOWKEY_CLOCK_NOW=vdso"), 0);
	expect("cputime=syscall\n");
	expect("now=vdso\n");
	expect("now_reason=LOWKEY_CLOCK_NOW=vdso");
}

static void bad_values_are_ignored_and_said(void **state)
{
	(void)state;
	assert_int_equal(RUN("plain", "LOWKEY_CLOCK=fastest", "LOWKEY_CLOCK_NOW=rdtsc",
			     "LOWKEY_CLOCK_REBASE_US=5"),
			 0);
	expect("LOWKEY_CLOCK='fastest' ignored");
	expect("LOWKEY_CLOCK_NOW='rdtsc' ignored");
	expect("LOWKEY_CLOCK_REBASE_US='5' ignored");
	expect("rebase_ns=1000000\n");
	{
		char want[32];

		snprintf(want, sizeof(want), "cputime=%s\n", auto_method);
		expect(want);
	}
	assert_int_equal(RUN("plain", "LOWKEY_CLOCK_REBASE_US=99999999999999999999999"), 0);
	expect("LOWKEY_CLOCK_REBASE_US='99999999999999999999999' ignored");
	expect("rebase_ns=1000000\n");
	assert_int_equal(RUN("plain", "LOWKEY_CLOCK_REBASE_US=12ms"), 0);
	expect("rebase_ns=1000000\n");
	assert_int_equal(RUN("plain", "LOWKEY_CLOCK_REBASE_US=50", "LOWKEY_CLOCK=auto"), 0);
	expect("rebase_ns=50000\n");
	expect("note=\n");
}

static void seccomp_denial(int err, const char *name)
{
	char scenario[32], want[32];

	snprintf(scenario, sizeof(scenario), "seccomp-%s", name);
	assert_int_equal(RUN(scenario, "LOWKEY_CLOCK=auto"), 0);
	expect("cputime=syscall\n");
	expect("thread=syscall\n");
	snprintf(want, sizeof(want), "perf_errno=%d\n", err);
	expect(want);
	expect("reason=clock_gettime(CLOCK_THREAD_CPUTIME_ID) on every call: perf_event_open(task-clock)");
	/* As root, or at paranoid <= 2, only the filter can be the cause. */
	if (lk__perf_paranoid() <= 2 || lk__has_perfmon())
		expect("seccomp");
}

static void seccomp_eperm(void **state)
{
	(void)state;
	seccomp_denial(EPERM, "EPERM");
}

static void seccomp_eacces(void **state)
{
	(void)state;
	seccomp_denial(EACCES, "EACCES");
}

static void seccomp_enosys(void **state)
{
	(void)state;
	seccomp_denial(ENOSYS, "ENOSYS");
}

static void out_of_fds_then_not(void **state)
{
	char want[64];

	(void)state;
	if (!fast_here())
		skip();
	assert_int_equal(RUN("emfile", "LOWKEY_CLOCK=auto"), 0);
	expect("thread=syscall\n");
	snprintf(want, sizeof(want), "perf_errno=%d\n", EMFILE);
	expect(want);
	expect("EMFILE: out of file descriptors");
	/* Once fds are back, the thread's next set-up attempt succeeds. */
	snprintf(want, sizeof(want), "after_thread=%s\n", auto_method);
	expect(want);
}

static void unprivileged_user(void **state)
{
	int paranoid = lk__perf_paranoid();

	(void)state;
	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0)
		skip(); /* not root (then every test here already is unprivileged), or no setpriv */
	if (access(self, R_OK | X_OK) != 0)
		skip();
	{
		const char *const env[] = { "LOWKEY_CLOCK=auto", NULL };
		int status = run("plain", env, true, out, sizeof(out));

		if (status == 93 || status == 127 || status == 126) {
			fprintf(stderr, "skipped: nobody cannot run %s\n", self);
			skip();
		}
		assert_int_equal(status, 0);
	}
	if (paranoid <= 2) {
		char want[32];

		/* Unprivileged, a user-only task clock is allowed at paranoid 2. */
		snprintf(want, sizeof(want), "cputime=%s\n", auto_method);
		expect(want);
	} else {
		expect("cputime=syscall\n");
		expect("perf_event_paranoid");
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(forced_syscall),
		cmocka_unit_test(forced_seq),
		cmocka_unit_test(forced_page),
		cmocka_unit_test(forced_vdso),
		cmocka_unit_test(bad_values_are_ignored_and_said),
		cmocka_unit_test(seccomp_eperm),
		cmocka_unit_test(seccomp_eacces),
		cmocka_unit_test(seccomp_enosys),
		cmocka_unit_test(out_of_fds_then_not),
		cmocka_unit_test(unprivileged_user),
	};
	ssize_t n;

	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child(argv[2]);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	return cmocka_run_group_tests(tests, find_auto, NULL);
}
