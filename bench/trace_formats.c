// SPDX-License-Identifier: MIT
/*
 * lowkey bench formats: the same trace recorded in each of the three formats -- its size per event
 * and what a user waits for: from lk_trace_start until lk_trace_stop has returned with the output
 * complete (for JSON and Perfetto, whatever lk_trace_stop does to produce them), by wall time and
 * by the process's CPU time, and how long lk_trace_stop itself took (what is left to write when
 * the program is done). Each run records every format once, in an order that changes from run
 * to run (every permutation in six runs); a last row times `lowkey convert` of the run's CTF to Perfetto. The events are recorded as
 * fast as the thread can, or spread over --seconds as a program that does other work would.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "internal/trace_convert.h"

static const char formats_usage[] =
	"usage: lowkey bench formats [--events N] [--seconds S] [--runs R] [--dir DIR] [-j|--json]\n"
	"\n"
	"Records N events (default 3000000) in one thread -- rounds of a span around a counter value,\n"
	"an event with two integer arguments and a nested span -- once as CTF, once as Chrome JSON and\n"
	"once as Perfetto protobuf, and prints each format's bytes per event and rate: events over the\n"
	"time from lk_trace_start until lk_trace_stop returned with the file complete, by wall time\n"
	"and by the process's CPU time (medians of R runs, default 6; each run records every format,\n"
	"in an order that changes from run to run, every one of the six in six runs; each recording\n"
	"starts after the file system has written back the ones before, and one recording of CTF\n"
	"and one of Perfetto, not counted, come first), the CPU an event took to\n"
	"write, and the time lk_trace_stop took. The last row is `lowkey convert` of the CTF to\n"
	"Perfetto, on its own. With --seconds S the events are spread over S seconds (a burst every\n"
	"millisecond), as a program that does other work would record them; without, as fast as the\n"
	"thread can.\n"
	"Each recording's figures are printed once it is done, the medians' table at the end.\n"
	"The traces go to DIR (default $TMPDIR or /tmp) and are removed.\n";

#define ROUND 6 /* events a round records */

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
	char cmd[4400];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "lowkey bench formats: could not remove %s\n", dir);
}

/*
 * Write back what the recordings before left dirty in the file system of dir, so that each one
 * starts without the write-back of another's output: JSON's 300 MB would otherwise throttle the
 * writes of whichever format comes after it (balance_dirty_pages).
 */
static void settle(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		syncfs(fd);
		close(fd);
	}
}

/* CPU time of the process (the recording thread and the consumer, or the conversion), or of this thread. */
static uint64_t cpu_ns_of(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	return cpu_ns_of(CLOCK_PROCESS_CPUTIME_ID);
}

#define NFORMATS 3
#define CONVERT NFORMATS /* the row of `lowkey convert` from CTF to Perfetto */
#define NROWS (NFORMATS + 1)

struct figures {
	double seconds[NROWS][64], cpu[NROWS][64]; /* wall; CPU time of the whole process */
	double stop[NROWS][64];			   /* lk_trace_stop alone (convert: 0) */
	/*
	 * The CPU time the format took: the process's less the recording thread's while it recorded
	 * (the same in every format: the ring's), that is the consumer's, lk_trace_start's and
	 * lk_trace_stop's (convert: all of it).
	 */
	double write_cpu[NROWS][64];
	uint64_t bytes[NROWS], events[NFORMATS], lost[NFORMATS];
};

static const char *row_name(int row)
{
	return row == CONVERT ? "convert" : lk__trace_format_name(row);
}

/* The trace's file (JSON, Perfetto) or directory (CTF) for a format. */
static void trace_path(char *path, size_t len, const char *base, int fmt)
{
	snprintf(path, len, "%s/lowkey-bench-formats-%d.%s", base, (int)getpid(),
		 lk__trace_format_extension(fmt));
}

/*
 * Record the events in format fmt: the time from lk_trace_start until lk_trace_stop returned,
 * when the output is complete. The CTF trace is kept for the conversion row; the others removed.
 */
/* The events, as fast as the thread can (spread_ns 0) or spread over spread_ns, a burst a millisecond. */
static void record_events(long events, uint64_t spread_ns)
{
	long rounds = events / ROUND, per_burst = rounds;
	uint64_t next = lkb_now_ns();

	if (spread_ns)
		per_burst = rounds / (long)(spread_ns / 1000000u) + 1; /* a burst a millisecond */
	for (long i = 0; i < rounds; i++) {
		record_round(i);
		if (spread_ns && (i + 1) % per_burst == 0) {
			struct timespec until;

			next += 1000000u;
			until.tv_sec = (time_t)(next / 1000000000u);
			until.tv_nsec = (long)(next % 1000000000u);
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) ==
			       EINTR)
				;
		}
	}
}

static int record(const char *base, long events, uint64_t spread_ns, int fmt, int run,
		  struct figures *f)
{
	struct lk_trace_config c = { .buffer_size = 64u << 20,
				     .flush_ms = 20,
				     .format = (enum lk_trace_format)fmt };
	struct lk_trace_stats st;
	uint64_t t0, t1, c0, c1, s0, r0, r1;
	char path[4096];

	trace_path(path, sizeof(path), base, fmt);
	c.path = path;
	remove_trace(path);
	if (lk_probe_enable("bench") <= 0) {
		fprintf(stderr, "lowkey bench formats: no bench probe sites: %s\n",
			lk_last_error());
		return -1;
	}
	settle(base);
	c0 = cpu_ns();
	t0 = lkb_now_ns();
	if (lk_trace_start(&c) != 0) {
		fprintf(stderr, "lowkey bench formats: cannot trace to %s: %s\n", path,
			lk_last_error());
		return -1;
	}
	r0 = cpu_ns_of(CLOCK_THREAD_CPUTIME_ID);
	record_events(events, spread_ns);
	r1 = cpu_ns_of(CLOCK_THREAD_CPUTIME_ID);
	s0 = lkb_now_ns();
	if (lk_trace_stop() != 0) {
		fprintf(stderr, "lowkey bench formats: the trace failed: %s\n", lk_last_error());
		return -1;
	}
	t1 = lkb_now_ns();
	c1 = cpu_ns();
	lk_trace_stats(&st);
	f->events[fmt] = st.events;
	f->lost[fmt] = st.lost;
	f->bytes[fmt] = fmt == LK_TRACE_CTF ? dir_size(path) : file_size(path);
	f->seconds[fmt][run] = (double)(t1 - t0) / 1e9;
	f->stop[fmt][run] = (double)(t1 - s0) / 1e9;
	f->cpu[fmt][run] = (double)(c1 - c0) / 1e9;
	f->write_cpu[fmt][run] = (double)(c1 - c0 - (r1 - r0)) / 1e9;
	if (fmt != LK_TRACE_CTF)
		remove_trace(path);
	return 0;
}

/* `lowkey convert` of the run's CTF trace to Perfetto, on its own. */
static int convert(const char *base, int run, struct figures *f)
{
	char ctf[4096], out[4200], err[1024];
	uint64_t t0, t1, c0, c1;
	int rc;

	trace_path(ctf, sizeof(ctf), base, LK_TRACE_CTF);
	snprintf(out, sizeof(out), "%s.pftrace", ctf);
	settle(base);
	c0 = cpu_ns();
	t0 = lkb_now_ns();
	rc = lk__trace_convert(ctf, out, LK_TRACE_PERFETTO, err, sizeof(err));
	t1 = lkb_now_ns();
	c1 = cpu_ns();
	if (rc != 0) {
		fprintf(stderr, "lowkey bench formats: %s\n", err);
		return -1;
	}
	f->seconds[CONVERT][run] = (double)(t1 - t0) / 1e9;
	f->cpu[CONVERT][run] = (double)(c1 - c0) / 1e9;
	f->write_cpu[CONVERT][run] = f->cpu[CONVERT][run];
	f->bytes[CONVERT] = file_size(out);
	unlink(out);
	remove_trace(ctf);
	return 0;
}

static struct {
	int runs;
	bool text; /* each recording's figures printed once it is done (not with --json) */
} shown;

/* A recording's own figures, printed once it is done: the medians come at the end, of all runs. */
static void print_recording(const struct figures *f, int row, int run)
{
	if (shown.text)
		lkb_row("run %-3d %-9s %12llu bytes %9.3f s wall %9.3f s CPU %9.3f s stop %9.3f s writing\n",
			run + 1, row_name(row), (unsigned long long)f->bytes[row],
			f->seconds[row][run], f->cpu[row][run], f->stop[row][run],
			f->write_cpu[row][run]);
}

/*
 * The order of the formats in a run: run after run, every permutation. Over six runs each format
 * comes first twice and right after each other one twice: what one leaves behind (JSON's 300 MB
 * freed, caches) falls on each alike, which turning the first one alone did not do (Perfetto came
 * right after JSON in four runs of five, CTF in none).
 */
static const int orders[6][NFORMATS] = { { 0, 1, 2 }, { 2, 1, 0 }, { 1, 2, 0 },
					 { 0, 2, 1 }, { 2, 0, 1 }, { 1, 0, 2 } };

/*
 * A recording of CTF and one of Perfetto before the runs, not counted: the process's first
 * recording pays for what the later ones find ready (the consumer's first start, the pages of a
 * ring touched the first time), and the first run's order puts CTF first, which would charge
 * those costs to CTF alone.
 */
static int warm_up(const char *base, long events)
{
	struct figures *scratch = calloc(1, sizeof(*scratch));
	char ctf[4096];
	int rc = -1;

	lkb_progress("warming up");
	if (scratch && record(base, events, 0, LK_TRACE_CTF, 0, scratch) == 0 &&
	    record(base, events, 0, LK_TRACE_PERFETTO, 0, scratch) == 0)
		rc = 0;
	trace_path(ctf, sizeof(ctf), base, LK_TRACE_CTF);
	remove_trace(ctf);
	free(scratch);
	return rc;
}

/* One run: every format recorded once, in the run's order; then the conversion. */
static int one_run(const char *base, long events, uint64_t spread_ns, int run, struct figures *f)
{
	for (int k = 0; k < NFORMATS; k++) {
		int fmt = orders[run % 6][k];

		lkb_progress("run %d of %d: %s", run + 1, shown.runs, row_name(fmt));
		if (record(base, events, spread_ns, fmt, run, f) != 0)
			return -1;
		print_recording(f, fmt, run);
	}
	lkb_progress("run %d of %d: lowkey convert to Perfetto", run + 1, shown.runs);
	if (convert(base, run, f) != 0)
		return -1;
	print_recording(f, CONVERT, run);
	return 0;
}

static void print_text(const struct figures *f, int runs, const double *median, const double *cpu,
		       const double *stop, const double *write)
{
	double events = (double)f->events[LK_TRACE_CTF];
	double ctf_rate = events / median[LK_TRACE_CTF], ctf_cpu_rate = events / cpu[LK_TRACE_CTF];

	printf("\nmedians of %d runs: %llu events recorded (%llu lost)\n", runs,
	       (unsigned long long)f->events[LK_TRACE_CTF],
	       (unsigned long long)f->lost[LK_TRACE_CTF]);
	printf("%-9s %11s %8s %8s %9s %10s %8s %9s %10s %8s %8s %9s %8s\n", "format", "bytes",
	       "B/event", "vs JSON", "wall s", "M ev/s", "vs CTF", "CPU s", "M ev/CPUs", "vs CTF",
	       "stop s", "write ns", "vs CTF");
	for (int row = 0; row < NROWS; row++) {
		double rate = events / median[row], cpu_rate = events / cpu[row];

		printf("%-9s %11llu %8.1f %8.3f %9.3f %10.2f %8.2f %9.3f %10.2f %8.2f %8.3f %9.1f %8.2f\n",
		       row_name(row), (unsigned long long)f->bytes[row],
		       (double)f->bytes[row] / events,
		       (double)f->bytes[row] / (double)f->bytes[LK_TRACE_JSON], median[row],
		       rate / 1e6, rate / ctf_rate, cpu[row], cpu_rate / 1e6,
		       cpu_rate / ctf_cpu_rate, stop[row], write[row] * 1e9 / events,
		       write[LK_TRACE_CTF] / write[row]);
	}
	for (int fmt = 1; fmt < NFORMATS; fmt++)
		if (f->events[fmt] != f->events[LK_TRACE_CTF] ||
		    f->lost[fmt] != f->lost[LK_TRACE_CTF])
			printf("(%s: %llu events, %llu lost: not the same trace as the CTF's)\n",
			       row_name(fmt), (unsigned long long)f->events[fmt],
			       (unsigned long long)f->lost[fmt]);
	printf("(ctf, json, perfetto: lk_trace_start until lk_trace_stop returned with the file complete;\n"
	       " CPU of the whole process; stop: lk_trace_stop alone; write ns: the CPU an event took to write,\n"
	       " the process's less the recording thread's while it recorded, and its rate against CTF's.\n"
	       " convert: `lowkey convert` of the CTF trace to Perfetto)\n");
}

static void print_json(const struct figures *f, int runs, const double *median, const double *cpu,
		       const double *stop, const double *write)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "formats");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "events", (long long)f->events[LK_TRACE_CTF]);
	lk__json_int(&j, "lost", (long long)f->lost[LK_TRACE_CTF]);
	lk__json_int(&j, "runs", runs);
	lk__json_array(&j, "rows");
	for (int row = 0; row < NROWS; row++) {
		double events = (double)f->events[row == CONVERT ? LK_TRACE_CTF : row];

		lk__json_object(&j, NULL);
		lk__json_str(&j, "format", row_name(row));
		lk__json_int(&j, "events", (long long)events);
		lk__json_int(&j, "bytes", (long long)f->bytes[row]);
		lk__json_num(&j, "bytes_per_event", (double)f->bytes[row] / events);
		lk__json_num(&j, "seconds", median[row]);
		lk__json_num(&j, "events_per_second", events / median[row]);
		lk__json_num(&j, "cpu_seconds", cpu[row]);
		lk__json_num(&j, "events_per_cpu_second", events / cpu[row]);
		lk__json_num(&j, "stop_seconds", stop[row]);
		lk__json_num(&j, "write_cpu_seconds", write[row]);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_end(&j);
}

static int formats_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "events", required_argument, NULL, 'n' },
		{ "runs", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "dir", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct figures f = { 0 };
	double median[NROWS], cpu[NROWS], stop[NROWS], write[NROWS], seconds = 0;
	long events = 3000000;
	int c, runs = 6;
	bool json = false;

	optind = 1;
	while ((c = getopt_long(argc, argv, "n:s:r:d:jh", options, NULL)) != -1) {
		switch (c) {
		case 'n':
			events = atol(optarg);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'r':
			runs = atoi(optarg);
			break;
		case 'd':
			dir = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(formats_usage, stdout);
			return 0;
		default:
			fputs(formats_usage, stderr);
			return 2;
		}
	}
	if (events < ROUND || events > 1000000000 || runs < 1 || runs > 64 ||
	    !(seconds >= 0 && seconds <= 3600)) {
		fputs(formats_usage, stderr);
		return 2;
	}
	shown.runs = runs;
	shown.text = !json;
	if (!json)
		lkb_row("trace formats: %ld events a run, %d runs, each recording every format in turn; %s\n",
			events, runs, lkb_machine());
	if (warm_up(dir, events) != 0)
		return 1;
	for (int run = 0; run < runs; run++)
		if (one_run(dir, events, (uint64_t)(seconds * 1e9), run, &f) != 0)
			return 1;
	for (int row = 0; row < NROWS; row++)
		median[row] = lkb_median(f.seconds[row], (size_t)runs),
		cpu[row] = lkb_median(f.cpu[row], (size_t)runs),
		stop[row] = lkb_median(f.stop[row], (size_t)runs),
		write[row] = lkb_median(f.write_cpu[row], (size_t)runs);
	if (json)
		print_json(&f, runs, median, cpu, stop, write);
	else
		print_text(&f, runs, median, cpu, stop, write);
	return 0;
}

LK_BENCH(formats_bench, "formats",
	 "one trace recorded as CTF, JSON and Perfetto: bytes per event, start-to-file rate",
	 formats_usage, formats_main);
