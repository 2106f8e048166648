// SPDX-License-Identifier: MIT
/*
 * The program the control tests trace (linked with liblowkey.so, PIE; also built non-PIE and with
 * liblowkey.a). Modes:
 *   emit N [CODE]    app:tick(i, 2i) N times in a span app:loop, with app:depth counters, and
 *                    lib:work (in lkt_ctl_lib) every 10th; exits with CODE
 *   emit-nap N       emit N, then sleep 1 ms: the main thread is switched out (blocked) and back
 *                    in at least once, however busy or idle the machine (emit alone may never be)
 *   emit-stalled N   emit N while the parent (lowkey trace, the consumer) is stopped: a ring
 *                    smaller than N events drops some, however fast the consumer would drain it
 *   fork N           app:tick N times here, child:tick N times in a forked child
 *   exec-child N     app:tick N times here, child:tick N times in a child that execs this program
 *   child-emit N     child:tick N times
 *   serve [MS]       print "ready PID", then app:tick every millisecond until SIGTERM or MS ms
 *   signals          print "ignored:" and those of HUP, INT, QUIT it started ignoring, then
 *                    "ready PID"; then say "got SIGHUP" for each SIGHUP until SIGTERM
 *   on-input N       print "ready PID", then emit N for each line read on stdin, saying "emitted"
 *                    after each; exits at the end of stdin (events counted exactly from outside)
 *   die N            app:tick N times, wait for the consumer to write them, then SIGKILL itself
 *   list             print every registered site, one per line (to compare with `lowkey list`)
 * LKT_MARKER=FILE: create FILE first thing in main (proves main ran).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "target.h"

static volatile sig_atomic_t stop, hangups;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void on_hangup(int sig)
{
	(void)sig;
	hangups++;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void emit(long n)
{
	LK_SPAN(app, loop);
	for (long i = 0; i < n; i++) {
		LK_PROBE(app, tick, i, (unsigned long)(2 * i));
		LK_COUNTER(app, depth, (double)i / 2);
		if (i % 10 == 0)
			lkt_lib_work((int)i);
	}
}

static void child_emit(long n)
{
	for (long i = 0; i < n; i++)
		LK_PROBE(child, tick, i);
}

static int print_site(const struct lk_probe_info *s, void *arg)
{
	(void)arg;
	printf("%s|%s|%s|%d|%s|%u|%u|", s->object[0] ? s->object : "-", s->provider, s->event,
	       (int)s->kind, s->file, s->line, s->nargs);
	for (unsigned int a = 0; a < s->nargs; a++)
		printf("%s%s", a ? "," : "", lk_probe_type_name(s->arg_types[a]));
	printf("|%s\n", s->arg_names);
	return 0;
}

static int serve(long ms)
{
	struct sigaction sa = { .sa_handler = on_term };
	long i = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (!stop && (ms <= 0 || i < ms)) {
		LK_PROBE(app, tick, i, (unsigned long)(2 * i));
		if (i % 10 == 0)
			lkt_lib_work((int)i);
		i++;
		sleep_ms(1);
	}
	return 0;
}

static int report_signals(void)
{
	static const struct {
		int sig;
		const char *name;
	} watched[] = { { SIGHUP, "HUP" }, { SIGINT, "INT" }, { SIGQUIT, "QUIT" } };
	struct sigaction sa = { .sa_handler = on_term }, old;
	sig_atomic_t said = 0;

	printf("ignored:");
	for (size_t i = 0; i < sizeof(watched) / sizeof(watched[0]); i++)
		if (sigaction(watched[i].sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			printf(" %s", watched[i].name);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_hangup;
	sigaction(SIGHUP, &sa, NULL);
	printf("\nready %d\n", (int)getpid());
	fflush(stdout);
	while (!stop || said < hangups) {
		for (; said < hangups; said++)
			printf("got SIGHUP\n");
		fflush(stdout);
		sleep_ms(1);
	}
	return 0;
}

static int on_input(long n)
{
	char line[64];

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		emit(n);
		printf("emitted\n");
		fflush(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "emit";
	long n = argc > 2 ? atol(argv[2]) : 100;
	int status = 0;
	pid_t child;

	if (getenv("LKT_MARKER"))
		fclose(fopen(getenv("LKT_MARKER"), "w"));
	if (strcmp(mode, "emit") == 0) {
		emit(n);
		return argc > 3 ? atoi(argv[3]) : 0;
	}
	if (strcmp(mode, "emit-nap") == 0) {
		emit(n);
		sleep_ms(1);
		return 0;
	}
	if (strcmp(mode, "emit-stalled") == 0) {
		kill(getppid(), SIGSTOP);
		emit(n);
		kill(getppid(), SIGCONT);
		return 0;
	}
	if (strcmp(mode, "fork") == 0 || strcmp(mode, "exec-child") == 0) {
		child = fork();
		if (child == 0) {
			char count[32];

			if (strcmp(mode, "fork") == 0) {
				child_emit(n);
				exit(0); /* atexit handlers run here too: they must leave the trace alone */
			}
			snprintf(count, sizeof(count), "%ld", n);
			execl("/proc/self/exe", argv[0], "child-emit", count, (char *)NULL);
			_exit(127);
		}
		emit(n);
		waitpid(child, &status, 0);
		return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	}
	if (strcmp(mode, "child-emit") == 0) {
		child_emit(n);
		return 0;
	}
	if (strcmp(mode, "on-input") == 0)
		return on_input(n);
	if (strcmp(mode, "serve") == 0)
		return serve(argc > 2 ? n : 0);
	if (strcmp(mode, "signals") == 0)
		return report_signals();
	if (strcmp(mode, "die") == 0) {
		emit(n);
		sleep_ms(500); /* the consumer writes every 100 ms */
		kill(getpid(), SIGKILL);
	}
	if (strcmp(mode, "list") == 0)
		return lk_probe_list(print_site, NULL) < 0;
	fprintf(stderr, "unknown mode %s\n", mode);
	return 2;
}
