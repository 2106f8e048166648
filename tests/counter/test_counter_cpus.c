// SPDX-License-Identifier: MIT
/*
 * lk_counters_open_cpus(): everything on some CPUs (perf stat -a, -C). Root counts a busy loop
 * pinned to a CPU; a CPU that is not online and flags that do not apply are refused; an
 * unprivileged user under perf_event_paranoid > 0 is told the level and what to change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <cmocka.h>

#include <lowkey/counter.h>
#include <lowkey/error.h>

#include "helpers.h"

static void contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("expected '%s' in: %s", needle, haystack);
}

/* The nth CPU this thread may run on, as pin_to_cpu() counts them. */
static int nth_allowed_cpu(int nth)
{
	cpu_set_t set;

	sched_getaffinity(0, sizeof(set), &set);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &set) && nth-- == 0)
			return cpu;
	return -1;
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int open_as_nobody(void *arg)
{
	struct lk_counters *c;
	int err;

	(void)arg;
	if (become_nobody())
		return 100;
	err = lk_counters_open_cpus(&c, "cpu-clock", NULL, 0, 0);
	if (err == 0) {
		lk_counters_close(c);
		return 0;
	}
	if (err != -EACCES && err != -EPERM)
		return 101;
	if (!strstr(lk_last_error(), "kernel.perf_event_paranoid is") ||
	    !strstr(lk_last_error(), "CAP_PERFMON") || !strstr(lk_last_error(), "needs 0 or lower"))
		return 102;
	return 1;
}

static void unprivileged_is_told_why(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip_because("not root: cannot become another user to check the refusal");
	assert_int_equal(in_child(open_as_nobody, NULL), perf_paranoid() > 0 ? 1 : 0);
}

/* A busy loop pinned to one CPU: that CPU's cpu-clock counts at least its CPU time. */
static void counts_a_cpu(void **state)
{
	struct lk_counters *c;
	struct lk_counter_value v;
	volatile unsigned long sink = 0;
	int cpu = nth_allowed_cpu(0), err;
	double t0;

	(void)state;
	err = lk_counters_open_cpus(&c, "cpu-clock", &cpu, 1, LK_COUNTERS_DISABLED);
	if (err == -EACCES || err == -EPERM)
		skip_because("counting a CPU is denied here: %s", lk_last_error());
	assert_int_equal(err, 0);
	assert_int_equal(lk_counters_nthreads(c), 1);
	assert_int_equal(pin_to_cpu(0), 0);
	assert_int_equal(lk_counters_enable(c), 0);
	t0 = cpu_seconds();
	while (cpu_seconds() - t0 < 0.05)
		sink += 1;
	assert_int_equal(lk_counters_disable(c), 0);
	assert_int_equal(lk_counters_read(c, &v, 1), 1);
	lk_counters_close(c);
	assert_true(v.value >= 50000000); /* ns: the loop's CPU time on that CPU, at least */
	assert_true(v.time_enabled > 0 && v.time_running == v.time_enabled);

	/* Every online CPU: one count, the sum; enabled adds up over the CPUs. */
	assert_int_equal(lk_counters_open_cpus(&c, "cpu-clock", NULL, 0, 0), 0);
	while (cpu_seconds() - t0 < 0.07)
		sink += 1;
	assert_int_equal(lk_counters_read(c, &v, 1), 1);
	lk_counters_close(c);
	assert_true(v.value > 0);
}

static void bad_arguments(void **state)
{
	struct lk_counters *c;
	int cpus[2] = { 0, 1 << 20 };

	(void)state;
	assert_int_equal(lk_counters_open_cpus(&c, "cpu-clock", cpus, 2, 0), -EINVAL);
	contains(lk_last_error(), "CPU 1048576 is not online");
	assert_null(c);
	assert_int_equal(lk_counters_open_cpus(&c, "cpu-clock", NULL, 0, LK_COUNTERS_INHERIT),
			 -EINVAL);
	contains(lk_last_error(), "do not apply to CPUs");
	assert_int_equal(lk_counters_open_cpus(&c, "cpu-clock", NULL, 3, 0), -EINVAL);
	assert_int_equal(lk_counters_open_cpus(NULL, "cpu-clock", NULL, 0, 0), -EINVAL);
	assert_int_equal(lk_counters_open_cpus(&c, "cpu-clok", NULL, 0, 0), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(unprivileged_is_told_why),
		cmocka_unit_test(counts_a_cpu),
		cmocka_unit_test(bad_arguments),
	};

	lkt_perf_require();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
