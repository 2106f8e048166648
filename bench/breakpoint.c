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
 *
 * lowkey bench watch: lk_watch_add/remove round trips per second from 1 and 2 threads against
 * raw perf_event_open/close with the same attributes, lk_watch_move against the raw ioctl, and
 * the cost of a hit (a write to a watched variable, through to the callback).
 */
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
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

/* ---- raw perf_event_open, as perf bench and lowkey call it ---- */

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

static void futex_wait(unsigned int *word, unsigned int val)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(unsigned int *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "lowkey bench: %s: %s\n", what, lk_strerror(err));
	if (*lk_last_error())
		fprintf(stderr, "hint: %s\n", lk_last_error());
	return 1;
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
		used += (size_t)snprintf(buf + used, len - used, hi > c ? "%s%d-%d" : "%s%d", used ? "," : "", c, hi);
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
	bool pinned;		/* false: --cpus all, the affinity as it was */
	char cpus[256];		/* the CPU list every thread of both tools ran on */
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
		fprintf(stderr, "lowkey bench breakpoint: cannot pin to CPUs %s (this process may use %s)\n",
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
	lk__json_str(j, "pinning", pl->pinned ? "both tools: every thread of lowkey's measurement and perf bench "
						"with its threads, the same CPU set"
					      : "none (--cpus all)");
}

static void print_placement(const struct placement *pl)
{
	if (pl->pinned)
		printf("cpus:    %s: both sides pinned the same way (every thread of this measurement, the\n"
		       "         sleeping and spinning ones included, and perf bench with its threads)\n", pl->cpus);
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
static char thread_watched[64];	/* one byte per breakpoint */

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
		err = lk_watch_add(&w[n], &thread_watched[n], 1, LK_WATCH_READWRITE | LK_WATCH_PROCESS, NULL,
				   NULL);
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
} seed_thread[] = {
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

static void thread_print(const struct results *r, bool json, bool perf_ok, const char *perf_args,
			 const struct placement *pl)
{
	double base = r->median[V_PERF_BENCH];

	if (json) {
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
		for (size_t i = 0; i < sizeof(seed_thread) / sizeof(seed_thread[0]); i++) {
			lk__json_object(&j, NULL);
			lk__json_str(&j, "row", seed_thread[i].what);
			lk__json_num(&j, "usecs_per_op", seed_thread[i].usecs);
			lk__json_num(&j, "usecs_per_op_per_cpu", seed_thread[i].usecs_cpu);
			lk__json_close(&j);
		}
		lk__json_close(&j);
		lk__json_end(&j);
		return;
	}
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
		printf("%-38s %10.2f %13.1f", variant_names[v], r->median[v], r->median[v] * tp.parallel);
		print_ratio(r->median[v], base);
		putchar('\n');
	}
	if (perf_ok)
		printf("(perf ran as: perf bench -r %d breakpoint %s)\n", tp.repeat, perf_args);
	printf("\nkernel commit 0912037fec (\"perf/hw_breakpoint: Reduce contention with large number\n"
	       "of tasks\"), the same command with -b 4 -p 64 -t 64 -r 30 on a 256-CPU machine:\n");
	for (size_t i = 0; i < sizeof(seed_thread) / sizeof(seed_thread[0]); i++)
		printf("  %-36s %10.2f %13.1f\n", seed_thread[i].what, seed_thread[i].usecs,
		       seed_thread[i].usecs_cpu);
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
			fail("perf_event_open (raw, as perf bench does it)", err);
		break;
	case V_LOWKEY:
		err = thread_run_lowkey(usecs);
		if (err)
			fail("lk_watch_add", err);
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
		fprintf(stderr, "lowkey bench breakpoint: at most %zu breakpoints\n", sizeof(thread_watched));
		return 2;
	}
	snprintf(perf_args, sizeof(perf_args), "thread -b %d -p %d -t %d", tp.breakpoints, tp.parallel,
		 tp.threads);
	err = place(cpus ? cpus : "all", &pl);
	if (err)
		return fail("--cpus", err);
	if (results_init(&r, runs))
		return fail("thread", -ENOMEM);
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
	thread_print(&r, json, perf_ok, perf_args, &pl);
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
		if (pthread_create(&threads[n], NULL, n < ep.passive ? passive_thread : active_thread, done))
			break;
	usleep(10000);	/* let them block, as perf bench does */
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
		err = lk_watch_add(&w, &enable_watched, 1, LK_WATCH_READWRITE | LK_WATCH_PROCESS, NULL, NULL);
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
		} else if (ioctl(fd, PERF_EVENT_IOC_DISABLE, 0) || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
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

static void enable_print(const struct results *r, bool json, bool perf_ok, const char *perf_args,
			 const struct placement *pl)
{
	static const char *const names[] = {
		"perf bench breakpoint (linux-perf)",
		"raw ioctl DISABLE + ENABLE",
		"lk_watch_disable + lk_watch_enable",
	};
	double base = r->median[V_PERF_BENCH];

	if (json) {
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
			lk__json_str(&j, "row", names[v]);
			lk__json_num(&j, "usecs_per_op", r->median[v]);
			lk__json_num(&j, "vs_perf_bench", r->median[v] / base - 1.0);
			lk__json_close(&j);
		}
		lk__json_close(&j);
		lk__json_null(&j, "published");
		lk__json_end(&j);
		return;
	}
	printf("lowkey bench breakpoint enable: the hw_breakpoint contention commit's second experiment "
	       "on this machine\n");
	printf("machine: %s\n", lkb_machine());
	printf("method:  one inherited breakpoint, %d sleeping and %d spinning threads, %d disable+enable "
	       "pairs;\n         median of %d runs, variants interleaved (in a rotating order)\n", ep.passive,
	       ep.active, ep.repeat, r->runs);
	print_placement(pl);
	if (pl->pinned && ep.active >= pl->ncpus)
		printf("         (the %d spinning threads share those %d CPU(s) with the measuring thread)\n",
		       ep.active, pl->ncpus);
	putchar('\n');
	printf("%-38s %10s %13s\n", "", "usecs/op", "vs perf bench");
	for (int v = 0; v <= V_LOWKEY; v++) {
		if (v == V_PERF_BENCH && !perf_ok) {
			printf("%-38s %10s   (perf not installed: apt-get install linux-perf)\n", names[v], "-");
			continue;
		}
		printf("%-38s %10.2f", names[v], r->median[v]);
		print_ratio(r->median[v], base);
		putchar('\n');
	}
	if (perf_ok)
		printf("(perf ran as: perf bench -r %d breakpoint %s%s%s)\n", ep.repeat, perf_args,
		       pl->pinned ? ", with the affinity of CPUs " : "", pl->pinned ? pl->cpus : "");
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
		return fail("--cpus", err);
	if (results_init(&r, runs))
		return fail("enable", -ENOMEM);
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
					fail(v == V_LOWKEY ? "lk_watch_disable/enable"
							   : "perf_event_open/ioctl (raw)", err);
			}
		}
	}
	results_finish(&r);
	if (err)
		return 1;
	enable_print(&r, json, perf_ok, perf_args, &pl);
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
		case 'b': b = atoi(optarg); break;
		case 'p': p = atoi(optarg); break;
		case 't': t = atoi(optarg); break;
		case 'a': a = atoi(optarg); break;
		case 'r': r = atoi(optarg); break;
		case 'n': runs = atoi(optarg); break;
		case 'c': cpus = optarg; break;
		case 'j': json = true; break;
		default: fputs(breakpoint_usage, stderr); return 2;
		}
	}
	if (cpus && strcmp(cpus, "all") != 0) {
		cpu_set_t set;

		if (parse_cpulist(cpus, &set) != 0) {
			fprintf(stderr, "lowkey bench breakpoint: --cpus %s: not a CPU list\n", cpus);
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

LK_BENCH(breakpoint_bench, "breakpoint", "hw_breakpoint contention commit's perf bench: breakpoints inherited by many threads",
	 breakpoint_usage, breakpoint_run);

/* ==== lowkey bench watch ==== */

#define WATCH_VARS 4
static long watch_vars[2][WATCH_VARS];	/* one row per thread */

struct loop {
	int ops;		/* round trips per timed loop */
	int thread;		/* which row of watch_vars */
	int err;
	double ns;		/* per round trip */
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
	int err = lk_watch_add(&w, &watch_vars[1][3], 8, LK_WATCH_WRITE | flags, count_hit, (void *)&count);

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
	W_RAW_1, W_LK_1, W_RAW_2, W_LK_2, W_SIGACTION, W_MOVE_RAW, W_MOVE_LK,
	W_HIT_NONE, W_HIT_RAW, W_HIT_LK, W_HIT_LK_DEFERRED, NWROWS
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
			err = time_lowkey_hits(writes, LK_WATCH_DEFERRED, &v[W_HIT_LK_DEFERRED][run]);
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
	       "threads\n         pinned to CPUs 0 and 1\n", ops, runs);
	fflush(stdout);
}

/* Measured first: the raw handler must run before lowkey's dispatcher exists. */
static void watch_print_hits(const double m[NWROWS])
{
	printf("\na write to a watched variable, through to the callback           ns each\n");
	printf("  unwatched write                                           %10.1f\n", m[W_HIT_NONE]);
	printf("  raw sigtrap event, bare SIGTRAP handler                   %10.0f\n", m[W_HIT_RAW]);
	printf("  lowkey, callback in the handler                           %10.0f\n", m[W_HIT_LK]);
	printf("  lowkey, deferred (handler queues, delivery thread calls)  %10.0f\n",
	       m[W_HIT_LK_DEFERRED]);
	fflush(stdout);
}

static void watch_print_add_remove(const double m[NWROWS])
{
	printf("\nadd + remove (thread scope, 8-byte write)  round trips/s    ns each   vs raw\n");
	printf("  raw perf_event_open + close, 1 thread    %13.0f %10.0f\n", m[W_RAW_1], 1e9 / m[W_RAW_1]);
	printf("  lk_watch_add + lk_watch_remove, 1 thread %13.0f %10.0f %+7.1f%%\n", m[W_LK_1],
	       1e9 / m[W_LK_1], 100.0 * (m[W_RAW_1] / m[W_LK_1] - 1.0));
	printf("  raw, 2 threads                           %13.0f %10s   x%.2f of 1 thread\n", m[W_RAW_2],
	       "", m[W_RAW_2] / m[W_RAW_1]);
	printf("  lowkey, 2 threads                        %13.0f %10s   x%.2f of 1 thread, %+.1f%% vs "
	       "raw\n", m[W_LK_2], "", m[W_LK_2] / m[W_LK_1], 100.0 * (m[W_RAW_2] / m[W_LK_2] - 1.0));
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
		case 'r': runs = atoi(optarg); break;
		case 'o': ops = atoi(optarg); break;
		case 'j': json = true; break;
		default: fputs(watch_usage, stderr); return 2;
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
		return fail("watch", err);
	if (json)
		watch_print_json(runs, ops, med);
	return 0;
}

LK_BENCH(watch_bench, "watch", "watchpoint add/remove/move and hit costs against raw perf",
	 watch_usage, watch_run);
