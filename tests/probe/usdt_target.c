// SPDX-License-Identifier: MIT
/*
 * A program for external tracers (test_probe_usdt_tools.sh): calls a site N times, 1 ms apart.
 * usage: lkt_usdt_target N [api]
 *   api: the program turns its sites on itself (lk_probe_usdt_enable), so a tracer attached
 *        from the start sees every call; without it, a tracer's semaphore must turn the site on
 *        (run it with LOWKEY_USDT_WATCH=MS).
 * Each call is lkt_usdt:query(i, -2 * i, "users") inside a scoped span lkt_usdt:request (LK_SPAN),
 * and lkt_usdt:done(N) ends the run.
 */
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

int main(int argc, char **argv)
{
	struct timespec ms = { 0, 1000 * 1000 };
	long n = argc > 1 ? atol(argv[1]) : 100;

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
