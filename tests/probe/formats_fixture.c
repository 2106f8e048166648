// SPDX-License-Identifier: MIT
/*
 * A trace whose every event is known, for check_pftrace.py: `lkt_formats_fixture OUT FORMAT`
 * records it (with CPU time) into OUT in FORMAT (ctf, json or perfetto) and prints its pid;
 * `lkt_formats_fixture - none` records the same without starting a trace (for `lowkey trace --
 * CMD`, whose environment starts it); `lkt_formats_fixture - serve` prints "ready PID" and records
 * a round of fx:request, fx:query and fx:row (i counting from 0) every millisecond in its thread
 * "fx-serve" until SIGTERM (for `lowkey trace --pid`, with LOWKEY_CONTROL=1);
 * `lkt_formats_fixture OUT sched` records a CTF trace with context switches (LK_TRACE_SCHED, see
 * sleeper() for what it holds) and prints its pid and the thread fx-sleeper's tid, or exits 77
 * where context switches cannot be recorded here; `OUT sched-perfetto` the same as Perfetto;
 * `OUT dlopen` records Perfetto while it loads the plugin $LKT_PLUGIN (tests/probe/plugin.c) and
 * has it fire plug:fired 10 times 100 (see with_plugin()).
 *
 * Two threads, "worker-1" and "worker-2", each run ROUNDS rounds of: a span fx:request around a
 * counter value fx:depth = round and a span fx:query around an event fx:row (i = round, twice =
 * 2 * round, half = round / 2.0, label = "row"). The main thread, "fx-main", records fx:bad_utf8
 * with the bytes "\xff\xfe ok" and the counter fx:ratio = NaN, then 1.5.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#define ROUNDS 50

static volatile sig_atomic_t stop;

static void one_round(long round)
{
	LK_SPAN(fx, request);
	LK_COUNTER(fx, depth, round);
	{
		LK_SPAN(fx, query);
		long i = round;
		unsigned long twice = 2 * (unsigned long)round;
		double half = (double)round / 2.0;
		const char *label = "row";

		LK_PROBE(fx, row, i, twice, half, label);
	}
}

static void *worker(void *arg)
{
	pthread_setname_np(pthread_self(), arg);
	for (long round = 0; round < ROUNDS; round++)
		one_round(round);
	return NULL;
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int serve(void)
{
	struct timespec ms = { 0, 1000000 };

	pthread_setname_np(pthread_self(), "fx-serve");
	signal(SIGTERM, on_term);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (long round = 0; !stop; round++) {
		one_round(round);
		nanosleep(&ms, NULL);
	}
	return 0;
}

/*
 * fx-sleeper, for the off-CPU slices' edge cases: it is blocked on a pipe when the trace starts
 * (so its first switch is a switch in), then takes ROUNDS spans fx:nap, each around a 2 ms sleep
 * (a "blocked" slice inside each), says so, and blocks again on its pipe until after the trace
 * stopped (its last switch is a switch out with no switch in).
 */
static int wake[2], done[2];
static volatile int sleeper_tid;

static void *sleeper(void *arg)
{
	struct timespec ms = { 0, 2000000 };
	char c;

	(void)arg;
	pthread_setname_np(pthread_self(), "fx-sleeper");
	sleeper_tid = (int)syscall(SYS_gettid);
	while (read(wake[0], &c, 1) < 0 && errno == EINTR)
		;
	for (int round = 0; round < ROUNDS; round++) {
		LK_SPAN(fx, nap);
		nanosleep(&ms, NULL);
	}
	if (write(done[1], "d", 1) != 1)
		return NULL;
	while (read(wake[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static int record_sched(const char *out, enum lk_trace_format format)
{
	struct lk_trace_config c = { .path = out,
				     .format = format,
				     .flags = LK_TRACE_SCHED | LK_TRACE_CPUTIME,
				     .flush_ms = 5 };
	struct timespec settle = { 0, 50000000 };
	pthread_t t;
	char d;
	int rc;

	if (pipe(wake) || pipe(done) || pthread_create(&t, NULL, sleeper, NULL))
		return 1;
	nanosleep(&settle, NULL); /* fx-sleeper is in its read() by then */
	lk_probe_enable("fx");
	rc = lk_trace_start(&c);
	if (rc == -EPERM || rc == -EACCES || rc == -ENOENT || rc == -ENOSYS || rc == -ENODEV ||
	    rc == -EOPNOTSUPP) {
		fprintf(stderr, "context switches cannot be recorded here: %s\n", lk_last_error());
		return 77;
	}
	if (rc != 0) {
		fprintf(stderr, "cannot trace: %s\n", lk_last_error());
		return 1;
	}
	if (write(wake[1], "w", 1) != 1 || read(done[0], &d, 1) != 1)
		return 1;
	nanosleep(&settle, NULL); /* fx-sleeper is in its read() again */
	if (lk_trace_stop() != 0) {
		fprintf(stderr, "trace failed: %s\n", lk_last_error());
		return 1;
	}
	if (write(wake[1], "w", 1) != 1 || pthread_join(t, NULL))
		return 1;
	printf("%d %d\n", (int)getpid(), sleeper_tid);
	return 0;
}

static void ticks(long ms)
{
	struct timespec one = { 0, 1000000 };

	for (long i = 0; i < ms; i++) {
		LK_PROBE(fx, tick, i);
		nanosleep(&one, NULL);
	}
}

/*
 * A site registered while a Perfetto trace is written as it records: 100 ms of fx:tick, then the
 * plugin loaded and its plug:fired recorded 10 times 100 with 10 ms of fx:tick after each.
 */
static int with_plugin(const char *out)
{
	struct lk_trace_config c = { .path = out, .format = LK_TRACE_PERFETTO, .flush_ms = 10 };
	const char *path = getenv("LKT_PLUGIN");
	void (*fire)(long);
	void *plugin;

	if (!path || lk_probe_enable("fx") < 0 || lk_probe_enable("plug") < 0 ||
	    lk_trace_start(&c) != 0) {
		fprintf(stderr, "cannot trace with the plugin %s: %s\n",
			path ? path : "(no LKT_PLUGIN)", lk_last_error());
		return 1;
	}
	ticks(100);
	plugin = dlopen(path, RTLD_NOW);
	fire = plugin ? (void (*)(long))dlsym(plugin, "plugin_fire") : NULL;
	if (!fire) {
		fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
		return 1;
	}
	for (int k = 0; k < 10; k++) {
		fire(100);
		ticks(10);
	}
	if (lk_trace_stop() != 0) {
		fprintf(stderr, "trace failed: %s\n", lk_last_error());
		return 1;
	}
	printf("%d\n", (int)getpid());
	return 0;
}

/* The known trace's events; the trace is started by the caller or from the environment. */
static void record(void)
{
	const char *bad = "\xff\xfe ok";
	pthread_t t[2];
	double ratio = NAN;

	LK_PROBE(fx, bad_utf8, bad);
	LK_COUNTER(fx, ratio, ratio);
	ratio = 1.5;
	LK_COUNTER(fx, ratio, ratio);
	pthread_create(&t[0], NULL, worker, "worker-1");
	pthread_join(t[0], NULL); /* one after the other: each thread's events in a known order */
	pthread_create(&t[1], NULL, worker, "worker-2");
	pthread_join(t[1], NULL);
}

int main(int argc, char **argv)
{
	struct lk_trace_config c = { .flags = LK_TRACE_CPUTIME, .flush_ms = 5 };

	if (argc != 3) {
		fprintf(stderr,
			"usage: %s OUT ctf|json|perfetto|sched|sched-perfetto|dlopen, or - none, or - serve\n",
			argv[0]);
		return 2;
	}
	if (strcmp(argv[2], "serve") == 0)
		return serve();
	if (strcmp(argv[2], "dlopen") == 0)
		return with_plugin(argv[1]);
	if (strcmp(argv[2], "sched") == 0 || strcmp(argv[2], "sched-perfetto") == 0)
		return record_sched(argv[1], argv[2][5] ? LK_TRACE_PERFETTO : LK_TRACE_CTF);
	pthread_setname_np(pthread_self(), "fx-main");
	if (strcmp(argv[2], "none") == 0) {
		record();
		return 0;
	}
	if (strcmp(argv[2], "ctf") && strcmp(argv[2], "json") && strcmp(argv[2], "perfetto")) {
		fprintf(stderr, "%s: unknown format %s\n", argv[0], argv[2]);
		return 2;
	}
	c.path = argv[1];
	c.format = !strcmp(argv[2], "ctf")  ? LK_TRACE_CTF :
		   !strcmp(argv[2], "json") ? LK_TRACE_JSON :
					      LK_TRACE_PERFETTO;
	if (lk_probe_enable("fx") <= 0 || lk_trace_start(&c) != 0) {
		fprintf(stderr, "cannot trace: %s\n", lk_last_error());
		return 1;
	}
	record();
	if (lk_trace_stop() != 0) {
		fprintf(stderr, "trace failed: %s\n", lk_last_error());
		return 1;
	}
	printf("%d\n", (int)getpid());
	return 0;
}
