// SPDX-License-Identifier: MIT
/*
 * lowkey snapshot --pid PID: write what a running process's flight recorder holds.
 *
 * The process runs an overwrite-mode trace (lowkey trace --overwrite, LOWKEY_TRACE_MODE=overwrite,
 * LK_TRACE_OVERWRITE) and has its control socket open. It writes the snapshot itself, with its own
 * rights, where it is told (a path made absolute here) or at its own next name; this side sends
 * one SNAPSHOT request and prints what the reply says. A process in another mount namespace
 * cannot reach this side's path: the directory is made here and sent to it with the request, and
 * it writes the snapshot there as CTF. The process may be hostile: the wait for
 * its reply is bounded, like every wait of the control client.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "internal/json.h"
#include "internal/control.h"
#include "internal/outfile.h"
#include "util/probe_elf.h"
#include "util/status.h"

#define SNAPSHOT_TIMEOUT_MS \
	(10 * 60 * 1000) /* a JSON or Perfetto snapshot is converted by the process */

static const char snapshot_usage[] =
	"usage: lowkey snapshot --pid PID [-o OUT] [-j|--json] [-q|--quiet]\n"
	"\n"
	"Writes what the flight recorder of a running process holds -- each thread's newest events --\n"
	"as a trace, while the process goes on recording. The process must run an overwrite-mode\n"
	"trace (`lowkey trace --overwrite -- CMD`, LOWKEY_TRACE_MODE=overwrite, or LK_TRACE_OVERWRITE\n"
	"in lk_trace_start) and have its control socket open (lowkey trace --overwrite opens it;\n"
	"otherwise LOWKEY_CONTROL=1 or lk_control_open()).\n"
	"Snapshots may be taken as often as wanted; each is a complete trace, whose packets count\n"
	"the events that were overwritten before (events_discarded, which babeltrace2 reports).\n"
	"\n"
	"Options:\n"
	"  -p, --pid PID        the process\n"
	"  -o, --output OUT     where the process writes it, in its trace's format: a new or empty\n"
	"                       directory (CTF), or file (JSON, Perfetto). For a process in another\n"
	"                       mount namespace (a container), a directory made here, on this side,\n"
	"                       where it writes the snapshot as CTF. Default: the trace's own path\n"
	"                       the first time, then PATH.1, ... (as the process sees it)\n"
	"  -j, --json           print {\"output\", \"events\", \"discarded\", \"threads\", \"bytes\"}\n"
	"  -q, --quiet          no status line while the process writes and converts the snapshot\n"
	"                       (shown on a terminal only)\n"
	"  -h, --help           this text\n"
	"\n"
	"Example:\n"
	"  lowkey trace --overwrite -o /tmp/fr.ctf -- ./server &\n"
	"  lowkey snapshot --pid $(pidof server) -o /tmp/slow-request.ctf\n";

struct snapshot_opts {
	pid_t pid;
	char *output; /* absolute, or NULL */
	bool json;
	bool quiet; /* no status line */
};

static int usage_error(const char *hint, const char *fmt, const char *arg)
{
	cli_error("snapshot", hint, fmt, arg);
	return CLI_EXIT_USAGE;
}

static int parse_args(struct snapshot_opts *o, int argc, char **argv)
{
	static const struct option options[] = {
		{ "pid", required_argument, NULL, 'p' }, { "output", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },	 { "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },	 { NULL, 0, NULL, 0 },
	};
	char cwd[PATH_MAX];
	long long pid;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "p:o:jqh", options, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!cli_parse_long(optarg, 1, 1 << 22, &pid))
				return usage_error("give a process id, such as $(pidof server)",
						   "bad pid '%s'", optarg);
			o->pid = (pid_t)pid;
			break;
		case 'o':
			free(o->output);
			if (optarg[0] == '/')
				o->output = strdup(optarg);
			else if (!getcwd(cwd, sizeof(cwd)) ||
				 asprintf(&o->output, "%s/%s", cwd, optarg) < 0)
				o->output = NULL;
			if (!o->output || !optarg[0] || strlen(o->output) > LK_CTL_MAX_PATH - 16)
				return usage_error(NULL, "bad output path '%s'", optarg);
			break;
		case 'j':
			o->json = true;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			fputs(snapshot_usage, stdout);
			return -1;
		default:
			fputs(snapshot_usage, stderr);
			return CLI_EXIT_USAGE;
		}
	}
	if (optind < argc)
		return usage_error("lowkey snapshot --pid PID [-o OUT]", "unexpected argument '%s'",
				   argv[optind]);
	if (!o->pid)
		return usage_error("lowkey snapshot --pid PID", "which process? %s",
				   "--pid is required");
	return 0;
}

/* Why the process cannot be asked, in one line. */
static int explain_connect(pid_t pid, const char *name, int rc, const char *err)
{
	switch (rc) {
	case -ESRCH:
		cli_error("snapshot", NULL, "%s",
			  err); /* no such process, or it exited as lowkey waited */
		break;
	case -EACCES:
		return cli_pid_denied("snapshot", err);
	case -ENOENT:
	case -ECONNREFUSED:
	case -ESTALE:
		if (lk__ctl_asked(pid))
			cli_error("snapshot", NULL, "%s", err); /* it did ask for one */
		else if (proc_uses_lowkey(pid) == 0)
			cli_error("snapshot", NULL,
				  "process %d (%s) is not linked with liblowkey: it has no flight "
				  "recorder",
				  (int)pid, name);
		else
			cli_error(
				"snapshot", NULL,
				"process %d (%s) has no lowkey control socket open: start it with "
				"LOWKEY_CONTROL=1 in its environment, or call lk_control_open() in it",
				(int)pid, name);
		break;
	default:
		cli_error("snapshot", NULL, "%s", err);
	}
	return CLI_EXIT_FAIL;
}

static void human_size(uint64_t bytes, char *out, size_t len)
{
	if (bytes < 1024)
		snprintf(out, len, "%llu bytes", (unsigned long long)bytes);
	else if (bytes < 1024 * 1024)
		snprintf(out, len, "%.1f KiB", (double)bytes / 1024);
	else
		snprintf(out, len, "%.1f MiB", (double)bytes / (1024 * 1024));
}

static void print_result(const struct snapshot_opts *o, const struct lk__ctl_stats *s)
{
	char size[32];

	if (o->json) {
		struct lk__json j;

		lk__json_begin(&j, stdout, true);
		lk__json_str_or_null(&j, "output", s->path);
		lk__json_uint(&j, "events", s->events);
		lk__json_uint(&j, "discarded", s->lost);
		lk__json_uint(&j, "threads", s->threads);
		lk__json_uint(&j, "bytes", s->bytes);
		lk__json_end(&j);
		return;
	}
	human_size(s->bytes, size, sizeof(size));
	printf("lowkey snapshot: %llu events (%llu before them overwritten or dropped) from %u thread%s, %s "
	       "written to %s\n",
	       (unsigned long long)s->events, (unsigned long long)s->lost, s->threads,
	       s->threads == 1 ? "" : "s", size, s->path);
}

/* The process converting its snapshot (to JSON or Perfetto: the format of its trace). */
static void show_progress(const struct lk__ctl_progress *p, void *arg)
{
	(void)arg;
	status_progress("converting the snapshot", p->done, p->total);
}

/*
 * For a process in another mount namespace: the output directory, made here as its owner's
 * (the pid's, read when lowkey connected). The descriptor, or -1 after printing why.
 */
static int make_output_here(const struct snapshot_opts *o, const struct lk__ctl_client *c,
			    bool *created)
{
	char err[PATH_MAX + 200];
	int fd = lk__out_open(o->output, LK__OUT_DIR | LK__OUT_EMPTY, created, err, sizeof(err));

	if (fd < 0) {
		cli_error("snapshot", "choose a new or empty directory with -o", "%s", err);
		return -1;
	}
	if (*created && geteuid() == 0 && c->uid != 0 && c->uid != (uid_t)-1 &&
	    fchown(fd, c->uid, c->gid) != 0) {
		cli_error("snapshot", NULL, "cannot give %s to uid %u: %s", o->output,
			  (unsigned int)c->uid, strerror(errno));
		close(fd);
		rmdir(o->output);
		return -1;
	}
	return fd;
}

static int snapshot_main(int argc, char **argv)
{
	struct snapshot_opts o = { 0 };
	struct lk__ctl_msg req = { .type = LK_CTL_SNAPSHOT }, reply;
	struct lk__ctl_client c;
	char err[1024], name[64];
	bool created = false;
	int rc = parse_args(&o, argc, argv), dir_fd = -1;

	if (rc) {
		free(o.output);
		return rc < 0 ? CLI_EXIT_OK : rc;
	}
	if (cli_check_pid("snapshot", o.pid, false)) {
		free(o.output);
		return CLI_EXIT_FAIL;
	}
	proc_name_of(o.pid, name, sizeof(name));
	rc = lk__ctl_connect(&c, o.pid, err, sizeof(err));
	if (rc) {
		free(o.output);
		return explain_connect(o.pid, name, rc, err);
	}
	req.snapshot.path = o.output ? o.output : "";
	if (o.output && c.other_mnt && (dir_fd = make_output_here(&o, &c, &created)) < 0) {
		lk__ctl_disconnect(&c);
		free(o.output);
		return CLI_EXIT_FAIL;
	}
	req.snapshot.output = dir_fd >= 0 ? LK_CTL_OUT_DIR : LK_CTL_OUT_PATH;
	c.on_progress = show_progress;
	status_begin("snapshot", !o.json && !o.quiet);
	status_show("process %d (%s) is writing its snapshot", (int)o.pid, name);
	rc = lk__ctl_call_fd(&c, &req, dir_fd, LK_CTL_STATS, &reply, SNAPSHOT_TIMEOUT_MS, err,
			     sizeof(err));
	status_clear();
	if (dir_fd >= 0)
		close(dir_fd);
	if (rc && created)
		rmdir(o.output); /* only when nothing was written */
	if (rc == -EINVAL && strstr(err, "LK_TRACE_OVERWRITE"))
		cli_error(
			"snapshot",
			"start it with `lowkey trace --overwrite`, or LOWKEY_TRACE_MODE=overwrite",
			"process %d (%s) runs no flight recorder: its trace streams to disk, there is nothing to "
			"snapshot",
			(int)o.pid, name);
	else if (rc == -ENOENT && strstr(err, "no trace"))
		cli_error(
			"snapshot",
			"start it with `lowkey trace --overwrite`, or LOWKEY_TRACE_MODE=overwrite",
			"process %d (%s) runs no trace", (int)o.pid, name);
	else if (rc)
		cli_error("snapshot", NULL, "process %d (%s) could not take the snapshot: %s",
			  (int)o.pid, name, err);
	else
		print_result(&o, &reply.stats);
	lk__ctl_disconnect(&c);
	free(o.output);
	return rc ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

const struct cli_command cmd_snapshot = {
	.name = "snapshot",
	.summary = "write what a running process's flight recorder holds",
	.usage = snapshot_usage,
	.run = snapshot_main,
};
