// SPDX-License-Identifier: MIT
/*
 * lowkey bench sched: what recording the threads' context switches (LK_TRACE_SCHED, `lowkey
 * trace --sched`) costs per switch, and how closely their times land on the trace's TSC clock.
 *
 * Two threads pinned to one CPU hand a futex word back and forth: every hand-off blocks one
 * thread and wakes the other, a context switch that the kernel records as a switch-out and a
 * switch-in. The same hand-offs are timed with no trace, with a trace running (every site off),
 * and with a trace that records context switches; the cost of --sched is the last minus the
 * second, per switch.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "internal/probe.h"

static const char sched_usage[] =
	"usage: lowkey bench sched [--switches N] [--runs R] [--dir DIR] [-j|--json]\n"
	"\n"
	"Two threads pinned to one CPU hand a futex word back and forth N times (default 200000): each\n"
	"hand-off is one context switch. Timed with no trace, with a trace running, and with a trace\n"
	"recording context switches (LK_TRACE_SCHED); prints the nanoseconds per switch of each (medians\n"
	"of R runs, default 7) and what recording the switches adds. Then the error of the switches'\n"
	"times on the trace's TSC clock: the width of the sync reads (CLOCK_MONOTONIC_RAW around the\n"
	"TSC) and how far a sync point lands from the line through the two before it, 100 ms apart.\n"
	"Traces go to DIR (default $TMPDIR or /tmp) and are removed.\n";

enum mode { NO_TRACE, TRACE, TRACE_SCHED, MODES };
static const char *const mode_names[MODES] = { "no trace", "trace, sites off", "trace --sched" };

struct pingpong {
	unsigned int word; /* 0: the first thread's turn, 1: the second's */
	long rounds;
	int cpu;
};

static void futex_wait(unsigned int *word, unsigned int value)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake(unsigned int *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Wait for my turn, then give the turn away: one hand-off each way per round. */
static void play(struct pingpong *p, unsigned int me)
{
	for (long i = 0; i < p->rounds; i++) {
		while (__atomic_load_n(&p->word, __ATOMIC_ACQUIRE) != me)
			futex_wait(&p->word, !me);
		__atomic_store_n(&p->word, !me, __ATOMIC_RELEASE);
		futex_wake(&p->word);
	}
}

static void *second_player(void *arg)
{
	struct pingpong *p = arg;

	lkb_pin(p->cpu);
	play(p, 1);
	return NULL;
}

/* ns per hand-off of 2 * rounds hand-offs */
static double time_pingpong(long rounds, int cpu)
{
	struct pingpong p = { 0, rounds, cpu };
	cpu_set_t all;
	pthread_t t;
	uint64_t t0, t1;

	/* only the players share the CPU: the trace's consumer thread, started before, runs anywhere */
	sched_getaffinity(0, sizeof(all), &all);
	lkb_pin(cpu);
	t0 = lkb_now_ns();
	pthread_create(&t, NULL, second_player, &p);
	play(&p, 0);
	pthread_join(t, NULL);
	t1 = lkb_now_ns();
	sched_setaffinity(0, sizeof(all), &all);
	return (double)(t1 - t0) / (double)(2 * rounds);
}

/* Switches out the trace at dir holds, and the switch records the kernel dropped. */
static uint64_t switches_in(const char *dir, uint64_t *sched_lost)
{
	struct lk_trace_file *tf;
	struct lk_trace_event ev;
	uint64_t n = 0;

	*sched_lost = 0;
	if (lk_trace_file_open(dir, &tf) != 0)
		return 0;
	while (lk_trace_file_next(tf, &ev) == 1)
		n += ev.type == LK_TRACE_EV_SWITCH_OUT;
	*sched_lost = lk_trace_file_get_info(tf)->sched_lost;
	lk_trace_file_close(tf);
	return n;
}

struct figures {
	double ns[MODES][64];
	uint64_t recorded, lost; /* switches out in the last --sched trace; lost records */
};

static int one_run(const char *dir, long rounds, int cpu, int run, struct figures *f)
{
	char path[4096], cmd[4200];

	for (int m = 0; m < MODES; m++) {
		struct lk_trace_config c = { .path = path,
					     .flags = m == TRACE_SCHED ? LK_TRACE_SCHED : 0 };
		struct lk_trace_stats st;

		lkb_progress("%s, run %d", mode_names[m], run + 1);
		snprintf(path, sizeof(path), "%s/lowkey-bench-sched-%d.ctf", dir, (int)getpid());
		if (m != NO_TRACE && lk_trace_start(&c) != 0) {
			fprintf(stderr, "lowkey bench sched: %s\n", lk_last_error());
			return -1;
		}
		f->ns[m][run] = time_pingpong(rounds, cpu);
		if (m == NO_TRACE)
			continue;
		lk_trace_stop();
		lk_trace_stats(&st);
		if (m == TRACE_SCHED) {
			uint64_t sched_lost;

			f->recorded = switches_in(path, &sched_lost);
			f->lost = st.lost + sched_lost;
		}
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
		if (system(cmd) != 0)
			return -1;
	}
	return 0;
}

/* ---- the clock mapping ---- */

static uint64_t raw_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct sync {
	double tsc, raw, width;
};

/* As sched.c takes them: the TSC between two clock reads, the tightest of 5. */
static struct sync sync_point(void)
{
	struct sync best = { 0, 0, 1e30 };

	for (int i = 0; i < 5; i++) {
		uint64_t a = raw_ns(), tsc = lk__probe_tsc(), b = raw_ns();

		if ((double)(b - a) < best.width)
			best = (struct sync){ (double)tsc, (double)a + (double)(b - a) / 2,
					      (double)(b - a) };
	}
	return best;
}

/*
 * Sync points 100 ms apart: the median width of the reads, and the median distance (in ns) of a
 * point from the line through the two before it (sched.c extrapolates at most that far).
 */
static void clock_error(int points, double *width, double *residual)
{
	struct sync s[64];
	double w[64], res[64], hz = (double)lk__probe_tsc_hz();
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	int n = 0;

	for (int i = 0; i < points; i++) {
		s[i] = sync_point();
		w[i] = s[i].width;
		if (i >= 2) {
			double slope =
				(s[i - 1].tsc - s[i - 2].tsc) / (s[i - 1].raw - s[i - 2].raw);
			double predicted = s[i - 1].tsc + (s[i].raw - s[i - 1].raw) * slope;
			double off = (s[i].tsc - predicted) / hz * 1e9;

			res[n++] = off < 0 ? -off : off;
		}
		nanosleep(&pause, NULL);
	}
	*width = lkb_median(w, (size_t)points);
	*residual = lkb_median(res, (size_t)n);
}

/* The text a part at a time, as soon as each is measured: the switches, then the clock. */
static void print_switches(const struct figures *f, int runs, long rounds, const double *median)
{
	printf("context switches: 2 threads on one CPU, %ld hand-offs a run, medians of %d runs (%s)\n",
	       2 * rounds, runs, lkb_machine());
	printf("\n%-24s %16s\n", "", "ns per switch");
	for (int m = 0; m < MODES; m++)
		printf("  %-22s %16.0f\n", mode_names[m], median[m]);
	printf("  %-22s %16.0f   (trace --sched minus trace)\n", "recording a switch",
	       median[TRACE_SCHED] - median[TRACE]);
	printf("\nthe last --sched trace holds %llu switches out for %ld hand-offs (%llu records lost)\n",
	       (unsigned long long)f->recorded, 2 * rounds, (unsigned long long)f->lost);
	fflush(stdout);
}

static void print_clock(double width, double residual)
{
	printf("clock: sync reads %.0f ns wide (median); a sync point lands %.0f ns from the line through the\n"
	       "two before it, 100 ms apart (median of 10): the error of a switch's time on the TSC clock\n",
	       width, residual);
}

static void print_json(const struct figures *f, int runs, long rounds, const double *median,
		       double width, double residual)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "sched");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "switches", 2 * rounds);
	lk__json_int(&j, "runs", runs);
	lk__json_array(&j, "rows");
	for (int m = 0; m < MODES; m++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "mode", mode_names[m]);
		lk__json_num(&j, "ns_per_switch", median[m]);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_num(&j, "sched_ns_per_switch", median[TRACE_SCHED] - median[TRACE]);
	lk__json_int(&j, "recorded_switches_out", (long long)f->recorded);
	lk__json_int(&j, "lost", (long long)f->lost);
	lk__json_num(&j, "sync_width_ns", width);
	lk__json_num(&j, "sync_residual_ns", residual);
	lk__json_end(&j);
}

static int sched_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "switches", required_argument, NULL, 'n' },
		{ "runs", required_argument, NULL, 'r' },
		{ "dir", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	static struct figures f;
	double median[MODES], width, residual;
	long switches = 200000;
	int c, runs = 7, cpu = 0;
	bool json = false;
	cpu_set_t mine;

	optind = 1;
	while ((c = getopt_long(argc, argv, "n:r:d:jh", options, NULL)) != -1) {
		switch (c) {
		case 'n':
			switches = atol(optarg);
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
			fputs(sched_usage, stdout);
			return 0;
		default:
			fputs(sched_usage, stderr);
			return 2;
		}
	}
	if (switches < 2 || switches > 100000000 || runs < 1 || runs > 64) {
		fputs(sched_usage, stderr);
		return 2;
	}
	if (sched_getaffinity(0, sizeof(mine), &mine) == 0)
		while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &mine))
			cpu++;
	for (int run = 0; run < runs; run++)
		if (one_run(dir, switches / 2, cpu, run, &f) != 0)
			return 1;
	for (int m = 0; m < MODES; m++)
		median[m] = lkb_median(f.ns[m], (size_t)runs);
	if (!json)
		print_switches(&f, runs, switches / 2, median);
	lkb_progress("the clock mapping");
	clock_error(12, &width, &residual);
	if (json)
		print_json(&f, runs, switches / 2, median, width, residual);
	else
		print_clock(width, residual);
	return 0;
}

LK_BENCH(sched_bench, "sched",
	 "context switches recorded with --sched: the cost per switch, the clock's error",
	 sched_usage, sched_main);
