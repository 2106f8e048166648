// SPDX-License-Identifier: MIT
/*
 * A program traced from the environment into JSON that treats its status socket (the number in
 * LOWKEY_TRACE_STATUS_FD) as its own, for test_trace_progress.c. Each mode emits N events, then:
 *   emit N            exits
 *   close N           closes the status socket's number, then exits
 *   reuse N FD        dup2s its descriptor FD (another SOCK_SEQPACKET socket) over that number
 *   fork N OUT        a forked child traces N events of its own into OUT (JSON), stops, exits;
 *                     then this process exits
 *   peer-gone N       blocks every signal but SIGPIPE, waits until the socket's other end is closed,
 *                     then exits (a SIGPIPE would kill it: the exit status says)
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/probe.h>

static void emit(long n)
{
	for (long i = 0; i < n; i++)
		LK_PROBE(progress, tick, i, (unsigned long)(3 * i));
}

static int status_fd(void)
{
	const char *v = getenv("LOWKEY_TRACE_STATUS_FD");

	return v ? atoi(v) : -1;
}

static int traced_child(long n, const char *out)
{
	struct lk_trace_config c = { .path = out, .format = LK_TRACE_JSON };
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (lk_probe_enable("*") < 0 || lk_trace_start(&c) != 0)
			_exit(3);
		emit(n);
		exit(lk_trace_stop() == 0 ?
			     0 :
			     4); /* exit(): the library's exit handlers run here too */
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static void wait_for_hangup(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	sigset_t all;

	sigfillset(&all);
	sigdelset(&all, SIGPIPE);
	sigprocmask(SIG_BLOCK, &all, NULL);
	while (!(p.revents & (POLLHUP | POLLRDHUP)))
		if (poll(&p, 1, -1) < 0)
			break;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 0;

	if (argc < 3)
		return 2;
	emit(n);
	if (strcmp(argv[1], "close") == 0)
		close(status_fd());
	else if (strcmp(argv[1], "reuse") == 0 && argc > 3)
		dup2(atoi(argv[3]), status_fd());
	else if (strcmp(argv[1], "fork") == 0 && argc > 3)
		return traced_child(n, argv[3]);
	else if (strcmp(argv[1], "peer-gone") == 0)
		wait_for_hangup(status_fd());
	else if (strcmp(argv[1], "emit") != 0)
		return 2;
	return 0;
}
