// SPDX-License-Identifier: MIT
/*
 * lowkey stat's counting: a command (and everything it forks) or a running process or CPUs, as
 * perf stat counts them, into a stat_result (stat.h) that stat_print.c prints.
 *
 * A command is forked, held on a pipe while its counters are opened (inherited, enabled on
 * exec), then let go: counting starts at its execve() and covers its children and threads. An
 * exec failure comes back on a close-on-exec pipe, so a missing command exits 127 as in a shell.
 * Signals are as time(1) has them (signal_forward.h): passed on from when the command is let go.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "builtin.h"
#include "internal/utf8.h"
#include "signal_forward.h"
#include "stat.h"

/* ---- results ---- */

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static char *join_words(char **argv)
{
	size_t len = 1;
	char *s;

	for (char **a = argv; *a; a++)
		len += strlen(*a) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (char **a = argv; *a; a++) {
		strcat(s, *a);
		if (a[1])
			strcat(s, " ");
	}
	return s;
}

/* The first run fixes the rows: names, units, which events this machine supports. */
static int describe_events(struct stat_result *r, struct lk_counters *c, int repeat)
{
	r->nevents = lk_counters_count(c);
	r->events = calloc(r->nevents, sizeof(*r->events));
	if (!r->events)
		return -ENOMEM;
	for (size_t i = 0; i < r->nevents; i++) {
		struct stat_event *e = &r->events[i];
		struct lk_counter_info info;

		lk_counters_describe(c, i, &info);
		if (info.user_only_fallback) {
			e->name = malloc(strlen(info.name) + 3);
			if (e->name)
				sprintf(e->name, "%s:u", info.name);
		} else {
			e->name = strdup(info.name);
		}
		e->resolved = dup_or_empty(info.event);
		e->unit = dup_or_empty(info.unit);
		e->scale = info.scale;
		e->type = info.type;
		e->config = info.config;
		e->supported = info.error == 0;
		e->error = info.error;
		e->why = info.error ? strdup(info.why) : NULL;
		e->user_only = info.user_only;
		e->user_only_fallback = info.user_only_fallback;
		e->runs = calloc((size_t)repeat, sizeof(double));
		if (!e->name || !e->resolved || !e->unit || !e->runs)
			return -ENOMEM;
	}
	return 0;
}

static void record_values(struct stat_result *r, int run, const struct lk_counter_value *v)
{
	for (size_t i = 0; i < r->nevents; i++) {
		r->events[i].runs[run] = (double)v[i].scaled;
		r->events[i].enabled += v[i].time_enabled;
		r->events[i].running += v[i].time_running;
	}
}

void stat_free_result(struct stat_result *r)
{
	for (size_t i = 0; i < r->nevents; i++) {
		free(r->events[i].name);
		free(r->events[i].resolved);
		free(r->events[i].unit);
		free(r->events[i].why);
		free(r->events[i].runs);
	}
	for (size_t t = 0; t < r->nthreads; t++)
		free(r->threads[t].values);
	free(r->threads);
	free(r->events);
	free(r->elapsed_ns);
	free(r->target);
}

/*
 * An open failure: unknown event and bad syntax are usage errors (2), the rest failures (1). -a
 * and -C denied: the library's message names the sysctl's value now and the capability.
 */
static int open_failed(const struct stat_options *o, int err)
{
	bool usage = err == -ENOENT || (err == -EINVAL && !o->all_cpus);
	bool denied = err == -EACCES || err == -EPERM;
	const char *hint = usage ? "`lowkey list` shows this machine's events" : NULL;

	if (o->all_cpus && denied)
		hint = "-a and -C count every process on the CPUs, which the kernel allows only with "
		       "kernel.perf_event_paranoid <= 0 or CAP_PERFMON; without them, count a command or -p PID";
	else if (o->all_cpus && err == -EINVAL)
		usage = true; /* a CPU that is not online */
	cli_error("stat", hint, "%s", lk_last_error());
	return usage ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
}

/* By process, then thread; the threads still running (tid 0) last. */
static int by_thread(const void *a, const void *b)
{
	const struct stat_thread *x = a, *y = b;

	if (!x->tid != !y->tid)
		return x->tid ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

static int collect_threads(struct stat_result *r, struct lk_counters *c)
{
	struct lk_counter_value *v = calloc(r->nevents, sizeof(*v));

	r->nthreads = lk_counters_nthreads(c);
	r->threads = calloc(r->nthreads, sizeof(*r->threads));
	if (!v || !r->threads) {
		free(v);
		return -ENOMEM;
	}
	for (size_t t = 0; t < r->nthreads; t++) {
		struct stat_thread *th = &r->threads[t];
		struct lk_counter_thread who;
		int err = lk_counters_read_thread(c, t, &who, v, r->nevents);

		th->values = calloc(r->nevents, sizeof(double));
		if (err < 0 || !th->values) {
			free(v);
			return err < 0 ? err : -ENOMEM;
		}
		for (size_t i = 0; i < r->nevents; i++)
			th->values[i] = (double)v[i].scaled;
		th->pid = who.pid;
		th->tid = who.tid;
		lk__text_escape(who.comm[0] ? who.comm : "?", th->comm, sizeof(th->comm));
	}
	free(v);
	qsort(r->threads, r->nthreads, sizeof(*r->threads), by_thread);
	return 0;
}

/* ---- counting a command ---- */

struct child {
	pid_t pid;
	int go;			       /* write end: one byte lets the child exec */
	int failed;		       /* read end: errno of a failed exec, or EOF on success */
	struct signal_forward signals; /* lowkey's own, back once the child is reaped */
};

static void child_exec(char **argv, const struct signal_forward *sf, int go, int failed)
{
	char byte;
	int err;

	signal_forward_child(sf);
	if (read(go, &byte, 1) != 1)
		_exit(CLI_EXIT_FAIL); /* lowkey gave up before starting it */
	execvp(argv[0], argv);
	err = errno;
	if (write(failed, &err, sizeof(err)) < 0)
		_exit(126);
	_exit(err == ENOENT ? 127 : 126);
}

/* 0, -EINTR when lowkey was asked to stop before the command started, or another -errno. */
static int start_child(char **argv, struct child *ch)
{
	int go[2], failed[2];

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(failed, O_CLOEXEC)) {
		close(go[0]);
		close(go[1]);
		return -EMFILE;
	}
	fflush(NULL);
	if (!signal_forward_start(&ch->signals)) {
		close(go[0]);
		close(go[1]);
		close(failed[0]);
		close(failed[1]);
		return -EINTR;
	}
	ch->pid = fork();
	if (ch->pid < 0) {
		int err = -errno;

		signal_forward_end(&ch->signals);
		close(go[0]);
		close(go[1]);
		close(failed[0]);
		close(failed[1]);
		return err;
	}
	if (ch->pid == 0) {
		close(go[1]);
		close(failed[0]);
		child_exec(argv, &ch->signals, go[0], failed[1]);
	}
	close(go[0]);
	close(failed[1]);
	ch->go = go[1];
	ch->failed = failed[0];
	return 0;
}

/*
 * Let the held child exec, and from now pass SIGTERM and SIGHUP on to it. One that came while it
 * was held waited until now: passed on then, it would have ended the child before its exec.
 * false when the child is gone: something else ended it while it was held (a ^C from the
 * terminal reaches it too), and the write failed with EPIPE. SIGPIPE is blocked around the write,
 * and the one it raised taken back, so that lowkey says so instead of dying of it.
 */
static bool let_go(struct child *ch)
{
	struct timespec now = { 0, 0 };
	sigset_t pipe_only, old;
	bool gone;

	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	sigprocmask(SIG_BLOCK, &pipe_only, &old);
	gone = write(ch->go, "g", 1) != 1;
	if (gone && errno == EPIPE && !sigismember(&old, SIGPIPE))
		sigtimedwait(&pipe_only, NULL, &now);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (gone)
		kill(ch->pid, SIGKILL); /* if it is still there, it must not run the command */
	close(ch->go);
	signal_forward_to(&ch->signals, ch->pid);
	return !gone;
}

static void wait_child(struct child *ch, int *status, struct rusage *ru)
{
	signal_forward_wait4(ch->pid, true, status, ru);
	signal_forward_end(&ch->signals);
}

/*
 * --per-thread: the kernel reports each thread as it exits into ring buffers that must be drained
 * while the command runs. Wait on the child's pidfd and the rings together.
 */
static bool child_exited(pid_t pid)
{
	siginfo_t info = { 0 };

	/* WNOWAIT: leave the status for wait_child(). */
	return waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	       info.si_pid == pid;
}

static void collect_reports_until_exit(struct lk_counters *c, pid_t pid)
{
	struct pollfd fds[257];
	int ring_fds[256], pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	size_t n = lk_counters_poll_fds(c, ring_fds, 256);

	/* Without pidfds (Linux < 5.3) a ring wakes us, or the timeout. */
	fds[0].fd = pidfd;
	fds[0].events = POLLIN;
	for (size_t i = 0; i < n; i++) {
		fds[i + 1].fd = ring_fds[i];
		fds[i + 1].events = POLLIN;
	}
	for (;;) {
		int ready = poll(fds, n + 1, pidfd >= 0 ? 1000 : 50);

		lk_counters_poll(c);
		if (ready < 0 && errno != EINTR)
			break;
		if (pidfd >= 0 ? ready > 0 && fds[0].revents : child_exited(pid))
			break;
	}
	if (pidfd >= 0)
		close(pidfd);
}

static int exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return CLI_EXIT_FAIL;
}

/* The counters of a run: the command's (inherited, from its exec) or, with -a/-C, the CPUs' (opened
 * disabled, enabled just before the command is let go). */
static int open_counters(const struct stat_options *o, pid_t pid, unsigned flags,
			 struct lk_counters **c)
{
	if (o->all_cpus)
		return lk_counters_open_cpus(c, o->events, o->cpus, o->ncpus,
					     LK_COUNTERS_SKIP_UNSUPPORTED | LK_COUNTERS_DISABLED);
	return lk_counters_open(c, o->events, pid, flags);
}

static const char *type_name(uint32_t type)
{
	static const char *const names[] = { "hardware",       "software", "tracepoint",
					     "hardware cache", "raw",	   "breakpoint" };

	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "PMU";
}

/* -v: what was opened, on what, as what; and each fallback. */
static void say_what_was_opened(struct lk_counters *c, const struct stat_options *o, pid_t pid)
{
	size_t n = lk_counters_count(c);

	if (o->all_cpus)
		fprintf(stderr,
			"lowkey stat: %zu events on %s (pid -1, one counter per event and CPU)\n",
			n, o->cpu_list ? "the CPUs given with -C" : "every online CPU");
	else if (o->pid)
		fprintf(stderr,
			"lowkey stat: %zu events on each of the %zu threads of process %d, inherited "
			"by the threads it creates\n",
			n, lk_counters_nthreads(c), (int)pid);
	else
		fprintf(stderr,
			"lowkey stat: %zu events on pid %d, inherited by its children and threads, "
			"enabled at its exec%s\n",
			n, (int)pid,
			o->per_thread ? ", one counter per event and CPU (--per-thread)" : "");
	for (size_t i = 0; i < n; i++) {
		struct lk_counter_info info;

		lk_counters_describe(c, i, &info);
		if (info.error) {
			fprintf(stderr, "lowkey stat:   %s: not counted, left out (%s): %s\n",
				info.name, strerror(-info.error), info.why);
			continue;
		}
		fprintf(stderr,
			"lowkey stat:   %s: perf_event_attr type %u (%s) config %#llx, group %u, "
			"%s; encoding %s\n",
			info.name, info.type, type_name(info.type), (unsigned long long)info.config,
			info.group,
			info.user_only ? "exclude_kernel=1 exclude_hv=1" : "user and kernel",
			info.event);
		if (info.user_only_fallback)
			fprintf(stderr,
				"lowkey stat:   %s: fell back to user space only: this user may not count "
				"the kernel (kernel.perf_event_paranoid >= 2, no CAP_PERFMON)\n",
				info.name);
	}
}

/* -I for a command: print intervals until it exits (it stays unreaped for wait_child()). */
static int intervals_of_child(const struct stat_options *o, struct stat_result *r,
			      struct lk_counters *c, pid_t pid)
{
	struct stat_watch w = { .pid = pid,
				.child = true,
				.pidfd = (int)syscall(SYS_pidfd_open, pid, 0) };
	struct stat_interval_options io = { o->interval_ms, o->out, o->format, o->sep };
	double elapsed;
	int err = stat_intervals(c, r, &w, &io, &elapsed);

	if (w.pidfd >= 0)
		close(w.pidfd);
	return err;
}

/* What start_run() and run_once() return when lowkey was asked to stop before the run began. */
#define RUN_STOPPED (-2)

/*
 * Start the command, held, and open its counters; describe the events at the first run. Returns
 * -1 with *ch and *c set, RUN_STOPPED, or an exit status for lowkey after the error is printed.
 */
static int start_run(const struct stat_options *o, struct stat_result *r, int run, struct child *ch,
		     struct lk_counters **c)
{
	struct rusage ru;
	int status, err;

	err = start_child(o->argv, ch);
	if (err == -EINTR)
		return RUN_STOPPED;
	if (err) {
		cli_error("stat", NULL, "cannot start '%s': %s", o->argv[0], strerror(-err));
		return CLI_EXIT_FAIL;
	}
	err = open_counters(o, ch->pid,
			    LK_COUNTERS_INHERIT | LK_COUNTERS_ENABLE_ON_EXEC |
				    LK_COUNTERS_SKIP_UNSUPPORTED |
				    (o->per_thread ? LK_COUNTERS_PER_THREAD : 0),
			    c);
	if (err) {
		close(ch->go); /* the child reads EOF and exits without running the command */
		close(ch->failed);
		wait_child(ch, &status, &ru);
		return open_failed(o, err);
	}
	if (run == 0 && describe_events(r, *c, o->repeat)) {
		lk_counters_close(*c);
		close(ch->go);
		close(ch->failed);
		wait_child(ch, &status, &ru);
		cli_error("stat", NULL, "out of memory");
		return CLI_EXIT_FAIL;
	}
	if (o->verbose && run == 0)
		say_what_was_opened(*c, o, ch->pid);
	return -1;
}

/* The held child was ended before it could exec: the status it ended with. */
static int ended_before_start(const struct stat_options *o, int status)
{
	if (WIFSIGNALED(status))
		cli_error("stat", NULL, "'%s' was ended by SIG%s before it started", o->argv[0],
			  sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
	else
		cli_error("stat", NULL, "'%s' ended before it started", o->argv[0]);
	return exit_code(status);
}

/* The command could not be executed: its exit status, as a shell's. */
static int exec_failed(const struct stat_options *o, int exec_errno)
{
	if (exec_errno == ENOENT)
		cli_error("stat", "is it installed, and on PATH?", "%s: command not found",
			  o->argv[0]);
	else
		cli_error("stat", NULL, "%s: cannot execute: %s", o->argv[0], strerror(exec_errno));
	return exec_errno == ENOENT ? 127 : 126;
}

/* The counts of a run that has ended, into r. -1, or an exit status after the error is printed. */
static int read_run(const struct stat_options *o, struct stat_result *r, int run,
		    struct lk_counters *c)
{
	struct lk_counter_value *values = calloc(r->nevents, sizeof(*values));

	if (!values || lk_counters_read(c, values, r->nevents) < 0) {
		cli_error("stat", NULL, "reading the counters failed: %s",
			  values ? lk_last_error() : "out of memory");
		free(values);
		return CLI_EXIT_FAIL;
	}
	record_values(r, run, values);
	free(values);
	if (o->per_thread) {
		r->lost = lk_counters_poll(c);
		if (collect_threads(r, c)) {
			cli_error("stat", NULL, "reading per-thread counts failed: %s",
				  lk_last_error());
			return CLI_EXIT_FAIL;
		}
	}
	return -1;
}

/* One run of the command. Returns an exit status for lowkey when the run could not happen
 * (>= 0), RUN_STOPPED when lowkey was asked to stop before it, or -1 after a run whose figures are
 * in r. */
static int run_once(const struct stat_options *o, struct stat_result *r, int run)
{
	struct lk_counters *c = NULL;
	struct child ch = { -1, -1, -1 };
	struct rusage ru = { 0 };
	int status = 0, err = 0, exec_errno, rc;
	double t0;
	ssize_t got;

	rc = start_run(o, r, run, &ch, &c);
	if (rc >= 0 || rc == RUN_STOPPED)
		return rc;
	if (o->all_cpus)
		lk_counters_enable(c); /* the CPUs from now: the command is about to exec */
	t0 = stat_now_ns();
	if (!let_go(&ch)) {
		close(ch.failed);
		wait_child(&ch, &status, &ru);
		lk_counters_close(c);
		return ended_before_start(o, status);
	}
	got = read(ch.failed, &exec_errno, sizeof(exec_errno));
	close(ch.failed);
	if (got != (ssize_t)sizeof(exec_errno)) {
		if (o->per_thread)
			collect_reports_until_exit(c, ch.pid);
		else if (o->interval_ms)
			err = intervals_of_child(o, r, c, ch.pid);
	}
	wait_child(&ch, &status, &ru);
	r->elapsed_ns[run] = stat_now_ns() - t0;
	if (err) {
		lk_counters_close(c);
		cli_error("stat", NULL, "reading the counters failed: %s", lk_last_error());
		return CLI_EXIT_FAIL;
	}
	if (got == (ssize_t)sizeof(exec_errno)) {
		lk_counters_close(c);
		return exec_failed(o, exec_errno);
	}
	rc = read_run(o, r, run, c);
	lk_counters_close(c);
	if (rc >= 0)
		return rc;
	r->user_ns +=
		((double)ru.ru_utime.tv_sec * 1e9 + (double)ru.ru_utime.tv_usec * 1e3) / o->repeat;
	r->sys_ns +=
		((double)ru.ru_stime.tv_sec * 1e9 + (double)ru.ru_stime.tv_usec * 1e3) / o->repeat;
	r->exit_status = exit_code(status);
	r->runs = run + 1;
	return -1;
}

/* A run that SIGINT, SIGQUIT, SIGTERM or SIGHUP ended is the last: lowkey was asked to stop. */
static bool asked_to_stop(int exit_status)
{
	return exit_status == 128 + SIGINT || exit_status == 128 + SIGQUIT ||
	       exit_status == 128 + SIGTERM || exit_status == 128 + SIGHUP;
}

int stat_command(const struct stat_options *o, struct stat_result *r)
{
	int rc = -1;

	r->target = join_words(o->argv);
	r->elapsed_ns = calloc((size_t)o->repeat, sizeof(double));
	if (!r->target || !r->elapsed_ns)
		return CLI_EXIT_FAIL;
	for (int run = 0; run < o->repeat && rc < 0; run++) {
		rc = run_once(o, r, run);
		if (rc == RUN_STOPPED)
			return -1; /* the runs so far stand; the caller's signal_forward_undefer() ends lowkey */
		if (rc < 0 && asked_to_stop(r->exit_status))
			break;
	}
	return rc;
}

/* ---- counting a running process, or CPUs ---- */

static void on_interrupt(int sig)
{
	(void)sig;
	stat_interrupted = 1;
}

static char *attached_target(const struct stat_options *o)
{
	char *t = NULL;

	if (o->pid)
		return asprintf(&t, "process %d", (int)o->pid) < 0 ? NULL : t;
	if (o->cpu_list)
		return asprintf(&t, "CPU(s) %s", o->cpu_list) < 0 ? NULL : t;
	return strdup("system wide");
}

/* Count until the duration, Ctrl-C, or the process's end, whichever comes first; with -I print
 * the intervals meanwhile. */
static int count_attached(const struct stat_options *o, struct stat_result *r,
			  struct lk_counters *c)
{
	struct signal_stop old;
	struct stat_watch w = { .pid = o->pid, .pidfd = -1 };
	double t0 = stat_now_ns();
	int err = 0;

	if (o->pid)
		w.pidfd = (int)syscall(SYS_pidfd_open, o->pid, 0);
	w.deadline_ns = o->duration > 0 ? t0 + o->duration * 1e9 : 0;
	signal_stop_catch(&old, on_interrupt, 0);
	if (o->interval_ms) {
		struct stat_interval_options io = { o->interval_ms, o->out, o->format, o->sep };

		err = stat_intervals(c, r, &w, &io, &r->elapsed_ns[0]);
	} else {
		stat_sleep_until(&w, INFINITY);
		r->elapsed_ns[0] = stat_now_ns() - t0;
	}
	if (w.pidfd >= 0)
		close(w.pidfd);
	signal_stop_restore(&old);
	return err;
}

int stat_attached(const struct stat_options *o, struct stat_result *r)
{
	struct lk_counter_value *values;
	struct lk_counters *c;
	int err;

	r->process_mode = true;
	r->exit_status = -1;
	r->user_ns = r->sys_ns = -1;
	r->elapsed_ns = calloc(1, sizeof(double));
	r->target = attached_target(o);
	if (!r->elapsed_ns || !r->target)
		return CLI_EXIT_FAIL;
	r->pid = o->pid;
	if (o->pid)
		err = lk_counters_open(&c, o->events, o->pid,
				       LK_COUNTERS_PROCESS | LK_COUNTERS_INHERIT |
					       LK_COUNTERS_SKIP_UNSUPPORTED);
	else
		err = open_counters(o, 0, 0, &c);
	if (err)
		return open_failed(o, err);
	if (describe_events(r, c, 1)) {
		lk_counters_close(c);
		return CLI_EXIT_FAIL;
	}
	if (o->verbose)
		say_what_was_opened(c, o, o->pid);
	if (o->all_cpus)
		lk_counters_enable(c);
	err = count_attached(o, r, c);
	values = calloc(r->nevents, sizeof(*values));
	if (!err)
		err = values ? lk_counters_read(c, values, r->nevents) : -ENOMEM;
	if (err >= 0) {
		record_values(r, 0, values);
		r->runs = 1;
		if (o->per_thread)
			err = collect_threads(r, c);
	}
	free(values);
	lk_counters_close(c);
	if (err < 0) {
		cli_error("stat", NULL, "reading the counters failed: %s", lk_last_error());
		return CLI_EXIT_FAIL;
	}
	return -1;
}
