// SPDX-License-Identifier: MIT
/*
 * A program for external tracers (test_probe_usdt_tools.sh): calls a site N times, 1 ms apart.
 * usage: lkt_usdt_target N [api|until-term]
 *   api: the program turns its sites on itself (lk_probe_usdt_enable), so a tracer attached
 *        from the start sees every call; without it, a tracer's semaphore turns the site on (the
 *        library's watcher reads it).
 *   until-term: call the site until SIGTERM, then N times more (for a tracer attached to the
 *        running program: the test sends SIGTERM once the tracer is seen attached).
 * Each call is lkt_usdt:query(i, -2 * i, "users") inside a scoped span lkt_usdt:request (LK_SPAN),
 * and lkt_usdt:done(N) ends the run.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lowkey/lowkey.h>

__attribute__((noinline)) static void query(long id, long twice, const char *table)
{
	LK_SPAN(lkt_usdt, request);
	LK_PROBE(lkt_usdt, query, id, twice, table);
}

__attribute__((noinline)) static void done(long n)
{
	LK_PROBE(lkt_usdt, done, n);
}

static volatile sig_atomic_t terminated;

static void on_term(int sig)
{
	(void)sig;
	terminated = 1;
}

/* Calls the site until SIGTERM, then n times more; done(n) is the calls after SIGTERM. */
static int until_term(long n)
{
	struct timespec ms = { 0, 1000 * 1000 };
	long i = 0;

	signal(SIGTERM, on_term);
	for (; !terminated; i++) {
		query(i, -2 * i, "users");
		nanosleep(&ms, NULL);
	}
	for (long k = 0; k < n; k++, i++)
		query(i, -2 * i, "users");
	done(n);
	return 0;
}

int main(int argc, char **argv)
{
	struct timespec ms = { 0, 1000 * 1000 };
	long n = argc > 1 ? atol(argv[1]) : 100;

	if (argc > 2 && strcmp(argv[2], "until-term") == 0)
		return until_term(n);
	if (argc > 2 && strcmp(argv[2], "api") == 0 && lk_probe_usdt_enable("lkt_usdt") != 4) {
		fprintf(stderr, "lk_probe_usdt_enable: %s\n", lk_last_error());
		return 1;
	}
	for (long i = 0; i < n; i++) {
		query(i, -2 * i, "users");
		nanosleep(&ms, NULL);
	}
	done(n);
	return 0;
}
