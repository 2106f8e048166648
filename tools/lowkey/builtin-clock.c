// SPDX-License-Identifier: MIT
/*
 * lowkey clock: which clocks lowkey can give on this machine, and why.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <lowkey/lowkey.h>

#include "builtin.h"
#include "internal/json.h"

static const char clock_usage[] =
	"usage: lowkey clock [-j|--json]\n"
	"\n"
	"Shows how lk_thread_cputime_ns() and lk_now_ns() work on this machine: the method, why\n"
	"(which step failed, and what to change), the cycle counter's frequency and where it came\n"
	"from, and the error lk_now_ns() measured against CLOCK_MONOTONIC so far.\n"
	"\n"
	"Environment (read by every program using lowkey):\n"
	"  LOWKEY_CLOCK=auto|page|seq|syscall   thread CPU time method (default auto)\n"
	"  LOWKEY_CLOCK_NOW=auto|tsc|vdso       lk_now_ns() method (default auto)\n"
	"  LOWKEY_CLOCK_REBASE_US=N             longest a CPU-time base is used (default 1000)\n"
	"\n"
	"  -j, --json print the same as JSON\n";

static void print_text(const struct lk_clock_info *i)
{
	printf("thread CPU time  %s\n", i->cputime_name);
	printf("                 %s\n", i->cputime_reason);
	if (i->thread_cputime != i->cputime)
		printf("  this thread    %s: %s\n", i->thread_cputime_name, i->thread_reason);
	printf("now              %s\n", i->now_name);
	printf("                 %s\n", i->now_reason);
	printf("counter          %s, %s", i->counter_name,
	       i->counter_usable ? "constant rate" : "not usable");
	if (i->tsc_hz)
		printf(", %.6f GHz (%s)", (double)i->tsc_hz / 1e9, i->tsc_hz_source);
	printf("\ncap_user_time    %s\n", i->cap_user_time ? "yes" : "no");
	printf("rebase interval  %llu µs\n", (unsigned long long)(i->rebase_ns / 1000));
	if (i->env_note[0])
		printf("environment      %s\n", i->env_note);
	if (i->now == LK_NOW_TSC)
		printf("now vs CLOCK_MONOTONIC: last error %lld ns, largest %llu ns, %llu resyncs\n",
		       (long long)i->now_last_error_ns, (unsigned long long)i->now_max_error_ns,
		       (unsigned long long)i->now_resyncs);
}

static void print_json(const struct lk_clock_info *i)
{
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "cputime", i->cputime_name);
	lk__json_str(&j, "cputime_reason", i->cputime_reason);
	lk__json_str(&j, "thread_cputime", i->thread_cputime_name);
	lk__json_str(&j, "thread_reason", i->thread_reason);
	lk__json_int(&j, "perf_errno", i->perf_errno);
	lk__json_bool(&j, "cap_user_time", i->cap_user_time);
	lk__json_str(&j, "now", i->now_name);
	lk__json_str(&j, "now_reason", i->now_reason);
	lk__json_str(&j, "counter", i->counter_name);
	lk__json_bool(&j, "counter_usable", i->counter_usable);
	lk__json_int(&j, "counter_hz", (long long)i->tsc_hz);
	lk__json_str(&j, "counter_hz_source", i->tsc_hz_source);
	lk__json_int(&j, "rebase_ns", (long long)i->rebase_ns);
	lk__json_int(&j, "resync_ns", (long long)i->resync_ns);
	lk__json_str(&j, "environment", i->env_note);
	lk__json_int(&j, "now_last_error_ns", (long long)i->now_last_error_ns);
	lk__json_int(&j, "now_max_error_ns", (long long)i->now_max_error_ns);
	lk__json_end(&j);
}

static int clock_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct lk_clock_info info;
	bool json = false;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "j", opts, NULL)) != -1) {
		if (c != 'j') {
			fputs(clock_usage, stderr);
			return CLI_EXIT_USAGE;
		}
		json = true;
	}
	if (optind != argc) {
		cli_error("clock", "see `lowkey clock --help`", "unexpected argument '%s'",
			  argv[optind]);
		return CLI_EXIT_USAGE;
	}
	if (lk_clock_info(&info) != 0) {
		cli_error("clock", NULL, "%s", lk_last_error());
		return CLI_EXIT_FAIL;
	}
	if (json)
		print_json(&info);
	else
		print_text(&info);
	return CLI_EXIT_OK;
}

const struct cli_command cmd_clock = {
	.name = "clock",
	.summary = "show how lowkey's clocks work on this machine, and why",
	.usage = clock_usage,
	.run = clock_run,
};
