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
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "probe_loop.h"

#define MAX_RUNS 64
#define SNAP_THREADS 8
#define SNAP_RING (8u << 20)

static int runs = 11;
static long events = 2000000;	/* 48 MB of records a burst: the 2 MiB ring laps 23 times */
static const char *trace_dir = "/dev/shm";

static void remove_trace(const char *dir)
{
	char cmd[1200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "lowkey bench flight: could not remove %s\n", dir);
}

/* ns per event of one burst in a trace started with flags; < 0 when it cannot trace. */
static double time_burst(unsigned int flags, int run, uint64_t *lost)
{
	struct lk_trace_config c = { .flags = flags };
	struct lk_trace_stats st;
	char dir[1024];
	uint64_t t0, t1;

	snprintf(dir, sizeof(dir), "%s/lowkey-bench-flight-%d-%d", trace_dir, (int)getpid(), run);
	c.path = dir;
	if (lk_trace_start(&c) != 0)
		return -1;
	lkb_loop_two_ints(1000);	/* the thread's ring, mapped and attached */
	t0 = lkb_now_ns();
	lkb_loop_two_ints((uint64_t)events);
	t1 = lkb_now_ns();
	lk_trace_stats(&st);
	*lost += st.lost;
	lk_trace_stop();
	remove_trace(dir);
	return (double)(t1 - t0) / (double)events;
}

/* ---- the snapshot of 64 MiB ---- */

static int snap_done;
static pthread_barrier_t snap_filled;

static void *fill_ring(void *arg)
{
	(void)arg;
	lkb_loop_two_ints(SNAP_RING / 24 * 5 / 4);	/* past full: every sub-buffer holds events */
	pthread_barrier_wait(&snap_filled);
	while (!__atomic_load_n(&snap_done, __ATOMIC_ACQUIRE))
		usleep(1000);	/* alive: an exited thread's ring is freed once written */
	return NULL;
}

/* Median ms of runs snapshots of SNAP_THREADS full rings; *bytes: what one wrote. */
static double time_snapshots(double *ms, uint64_t *bytes)
{
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
		uint64_t t0;

		snprintf(snap, sizeof(snap), "%s-%d", dir, r);
		lk_trace_stats(&before);
		t0 = lkb_now_ns();
		if (lk_trace_snapshot(snap) != 0)
			return -1;
		ms[r] = (double)(lkb_now_ns() - t0) / 1e6;
		lk_trace_stats(&after);
		*bytes = after.bytes - before.bytes;
		remove_trace(snap);
	}
	__atomic_store_n(&snap_done, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < SNAP_THREADS; i++)
		pthread_join(threads[i], NULL);
	pthread_barrier_destroy(&snap_filled);
	lk_trace_stop();
	return lkb_median(ms, (size_t)runs);
}

static const char flight_usage[] =
	"usage: lowkey bench flight [--runs N] [--events N] [--dir DIR] [-j|--json]\n"
	"\n"
	"What the flight recorder costs: the enabled event of `lowkey bench probe` (two integers) in\n"
	"bursts that lap the 2 MiB ring many times, in a streaming trace (the consumer writing CTF to\n"
	"DIR) and in an overwrite-mode one, alternating in each run; and the time lk_trace_snapshot()\n"
	"takes to write 8 threads' full 8 MiB rings (64 MiB) to DIR. Medians of the runs.\n"
	"\n"
	"  --runs N      repetitions (default 11)\n"
	"  --events N    events per timed burst (default 2000000)\n"
	"  --dir DIR     where the traces go (default /dev/shm, else /tmp)\n"
	"  -j, --json    print the figures as JSON\n";

static int flight_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "events", required_argument, NULL, 'e' },
		{ "dir", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	double stream[MAX_RUNS], over[MAX_RUNS], snap[MAX_RUNS], ratio[MAX_RUNS];
	double stream_ns, over_ns, ratio_med, snap_ms;
	uint64_t stream_lost = 0, over_lost = 0, bytes = 0;
	bool json = false;
	struct stat st;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:e:d:j", opts, NULL)) != -1) {
		switch (c) {
		case 'r': runs = atoi(optarg); break;
		case 'e': events = atol(optarg); break;
		case 'd': trace_dir = optarg; break;
		case 'j': json = true; break;
		default: fputs(flight_usage, stderr); return 2;
		}
	}
	if (runs < 1 || runs > MAX_RUNS || events < 1000 || optind != argc) {
		fputs(flight_usage, stderr);
		return 2;
	}
	if (stat(trace_dir, &st) != 0 || !S_ISDIR(st.st_mode))
		trace_dir = "/tmp";
	if (lk_probe_enable("lkbench") < 0) {
		fprintf(stderr, "lowkey bench flight: %s\n", lk_last_error());
		return 1;
	}
	for (int r = 0; r < runs; r++) {
		lkb_progress("per event, run %d of %d", r + 1, runs);
		if (r % 2) {
			over[r] = time_burst(LK_TRACE_OVERWRITE, r, &over_lost);
			stream[r] = time_burst(0, r, &stream_lost);
		} else {
			stream[r] = time_burst(0, r, &stream_lost);
			over[r] = time_burst(LK_TRACE_OVERWRITE, r, &over_lost);
		}
		if (stream[r] < 0 || over[r] < 0) {
			fprintf(stderr, "lowkey bench flight: cannot trace: %s\n", lk_last_error());
			return 1;
		}
		ratio[r] = over[r] / stream[r];
	}
	stream_ns = lkb_median(stream, (size_t)runs);
	over_ns = lkb_median(over, (size_t)runs);
	ratio_med = lkb_median(ratio, (size_t)runs);
	lkb_progress("snapshots of 64 MiB, %d runs", runs);
	snap_ms = time_snapshots(snap, &bytes);
	if (snap_ms < 0) {
		fprintf(stderr, "lowkey bench flight: cannot snapshot: %s\n", lk_last_error());
		return 1;
	}
	if (json) {
		struct lkb_json j;

		lkb_json_begin(&j, stdout);
		lkb_json_str(&j, "bench", "flight");
		lkb_json_str(&j, "machine", lkb_machine());
		lkb_json_int(&j, "runs", runs);
		lkb_json_int(&j, "events", events);
		lkb_json_num(&j, "stream_ns", stream_ns);
		lkb_json_num(&j, "overwrite_ns", over_ns);
		lkb_json_num(&j, "overwrite_over_stream", ratio_med);
		lkb_json_int(&j, "stream_lost", (long long)stream_lost);
		lkb_json_int(&j, "overwrite_lost", (long long)over_lost);
		lkb_json_num(&j, "snapshot_ms", snap_ms);
		lkb_json_int(&j, "snapshot_rings_bytes", (long long)SNAP_THREADS * SNAP_RING);
		lkb_json_int(&j, "snapshot_bytes", (long long)bytes);
		lkb_json_end(&j);
		return 0;
	}
	lkb_row("lowkey bench flight: the flight recorder's cost (median of %d runs)\n", runs);
	lkb_row("machine: %s\n\n", lkb_machine());
	lkb_row("%-52s %10s\n", "", "ns/event");
	lkb_row("%-52s %10.3f   (%llu lost)\n", "event, 2 integers, streaming trace (2 MiB ring)", stream_ns,
		(unsigned long long)stream_lost);
	lkb_row("%-52s %10.3f   (x%.3f of streaming, median of the runs' ratios)\n",
		"event, 2 integers, overwrite mode (2 MiB ring)", over_ns, ratio_med);
	lkb_row("\n%-52s %10.2f ms   (%.1f MiB written; target < 50 ms)\n", "snapshot of 8 threads x 8 MiB rings",
		snap_ms, (double)bytes / (1 << 20));
	return 0;
}

LK_BENCH(flight_bench, "flight", "issue 15: the flight recorder's cost per event against streaming; a 64 MiB snapshot",
	 flight_usage, flight_run);
