// SPDX-License-Identifier: MIT
/*
 * lowkey bench watch: lk_watch_add/remove round trips per second from 1 and 2 threads against
 * raw perf_event_open/close with the same attributes, lk_watch_move against the raw ioctl, and
 * the cost of a hit (a write to a watched variable, through to the callback). Kernel commit
 * 0912037fec, whose breakpoint experiments `lowkey bench breakpoint` re-runs, published no figure
 * for these.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"

#define NAN_ __builtin_nan("")

/* The attributes lk_watch_add() gives a thread-scope write watchpoint. */
static void watch_attr(struct perf_event_attr *attr, void *addr, size_t len)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = PERF_TYPE_BREAKPOINT;
	attr->bp_type = HW_BREAKPOINT_W;
	attr->bp_addr = (unsigned long)addr;
	attr->bp_len = len;
	attr->sample_period = 1;
	attr->exclude_kernel = 1;
	attr->exclude_hv = 1;
	attr->sigtrap = 1;
	attr->remove_on_exec = 1;
}

#define WATCH_VARS 4
static long watch_vars[2][WATCH_VARS]; /* one row per thread */

struct loop {
	int ops;    /* round trips per timed loop */
	int thread; /* which row of watch_vars */
	int err;
	double ns; /* per round trip */
};

static void *raw_open_close_loop(void *arg)
{
	struct loop *l = arg;
	struct perf_event_attr attr;
	uint64_t t0;

	watch_attr(&attr, &watch_vars[l->thread][0], 8);
	t0 = lkb_now_ns();
	for (int i = 0; i < l->ops; i++) {
		int fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			l->err = -errno;
			break;
		}
		close(fd);
	}
	l->ns = (double)(lkb_now_ns() - t0) / l->ops;
	return NULL;
}

static void *lowkey_add_remove_loop(void *arg)
{
	struct loop *l = arg;
	uint64_t t0 = lkb_now_ns();

	for (int i = 0; i < l->ops; i++) {
		struct lk_watch *w;

		l->err = lk_watch_add(&w, &watch_vars[l->thread][0], 8, LK_WATCH_WRITE, NULL, NULL);
		if (l->err)
			break;
		lk_watch_remove(w);
	}
	l->ns = (double)(lkb_now_ns() - t0) / l->ops;
	return NULL;
}

static void *sigaction_loop(void *arg)
{
	struct loop *l = arg;
	struct sigaction sa;
	uint64_t t0 = lkb_now_ns();

	for (int i = 0; i < l->ops; i++)
		sigaction(SIGTRAP, NULL, &sa);
	l->ns = (double)(lkb_now_ns() - t0) / l->ops;
	return NULL;
}

/* Run fn in `threads` threads pinned to CPUs 0 and 1; returns round trips per second, all told. */
static double throughput(void *(*fn)(void *), int threads, int ops, int *err)
{
	struct loop loops[2];
	pthread_t t[2];
	uint64_t t0 = lkb_now_ns();

	for (int i = 0; i < threads; i++) {
		pthread_attr_t attr;
		cpu_set_t cpus;

		pthread_attr_init(&attr);
		CPU_ZERO(&cpus);
		CPU_SET(i % lkb_ncpus(), &cpus);
		pthread_attr_setaffinity_np(&attr, sizeof(cpus), &cpus);
		loops[i] = (struct loop){ ops, i, 0, 0 };
		pthread_create(&t[i], &attr, fn, &loops[i]);
		pthread_attr_destroy(&attr);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		if (loops[i].err)
			*err = loops[i].err;
	}
	return (double)threads * ops / ((double)(lkb_now_ns() - t0) / 1e9);
}

/* Moves: two ioctls (there and back) per round trip, raw and through lowkey. */
static int time_moves(int ops, double *raw_ns, double *lowkey_ns)
{
	struct perf_event_attr there, back;
	struct lk_watch *w;
	int fd, err = 0;
	uint64_t t0;

	watch_attr(&there, &watch_vars[0][0], 8);
	back = there;
	back.bp_addr = (unsigned long)&watch_vars[0][1];
	fd = (int)syscall(SYS_perf_event_open, &there, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	t0 = lkb_now_ns();
	for (int i = 0; i < ops && !err; i++)
		if (ioctl(fd, PERF_EVENT_IOC_MODIFY_ATTRIBUTES, &back) ||
		    ioctl(fd, PERF_EVENT_IOC_MODIFY_ATTRIBUTES, &there))
			err = -errno;
	*raw_ns = (double)(lkb_now_ns() - t0) / ops / 2;
	close(fd);
	if (err)
		return err;
	err = lk_watch_add(&w, &watch_vars[0][0], 8, LK_WATCH_WRITE, NULL, NULL);
	if (err)
		return err;
	t0 = lkb_now_ns();
	for (int i = 0; i < ops && !err; i++) {
		err = lk_watch_move(w, &watch_vars[0][1], 8);
		if (!err)
			err = lk_watch_move(w, &watch_vars[0][0], 8);
	}
	*lowkey_ns = (double)(lkb_now_ns() - t0) / ops / 2;
	lk_watch_remove(w);
	return err;
}

/* ---- hits: a write to a watched variable, through to a callback ---- */

static volatile long raw_hits;

static void raw_sigtrap_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig, (void)si, (void)ctx;
	raw_hits++;
}

static void count_hit(const struct lk_watch_hit *hit, void *arg)
{
	(void)hit;
	(*(volatile long *)arg)++;
}

static double time_writes(volatile long *var, int writes)
{
	uint64_t t0 = lkb_now_ns();

	for (int i = 0; i < writes; i++)
		*var = i;
	return (double)(lkb_now_ns() - t0) / writes;
}

/* Before lowkey installs its dispatcher: a bare sigtrap event and a bare handler. */
static int time_raw_hits(int writes, double *ns)
{
	struct perf_event_attr attr;
	struct sigaction sa, old;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = raw_sigtrap_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGTRAP, &sa, &old);
	watch_attr(&attr, &watch_vars[1][3], 8);
	fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		sigaction(SIGTRAP, &old, NULL);
		return -errno;
	}
	*ns = time_writes(&watch_vars[1][3], writes);
	close(fd);
	sigaction(SIGTRAP, &old, NULL);
	return 0;
}

static int time_lowkey_hits(int writes, unsigned int flags, double *ns)
{
	static volatile long count;
	struct lk_watch *w;
	int err = lk_watch_add(&w, &watch_vars[1][3], 8, LK_WATCH_WRITE | flags, count_hit,
			       (void *)&count);

	if (err)
		return err;
	*ns = time_writes(&watch_vars[1][3], writes);
	lk_watch_sync();
	lk_watch_remove(w);
	return 0;
}

static double unwatched_write_ns(int writes)
{
	return time_writes(&watch_vars[1][2], writes);
}

enum watch_row {
	W_RAW_1,
	W_LK_1,
	W_RAW_2,
	W_LK_2,
	W_SIGACTION,
	W_MOVE_RAW,
	W_MOVE_LK,
	W_HIT_NONE,
	W_HIT_RAW,
	W_HIT_LK,
	W_HIT_LK_DEFERRED,
	NWROWS
};

static void watch_print_header(int runs, int ops);
static void watch_print_hits(const double m[NWROWS]);
static void watch_print_add_remove(const double m[NWROWS]);

/* text: print each part as soon as it is measured (the hits, then adding, removing, moving). */
static int watch_measure(int runs, int ops, double med[NWROWS], bool text)
{
	double *v[NWROWS];
	int err = 0, writes = ops;

	for (int i = 0; i < NWROWS; i++) {
		v[i] = calloc((size_t)runs, sizeof(double));
		if (!v[i])
			return -ENOMEM;
	}
	/* Hits first: the raw handler must run before lowkey's dispatcher exists. */
	for (int run = 0; run < runs && !err; run++) {
		lkb_progress("hits, raw perf, run %d of %d", run + 1, runs);
		v[W_HIT_NONE][run] = unwatched_write_ns(writes);
		err = time_raw_hits(writes, &v[W_HIT_RAW][run]);
	}
	for (int run = 0; run < runs && !err; run++) {
		lkb_progress("hits, lowkey, run %d of %d", run + 1, runs);
		err = time_lowkey_hits(writes, 0, &v[W_HIT_LK][run]);
		if (!err)
			err = time_lowkey_hits(writes, LK_WATCH_DEFERRED,
					       &v[W_HIT_LK_DEFERRED][run]);
	}
	if (!err && text) {
		for (int i = W_HIT_NONE; i <= W_HIT_LK_DEFERRED; i++)
			med[i] = lkb_median(v[i], (size_t)runs);
		watch_print_hits(med);
	}
	for (int run = 0; run < runs && !err; run++) {
		/* Round trips/s; the rows interleaved, each run starting with the next one. */
		static const struct {
			enum watch_row row;
			void *(*fn)(void *);
			int threads;
		} loops[] = {
			{ W_RAW_1, raw_open_close_loop, 1 },
			{ W_LK_1, lowkey_add_remove_loop, 1 },
			{ W_RAW_2, raw_open_close_loop, 2 },
			{ W_LK_2, lowkey_add_remove_loop, 2 },
		};
		const int n = sizeof(loops) / sizeof(loops[0]);

		lkb_progress("add, remove and move, run %d of %d", run + 1, runs);
		for (int k = 0; k < n; k++) {
			int i = (run + k) % n;

			v[loops[i].row][run] = throughput(loops[i].fn, loops[i].threads, ops, &err);
		}
		v[W_SIGACTION][run] = throughput(sigaction_loop, 1, ops, &err);
		if (!err)
			err = time_moves(ops, &v[W_MOVE_RAW][run], &v[W_MOVE_LK][run]);
	}
	for (int i = 0; i < NWROWS; i++) {
		med[i] = err ? NAN_ : lkb_median(v[i], (size_t)runs);
		free(v[i]);
	}
	if (!err && text)
		watch_print_add_remove(med);
	return err;
}

static void watch_print_json(int runs, int ops, const double m[NWROWS])
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "watch");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "runs", runs);
	lk__json_int(&j, "ops_per_run", ops);
	lk__json_object(&j, "add_remove_per_s");
	lk__json_num(&j, "raw_1_thread", m[W_RAW_1]);
	lk__json_num(&j, "lowkey_1_thread", m[W_LK_1]);
	lk__json_num(&j, "raw_2_threads", m[W_RAW_2]);
	lk__json_num(&j, "lowkey_2_threads", m[W_LK_2]);
	lk__json_num(&j, "lowkey_overhead_1_thread", m[W_RAW_1] / m[W_LK_1] - 1.0);
	lk__json_num(&j, "lowkey_overhead_2_threads", m[W_RAW_2] / m[W_LK_2] - 1.0);
	lk__json_num(&j, "raw_scaling_2_vs_1", m[W_RAW_2] / m[W_RAW_1]);
	lk__json_num(&j, "lowkey_scaling_2_vs_1", m[W_LK_2] / m[W_LK_1]);
	lk__json_close(&j);
	lk__json_num(&j, "sigaction_ns", 1e9 / m[W_SIGACTION]);
	lk__json_object(&j, "move_ns");
	lk__json_num(&j, "raw_ioctl", m[W_MOVE_RAW]);
	lk__json_num(&j, "lowkey", m[W_MOVE_LK]);
	lk__json_close(&j);
	lk__json_object(&j, "write_ns");
	lk__json_num(&j, "unwatched", m[W_HIT_NONE]);
	lk__json_num(&j, "raw_sigtrap_handler", m[W_HIT_RAW]);
	lk__json_num(&j, "lowkey_callback", m[W_HIT_LK]);
	lk__json_num(&j, "lowkey_deferred", m[W_HIT_LK_DEFERRED]);
	lk__json_close(&j);
	lk__json_null(&j, "published");
	lk__json_end(&j);
}

static void watch_print_header(int runs, int ops)
{
	printf("lowkey bench watch: adding and removing watchpoints, and what a hit costs\n");
	printf("machine: %s\n", lkb_machine());
	printf("method:  %d round trips per run, median of %d runs, rows interleaved (rotating order); "
	       "threads\n         pinned to CPUs 0 and 1\n",
	       ops, runs);
	fflush(stdout);
}

/* Measured first: the raw handler must run before lowkey's dispatcher exists. */
static void watch_print_hits(const double m[NWROWS])
{
	printf("\na write to a watched variable, through to the callback           ns each\n");
	printf("  unwatched write                                           %10.1f\n",
	       m[W_HIT_NONE]);
	printf("  raw sigtrap event, bare SIGTRAP handler                   %10.0f\n",
	       m[W_HIT_RAW]);
	printf("  lowkey, callback in the handler                           %10.0f\n", m[W_HIT_LK]);
	printf("  lowkey, deferred (handler queues, delivery thread calls)  %10.0f\n",
	       m[W_HIT_LK_DEFERRED]);
	fflush(stdout);
}

static void watch_print_add_remove(const double m[NWROWS])
{
	printf("\nadd + remove (thread scope, 8-byte write)  round trips/s    ns each   vs raw\n");
	printf("  raw perf_event_open + close, 1 thread    %13.0f %10.0f\n", m[W_RAW_1],
	       1e9 / m[W_RAW_1]);
	printf("  lk_watch_add + lk_watch_remove, 1 thread %13.0f %10.0f %+7.1f%%\n", m[W_LK_1],
	       1e9 / m[W_LK_1], 100.0 * (m[W_RAW_1] / m[W_LK_1] - 1.0));
	printf("  raw, 2 threads                           %13.0f %10s   x%.2f of 1 thread\n",
	       m[W_RAW_2], "", m[W_RAW_2] / m[W_RAW_1]);
	printf("  lowkey, 2 threads                        %13.0f %10s   x%.2f of 1 thread, %+.1f%% vs "
	       "raw\n",
	       m[W_LK_2], "", m[W_LK_2] / m[W_LK_1], 100.0 * (m[W_RAW_2] / m[W_LK_2] - 1.0));
	printf("  (of lowkey's own cost: sigaction(SIGTRAP) to check its handler: %.0f ns)\n",
	       1e9 / m[W_SIGACTION]);
	printf("\nmove (one re-point)                                     ns each   vs raw\n");
	printf("  raw ioctl(PERF_EVENT_IOC_MODIFY_ATTRIBUTES) %24.0f\n", m[W_MOVE_RAW]);
	printf("  lk_watch_move                               %24.0f %+7.1f%%\n", m[W_MOVE_LK],
	       100.0 * (m[W_MOVE_LK] / m[W_MOVE_RAW] - 1.0));
	printf("\nkernel commit 0912037fec published no figure for these; its own are in "
	       "`lowkey bench breakpoint thread`.\n");
}

static const char watch_usage[] =
	"usage: lowkey bench watch [--runs N] [--ops N] [-j|--json]\n"
	"\n"
	"lk_watch_add + lk_watch_remove round trips per second from 1 and 2 threads (each in its own\n"
	"thread, thread scope) against raw perf_event_open + close with the same attributes;\n"
	"lk_watch_move against the raw ioctl; and the cost of a hit, from the write to the callback,\n"
	"against a bare perf sigtrap handler.\n"
	"\n"
	"  --runs N   repetitions; figures are medians (default 11)\n"
	"  --ops N    round trips (and writes) per timed loop (default 20000)\n"
	"  -j, --json print the figures as JSON\n";

static int watch_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "ops", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	double med[NWROWS];
	int runs = 11, ops = 20000, c, err;
	bool json = false;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:o:j", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			runs = atoi(optarg);
			break;
		case 'o':
			ops = atoi(optarg);
			break;
		case 'j':
			json = true;
			break;
		default:
			fputs(watch_usage, stderr);
			return 2;
		}
	}
	if (optind != argc || runs < 1 || ops < 1) {
		fputs(watch_usage, stderr);
		return 2;
	}
	if (!json)
		watch_print_header(runs, ops);
	err = watch_measure(runs, ops, med, !json);
	if (err)
		return lkb_fail("watch", err);
	if (json)
		watch_print_json(runs, ops, med);
	return 0;
}

LK_BENCH(watch_bench, "watch", "watchpoint add/remove/move and hit costs against raw perf",
	 watch_usage, watch_run);
