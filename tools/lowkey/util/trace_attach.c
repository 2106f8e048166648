// SPDX-License-Identifier: MIT
/*
 * lowkey trace --pid PID: trace a running process through its control socket.
 *
 * The rules go in as session rules and the trace is started with "stop on close": if this command
 * is killed, the process removes the rules and stops the trace by itself. Ctrl-C, SIGTERM, SIGHUP
 * (caught from the connection on: one before the start leaves the trace unstarted) or the end of
 * --duration stop the trace properly; a process that exits meanwhile finishes the trace
 * and says so (EXIT); one that is killed leaves what it wrote, which is read back here.
 *
 * The process may be another user's, and hostile: every wait for it is bounded, and a second
 * Ctrl-C while it finishes the trace leaves at once (the process stops the trace itself when the
 * connection closes).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "builtin.h"
#include "internal/control.h"
#include "internal/trace_convert.h"
#include "probe_elf.h"
#include "signal_forward.h"
#include "status.h"
#include "trace.h"

#define REPLY_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS (10 * 60 * 1000) /* a JSON trace is converted by the process at its stop */
#define STATUS_EVERY_MS 1000		 /* the status line's clock while tracing */

static struct signal_stop stop_old;
static volatile sig_atomic_t stop_signal;
static bool stop_acted_on; /* the trace was stopped for it: it does not end lowkey as well */

/* The first asks for the trace's end; a second acts at once (whoever sends two means it). */
static void on_stop(int sig)
{
	if (!stop_signal) {
		stop_signal = sig;
		return;
	}
	signal_stop_restore_one(&stop_old, sig);
	raise(sig); /* blocked in its own handler: acts when the handler returns */
}

/* The dispositions as they were; then a signal that stopped no trace ends lowkey. */
static void release_stop_signals(void)
{
	signal_stop_restore(&stop_old);
	if (stop_signal && !stop_acted_on) {
		fflush(NULL);
		raise(stop_signal);
	}
}

/* Why the process cannot be attached to, in one line. */
static int explain_connect(pid_t pid, const char *name, int rc, const char *err)
{
	int uses;

	switch (rc) {
	case -ESRCH:
		cli_error("trace", NULL, "%s",
			  err); /* no such process, or it exited as lowkey waited */
		return CLI_EXIT_FAIL;
	case -EACCES:
		return cli_pid_denied("trace", err);
	case -EPERM:
	case -ENOTCONN:
		cli_error("trace", NULL, "%s",
			  err); /* why it cannot tell; why the process has none */
		return CLI_EXIT_FAIL;
	case -ENOENT:
	case -ECONNREFUSED:
	case -ESTALE:
		if (lk__ctl_asked(pid)) {
			cli_error("trace", NULL, "%s", err); /* it did ask for one: what is true */
			return CLI_EXIT_FAIL;
		}
		uses = proc_uses_lowkey(pid);
		if (uses == 0) {
			cli_error(
				"trace", NULL,
				"process %d (%s) is not linked with liblowkey: only programs built "
				"with lowkey's probes (LK_PROBE, -llowkey) can be traced",
				(int)pid, name);
			return CLI_EXIT_FAIL;
		}
		cli_error("trace", NULL,
			  "process %d (%s) has no lowkey control socket open: start it with "
			  "LOWKEY_CONTROL=1 in its environment, or call lk_control_open() in it",
			  (int)pid, name);
		return CLI_EXIT_FAIL;
	}
	cli_error("trace", NULL, "cannot attach to process %d (%s): %s", (int)pid, name, err);
	return CLI_EXIT_FAIL;
}

static int send_rules(struct lk__ctl_client *c, const struct trace_opts *o, const char *name)
{
	int unmatched = 0;
	char err[1024];

	for (int i = 0; i < o->nglobs; i++) {
		bool enable = o->globs[i][0] != '-';
		const char *glob = enable ? o->globs[i] : o->globs[i] + 1;
		struct lk__ctl_msg req = { .type = LK_CTL_RULE }, reply;
		int rc;

		/* a flight recorder outlives this command: its rules stay */
		req.rule = (struct lk__ctl_rule){
			enable, o->overwrite ? LK_CTL_RULE_KEEP : LK_CTL_RULE_SESSION, glob
		};
		rc = lk__ctl_call(c, &req, LK_CTL_RESULT, &reply, REPLY_TIMEOUT_MS, err,
				  sizeof(err));
		if (rc) {
			cli_error("trace", NULL, "process %d (%s) refused '%s': %s", (int)o->pid,
				  name, glob, err);
			return -1;
		}
		if (enable && reply.result.value == 0) {
			cli_error("trace", NULL, "no probe site in process %d (%s) matches '%s'",
				  (int)o->pid, name, glob);
			unmatched++;
		}
	}
	if (unmatched)
		fprintf(stderr, "hint: `lowkey list --pid %d` shows its probe sites\n",
			(int)o->pid);
	return unmatched ? -1 : 0;
}

/*
 * The output this side made, sent to the process with its START: the trace's directory for CTF;
 * for JSON or Perfetto in another mount namespace, a CTF directory beside the file
 * (OUTPUT.ctf-XXXXXX), converted here at the end since the process cannot reach the file.
 */
struct handover {
	int dir_fd;		/* -1: the process makes the output at the path (a flight recorder,
				 * or a JSON or Perfetto file it converts itself) */
	char ctf_dir[PATH_MAX]; /* "" unless a file's CTF beside it */
};

static int make_ctf_beside(const struct trace_opts *o, uid_t uid, gid_t gid, struct handover *h)
{
	struct stat st;

	if ((size_t)snprintf(h->ctf_dir, sizeof(h->ctf_dir), "%s.ctf-XXXXXX", o->output) >=
		    sizeof(h->ctf_dir) ||
	    !mkdtemp(h->ctf_dir)) {
		cli_error("trace", NULL, "cannot create a directory beside %s: %s", o->output,
			  strerror(errno));
		h->ctf_dir[0] = 0;
		return 1;
	}
	h->dir_fd = open(h->ctf_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (h->dir_fd < 0 || fstat(h->dir_fd, &st) != 0) {
		cli_error("trace", NULL, "cannot open %s: %s", h->ctf_dir, strerror(errno));
		return 1;
	}
	if (st.st_uid != geteuid()) { /* swapped since mkdtemp */
		cli_error("trace", NULL, "%s is not the directory made here", h->ctf_dir);
		return 1;
	}
	if (uid != (uid_t)-1 && fchown(h->dir_fd, uid, gid) != 0) {
		cli_error("trace", NULL, "cannot give %s to uid %u: %s", h->ctf_dir,
			  (unsigned int)uid, strerror(errno));
		return 1;
	}
	return 0;
}

/* Make the output here, as the process's owner's (uid, gid; -1: ours), unless the process does. */
static int prepare(struct trace_opts *o, const struct lk__ctl_client *c, uid_t uid, gid_t gid,
		   struct handover *h)
{
	if (o->overwrite)
		return 0; /* each snapshot makes its own output */
	if (o->format == LK_TRACE_CTF)
		return trace_prepare_output(o, uid, gid, &h->dir_fd);
	if (trace_prepare_output(o, uid, gid, NULL))
		return 1;
	return c->other_mnt ? make_ctf_beside(o, uid, gid, h) : 0;
}

static void unprepare(const struct trace_opts *o, struct handover *h)
{
	if (h->ctf_dir[0])
		rmdir(h->ctf_dir);
	trace_discard_output(o);
}

static int start(struct lk__ctl_client *c, const struct trace_opts *o, const char *name,
		 const struct handover *h)
{
	struct lk__ctl_msg req = { .type = LK_CTL_START }, reply;
	char err[1024];
	int rc;

	req.start = (struct lk__ctl_start){
		.format = (uint8_t)(h->dir_fd >= 0 ? LK_TRACE_CTF : o->format),
		.ctl_flags = o->overwrite ? 0 : LK_CTL_START_STOP_ON_CLOSE,
		.flags = (o->cputime ? LK_TRACE_CPUTIME : 0) |
			 (o->overwrite ? LK_TRACE_OVERWRITE : 0) | (o->sched ? LK_TRACE_SCHED : 0),
		.buffer_size = o->buffer,
		.path = h->ctf_dir[0] ? h->ctf_dir : o->output,
		.output = h->dir_fd >= 0 ? LK_CTL_OUT_DIR : LK_CTL_OUT_PATH,
	};
	rc = lk__ctl_call_fd(c, &req, h->dir_fd, LK_CTL_RESULT, &reply, REPLY_TIMEOUT_MS, err,
			     sizeof(err));
	if (rc)
		cli_error("trace", NULL, "process %d (%s) could not start tracing: %s", (int)o->pid,
			  name, err);
	return rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum ending { STOP_ASKED, PROCESS_EXITED, PROCESS_VANISHED };

/* Wait for the duration, a signal, or the process's end; on a terminal, the time so far. */
static enum ending wait_for_end(struct lk__ctl_client *c, const struct trace_opts *o,
				const char *name, struct trace_totals *t)
{
	double start = now_s(), deadline = o->duration ? start + o->duration : 0;
	struct lk__ctl_msg m;

	while (!stop_signal) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		int timeout = STATUS_EVERY_MS, rc;

		if (o->duration)
			status_show("tracing process %d (%s): %d s of %g", (int)o->pid, name,
				    (int)(now_s() - start), o->duration);
		else
			status_show("tracing process %d (%s): %d s; Ctrl-C stops", (int)o->pid,
				    name, (int)(now_s() - start));
		if (deadline) {
			double left = deadline - now_s();

			if (left <= 0)
				break;
			if (left * 1000 < STATUS_EVERY_MS)
				timeout = (int)(left * 1000) + 1;
		}
		rc = poll(&p, 1, timeout);
		if (rc <= 0)
			continue;
		rc = lk__ctl_recv(c, &m, 0, NULL, 0);
		if (rc == -ECONNRESET)
			return PROCESS_VANISHED;
		if (rc == 0 && m.type == LK_CTL_EXIT) {
			*t = (struct trace_totals){ m.stats.events, m.stats.lost, m.stats.bytes,
						    m.stats.threads };
			return PROCESS_EXITED;
		}
	}
	return STOP_ASKED;
}

/*
 * For JSON, the CTF the process was writing beside the output (OUT.ctf-XXXXXX), newest first:
 * real directories only, looked at without following links (the process may have put anything
 * there).
 */
static bool find_ctf_beside(const char *output, char *out, size_t len)
{
	char dir[PATH_MAX], base[PATH_MAX], prefix[PATH_MAX + 8];
	struct dirent *e;
	time_t newest = 0;
	struct stat st;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s", output);
	snprintf(base, sizeof(base), "%s", output);
	snprintf(prefix, sizeof(prefix), "%s.ctf-", basename(base));
	d = opendir(dirname(dir));
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode) && st.st_mtime >= newest &&
		    (size_t)snprintf(out, len, "%s/%s", dir, e->d_name) < len)
			newest = st.st_mtime;
	}
	if (d)
		closedir(d);
	return newest != 0;
}

/* The process converting its trace (JSON, Perfetto) as it stops. */
static void show_progress(const struct lk__ctl_progress *p, void *format)
{
	status_conversion(format, p->done, p->total);
}

static int stop(struct lk__ctl_client *c, const struct trace_opts *o, const char *name,
		struct trace_totals *t)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STOP }, reply;
	char err[1024];
	int rc;

	stop_acted_on = true;
	signal_stop_restore(&stop_old); /* a second Ctrl-C leaves without waiting */
	c->on_progress = show_progress;
	c->progress_arg = (void *)lk__trace_format_name((enum lk_trace_format)o->format);
	status_show("process %d (%s) is finishing the trace", (int)o->pid, name);
	rc = lk__ctl_call(c, &req, LK_CTL_STATS, &reply, STOP_TIMEOUT_MS, err, sizeof(err));
	status_clear();

	if (rc) {
		cli_error("trace", NULL, "process %d (%s) could not stop the trace: %s",
			  (int)o->pid, name, err);
		return rc;
	}
	*t = (struct trace_totals){ reply.stats.events, reply.stats.lost, reply.stats.bytes,
				    reply.stats.threads };
	if (reply.stats.err) {
		trace_print_summary(o, t);
		cli_error("trace", NULL, "%s", reply.stats.message);
		return reply.stats.err;
	}
	return 0;
}

/* Where a flight recorder's snapshots go, said when the process's mount namespace is not this one's. */
static const char *theirs(const struct lk__ctl_client *c)
{
	return c->other_mnt ? " in its own mount namespace" : "";
}

/*
 * The trace the process ended without finishing, read back here: its CTF directory (ours, or
 * beside the output where it made it), converted for JSON or Perfetto.
 */
static int read_back(const struct trace_opts *o, const struct lk__ctl_client *c,
		     const struct handover *h, struct trace_totals *t)
{
	char err[1024], ctf_dir[PATH_MAX] = "";

	if (h->ctf_dir[0])
		snprintf(ctf_dir, sizeof(ctf_dir), "%s", h->ctf_dir);
	else if (o->format != LK_TRACE_CTF &&
		 (c->other_mnt || !find_ctf_beside(o->output, ctf_dir, sizeof(ctf_dir))))
		return 0;
	if (trace_recover(o, ctf_dir, t, err, sizeof(err)) != 0) {
		cli_error("trace", NULL, "cannot read the trace back: %s", err);
		return -1;
	}
	return 0;
}

/* A JSON or Perfetto trace the process wrote as CTF into our directory: converted here. */
static int convert_here(const struct trace_opts *o, const struct handover *h)
{
	struct trace_totals counted;
	char err[1024];

	if (!h->ctf_dir[0])
		return 0;
	if (trace_recover(o, h->ctf_dir, &counted, err, sizeof(err)) != 0) {
		cli_error("trace", NULL, "cannot convert the trace to %s: %s",
			  lk__trace_format_name((enum lk_trace_format)o->format), err);
		return -1;
	}
	return 0;
}

static int exited(struct lk__ctl_client *c, const char *err)
{
	cli_error("trace", NULL, "%s", err);
	lk__ctl_disconnect(c);
	return CLI_EXIT_FAIL;
}

/* A signal came before the start: the trace is not started; the rules go with the connection. */
static int stopped_before_start(struct lk__ctl_client *c, const struct trace_opts *o,
				const char *name)
{
	char sig[32];

	lk__ctl_disconnect(c);
	fprintf(stderr,
		"lowkey trace: stopped by %s before the trace started; process %d (%s) is as it was\n",
		lk__signal_name(stop_signal, sig, sizeof(sig)), (int)o->pid, name);
	return CLI_EXIT_FAIL;
}

static int trace_connected(struct trace_opts *o, struct lk__ctl_client *c, char *name,
			   size_t namelen)
{
	struct handover h = { .dir_fd = -1 };
	struct trace_totals t = { 0 };
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	enum ending end;
	char err[1024];
	int rc;

	proc_name_of(o->pid, name, namelen); /* it may have exec'd while lowkey waited */
	if (lk__ctl_check(c, err, sizeof(err)) != 0)
		return exited(c, err);
	if (send_rules(c, o, name) != 0) {
		lk__ctl_disconnect(c);
		return CLI_EXIT_FAIL;
	}
	/*
	 * The process writes the trace: as root, hand it an output of its own user's. Its owner is
	 * the one read when lowkey connected, while the pin held: never that of a process that took
	 * its pid since.
	 */
	if (lk__ctl_check(c, err, sizeof(err)) != 0)
		return exited(c, err);
	if (stop_signal)
		return stopped_before_start(c, o, name);
	if (geteuid() == 0 && c->uid != 0 && c->uid != (uid_t)-1) {
		uid = c->uid;
		gid = c->gid;
	}
	/* this side makes the output, the process writes into it: never inside its own filesystem */
	if (prepare(o, c, uid, gid, &h) || start(c, o, name, &h) != 0) {
		if (h.dir_fd >= 0)
			close(h.dir_fd);
		unprepare(o, &h);
		lk__ctl_disconnect(c);
		return CLI_EXIT_FAIL;
	}
	if (h.dir_fd >= 0)
		close(h.dir_fd); /* the process has its own */
	if (o->overwrite) {
		lk__ctl_disconnect(c);
		fprintf(stderr,
			"lowkey trace: flight recorder started in process %d (%s); `lowkey snapshot --pid %d` "
			"writes its newest events (first to %s%s)\n",
			(int)o->pid, name, (int)o->pid, o->output, theirs(c));
		return CLI_EXIT_OK;
	}
	if (o->duration)
		fprintf(stderr, "lowkey trace: tracing process %d (%s) for %g s into %s\n",
			(int)o->pid, name, o->duration, o->output);
	else
		fprintf(stderr, "lowkey trace: tracing process %d (%s) into %s; Ctrl-C stops\n",
			(int)o->pid, name, o->output);
	end = wait_for_end(c, o, name, &t);
	status_clear();
	if (end == STOP_ASKED) {
		rc = stop(c, o, name, &t);
		lk__ctl_disconnect(c);
		if (rc || convert_here(o, &h) != 0)
			return CLI_EXIT_FAIL;
	} else {
		lk__ctl_disconnect(c);
		fprintf(stderr, "lowkey trace: process %d (%s) %s\n", (int)o->pid, name,
			end == PROCESS_EXITED ?
				"exited; its trace is finished" :
				"ended without finishing the trace: what it had written is kept");
		if (end == PROCESS_EXITED && convert_here(o, &h) != 0)
			return CLI_EXIT_FAIL;
		if (end == PROCESS_VANISHED && read_back(o, c, &h, &t) != 0)
			return CLI_EXIT_FAIL;
	}
	trace_print_summary(o, &t);
	return CLI_EXIT_OK;
}

int trace_attach(struct trace_opts *o)
{
	struct lk__ctl_client c;
	char err[1024], name[64];
	int rc;

	proc_name_of(o->pid, name, sizeof(name));
	status_begin("trace", !o->quiet && !o->json);
	rc = lk__ctl_connect(&c, o->pid, err, sizeof(err));
	if (rc)
		return explain_connect(o->pid, name, rc, err);
	/*
	 * From the connection on: a signal that comes while the trace starts must stop it, not end
	 * lowkey with the process tracing for no one until it sees the connection closed.
	 */
	signal_stop_catch(&stop_old, on_stop, 0);
	rc = trace_connected(o, &c, name, sizeof(name));
	release_stop_signals();
	return rc;
}
