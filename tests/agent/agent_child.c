// SPDX-License-Identifier: MIT
#include "agent_child.h"

#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Start argv with its stdin on a pipe, and its stdout (or stderr) on another. */
struct child spawn(char *const argv[], bool read_stderr, bool control)
{
	int in[2], out[2];
	struct child c;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	c.pid = fork();
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], read_stderr ? 2 : 1);
		if (control)
			setenv("LOWKEY_CONTROL", "1", 1);
		else
			unsetenv("LOWKEY_CONTROL");
		execv(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c.in = in[1];
	c.out = fdopen(out[0], "r");
	assert_non_null(c.out);
	/* read_line polls the pipe: no line may wait in a buffer of ours, unseen by poll */
	setvbuf(c.out, NULL, _IONBF, 0);
	return c;
}

/* Wait up to WAIT_S for a line from c beginning with prefix; into line. */
bool read_line(struct child *c, const char *prefix, char *line, size_t len)
{
	double end = now_s() + WAIT_S;

	while (now_s() < end) {
		struct pollfd p = { .fd = fileno(c->out), .events = POLLIN };

		if (poll(&p, 1, 1000) <= 0)
			continue;
		if (!fgets(line, (int)len, c->out))
			return false;
		if (strncmp(line, prefix, strlen(prefix)) == 0)
			return true;
		fprintf(stderr, "%s", line); /* what else it says is shown */
	}
	return false;
}

void tell(struct child *c, const char *fmt, ...)
{
	char cmd[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(write(c->in, cmd, (size_t)n), n);
}

bool ended(struct child *c, int *status)
{
	double end = now_s() + WAIT_S;

	while (now_s() < end) {
		if (waitpid(c->pid, status, WNOHANG) == c->pid)
			return true;
		sleep_ms(20);
	}
	return false;
}

void stop_child(struct child *c, int sig)
{
	int status;

	if (c->pid <= 0)
		return;
	kill(c->pid, SIGCONT);
	kill(c->pid, sig);
	if (!ended(c, &status)) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &status, 0);
	}
	close(c->in);
	fclose(c->out);
	c->pid = 0;
}

/* The output of a shell command, into a malloc()ed string (NULL if it failed). */
char *capture(const char *fmt, ...)
{
	char cmd[2048], *text = NULL;
	size_t len = 0;
	va_list ap;
	FILE *f, *m;
	int c;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	f = popen(cmd, "r");
	m = open_memstream(&text, &len);
	while (f && m && (c = fgetc(f)) != EOF)
		fputc(c, m);
	if (m)
		fclose(m);
	if (!f || pclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* The value of the sample whose name and labels are series, in text; NAN if none. */
double sample(const char *text, const char *series)
{
	size_t len = strlen(series);

	for (const char *at = text; at && (at = strstr(at, series)); at += len)
		if ((at == text || at[-1] == '\n') && at[len] == ' ')
			return strtod(at + len + 1, NULL);
	return NAN;
}
