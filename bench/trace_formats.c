// SPDX-License-Identifier: MIT
/*
 * lowkey bench formats: one trace in the three formats -- its size per event and how fast each is
 * written. CTF is written while recording (the consumer thread, start to stop); JSON and Perfetto
 * are converted from that CTF afterwards, as lk_trace_stop and `lowkey convert` do.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe/convert.h"

static const char formats_usage[] =
	"usage: lowkey bench formats [--events N] [--runs R] [--dir DIR] [-j|--json]\n"
	"\n"
	"Records N events (default 3000000) in one thread -- rounds of a span around a counter value,\n"
	"an event with two integer arguments and a nested span -- as CTF, converts that trace to\n"
	"Chrome JSON and to Perfetto protobuf, and prints each format's bytes per event and write\n"
	"rate (medians of R runs, default 5). CTF's rate is the recording's: start to stop, the\n"
	"consumer writing while the thread records; the others are the conversions' from CTF.\n"
	"The traces go to DIR (default $TMPDIR or /tmp) and are removed.\n";

#define ROUND 6	/* events a round records */

static __attribute__((noinline)) void record_round(long i)
{
	LK_SPAN(bench, request);
	LK_COUNTER(bench, depth, i & 15);
	long id = i, rows = i * 3;

	LK_PROBE(bench, query, id, rows);
	{
		LK_SPAN(bench, fetch);
	}
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* A CTF trace's bytes: every file in its directory. */
static uint64_t dir_size(const char *dir)
{
	char path[4400];
	struct dirent *e;
	uint64_t sum = 0;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (e->d_name[0] != '.' || strcmp(e->d_name, ".lowkey-index") == 0)
			sum += file_size(path);
	}
	if (d)
		closedir(d);
	return sum;
}

static void remove_trace(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "lowkey bench formats: could not remove %s\n", dir);
}

/* CPU time of the process: the recording thread and the consumer, or the conversion. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct figures {
	double seconds[3][64], cpu[3][64];	/* wall; CPU time of the whole process */
	uint64_t bytes[3], events, lost;
};

/* One run: record, then convert; the times of each format in f->seconds[format][run]. */
static int one_run(const char *base, long events, int run, struct figures *f)
{
	struct lk_trace_config c = { .buffer_size = 64u << 20, .flush_ms = 20 };
	char ctf[4096], out[4200], err[1024];
	struct lk_trace_stats st;
	uint64_t t0, t1, c0, c1;

	snprintf(ctf, sizeof(ctf), "%s/lowkey-bench-formats-%d.ctf", base, (int)getpid());
	c.path = ctf;
	remove_trace(ctf);
	if (lk_probe_enable("bench") <= 0 || lk_trace_start(&c) != 0) {
		fprintf(stderr, "lowkey bench formats: cannot trace to %s: %s\n", ctf, lk_last_error());
		return -1;
	}
	c0 = cpu_ns();
	t0 = lkb_now_ns();
	for (long i = 0; i < events / ROUND; i++)
		record_round(i);
	if (lk_trace_stop() != 0) {
		fprintf(stderr, "lowkey bench formats: the trace failed: %s\n", lk_last_error());
		return -1;
	}
	t1 = lkb_now_ns();
	c1 = cpu_ns();
	lk_trace_stats(&st);
	f->events = st.events;
	f->lost = st.lost;
	f->bytes[LK_TRACE_CTF] = dir_size(ctf);
	f->seconds[LK_TRACE_CTF][run] = (double)(t1 - t0) / 1e9;
	f->cpu[LK_TRACE_CTF][run] = (double)(c1 - c0) / 1e9;
	for (int fmt = LK_TRACE_JSON; fmt <= LK_TRACE_PERFETTO; fmt++) {
		snprintf(out, sizeof(out), "%s.%s", ctf, lk__trace_format_extension(fmt));
		c0 = cpu_ns();
		t0 = lkb_now_ns();
		if (lk__trace_convert(ctf, out, fmt, err, sizeof(err)) != 0) {
			fprintf(stderr, "lowkey bench formats: %s\n", err);
			return -1;
		}
		t1 = lkb_now_ns();
		c1 = cpu_ns();
		f->seconds[fmt][run] = (double)(t1 - t0) / 1e9;
		f->cpu[fmt][run] = (double)(c1 - c0) / 1e9;
		f->bytes[fmt] = file_size(out);
		unlink(out);
	}
	remove_trace(ctf);
	return 0;
}

static void print_text(const struct figures *f, int runs, const double *median, const double *cpu)
{
	double ctf_rate = (double)f->events / median[LK_TRACE_CTF];
	double ctf_cpu_rate = (double)f->events / cpu[LK_TRACE_CTF];

	printf("trace formats: %llu events (%llu lost), median of %d runs; %s\n", (unsigned long long)f->events,
	       (unsigned long long)f->lost, runs, lkb_machine());
	printf("%-9s %11s %8s %8s %9s %10s %8s %9s %10s %8s\n", "format", "bytes", "B/event", "vs JSON",
	       "wall s", "M ev/s", "vs CTF", "CPU s", "M ev/CPUs", "vs CTF");
	for (int fmt = 0; fmt <= LK_TRACE_PERFETTO; fmt++) {
		double rate = (double)f->events / median[fmt], cpu_rate = (double)f->events / cpu[fmt];

		printf("%-9s %11llu %8.1f %8.3f %9.3f %10.2f %8.2f %9.3f %10.2f %8.2f\n", lk__trace_format_name(fmt),
		       (unsigned long long)f->bytes[fmt], (double)f->bytes[fmt] / (double)f->events,
		       (double)f->bytes[fmt] / (double)f->bytes[LK_TRACE_JSON], median[fmt], rate / 1e6,
		       rate / ctf_rate, cpu[fmt], cpu_rate / 1e6, cpu_rate / ctf_cpu_rate);
	}
	printf("(ctf: recorded, start to stop, CPU of the recording thread and the consumer; json, perfetto:\n"
	       " converted from that CTF, one thread)\n");
}

static void print_json(const struct figures *f, int runs, const double *median, const double *cpu)
{
	struct lkb_json j;

	lkb_json_begin(&j, stdout);
	lkb_json_str(&j, "bench", "formats");
	lkb_json_str(&j, "machine", lkb_machine());
	lkb_json_int(&j, "events", (long long)f->events);
	lkb_json_int(&j, "lost", (long long)f->lost);
	lkb_json_int(&j, "runs", runs);
	lkb_json_array(&j, "rows");
	for (int fmt = 0; fmt <= LK_TRACE_PERFETTO; fmt++) {
		lkb_json_object(&j, NULL);
		lkb_json_str(&j, "format", lk__trace_format_name(fmt));
		lkb_json_int(&j, "bytes", (long long)f->bytes[fmt]);
		lkb_json_num(&j, "bytes_per_event", (double)f->bytes[fmt] / (double)f->events);
		lkb_json_num(&j, "seconds", median[fmt]);
		lkb_json_num(&j, "events_per_second", (double)f->events / median[fmt]);
		lkb_json_num(&j, "cpu_seconds", cpu[fmt]);
		lkb_json_num(&j, "events_per_cpu_second", (double)f->events / cpu[fmt]);
		lkb_json_close(&j);
	}
	lkb_json_close(&j);
	lkb_json_end(&j);
}

static int formats_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "events", required_argument, NULL, 'n' }, { "runs", required_argument, NULL, 'r' },
		{ "dir", required_argument, NULL, 'd' },    { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct figures f = { 0 };
	double median[3], cpu[3];
	long events = 3000000;
	int c, runs = 5;
	bool json = false;

	optind = 1;
	while ((c = getopt_long(argc, argv, "n:r:d:jh", options, NULL)) != -1) {
		switch (c) {
		case 'n': events = atol(optarg); break;
		case 'r': runs = atoi(optarg); break;
		case 'd': dir = optarg; break;
		case 'j': json = true; break;
		case 'h': fputs(formats_usage, stdout); return 0;
		default: fputs(formats_usage, stderr); return 2;
		}
	}
	if (events < ROUND || events > 1000000000 || runs < 1 || runs > 64) {
		fputs(formats_usage, stderr);
		return 2;
	}
	for (int run = 0; run < runs; run++)
		if (one_run(dir, events, run, &f) != 0)
			return 1;
	for (int fmt = 0; fmt <= LK_TRACE_PERFETTO; fmt++)
		median[fmt] = lkb_median(f.seconds[fmt], (size_t)runs), cpu[fmt] = lkb_median(f.cpu[fmt], (size_t)runs);
	if (json)
		print_json(&f, runs, median, cpu);
	else
		print_text(&f, runs, median, cpu);
	return 0;
}

LK_BENCH(formats_bench, "formats", "one trace as CTF, JSON and Perfetto: bytes per event and write rate",
	 formats_usage, formats_main);
