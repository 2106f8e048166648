// SPDX-License-Identifier: MIT
/*
 * lowkey enable --pid PID GLOB... / lowkey disable --pid PID GLOB...
 *
 * Turn a running process's probe sites on (or off) for tracers outside lowkey: perf, bpftrace,
 * SystemTap attach to the sites' USDT notes, whose probe points run only while a site is on. The
 * process must have its control socket open (LOWKEY_CONTROL=1 or lk_control_open()); the rules
 * stay after this command exits, until `lowkey disable` (lk_probe_usdt_enable/disable).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "builtin.h"
#include "internal/control.h"
#include "internal/control_protocol.h"

#define REPLY_TIMEOUT_MS 10000

static const char enable_usage[] =
	"usage: lowkey enable --pid PID GLOB...\n"
	"       lowkey disable --pid PID GLOB...\n"
	"\n"
	"Turn the probe sites of a running process on (enable) or off (disable) for tracers outside\n"
	"lowkey -- perf, bpftrace, SystemTap -- which attach to the sites' USDT notes. A site that is\n"
	"off is one NOP and its note's probe point is not reached. No lowkey trace needs to run.\n"
	"GLOB is PROVIDER or PROVIDER:EVENT with fnmatch(3) patterns, as for `lowkey trace -e`. Rules\n"
	"apply in order, the last matching one wins; they stay after this command exits, and apply\n"
	"to libraries the process loads later. The process must have its control socket open\n"
	"(LOWKEY_CONTROL=1 in its environment, or lk_control_open()).\n"
	"\n"
	"A tracer that attaches with the sites' semaphores (bpftrace, perf record -e sdt_*) needs no\n"
	"such step: the library's watcher thread reads them every 50 ms and turns those sites on\n"
	"(LOWKEY_USDT_WATCH=MS sets the interval, 0 starts no watcher): see docs/probe.md.\n"
	"\n"
	"Options:\n"
	"  -p, --pid PID   the process\n"
	"  -h, --help      this help\n"
	"\n"
	"Exit status: 0 every rule applied and every enabling GLOB matched a site; 1 otherwise;\n"
	"2 bad usage.\n"
	"\n"
	"Example:\n"
	"  LOWKEY_CONTROL=1 ./server &\n"
	"  lowkey enable --pid $! 'db:*'\n"
	"  bpftrace -p $! -e 'usdt:./server:db:query { @[arg0] = count(); }'\n";

static int parse_pid(const char *s, pid_t *out)
{
	long long v;

	if (!cli_parse_long(s, 1, 0x7fffffff, &v))
		return -1;
	*out = (pid_t)v;
	return 0;
}

/* One rule: 0 applied (and matched, when enabling), 1 not. */
static int send_rule(const char *cmd, struct lk__ctl_client *c, pid_t pid, const char *glob,
		     bool enable)
{
	struct lk__ctl_msg req = { .type = LK_CTL_USDT }, reply;
	char err[1024];
	int rc;

	req.rule = (struct lk__ctl_rule){ enable, LK_CTL_RULE_KEEP, glob };
	rc = lk__ctl_call(c, &req, LK_CTL_RESULT, &reply, REPLY_TIMEOUT_MS, err, sizeof(err));
	if (rc) {
		cli_error(cmd, NULL, "process %d refused '%s': %s", (int)pid, glob, err);
		return 1;
	}
	if (enable && reply.result.value == 0) {
		cli_error(
			cmd,
			"check the names with `lowkey list --pid PID`; a library loaded later will match",
			"no probe site in process %d matches '%s'", (int)pid, glob);
		return 1;
	}
	printf("%s: %lld site%s %s for USDT tracers in process %d\n", glob,
	       (long long)reply.result.value, reply.result.value == 1 ? "" : "s",
	       enable ? "on" : "off", (int)pid);
	return 0;
}

static int run_rules(int argc, char **argv, bool enable)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd = enable ? "enable" : "disable";
	struct lk__ctl_client c;
	char err[1024];
	pid_t pid = 0;
	int opt, rc, failed = 0;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+p:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (parse_pid(optarg, &pid) != 0) {
				cli_error(cmd, NULL, "'%s' is not a process id", optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case 'h':
			fputs(enable_usage, stdout);
			return CLI_EXIT_OK;
		default:
			fputs(enable_usage, stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (!pid || optind == argc) {
		cli_error(cmd, "lowkey enable --pid PID 'provider:event*'",
			  "give --pid and at least one GLOB");
		return CLI_EXIT_USAGE;
	}
	if (cli_check_pid(cmd, pid, false))
		return CLI_EXIT_FAIL;
	rc = lk__ctl_connect(&c, pid, err, sizeof(err));
	if (rc == -EACCES)
		return cli_pid_denied(cmd, err);
	if (rc) {
		cli_error(cmd,
			  (rc == -ENOENT || rc == -ECONNREFUSED) && !lk__ctl_asked(pid) ?
				  "start the program with LOWKEY_CONTROL=1, or have it call "
				  "lk_control_open()" :
				  NULL,
			  "%s", err);
		return CLI_EXIT_FAIL;
	}
	for (int i = optind; i < argc; i++)
		failed |= send_rule(cmd, &c, pid, argv[i], enable);
	lk__ctl_disconnect(&c);
	return failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

static int enable_main(int argc, char **argv)
{
	return run_rules(argc, argv, true);
}

static int disable_main(int argc, char **argv)
{
	return run_rules(argc, argv, false);
}

const struct cli_command cmd_enable = {
	.name = "enable",
	.summary = "turn a process's probe sites on for perf, bpftrace and SystemTap (USDT)",
	.usage = enable_usage,
	.run = enable_main,
};
const struct cli_command cmd_disable = {
	.name = "disable",
	.summary = "turn a process's probe sites off for USDT tracers",
	.usage = enable_usage,
	.run = disable_main,
};
