// SPDX-License-Identifier: MIT
/*
 * Preloaded into the lowkey CLI by the tests of the signals that come while no program runs: it
 * makes them come at a chosen step, every time. It acts in a process named lowkey only (the
 * command lowkey runs inherits LD_PRELOAD), as the environment asks:
 *   LKT_SHIM_RAISE=SIG:N	raise SIG in lowkey at its Nth pipe2() call, before the call (lowkey
 *				stat makes two pipes a run before it starts the command; races and
 *				locks make one, after their directory)
 *   LKT_SHIM_END_HELD=SIG	when lowkey stat lets its held child go (the one-byte "g" write), send
 *				SIG to that child first and wait until it has ended
 *   LKT_SHIM_RAISE_REAPED=SIG	raise SIG in lowkey as soon as wait4() has reaped a child
 *   LKT_SHIM_RAISE_SENT=SIG:N	raise SIG in lowkey once its Nth sendmsg() has returned (lowkey
 *				trace --pid sends one a rule, then the start, then the stop)
 *   LKT_SHIM_DIRS=FILE		append each directory lowkey makes with mkdtemp() to FILE, a line each
 *   LKT_SHIM_RAISE_MADE_DIR=SIG	raise SIG in lowkey once its first mkdtemp() has made a directory
 *				(lowkey races --pid: its plan's)
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t counted_pid; /* the last process lowkey opened a counter on */
static int pipes_made;
static int messages_sent;

static int in_lowkey(void)
{
	return strcmp(program_invocation_short_name, "lowkey") == 0;
}

static void *next(const char *name)
{
	void *fn = dlsym(RTLD_NEXT, name);

	if (!fn)
		abort();
	return fn;
}

long syscall(long nr, ...)
{
	long (*real)(long, ...) = next("syscall");
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (nr == SYS_perf_event_open && a[1] > 0 && (pid_t)a[1] != getpid() && in_lowkey())
		counted_pid = (pid_t)a[1];
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int pipe2(int fds[2], int flags)
{
	int (*real)(int[2], int) = next("pipe2");
	const char *want = getenv("LKT_SHIM_RAISE");
	int sig, at;

	if (want && in_lowkey() && sscanf(want, "%d:%d", &sig, &at) == 2 && ++pipes_made == at)
		raise(sig);
	return real(fds, flags);
}

ssize_t write(int fd, const void *buf, size_t len)
{
	ssize_t (*real)(int, const void *, size_t) = next("write");
	const char *sig = getenv("LKT_SHIM_END_HELD");

	if (sig && len == 1 && *(const char *)buf == 'g' && counted_pid > 0 && in_lowkey()) {
		siginfo_t info;

		kill(counted_pid, atoi(sig));
		/* ended, its pipe's read end closed; WNOWAIT leaves it for lowkey to reap */
		waitid(P_PID, (id_t)counted_pid, &info, WEXITED | WNOWAIT);
		counted_pid = 0;
	}
	return real(fd, buf, len);
}

pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
	pid_t (*real)(pid_t, int *, int, struct rusage *) = next("wait4");
	const char *sig = getenv("LKT_SHIM_RAISE_REAPED");
	pid_t got = real(pid, status, options, ru);

	if (sig && got > 0 && in_lowkey())
		raise(atoi(sig));
	return got;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t (*real)(int, const struct msghdr *, int) = next("sendmsg");
	const char *want = getenv("LKT_SHIM_RAISE_SENT");
	ssize_t n = real(fd, msg, flags);
	int sig, at;

	if (want && in_lowkey() && sscanf(want, "%d:%d", &sig, &at) == 2 && ++messages_sent == at)
		raise(sig);
	return n;
}

char *mkdtemp(char *tmpl)
{
	char *(*real)(char *) = next("mkdtemp");
	const char *log = getenv("LKT_SHIM_DIRS"), *sig = getenv("LKT_SHIM_RAISE_MADE_DIR");
	char *dir = real(tmpl);
	static bool raised;

	if (dir && log && in_lowkey()) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		if (fd >= 0) {
			dprintf(fd, "%s\n", dir);
			close(fd);
		}
	}
	if (dir && sig && !raised && in_lowkey()) {
		raised = true;
		raise(atoi(sig));
	}
	return dir;
}
