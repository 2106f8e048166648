// SPDX-License-Identifier: MIT
/*
 * lowkey bench breakpoint thread: B inheritable breakpoints, then P threads that each create and
 * join batches of T threads until R batches are done: what the kernel's breakpoint constraint
 * accounting costs when many tasks come and go. Per run: perf bench itself (a subprocess), the
 * same experiment with raw perf_event_open, with lowkey process-scope watchpoints, and with no
 * breakpoints.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "breakpoint_bench.h"

static struct bp_thread_params tp;
static char thread_watched[64]; /* one byte per breakpoint */

/* One of the P threads: batches of T threads, created then joined, until R batches are done. */
static void *batch_thread(void *arg)
{
	int *repeat = arg;
	pthread_t *threads = calloc((size_t)tp.threads, sizeof(*threads));

	if (!threads)
		return NULL;
	while (__atomic_fetch_sub(repeat, 1, __ATOMIC_RELAXED) > 0) {
		unsigned int done = 0;
		int n = 0;

		for (; n < tp.threads; n++)
			if (pthread_create(&threads[n], NULL, bp_passive_thread, &done) != 0)
				break;
		__atomic_store_n(&done, 1, __ATOMIC_RELAXED);
		bp_futex_wake(&done, tp.threads);
		for (int i = 0; i < n; i++)
			pthread_join(threads[i], NULL);
	}
	free(threads);
	return NULL;
}

/* The timed part, the same for every variant: microseconds per created thread. */
static double time_thread_batches(void)
{
	pthread_t *parallel = calloc((size_t)tp.parallel, sizeof(*parallel));
	int repeat = tp.repeat, n = 0;
	uint64_t t0;

	if (!parallel)
		return BP_NAN;
	t0 = lkb_now_ns();
	for (; n < tp.parallel; n++)
		if (pthread_create(&parallel[n], NULL, batch_thread, &repeat) != 0)
			break;
	for (int i = 0; i < n; i++)
		pthread_join(parallel[i], NULL);
	free(parallel);
	return (double)(lkb_now_ns() - t0) / 1000.0 / tp.repeat / tp.threads;
}

static int thread_run_raw(double *usecs)
{
	int fds[64], n = 0, err = 0;

	for (; n < tp.breakpoints; n++) {
		fds[n] = bp_perf_breakpoint(&thread_watched[n]);
		if (fds[n] < 0) {
			err = -errno;
			break;
		}
	}
	if (!err)
		*usecs = time_thread_batches();
	while (n)
		close(fds[--n]);
	return err;
}

static int thread_run_lowkey(double *usecs)
{
	struct lk_watch *w[64];
	int n = 0, err = 0;

	for (; n < tp.breakpoints; n++) {
		err = lk_watch_add(&w[n], &thread_watched[n], 1,
				   LK_WATCH_READWRITE | LK_WATCH_PROCESS, NULL, NULL);
		if (err)
			break;
	}
	if (!err)
		*usecs = time_thread_batches();
	while (n)
		lk_watch_remove(w[--n]);
	return err;
}

/* Commit 0912037fec's figures: perf bench -r 30 breakpoint thread -b 4 -p 64 -t 64 on 256 CPUs. */
static const struct {
	const char *what;
	double usecs, usecs_cpu;
} published_thread[] = {
	{ "one mutex (before the patch)", 108.267188, 6929.1 },
	{ "per-CPU rwsem (the patch)", 40.201563, 2572.9 },
	{ "constraint accounting off", 35.286458, 2258.333333 },
	{ "no breakpoints (-b 0)", 31.365625, 2007.4 },
};

static void thread_print_json(const struct bp_results *r, const struct bp_perf *perf,
			      const struct bp_placement *pl)
{
	double base = r->median[V_PERF_BENCH];
	struct lk__json j;

	bp_json_begin(&j, "breakpoint thread");
	lk__json_int(&j, "breakpoints", tp.breakpoints);
	lk__json_int(&j, "parallel", tp.parallel);
	lk__json_int(&j, "threads", tp.threads);
	lk__json_int(&j, "repeat", tp.repeat);
	bp_json_method(&j, r, perf->args, pl);
	lk__json_array(&j, "rows");
	for (int v = 0; v < NVARIANTS; v++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "row", bp_variant_names[v]);
		lk__json_num(&j, "usecs_per_op", r->median[v]);
		lk__json_num(&j, "usecs_per_op_per_cpu", r->median[v] * tp.parallel);
		lk__json_num(&j, "vs_perf_bench", r->median[v] / base - 1.0);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_array(&j, "published");
	for (size_t i = 0; i < sizeof(published_thread) / sizeof(published_thread[0]); i++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "row", published_thread[i].what);
		lk__json_num(&j, "usecs_per_op", published_thread[i].usecs);
		lk__json_num(&j, "usecs_per_op_per_cpu", published_thread[i].usecs_cpu);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_end(&j);
}

static void thread_print_text(const struct bp_results *r, const struct bp_perf *perf,
			      const struct bp_placement *pl)
{
	double base = r->median[V_PERF_BENCH];

	printf("lowkey bench breakpoint thread: the hw_breakpoint contention commit's experiment on "
	       "this machine\n");
	printf("machine: %s\n", lkb_machine());
	printf("method:  %d breakpoints, %d threads creating and joining batches of %d threads, %d "
	       "batches;\n         median of %d runs, variants interleaved (in a rotating order)\n",
	       tp.breakpoints, tp.parallel, tp.threads, tp.repeat, r->runs);
	bp_print_placement(pl);
	putchar('\n');
	printf("%-38s %10s %13s %13s\n", "", "usecs/op", "usecs/op/cpu", "vs perf bench");
	for (int v = 0; v < NVARIANTS; v++) {
		if (bp_print_no_perf(v, perf->ok, bp_variant_names[v]))
			continue;
		printf("%-38s %10.2f %13.1f", bp_variant_names[v], r->median[v],
		       r->median[v] * tp.parallel);
		bp_print_ratio(r->median[v], base);
		putchar('\n');
	}
	if (perf->ok)
		printf("(perf ran as: perf bench -r %d breakpoint %s)\n", tp.repeat, perf->args);
	printf("\nkernel commit 0912037fec (\"perf/hw_breakpoint: Reduce contention with large number\n"
	       "of tasks\"), the same command with -b 4 -p 64 -t 64 -r 30 on a 256-CPU machine:\n");
	for (size_t i = 0; i < sizeof(published_thread) / sizeof(published_thread[0]); i++)
		printf("  %-36s %10.2f %13.1f\n", published_thread[i].what,
		       published_thread[i].usecs, published_thread[i].usecs_cpu);
}

static int thread_run_variant(enum variant v, const struct bp_perf *perf, double *usecs)
{
	struct bp_thread_params saved = tp;
	int err = 0;

	switch (v) {
	case V_PERF_BENCH:
		if (perf->ok)
			*usecs = bp_run_perf_bench(tp.repeat, perf->args);
		break;
	case V_RAW:
		err = thread_run_raw(usecs);
		if (err)
			lkb_fail("perf_event_open (raw, as perf bench does it)", err);
		break;
	case V_LOWKEY:
		err = thread_run_lowkey(usecs);
		if (err)
			lkb_fail("lk_watch_add", err);
		break;
	default:
		tp.breakpoints = 0;
		*usecs = time_thread_batches();
		tp = saved;
		break;
	}
	return err;
}

static const struct bp_experiment thread_experiment = {
	.name = "thread",
	.nvariants = NVARIANTS,
	.run = thread_run_variant,
	.print_json = thread_print_json,
	.print_text = thread_print_text,
};

int bp_thread_experiment(const struct bp_thread_params *params, int runs, bool json,
			 const char *cpus)
{
	char perf_args[128];

	tp = *params;
	if (tp.breakpoints > (int)sizeof(thread_watched)) {
		fprintf(stderr, "lowkey bench breakpoint: at most %zu breakpoints\n",
			sizeof(thread_watched));
		return 2;
	}
	snprintf(perf_args, sizeof(perf_args), "thread -b %d -p %d -t %d", tp.breakpoints,
		 tp.parallel, tp.threads);
	return bp_experiment_run(&thread_experiment, perf_args, runs, json, cpus ? cpus : "all");
}
