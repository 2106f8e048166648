// SPDX-License-Identifier: MIT
/*
 * lowkey stat's printing with figures this machine cannot produce: hardware events, multiplexing,
 * the derived metrics that need cycles or cache counters, and a never-counted event.
 */
#include <linux/perf_event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "bench.h"
#include "stat.h"

#define CACHE(id, op, result) \
	((id) | (PERF_COUNT_HW_CACHE_OP_##op << 8) | (PERF_COUNT_HW_CACHE_RESULT_##result << 16))

static double run_values[16][1];
static struct stat_event events[16];
static double elapsed[1] = { 2e9 };

static void add(struct stat_result *r, const char *name, uint32_t type, uint64_t config,
		double value, uint64_t enabled, uint64_t running)
{
	struct stat_event *e = &events[r->nevents];

	memset(e, 0, sizeof(*e));
	e->name = (char *)name;
	e->resolved = (char *)name;
	e->unit = (char *)(type == PERF_TYPE_SOFTWARE && config == PERF_COUNT_SW_TASK_CLOCK ? "ns" :
											      "");
	e->scale = 1;
	e->type = type;
	e->config = config;
	e->supported = true;
	e->runs = run_values[r->nevents];
	e->runs[0] = value;
	e->mean = value;
	e->enabled = enabled;
	e->running = running;
	r->nevents++;
}

/* 1 s of CPU time over 2 s, 3e9 cycles, 6e9 instructions, ... */
static void hardware_result(struct stat_result *r)
{
	memset(r, 0, sizeof(*r));
	r->target = "work";
	r->runs = 1;
	r->events = events;
	r->elapsed_ns = elapsed;
	r->elapsed_mean = 2e9;
	r->user_ns = 1e9;
	add(r, "task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, 1e9, 1e9, 1e9);
	add(r, "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 3e9, 1e9, 1e9);
	add(r, "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 6e9, 1e9, 5e8);
	add(r, "branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, 1e9, 1e9, 1e9);
	add(r, "branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, 2e7, 1e9, 1e9);
	add(r, "L1-dcache-loads", PERF_TYPE_HW_CACHE, CACHE(PERF_COUNT_HW_CACHE_L1D, READ, ACCESS),
	    4e9, 1e9, 1e9);
	add(r, "L1-dcache-load-misses", PERF_TYPE_HW_CACHE,
	    CACHE(PERF_COUNT_HW_CACHE_L1D, READ, MISS), 1e8, 1e9, 1e9);
	add(r, "cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, 1e6, 1e9, 0);
}

static char *print_to_string(void (*print)(FILE *, const struct stat_result *),
			     const struct stat_result *r)
{
	static char buf[16384];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	assert_non_null(f);
	print(f, r);
	fclose(f);
	return buf;
}

static void contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("expected '%s' in:\n%s", needle, haystack);
}

static void print_json_to(FILE *f, const struct stat_result *r)
{
	stat_print_json(f, r);
}

static void print_csv_to(FILE *f, const struct stat_result *r)
{
	stat_print_csv(f, ",", r);
}

static void text_has_metrics_and_multiplexing(void **state)
{
	struct stat_result r;
	char *out;

	(void)state;
	hardware_result(&r);
	out = print_to_string(stat_print_text, &r);
	contains(out, "1000.00 msec  task-clock");
	contains(out, "0.500 CPUs utilized");
	contains(out, "3.000 GHz");
	contains(out, "2.000 insn per cycle");
	contains(out, "(50.00%)"); /* instructions ran half the time */
	contains(out, "2.00% of all branches");
	contains(out, "2.50% of all L1-dcache accesses");
	contains(out, "<not counted>"); /* cache-misses enabled but never on a counter */
	contains(out, "1.000 G/sec");	/* branches per second of task-clock */
	assert_null(strstr(out, "+-")); /* one run: no spread */
}

static void csv_and_json_carry_running_time(void **state)
{
	struct stat_result r;
	char *out;

	(void)state;
	hardware_result(&r);
	out = print_to_string(print_csv_to, &r);
	contains(out, "6000000000,,instructions,500000000,50.00,2.000,insn per cycle\n");
	contains(out, "<not counted>,,cache-misses,0,0.00,,\n");
	/* not even enabled (an interval of -I before the command began): as perf, not a count of 0 */
	events[0].enabled = events[0].running = 0;
	events[0].mean = 0;
	out = print_to_string(print_csv_to, &r);
	contains(
		out,
		"<not counted>,msec,task-clock,0,100.00,,\n"); /* perf: 100 % when run == enabled */
	contains(out, "20000000,,branch-misses,1000000000,100.00,2.000,% of all branches\n");
	out = print_to_string(print_json_to, &r);
	contains(out, "\"metric_unit\": \"% of all branches\"");
	contains(out, "\"pcnt_running\": 50");
	contains(out, "\"metric_unit\": \"insn per cycle\"");
	contains(out, "\"counted\": false");
}

static void repeated_runs_show_the_error_of_the_mean(void **state)
{
	static double clock_runs[4] = { 0.9e9, 1.1e9, 0.9e9, 1.1e9 };
	struct stat_result r;
	char *out;

	(void)state;
	hardware_result(&r);
	r.runs = 4;
	r.nevents = 1;
	events[0].runs = clock_runs;
	lkb_mean_stddev(clock_runs, 4, &events[0].mean, &events[0].stddev);
	assert_true(events[0].mean == 1e9);
	/* sample stddev of {0.9, 1.1, 0.9, 1.1}e9 = 0.11547e9; error of the mean = /2 = 5.77% */
	out = print_to_string(stat_print_text, &r);
	contains(out, "(4 runs)");
	contains(out, "( +-  5.77% )");
}

/* perf stat -r N -x, prints the mean run time per run, not the sum over the runs. */
static void repeated_runs_print_the_mean_run_time(void **state)
{
	static double clock_runs[4] = { 0.9e9, 1.1e9, 0.9e9, 1.1e9 };
	struct stat_result r;
	char *out;

	(void)state;
	hardware_result(&r);
	r.runs = 4;
	r.nevents = 1;
	events[0].runs = clock_runs;
	events[0].enabled = 4000000000u; /* summed over the 4 runs: 1 s each */
	events[0].running = 4000000000u;
	lkb_mean_stddev(clock_runs, 4, &events[0].mean, &events[0].stddev);
	out = print_to_string(print_csv_to, &r);
	contains(out, "1000.00,msec,task-clock,5.77%,1000000000,100.00,");
	out = print_to_string(print_json_to, &r);
	contains(out, "\"time_running_ns\": 1000000000,");
	contains(out, "\"time_enabled_ns\": 1000000000,");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(text_has_metrics_and_multiplexing),
		cmocka_unit_test(csv_and_json_carry_running_time),
		cmocka_unit_test(repeated_runs_show_the_error_of_the_mean),
		cmocka_unit_test(repeated_runs_print_the_mean_run_time),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
