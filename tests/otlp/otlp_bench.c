// SPDX-License-Identifier: MIT
/*
 * The OTLP exporter's rate to an OpenTelemetry Collector on the same machine, and its CPU time
 * per 100,000 spans: one thread hands N spans of four arguments to otlp_export() as fast as it
 * can (the queue holds them all: nothing is dropped), the exporter's senders send them, REQUESTS
 * at once (default: the exporter's); the rate is N over the time from the first span handed over
 * to the last one exported. Prints figures, asserts none; the median of RUNS runs, each against
 * a fresh receiver: a collector whose file exporter writes to /dev/null, or (sink) otlp_sink,
 * which discards what it reads: the exporter's own limit, with no collector on the same CPUs.
 *
 *   otlp_bench [SPANS [RUNS [none|gzip [collector|sink [REQUESTS]]]]]
 */
#include "collector.h"
#include "otlp.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct run {
	double rate, exporter_cpu_per_100k, producer_ns_per_span, collector_cpu_per_100k;
	double bytes_per_span;
};

static double now_s(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double process_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

struct options {
	unsigned int spans, requests;
	bool gzip, sink;
};

/* otlp_sink, its port read from its first line: c's pid and port (lkt_collector_stop stops it). */
static int sink_start(struct lkt_collector *c)
{
	int fds[2];
	FILE *f;

	if (pipe2(fds, O_CLOEXEC))
		return -1;
	c->pid = fork();
	if (c->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(fds[1], 1);
		execl(OTLP_SINK, OTLP_SINK, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (c->pid < 0 || !f || fscanf(f, "%d", &c->port) != 1) {
		fprintf(stderr, "otlp_bench: %s did not start\n", OTLP_SINK);
		if (f)
			fclose(f);
		lkt_collector_stop(c);
		return -1;
	}
	fclose(f); /* its last line, on SIGTERM, goes nowhere */
	return 0;
}

static int receiver_start(struct lkt_collector *c, const char *dir, bool sink)
{
	if (sink)
		return sink_start(c);
	if (lkt_collector_start(c, dir, "/dev/null") && lkt_collector_start(c, dir, "out.json"))
		return -1;
	return 0;
}

static int one_run(const char *dir, const struct options *o, struct run *out)
{
	unsigned int n = o->spans;
	struct lkt_collector c = { 0 };
	struct otlp_config cfg = { .queue_spans = n,
				   .requests = o->requests,
				   .compression = o->gzip ? OTLP_COMPRESSION_GZIP :
							    OTLP_COMPRESSION_NONE };
	struct otlp_resource d = { .service_name = "otlp_bench", .pid = (uint32_t)getpid() };
	struct otlp_attr args[] = {
		{ "bytes", OTLP_INT, .v.i = 4096 },
		{ "ratio", OTLP_DOUBLE, .v.d = 0.5 },
		{ "path", OTLP_STRING, .v.s = "/var/lib/data/file" },
		{ "hit", OTLP_BOOL, .v.b = true },
	};
	struct otlp_span s = { .name = "request",
			       .tid = 1,
			       .thread_name = "worker",
			       .thread_cpu_ns = 1000,
			       .nargs = 4,
			       .args = args };
	double t0, t_produced, t1, cpu0, cpu1, prod0, prod1, col0, col1;
	struct otlp_exporter *e;
	struct otlp_stats st;
	struct otlp_res *r;
	char endpoint[64], err[256];

	if (receiver_start(&c, dir, o->sink))
		return -1;
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", c.port);
	cfg.endpoint = endpoint;
	e = otlp_exporter_new(&cfg, err, sizeof(err));
	if (!e) {
		fprintf(stderr, "%s\n", err);
		lkt_collector_stop(&c);
		return -1;
	}
	r = otlp_resource_new(e, &d, err, sizeof(err));
	col0 = lkt_collector_cpu_s(&c);
	cpu0 = process_cpu_s();
	prod0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	t0 = now_s(CLOCK_MONOTONIC);
	for (unsigned int i = 0; i < n; i++) {
		s.start_unix_ns = 1700000000000000000ull + i * 1000ull;
		s.end_unix_ns = s.start_unix_ns + 500;
		otlp_export(e, r, &s);
	}
	t_produced = now_s(CLOCK_MONOTONIC);
	prod1 = now_s(CLOCK_THREAD_CPUTIME_ID);
	do {
		usleep(1000);
		otlp_exporter_stats(e, &st);
	} while (st.queued);
	t1 = now_s(CLOCK_MONOTONIC);
	cpu1 = process_cpu_s();
	col1 = lkt_collector_cpu_s(&c);
	out->rate = (double)st.exported / (t1 - t0);
	/* The process's CPU time less the producing thread's: the exporter's thread (and the
	 * polling above, a wake-up a millisecond). */
	out->exporter_cpu_per_100k = ((cpu1 - cpu0) - (prod1 - prod0)) * 1e5 / n;
	out->producer_ns_per_span = (t_produced - t0) * 1e9 / n;
	out->collector_cpu_per_100k = col0 >= 0 && col1 >= 0 ? (col1 - col0) * 1e5 / n : -1;
	out->bytes_per_span = (double)st.bytes_sent / n;
	if (st.exported != n)
		fprintf(stderr, "exported %llu of %u (dropped %llu + %llu)\n",
			(unsigned long long)st.exported, n, (unsigned long long)st.dropped_full,
			(unsigned long long)st.dropped_failed);
	otlp_resource_put(r);
	otlp_exporter_free(e);
	lkt_collector_stop(&c);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(struct run *runs, int n, size_t offset)
{
	double v[64];

	for (int i = 0; i < n; i++)
		v[i] = *(double *)((char *)&runs[i] + offset);
	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	struct options o = {
		.spans = argc > 1 ? (unsigned int)strtoul(argv[1], NULL, 10) : 200000,
		.gzip = argc > 3 && !strcmp(argv[3], "gzip"),
		.sink = argc > 4 && !strcmp(argv[4], "sink"),
		.requests = argc > 5 ? (unsigned int)strtoul(argv[5], NULL, 10) : 0,
	};
	unsigned int n = o.spans;
	int nruns = argc > 2 ? atoi(argv[2]) : 5;
	char dir[] = "/tmp/otlp-bench-XXXXXX", cpu[256] = "", cmd[300];
	struct run runs[64];
	FILE *f;

	if (nruns < 1 || nruns > 64 || !n || (o.sink && !OTLP_SINK[0]) ||
	    (!o.sink && !lkt_collector_available(cpu, sizeof(cpu)))) {
		fprintf(stderr,
			"usage: otlp_bench [SPANS [RUNS (1-64) [none|gzip [collector|sink "
			"[REQUESTS]]]]] %s\n",
			cpu);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir))
		return 1;
	for (int i = 0; i < nruns; i++)
		if (one_run(dir, &o, &runs[i]))
			return 1;
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(cpu, sizeof(cpu), f) && strncmp(cpu, "model name", 10))
		;
	if (f)
		fclose(f);
	printf("machine: %s", strchr(cpu, ':') ? strchr(cpu, ':') + 2 : "?\n");
	printf("%u spans a run, 4 arguments each, %s, to %s, %s requests at once, median of %d "
	       "runs\n",
	       n, o.gzip ? "gzip" : "no compression",
	       o.sink ? "otlp_sink (discards)" : "the collector", argc > 5 ? argv[5] : "default",
	       nruns);
	printf("spans/s exported:                 %.0f\n",
	       median(runs, nruns, offsetof(struct run, rate)));
	printf("exporter CPU s per 100,000 spans:  %.3f\n",
	       median(runs, nruns, offsetof(struct run, exporter_cpu_per_100k)));
	printf("receiver CPU s per 100,000 spans:  %.3f\n",
	       median(runs, nruns, offsetof(struct run, collector_cpu_per_100k)));
	printf("otlp_export() ns per span:         %.0f\n",
	       median(runs, nruns, offsetof(struct run, producer_ns_per_span)));
	printf("bytes sent per span:               %.1f\n",
	       median(runs, nruns, offsetof(struct run, bytes_per_span)));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? 1 : 0;
}
