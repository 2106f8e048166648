// SPDX-License-Identifier: MIT
/*
 * The program test_agent follows: it records what it is told on its standard input, one command a
 * line, and answers "done" on its standard output once the events are recorded.
 *   go N     N times: a span agt:work around an event agt:tick, then the counter agt:level = i
 *   ticks N  N events agt:tick, nothing else
 *   bench N  the same, timed by the thread's CPU time (the machine may be busy): prints
 *            "ns X", X per event, before its "done"
 *   lib N PATH  dlopen the library PATH (tests/control's lkt_ctl_lib: sites loaded now) and
 *            call its lkt_lib_work N times: N events lib:work
 *   quit     exit(0)
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <lowkey/probe.h>

static void go(long n)
{
	for (long i = 0; i < n; i++) {
		{
			LK_SPAN(agt, work);
			LK_PROBE(agt, tick, i);
		}
		LK_COUNTER(agt, level, (int64_t)i);
	}
}

static void ticks(long n)
{
	for (long i = 0; i < n; i++)
		LK_PROBE(agt, tick, i);
}

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void lib(long n, const char *path)
{
	void *h = dlopen(path, RTLD_NOW);
	void (*work)(int) = h ? (void (*)(int))dlsym(h, "lkt_lib_work") : NULL;

	if (!work) {
		printf("dlopen %s: %s\n", path, dlerror());
		return;
	}
	for (long i = 0; i < n; i++)
		work((int)i);
}

int main(void)
{
	char line[4200], path[4096];
	long n;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "go %ld", &n) == 1)
			go(n);
		else if (sscanf(line, "ticks %ld", &n) == 1)
			ticks(n);
		else if (sscanf(line, "bench %ld", &n) == 1 && n > 0) {
			double t0 = cpu_ns();

			ticks(n);
			printf("ns %.3f\n", (cpu_ns() - t0) / (double)n);
		} else if (sscanf(line, "lib %ld %4095s", &n, path) == 2)
			lib(n, path);
		else if (strncmp(line, "quit", 4) == 0)
			break;
		printf("done\n");
	}
	return 0;
}
