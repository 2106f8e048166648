// SPDX-License-Identifier: MIT
/*
 * Tracing from the environment: a constructor that reads LOWKEY_TRACE* and starts tracing before
 * main, and finishes the trace at exit. `lowkey trace -- cmd` sets the variables; users may too.
 *
 *	LOWKEY_TRACE		comma-separated globs ("db:*,net:send"); a leading '-' disables
 *				("-db:debug"). A list that starts with a disable enables "*" first.
 *	LOWKEY_TRACE_OUTPUT	the trace's path (default lowkey-PID.ctf, .json or .pftrace)
 *	LOWKEY_TRACE_FORMAT	ctf (default), json or perfetto
 *	LOWKEY_TRACE_CPUTIME	1 to record each event's thread CPU time
 *	LOWKEY_TRACE_SCHED	1 to record the threads' context switches (LK_TRACE_SCHED)
 *	LOWKEY_TRACE_BUFFER	bytes per thread: 4096, 64K, 2M, 1G
 *	LOWKEY_TRACE_MODE	stream (default) or overwrite: a flight recorder (LK_TRACE_OVERWRITE),
 *				which writes a snapshot at exit and on LOWKEY_TRACE_SNAPSHOT_SIGNAL
 *	LOWKEY_TRACE_SNAPSHOT_SIGNAL	a signal (USR2, SIGUSR2, RTMIN+1, 12) that takes a snapshot
 *	LOWKEY_TRACE_PID	the process the variables are for; other processes that inherit them
 *				(children, grandchildren) ignore them. When it is not set, the process
 *				that finds LOWKEY_TRACE sets it to its own pid for its children.
 *	LOWKEY_TRACE_STATUS_FD	a SOCK_SEQPACKET socket where the library reports to `lowkey trace`:
 *				ENV_START (started, or the exact error), and at exit ENV_RULE per rule
 *				and ENV_FINISH. After a failed start the library waits for the CLI's
 *				verdict (it ends the process), so a program that cannot be traced does
 *				not run untraced. The fd is made close-on-exec once read. While the
 *				trace is converted at exit (JSON, Perfetto), PROGRESS messages say how
 *				far the conversion is, at most every 100 ms, never blocking.
 *	LOWKEY_TRACE_STATUS_ID	DEV:INO, the status socket's st_dev and st_ino: a descriptor at that
 *				number that is not this socket is not used (the program may close
 *				it and open another file there, or dup2 over it, before exit).
 *				Without it, the socket found at start-up is the one expected.
 *	LOWKEY_CONTROL		1 to open the control socket (lk_control_open) at start-up; it is
 *				served once the program has registered its own sites (its
 *				constructors run after liblowkey's: a tracer connecting sooner
 *				waits for its answer instead of finding none of them).
 *
 * The library prints nothing: without a status socket, errors go nowhere but lk_last_error() of
 * the thread that ran the constructors.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <lowkey/error.h>
#include <lowkey/probe.h>

#include "core/dso.h"
#include "core/env.h"
#include "core/error.h"
#include "control/control_internal.h"
#include "internal/trace_convert.h"
#include "probe/probe_internal.h"
#include "internal/trace_progress.h"

#define MAX_RULES 64
#define VERDICT_TIMEOUT_S 30 /* how long a failed start waits for the CLI to end the process */

/* trace.c refers to this, so the constructor below is linked wherever tracing is (liblowkey.a too). */
const int lk__probe_environment_linked = 1;

struct env_rule {
	char *glob;
	bool enable;
};

static struct {
	pid_t pid; /* the process tracing from the environment; 0: none */
	int status_fd;
	pid_t status_owner; /* the process the status socket is for: not its forked children */
	dev_t status_dev;   /* the socket itself, told from another file at the same number */
	ino_t status_ino;
	unsigned int gen; /* the trace it started */
	char *path;
	struct env_rule rules[MAX_RULES];
	unsigned int nrules;
	int snapshot_signal; /* LOWKEY_TRACE_SNAPSHOT_SIGNAL; 0: none */
} env = { .status_fd = -1 };

/* ---- parsing ---- */

int lk__parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" }, *const no[] = { "0", "no",
										       "false",
										       "off" };

	for (size_t i = 0; s && i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return *out = true, 0;
		if (strcasecmp(s, no[i]) == 0)
			return *out = false, 0;
	}
	return -EINVAL;
}

int lk__parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	unsigned long long v;
	const char *unit;
	char *end;
	int shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end && (unit = strchr(units, tolower((unsigned char)*end)))) {
		shift = 10 * (int)(unit - units + 1);
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
	} else if (*end == 'b' || *end == 'B') {
		end++;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_int(const char *s, long *out);

static const struct {
	const char *name;
	int sig;
} signal_names[] = {
	{ "HUP", SIGHUP },	 { "INT", SIGINT },   { "QUIT", SIGQUIT },   { "ILL", SIGILL },
	{ "TRAP", SIGTRAP },	 { "ABRT", SIGABRT }, { "BUS", SIGBUS },     { "FPE", SIGFPE },
	{ "KILL", SIGKILL },	 { "USR1", SIGUSR1 }, { "SEGV", SIGSEGV },   { "USR2", SIGUSR2 },
	{ "PIPE", SIGPIPE },	 { "ALRM", SIGALRM }, { "TERM", SIGTERM },   { "CHLD", SIGCHLD },
	{ "CONT", SIGCONT },	 { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },   { "TTIN", SIGTTIN },
	{ "TTOU", SIGTTOU },	 { "URG", SIGURG },   { "XCPU", SIGXCPU },   { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH }, { "IO", SIGIO },
	{ "PWR", SIGPWR },	 { "SYS", SIGSYS },
};

int lk__parse_signal(const char *s)
{
	long n;

	if (!s)
		return -EINVAL;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	if (strncasecmp(s, "RTMIN+", 6) == 0 && parse_int(s + 6, &n) == 0 && n >= 0 &&
	    n <= SIGRTMAX - SIGRTMIN)
		return SIGRTMIN + (int)n;
	if (strcasecmp(s, "RTMIN") == 0)
		return SIGRTMIN;
	for (size_t i = 0; i < sizeof(signal_names) / sizeof(signal_names[0]); i++)
		if (strcasecmp(s, signal_names[i].name) == 0)
			return signal_names[i].sig;
	if (parse_int(s, &n) == 0 && n > 0 && n < NSIG)
		return (int)n;
	return -EINVAL;
}

/*
 * A signal the kernel sends to the thread that faults (or traps, or makes a system call seccomp
 * forbids) comes back as soon as a handler returns, since the instruction runs again: as the
 * snapshot signal, each fault would take a snapshot, forever. SIGKILL and SIGSTOP cannot be caught.
 */
const char *lk__snapshot_signal_unfit(int sig)
{
	switch (sig) {
	case SIGKILL:
	case SIGSTOP:
		return "it cannot be caught";
	case SIGSEGV:
	case SIGBUS:
	case SIGILL:
	case SIGFPE:
	case SIGTRAP:
	case SIGSYS:
		return "the kernel sends it to a thread that faults, and sends it again each time its handler "
		       "returns: a snapshot per fault, without end";
	}
	return NULL;
}

const char *lk__signal_name(int sig, char *buf, size_t len)
{
	for (size_t i = 0; i < sizeof(signal_names) / sizeof(signal_names[0]); i++)
		if (signal_names[i].sig == sig) {
			snprintf(buf, len, "SIG%s (%d)", signal_names[i].name, sig);
			return buf;
		}
	if (sig >= SIGRTMIN && sig <= SIGRTMAX)
		snprintf(buf, len, "SIGRTMIN+%d (%d)", sig - SIGRTMIN, sig);
	else
		snprintf(buf, len, "signal %d", sig);
	return buf;
}

static int parse_int(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return (errno || end == s || *end) ? -EINVAL : 0;
}

/* ---- the status socket ---- */

/* "DEV:INO" into the two numbers; false if it is not that. */
static bool parse_file_id(const char *v, dev_t *dev, ino_t *ino)
{
	unsigned long long d, i;
	char *end;

	errno = 0;
	d = strtoull(v, &end, 10);
	if (errno || end == v || *end != ':')
		return false;
	v = end + 1;
	i = strtoull(v, &end, 10);
	if (errno || end == v || *end)
		return false;
	*dev = (dev_t)d;
	*ino = (ino_t)i;
	return true;
}

/*
 * The status socket named by the environment: an open SOCK_SEQPACKET socket, the one
 * LOWKEY_TRACE_STATUS_ID names when it is set; else -1.
 */
static int status_socket(const char *var, const char *id)
{
	int type = 0;
	socklen_t len = sizeof(type);
	struct stat st;
	dev_t dev;
	ino_t ino;
	long fd;

	if (!var || parse_int(var, &fd) != 0 || fd < 0 || fd > 1 << 20)
		return -1;
	if (getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET ||
	    fstat((int)fd, &st) != 0)
		return -1;
	if (id && (!parse_file_id(id, &dev, &ino) || dev != st.st_dev || ino != st.st_ino))
		return -1;
	fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	env.status_owner = getpid();
	env.status_dev = st.st_dev;
	env.status_ino = st.st_ino;
	return (int)fd;
}

/* Whether the status socket is still there, and this process the one it is for. */
static bool status_socket_ours(void)
{
	struct stat st;

	return env.status_fd >= 0 && getpid() == env.status_owner &&
	       fstat(env.status_fd, &st) == 0 && st.st_dev == env.status_dev &&
	       st.st_ino == env.status_ino;
}

static void send_status(struct lk__ctl_msg *m, int flags)
{
	uint8_t buf[LK_CTL_MAX_MSG];
	int n;

	if (!status_socket_ours())
		return;
	n = lk__ctl_encode(m, buf, sizeof(buf));
	if (n > 0)
		send(env.status_fd, buf, (size_t)n, flags | MSG_NOSIGNAL);
}

/* What the CLI must hear waits for room on the socket; progress is dropped rather than wait. */
static void report(struct lk__ctl_msg *m)
{
	send_status(m, 0);
}

/* The conversion at the stop of the trace started here (the sink of progress.h). */
static void report_progress(uint64_t done, uint64_t total, void *arg)
{
	struct lk__ctl_msg m = { .type = LK_CTL_PROGRESS, .progress = { done, total } };

	(void)arg;
	if (env.pid == getpid() && __atomic_load_n(&lk__trace.gen, __ATOMIC_ACQUIRE) == env.gen)
		send_status(&m, MSG_DONTWAIT);
}

static const struct lk__progress_sink progress_sink = { report_progress, NULL };

/*
 * Tracing could not start: say why, then wait for the CLI's verdict (it kills the process before
 * main runs) or for it to go away. A RESULT with err 0 means "run untraced".
 */
static void report_failure(int err, const char *message)
{
	struct lk__ctl_msg m = { .type = LK_CTL_ENV_START };
	struct timeval timeout = { VERDICT_TIMEOUT_S, 0 };
	char text[LK_CTL_MAX_TEXT + 1];
	uint8_t verdict[LK_CTL_MAX_MSG];

	snprintf(text, sizeof(text), "%s", message);
	m.env_start = (struct lk__ctl_env_start){ err < -4095 ? -EINVAL : err, text, "", "" };
	report(&m);
	if (env.status_fd < 0)
		return;
	setsockopt(env.status_fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
	while (recv(env.status_fd, verdict, sizeof(verdict), 0) < 0 && errno == EINTR)
		;
	close(env.status_fd);
	env.status_fd = -1;
}

/* ---- the configuration ---- */

static int add_rule(const char *glob, bool enable)
{
	int err;

	if (env.nrules == MAX_RULES)
		return lk__fail(-E2BIG, "LOWKEY_TRACE: more than %d globs", MAX_RULES);
	err = enable ? lk_probe_enable(glob) : lk_probe_disable(glob);
	if (err < 0)
		return err;
	env.rules[env.nrules].glob = strdup(glob);
	env.rules[env.nrules].enable = enable;
	if (!env.rules[env.nrules].glob)
		return lk__fail(-ENOMEM, "LOWKEY_TRACE: out of memory");
	env.nrules++;
	return 0;
}

/* "a,-b, c" -> enable a, disable b, enable c (a leading disable enables "*" first). */
static int parse_rules(const char *list)
{
	char *copy = strdup(list), *save = NULL;
	int err = 0;

	if (!copy)
		return lk__fail(-ENOMEM, "LOWKEY_TRACE: out of memory");
	for (char *item = strtok_r(copy, ",", &save); item && !err;
	     item = strtok_r(NULL, ",", &save)) {
		bool enable = true;
		char *end;

		while (isspace((unsigned char)*item))
			item++;
		for (end = item + strlen(item); end > item && isspace((unsigned char)end[-1]);)
			*--end = 0;
		if (*item == '-') {
			enable = false;
			item++;
		}
		if (!*item)
			continue;
		if (!enable && env.nrules == 0)
			err = add_rule("*", true);
		if (!err)
			err = add_rule(item, enable);
	}
	free(copy);
	if (!err && env.nrules == 0)
		err = lk__fail(
			-EINVAL,
			"LOWKEY_TRACE=\"%s\" names no glob: give globs such as \"db:*\" or \"*\"",
			list);
	return err;
}

static int read_snapshot_signal(const struct lk_trace_config *c)
{
	const char *v = lk__env("LOWKEY_TRACE_SNAPSHOT_SIGNAL"), *why;
	char name[32];

	env.snapshot_signal = v ? lk__parse_signal(v) : 0;
	if (env.snapshot_signal < 0)
		return lk__fail(-EINVAL,
				"LOWKEY_TRACE_SNAPSHOT_SIGNAL=%s: give a signal such as USR2 or 12",
				v);
	if (env.snapshot_signal && (why = lk__snapshot_signal_unfit(env.snapshot_signal)) != NULL)
		return lk__fail(
			-EINVAL,
			"LOWKEY_TRACE_SNAPSHOT_SIGNAL=%s: %s cannot take snapshots: %s; use USR2 "
			"or a real-time signal",
			v, lk__signal_name(env.snapshot_signal, name, sizeof(name)), why);
	if (v && !(c->flags & LK_TRACE_OVERWRITE))
		return lk__fail(
			-EINVAL,
			"LOWKEY_TRACE_SNAPSHOT_SIGNAL needs LOWKEY_TRACE_MODE=overwrite: a streaming "
			"trace has no snapshots");
	return 0;
}

static int read_config(struct lk_trace_config *c, char *path, size_t pathlen)
{
	const char *v;
	uint64_t size;
	bool on;
	int format, err;

	memset(c, 0, sizeof(*c));
	v = lk__env("LOWKEY_TRACE_FORMAT");
	format = v ? lk__trace_format_parse(v) : LK_TRACE_CTF;
	if (format < 0)
		return lk__fail(-EINVAL, "LOWKEY_TRACE_FORMAT=%s: use ctf, json or perfetto", v);
	c->format = (enum lk_trace_format)format;
	v = lk__env("LOWKEY_TRACE_CPUTIME");
	if (v && lk__parse_bool(v, &on) != 0)
		return lk__fail(-EINVAL, "LOWKEY_TRACE_CPUTIME=%s: use 1 or 0", v);
	if (v && on)
		c->flags |= LK_TRACE_CPUTIME;
	v = lk__env("LOWKEY_TRACE_SCHED");
	if (v && lk__parse_bool(v, &on) != 0)
		return lk__fail(-EINVAL, "LOWKEY_TRACE_SCHED=%s: use 1 or 0", v);
	if (v && on)
		c->flags |= LK_TRACE_SCHED;
	v = lk__env("LOWKEY_TRACE_MODE");
	if (v && strcasecmp(v, "overwrite") == 0)
		c->flags |= LK_TRACE_OVERWRITE;
	else if (v && strcasecmp(v, "stream") != 0)
		return lk__fail(-EINVAL, "LOWKEY_TRACE_MODE=%s: use stream or overwrite", v);
	err = read_snapshot_signal(c);
	if (err)
		return err;
	v = lk__env("LOWKEY_TRACE_BUFFER");
	if (v && (lk__parse_size(v, &size) != 0 || size > SIZE_MAX))
		return lk__fail(-EINVAL,
				"LOWKEY_TRACE_BUFFER=%s: give bytes per thread, such as 256K or 4M",
				v);
	if (v)
		c->buffer_size = (size_t)size;
	v = lk__env("LOWKEY_TRACE_OUTPUT");
	if (v)
		snprintf(path, pathlen, "%s", v);
	else
		snprintf(path, pathlen, "lowkey-%d.%s", (int)getpid(),
			 lk__trace_format_extension(c->format));
	c->path = path;
	return 0;
}

/* ---- start and finish ---- */

static void report_started(void)
{
	struct lk__ctl_msg m = { .type = LK_CTL_ENV_START };
	char ctf_dir[LK_CTL_MAX_PATH + 1];

	pthread_mutex_lock(&lk__trace_mutex);
	snprintf(ctf_dir, sizeof(ctf_dir), "%s", lk__trace.ctf_dir ? lk__trace.ctf_dir : "");
	snprintf(env.path, LK_CTL_MAX_PATH + 1, "%s", lk__trace.path ? lk__trace.path : "");
	env.gen = lk__trace.gen;
	pthread_mutex_unlock(&lk__trace_mutex);
	m.env_start = (struct lk__ctl_env_start){ 0, "", env.path, ctf_dir };
	report(&m);
}

/* Sites the rule matched, among every site registered during the run (unloaded ones too). */
static uint32_t rule_matches(const char *glob)
{
	const struct lk__probe_site_rt *sites;
	uint32_t matched = 0;
	size_t n;

	lk__registry_lock();
	sites = lk__probe_sites(&n);
	for (size_t i = 0; i < n; i++)
		matched += lk__probe_glob_matches(glob, sites[i].provider, sites[i].event);
	lk__registry_unlock();
	return matched;
}

static void environment_at_exit(void)
{
	struct lk__ctl_msg m = { .type = LK_CTL_ENV_FINISH };
	char text[LK_CTL_MAX_TEXT + 1] = "";
	struct lk_trace_stats st;
	int err = 0;

	if (env.pid != getpid())
		return; /* a forked child: the trace is its parent's */
	if (__atomic_load_n(&lk__trace.running, __ATOMIC_ACQUIRE) &&
	    __atomic_load_n(&lk__trace.gen, __ATOMIC_ACQUIRE) == env.gen) {
		lk__progress_stop_sink_for_thread(
			&progress_sink); /* a JSON snapshot is converted */
		lk__trace_exit_snapshot(); /* a flight recorder's last words (its error: lk_trace_stop's) */
		lk__progress_stop_sink_for_thread(NULL);
		err = lk_trace_stop();
		if (err)
			snprintf(text, sizeof(text), "%s", lk_last_error());
	}
	lk_trace_stats(&st);
	if (!err && __atomic_load_n(&lk__trace.gen, __ATOMIC_ACQUIRE) == env.gen) {
		/* stopped before this ran (lk_trace_stop, or the library's own exit handler) */
		if (st.error) {
			err = st.error;
			snprintf(text, sizeof(text), "%s", lk__trace.error_msg);
		} else if (lk__trace.sites_error) {
			err = lk__trace.sites_error;
			snprintf(text, sizeof(text), "%s", lk__trace.sites_error_msg);
		} else if (lk__trace.snapshot_error) {
			err = lk__trace.snapshot_error;
			snprintf(text, sizeof(text), "%s", lk__trace.snapshot_error_msg);
		}
	}
	for (unsigned int i = 0; i < env.nrules; i++) {
		struct lk__ctl_msg r = { .type = LK_CTL_ENV_RULE };

		r.env_rule = (struct lk__ctl_env_rule){ env.rules[i].enable,
							rule_matches(env.rules[i].glob),
							env.rules[i].glob };
		report(&r);
	}
	m.stats = (struct lk__ctl_stats){
		err < -4095 ? -EIO : err, st.events, st.lost, st.bytes, st.threads, env.path, text
	};
	report(&m);
	lk__progress_stop_sink_for_process(NULL);
	if (status_socket_ours())
		close(env.status_fd); /* not another file the program opened at its number */
	env.status_fd = -1;
	env.pid = 0;
}

/* Whether LOWKEY_TRACE is meant for this process (see LOWKEY_TRACE_PID above). */
static bool meant_for_us(void)
{
	const char *v = lk__env("LOWKEY_TRACE_PID");
	char pid[16];
	long want;

	if (v)
		return parse_int(v, &want) == 0 && want == (long)getpid();
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("LOWKEY_TRACE_PID", pid, 1); /* so that children leave the trace to us */
	return true;
}

static void trace_from_environment(const char *rules)
{
	const char *fd_var = lk__env("LOWKEY_TRACE_STATUS_FD");
	static char path[LK_CTL_MAX_PATH + 1];
	struct lk_trace_config config;
	int err;

	if (!meant_for_us())
		return;
	env.status_fd = status_socket(fd_var, lk__env("LOWKEY_TRACE_STATUS_ID"));
	if (fd_var && env.status_fd < 0)
		return; /* the `lowkey trace` this was for is over (its socket closed at an exec) */
	env.path = malloc(LK_CTL_MAX_PATH + 1);
	err = env.path ? 0 : lk__fail(-ENOMEM, "LOWKEY_TRACE: out of memory");
	if (!err)
		err = read_config(&config, path, sizeof(path));
	if (!err)
		err = parse_rules(rules);
	if (!err)
		err = lk_trace_start(&config);
	if (!err && env.snapshot_signal) {
		err = lk_trace_snapshot_signal(env.snapshot_signal);
		if (err)
			lk_trace_stop();
	}
	if (err) {
		report_failure(err, lk_last_error());
		return;
	}
	env.pid = getpid();
	/* the trace's own exit handler may run before ours: it takes the last snapshot then */
	__atomic_store_n(&lk__trace.snapshot_at_exit, (config.flags & LK_TRACE_OVERWRITE) != 0,
			 __ATOMIC_RELEASE);
	report_started();
	lk__progress_stop_sink_for_process(&progress_sink);
	atexit(environment_at_exit);
}

static void serve_control_socket(void)
{
	lk__control_serve();
}

__attribute__((constructor)) static void environment_init(void)
{
	const char *rules = lk__env("LOWKEY_TRACE");
	const char *control = lk__env("LOWKEY_CONTROL");
	bool open_control = false;

	if (rules)
		trace_from_environment(rules);
	/*
	 * A tracer that connects must find the program's own sites, registered after this
	 * constructor: the socket is there from now on, and served once they are.
	 */
	if (control && lk__parse_bool(control, &open_control) == 0 && open_control &&
	    lk__control_listen() == 0 && !lk__dso_after_main_program(serve_control_socket))
		serve_control_socket();
}
