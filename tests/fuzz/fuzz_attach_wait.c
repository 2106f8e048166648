// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness for the wait of a --pid client (src/control/control_client.c): while
 * lk__ctl_connect waits for a young process A with no control socket, an input script churns pid
 * V, A's: kills its holder, gives V to a process with a control socket (root's or nobody's), to one
 * without, to processes that exit at once, and stops and continues the client meanwhile.
 *
 * Each input runs in a pid namespace of its own (its /proc/sys/kernel/ns_last_pid chooses the
 * next pid). A is the namespace's first process, then the client; once the client sleeps in its
 * wait, the script runs, one operation per byte (its low 3 bits; arg: the other 5):
 *   0 yield arg * 8 times           1 kill V's holder and reap it
 *   2 a process with a socket as V (nobody's if arg is odd; none if V is held)
 *   3 a process without one as V    4 (arg >> 1) + 1 processes that exit at once, from V if arg is odd
 *   5 stop the client               6 continue it            7 yield once
 * At the end the client is continued and its answer awaited, A killed first if it still holds V;
 * then whatever holds V is.
 *
 * Property checked, besides what the sanitizers check: A never opens a socket, so the client
 * never connects (whatever holds V when it looks); it ends with -ESRCH (A exited) or -ENOENT (A
 * grew too old to be waited for).
 *
 * Needs root (namespaces, setresuid): elsewhere an input checks nothing.
 *   fuzz-attach-wait -max_len=64 SCRATCH tests/fuzz/corpus/attach-wait
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "control/control_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
bool lkt_attach_wait_possible(void);

#define NOBODY 65534
#define BROKEN 99 /* the namespace's exit code for a broken property */

/* The holders' socket directories (XDG_RUNTIME_DIR), private: pid V is the same in every namespace. */
static char scratch[] = "/tmp/lkt-fuzz-attach-XXXXXX";
static char root_dir[64], nobody_dir[64];

static void must(int condition)
{
	if (!condition)
		__builtin_trap();
}

/* Whether pid sleeps in a system call (the client's wait between two looks at A). */
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
	long nr = -1;
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

static bool next_pid_is(pid_t want)
{
	char text[16];
	int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	int n = snprintf(text, sizeof(text), "%d", (int)want - 1);
	bool ok = fd >= 0 && write(fd, text, (size_t)n) == n;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* A process that holds its pid until killed; with a control socket if asked (as nobody if odd). */
static pid_t holder(bool with_socket, bool as_nobody)
{
	int ready[2];
	pid_t pid;
	char c;

	if (pipe(ready) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(ready[0]);
		setenv("XDG_RUNTIME_DIR", as_nobody ? nobody_dir : root_dir, 1);
		if (with_socket && as_nobody) {
			if (setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
			    setresuid(NOBODY, NOBODY, NOBODY) != 0)
				_exit(1);
		}
		if (with_socket)
			lk_control_open(); /* or not: then it has no socket either */
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	if (pid > 0 && read(ready[0], &c, 1) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(ready[0]);
	return pid;
}

static void end(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = 0;
}

/* The client: lk__ctl_connect to v, its result on fd. */
static pid_t client(pid_t v, int fd)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct lk__ctl_client c;
		char err[512];
		int rc = lk__ctl_connect(&c, v, err, sizeof(err));

		if (rc == 0)
			lk__ctl_disconnect(&c);
		_exit(write(fd, &rc, sizeof(rc)) == sizeof(rc) ? 0 : 1);
	}
	return pid;
}

/* The namespace as the script left it. */
struct world {
	pid_t v;    /* A's pid */
	pid_t held; /* V's holder (0: none), which is A until V is first freed */
	bool a_holds;
	pid_t client;
	bool stopped;  /* the client: stopped by the script */
	bool answered; /* the client: exited (reaped), its answer in the pipe */
};

static void stop_client(struct world *w)
{
	int status;

	if (w->stopped || w->answered)
		return;
	kill(w->client, SIGSTOP);
	if (waitpid(w->client, &status, WUNTRACED) != w->client || !WIFSTOPPED(status))
		w->answered = true; /* it had exited: reaped now */
	else
		w->stopped = true;
}

static void continue_client(struct world *w)
{
	if (w->stopped)
		kill(w->client, SIGCONT);
	w->stopped = false;
}

static void run(struct world *w, uint8_t op)
{
	unsigned int arg = op >> 3;

	switch (op & 7) {
	case 0:
		for (unsigned int i = 0; i < arg * 8; i++)
			sched_yield();
		break;
	case 1:
		end(&w->held);
		w->a_holds = false;
		break;
	case 2:
	case 3:
		if (!w->held && next_pid_is(w->v))
			w->held = holder((op & 7) == 2, arg & 1);
		if (w->held < 0)
			w->held = 0; /* it could not be started */
		break;
	case 4:
		if (!w->held && (arg & 1))
			next_pid_is(w->v);
		for (unsigned int i = 0; i <= arg >> 1; i++) {
			pid_t p = fork();

			if (p == 0)
				_exit(0);
			if (p > 0)
				waitpid(p, NULL, 0);
		}
		break;
	case 5:
		stop_client(w);
		break;
	case 6:
		continue_client(w);
		break;
	default:
		sched_yield();
	}
}

/* pid 1 of the namespace: A, the client, the script. Exits 0, or BROKEN. */
static int in_namespace(const uint8_t *data, size_t size)
{
	struct world w = { .a_holds = true };
	int result[2], rc = 1;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0 ||
	    pipe(result) != 0)
		return 0;
	w.held = w.v = holder(false, false);
	w.client = client(w.v, result[1]);
	close(result[1]);
	if (w.v <= 0 || w.client <= 0)
		return 0;
	while (!sleeping(w.client)) {
		if (waitpid(w.client, NULL, WNOHANG) == w.client)
			return 0; /* it gave up before it was seen waiting: a slow machine, nothing shown */
		sched_yield();
	}
	for (size_t i = 0; i < size; i++)
		run(&w, data[i]);
	if (w.a_holds)
		end(&w.held); /* else the client would wait until A is 1 s old */
	continue_client(&w);
	if (read(result[0], &rc, sizeof(rc)) != sizeof(rc))
		return BROKEN;
	if (!w.answered)
		waitpid(w.client, NULL, 0);
	end(&w.held); /* whatever has V now lives until the client has answered */
	if (rc == 0)
		fprintf(stderr, "fuzz-attach-wait: the client connected to pid %d's next holder\n",
			(int)w.v);
	return rc == -ESRCH || rc == -ENOENT ? 0 : BROKEN;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void remove_scratch(void)
{
	nftw(scratch, remove_one, 8, FTW_DEPTH | FTW_PHYS);
}

static bool make_scratch(void)
{
	if (!mkdtemp(scratch))
		return false;
	atexit(remove_scratch);
	snprintf(root_dir, sizeof(root_dir), "%s/root", scratch);
	snprintf(nobody_dir, sizeof(nobody_dir), "%s/nobody", scratch);
	return chmod(scratch, 0755) == 0 && mkdir(root_dir, 0700) == 0 &&
	       mkdir(nobody_dir, 0700) == 0 && chown(nobody_dir, NOBODY, NOBODY) == 0;
}

bool lkt_attach_wait_possible(void)
{
	pid_t pid;
	int status;

	if (geteuid() != 0)
		return false;
	pid = fork();
	if (pid == 0)
		_exit(unshare(CLONE_NEWPID | CLONE_NEWNS) == 0 &&
				      access("/proc/sys/kernel/ns_last_pid", W_OK) == 0 ?
			      0 :
			      1);
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int possible = -1;
	int status = 0;
	pid_t outer;

	if (possible < 0)
		possible = lkt_attach_wait_possible() && make_scratch();
	if (!possible || size > 64)
		return 0;
	outer = fork();
	if (outer == 0) {
		pid_t init;

		if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0)
			_exit(0);
		init = fork();
		if (init == 0)
			_exit(in_namespace(data, size));
		if (init < 0 || waitpid(init, &status, 0) != init)
			_exit(0);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : BROKEN);
	}
	must(outer > 0 && waitpid(outer, &status, 0) == outer);
	must(WIFEXITED(status) && WEXITSTATUS(status) != BROKEN);
	return 0;
}
