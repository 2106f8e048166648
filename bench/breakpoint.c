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
 * This file: the options, and what both experiments share. Each experiment has its own file,
 * breakpoint_thread.c and breakpoint_enable.c.
 */
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <dirent.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "breakpoint_bench.h"

/* ---- raw perf_event_open, as perf bench calls it ---- */

int bp_perf_breakpoint(void *addr)
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

void bp_futex_wake(unsigned int *word, int n)
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

int bp_place(const char *cpus, struct bp_placement *pl)
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

void bp_json_begin(struct lk__json *j, const char *bench)
{
	lk__json_begin(j, stdout, false);
	lk__json_str(j, "bench", bench);
	lk__json_str(j, "machine", lkb_machine());
}

void bp_json_method(struct lk__json *j, const struct bp_results *r, const char *perf_args,
		    const struct bp_placement *pl)
{
	lk__json_int(j, "runs", r->runs);
	lk__json_str(j, "perf_bench_args", perf_args);
	lk__json_str(j, "cpus", pl->cpus);
	lk__json_bool(j, "pinned", pl->pinned);
	lk__json_str(j, "pinning",
		     pl->pinned ? "both tools: every thread of lowkey's measurement and perf bench "
				  "with its threads, the same CPU set" :
				  "none (--cpus all)");
}

void bp_print_placement(const struct bp_placement *pl)
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

bool bp_have_perf(void)
{
	return system("perf bench breakpoint >/dev/null 2>&1") == 0;
}

double bp_run_perf_bench(int repeat, const char *args)
{
	char cmd[256], line[256];
	double usecs = BP_NAN;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "perf bench -r %d breakpoint %s 2>&1", repeat, args);
	p = popen(cmd, "r");
	if (!p)
		return BP_NAN;
	while (fgets(line, sizeof(line), p)) {
		double v;
		char unit[32];

		if (sscanf(line, " %lf %31s", &v, unit) == 2 && strcmp(unit, "usecs/op") == 0)
			usecs = v;
	}
	if (pclose(p) != 0)
		return BP_NAN;
	return usecs;
}

/* ---- what both experiments run and print ---- */

void *bp_passive_thread(void *arg)
{
	unsigned int *done = arg;

	while (!__atomic_load_n(done, __ATOMIC_RELAXED))
		futex_wait(done, 0);
	return NULL;
}

const char *const bp_variant_names[NVARIANTS] = {
	"perf bench breakpoint (linux-perf)",
	"raw perf_event_open, same experiment",
	"lowkey process-scope watchpoints",
	"no breakpoints",
};

int bp_results_init(struct bp_results *r, int runs)
{
	memset(r, 0, sizeof(*r));
	r->runs = runs;
	for (int v = 0; v < NVARIANTS; v++) {
		r->samples[v] = calloc((size_t)runs, sizeof(double));
		if (!r->samples[v])
			return -ENOMEM;
		for (int i = 0; i < runs; i++)
			r->samples[v][i] = BP_NAN;
	}
	return 0;
}

void bp_results_finish(struct bp_results *r)
{
	for (int v = 0; v < NVARIANTS; v++) {
		double *ok = r->samples[v];
		size_t n = 0;

		for (int i = 0; i < r->runs; i++)
			if (!__builtin_isnan(r->samples[v][i]))
				ok[n++] = r->samples[v][i];
		r->median[v] = n ? lkb_median(ok, n) : BP_NAN;
		free(r->samples[v]);
	}
}

void bp_print_ratio(double v, double base)
{
	if (__builtin_isnan(v) || __builtin_isnan(base))
		printf(" %12s", "-");
	else
		printf(" %+11.1f%%", 100.0 * (v / base - 1.0));
}

bool bp_print_no_perf(enum variant v, bool perf_ok, const char *name)
{
	if (v != V_PERF_BENCH || perf_ok)
		return false;
	printf("%-38s %10s   (perf not installed: apt-get install linux-perf)\n", name, "-");
	return true;
}

/* Until one fails: 0 or its error. */
static int run_variants(const struct bp_experiment *e, const struct bp_perf *perf,
			struct bp_results *r)
{
	int err = 0;

	for (int i = 0; i < r->runs && !err; i++) {
		for (int k = 0; k < e->nvariants && !err; k++) {
			enum variant v = (enum variant)((i + k) % e->nvariants);

			lkb_progress("%s, run %d of %d: %s", e->name, i + 1, r->runs,
				     bp_variant_names[v]);
			err = e->run(v, perf, &r->samples[v][i]);
		}
	}
	return err;
}

int bp_experiment_run(const struct bp_experiment *e, const char *perf_args, int runs, bool json,
		      const char *cpus)
{
	struct bp_perf perf = { bp_have_perf(), perf_args };
	struct bp_placement pl;
	struct bp_results r;
	int err = bp_place(cpus, &pl);

	if (err)
		return lkb_fail("--cpus", err);
	if (bp_results_init(&r, runs))
		return lkb_fail(e->name, -ENOMEM);
	err = run_variants(e, &perf, &r);
	bp_results_finish(&r);
	if (err)
		return 1;
	if (json)
		e->print_json(&r, &perf, &pl);
	else
		e->print_text(&r, &perf, &pl);
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
	if (thread)
		return bp_thread_experiment(&(struct bp_thread_params){ b, p == -1 ? 64 : p, t,
									r == -1 ? 30 : r },
					    runs, json, cpus);
	return bp_enable_experiment(&(struct bp_enable_params){ p == -1 ? 0 : p, a,
								r == -1 ? 10000 : r },
				    runs, json, cpus);
}

LK_BENCH(breakpoint_bench, "breakpoint",
	 "hw_breakpoint contention commit's perf bench: breakpoints inherited by many threads",
	 breakpoint_usage, breakpoint_run);
