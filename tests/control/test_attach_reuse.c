// SPDX-License-Identifier: MIT
/*
 * Root's `lowkey trace|list|enable|snapshot --pid V` waits for a process under 1 s old that has no
 * control socket yet. If that process exits during the wait and another user's process takes pid V,
 * lowkey must say that the first one exited: never attach to the second, trace it, or give it
 * root's output.
 *
 * The pid is reused on purpose, in a pid namespace of the test's own (where
 * /proc/sys/kernel/ns_last_pid chooses the next pid): a young process A (pid V, LOWKEY_CONTROL=1,
 * no socket) is started, then lowkey; once lowkey sleeps in its wait, it is stopped (SIGSTOP), A is
 * killed and reaped, nobody's lowkey program B is started as pid V and opens its socket, and
 * lowkey is let go on (SIGCONT). A second run lets lowkey run on meanwhile, the swap landing
 * anywhere in its wait. Needs root, util-linux's setpriv and pid namespaces; skipped otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "cli/run.h"
#include "ctl_test.h"

#define NOBODY 65534
#define SKIPPED 77 /* the namespace cannot be made here */
/*
 * A run that showed nothing, to do again: lowkey gave up before it was seen waiting (a slow
 * machine), or another task took pid V before B could (lowkey, running on through the swap, may
 * exit meanwhile, and a sanitizer's leak check at exit clones a task).
 */
#define AGAIN 3

static char scratch[] = "/tmp/lkt-reuse-XXXXXX";
static struct lkt_run r;
static char path[1024];

static const char *in_scratch(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	return path;
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(scratch))
		return -1;
	return chmod(scratch, 0755); /* nobody's process writes there if lowkey lets it */
}

static int teardown(void **state)
{
	(void)state;
	return lkt_sh(&r, "rm -rf '%s'", scratch);
}

/* ---- inside the namespace (no cmocka there: a failure is said on stderr and in the exit code) ---- */

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Whether pid sleeps in a system call: lowkey's wait between two looks at the process. */
static bool sleeping(pid_t pid)
{
	static const long calls[] = {
#ifdef SYS_nanosleep
		SYS_nanosleep,
#endif
#ifdef SYS_poll
		SYS_poll,
#endif
		SYS_clock_nanosleep,
		SYS_ppoll,
	};
	char file[64], buf[64] = "";
	long nr;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/syscall", (int)pid);
	f = fopen(file, "re");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (nr == calls[i])
			return true;
	return false;
}

/* Fork so that the child gets pid want (no other process forks in the namespace meanwhile). */
static pid_t fork_as(pid_t want)
{
	char text[16];
	int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	int n = snprintf(text, sizeof(text), "%d", (int)want - 1);

	if (fd < 0 || write(fd, text, (size_t)n) != n) {
		say("cannot choose the next pid: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return fork();
}

/* A: young, asks for a socket and never opens one (sleep is not linked with liblowkey). */
static pid_t start_a(void)
{
	char xdg[1100], *env[] = { xdg, "LOWKEY_CONTROL=1", "PATH=/usr/bin:/bin", NULL };
	pid_t pid;

	snprintf(xdg, sizeof(xdg), "XDG_RUNTIME_DIR=%s", in_scratch("root-xdg"));
	pid = fork();
	if (pid == 0) {
		execle("/bin/sleep", "sleep", "60", (char *)NULL, env);
		_exit(127);
	}
	return pid;
}

/* B: nobody's lowkey program as pid want, its control socket open; -1 if it did not get want. */
static pid_t start_b(pid_t want)
{
	char cmd[2048], line[64] = "";
	int p[2];
	pid_t pid;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "exec setpriv --reuid=%d --regid=%d --clear-groups env XDG_RUNTIME_DIR='%s' "
		 "LOWKEY_CONTROL=1 '%s' serve",
		 NOBODY, NOBODY, in_scratch("nobody-xdg"), TARGET);
	if (pipe(p) != 0)
		return -1;
	pid = fork_as(want);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	if (!f || !fgets(line, sizeof(line), f) || strncmp(line, "ready ", 6) != 0 ||
	    atoi(line + 6) != want) {
		say("the other user's program did not start as pid %d: %s", (int)want, line);
		pid = -1;
	}
	if (f)
		fclose(f);
	return pid;
}

static pid_t start_lowkey(char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(in_scratch("lowkey.log"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(LOWKEY, argv);
		_exit(127);
	}
	return pid;
}

/* Wait until lowkey sleeps in its wait for a; false if it ended first. */
static bool lowkey_waits(pid_t lk)
{
	while (!sleeping(lk)) {
		if (waitpid(lk, NULL, WNOHANG) == lk)
			return false;
		sched_yield();
	}
	return true;
}

static void keep_status(int status)
{
	FILE *f = fopen(in_scratch("lowkey.status"), "w");

	if (f) {
		fprintf(f, "%d\n",
			WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
		fclose(f);
	}
}

/*
 * One swap: the command (with "PID" where the pid goes) waits for A, A gives pid V to B. stop:
 * lowkey is stopped through the swap; else it runs on, the swap coming after spin yields.
 */
static int swap(char **argv, bool stop, int spin)
{
	char pid_arg[16];
	pid_t a = start_a(), b, lk;
	int status;

	snprintf(pid_arg, sizeof(pid_arg), "%d", (int)a);
	for (char **arg = argv; *arg; arg++)
		if (strcmp(*arg, "PID") == 0)
			*arg = pid_arg;
	lk = start_lowkey(argv);
	if (a < 0 || lk < 0)
		return 1;
	if (!lowkey_waits(lk)) {
		kill(a, SIGKILL);
		waitpid(a, NULL, 0);
		return AGAIN;
	}
	if (stop) {
		kill(lk, SIGSTOP);
		waitpid(lk, &status, WUNTRACED);
	}
	while (spin-- > 0)
		sched_yield();
	kill(a, SIGKILL);
	waitpid(a, NULL, 0);
	b = start_b(a);
	if (stop)
		kill(lk, SIGCONT);
	waitpid(lk, &status, 0);
	keep_status(status);
	if (b > 0) {
		kill(b, SIGTERM);
		waitpid(b, NULL, 0);
	}
	return b > 0 ? 0 : AGAIN;
}

/* pid 1 of the namespace: a /proc of its own, then the swap. */
static int in_namespace(char **argv, bool stop, int spin)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
		say("cannot mount a /proc for the namespace: %s", strerror(errno));
		return SKIPPED;
	}
	if (access("/proc/sys/kernel/ns_last_pid", W_OK) != 0) {
		say("/proc/sys/kernel/ns_last_pid cannot be written: %s", strerror(errno));
		return SKIPPED;
	}
	return swap(argv, stop, spin);
}

/* Run the swap in a new pid and mount namespace: 0, SKIPPED, AGAIN, or 1 (it went wrong). */
static int in_new_namespace(char **argv, bool stop, int spin)
{
	pid_t outer = fork();
	int status = 0;

	if (outer == 0) {
		pid_t init;

		if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0) {
			say("cannot make a pid namespace: %s", strerror(errno));
			_exit(SKIPPED);
		}
		init = fork();
		if (init == 0)
			_exit(in_namespace(argv, stop, spin));
		if (init < 0 || waitpid(init, &status, 0) != init || !WIFEXITED(status))
			_exit(1);
		_exit(WEXITSTATUS(status));
	}
	if (outer < 0 || waitpid(outer, &status, 0) != outer || !WIFEXITED(status))
		return 1;
	return WEXITSTATUS(status);
}

/* ---- the tests ---- */

static void need_root_and_setpriv(void)
{
	if (geteuid() != 0)
		skip(); /* switching users, choosing pids */
	if (lkt_sh(&r, "command -v setpriv") != 0)
		skip(); /* util-linux's setpriv is missing */
	if (lkt_sh(&r, "setpriv --reuid=%d --regid=%d --clear-groups test -x '%s'", NOBODY, NOBODY,
		   TARGET) != 0)
		skip(); /* the build tree is not readable by nobody */
}

static void make_dir(const char *dir, uid_t owner)
{
	mkdir(dir, 0700);
	assert_int_equal(chown(dir, owner, owner), 0);
	assert_int_equal(chmod(dir, 0700), 0);
}

/* Run the command through a swap (again, up to 5 times, where a run showed nothing); r: what it said. */
static void run_swap(const char *const *cmd, bool stop, int spin)
{
	char *argv[16], text[64] = "";
	int rc = AGAIN;
	FILE *f;
	size_t n;

	make_dir(in_scratch("root-xdg"), 0);
	make_dir(in_scratch("nobody-xdg"), NOBODY);
	for (int tries = 0; rc == AGAIN && tries < 5; tries++) {
		memcpy(argv, cmd, sizeof(argv));
		rc = in_new_namespace(argv, stop, spin);
	}
	if (rc == SKIPPED)
		skip();
	assert_int_equal(rc, 0);
	f = fopen(in_scratch("lowkey.status"), "r");
	assert_non_null(f);
	assert_non_null(fgets(text, sizeof(text), f));
	fclose(f);
	f = fopen(in_scratch("lowkey.log"), "r");
	assert_non_null(f);
	n = fread(r.out, 1, sizeof(r.out) - 1, f);
	r.out[n] = 0;
	fclose(f);
	r.status = atoi(text);
}

/* lowkey said that the process it waited for exited, and failed. */
static void refused(void)
{
	lkt_expect(&r, 1, "exited");
}

/* What root's trace leaves when it refused: no output, so none of nobody's. */
static void no_output(const char *out)
{
	struct stat st;

	if (lstat(out, &st) == 0) {
		print_error(
			"%s is left, owned by uid %u, with %ld app:tick events of the other process\n",
			out, (unsigned int)st.st_uid, lkt_count(out, "app:tick").events);
		assert_int_not_equal(st.st_uid, NOBODY);
	}
	assert_false(lkt_file_exists(out));
}

static void trace_refuses_a_reused_pid(void **state)
{
	char out[1100];

	(void)state;
	need_root_and_setpriv();
	snprintf(out, sizeof(out), "%s", in_scratch("trace.ctf"));
	run_swap((const char *[16]){ "lowkey", "trace", "--pid", "PID", "-e", "app:*", "--duration",
				     "0.5", "-o", out, NULL },
		 true, 0);
	no_output(out);
	refused();
}

static void list_refuses_a_reused_pid(void **state)
{
	(void)state;
	need_root_and_setpriv();
	run_swap((const char *[16]){ "lowkey", "list", "--pid", "PID", NULL }, true, 0);
	refused();
}

static void enable_refuses_a_reused_pid(void **state)
{
	(void)state;
	need_root_and_setpriv();
	run_swap((const char *[16]){ "lowkey", "enable", "--pid", "PID", "app:*", NULL }, true, 0);
	refused();
}

static void snapshot_refuses_a_reused_pid(void **state)
{
	char out[1100];

	(void)state;
	need_root_and_setpriv();
	snprintf(out, sizeof(out), "%s", in_scratch("snapshot.json"));
	run_swap((const char *[16]){ "lowkey", "snapshot", "--pid", "PID", "-o", out, NULL }, true,
		 0);
	refused();
	assert_false(lkt_file_exists(out));
}

/* The swap anywhere in lowkey's wait, lowkey running on: it never attaches to the other process. */
static void a_swap_racing_the_wait_is_never_attached(void **state)
{
	char out[1100];

	(void)state;
	need_root_and_setpriv();
	snprintf(out, sizeof(out), "%s", in_scratch("race.ctf"));
	for (int i = 0; i < 8; i++) {
		run_swap((const char *[16]){ "lowkey", "trace", "--pid", "PID", "-e", "app:*",
					     "--duration", "0.5", "-o", out, NULL },
			 false, i * 97);
		no_output(out);
		refused();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(trace_refuses_a_reused_pid),
		cmocka_unit_test(list_refuses_a_reused_pid),
		cmocka_unit_test(enable_refuses_a_reused_pid),
		cmocka_unit_test(snapshot_refuses_a_reused_pid),
		cmocka_unit_test(a_swap_racing_the_wait_is_never_attached),
	};

	setvbuf(stdout, NULL, _IONBF, 0);
	return cmocka_run_group_tests(tests, setup, teardown);
}
