// SPDX-License-Identifier: MIT
/*
 * lowkey stat and perf stat (Debian's linux-perf) count the same command alike.
 *
 * The command is counter_workload: 5,000 page faults, 2,000 pipe round trips with a child on one
 * CPU, 100 ms of CPU time. Each tool counts it three times, runs interleaved.
 *   page-faults: the medians of the two tools agree within 2% + 30 (both count from the exec; the
 *     same binary does the same faults).
 *   context-switches: how many there are depends on what else the machine runs at that moment,
 *     so each run is checked against itself: the workload prints the kernel's own tally of its
 *     switches (getrusage, its child's included) just before it exits, and the count must be
 *     within 2% + 20 of it (the tally misses the last few switches, the count those before the
 *     exec). A tool that counted the parent alone would be 2,000 short.
 *   task-clock is a time: besides the CPU time the workload burns it counts the interrupts and the
 *     hypervisor's steal time that fall into it, which depend on the machine's load at that moment,
 *     so each tool's task-clock must lie between the 100 ms the workload spins and the wall time
 *     of that run.
 * Each must also be at least what the workload is known to do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "helpers.h"
#include "run.h"

#define RUNS 3
#define EVENTS "page-faults,context-switches,task-clock"
#define WORKLOAD WORKLOAD_BIN, "faults", "5000", "pingpong", "2000", "spin", "100", "tally", "0"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median3(double *v)
{
	qsort(v, RUNS, sizeof(*v), cmp);
	return v[RUNS / 2];
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One run of a tool: its counts; task-clock and context-switches checked against the run itself. */
static void count_once(char **argv, double *faults, double *switches)
{
	static struct run_result r;
	double t0 = now_ms(), wall, clock;
	double tally =
		-1; /* cmocka 1.1.5 does not declare fail_msg() noreturn (clang: -Wsometimes-uninitialized) */
	const char *tool = argv[0][0] == 'p' ? "perf" : "lowkey";

	assert_int_equal(run_program(argv, NULL, &r), 0);
	wall = now_ms() - t0;
	if (r.status != 0)
		fail_msg("%s exited %d:\n%s", argv[0], r.status, r.err);
	*faults = csv_value(r.err, "page-faults");
	*switches = csv_value(r.err, "context-switches");
	clock = csv_value(r.err, "task-clock");
	if (*faults < 0 || *switches < 0 || clock < 0)
		fail_msg("%s printed no value for an event:\n%s", argv[0], r.err);
	if (!strstr(r.out, "switches ") ||
	    sscanf(strstr(r.out, "switches "), "switches %lf", &tally) != 1)
		fail_msg("%s: the workload printed no tally:\n%s", tool, r.out);
	print_message(
		"[  INFO    ] %-6s task-clock %8.2f ms, wall %8.2f ms; context-switches %.0f, "
		"the kernel's tally %.0f\n",
		tool, clock, wall, *switches, tally);
	if (clock < 100 || clock > wall)
		fail_msg("%s: task-clock %.2f ms outside [100 ms spun, %.2f ms wall]", tool, clock,
			 wall);
	if (fabs(*switches - tally) > tally * 0.02 + 20)
		fail_msg(
			"%s: context-switches %.0f, but the kernel's tally for the workload is %.0f",
			tool, *switches, tally);
}

static bool perf_works(void)
{
	static struct run_result r;
	char *argv[] = { "perf", "stat", "-x", ",", "-e", "task-clock", "--", "true", NULL };

	return run_program(argv, NULL, &r) == 0 && r.status == 0 &&
	       csv_value(r.err, "task-clock") >= 0;
}

static void within(const char *what, double ours, double perfs, double relative, double absolute)
{
	double bound = relative * perfs + absolute;

	print_message("[  INFO    ] %-17s lowkey %12.2f   perf %12.2f   bound +-%.2f\n", what, ours,
		      perfs, bound);
	if (ours < perfs - bound || ours > perfs + bound)
		fail_msg("%s: lowkey stat %.2f, perf stat %.2f: more than %.2f apart", what, ours,
			 perfs, bound);
}

static void agrees_with_perf_stat(void **state)
{
	char *ours[] = { LOWKEY_BIN, "stat", "-x", ",", "-e", EVENTS, "--", WORKLOAD, NULL };
	char *perfs[] = { "perf", "stat", "-x", ",", "-e", EVENTS, "--", WORKLOAD, NULL };
	double f[2][RUNS], s[2][RUNS];

	(void)state;
	if (!perf_works())
		skip_because("perf stat cannot run here (apt-get install linux-perf)");
	for (int i = 0; i < RUNS; i++) {
		count_once(ours, &f[0][i], &s[0][i]);
		count_once(perfs, &f[1][i], &s[1][i]);
	}
	within("page-faults", median3(f[0]), median3(f[1]), 0.02, 30);
	/* What the workload is known to do. */
	for (int i = 0; i < RUNS; i++) {
		assert_true(f[0][i] >= 5000);
		assert_true(s[0][i] >= 2000);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(agrees_with_perf_stat),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
