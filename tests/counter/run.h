/* SPDX-License-Identifier: MIT */
/* Run a program and capture its output, for the tests of lowkey stat. */
#ifndef LK_TEST_COUNTER_RUN_H
#define LK_TEST_COUNTER_RUN_H

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct run_result {
	int status;	   /* exit status, or 128 + signal */
	char out[1 << 16]; /* stdout */
	char err[1 << 16]; /* stderr */
};

/* Something to do in the child before exec (drop privileges, install a filter). */
typedef int (*run_prepare_fn)(void);

/* Read what fd has into buf; false at end of file (or when buf is full). */
static inline bool drain(int fd, char *buf, size_t *used, size_t size)
{
	ssize_t n = size - 1 > *used ? read(fd, buf + *used, size - 1 - *used) : 0;

	if (n > 0)
		*used += (size_t)n;
	buf[*used] = '\0';
	return n > 0;
}

/* A program started by run_start(), its output not read yet. */
struct run_child {
	pid_t pid;
	int out; /* read ends of its stdout and stderr */
	int err;
};

/* Start argv (argv[0] a path or a name on PATH). Returns 0, or -1 if it could not be started. */
static inline int run_start(char *const argv[], run_prepare_fn prepare, struct run_child *c)
{
	int out[2], err[2];

	if (pipe2(out, O_CLOEXEC))
		return -1;
	if (pipe2(err, O_CLOEXEC)) {
		close(out[0]);
		close(out[1]);
		return -1;
	}
	c->pid = fork();
	if (c->pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		if (prepare && prepare())
			_exit(200);
		execvp(argv[0], argv);
		_exit(201);
	}
	close(out[1]);
	close(err[1]);
	if (c->pid < 0) {
		close(out[0]);
		close(err[0]);
		return -1;
	}
	c->out = out[0];
	c->err = err[0];
	return 0;
}

/* Read the rest of c's output into r until it closes both, then reap it. Returns 0, or -1. */
static inline int run_finish(struct run_child *c, struct run_result *r)
{
	int fds[2] = { c->out, c->err }, status;
	char *bufs[2] = { r->out, r->err };
	size_t nout = 0, nerr = 0, *used[2] = { &nout, &nerr };

	memset(r, 0, sizeof(*r));
	while (fds[0] >= 0 || fds[1] >= 0) {
		struct pollfd p[2] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 } };

		if (poll(p, 2, -1) < 0)
			break;
		for (int k = 0; k < 2; k++)
			if (p[k].revents && !drain(fds[k], bufs[k], used[k], sizeof(r->out)))
				fds[k] = -1;
	}
	close(c->out);
	close(c->err);
	if (waitpid(c->pid, &status, 0) != c->pid)
		return -1;
	r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return 0;
}

/* Run argv to its end. Returns 0, or -1 if it could not be run. */
static inline int run_program(char *const argv[], run_prepare_fn prepare, struct run_result *r)
{
	struct run_child c;

	memset(r, 0, sizeof(*r));
	if (run_start(argv, prepare, &c))
		return -1;
	return run_finish(&c, r);
}

/* The value of the CSV line (perf stat -x,) whose third field is event; -1 if none. */
static inline double csv_value(const char *csv, const char *event)
{
	for (const char *line = csv; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *f2 = strchr(line, ','), *f3 = f2 ? strchr(f2 + 1, ',') : NULL;
		size_t len = strlen(event);

		if (f3 && strncmp(f3 + 1, event, len) == 0 && f3[1 + len] == ',')
			return strtod(line, NULL);
	}
	return -1;
}

#endif
