// SPDX-License-Identifier: MIT
/*
 * lowkey trace -- CMD: run a command with tracing from the environment.
 *
 * The command gets LOWKEY_TRACE* (environment.c reads them in a constructor, before main) and one
 * end of a SOCK_SEQPACKET socket pair, whose number is in LOWKEY_TRACE_STATUS_FD. Over it the
 * library says whether tracing started (or exactly why not: then this side kills the command
 * before its main runs), and at exit how many sites each rule matched and the trace's counters.
 * No word at all means the command never ran liblowkey's constructor: it is not linked with it.
 * A command that dies without finishing its trace (a signal, _exit, exec) leaves what it wrote;
 * this side reads that back (and converts it, for JSON) so the user still gets a trace.
 *
 * While the command runs, lowkey ignores SIGINT and SIGQUIT and passes SIGTERM and SIGHUP on to it
 * (signal_forward.h); the command starts with the signal dispositions and mask lowkey had.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/probe.h>

#include "builtin.h"
#include "internal/control.h"
#include "internal/trace_convert.h"
#include "probe_elf.h"
#include "signal_forward.h"
#include "status.h"
#include "trace.h"

struct rule_report {
	char glob[LK_CTL_MAX_GLOB + 1];
	bool enable;
	uint32_t matched;
};

struct run {
	pid_t child;
	int status_fd;
	bool started, start_failed, finished;
	char ctf_dir[LK_CTL_MAX_PATH + 1];
	struct trace_totals totals;
	int finish_err;
	char finish_msg[LK_CTL_MAX_TEXT + 1];
	struct rule_report rules[TRACE_MAX_GLOBS + 1];
	int nrules;
};

/* ---- the child ---- */

static void set_env(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

static void __attribute__((noreturn))
exec_command(const struct trace_opts *o, const struct signal_forward *sf, int status_fd,
	     int exec_fd)
{
	char list[TRACE_MAX_GLOBS * (LK_CTL_MAX_GLOB + 1) + 1] = "", num[32];
	struct stat st;
	int err;

	signal_forward_child(sf);
	fcntl(status_fd, F_SETFD, 0); /* the one fd the command inherits */
	for (int i = 0; i < o->nglobs; i++) {
		strcat(list, i ? "," : "");
		strcat(list, o->globs[i]);
	}
	/* Every variable is set or cleared here: none comes from the user's environment by accident. */
	set_env("LOWKEY_TRACE", list);
	set_env("LOWKEY_TRACE_OUTPUT", o->output);
	set_env("LOWKEY_TRACE_FORMAT", lk__trace_format_name(o->format));
	set_env("LOWKEY_TRACE_CPUTIME", o->cputime ? "1" : NULL);
	set_env("LOWKEY_TRACE_MODE", o->overwrite ? "overwrite" : NULL);
	set_env("LOWKEY_TRACE_SNAPSHOT_SIGNAL", o->snapshot_signal);
	if (o->overwrite)
		set_env("LOWKEY_CONTROL", "1"); /* so that `lowkey snapshot --pid` can ask it */
	set_env("LOWKEY_TRACE_SCHED", o->sched ? "1" : NULL);
	snprintf(num, sizeof(num), "%llu", (unsigned long long)o->buffer);
	set_env("LOWKEY_TRACE_BUFFER", o->buffer ? num : NULL);
	snprintf(num, sizeof(num), "%d", (int)getpid());
	set_env("LOWKEY_TRACE_PID", num);
	snprintf(num, sizeof(num), "%d", status_fd);
	set_env("LOWKEY_TRACE_STATUS_FD", num);
	/* which file the number is: the program may have another there by its exit */
	if (fstat(status_fd, &st) == 0)
		snprintf(num, sizeof(num), "%llu:%llu", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino);
	else
		num[0] = '\0';
	set_env("LOWKEY_TRACE_STATUS_ID", num[0] ? num : NULL);
	execvp(o->argv[0], o->argv);
	err = errno;
	if (write(exec_fd, &err, sizeof(err)) != sizeof(err)) {
		/* the parent reads EOF and takes it for a successful exec; the 127 says otherwise */
	}
	_exit(127);
}

/* ---- messages from the library ---- */

static void on_message(struct run *r, const struct lk__ctl_msg *m, const char *cmd,
		       const struct trace_opts *o)
{
	switch (m->type) {
	case LK_CTL_ENV_START:
		if (m->env_start.err) {
			cli_error("trace", NULL, "cannot trace %s: %s", cmd, m->env_start.message);
			r->start_failed = true;
			kill(r->child, SIGKILL); /* it waits for this verdict before its main() */
		} else {
			r->started = true;
			snprintf(r->ctf_dir, sizeof(r->ctf_dir), "%s", m->env_start.ctf_dir);
		}
		break;
	case LK_CTL_ENV_RULE:
		if (r->nrules < TRACE_MAX_GLOBS + 1) {
			struct rule_report *rr = &r->rules[r->nrules++];

			snprintf(rr->glob, sizeof(rr->glob), "%s", m->env_rule.glob);
			rr->enable = m->env_rule.enable;
			rr->matched = m->env_rule.matched;
		}
		break;
	case LK_CTL_ENV_FINISH:
		r->finished = true;
		r->totals = (struct trace_totals){ m->stats.events, m->stats.lost, m->stats.bytes,
						   m->stats.threads };
		r->finish_err = m->stats.err;
		snprintf(r->finish_msg, sizeof(r->finish_msg), "%s", m->stats.message);
		break;
	case LK_CTL_PROGRESS: /* converting the trace at its exit */
		status_conversion(lk__trace_format_name((enum lk_trace_format)o->format),
				  m->progress.done, m->progress.total);
		break;
	}
}

/* Read what is waiting on the status socket. Returns false at its end. */
static bool read_status(struct run *r, const char *cmd, const struct trace_opts *o)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	struct lk__ctl_msg m;

	for (;;) {
		ssize_t n = recv(r->status_fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0)
			return false;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		if (lk__ctl_decode(buf, (size_t)n, &m, NULL, 0) == 0)
			on_message(r, &m, cmd, o);
	}
}

/* ---- waiting ---- */

static int wait_for_child(struct run *r, const struct trace_opts *o)
{
	const char *cmd = o->argv[0];
	int pidfd = (int)syscall(SYS_pidfd_open, r->child, 0), status = 0;
	bool status_open = true;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = status_open ? r->status_fd : -1, .events = POLLIN },
			{ .fd = pidfd, .events = POLLIN },
		};

		/* a signal passed on to the command interrupts poll() */
		if (poll(p, 2, pidfd >= 0 ? -1 : 100) < 0 && errno != EINTR) {
			signal_forward_wait(r->child, true, &status);
			break;
		}
		if (p[0].revents)
			status_open = read_status(r, cmd, o);
		if (pidfd >= 0 && !p[1].revents)
			continue;
		if (signal_forward_wait(r->child, pidfd >= 0, &status))
			break;
	}
	if (pidfd >= 0)
		close(pidfd);
	if (status_open)
		read_status(r, cmd, o); /* what it said on its way out */
	status_clear();			/* a conversion cut short by the program's end */
	return WIFEXITED(status)   ? WEXITSTATUS(status) :
	       WIFSIGNALED(status) ? 128 + WTERMSIG(status) :
				     1;
}

/* ---- the end ---- */

/* The command's program file, found as execvp would (for messages only). */
static bool resolve(const char *cmd, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char *copy, *save = NULL;
	bool found = false;

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return true;
	}
	copy = strdup(path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *dir = strtok_r(copy, ":", &save); copy && dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		snprintf(out, len, "%s/%s", *dir ? dir : ".", cmd);
		found = access(out, X_OK) == 0;
	}
	free(copy);
	return found;
}

static void explain_no_status(const char *cmd, int code)
{
	char path[PATH_MAX];
	struct stat st;

	if (resolve(cmd, path, sizeof(path)) && stat(path, &st) == 0 &&
	    (st.st_mode & (S_ISUID | S_ISGID)))
		cli_error(
			"trace", "run it without set-user-ID, or call lk_trace_start() in it",
			"%s is set-user-ID or set-group-ID: liblowkey ignores the environment there",
			cmd);
	else if (resolve(cmd, path, sizeof(path)) && probe_elf_uses_lowkey(path))
		cli_error("trace", "see the command's own messages above",
			  "%s ended (status %d) before liblowkey could start tracing", cmd, code);
	else
		cli_error(
			"trace",
			"link it with -llowkey (`pkg-config --libs lowkey`) and mark its code with "
			"LK_PROBE() (see docs/probe.md)",
			"program is not linked with liblowkey: %s ran no program that uses it, nothing was traced",
			cmd);
}

/* How many sites each enabling glob matched; prints the ones that matched none. */
static int check_matches(const struct trace_opts *o, struct run *r, const char *cmd, int *unmatched)
{
	int total = 0;

	*unmatched = 0;
	for (int i = 0; i < o->nglobs; i++) {
		const char *g = o->globs[i][0] == '-' ? o->globs[i] + 1 : o->globs[i];
		int matched = -1;

		if (o->globs[i][0] == '-')
			continue;
		for (int k = 0; k < r->nrules; k++)
			if (r->rules[k].enable && strcmp(r->rules[k].glob, g) == 0)
				matched = (int)r->rules[k].matched;
		if (matched < 0)
			matched = trace_count_matches(
				o->format != LK_TRACE_CTF ? r->ctf_dir : o->output, g);
		if (matched == 0) {
			cli_error("trace", NULL, "no probe site in %s matches '%s'", cmd, g);
			(*unmatched)++;
		}
		total += matched > 0 ? matched : 0;
	}
	if (*unmatched)
		fprintf(stderr, "hint: `lowkey list %s` shows its probe sites\n", cmd);
	return total;
}

static int finish(const struct trace_opts *o, struct run *r, int code)
{
	const char *cmd = o->argv[0];
	char err[1024];
	int unmatched, matched;

	if (r->start_failed) {
		trace_discard_output(o);
		return CLI_EXIT_FAIL;
	}
	if (!r->started) {
		trace_discard_output(o);
		explain_no_status(cmd, code);
		return CLI_EXIT_FAIL;
	}
	matched = check_matches(o, r, cmd, &unmatched);
	if (!r->finished && o->overwrite) {
		fprintf(stderr,
			"lowkey trace: %s ended (%s %d) before its flight recorder's last snapshot: the "
			"snapshots it took before are kept\n",
			cmd, code > 128 ? "signal" : "status", code > 128 ? code - 128 : code);
		return code;
	}
	if (!r->finished) {
		fprintf(stderr,
			"lowkey trace: %s ended (%s %d) without finishing its trace: what it had written is "
			"kept (its last %s may be missing)\n",
			cmd, code > 128 ? "signal" : "status", code > 128 ? code - 128 : code,
			"100 ms");
		if (trace_recover(o, r->ctf_dir, &r->totals, err, sizeof(err)) != 0) {
			cli_error("trace", NULL, "cannot read the trace back: %s", err);
			return CLI_EXIT_FAIL;
		}
	}
	if (matched || !unmatched)
		trace_print_summary(o, &r->totals);
	if (r->finish_err) {
		cli_error("trace", NULL, "%s", r->finish_msg);
		return CLI_EXIT_FAIL;
	}
	return unmatched ? CLI_EXIT_FAIL : code;
}

static int run_command(struct trace_opts *o)
{
	struct run r = { .status_fd = -1 };
	int sv[2], exec_pipe[2], exec_err = 0, code, status;
	struct signal_forward sf;
	ssize_t n;

	if (trace_prepare_output(o, (uid_t)-1, (gid_t)-1, NULL))
		return CLI_EXIT_FAIL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0 ||
	    pipe2(exec_pipe, O_CLOEXEC) != 0) {
		cli_error("trace", NULL, "cannot set up: %s", strerror(errno));
		trace_discard_output(o);
		return CLI_EXIT_FAIL;
	}
	fflush(NULL);
	if (!signal_forward_start(&sf)) { /* asked to stop before it started */
		close(sv[0]);
		close(sv[1]);
		close(exec_pipe[0]);
		close(exec_pipe[1]);
		trace_discard_output(o);
		return CLI_EXIT_FAIL;
	}
	r.child = fork();
	if (r.child < 0) {
		signal_forward_end(&sf);
		cli_error("trace", NULL, "fork: %s", strerror(errno));
		trace_discard_output(o);
		return CLI_EXIT_FAIL;
	}
	if (r.child == 0) {
		close(sv[0]);
		close(exec_pipe[0]);
		exec_command(o, &sf, sv[1], exec_pipe[1]);
	}
	signal_forward_to(&sf, r.child);
	close(sv[1]);
	close(exec_pipe[1]);
	r.status_fd = sv[0];
	do
		n = read(exec_pipe[0], &exec_err, sizeof(exec_err));
	while (n < 0 && errno == EINTR);
	close(exec_pipe[0]);
	if (n == sizeof(exec_err)) {
		signal_forward_wait(r.child, true, &status);
		signal_forward_end(&sf);
		trace_discard_output(o);
		cli_error("trace", exec_err == ENOENT ? "check the command's name and $PATH" : NULL,
			  "cannot run '%s': %s", o->argv[0], strerror(exec_err));
		close(r.status_fd);
		return exec_err == ENOENT ? 127 : 126;
	}
	status_begin("trace", !o->quiet && !o->json);
	code = wait_for_child(&r, o);
	close(r.status_fd);
	signal_forward_end(&sf);
	return finish(o, &r, code);
}

int trace_run_command(struct trace_opts *o)
{
	struct signal_defer held_back;
	int code;

	/* a signal for lowkey outside the command's run waits until the trace is finished or removed */
	signal_forward_defer(&held_back);
	code = run_command(o);
	signal_forward_undefer(&held_back);
	return code;
}
