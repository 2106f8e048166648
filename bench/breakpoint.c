// SPDX-License-Identifier: MIT
/*
 * lowkey bench breakpoint: the experiments (perf bench breakpoint) of kernel commit 0912037fec,
 * "perf/hw_breakpoint: Reduce contention with large number of tasks", on this machine.
 *
 *   thread  B inheritable breakpoints, then P threads that each create and join batches of T
 *           threads until R batches are done: what the kernel's breakpoint constraint accounting
 *           costs when many tasks come and go. Per run: perf bench itself (a subprocess), the same
 *           experiment with raw perf_event_open, with lowkey process-scope watchpoints, and with
 *           no breakpoints.
 *   enable  one inheritable breakpoint, P threads asleep and A threads spinning, then R
 *           disable/enable pairs: the cost of changing a breakpoint every thread inherited.
 *
 * Where the threads run decides the enable figure (a disable or enable reaches every inheriting
 * thread; with 64 sleepers, perf bench's own figure swings 7-10x with where they land), so both
 * sides run with the same CPU affinity (--cpus; for enable one CPU unless told otherwise): every
 * thread of this process, so every thread it starts, and perf bench, which inherits it.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"

#define NAN_ __builtin_nan("")

/* ---- raw perf_event_open, as perf bench calls it ---- */

/* perf bench breakpoint's breakpoint: read/write, 1 byte, inherited. */
static int perf_bench_breakpoint(void *addr)
{
	struct perf_event_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_BREAKPOINT;
	attr.inherit = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	attr.bp_addr = (unsigned long)addr;
	attr.bp_type = HW_BREAKPOINT_RW;
	attr.bp_len = HW_BREAKPOINT_LEN_1;
	return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static void futex_wait(unsigned int *word, unsigned int val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(unsigned int *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* ---- CPU affinity: the same for both tools ---- */

/* "0", "0-3", "0,2-3": into *set; -EINVAL if malformed or naming no CPU. */
static int parse_cpulist(const char *list, cpu_set_t *set)
{
	const char *p = list;

	CPU_ZERO(set);
	while (*p) {
		char *end;
		long lo = strtol(p, &end, 10), hi = lo;

		if (end == p || lo < 0 || lo >= CPU_SETSIZE)
			return -EINVAL;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo || hi >= CPU_SETSIZE)
				return -EINVAL;
			p = end;
		}
		for (long c = lo; c <= hi; c++)
			CPU_SET((int)c, set);
		if (*p == ',')
			p++;
		else if (*p)
			return -EINVAL;
	}
	return CPU_COUNT(set) ? 0 : -EINVAL;
}

/* The set as a CPU list ("0", "0-1,3"). */
static void format_cpulist(const cpu_set_t *set, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = 0;
	for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
		int hi = c;

		if (!CPU_ISSET(c, set))
			continue;
		while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set))
			hi++;
		used += (size_t)snprintf(buf + used, len - used, hi > c ? "%s%d-%d" : "%s%d",
					 used ? "," : "", c, hi);
		c = hi;
	}
}

/*
 * Give every thread of this process the affinity `set`: threads started later (the sleeping and
 * spinning threads, perf bench and its threads through fork and exec) inherit it.
 */
static int pin_process(const cpu_set_t *set)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int err = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid > 0 && sched_setaffinity(tid, sizeof(*set), set) != 0 && errno != ESRCH)
			err = -errno;
	}
	closedir(d);
	return err;
}

struct placement {
	bool pinned;	/* false: --cpus all, the affinity as it was */
	char cpus[256]; /* the CPU list every thread of both tools ran on */
	int ncpus;
};

/* Apply --cpus (NULL: the first CPU this process may use; "all": leave the affinity as it is). */
static int place(const char *cpus, struct placement *pl)
{
	cpu_set_t set;
	int err;

	memset(pl, 0, sizeof(*pl));
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -errno;
	format_cpulist(&set, pl->cpus, sizeof(pl->cpus));
	pl->ncpus = CPU_COUNT(&set);
	if (cpus && strcmp(cpus, "all") == 0)
		return 0;
	if (cpus) {
		if (parse_cpulist(cpus, &set) != 0)
			return -EINVAL;
	} else {
		int first = 0;

		while (first < CPU_SETSIZE && !CPU_ISSET(first, &set))
			first++;
		CPU_ZERO(&set);
		CPU_SET(first, &set);
	}
	err = pin_process(&set);
	if (err) {
		fprintf(stderr,
			"lowkey bench breakpoint: cannot pin to CPUs %s (this process may use %s)\n",
			cpus ? cpus : "", pl->cpus);
		return err;
	}
	pl->pinned = true;
	format_cpulist(&set, pl->cpus, sizeof(pl->cpus));
	pl->ncpus = CPU_COUNT(&set);
	return 0;
}

static void json_placement(struct lk__json *j, const struct placement *pl)
{
	lk__json_str(j, "cpus", pl->cpus);
	lk__json_bool(j, "pinned", pl->pinned);
	lk__json_str(j, "pinning",
		     pl->pinned ? "both tools: every thread of lowkey's measurement and perf bench "
				  "with its threads, the same CPU set" :
				  "none (--cpus all)");
}

static void print_placement(const struct placement *pl)
{
	if (pl->pinned)
		printf("cpus:    %s: both sides pinned the same way (every thread of this measurement, the\n"
		       "         sleeping and spinning ones included, and perf bench with its threads)\n",
		       pl->cpus);
	else
		printf("cpus:    not pinned (--cpus all): threads go where the scheduler puts them (CPUs %s)\n",
		       pl->cpus);
}

/* ---- perf bench itself, as a subprocess ---- */

static bool have_perf(void)
{
	return system("perf bench breakpoint >/dev/null 2>&1") == 0;
}

/* Run `perf bench -r R breakpoint ARGS` and return its "usecs/op", or NAN. */
static double run_perf_bench(int repeat, const char *args)
{
	char cmd[256], line[256];
	double usecs = NAN_;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "perf bench -r %d breakpoint %s 2>&1", repeat, args);
	p = popen(cmd, "r");
	if (!p)
		return NAN_;
	while (fgets(line, sizeof(line), p)) {
		double v;
		char unit[32];

		if (sscanf(line, " %lf %31s", &v, unit) == 2 && strcmp(unit, "usecs/op") == 0)
			usecs = v;
	}
	if (pclose(p) != 0)
		return NAN_;
	return usecs;
}

/* ---- thread: create and join threads with inherited breakpoints ---- */

struct thread_params {
	int breakpoints, parallel, threads, repeat;
};

static struct thread_params tp;
static char thread_watched[64]; /* one byte per breakpoint */

static void *passive_thread(void *arg)
{
	unsigned int *done = arg;

	while (!__atomic_load_n(done, __ATOMIC_RELAXED))
		futex_wait(done, 0);
	return NULL;
}

static void *active_thread(void *arg)
{
	unsigned int *done = arg;

	while (!__atomic_load_n(done, __ATOMIC_RELAXED))
		;
	return NULL;
}

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
			if (pthread_create(&threads[n], NULL, passive_thread, &done) != 0)
				break;
		__atomic_store_n(&done, 1, __ATOMIC_RELAXED);
		futex_wake(&done, tp.threads);
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
		return NAN_;
	t0 = lkb_now_ns();
	for (; n < tp.parallel; n++)
		if (pthread_create(&parallel[n], NULL, batch_thread, &repeat) != 0)
			break;
	for (int i = 0; i < n; i++)
		pthread_join(parallel[i], NULL);
	free(parallel);
	return (double)(lkb_now_ns() - t0) / 1000.0 / tp.repeat / tp.threads;
}

enum variant { V_PERF_BENCH, V_RAW, V_LOWKEY, V_NONE, NVARIANTS };

static const char *const variant_names[NVARIANTS] = {
	"perf bench breakpoint (linux-perf)",
	"raw perf_event_open, same experiment",
	"lowkey process-scope watchpoints",
	"no breakpoints",
};

static int thread_run_raw(double *usecs)
{
	int fds[64], n = 0, err = 0;

	for (; n < tp.breakpoints; n++) {
		fds[n] = perf_bench_breakpoint(&thread_watched[n]);
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

struct results {
	double *samples[NVARIANTS];
	double median[NVARIANTS];
	int runs;
};

static int results_init(struct results *r, int runs)
{
	memset(r, 0, sizeof(*r));
	r->runs = runs;
	for (int v = 0; v < NVARIANTS; v++) {
		r->samples[v] = calloc((size_t)runs, sizeof(double));
		if (!r->samples[v])
			return -ENOMEM;
		for (int i = 0; i < runs; i++)
			r->samples[v][i] = NAN_;
	}
	return 0;
}

static void results_finish(struct results *r)
{
	for (int v = 0; v < NVARIANTS; v++) {
		double *ok = r->samples[v];
		size_t n = 0;

		for (int i = 0; i < r->runs; i++)
			if (!__builtin_isnan(r->samples[v][i]))
				ok[n++] = r->samples[v][i];
		r->median[v] = n ? lkb_median(ok, n) : NAN_;
		free(r->samples[v]);
	}
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

static void print_ratio(double v, double base)
{
	if (__builtin_isnan(v) || __builtin_isnan(base))
		printf(" %12s", "-");
	else
		printf(" %+11.1f%%", 100.0 * (v / base - 1.0));
}

static void thread_print_json(const struct results *r, const char *perf_args,
			      const struct placement *pl)
{
	double base = r->median[V_PERF_BENCH];
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "breakpoint thread");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "breakpoints", tp.breakpoints);
	lk__json_int(&j, "parallel", tp.parallel);
	lk__json_int(&j, "threads", tp.threads);
	lk__json_int(&j, "repeat", tp.repeat);
	lk__json_int(&j, "runs", r->runs);
	lk__json_str(&j, "perf_bench_args", perf_args);
	json_placement(&j, pl);
	lk__json_array(&j, "rows");
	for (int v = 0; v < NVARIANTS; v++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "row", variant_names[v]);
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

static void thread_print_text(const struct results *r, bool perf_ok, const char *perf_args,
			      const struct placement *pl)
{
	double base = r->median[V_PERF_BENCH];

	printf("lowkey bench breakpoint thread: the hw_breakpoint contention commit's experiment on "
	       "this machine\n");
	printf("machine: %s\n", lkb_machine());
	printf("method:  %d breakpoints, %d threads creating and joining batches of %d threads, %d "
	       "batches;\n         median of %d runs, variants interleaved (in a rotating order)\n",
	       tp.breakpoints, tp.parallel, tp.threads, tp.repeat, r->runs);
	print_placement(pl);
	putchar('\n');
	printf("%-38s %10s %13s %13s\n", "", "usecs/op", "usecs/op/cpu", "vs perf bench");
	for (int v = 0; v < NVARIANTS; v++) {
		if (v == V_PERF_BENCH && !perf_ok) {
			printf("%-38s %10s   (perf not installed: apt-get install linux-perf)\n",
			       variant_names[v], "-");
			continue;
		}
		printf("%-38s %10.2f %13.1f", variant_names[v], r->median[v],
		       r->median[v] * tp.parallel);
		print_ratio(r->median[v], base);
		putchar('\n');
	}
	if (perf_ok)
		printf("(perf ran as: perf bench -r %d breakpoint %s)\n", tp.repeat, perf_args);
	printf("\nkernel commit 0912037fec (\"perf/hw_breakpoint: Reduce contention with large number\n"
	       "of tasks\"), the same command with -b 4 -p 64 -t 64 -r 30 on a 256-CPU machine:\n");
	for (size_t i = 0; i < sizeof(published_thread) / sizeof(published_thread[0]); i++)
		printf("  %-36s %10.2f %13.1f\n", published_thread[i].what,
		       published_thread[i].usecs, published_thread[i].usecs_cpu);
}

static int thread_run_variant(enum variant v, bool perf_ok, const char *perf_args, double *usecs)
{
	struct thread_params saved = tp;
	int err = 0;

	switch (v) {
	case V_PERF_BENCH:
		if (perf_ok)
			*usecs = run_perf_bench(tp.repeat, perf_args);
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

static int thread_experiment(int runs, bool json, const char *cpus)
{
	char perf_args[128];
	bool perf_ok = have_perf();
	struct placement pl;
	struct results r;
	int err = 0;

	if (tp.breakpoints > (int)sizeof(thread_watched)) {
		fprintf(stderr, "lowkey bench breakpoint: at most %zu breakpoints\n",
			sizeof(thread_watched));
		return 2;
	}
	snprintf(perf_args, sizeof(perf_args), "thread -b %d -p %d -t %d", tp.breakpoints,
		 tp.parallel, tp.threads);
	err = place(cpus ? cpus : "all", &pl);
	if (err)
		return lkb_fail("--cpus", err);
	if (results_init(&r, runs))
		return lkb_fail("thread", -ENOMEM);
	/* Each run starts with the next variant, so no variant always comes first (or last). */
	for (int run = 0; run < runs && !err; run++) {
		for (int k = 0; k < NVARIANTS && !err; k++) {
			enum variant v = (enum variant)((run + k) % NVARIANTS);

			lkb_progress("thread, run %d of %d: %s", run + 1, runs, variant_names[v]);
			err = thread_run_variant(v, perf_ok, perf_args, &r.samples[v][run]);
		}
	}
	results_finish(&r);
	if (err)
		return 1;
	if (json)
		thread_print_json(&r, perf_args, &pl);
	else
		thread_print_text(&r, perf_ok, perf_args, &pl);
	return 0;
}

/* ---- enable: disable/enable a breakpoint that P + A threads inherited ---- */

struct enable_params {
	int passive, active, repeat;
};

static struct enable_params ep;
static char enable_watched;

/* Start the passive and active threads; they stop when *done becomes 1. */
static int start_enable_threads(pthread_t *threads, unsigned int *done)
{
	int n = 0;

	for (; n < ep.passive + ep.active; n++)
		if (pthread_create(&threads[n], NULL,
				   n < ep.passive ? passive_thread : active_thread, done))
			break;
	usleep(10000); /* let them block, as perf bench does */
	return n;
}

static void stop_enable_threads(pthread_t *threads, int n, unsigned int *done)
{
	__atomic_store_n(done, 1, __ATOMIC_RELAXED);
	futex_wake(done, ep.passive);
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
	else if ((fd = perf_bench_breakpoint(&enable_watched)) < 0)
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

static void enable_print_json(const struct results *r, const char *perf_args,
			      const struct placement *pl)
{
	double base = r->median[V_PERF_BENCH];
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "breakpoint enable");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_int(&j, "passive", ep.passive);
	lk__json_int(&j, "active", ep.active);
	lk__json_int(&j, "repeat", ep.repeat);
	lk__json_int(&j, "runs", r->runs);
	lk__json_str(&j, "perf_bench_args", perf_args);
	json_placement(&j, pl);
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

static void enable_print_text(const struct results *r, bool perf_ok, const char *perf_args,
			      const struct placement *pl)
{
	double base = r->median[V_PERF_BENCH];

	printf("lowkey bench breakpoint enable: the hw_breakpoint contention commit's second experiment "
	       "on this machine\n");
	printf("machine: %s\n", lkb_machine());
	printf("method:  one inherited breakpoint, %d sleeping and %d spinning threads, %d disable+enable "
	       "pairs;\n         median of %d runs, variants interleaved (in a rotating order)\n",
	       ep.passive, ep.active, ep.repeat, r->runs);
	print_placement(pl);
	if (pl->pinned && ep.active >= pl->ncpus)
		printf("         (the %d spinning threads share those %d CPU(s) with the measuring thread)\n",
		       ep.active, pl->ncpus);
	putchar('\n');
	printf("%-38s %10s %13s\n", "", "usecs/op", "vs perf bench");
	for (int v = 0; v <= V_LOWKEY; v++) {
		if (v == V_PERF_BENCH && !perf_ok) {
			printf("%-38s %10s   (perf not installed: apt-get install linux-perf)\n",
			       enable_variant_names[v], "-");
			continue;
		}
		printf("%-38s %10.2f", enable_variant_names[v], r->median[v]);
		print_ratio(r->median[v], base);
		putchar('\n');
	}
	if (perf_ok)
		printf("(perf ran as: perf bench -r %d breakpoint %s%s%s)\n", ep.repeat, perf_args,
		       pl->pinned ? ", with the affinity of CPUs " : "",
		       pl->pinned ? pl->cpus : "");
	printf("\nkernel commit 0912037fec published no figure for this experiment.\n");
}

static int enable_experiment(int runs, bool json, const char *cpus)
{
	char perf_args[128];
	bool perf_ok = have_perf();
	struct placement pl;
	struct results r;
	int err = 0;

	snprintf(perf_args, sizeof(perf_args), "enable -p %d -a %d", ep.passive, ep.active);
	err = place(cpus, &pl);
	if (err)
		return lkb_fail("--cpus", err);
	if (results_init(&r, runs))
		return lkb_fail("enable", -ENOMEM);
	/* Each run starts with the next variant, so no variant always comes first (or last). */
	for (int run = 0; run < runs && !err; run++) {
		for (int k = 0; k <= V_LOWKEY && !err; k++) {
			enum variant v = (enum variant)((run + k) % (V_LOWKEY + 1));

			lkb_progress("enable, run %d of %d: %s", run + 1, runs, variant_names[v]);
			if (v == V_PERF_BENCH) {
				if (perf_ok)
					r.samples[v][run] = run_perf_bench(ep.repeat, perf_args);
			} else {
				err = enable_run(v == V_LOWKEY, &r.samples[v][run]);
				if (err)
					lkb_fail(v == V_LOWKEY ? "lk_watch_disable/enable" :
								 "perf_event_open/ioctl (raw)",
						 err);
			}
		}
	}
	results_finish(&r);
	if (err)
		return 1;
	if (json)
		enable_print_json(&r, perf_args, &pl);
	else
		enable_print_text(&r, perf_ok, perf_args, &pl);
	return 0;
}

static const char breakpoint_usage[] =
	"usage: lowkey bench breakpoint thread [-b B] [-p P] [-t T] [-r R] [--runs N] [--cpus LIST] [-j|--json]\n"
	"       lowkey bench breakpoint enable [-p P] [-a A] [-r R] [--runs N] [--cpus LIST] [-j|--json]\n"
	"\n"
	"The experiments of kernel commit 0912037fec (\"perf/hw_breakpoint: Reduce contention with\n"
	"large number of tasks\"), the same as `perf bench breakpoint`, run beside perf bench itself\n"
	"(when linux-perf is installed), the same experiment with raw perf_event_open, and with\n"
	"lowkey's process-scope watchpoints; the commit's published figures are printed beside them.\n"
	"\n"
	"thread: B inherited breakpoints (default 4), then P threads (default 64) create and join\n"
	"        batches of T threads (default 64) until R batches are done (default 30).\n"
	"        Prints microseconds per created thread (and times P: per CPU, as perf does).\n"
	"enable: one inherited breakpoint, P sleeping and A spinning threads (default 0 and 0),\n"
	"        then R disable+enable pairs (default 10000). Prints microseconds per pair.\n"
	"\n"
	"  --runs N      repetitions; figures are medians (default 5)\n"
	"  --cpus LIST   the CPUs both sides run on: every thread of lowkey's measurement (the\n"
	"                sleeping and spinning ones too) and perf bench with its threads get the same\n"
	"                affinity (\"0\", \"0-1\", \"0,2\"; \"all\": none set). Default for enable: the\n"
	"                first CPU this process may use (where 64 sleeping threads land would\n"
	"                otherwise decide the figure); for thread: all\n"
	"  -j, --json    print the figures as JSON\n";

static int breakpoint_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "breakpoints", required_argument, NULL, 'b' },
		{ "parallelism", required_argument, NULL, 'p' },
		{ "passive", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 't' },
		{ "active", required_argument, NULL, 'a' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "runs", required_argument, NULL, 'n' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cpus = NULL;
	bool thread, json = false;
	int runs = 5, c, b = 4, p = -1, t = 64, a = 0, r = -1;

	if (argc < 2 || (strcmp(argv[1], "thread") != 0 && strcmp(argv[1], "enable") != 0)) {
		fputs(breakpoint_usage, stderr);
		return 2;
	}
	thread = strcmp(argv[1], "thread") == 0;
	optind = 2;
	while ((c = getopt_long(argc, argv, "b:p:t:a:r:n:c:j", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			b = atoi(optarg);
			break;
		case 'p':
			p = atoi(optarg);
			break;
		case 't':
			t = atoi(optarg);
			break;
		case 'a':
			a = atoi(optarg);
			break;
		case 'r':
			r = atoi(optarg);
			break;
		case 'n':
			runs = atoi(optarg);
			break;
		case 'c':
			cpus = optarg;
			break;
		case 'j':
			json = true;
			break;
		default:
			fputs(breakpoint_usage, stderr);
			return 2;
		}
	}
	if (cpus && strcmp(cpus, "all") != 0) {
		cpu_set_t set;

		if (parse_cpulist(cpus, &set) != 0) {
			fprintf(stderr, "lowkey bench breakpoint: --cpus %s: not a CPU list\n",
				cpus);
			return 2;
		}
	}
	if (optind != argc || runs < 1 || b < 0 || t < 1 || a < 0 || (r != -1 && r < 1) ||
	    (p != -1 && p < (thread ? 1 : 0))) {
		fputs(breakpoint_usage, stderr);
		return 2;
	}
	if (thread) {
		tp = (struct thread_params){ b, p == -1 ? 64 : p, t, r == -1 ? 30 : r };
		return thread_experiment(runs, json, cpus);
	}
	ep = (struct enable_params){ p == -1 ? 0 : p, a, r == -1 ? 10000 : r };
	return enable_experiment(runs, json, cpus);
}

LK_BENCH(breakpoint_bench, "breakpoint",
	 "hw_breakpoint contention commit's perf bench: breakpoints inherited by many threads",
	 breakpoint_usage, breakpoint_run);
