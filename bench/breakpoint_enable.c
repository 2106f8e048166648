// SPDX-License-Identifier: MIT
/*
 * lowkey bench breakpoint enable: one inheritable breakpoint, P threads asleep and A threads
 * spinning, then R disable/enable pairs: the cost of changing a breakpoint every thread
 * inherited. Where the threads run decides the figure (breakpoint.c pins both sides alike).
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "breakpoint_bench.h"

static struct bp_enable_params ep;
static char enable_watched;

static void *active_thread(void *arg)
{
	unsigned int *done = arg;

	while (!__atomic_load_n(done, __ATOMIC_RELAXED))
		;
	return NULL;
}

/* Start the passive and active threads; they stop when *done becomes 1. */
static int start_enable_threads(pthread_t *threads, unsigned int *done)
{
	int n = 0;

	for (; n < ep.passive + ep.active; n++)
		if (pthread_create(&threads[n], NULL,
				   n < ep.passive ? bp_passive_thread : active_thread, done))
			break;
	usleep(10000); /* let them block, as perf bench does */
	return n;
}

static void stop_enable_threads(pthread_t *threads, int n, unsigned int *done)
{
	__atomic_store_n(done, 1, __ATOMIC_RELAXED);
	bp_futex_wake(done, ep.passive);
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
}

static int enable_run(bool lowkey, double *usecs)
{
	pthread_t *threads = calloc((size_t)(ep.passive + ep.active) + 1, sizeof(*threads));
	struct lk_watch *w = NULL;
	unsigned int done = 0;
	int fd = -1, n, err = 0;
	uint64_t t0;

	if (!threads)
		return -ENOMEM;
	if (lowkey)
		err = lk_watch_add(&w, &enable_watched, 1, LK_WATCH_READWRITE | LK_WATCH_PROCESS,
				   NULL, NULL);
	else if ((fd = bp_perf_breakpoint(&enable_watched)) < 0)
		err = -errno;
	if (err) {
		free(threads);
		return err;
	}
	n = start_enable_threads(threads, &done);
	t0 = lkb_now_ns();
	for (int i = 0; i < ep.repeat && !err; i++) {
		if (lowkey) {
			err = lk_watch_disable(w);
			if (!err)
				err = lk_watch_enable(w);
		} else if (ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) ||
			   ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
			err = -errno;
		}
	}
	*usecs = (double)(lkb_now_ns() - t0) / 1000.0 / ep.repeat;
	stop_enable_threads(threads, n, &done);
	if (w)
		lk_watch_remove(w);
	if (fd >= 0)
		close(fd);
	free(threads);
	return err;
}

/* The enable experiment's rows: the variants up to V_LOWKEY. */
static const char *const enable_variant_names[] = {
	"perf bench breakpoint (linux-perf)",
	"raw ioctl DISABLE + ENABLE",
	"lk_watch_disable + lk_watch_enable",
};

static void enable_print_json(const struct bp_results *r, const struct bp_perf *perf,
			      const struct bp_placement *pl)
{
	double base = r->median[V_PERF_BENCH];
	struct lk__json j;

	bp_json_begin(&j, "breakpoint enable");
	lk__json_int(&j, "passive", ep.passive);
	lk__json_int(&j, "active", ep.active);
	lk__json_int(&j, "repeat", ep.repeat);
	bp_json_method(&j, r, perf->args, pl);
	lk__json_array(&j, "rows");
	for (int v = 0; v <= V_LOWKEY; v++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "row", enable_variant_names[v]);
		lk__json_num(&j, "usecs_per_op", r->median[v]);
		lk__json_num(&j, "vs_perf_bench", r->median[v] / base - 1.0);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_null(&j, "published");
	lk__json_end(&j);
}

static void enable_print_text(const struct bp_results *r, const struct bp_perf *perf,
			      const struct bp_placement *pl)
{
	double base = r->median[V_PERF_BENCH];

	printf("lowkey bench breakpoint enable: the hw_breakpoint contention commit's second experiment "
	       "on this machine\n");
	printf("machine: %s\n", lkb_machine());
	printf("method:  one inherited breakpoint, %d sleeping and %d spinning threads, %d disable+enable "
	       "pairs;\n         median of %d runs, variants interleaved (in a rotating order)\n",
	       ep.passive, ep.active, ep.repeat, r->runs);
	bp_print_placement(pl);
	if (pl->pinned && ep.active >= pl->ncpus)
		printf("         (the %d spinning threads share those %d CPU(s) with the measuring thread)\n",
		       ep.active, pl->ncpus);
	putchar('\n');
	printf("%-38s %10s %13s\n", "", "usecs/op", "vs perf bench");
	for (int v = 0; v <= V_LOWKEY; v++) {
		if (bp_print_no_perf(v, perf->ok, enable_variant_names[v]))
			continue;
		printf("%-38s %10.2f", enable_variant_names[v], r->median[v]);
		bp_print_ratio(r->median[v], base);
		putchar('\n');
	}
	if (perf->ok)
		printf("(perf ran as: perf bench -r %d breakpoint %s%s%s)\n", ep.repeat, perf->args,
		       pl->pinned ? ", with the affinity of CPUs " : "",
		       pl->pinned ? pl->cpus : "");
	printf("\nkernel commit 0912037fec published no figure for this experiment.\n");
}

static int enable_run_variant(enum variant v, const struct bp_perf *perf, double *usecs)
{
	int err = 0;

	if (v == V_PERF_BENCH) {
		if (perf->ok)
			*usecs = bp_run_perf_bench(ep.repeat, perf->args);
	} else {
		err = enable_run(v == V_LOWKEY, usecs);
		if (err)
			lkb_fail(v == V_LOWKEY ? "lk_watch_disable/enable" :
						 "perf_event_open/ioctl (raw)",
				 err);
	}
	return err;
}

static const struct bp_experiment enable_experiment = {
	.name = "enable",
	.nvariants = V_LOWKEY + 1,
	.run = enable_run_variant,
	.print_json = enable_print_json,
	.print_text = enable_print_text,
};

int bp_enable_experiment(const struct bp_enable_params *params, int runs, bool json,
			 const char *cpus)
{
	char perf_args[128];

	ep = *params;
	snprintf(perf_args, sizeof(perf_args), "enable -p %d -a %d", ep.passive, ep.active);
	return bp_experiment_run(&enable_experiment, perf_args, runs, json, cpus);
}
