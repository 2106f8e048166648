// SPDX-License-Identifier: MIT
/*
 * lowkey stat: count events for a command (and everything it forks) or a running process, as
 * perf stat does. This file: the options, and which output; the counting is util/stat_count.c,
 * the printing util/stat_print.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "builtin.h"
#include "internal/outfile.h"
#include "util/signal_forward.h"
#include "util/stat.h"

#define MAX_REPEAT 1000000 /* runs kept in memory for the mean and spread */
#define MIN_INTERVAL_MS 10 /* as perf stat -I */
#define MAX_INTERVAL_MS 86400000
#define DEFAULT_EVENTS                                                                \
	"task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions," \
	"branches,branch-misses"
/* -a and -C: CPU time is cpu-clock there, as in perf (task-clock counts tasks). */
#define DEFAULT_CPU_EVENTS                                                           \
	"cpu-clock,context-switches,cpu-migrations,page-faults,cycles,instructions," \
	"branches,branch-misses"

static const char stat_usage[] =
	"usage: lowkey stat [-e EVENTS] [-r N | --per-thread | -I MSEC] [-j | -x SEP] [-o FILE] [-v]\n"
	"                   [-a | -C CPUS] (-- COMMAND [ARGS...] | -p PID [--duration SECONDS])\n"
	"       lowkey stat (-a | -C CPUS) [-I MSEC] [--duration SECONDS] ...\n"
	"\n"
	"Counts events while COMMAND runs (with its children and threads), or in process PID, and\n"
	"prints them as perf stat does: the values, derived metrics (CPUs utilized, rates, IPC, miss\n"
	"ratios), how much of the time each event really counted when the PMU was multiplexed, and\n"
	"with -r the mean over the runs with its spread. Exits with COMMAND's own status (127 when\n"
	"it does not exist, 128+N when signal N ended it).\n"
	"\n"
	"  -e, --events EVENTS   comma-separated, perf's syntax: task-clock, page-faults, cycles:u,\n"
	"                        r1c0, msr/tsc/, {cycles,instructions} (a group), sched:sched_switch\n"
	"                        (default: task-clock,context-switches,cpu-migrations,page-faults,\n"
	"                        cycles,instructions,branches,branch-misses)\n"
	"  -r, --repeat N        run COMMAND N times; print means and the error of the mean\n"
	"  -p, --pid PID         count process PID (all its threads, and threads it creates)\n"
	"  -a, --all-cpus        count every process and the kernel on every CPU, while COMMAND runs or\n"
	"                        until --duration or Ctrl-C (needs kernel.perf_event_paranoid <= 0 or\n"
	"                        CAP_PERFMON)\n"
	"  -C, --cpu CPUS        as -a, on these CPUs only: 0,2-3\n"
	"      --duration S      with -p, -a or -C: stop after S seconds (default: at Ctrl-C or when PID\n"
	"                        exits)\n"
	"  -I, --interval-print MSEC  print the counts of each MSEC milliseconds as they pass (10 or\n"
	"                        more), first column the time since the start, as perf stat -I\n"
	"      --per-thread      also print each thread's (and child process's) own counts\n"
	"  -x, --field-separator SEP  print CSV as perf stat -x: value,unit,event,run time,% running,\n"
	"                        metric,metric unit\n"
	"  -j, --json            print one JSON document (with -I: one JSON object per line and event)\n"
	"  -o, --output FILE     write the figures to FILE (default: standard error, as perf)\n"
	"  -v, --verbose         say what was opened: each event's perf_event_attr and encoding, and\n"
	"                        every fallback taken\n"
	"\n"
	"Without permission to count the kernel (kernel.perf_event_paranoid >= 2), events count user\n"
	"space only and are marked :u. Hardware events on a machine without a PMU (most virtual\n"
	"machines) print <not supported> with the reason.\n";

static int append_events(struct stat_options *o, const char *more)
{
	size_t len = o->events ? strlen(o->events) + 1 : 0;
	char *grown = realloc(o->events, len + strlen(more) + 1);

	if (!grown)
		return -ENOMEM;
	if (len)
		grown[len - 1] = ',';
	strcpy(grown + len, more);
	o->events = grown;
	return 0;
}

/* -C CPUS: the CPUs to count on, as perf -C takes them. */
static int cpu_list_option(struct stat_options *o, char *arg)
{
	free(o->cpus);
	if (!cli_parse_cpu_list(arg, &o->cpus, &o->ncpus)) {
		cli_error("stat",
			  "CPU numbers and ranges, as /sys/devices/system/cpu/online "
			  "lists them: -C 0,2-3",
			  "bad CPU list '%s'", arg);
		return CLI_EXIT_USAGE;
	}
	o->all_cpus = true;
	o->cpu_list = arg;
	return 0;
}

/* One option: 0, lowkey's exit status after the error is printed, or -1 for one not ours. */
static int parse_option(struct stat_options *o, int c, char *arg)
{
	long long n;
	char *end;

	switch (c) {
	case 'e':
		if (!*arg) {
			cli_error("stat", "see 'lowkey list'",
				  "-e wants event names, not an empty string");
			return CLI_EXIT_USAGE;
		}
		return append_events(o, arg) ? CLI_EXIT_FAIL : 0;
	case 'r':
		if (!cli_parse_long(arg, 1, MAX_REPEAT, &n)) {
			cli_error("stat", NULL, "-r wants a number of runs from 1 to %d, not '%s'",
				  MAX_REPEAT, arg);
			return CLI_EXIT_USAGE;
		}
		o->repeat = (int)n;
		return 0;
	case 'p':
		if (!cli_parse_long(arg, 1, INT32_MAX, &n)) {
			cli_error("stat", NULL, "-p wants a process id, not '%s'", arg);
			return CLI_EXIT_USAGE;
		}
		o->pid = (pid_t)n;
		return 0;
	case 'd':
		o->duration = strtod(arg, &end);
		if (*end || !(o->duration > 0)) {
			cli_error("stat", NULL, "--duration wants seconds > 0, not '%s'", arg);
			return CLI_EXIT_USAGE;
		}
		return 0;
	case 't':
		o->per_thread = true;
		return 0;
	case 'x':
		if (!*arg) {
			cli_error("stat", "-x, for commas, as perf",
				  "-x wants a field separator, not an empty string");
			return CLI_EXIT_USAGE;
		}
		o->sep = arg;
		return 0;
	case 'j':
		o->json = true;
		return 0;
	case 'o':
		o->output = arg;
		return 0;
	case 'I':
		if (!cli_parse_long(arg, MIN_INTERVAL_MS, MAX_INTERVAL_MS, &n)) {
			cli_error("stat", "perf's smallest is 10 ms too",
				  "-I wants milliseconds "
				  "from %d to %d, not '%s'",
				  MIN_INTERVAL_MS, MAX_INTERVAL_MS, arg);
			return CLI_EXIT_USAGE;
		}
		o->interval_ms = (long)n;
		return 0;
	case 'a':
		o->all_cpus = true;
		return 0;
	case 'C':
		return cpu_list_option(o, arg);
	case 'v':
		o->verbose = true;
		return 0;
	}
	return -1;
}

static int check_options(const struct stat_options *o);

static int parse_options(int argc, char **argv, struct stat_options *o)
{
	static const struct option longopts[] = {
		{ "events", required_argument, NULL, 'e' },
		{ "event", required_argument, NULL, 'e' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "per-thread", no_argument, NULL, 't' },
		{ "field-separator", required_argument, NULL, 'x' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "interval-print", required_argument, NULL, 'I' },
		{ "all-cpus", no_argument, NULL, 'a' },
		{ "cpu", required_argument, NULL, 'C' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	int c, rc;

	memset(o, 0, sizeof(*o));
	o->repeat = 1;
	optind = 1;
	opterr = 0;
	/* '+': stop at the command's name, so its own options are left alone. */
	while ((c = getopt_long(argc, argv, "+e:r:p:x:jo:I:aC:v", longopts, NULL)) != -1) {
		rc = parse_option(o, c, optarg);
		if (rc < 0)
			cli_error("stat", "see 'lowkey help stat'", "unknown option '%s'",
				  argv[optind - 1]);
		if (rc)
			return rc < 0 ? CLI_EXIT_USAGE : rc;
	}
	o->argv = argv + optind;
	return check_options(o);
}

/* Combinations that mean nothing. */
static int check_options(const struct stat_options *o)
{
	const char *bad = NULL, *hint = NULL;
	bool command = o->argv[0] != NULL;

	if (o->json && o->sep)
		bad = "--json and -x are different formats: pick one";
	else if (o->all_cpus && o->pid)
		bad = "-p and -a/-C: pick one",
		hint = "-p counts one process wherever it runs; -a and -C count CPUs";
	else if (o->all_cpus && o->per_thread)
		bad = "--per-thread counts a command's or a process's threads, not CPUs";
	else if (o->interval_ms && o->repeat > 1)
		bad = "-I prints one run as it goes: drop -r";
	else if (o->interval_ms && o->per_thread)
		bad = "-I prints one run as it goes: drop --per-thread";
	else if (!o->all_cpus && !o->pid == !command)
		bad = o->pid ? "give either a command or -p PID, not both" :
			       "nothing to count: give a command or -p PID",
		hint = "lowkey stat [-e EVENTS] -- COMMAND [ARGS], -p PID, or -a";
	else if (command && o->duration > 0)
		bad = "--duration goes with -p PID, -a or -C",
		hint = "a command is counted until it exits";
	else if (o->per_thread && o->repeat > 1)
		bad = "--per-thread shows one run: drop -r";
	else if (!command && o->repeat > 1)
		bad = o->pid ? "-r repeats a command; it has no meaning with -p" :
			       "-r repeats a command; give one after --";
	if (!bad)
		return -1;
	cli_error("stat", hint, "%s", bad);
	return CLI_EXIT_USAGE;
}

static void finish_stats(struct stat_result *r)
{
	for (size_t i = 0; i < r->nevents; i++)
		lkb_mean_stddev(r->events[i].runs, (size_t)r->runs, &r->events[i].mean,
				&r->events[i].stddev);
	lkb_mean_stddev(r->elapsed_ns, (size_t)r->runs, &r->elapsed_mean, &r->elapsed_stddev);
}

static void print_result(const struct stat_options *o, struct stat_result *r)
{
	finish_stats(r);
	if (o->interval_ms)
		return; /* printed as it went, as perf stat -I */
	if (o->json)
		stat_print_json(o->out, r);
	else if (o->sep)
		stat_print_csv(o->out, o->sep, r);
	else
		stat_print_text(o->out, r);
}

static int stat_run(int argc, char **argv)
{
	struct stat_result r = { 0 };
	struct signal_defer held_back;
	struct stat_options o;
	char err[1024];
	int rc;

	rc = parse_options(argc, argv, &o);
	if (rc >= 0)
		goto done;
	if (o.pid && cli_check_pid("stat", o.pid, true)) {
		rc = CLI_EXIT_FAIL;
		goto done;
	}
	if (!o.events && append_events(&o, o.all_cpus ? DEFAULT_CPU_EVENTS : DEFAULT_EVENTS)) {
		rc = CLI_EXIT_FAIL;
		goto done;
	}
	o.format = o.json ? STAT_JSON : o.sep ? STAT_CSV : STAT_TEXT;
	o.out = stderr;
	/* Before counting: -I prints as it goes, and an unwritable file is better said at once. */
	if (o.output && !(o.out = lk__out_fopen(o.output, err, sizeof(err)))) {
		cli_error("stat", NULL, "%s", err);
		rc = CLI_EXIT_FAIL;
		goto done;
	}
	if (o.argv[0])
		signal_forward_defer(&held_back);
	rc = o.argv[0] ? stat_command(&o, &r) : stat_attached(&o, &r);
	if (r.runs > 0) /* else nothing was counted, and the error is printed */
		print_result(&o, &r);
	if (o.out != stderr && fclose(o.out) != 0 && rc < 0) {
		cli_error("stat", NULL, "writing %s failed: %s", o.output, strerror(errno));
		rc = CLI_EXIT_FAIL;
	}
	if (o.argv[0])
		signal_forward_undefer(&held_back); /* a ^C between runs ends lowkey here */
	if (rc < 0)
		rc = o.argv[0] ? r.exit_status : CLI_EXIT_OK;
done:
	stat_free_result(&r);
	free(o.events);
	free(o.cpus);
	return rc;
}

const struct cli_command cmd_stat = {
	.name = "stat",
	.summary = "count events for a command, a process or CPUs, as perf stat",
	.usage = stat_usage,
	.run = stat_run,
};
