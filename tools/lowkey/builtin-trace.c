// SPDX-License-Identifier: MIT
/*
 * lowkey trace: record a program's probes from its start (-- cmd), or a running process's (--pid).
 * This file: the options; the output and the summary are util/trace_output.c's, the two modes
 * util/trace_run.c's and util/trace_attach.c's, reading back a trace whose process died before
 * finishing it util/trace_recover.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "builtin.h"
#include "internal/control.h"
#include "internal/trace_convert.h"
#include "util/trace.h"

static const char trace_usage[] =
	"usage: lowkey trace [-e GLOB]... [-o OUT] [--format ctf|json|perfetto] [--cputime] [--sched]\n"
	"                    [--buffer SIZE] [--json] [--quiet] -- CMD [ARGS]\n"
	"       lowkey trace --pid PID [-e GLOB]... [-o OUT] [--format ctf|json|perfetto] [--cputime]\n"
	"                    [--buffer SIZE] [--duration S] [--json] [--quiet]\n"
	"\n"
	"Records the probes (LK_PROBE, LK_SPAN, LK_COUNTER) of a program linked with liblowkey.\n"
	"\n"
	"With a command, runs it with tracing started before its main() (through the environment,\n"
	"see docs/trace.md) and finished when it exits; child processes it starts are not traced.\n"
	"lowkey exits with the command's exit status (128+N if a signal N ended it, 127 if it could\n"
	"not be found), or 1 when the trace failed.\n"
	"\n"
	"With --pid, attaches to a running process through its control socket, which the process opens\n"
	"when started with LOWKEY_CONTROL=1 or by calling lk_control_open(); traces for S seconds or\n"
	"until Ctrl-C, then stops. The process's own rules and state are left as they were.\n"
	"\n"
	"Options:\n"
	"  -e, --event GLOBS    sites to record: comma-separated \"provider:event\" globs (fnmatch), or\n"
	"                       providers; repeatable, applied in order; a leading '-' excludes\n"
	"                       (-e '*,-db:debug', or -e '*' -e -db:debug). See `lowkey help` for -e.\n"
	"                       Default: every site. A glob that matches no site is an error.\n"
	"  -o, --output OUT     the trace: a CTF directory (default lowkey.ctf), or a file (default\n"
	"                       lowkey.json, lowkey.pftrace); an existing OUT is moved to OUT.old\n"
	"  -f, --format FMT     ctf (babeltrace2, Trace Compass), json (Chrome JSON: Perfetto UI,\n"
	"                       chrome://tracing) or perfetto (Perfetto's protobuf: ui.perfetto.dev,\n"
	"                       trace_processor; about 1/5 of the JSON's size). `lowkey convert` turns\n"
	"                       a CTF trace into the others later.\n"
	"  -c, --cputime        record each event's thread CPU time too\n"
	"      --sched          record the threads' context switches too (off-CPU time: preempted or\n"
	"                       blocked, and on which CPU); needs perf_event_open (perf_event_paranoid\n"
	"                       2 or lower, or CAP_PERFMON); `lowkey report` then splits each span's\n"
	"                       time into on-CPU, runnable (preempted) and blocked\n"
	"  -b, --buffer SIZE    per-thread ring buffer: 64K, 2M, ... (default 2M); events that find it\n"
	"                       full are dropped and counted\n"
	"  -W, --overwrite      a flight recorder: each thread's ring keeps its newest events and\n"
	"                       nothing is written until a snapshot: `lowkey snapshot --pid`, the\n"
	"                       --snapshot-signal, lk_trace_snapshot() in the program, and at its exit\n"
	"                       (OUT, then OUT.1, OUT.2, ...), in --format, with --sched's switches.\n"
	"                       With --pid: started, left running\n"
	"      --snapshot-signal SIG  with --overwrite: signal SIG (USR2, RTMIN+1, 12) takes a snapshot;\n"
	"                       not SEGV, BUS, ILL, FPE, TRAP, SYS (sent again for each fault), KILL, STOP\n"
	"  -p, --pid PID        trace a running process; OUT is made here, on this side, and the\n"
	"                       process writes into it, even one in a container (not with -W)\n"
	"  -d, --duration S     with --pid: stop after S seconds (default: at Ctrl-C)\n"
	"  -j, --json           print the summary as JSON: {\"output\", \"format\", \"events\", \"lost\",\n"
	"                       \"threads\", \"bytes\"} (on stderr, like the text one)\n"
	"  -q, --quiet          no status line while the trace is converted, or while --pid traces\n"
	"                       (shown on a terminal only, and never with --json)\n"
	"  -h, --help           this text\n"
	"\n"
	"Examples:\n"
	"  lowkey trace -e 'db:*' -- ./server --port 8080\n"
	"  lowkey trace -o run.pftrace --format perfetto --cputime -- ./bench\n"
	"  LOWKEY_CONTROL=1 ./server &  lowkey trace --pid $! -e 'net:*' --duration 10\n"
	"\n"
	"Then: babeltrace2 lowkey.ctf, `lowkey report lowkey.ctf`, or open the JSON or .pftrace in\n"
	"ui.perfetto.dev.\n";

/* ---- options ---- */

static int usage_error(const char *hint, const char *fmt, const char *arg)
{
	cli_error("trace", hint, fmt, arg);
	return CLI_EXIT_USAGE;
}

static int parse_duration(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return (errno || end == s || *end || !(*out > 0) || *out > 1e9) ? -EINVAL : 0;
}

/* --snapshot-signal SIG: a signal the program may catch, and not one the kernel sends for a fault. */
static int snapshot_signal_option(struct trace_opts *o, const char *arg)
{
	int sig = lk__parse_signal(arg);
	const char *why = sig > 0 ? lk__snapshot_signal_unfit(sig) : NULL;
	char name[32];

	if (sig <= 0)
		return usage_error("a signal the program may catch, such as USR2 or 12",
				   "bad signal '%s'", arg);
	if (why) {
		cli_error("trace", "use USR2 or a real-time signal such as RTMIN+1",
			  "--snapshot-signal %s: %s cannot take snapshots: %s", arg,
			  lk__signal_name(sig, name, sizeof(name)), why);
		return CLI_EXIT_USAGE;
	}
	o->snapshot_signal = arg;
	return 0;
}

/* One glob of an -e list, trimmed as LOWKEY_TRACE trims it; empty items are skipped there too. */
static int add_glob(struct trace_opts *o, const char *item, size_t len)
{
	char *glob;

	while (len && isspace((unsigned char)*item))
		item++, len--;
	while (len && isspace((unsigned char)item[len - 1]))
		len--;
	if (!len)
		return 0;
	if (o->nglobs == TRACE_MAX_GLOBS)
		return usage_error(NULL, "more than 64 -e globs%s", "");
	glob = strndup(item, len);
	if (!glob)
		return CLI_EXIT_FAIL;
	if (strcmp(glob, "-") == 0 || strlen(glob) > LK_CTL_MAX_GLOB) {
		usage_error("globs such as -e 'db:*' or -e 'db:*,-db:debug'", "bad glob '%s'",
			    glob);
		free(glob);
		return CLI_EXIT_USAGE;
	}
	o->globs[o->nglobs++] = glob;
	return 0;
}

/*
 * -e LIST: comma-separated globs, as lowkey stat's -e and LOWKEY_TRACE take them. A glob has no
 * braces (fnmatch has none; in lowkey stat they make a group), so {a,b} is refused, not split.
 */
static int add_globs(struct trace_opts *o, const char *list)
{
	int before = o->nglobs, rc = 0;

	if (strpbrk(list, "{}"))
		return usage_error("globs have no braces: list them, -e 'db:query,db:commit'",
				   "bad glob '%s'", list);
	for (const char *p = list; !rc;) {
		size_t len = strcspn(p, ",");

		rc = add_glob(o, p, len);
		if (!p[len])
			break;
		p += len + 1;
	}
	if (!rc && o->nglobs == before)
		return usage_error("give globs such as -e 'db:*'", "-e '%s' names no glob", list);
	return rc;
}

static int parse_option(struct trace_opts *o, int c, const char *arg)
{
	char *end;
	long pid;

	switch (c) {
	case 'e':
		return add_globs(o, arg);
	case 'o':
		free(o->output);
		o->output = strdup(arg);
		return 0;
	case 'f':
		o->format = lk__trace_format_parse(arg);
		if (o->format < 0)
			return usage_error("ctf, json or perfetto", "unknown format '%s'", arg);
		return 0;
	case 'c':
		o->cputime = true;
		return 0;
	case 'W':
		o->overwrite = true;
		return 0;
	case 'G':
		return snapshot_signal_option(o, arg);
	case 'S':
		o->sched = true;
		return 0;
	case 'j':
		o->json = true;
		return 0;
	case 'q':
		o->quiet = true;
		return 0;
	case 'b':
		if (lk__parse_size(arg, &o->buffer) != 0 || o->buffer < 4096 ||
		    o->buffer > (1u << 30))
			return usage_error("a size from 4K to 1G, such as 256K or 4M",
					   "bad buffer size '%s'", arg);
		return 0;
	case 'p':
		errno = 0;
		pid = strtol(arg, &end, 10);
		if (errno || end == arg || *end || pid <= 0 || pid > 1 << 22)
			return usage_error("give a process id, such as $(pidof server)",
					   "bad pid '%s'", arg);
		o->pid = (pid_t)pid;
		return 0;
	case 'd':
		if (parse_duration(arg, &o->duration) != 0)
			return usage_error("seconds, such as 10 or 0.5", "bad duration '%s'", arg);
		return 0;
	}
	fputs(trace_usage, stderr);
	return CLI_EXIT_USAGE;
}

/* The output as an absolute path: the traced process may run elsewhere. */
static int absolute_output(struct trace_opts *o)
{
	char cwd[PATH_MAX], *abs;
	size_t len;

	if (!o->output)
		if (asprintf(&o->output, "lowkey.%s", lk__trace_format_extension(o->format)) < 0)
			o->output = NULL;
	if (!o->output)
		return -ENOMEM;
	len = strlen(o->output);
	while (len > 1 && o->output[len - 1] == '/')
		o->output[--len] = 0;
	if (o->output[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, o->output) < 0)
		return -errno;
	free(o->output);
	o->output = abs;
	return strlen(abs) > LK_CTL_MAX_PATH - 16 ? -ENAMETOOLONG : 0;
}

static int trace_main(int argc, char **argv)
{
	static const char every_site[] = "*";
	static const struct option options[] = {
		{ "event", required_argument, NULL, 'e' },
		{ "output", required_argument, NULL, 'o' },
		{ "format", required_argument, NULL, 'f' },
		{ "cputime", no_argument, NULL, 'c' },
		{ "overwrite", no_argument, NULL, 'W' },
		{ "snapshot-signal", required_argument, NULL, 'G' },
		{ "sched", no_argument, NULL, 'S' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct trace_opts o = { .format = LK_TRACE_CTF,
				.peer_uid = (uid_t)-1,
				.peer_gid = (gid_t)-1 };
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+e:o:f:cWb:p:d:jqh", options, NULL)) != -1) {
		if (c == 'h') {
			fputs(trace_usage, stdout);
			return CLI_EXIT_OK;
		}
		rc = parse_option(&o, c, optarg);
		if (rc)
			goto out;
	}
	rc = CLI_EXIT_USAGE;
	if (o.pid && optind < argc) {
		cli_error("trace", NULL, "give either --pid or a command, not both");
		goto out;
	}
	if (!o.pid && optind == argc) {
		cli_error("trace", "lowkey trace -- ./program args, or lowkey trace --pid PID",
			  "nothing to trace");
		goto out;
	}
	if (o.snapshot_signal && (!o.overwrite || o.pid)) {
		cli_error(
			"trace",
			o.pid ? "take snapshots with `lowkey snapshot --pid`" : "add --overwrite",
			"--snapshot-signal is for a flight recorder started with a command (--overwrite -- CMD)");
		goto out;
	}
	if (o.duration && !o.pid) {
		cli_error("trace", "a traced command runs until it exits",
			  "--duration needs --pid");
		goto out;
	}
	if (!o.nglobs)
		o.globs[o.nglobs++] = every_site;
	rc = absolute_output(&o);
	if (rc) {
		cli_error("trace", NULL, "bad output path: %s", strerror(-rc));
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	o.argv = argv + optind;
	if (o.pid && cli_check_pid("trace", o.pid, false))
		rc = CLI_EXIT_FAIL;
	else
		rc = o.pid ? trace_attach(&o) : trace_run_command(&o);
out:
	for (int i = 0; i < o.nglobs; i++)
		if (o.globs[i] != every_site)
			free((char *)o.globs[i]);
	free(o.output);
	return rc;
}

const struct cli_command cmd_trace = {
	.name = "trace",
	.summary = "record a program's probes, from its start or by attaching to it",
	.usage = trace_usage,
	.run = trace_main,
};
