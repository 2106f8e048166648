// SPDX-License-Identifier: MIT
/*
 * lowkey bench cputime: the experiment of Shaohua Li's patch "X86: Add a thread cpu time
 * implementation to vDSO" (a thread CPU time clock without a system call) on this machine.
 *
 * 1. Cost: the patch's loop (call the clock, add the result to a sum) for each way of reading
 *    time, ns per call. The length adapts to ~20 ms per run; rows are interleaved; medians of
 *    repeated runs. Beside them, the patch's 100M-call figures.
 * 2. Accuracy: lk_thread_cputime_ns() read between two clock_gettime(CLOCK_THREAD_CPUTIME_ID) over a
 *    workload of CPU bursts, sleeps, yields, migrations and a competing thread on the same CPU;
 *    |lk - midpoint|: median, p99, max. The same for lk_now_ns() against CLOCK_MONOTONIC.
 * 3. Set-up: the first call in a new thread.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_RDTSC 1
#else
#define HAVE_RDTSC 0
#endif

#include <lowkey/lowkey.h>

#include "bench.h"
#include "internal/clock.h"

/* The vDSO patch's figures: 100,000,000 calls of clock_gettime(CLOCK_THREAD_CPUTIME_ID): 63.4 s
 * real before the patch, 4.9 s with its vDSO. */
#define PUBLISHED_CALLS 100000000.0
#define PUBLISHED_SYSCALL_S 63.428
#define PUBLISHED_VDSO_S 4.912

/* ---- 1. the loops ---- */

static int task_clock_fd = -1;

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

#define LOOP(fn, EXPR)                                           \
	static __attribute__((noinline)) uint64_t fn(uint64_t n) \
	{                                                        \
		uint64_t sum = 0;                                \
		for (uint64_t i = 0; i < n; i++) {               \
			EXPR;                                    \
		}                                                \
		return sum;                                      \
	}

LOOP(loop_thread_syscall, struct timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
     sum += ts_ns(&ts))
LOOP(loop_getrusage, struct rusage ru; getrusage(RUSAGE_THREAD, &ru);
     sum += (uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec)
LOOP(loop_perf_read, uint64_t count = 0;
     if (read(task_clock_fd, &count, sizeof(count)) > 0) sum += count)
LOOP(loop_lk_cputime, sum += lk_thread_cputime_ns())
LOOP(loop_monotonic, struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); sum += ts_ns(&ts))
LOOP(loop_lk_now, sum += lk_now_ns())
#if HAVE_RDTSC
LOOP(loop_rdtsc, sum += __rdtsc())
#endif
LOOP(loop_lk_cycles, sum += lk_cycles())

struct cost_row {
	const char *name;
	const char *key; /* JSON */
	uint64_t (*fn)(uint64_t);
	uint64_t iters;
	double *samples;
	double ns; /* median ns per call */
};

static struct cost_row rows[] = {
	{ "clock_gettime(CLOCK_THREAD_CPUTIME_ID)", "clock_gettime_thread", loop_thread_syscall },
	{ "getrusage(RUSAGE_THREAD)", "getrusage_thread", loop_getrusage },
	{ "read() of a task-clock perf fd", "perf_read", loop_perf_read },
	{ "lk_thread_cputime_ns()", "lk_thread_cputime_ns", loop_lk_cputime },
	{ "clock_gettime(CLOCK_MONOTONIC)", "clock_gettime_monotonic", loop_monotonic },
	{ "lk_now_ns()", "lk_now_ns", loop_lk_now },
#if HAVE_RDTSC
	{ "bare rdtsc", "rdtsc", loop_rdtsc },
#else
	{ "bare rdtsc", "rdtsc", NULL },
#endif
	{ "lk_cycles()", "lk_cycles", loop_lk_cycles },
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))
enum { ROW_SYSCALL, ROW_RUSAGE, ROW_PERF, ROW_LK, ROW_MONO, ROW_NOW, ROW_RDTSC, ROW_CYCLES };

static volatile uint64_t sink;

static double time_row(const struct cost_row *r, uint64_t iters)
{
	uint64_t t0 = lkb_now_ns();

	sink += r->fn(iters);
	return (double)(lkb_now_ns() - t0) / (double)iters;
}

static uint64_t calibrate(const struct cost_row *r, uint64_t target_ns)
{
	uint64_t iters = 100;

	for (;;) {
		uint64_t t0 = lkb_now_ns(), dt;

		sink += r->fn(iters);
		dt = lkb_now_ns() - t0;
		if (dt >= target_ns / 4 || iters >= (1ull << 36))
			return iters * target_ns / (dt ? dt : 1) + 1;
		iters *= 4;
	}
}

static int measure_costs(int runs)
{
	task_clock_fd = lk__task_clock_open();
	for (size_t i = 0; i < NROWS; i++) {
		rows[i].samples = calloc((size_t)runs, sizeof(double));
		if (!rows[i].samples)
			return -ENOMEM;
		if (rows[i].fn && !(i == ROW_PERF && task_clock_fd < 0))
			rows[i].iters = calibrate(&rows[i], 20 * 1000 * 1000);
	}
	for (int run = 0; run < runs; run++)
		for (size_t i = 0; i < NROWS; i++)
			if (rows[i].iters)
				rows[i].samples[run] = time_row(&rows[i], rows[i].iters);
	for (size_t i = 0; i < NROWS; i++)
		rows[i].ns = rows[i].iters ? lkb_median(rows[i].samples, (size_t)runs) :
					     __builtin_nan("");
	if (task_clock_fd >= 0)
		close(task_clock_fd);
	return 0;
}

/* ---- 2. accuracy ---- */

struct error_stats {
	double p50, p99, p999, max;  /* |value - midpoint of the reference bracket|, ns */
	double bias_p50;	     /* median of value - midpoint, signed */
	double bracket_p50;	     /* width of the reference bracket */
	double below_max, above_max; /* farthest a value fell below / above its bracket */
	size_t below_n;		     /* values below the reference read before them */
	size_t samples;
};

/* outside: < 0 below the bracket, > 0 above it; sgn: value - midpoint. */
static void summarize(double *err, double *bracket, double *outside, double *sgn, size_t n,
		      struct error_stats *s)
{
	s->samples = n;
	s->bias_p50 = lkb_median(sgn, n);
	s->below_n = 0;
	for (size_t i = 0; i < n; i++)
		s->below_n += outside[i] < 0;
	s->p50 = lkb_percentile(err, n, 50);
	s->p99 = lkb_percentile(err, n, 99);
	s->p999 = lkb_percentile(err, n, 99.9);
	s->max = lkb_percentile(err, n, 100);
	s->bracket_p50 = lkb_median(bracket, n);
	lkb_percentile(outside, n, 0); /* sorts */
	s->below_max = outside[0] < 0 ? -outside[0] : 0;
	s->above_max = outside[n - 1] > 0 ? outside[n - 1] : 0;
}

/* Time the hypervisor ran something else on this VM's CPUs (/proc/stat "steal"), in ms. */
static double steal_ms(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "re");
	int n = 0;

	if (f) {
		n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]);
		fclose(f);
	}
	return n == 8 ? (double)v[7] * 1000.0 / (double)sysconf(_SC_CLK_TCK) : __builtin_nan("");
}

static void sample(uint64_t (*lk)(void), clockid_t ref, double *err, double *bracket,
		   double *outside, double *sgn)
{
	struct timespec t0, t1;
	uint64_t a, b0, b1, mid;

	clock_gettime(ref, &t0);
	a = lk();
	clock_gettime(ref, &t1);
	b0 = ts_ns(&t0);
	b1 = ts_ns(&t1);
	mid = b0 + (b1 - b0) / 2;
	*err = a > mid ? (double)(a - mid) : (double)(mid - a);
	*sgn = a > mid ? *err : -*err;
	*bracket = (double)(b1 - b0);
	*outside = a < b0 ? -(double)(b0 - a) : a > b1 ? (double)(a - b1) : 0;
}

static void burn_us(unsigned us)
{
	struct timespec ts;
	uint64_t end;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	end = ts_ns(&ts) + us * 1000ull;
	do
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	while (ts_ns(&ts) < end);
}

static int competitor_stop;

/* On the measuring thread's CPU: 2 ms of spinning, 2 ms of sleep, so the measured thread is
 * preempted, and runs alone, by turns. */
static void *competitor(void *arg)
{
	lkb_pin(*(int *)arg);
	while (!__atomic_load_n(&competitor_stop, __ATOMIC_RELAXED)) {
		burn_us(2000);
		usleep(2000);
	}
	return NULL;
}

static double accuracy_steal_ms;

static int measure_accuracy(size_t n, int ncpus, struct error_stats *cpu, struct error_stats *now,
			    struct lk_clock_info *before, struct lk_clock_info *after)
{
	double *err = calloc(n, sizeof(double)), *bracket = calloc(n, sizeof(double));
	double *outside = calloc(n, sizeof(double)), *sgn = calloc(n, sizeof(double));
	int cpu0 = 0;
	unsigned seed = 1;
	pthread_t comp;
	bool have_comp;

	if (!err || !bracket || !outside || !sgn) {
		free(err), free(bracket), free(outside), free(sgn);
		return -ENOMEM;
	}
	lkb_pin(0);
	have_comp = pthread_create(&comp, NULL, competitor, &cpu0) == 0;
	lk_clock_info(before);
	accuracy_steal_ms = steal_ms();
	for (size_t i = 0; i < n; i++) {
		sample(lk_thread_cputime_ns, CLOCK_THREAD_CPUTIME_ID, &err[i], &bracket[i],
		       &outside[i], &sgn[i]);
		switch (rand_r(&seed) % 32) {
		case 0:
			burn_us((unsigned)(rand_r(&seed) % 1000));
			break; /* a burst */
		case 1:
			usleep((useconds_t)(rand_r(&seed) % 500));
			break; /* a sleep */
		case 2:
			sched_yield();
			break;
		case 3:
			if (ncpus > 1 && rand_r(&seed) % 8 == 0)
				lkb_pin(rand_r(&seed) % 2); /* a migration */
			break;
		default:
			break;
		}
	}
	lk_clock_info(after);
	accuracy_steal_ms = steal_ms() - accuracy_steal_ms;
	summarize(err, bracket, outside, sgn, n, cpu);
	for (size_t i = 0; i < n; i++) {
		sample(lk_now_ns, CLOCK_MONOTONIC, &err[i], &bracket[i], &outside[i], &sgn[i]);
		if (rand_r(&seed) % 32 == 0)
			usleep((useconds_t)(rand_r(&seed) % 500));
	}
	summarize(err, bracket, outside, sgn, n, now);
	if (have_comp) {
		__atomic_store_n(&competitor_stop, 1, __ATOMIC_RELAXED);
		pthread_join(comp, NULL);
	}
	lkb_pin(0);
	free(err), free(bracket), free(outside), free(sgn);
	return 0;
}

/* ---- 3. set-up ---- */

static void *first_call(void *arg)
{
	uint64_t t0 = lkb_now_ns();

	sink += lk_thread_cputime_ns();
	*(double *)arg = (double)(lkb_now_ns() - t0);
	return NULL;
}

static double measure_setup_us(int threads)
{
	double *v = calloc((size_t)threads, sizeof(double)), med;

	if (!v)
		return __builtin_nan("");
	for (int i = 0; i < threads; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, first_call, &v[i]) != 0)
			v[i] = __builtin_nan("");
		else
			pthread_join(t, NULL);
	}
	med = lkb_median(v, (size_t)threads) / 1000.0;
	free(v);
	return med;
}

/* ---- output ---- */

static double ratio(int a, int b)
{
	return rows[a].ns / rows[b].ns;
}

/* The text, a section as soon as it is measured: the costs, the accuracy, the setup. */
static void print_costs(int runs, const struct lk_clock_info *info)
{
	lkb_row("lowkey bench cputime: the thread CPU time vDSO patch's experiment on this machine\n");
	lkb_row("machine: %s\n", lkb_machine());
	lkb_row("thread CPU time: method %s: %s\n", info->cputime_name, info->cputime_reason);
	lkb_row("lk_now_ns:       method %s: %s\n", info->now_name, info->now_reason);
	lkb_row("counter:         %s at %.6f GHz, %s\n", info->counter_name,
		(double)info->tsc_hz / 1e9, info->tsc_hz_source);
	lkb_row("method:  the patch's loop (call, add to a sum), ~20 ms per run, median of %d runs, rows "
		"interleaved\n\n",
		runs);

	lkb_row("%-40s %10s %12s %14s\n", "", "ns/call", "x rdtsc", "100M calls, s");
	for (size_t i = 0; i < NROWS; i++) {
		if (__builtin_isnan(rows[i].ns)) {
			lkb_row("%-40s %10s\n", rows[i].name, "n/a");
			continue;
		}
		lkb_row("%-40s %10.2f %12.2f %14.2f\n", rows[i].name, rows[i].ns,
			ratio((int)i, ROW_RDTSC), rows[i].ns * PUBLISHED_CALLS / 1e9);
	}
	lkb_row("\n\"X86: Add a thread cpu time implementation to vDSO\" (100M calls of\n"
		"clock_gettime(CLOCK_THREAD_CPUTIME_ID), real time):\n");
	lkb_row("  %-30s %8.1f s   here: %6.1f s (clock_gettime)\n",
		"before its patch (system call)", PUBLISHED_SYSCALL_S,
		rows[ROW_SYSCALL].ns * PUBLISHED_CALLS / 1e9);
	lkb_row("  %-30s %8.1f s   here: %6.1f s (lk_thread_cputime_ns)\n", "with its vDSO patch",
		PUBLISHED_VDSO_S, rows[ROW_LK].ns * PUBLISHED_CALLS / 1e9);
	lkb_row("  %-30s %8.1fx   here: %6.1fx\n", "speed-up",
		PUBLISHED_SYSCALL_S / PUBLISHED_VDSO_S, ratio(ROW_SYSCALL, ROW_LK));

	lkb_row("\ntargets: lk_thread_cputime_ns >= 40x faster than clock_gettime: %.1fx (%s); "
		"within 1.5x of bare rdtsc: %.2fx (%s)\n",
		ratio(ROW_SYSCALL, ROW_LK), ratio(ROW_SYSCALL, ROW_LK) >= 40 ? "met" : "missed",
		ratio(ROW_LK, ROW_RDTSC), ratio(ROW_LK, ROW_RDTSC) <= 1.5 ? "met" : "missed");
	lkb_row("         (a bare rdtsc is %.1fx faster than clock_gettime here: no TSC-based clock can "
		"do better)\n",
		ratio(ROW_SYSCALL, ROW_RDTSC));
}

static void print_accuracy(const struct lk_clock_info *info, const struct error_stats *cpu,
			   const struct error_stats *now, const struct lk_clock_info *before,
			   const struct lk_clock_info *after)
{
	lkb_row("\naccuracy (ns; |value - midpoint of two reference reads|; bursts, sleeps, yields, "
		"migrations, a competing thread)\n");
	lkb_row("%-38s %7s %7s %7s %7s %7s %7s %7s %7s %7s\n", "", "median", "p99", "p99.9", "max",
		"bias", "bracket", "below", "n below", "above");
	lkb_row("%-38s %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7zu %7.0f\n",
		"lk_thread_cputime_ns vs clock_gettime", cpu->p50, cpu->p99, cpu->p999, cpu->max,
		cpu->bias_p50, cpu->bracket_p50, cpu->below_max, cpu->below_n, cpu->above_max);
	lkb_row("%-38s %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7.0f %7zu %7.0f\n",
		"lk_now_ns vs CLOCK_MONOTONIC", now->p50, now->p99, now->p999, now->max,
		now->bias_p50, now->bracket_p50, now->below_max, now->below_n, now->above_max);
	lkb_row("(bias: median of value - midpoint, signed; bracket: median width of the two reference "
		"reads;\n below/above: farthest a value fell outside them; n below: values below the "
		"reference read before them.\n above includes hypervisor steal: %.0f ms of it on this VM "
		"during the CPU-time samples)\n",
		accuracy_steal_ms);
	lkb_row("targets: median <= 1000 ns: %s; p99 <= 20000 ns: %s   (%zu samples; the max includes "
		"reference reads the host interrupted)\n",
		cpu->p50 <= 1000 ? "met" : "missed", cpu->p99 <= 20000 ? "met" : "missed",
		cpu->samples);
	lkb_row("during the run: %llu rebases after a switch, %llu at the %llu µs age limit, %llu retried, "
		"%llu answered by the system call\n",
		(unsigned long long)(after->rebases_switch - before->rebases_switch),
		(unsigned long long)(after->rebases_age - before->rebases_age),
		(unsigned long long)(info->rebase_ns / 1000),
		(unsigned long long)(after->rebase_retries - before->rebase_retries),
		(unsigned long long)(after->syscall_reads - before->syscall_reads));
	lkb_row("lk_now_ns: %llu resyncs so far, largest error seen at a resync %llu ns\n",
		(unsigned long long)after->now_resyncs,
		(unsigned long long)after->now_max_error_ns);
}

static void print_setup(double setup_us)
{
	lkb_row("\nfirst call in a new thread (perf_event_open + mmap + first base): %.1f µs median\n",
		setup_us);
}

static void json_stats(struct lk__json *j, const char *key, const struct error_stats *s)
{
	lk__json_object(j, key);
	lk__json_num(j, "median_ns", s->p50);
	lk__json_num(j, "p99_ns", s->p99);
	lk__json_num(j, "p99_9_ns", s->p999);
	lk__json_num(j, "max_ns", s->max);
	lk__json_num(j, "bias_median_ns", s->bias_p50);
	lk__json_num(j, "reference_bracket_median_ns", s->bracket_p50);
	lk__json_num(j, "below_bracket_max_ns", s->below_max);
	lk__json_int(j, "below_bracket_samples", (long long)s->below_n);
	lk__json_num(j, "above_bracket_max_ns", s->above_max);
	lk__json_int(j, "samples", (long long)s->samples);
	lk__json_close(j);
}

static void print_json(int runs, const struct lk_clock_info *info, const struct error_stats *cpu,
		       const struct error_stats *now, const struct lk_clock_info *before,
		       const struct lk_clock_info *after, double setup_us)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "cputime");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "runs", runs);
	lk__json_str(&j, "cputime_method", info->cputime_name);
	lk__json_str(&j, "cputime_reason", info->cputime_reason);
	lk__json_str(&j, "now_method", info->now_name);
	lk__json_str(&j, "counter", info->counter_name);
	lk__json_int(&j, "counter_hz", (long long)info->tsc_hz);
	lk__json_str(&j, "counter_hz_source", info->tsc_hz_source);
	lk__json_array(&j, "cost");
	for (size_t i = 0; i < NROWS; i++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "row", rows[i].key);
		lk__json_num(&j, "ns_per_call", rows[i].ns);
		lk__json_num(&j, "x_rdtsc", ratio((int)i, ROW_RDTSC));
		lk__json_num(&j, "s_per_100M_calls", rows[i].ns * PUBLISHED_CALLS / 1e9);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_object(&j, "published_s_per_100M_calls");
	lk__json_num(&j, "syscall", PUBLISHED_SYSCALL_S);
	lk__json_num(&j, "vdso_patch", PUBLISHED_VDSO_S);
	lk__json_close(&j);
	lk__json_num(&j, "speedup_vs_clock_gettime", ratio(ROW_SYSCALL, ROW_LK));
	lk__json_num(&j, "x_bare_rdtsc", ratio(ROW_LK, ROW_RDTSC));
	json_stats(&j, "cputime_error", cpu);
	json_stats(&j, "now_error", now);
	lk__json_int(&j, "rebases_switch",
		     (long long)(after->rebases_switch - before->rebases_switch));
	lk__json_int(&j, "rebases_age", (long long)(after->rebases_age - before->rebases_age));
	lk__json_int(&j, "rebase_retries",
		     (long long)(after->rebase_retries - before->rebase_retries));
	lk__json_int(&j, "syscall_reads",
		     (long long)(after->syscall_reads - before->syscall_reads));
	lk__json_int(&j, "now_max_error_ns", (long long)after->now_max_error_ns);
	lk__json_num(&j, "steal_ms_during_accuracy", accuracy_steal_ms);
	lk__json_num(&j, "thread_setup_us", setup_us);
	lk__json_end(&j);
}

static const char cputime_usage[] =
	"usage: lowkey bench cputime [--runs N] [--samples N] [-j|--json]\n"
	"\n"
	"Re-runs the experiment of Shaohua Li's patch \"X86: Add a thread cpu time implementation to\n"
	"vDSO\" on this machine: the patch's loop over every way of reading a thread's CPU time\n"
	"(clock_gettime, getrusage, read() of a perf fd, lk_thread_cputime_ns) and the time\n"
	"(clock_gettime(CLOCK_MONOTONIC), lk_now_ns, a bare rdtsc), then the error of\n"
	"lk_thread_cputime_ns against clock_gettime(CLOCK_THREAD_CPUTIME_ID) over a workload of\n"
	"bursts, sleeps, yields and migrations beside a competing thread, and the cost of a thread's\n"
	"first call. Prints medians beside the patch's published 100M-call times. LOWKEY_CLOCK and\n"
	"LOWKEY_CLOCK_NOW select the methods measured (see `lowkey clock --help`).\n"
	"\n"
	"  --runs N      repetitions of each cost row (default 15)\n"
	"  --samples N   accuracy samples (default 50000)\n"
	"  -j, --json    print the figures as JSON\n";

static int cputime_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "samples", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct lk_clock_info info, before, after;
	struct error_stats cpu, now;
	int runs = 15, c, err;
	long samples = 50000;
	bool json = false;
	double setup_us;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:s:j", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			runs = atoi(optarg);
			break;
		case 's':
			samples = atol(optarg);
			break;
		case 'j':
			json = true;
			break;
		default:
			fputs(cputime_usage, stderr);
			return 2;
		}
	}
	if (runs < 1 || samples < 100 || optind != argc) {
		fputs(cputime_usage, stderr);
		return 2;
	}
	lkb_pin(0);
	lk_clock_info(&info);
	lkb_progress("cost of each clock, %d runs", runs);
	err = measure_costs(runs);
	if (!err && !json)
		print_costs(runs, &info);
	lkb_progress("accuracy, %ld samples", samples);
	if (!err)
		err = measure_accuracy((size_t)samples, lkb_ncpus(), &cpu, &now, &before, &after);
	if (err) {
		fprintf(stderr, "lowkey bench cputime: %s\n", lk_strerror(err));
		return 1;
	}
	if (!json)
		print_accuracy(&info, &cpu, &now, &before, &after);
	lkb_progress("first call in a new thread");
	setup_us = measure_setup_us(200);
	if (json)
		print_json(runs, &info, &cpu, &now, &before, &after, setup_us);
	else
		print_setup(setup_us);
	return 0;
}

LK_BENCH(cputime_bench, "cputime",
	 "the thread CPU time vDSO patch's loop: CPU time and a TSC clock without a system call",
	 cputime_usage, cputime_run);
