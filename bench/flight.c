// SPDX-License-Identifier: MIT
/*
 * lowkey bench flight: what the flight recorder (LK_TRACE_OVERWRITE) costs. The enabled event of
 * `lowkey bench probe` (two integers), timed over bursts that lap the ring many times, in a
 * streaming trace and in an overwrite-mode one, alternating in each run; and the time of a
 * snapshot of 8 threads' 8 MiB rings (64 MiB), full, while those threads wait.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe_loop.h"

#define MAX_RUNS 64
#define SNAP_THREADS 8
#define SNAP_RING (8u << 20)

static int runs = 11;
static long events = 2000000; /* 48 MB of records a burst: the 2 MiB ring laps 23 times */
static const char *trace_dir = "/dev/shm";
static char label_buf[128];

static void remove_trace(const char *dir)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "lowkey bench flight: could not remove %s\n", dir);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * CPU ns per event of one long burst in a trace started with flags (the thread's CPU time: a
 * burst of tens of milliseconds is preempted on a busy machine, and wall time would say so);
 * < 0 when it cannot trace.
 */
static double time_long_burst(unsigned int flags, int run, uint64_t *lost)
{
	struct lk_trace_config c = { .flags = flags };
	struct lk_trace_stats st;
	char dir[1024];
	uint64_t t0, t1;

	snprintf(dir, sizeof(dir), "%s/lowkey-bench-flight-%d-%d", trace_dir, (int)getpid(), run);
	c.path = dir;
	if (lk_trace_start(&c) != 0)
		return -1;
	lkb_loop_two_ints(1000); /* the thread's ring, mapped and attached */
	t0 = thread_cpu_ns();
	lkb_loop_two_ints((uint64_t)events);
	t1 = thread_cpu_ns();
	lk_trace_stats(&st);
	*lost += st.lost;
	lk_trace_stop();
	remove_trace(dir);
	return (double)(t1 - t0) / (double)events;
}

/*
 * Median ns per event of BURSTS bursts of LKB_DEFAULT_BURST events (384 KiB: they fit the 2 MiB
 * ring, and cross a sub-buffer or two each), each followed by a pause in which a streaming
 * trace's consumer writes it (as `lowkey bench probe` times its enabled event).
 */
#define BURSTS 10

static double time_fitting_bursts(unsigned int flags, int run, uint64_t *lost)
{
	struct lk_trace_config c = { .flags = flags };
	struct lk_trace_stats st;
	double ns[BURSTS];
	char dir[1024];

	snprintf(dir, sizeof(dir), "%s/lowkey-bench-flight-%d-%d", trace_dir, (int)getpid(), run);
	c.path = dir;
	if (lk_trace_start(&c) != 0)
		return -1;
	lkb_loop_two_ints(1000);
	for (int b = 0; b < BURSTS; b++) {
		uint64_t t0 = lkb_now_ns();

		lkb_loop_two_ints(LKB_DEFAULT_BURST);
		ns[b] = (double)(lkb_now_ns() - t0) / LKB_DEFAULT_BURST;
		usleep(20000);
	}
	lk_trace_stats(&st);
	*lost += st.lost;
	lk_trace_stop();
	remove_trace(dir);
	return lkb_median(ns, BURSTS);
}

/* Both modes in one run, in an order that alternates from run to run. */
static int time_modes(double (*timer)(unsigned int, int, uint64_t *), int r, double *stream,
		      double *over, uint64_t lost[2])
{
	if (r % 2) {
		over[r] = timer(LK_TRACE_OVERWRITE, r, &lost[1]);
		stream[r] = timer(0, r, &lost[0]);
	} else {
		stream[r] = timer(0, r, &lost[0]);
		over[r] = timer(LK_TRACE_OVERWRITE, r, &lost[1]);
	}
	return stream[r] < 0 || over[r] < 0 ? -1 : 0;
}

/* ---- the snapshot of 64 MiB ---- */

static int snap_done;
static pthread_barrier_t snap_filled;

static void *fill_ring(void *arg)
{
	(void)arg;
	lkb_loop_two_ints(SNAP_RING / 24 * 5 / 4); /* past full: every sub-buffer holds events */
	pthread_barrier_wait(&snap_filled);
	while (!__atomic_load_n(&snap_done, __ATOMIC_ACQUIRE))
		usleep(1000); /* alive: an exited thread's ring is freed once written */
	return NULL;
}

/*
 * Median ms of runs snapshots of SNAP_THREADS full rings, by the wall clock; *cpu_ms: by the
 * thread's CPU time (the writes' copies into the page cache included); *bytes: what one wrote.
 */
static double time_snapshots(double *ms, double *cpu_ms, uint64_t *bytes)
{
	double cpu[MAX_RUNS];
	struct lk_trace_config c = { .flags = LK_TRACE_OVERWRITE, .buffer_size = SNAP_RING };
	pthread_t threads[SNAP_THREADS];
	struct lk_trace_stats before, after;
	char dir[1024], snap[1100];

	snprintf(dir, sizeof(dir), "%s/lowkey-bench-flight-%d-snap", trace_dir, (int)getpid());
	c.path = dir;
	if (lk_trace_start(&c) != 0)
		return -1;
	snap_done = 0;
	pthread_barrier_init(&snap_filled, NULL, SNAP_THREADS + 1);
	for (int i = 0; i < SNAP_THREADS; i++)
		pthread_create(&threads[i], NULL, fill_ring, NULL);
	pthread_barrier_wait(&snap_filled);
	for (int r = 0; r < runs; r++) {
		uint64_t t0, c0;

		snprintf(snap, sizeof(snap), "%s-%d", dir, r);
		lk_trace_stats(&before);
		c0 = thread_cpu_ns();
		t0 = lkb_now_ns();
		if (lk_trace_snapshot(snap) != 0)
			return -1;
		ms[r] = (double)(lkb_now_ns() - t0) / 1e6;
		cpu[r] = (double)(thread_cpu_ns() - c0) / 1e6;
		lk_trace_stats(&after);
		*bytes = after.bytes - before.bytes;
		remove_trace(snap);
	}
	__atomic_store_n(&snap_done, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < SNAP_THREADS; i++)
		pthread_join(threads[i], NULL);
	pthread_barrier_destroy(&snap_filled);
	lk_trace_stop();
	*cpu_ms = lkb_median(cpu, (size_t)runs);
	return lkb_median(ms, (size_t)runs);
}

static const char flight_usage[] =
	"usage: lowkey bench flight [--runs N] [--events N] [--dir DIR] [-j|--json]\n"
	"\n"
	"What the flight recorder costs: the enabled event of `lowkey bench probe` (two integers) in\n"
	"a streaming trace (the consumer writing CTF to DIR) and in an overwrite-mode one, both in\n"
	"each run (the order alternating): in bursts of 16384 events that fit the 2 MiB ring, 20 ms\n"
	"apart (as `lowkey bench probe` times it), and in one burst that laps the ring many times (by\n"
	"the thread's CPU time: such a burst is preempted on a busy machine); and\n"
	"the time lk_trace_snapshot() takes to write 8 threads' full 8 MiB rings (64 MiB) to DIR.\n"
	"Medians of the runs.\n"
	"\n"
	"  --runs N      repetitions (default 11)\n"
	"  --events N    events of the burst that laps the ring (default 2000000)\n"
	"  --dir DIR     where the traces go (default /dev/shm, else /tmp)\n"
	"  -j, --json    print the figures as JSON\n";

struct mode_rows {
	double stream, over, ratio; /* medians: ns/event, and of the runs' ratios */
	uint64_t lost[2];
};

static int measure(double (*timer)(unsigned int, int, uint64_t *), const char *what,
		   struct mode_rows *m)
{
	double stream[MAX_RUNS], over[MAX_RUNS], ratio[MAX_RUNS];

	for (int r = 0; r < runs; r++) {
		lkb_progress("%s, run %d of %d", what, r + 1, runs);
		if (time_modes(timer, r, stream, over, m->lost) != 0)
			return -1;
		ratio[r] = over[r] / stream[r];
	}
	m->stream = lkb_median(stream, (size_t)runs);
	m->over = lkb_median(over, (size_t)runs);
	m->ratio = lkb_median(ratio, (size_t)runs);
	return 0;
}

static void json_rows(struct lk__json *j, const char *key, const struct mode_rows *m)
{
	lk__json_object(j, key);
	lk__json_num(j, "stream_ns", m->stream);
	lk__json_num(j, "overwrite_ns", m->over);
	lk__json_num(j, "overwrite_over_stream", m->ratio);
	lk__json_int(j, "stream_lost", (long long)m->lost[0]);
	lk__json_int(j, "overwrite_lost", (long long)m->lost[1]);
	lk__json_close(j);
}

static void text_rows(const char *what, const struct mode_rows *m)
{
	char label[64];

	lkb_row("%s\n", what);
	lkb_row("  %-50s %10.3f   (%llu lost)\n", "streaming trace", m->stream,
		(unsigned long long)m->lost[0]);
	snprintf(label, sizeof(label), "overwrite mode");
	lkb_row("  %-50s %10.3f   (x%.3f of streaming: median of the runs' ratios; %llu lost)\n",
		label, m->over, m->ratio, (unsigned long long)m->lost[1]);
}

/* The options into runs, events and trace_dir; false when they are not the bench's (the usage
 * is printed). */
static bool parse_options(int argc, char **argv, bool *json)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "events", required_argument, NULL, 'e' },
		{ "dir", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct stat st;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:e:d:j", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			runs = atoi(optarg);
			break;
		case 'e':
			events = atol(optarg);
			break;
		case 'd':
			trace_dir = optarg;
			break;
		case 'j':
			*json = true;
			break;
		default:
			fputs(flight_usage, stderr);
			return false;
		}
	}
	if (runs < 1 || runs > MAX_RUNS || events < 1000 || optind != argc) {
		fputs(flight_usage, stderr);
		return false;
	}
	if (stat(trace_dir, &st) != 0 || !S_ISDIR(st.st_mode))
		trace_dir = "/tmp";
	return true;
}

struct snapshot_figures {
	double ms, cpu_ms; /* medians of the runs */
	uint64_t bytes;	   /* what one snapshot wrote */
};

static void print_json(const struct mode_rows *fit, const struct mode_rows *lap,
		       const struct snapshot_figures *s)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "flight");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "runs", runs);
	json_rows(&j, "fitting_bursts", fit);
	lk__json_int(&j, "long_burst_events", events);
	json_rows(&j, "long_burst", lap);
	lk__json_num(&j, "snapshot_ms", s->ms);
	lk__json_num(&j, "snapshot_cpu_ms", s->cpu_ms);
	lk__json_int(&j, "snapshot_rings_bytes", (long long)SNAP_THREADS * SNAP_RING);
	lk__json_int(&j, "snapshot_bytes", (long long)s->bytes);
	lk__json_end(&j);
}

/* Both kinds of burst, in both modes, each printed (text) as soon as it is measured. 0 or 1. */
static int measure_bursts(bool json, struct mode_rows *fit, struct mode_rows *lap)
{
	if (measure(time_fitting_bursts, "bursts that fit the ring", fit) != 0) {
		fprintf(stderr, "lowkey bench flight: cannot trace: %s\n", lk_last_error());
		return 1;
	}
	if (!json)
		text_rows("bursts of 16384 events (384 KiB), 20 ms apart:", fit);
	if (measure(time_long_burst, "bursts that lap the ring", lap) != 0) {
		fprintf(stderr, "lowkey bench flight: cannot trace: %s\n", lk_last_error());
		return 1;
	}
	if (!json) {
		snprintf(label_buf, sizeof(label_buf),
			 "one burst of %ld events (laps the ring), thread CPU time:", events);
		text_rows(label_buf, lap);
	}
	return 0;
}

static int flight_run(int argc, char **argv)
{
	struct mode_rows fit = { 0 }, lap = { 0 };
	struct snapshot_figures snap = { 0 };
	double snap_ms[MAX_RUNS];
	bool json = false;

	if (!parse_options(argc, argv, &json))
		return 2;
	if (lk_probe_enable("lkbench") < 0) {
		fprintf(stderr, "lowkey bench flight: %s\n", lk_last_error());
		return 1;
	}
	/* the text a part at a time, each as soon as it is measured */
	if (!json) {
		lkb_row("lowkey bench flight: the flight recorder's cost (medians of %d runs, both modes in each)\n",
			runs);
		lkb_row("machine: %s\n\n", lkb_machine());
		lkb_row("%-52s %10s\n", "event, 2 integers, 2 MiB ring", "ns/event");
	}
	if (measure_bursts(json, &fit, &lap))
		return 1;
	lkb_progress("snapshots of 64 MiB, %d runs", runs);
	snap.ms = time_snapshots(snap_ms, &snap.cpu_ms, &snap.bytes);
	if (snap.ms < 0) {
		fprintf(stderr, "lowkey bench flight: cannot snapshot: %s\n", lk_last_error());
		return 1;
	}
	if (json) {
		print_json(&fit, &lap, &snap);
		return 0;
	}
	lkb_row("\n%-52s %10.2f ms   (%.2f ms of the thread's CPU time; %.1f MiB written; target < 50 ms)\n",
		"snapshot of 8 threads x 8 MiB rings", snap.ms, snap.cpu_ms,
		(double)snap.bytes / (1 << 20));
	return 0;
}

LK_BENCH(flight_bench, "flight",
	 "the flight recorder's cost per event against streaming; a 64 MiB snapshot", flight_usage,
	 flight_run);
