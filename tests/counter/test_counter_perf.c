// SPDX-License-Identifier: MIT
/*
 * lowkey stat and perf stat (Debian's linux-perf) count the same command alike.
 *
 * The command is counter_workload: 5,000 page faults, 2,000 pipe round trips with a child on one
 * CPU, 100 ms of CPU time. Each tool counts it three times; the medians must agree within:
 *   page-faults       2% + 30    (both count from the exec; the same binary does the same faults)
 *   context-switches  25% + 100  (scheduling on a shared machine varies from run to run)
 *   task-clock        15% + 5 ms (the spin is CPU time, so both see about 100 ms and a start-up)
 * and each must be at least what the workload is known to do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <cmocka.h>

#include "helpers.h"
#include "run.h"

#define RUNS 3
#define EVENTS "page-faults,context-switches,task-clock"
#define WORKLOAD WORKLOAD_BIN, "faults", "5000", "pingpong", "2000", "spin", "100"

struct counts {
	double faults, switches, clock_ms;
};

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

static void count_with(char **argv, struct counts *median)
{
	static struct run_result r;
	double f[RUNS], s[RUNS], c[RUNS];

	for (int i = 0; i < RUNS; i++) {
		assert_int_equal(run_program(argv, NULL, &r), 0);
		if (r.status != 0)
			fail_msg("%s exited %d:\n%s", argv[0], r.status, r.err);
		f[i] = csv_value(r.err, "page-faults");
		s[i] = csv_value(r.err, "context-switches");
		c[i] = csv_value(r.err, "task-clock");
		if (f[i] < 0 || s[i] < 0 || c[i] < 0)
			fail_msg("%s printed no value for an event:\n%s", argv[0], r.err);
	}
	median->faults = median3(f);
	median->switches = median3(s);
	median->clock_ms = median3(c);
}

static bool perf_works(void)
{
	static struct run_result r;
	char *argv[] = { "perf", "stat", "-x", ",", "-e", "task-clock", "--", "true", NULL };

	return run_program(argv, NULL, &r) == 0 && r.status == 0 && csv_value(r.err, "task-clock") >= 0;
}

static void within(const char *what, double ours, double perfs, double relative, double absolute)
{
	double bound = relative * perfs + absolute;

	print_message("[  INFO    ] %-17s lowkey %12.2f   perf %12.2f   bound +-%.2f\n", what, ours,
		      perfs, bound);
	if (ours < perfs - bound || ours > perfs + bound)
		fail_msg("%s: lowkey stat %.2f, perf stat %.2f: more than %.2f apart", what, ours, perfs,
			 bound);
}

static void agrees_with_perf_stat(void **state)
{
	char *ours[] = { LOWKEY_BIN, "stat", "-x", ",", "-e", EVENTS, "--", WORKLOAD, NULL };
	char *perfs[] = { "perf", "stat", "-x", ",", "-e", EVENTS, "--", WORKLOAD, NULL };
	struct counts a, b;

	(void)state;
	if (!perf_works())
		skip_because("perf stat cannot run here (apt-get install linux-perf)");
	count_with(ours, &a);
	count_with(perfs, &b);
	within("page-faults", a.faults, b.faults, 0.02, 30);
	within("context-switches", a.switches, b.switches, 0.25, 100);
	within("task-clock (ms)", a.clock_ms, b.clock_ms, 0.15, 5);
	/* What the workload is known to do. */
	assert_true(a.faults >= 5000);
	assert_true(a.switches >= 2000);
	assert_true(a.clock_ms >= 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(agrees_with_perf_stat),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
