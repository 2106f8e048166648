/* SPDX-License-Identifier: MIT */
/*
 * The agent's tests' children (the traced program, the agent, Prometheus, a collector) and the
 * agent's /metrics text: started with pipes to talk to them, waited for with a bound.
 */
#ifndef LKT_AGENT_CHILD_H
#define LKT_AGENT_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#define WAIT_S 120 /* a bound on every wait, not a measurement */

struct child {
	pid_t pid;
	int in;	   /* its standard input */
	FILE *out; /* its standard output (the program) or standard error (the agent) */
};

/* CLOCK_MONOTONIC in seconds. */
double now_s(void);
void sleep_ms(long ms);

/* Start argv with its stdin on a pipe, and its stdout (or stderr) on another; LOWKEY_CONTROL=1
 * in its environment if control, else none. */
struct child spawn(char *const argv[], bool read_stderr, bool control);

/* Wait up to WAIT_S for a line from c beginning with prefix; into line. Other lines are shown. */
bool read_line(struct child *c, const char *prefix, char *line, size_t len);

/* Write the formatted text to c's standard input. */
void tell(struct child *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether c ended within WAIT_S (reaped: its status into *status). */
bool ended(struct child *c, int *status);

/* Send c sig (after SIGCONT), SIGKILL if it has not ended within WAIT_S; close its pipes. */
void stop_child(struct child *c, int sig);

/* The output of a shell command, into a malloc()ed string (NULL if it failed). */
char *capture(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The value of the sample whose name and labels are series, in /metrics' text; NAN if none. */
double sample(const char *text, const char *series);

#endif
