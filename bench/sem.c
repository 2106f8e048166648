// SPDX-License-Identifier: MIT
/*
 * lowkey bench sem: the experiment of Manfred Spraul's RFC series "ipc/sem.c: Optimization for
 * reducing spinlock contention", on this machine.
 *
 * 1. sembench (Chris Mason's, which Manfred Spraul ran for the series as `-t 250 -w 64 -o 0 -r 30`),
 *    re-done: THREADS workers each sleep on a semaphore of their own; a main thread finds up to
 *    WAKE of them asleep and wakes them with one call (one semop with WAKE operations). Workers
 *    count their wake-ups ("burns"); the main thread counts the rounds in which it found nobody
 *    to wake ("main thread burns"). The same run is made with the kernel's System V semaphores
 *    (ipc), with lk_semset (lowkey), and on request with bare futexes (futex) and with polling
 *    workers (nanosleep). Beside each: the series' contention figures -- free, contended, wait,
 *    avg, 1/1000 of CPU time -- for lk_semset from lk_semset_stats(), and for the kernel's locks
 *    from the lock:contention_begin/end tracepoints (root or CAP_PERFMON; every kernel lock the
 *    benchmark's threads waited for, which under ipc is mostly the semaphore array's).
 * 2. The cost of an uncontended lock + unlock: pthread_mutex, lk_mutex, and pthread_mutex in a
 *    program run under `lowkey locks` (liblowkey-locks.so preloaded).
 * 3. A lock-heavy program, bare and under `lowkey locks`: the slowdown the profiler costs.
 *
 * Modes run interleaved, --runs times; figures are medians.
 * Modes run interleaved, --runs times; figures are medians. The parts: sem_sembench.c (the
 * workload), sem_kernel_locks.c (the kernel's contention), sem_lock_costs.c (2 and 3),
 * sem_print.c (text and JSON).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "sem_bench.h"

const char *const sem_mode_names[NMODES] = { "ipc", "lowkey", "futex", "nanosleep" };

static const char sem_usage[] =
	"usage: lowkey bench sem [-t THREADS] [-w WAKE] [-r SECONDS] [-o ipc|lowkey|futex|nanosleep|all]\n"
	"                        [--bind] [--runs N] [--no-locks] [-j|--json]\n"
	"\n"
	"The experiment of Manfred Spraul's RFC series \"ipc/sem.c: Optimization for reducing spinlock\n"
	"contention\". sembench: THREADS workers (default 250) each sleep on their own semaphore;\n"
	"a main thread wakes WAKE (default 64, at most 128) of them at a time, for SECONDS (default 10) per\n"
	"run. Prints worker burns (wake-ups) per second, main thread burns (rounds that found nobody to\n"
	"wake), and the lock contention figures of the series -- free, contended, wait, avg, 1/1000 of CPU\n"
	"time -- for lk_semset (its own counters) and for the kernel's locks (lock:contention_begin/end\n"
	"tracepoints; needs root or CAP_PERFMON). -o picks one implementation; the default runs the\n"
	"kernel's SysV semaphores (ipc) and lk_semset (lowkey) interleaved; all adds futex and nanosleep.\n"
	"--bind pins the main thread to CPU 0 and the workers to the others, as the series' runs did.\n"
	"\n"
	"Then (unless --no-locks) the cost of an uncontended lock + unlock of pthread_mutex, lk_mutex,\n"
	"and pthread_mutex under `lowkey locks`, and a lock-heavy program bare and under `lowkey locks`.\n"
	"Each figure is the median of --runs runs (default 3). Run it alone on the machine.\n";

static bool parse_int(const char *s, int min, int max, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == 0 || *end || v < min || v > max)
		return false;
	*out = (int)v;
	return true;
}

/* -o: one mode's name ("0" for ipc, as sembench's -o 0), or all. False if it names none. */
static bool parse_modes(const char *arg, bool want[NMODES])
{
	memset(want, 0, sizeof(bool) * NMODES);
	if (strcmp(arg, "all") == 0) {
		for (int i = 0; i < NMODES; i++)
			want[i] = true;
		return true;
	}
	for (int i = 0; i < NMODES; i++)
		want[i] = strcmp(arg, sem_mode_names[i]) == 0 || (i == 0 && strcmp(arg, "0") == 0);
	return want[0] || want[1] || want[2] || want[3];
}

/* A lock-cost child (--child WHAT): its exit status. */
static int run_child_part(const char *what)
{
	if (strcmp(what, "locks") == 0)
		return sem_child_locks();
	if (strcmp(what, "heavy") == 0 || strcmp(what, "empty") == 0)
		return sem_child_heavy(strcmp(what, "empty") == 0);
	return 2;
}

/*
 * The options into *o: true to run the bench; false to exit with *status (2: usage; a child's
 * status when this process is one of the lock-cost children).
 */
static bool parse_options(int argc, char **argv, struct sem_options *o, int *status)
{
	static const struct option opts[] = {
		{ "bind", no_argument, NULL, 'b' },	   { "runs", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },	   { "no-locks", no_argument, NULL, 'L' },
		{ "child", required_argument, NULL, 'C' }, { NULL, 0, NULL, 0 },
	};
	bool ok = true;
	int c;

	*o = (struct sem_options){ .nthreads = 250,
				   .wake = 64,
				   .seconds = 10,
				   .runs = 3,
				   .locks = true,
				   .want = { true, true, false, false } };
	optind = 1;
	while (ok && (c = getopt_long(argc, argv, "t:w:r:o:j", opts, NULL)) != -1) {
		switch (c) {
		case 'C':
			*status = run_child_part(optarg);
			return false;
		case 't':
			ok = parse_int(optarg, 1, 32000, &o->nthreads);
			break;
		case 'w':
			ok = parse_int(optarg, 1, LK_SEMOPM, &o->wake);
			break;
		case 'r':
			ok = parse_int(optarg, 1, 3600, &o->seconds);
			break;
		case 'o':
			ok = parse_modes(optarg, o->want);
			break;
		case 'b':
			o->bind = true;
			break;
		case 'n':
			ok = parse_int(optarg, 1, 15, &o->runs);
			break;
		case 'j':
			o->json = true;
			break;
		case 'L':
			o->locks = false;
			break;
		default:
			ok = false;
			break;
		}
	}
	if (!ok || optind != argc) {
		fputs(sem_usage, stderr);
		*status = 2;
		return false;
	}
	return true;
}

static int by_rate(const void *a, const void *b)
{
	const struct run_result *x = a, *y = b;
	double rx = (double)x->burns / x->seconds, ry = (double)y->burns / y->seconds;

	return (rx > ry) - (rx < ry);
}

static void pick_median(struct run_result *runs, int n, struct mode_result *m)
{
	qsort(runs, (size_t)n, sizeof(*runs), by_rate);
	m->ran = true;
	m->median = runs[n / 2];
	m->burns_per_s = (double)m->median.burns / m->median.seconds;
}

/* Every wanted mode, --runs times, interleaved so that drift on a shared machine hits every
 * implementation alike; each mode's median run into m. 0, or 1 when a run failed. */
static int run_modes(const struct sem_options *o, struct mode_result *m)
{
	struct run_result *runs_of[NMODES] = { 0 };
	int err = 0;

	for (int i = 0; i < NMODES && !err; i++) {
		runs_of[i] = calloc((size_t)o->runs, sizeof(struct run_result));
		if (!runs_of[i])
			err = 1;
	}
	for (int r = 0; r < o->runs && !err; r++) {
		for (int i = 0; i < NMODES && !err; i++) {
			if (!o->want[i])
				continue;
			lkb_progress("run %d of %d: %s", r + 1, o->runs, sem_mode_names[i]);
			if (sembench_run((enum mode)i, o, &runs_of[i][r]) != 0) {
				fprintf(stderr, "lowkey bench sem: the %s run failed\n",
					sem_mode_names[i]);
				err = 1;
			}
		}
	}
	for (int i = 0; i < NMODES; i++) {
		if (o->want[i] && !err)
			pick_median(runs_of[i], o->runs, &m[i]);
		free(runs_of[i]);
	}
	return err;
}

static int sem_run(int argc, char **argv)
{
	struct mode_result results[NMODES] = { 0 };
	struct sem_options o;
	struct lock_costs costs;
	int status;

	if (!parse_options(argc, argv, &o, &status))
		return status;
	if (!o.json)
		sem_print_header(&o);
	if (run_modes(&o, results))
		return 1;
	if (!o.json)
		sem_print_modes(&o, results);
	lkb_progress("lock costs, %d runs", o.runs);
	if (o.locks && sem_measure_lock_costs(o.runs, &costs) != 0) {
		fprintf(stderr, "lowkey bench sem: the lock-cost children failed\n");
		return 1;
	}
	if (o.json)
		sem_print_json(&o, results, o.locks ? &costs : NULL);
	else if (o.locks)
		sem_print_lock_costs(&o, &costs);
	return 0;
}

LK_BENCH(sem_bench, "sem",
	 "ipc/sem.c contention RFC: sembench, SysV vs lk_semset, with lock figures; lock costs",
	 sem_usage, sem_run);
