// SPDX-License-Identifier: MIT
/*
 * The two CPU figures of `lowkey report` against the kernel's, for spans that sleep and compute
 * (four threads, each span two 1 ms sleeps then 2 ms of CPU time, recorded with LK_TRACE_CPUTIME
 * and LK_TRACE_SCHED). Around every span the threads read CLOCK_THREAD_CPUTIME_ID just inside its
 * begin and end (inner) and just outside them (outer): the CPU time of the span lies between the
 * two sums, and each figure must land there within a bound argued from what it measures.
 *
 *   - Span CPU time (the --cputime columns, "span_cpu_ns") is the kernel's clock read at each end
 *     by lowkey's thread clock. Each read is above the kernel's value by at most its base's system
 *     call (a base is kept only from one under 10 us) plus time off the CPU without a switch since
 *     the base (steal), which the rebase interval caps, and below it by at most the counter
 *     frequency's error over one rebase interval (1000 ppm of it): per span, at most
 *     10 us + 1.001 x the rebase interval either way (docs/clock.md, "Error"). The test runs
 *     with a 100 us rebase interval (tests/probe/CMakeLists.txt) and reads the one in force.
 *
 *   - On-CPU (the --sched split, "on_cpu_ns") is wall time between the thread's switch records,
 *     not CPU time (docs/trace.md, "Two CPU times"). The kernel charges a thread from the moment
 *     the scheduler picks it, before its switch-in record is written, and stops before its
 *     switch-out record; it does not charge time the hypervisor took its virtual CPU (steal),
 *     nor, with CONFIG_IRQ_TIME_ACCOUNTING, time in interrupts.
 *     So inner - on-CPU is at most those switch paths into the thread: one inside a sleep is
 *     part of what the kernel charged that sleep (measured here around each nanosleep), one that
 *     preempted the computation at most the largest such charge (it holds a whole switch in and
 *     a system call besides). And on-CPU - outer is at most the steal and interrupt time of every
 *     CPU during the run (/proc/stat, within a tick per CPU) plus one such path per switch out:
 *     the kernel charges the path out of a thread to the thread it switches to.
 *
 * No bound depends on how fast anything runs; a loaded machine widens them (more steal, more
 * switches), it does not break them.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include <lowkey/lowkey.h>

#include "cli/run.h"
#include "trace_check.h"

#define THREADS 4
#define SPANS 8
#define SLEEPS 2
#define SLEEP_NS 1000000
#define SPIN_NS 2000000

struct kernel_view {
	uint64_t inner, outer;	    /* CLOCK_THREAD_CPUTIME_ID over the spans, ns */
	uint64_t sleeps, sleep_max; /* charged across the nanosleeps inside them, ns */
};

static struct lkt_run out;

static void sleep_once(struct kernel_view *k)
{
	struct timespec ts = { 0, SLEEP_NS };
	uint64_t before = lkt_thread_cpu_ns(), charged;

	nanosleep(&ts, NULL);
	charged = lkt_thread_cpu_ns() - before;
	k->sleeps += charged;
	if (charged > k->sleep_max)
		k->sleep_max = charged;
}

static void *worker(void *arg)
{
	struct kernel_view *k = arg;

	for (int i = 0; i < SPANS; i++) {
		uint64_t o0 = lkt_thread_cpu_ns(), i0, i1;

		LK_SPAN_BEGIN(cpuagree, work);
		i0 = lkt_thread_cpu_ns();
		for (int s = 0; s < SLEEPS; s++)
			sleep_once(k);
		lkt_spin_cpu(SPIN_NS);
		i1 = lkt_thread_cpu_ns();
		LK_SPAN_END(cpuagree, work);
		k->outer += lkt_thread_cpu_ns() - o0;
		k->inner += i1 - i0;
	}
	return NULL;
}

/*
 * Time of all CPUs together that a thread on them may not be charged for, ns: steal, and
 * interrupts, which kernels with CONFIG_IRQ_TIME_ACCOUNTING charge to no thread (/proc/stat's
 * steal, irq and softirq, in ticks).
 */
static uint64_t uncharged_ns(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]) :
		    0;

	if (f)
		fclose(f);
	return n == 8 ? (v[5] + v[6] + v[7]) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK)) : 0;
}

/* The report's figures: on-CPU of the spans, their CPU time, switches out. */
static void report_figures(const char *dir, double *on_cpu, double *span_cpu, double *switches)
{
	lkt_sh(&out,
	       "%s report --json '%s' | python3 -c '"
	       "import json,sys; d=json.load(sys.stdin)\n"
	       "s=[c[\"split\"] for c in d[\"classes\"] if c[\"event\"] == \"work\" and \"split\" in c]\n"
	       "assert len(s) == 1 and d[\"switches_lost\"] == 0 and d[\"lost\"] == 0, d\n"
	       "print(s[0][\"on_cpu_ns\"], sum(t.get(\"span_cpu_ns\", 0) for t in d[\"threads\"]), "
	       "d[\"switches\"])'",
	       LOWKEY, dir);
	if (out.status)
		print_error("%s\n", out.out);
	assert_int_equal(out.status, 0);
	assert_int_equal(sscanf(out.out, "%lf %lf %lf", on_cpu, span_cpu, switches), 3);
}

static void both_figures_agree_with_the_kernel(void **state)
{
	struct lk_trace_config c = { .flags = LK_TRACE_SCHED | LK_TRACE_CPUTIME, .flush_ms = 10 };
	struct kernel_view k[THREADS] = { 0 }, all = { 0 };
	pthread_t t[THREADS];
	struct lk_clock_info ci;
	double on_cpu, span_cpu, switches, clock_err, gap, uncharged, ticks;
	uint64_t uncharged0;
	char dir[256];

	(void)state;
	if (!lkt_sched_allowed() || lkt_sh(&out, "command -v python3") != 0)
		skip();
	assert_true(lk_probe_enable("cpuagree") >= 0);
	lkt_path(dir, sizeof(dir), "cpu-agree");
	c.path = dir;
	uncharged0 = uncharged_ns();
	assert_int_equal(lk_trace_start(&c), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, &k[i]);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		all.inner += k[i].inner;
		all.outer += k[i].outer;
		all.sleeps += k[i].sleeps;
		if (k[i].sleep_max > all.sleep_max)
			all.sleep_max = k[i].sleep_max;
	}
	assert_int_equal(lk_trace_stop(), 0);
	/* /proc/stat counts whole ticks: a difference of two reads is within one tick per CPU,
	 * for each of the three counts */
	ticks = 3.0 * (double)sysconf(_SC_NPROCESSORS_CONF) * 1e9 / (double)sysconf(_SC_CLK_TCK);
	uncharged = (double)(uncharged_ns() - uncharged0) + ticks;
	assert_int_equal(lk_probe_reset_rules(), 0);
	report_figures(dir, &on_cpu, &span_cpu, &switches);
	assert_int_equal(lk_clock_info(&ci), 0);

	clock_err = THREADS * SPANS * (10e3 + 1.001 * (double)ci.rebase_ns);
	gap = (double)all.sleeps + switches * (double)all.sleep_max;
	print_message("kernel inner %.3f ms, outer %.3f ms; span CPU time %.3f ms (bound %.3f ms); "
		      "on-CPU %.3f ms (%.0f switches, sleeps charged %.3f ms, the largest %.1f us, "
		      "steal and interrupts %.3f ms)\n",
		      (double)all.inner / 1e6, (double)all.outer / 1e6, span_cpu / 1e6,
		      clock_err / 1e6, on_cpu / 1e6, switches, (double)all.sleeps / 1e6,
		      (double)all.sleep_max / 1e3, uncharged / 1e6);
	assert_true(span_cpu >= (double)all.inner - clock_err);
	assert_true(span_cpu <= (double)all.outer + clock_err);
	assert_true((double)all.inner - on_cpu <= gap);
	assert_true(on_cpu - (double)all.outer <= uncharged + switches * (double)all.sleep_max);
	lkt_rmrf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(both_figures_agree_with_the_kernel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
