// SPDX-License-Identifier: MIT
/*
 * A running program for tracers that attach late (test_probe_usdt.c): it does what its stdin
 * asks, one line at a time, and answers each on stdout, so the test knows what it did and when.
 * usage: lkt_usdt_late [fork]
 *   fork: fork first; the child serves (its first answer is "pid P"), the parent waits for it.
 * Requests:
 *   emit N    call lkt_late:query(i, -2 * i, "users") for i = 0 .. N-1; "ok"
 *   idle      call lkt_late:idle() once (a second site, which no test attaches to); "ok"
 *   on T      wait until the site is on (a tracer's semaphore seen by the watcher); "on NS", NS
 *             from T (CLOCK_MONOTONIC, ns: when the tracer attached) to that moment; "timeout"
 *             after a minute
 *   off       wait until the site is off again; "off" or "timeout"
 *   watchers  "watchers N": the threads of this process named as the watcher is
 *   quit      exit 0
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* clock_gettime, nanosleep: also in the compiler matrix's strict C11 cells */
#endif
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

__attribute__((noinline)) static void query(long id, long twice, const char *table)
{
	LK_PROBE(lkt_late, query, id, twice, table);
}

__attribute__((noinline)) static void idle(void)
{
	LK_PROBE(lkt_late, idle);
}

static int query_on(const struct lk_probe_info *info, void *arg)
{
	if (strcmp(info->provider, "lkt_late") == 0 && strcmp(info->event, "query") == 0)
		*(int *)arg = info->enabled;
	return 0;
}

static bool is_on(void)
{
	int on = 0;

	lk_probe_list(query_on, &on);
	return on;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/* Polls every 100 us until the site is as wanted: true, or false after a minute. */
static bool wait_until(bool on)
{
	struct timespec tick = { 0, 100 * 1000 };
	int64_t give_up = now_ns() + INT64_C(60000000000);

	while (is_on() != on) {
		if (now_ns() > give_up)
			return false;
		nanosleep(&tick, NULL);
	}
	return true;
}

static int count_watchers(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && strcmp(comm, "lowkey-usdt\n") == 0)
			n++;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

static void serve(void)
{
	char line[128];
	long long v;

	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "emit %lld", &v) == 1) {
			for (long i = 0; i < v; i++)
				query(i, -2 * i, "users");
			printf("ok\n");
		} else if (sscanf(line, "on %lld", &v) == 1) {
			if (wait_until(true))
				printf("on %lld\n", (long long)(now_ns() - v));
			else
				printf("timeout\n");
		} else if (strcmp(line, "off\n") == 0) {
			printf("%s\n", wait_until(false) ? "off" : "timeout");
		} else if (strcmp(line, "idle\n") == 0) {
			idle();
			printf("ok\n");
		} else if (strcmp(line, "watchers\n") == 0) {
			printf("watchers %d\n", count_watchers());
		} else if (strcmp(line, "quit\n") == 0) {
			return;
		} else {
			printf("unknown request %s", line);
		}
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	int status;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "fork") == 0) {
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid > 0) {
			if (waitpid(pid, &status, 0) != pid)
				return 1;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
		}
	}
	printf("pid %d\n", (int)getpid());
	serve();
	return 0;
}
