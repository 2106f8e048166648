// SPDX-License-Identifier: MIT
/*
 * lowkey agent: follow every lowkey process of this user (root: of every user) and serve what they
 * record as metrics. This file: the options and the loop; util/agent_*.c the parts (util/agent.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "builtin.h"
#include "internal/control.h"
#include "util/agent.h"
#include "util/signal_forward.h"

static const char agent_usage[] =
	"usage: lowkey agent [--listen ADDRESS:PORT] [-e GLOB]... [--process GLOB]...\n"
	"                    [--buckets S,S,...] [--max-sites N] [--max-locks N]\n"
	"                    [--max-counter-sets N] [--cputime] [--scan-interval S]\n"
	"                    [--flush-ms MS] [--buffer SIZE] [--spool DIR] [--otlp URL]\n"
	"                    [--otlp-requests N] [--locks-dir DIR]\n"
	"                    [--sample GLOB=RATE]... [--slow SECONDS[,WINDOW]]\n"
	"\n"
	"Follows the processes with a lowkey control socket (started with LOWKEY_CONTROL=1, or that\n"
	"called lk_control_open()) of this user, or of every user as root, as they start and exit,\n"
	"and serves what they record at http://ADDRESS:PORT/metrics, in the OpenMetrics text format\n"
	"Prometheus scrapes: per process and site the events recorded, the events lost, the last\n"
	"value of every LK_COUNTER, and histograms of the spans' durations; and, asked at each scan,\n"
	"the figures of the process's named locks (lowkey/lock.h) and the readings of the perf\n"
	"counter sets it opened (lk_counters_open); with --locks-dir, the pthread lock figures of\n"
	"the processes run with liblowkey-locks.so preloaded (the profiler of `lowkey locks`).\n"
	"docs/fleet.md says what each metric means.\n"
	"\n"
	"Each process is traced as `lowkey trace --pid` traces it: its sites are turned on for the\n"
	"agent's session and the trace stops when the agent leaves, however it leaves; the process\n"
	"never waits for the agent.\n"
	"\n"
	"Options:\n"
	"  -l, --listen ADDR:PORT  where /metrics is served (default 127.0.0.1:9464; port 0: any\n"
	"                       free one, printed); [::1]:PORT for IPv6\n"
	"  -e, --event GLOB     sites to record in each process, as `lowkey trace -e`; repeatable,\n"
	"                       a leading '-' excludes (default: every site)\n"
	"  -P, --process GLOB   follow only processes whose name (comm) or OTEL_SERVICE_NAME\n"
	"                       matches; repeatable (default: every one)\n"
	"      --buckets LIST   the span histograms' upper bounds in seconds, ascending (default\n"
	"                       1e-6,1e-5,1e-4,1e-3,0.01,0.1,1,10)\n"
	"      --max-sites N    sites per process with series of their own; the rest are counted\n"
	"                       under site=\"other\" (default 100)\n"
	"      --max-locks N    lock names per process with series of their own; the rest are\n"
	"                       summed under lock=\"other\" (default 100)\n"
	"      --locks-dir DIR  also read, at each scan, the tables of the processes run with\n"
	"                       LD_PRELOAD=liblowkey-locks.so LOWKEY_LOCKS_DIR=DIR: their pthread\n"
	"                       locks, named by variable or by where first taken, under the\n"
	"                       lowkey_lock_* metrics with source=\"preload\" (builds with libdw)\n"
	"      --max-counter-sets N  counter sets per process with series of their own; the\n"
	"                       rest are summed under set=\"other\" (default 10)\n"
	"  -c, --cputime        record each event's thread CPU time too, for the spans' CPU time\n"
	"                       histograms (costs the traced processes a CPU time read per event)\n"
	"      --scan-interval S  how often new processes are looked for, and locks and\n"
	"                       counter sets asked for (default 2)\n"
	"      --flush-ms MS    how often the processes write their events out (default 100)\n"
	"  -b, --buffer SIZE    the processes' per-thread ring buffers (default: the library's)\n"
	"      --spool DIR      where the processes write their traces for the agent: a tmpfs\n"
	"                       (default /dev/shm); read and emptied as they grow\n"
	"      --otlp URL       also send each span, and each LK_PROBE event as a zero-length\n"
	"                       span, to an OTLP/HTTP receiver (an OpenTelemetry Collector):\n"
	"                       its base URL, http://host:4318 (/v1/traces is appended), or\n"
	"                       'env' for the OTEL_EXPORTER_OTLP_* variables (default\n"
	"                       http://localhost:4318); in builds with the OTLP exporter\n"
	"      --otlp-requests N  OTLP requests under way at once, each a batch on a\n"
	"                       connection of its own (default 4, at most 64)\n"
	"      --sample GLOB=RATE  with --otlp: export RATE of the spans and events of the sites\n"
	"                       GLOB matches (as -e), a fraction from 0 to 1 or 1/N: exactly\n"
	"                       one of every N, the first included, by a count per site;\n"
	"                       repeatable, the first match wins (default 1: every one)\n"
	"      --slow SECONDS[,WINDOW]  with --otlp: export only the spans longer than SECONDS\n"
	"                       and the spans and events of their process within WINDOW seconds\n"
	"                       (default 1) before and after them; the others are held a while\n"
	"                       in the agent's memory, then dropped and counted. A slow span is\n"
	"                       exported whatever its site's --sample rate\n"
	"  -h, --help           this text\n"
	"\n"
	"Examples:\n"
	"  lowkey agent\n"
	"  lowkey agent --listen 0.0.0.0:9464 -e 'db:*' --process 'server*' --cputime\n"
	"  lowkey agent --otlp http://localhost:4318 --sample 'db:query=1/100' --slow 0.5,2\n";

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static int usage_error(const char *hint, const char *fmt, const char *arg)
{
	cli_error("agent", hint, fmt, arg);
	return CLI_EXIT_USAGE;
}

static int parse_seconds(const char *s, double min, double max, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !(*out >= min) || *out > max ? -EINVAL : 0;
}

static int parse_buckets(struct agent_opts *o, const char *list)
{
	const char *p = list;

	o->nbuckets = 0;
	while (*p) {
		char *end;
		double b;

		errno = 0;
		b = strtod(p, &end);
		if (errno || end == p || (*end && *end != ',') || !(b > 0) || isinf(b) ||
		    o->nbuckets == AGENT_MAX_BUCKETS ||
		    (o->nbuckets && b <= o->buckets[o->nbuckets - 1]))
			return usage_error(
				"up to 64 positive bounds in seconds, ascending, such as "
				"0.001,0.01,0.1,1",
				"bad --buckets '%s'", list);
		o->buckets[o->nbuckets++] = b;
		p = *end ? end + 1 : end;
	}
	return o->nbuckets ? 0 : usage_error(NULL, "bad --buckets '%s'", list);
}

/* RATE of --sample: a fraction from 0 to 1, or 1/N. */
static bool parse_rate(const char *text, struct agent_rate *r)
{
	unsigned long long n;
	char *end;
	double f;

	if (!strncmp(text, "1/", 2)) {
		if (!cli_parse_unsigned(text + 2, 1000000000000ull, &n) || !n)
			return false;
		r->num = 1;
		r->den = n;
		return true;
	}
	errno = 0;
	f = strtod(text, &end);
	if (errno || end == text || *end || !(f >= 0 && f <= 1))
		return false;
	r->den = 1000000000;
	r->num = (uint64_t)llround(f * 1e9);
	return true;
}

static int parse_sample(struct agent_opts *o, const char *arg)
{
	const char *eq = strrchr(arg, '=');
	struct agent_rate *r = &o->rates[o->nrates];
	size_t len = eq ? (size_t)(eq - arg) : 0;

	if (o->nrates == AGENT_MAX_GLOBS)
		return usage_error(NULL, "more than 64 %s", "--sample rates");
	if (!len || len > LK_CTL_MAX_GLOB || !parse_rate(eq + 1, r))
		return usage_error("GLOB=RATE, RATE a fraction from 0 to 1 or 1/N, such as "
				   "'db:*=0.1' or 'db:query=1/100'",
				   "bad --sample '%s'", arg);
	memcpy(r->glob, arg, len);
	r->glob[len] = 0;
	o->nrates++;
	return 0;
}

/* --slow SECONDS[,WINDOW] */
static int parse_slow(struct agent_opts *o, const char *arg)
{
	const char *comma = strchr(arg, ',');
	char slow[64];

	if (snprintf(slow, sizeof(slow), "%.*s", comma ? (int)(comma - arg) : (int)strlen(arg),
		     arg) >= (int)sizeof(slow) ||
	    parse_seconds(slow, 1e-6, 3600, &o->slow_s) ||
	    (comma && parse_seconds(comma + 1, 0, 3600, &o->window_s)))
		return usage_error("SECONDS[,WINDOW]: a span longer than SECONDS (above 0, up to "
				   "3600) is slow, WINDOW seconds (0 to 3600) around it are kept, "
				   "such as 0.5 or 0.5,2",
				   "bad --slow '%s'", arg);
	return 0;
}

static int add_to(const char **list, int *n, const char *glob, const char *what)
{
	if (*n == AGENT_MAX_GLOBS)
		return usage_error(NULL, "more than 64 %s", what);
	if (!glob[0] || strlen(glob) > LK_CTL_MAX_GLOB)
		return usage_error(NULL, "bad glob '%s'", glob);
	list[(*n)++] = glob;
	return 0;
}

static int parse_option(struct agent_opts *o, int c, const char *arg)
{
	unsigned long long n;

	switch (c) {
	case 'l':
		o->listen = arg;
		return 0;
	case 'e':
		return add_to(o->globs, &o->nglobs, arg, "-e globs");
	case 'P':
		return add_to(o->names, &o->nnames, arg, "--process globs");
	case 'B':
		return parse_buckets(o, arg);
	case 'M':
		if (!cli_parse_unsigned(arg, 100000, &n) || !n)
			return usage_error("a number of sites, 1 to 100000", "bad --max-sites '%s'",
					   arg);
		o->max_sites = (unsigned int)n;
		return 0;
	case 'L':
		if (!cli_parse_unsigned(arg, 100000, &n) || !n)
			return usage_error("a number of lock names, 1 to 100000",
					   "bad --max-locks '%s'", arg);
		o->max_locks = (unsigned int)n;
		return 0;
	case 'C':
		if (!cli_parse_unsigned(arg, 100000, &n) || !n)
			return usage_error("a number of counter sets, 1 to 100000",
					   "bad --max-counter-sets '%s'", arg);
		o->max_sets = (unsigned int)n;
		return 0;
	case 'c':
		o->cputime = true;
		return 0;
	case 'S':
		if (parse_seconds(arg, 0.1, 3600, &o->scan_s))
			return usage_error("seconds, 0.1 to 3600", "bad --scan-interval '%s'", arg);
		return 0;
	case 'F':
		if (!cli_parse_unsigned(arg, 60000, &n) || !n)
			return usage_error("milliseconds, 1 to 60000", "bad --flush-ms '%s'", arg);
		o->flush_ms = (unsigned int)n;
		return 0;
	case 'b':
		if (lk__parse_size(arg, &o->buffer) != 0 || o->buffer < 4096 ||
		    o->buffer > (1u << 30))
			return usage_error("a size from 4K to 1G, such as 256K or 4M",
					   "bad buffer size '%s'", arg);
		return 0;
	case 'D':
		o->spool = arg;
		return 0;
	case 'K':
#ifdef LK_HAVE_LIBDW
		o->locks_dir = arg;
		return 0;
#else
		cli_error(
			"agent", "build lowkey with libdw (make deps)",
			"--locks-dir: this lowkey was built without libdw, which names the locks");
		return CLI_EXIT_FAIL;
#endif
	case 'Q':
		if (!cli_parse_unsigned(arg, 64, &n) || !n)
			return usage_error("a number of requests, 1 to 64",
					   "bad --otlp-requests '%s'", arg);
		o->otlp_requests = (unsigned int)n;
		return 0;
	case 'O':
	case 'R':
	case 'W':
#ifdef LK_HAVE_OTLP
		if (c == 'R')
			return parse_sample(o, arg);
		if (c == 'W')
			return parse_slow(o, arg);
		o->otlp = arg;
		return 0;
#else
		cli_error("agent", "build lowkey with libcurl, zlib and protobuf-c (make deps)",
			  "--%s: this lowkey was built without the OTLP exporter",
			  c == 'R' ? "sample" :
			  c == 'W' ? "slow" :
				     "otlp");
		return CLI_EXIT_FAIL;
#endif
	}
	fputs(agent_usage, stderr);
	return CLI_EXIT_USAGE;
}

/* Unlink what dir_fd holds, a level of directories deep, then dir (name) in parent_fd. */
static void remove_tree(int parent_fd, const char *name)
{
	int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	while (d && (e = readdir(d))) {
		int sub;
		DIR *sd;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(fd, e->d_name, 0) == 0 || errno != EISDIR)
			continue;
		sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		sd = sub >= 0 ? fdopendir(sub) : NULL;
		for (struct dirent *f; sd && (f = readdir(sd));)
			if (f->d_name[0] != '.' || (f->d_name[1] && strcmp(f->d_name, "..") != 0))
				unlinkat(sub, f->d_name, 0);
		if (sd)
			closedir(sd);
		else if (sub >= 0)
			close(sub);
		unlinkat(fd, e->d_name, AT_REMOVEDIR);
	}
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	unlinkat(parent_fd, name, AT_REMOVEDIR);
}

/*
 * The directories agents of this user left in the spool when they were killed: each agent holds a
 * lock on its own for as long as it runs, so one whose lock can be taken is no one's.
 */
static void sweep_spool(const char *spool)
{
	int fd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	while (d && (e = readdir(d))) {
		struct stat st;
		int left;

		if (strncmp(e->d_name, "lowkey-agent-", 13) != 0 ||
		    fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != geteuid())
			continue;
		left = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (left >= 0 && flock(left, LOCK_EX | LOCK_NB) == 0)
			remove_tree(fd, e->d_name);
		if (left >= 0)
			close(left);
	}
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
}

/* This agent's directory in the spool: its own, 0700, locked while it runs, removed at the end. */
static int make_spool(struct agent *a)
{
	struct stat st;

	sweep_spool(a->o->spool);

	if (snprintf(a->spool, sizeof(a->spool), "%s/lowkey-agent-XXXXXX", a->o->spool) >=
		    (int)sizeof(a->spool) - 64 ||
	    !mkdtemp(a->spool)) {
		cli_error("agent",
			  "give a tmpfs directory this user may write to, --spool /dev/shm",
			  "cannot create a directory in %s: %s", a->o->spool, strerror(errno));
		return -1;
	}
	a->spool_fd = open(a->spool, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (a->spool_fd < 0 || fstat(a->spool_fd, &st) != 0 || st.st_uid != geteuid() ||
	    flock(a->spool_fd, LOCK_EX | LOCK_NB) != 0 || fstat(a->spool_fd, &st) != 0 ||
	    st.st_nlink < 2) { /* swept by another agent before it was locked */
		cli_error("agent", NULL, "cannot open %s", a->spool);
		rmdir(a->spool);
		return -1;
	}
	return 0;
}

/* --locks-dir names a directory, not a link to one (its files are checked as they are read). */
static bool locks_dir_usable(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		cli_error(
			"agent",
			"give the directory the programs have as LOWKEY_LOCKS_DIR, itself and not "
			"a symbolic link to it",
			"--locks-dir: cannot open %s: %s", dir, strerror(errno));
		return false;
	}
	close(fd);
	return true;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A process that exited is freed once a scrape has shown it so, or after keep_s without one (no
 * scraper: memory stays bounded).
 */
static void free_exited(struct agent *a, double keep_s)
{
	struct agent_proc **gone = calloc(a->nprocs + 1, sizeof(*gone));
	size_t kept = 0, ngone = 0;

	if (!gone)
		return;		      /* at the next pass */
	pthread_mutex_lock(&a->lock); /* the renderer walks the list */
	for (size_t i = 0; i < a->nprocs; i++) {
		struct agent_proc *p = a->procs[i];

		if (p->exited && (p->scrapes_since_exit || now_s() - p->exited_at > keep_s))
			gone[ngone++] = p;
		else
			a->procs[kept++] = p;
	}
	a->nprocs = kept;
	pthread_mutex_unlock(&a->lock);
	for (size_t i = 0; i < ngone; i++)
		agent_proc_free(a, gone[i], false);
	free(gone);
}

/* The same for the tables of --locks-dir whose processes ended. */
static void free_gone_tables(struct agent *a, double keep_s)
{
	size_t kept = 0;

	pthread_mutex_lock(&a->lock);
	for (size_t i = 0; i < a->ntables; i++) {
		struct agent_table *t = a->tables[i];

		if (t->gone && (t->scrapes_since_gone || now_s() - t->gone_at > keep_s))
			agent_table_free(t);
		else
			a->tables[kept++] = t;
	}
	a->ntables = kept;
	pthread_mutex_unlock(&a->lock);
}

static void run(struct agent *a)
{
	double next_scan = 0, keep_s = 10 * a->o->scan_s + 60;
	long poll_ms = a->o->flush_ms / 2 ? a->o->flush_ms / 2 : 1;
	struct timespec pause = { poll_ms / 1000, (poll_ms % 1000) * 1000000L };

	while (!stop_signal) {
		if (now_s() >= next_scan) {
			for (size_t i = 0; i < a->nprocs; i++) {
				agent_check(a->procs[i]);
				agent_poll_figures(a, a->procs[i]);
			}
			agent_scan(a);
			if (a->o->locks_dir)
				agent_preload_scan(a);
			next_scan = now_s() + a->o->scan_s;
		}
		for (size_t i = 0; i < a->nprocs && !stop_signal; i++) {
			pthread_mutex_lock(&a->lock);
			agent_read(a, a->procs[i]);
			agent_sample_pass(a, a->procs[i]);
			pthread_mutex_unlock(&a->lock);
		}
		free_exited(a, keep_s);
		free_gone_tables(a, keep_s);
		nanosleep(&pause, NULL);
	}
}

/* SIGINT, SIGTERM and SIGHUP stop the agent; one it was started ignoring (nohup) stays ignored. */
static void on_signals(void)
{
	struct signal_stop old;

	signal_stop_catch(&old, on_stop, 0);
	signal(SIGPIPE, SIG_IGN);
}

static int agent_run(const struct agent_opts *o)
{
	struct agent a = { .o = o, .spool_fd = -1 };
	struct agent_http *http;
	unsigned int port;
	char err[1024];

	pthread_mutex_init(&a.lock, NULL);
	if (o->locks_dir && !locks_dir_usable(o->locks_dir))
		return CLI_EXIT_FAIL;
	on_signals(); /* from before the spool is made: a signal stops the agent, which removes it */
	if (make_spool(&a))
		return CLI_EXIT_FAIL;
	http = agent_http_start(&a, o->listen, &port, err, sizeof(err));
	if (!http) {
		cli_error("agent", NULL, "%s", err);
		close(a.spool_fd);
		rmdir(a.spool);
		return CLI_EXIT_FAIL;
	}
#ifdef LK_HAVE_OTLP
	if (o->otlp && agent_otlp_start(&a, err, sizeof(err)) != 0) {
		cli_error("agent", NULL, "--otlp: %s", err);
		agent_http_stop(http);
		close(a.spool_fd);
		rmdir(a.spool);
		return CLI_EXIT_FAIL;
	}
#endif
	fprintf(stderr, "lowkey agent: serving /metrics on port %u (%s); spool %s\n", port,
		o->listen, a.spool);
	run(&a);
	agent_http_stop(http);
	for (size_t i = 0; i < a.nprocs; i++)
		agent_proc_free(&a, a.procs[i], true);
	for (size_t i = 0; i < a.ntables; i++)
		agent_table_free(a.tables[i]);
	free(a.tables);
#ifdef LK_HAVE_OTLP
	if (a.otlp) {
		agent_otlp_summary(&a);
		agent_otlp_stop(&a); /* what is queued is sent, a bounded wait */
	}
#endif
	free(a.procs);
	free(a.ignored);
	close(a.spool_fd);
	rmdir(a.spool);
	pthread_mutex_destroy(&a.lock);
	return CLI_EXIT_OK;
}

static int agent_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "event", required_argument, NULL, 'e' },
		{ "process", required_argument, NULL, 'P' },
		{ "buckets", required_argument, NULL, 'B' },
		{ "max-sites", required_argument, NULL, 'M' },
		{ "max-locks", required_argument, NULL, 'L' },
		{ "max-counter-sets", required_argument, NULL, 'C' },
		{ "cputime", no_argument, NULL, 'c' },
		{ "scan-interval", required_argument, NULL, 'S' },
		{ "flush-ms", required_argument, NULL, 'F' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "spool", required_argument, NULL, 'D' },
		{ "locks-dir", required_argument, NULL, 'K' },
		{ "otlp", required_argument, NULL, 'O' },
		{ "otlp-requests", required_argument, NULL, 'Q' },
		{ "sample", required_argument, NULL, 'R' },
		{ "slow", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const double buckets[] = { 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10 };
	struct agent_opts o = { .listen = "127.0.0.1:9464",
				.scan_s = 2,
				.flush_ms = 100,
				.spool = "/dev/shm",
				.max_sites = 100,
				.max_locks = 100,
				.max_sets = 10,
				.window_s = 1,
				.nbuckets = sizeof(buckets) / sizeof(buckets[0]) };
	int c, rc;

	memcpy(o.buckets, buckets, sizeof(buckets));
	optind = 1;
	while ((c = getopt_long(argc, argv, "+l:e:P:cb:h", options, NULL)) != -1) {
		if (c == 'h') {
			fputs(agent_usage, stdout);
			return CLI_EXIT_OK;
		}
		rc = parse_option(&o, c, optarg);
		if (rc)
			return rc;
	}
	if (optind < argc)
		return usage_error("lowkey agent takes options only", "unexpected '%s'",
				   argv[optind]);
	if ((o.nrates || o.slow_s > 0) && !o.otlp)
		return usage_error("add --otlp URL", "%s: no spans are sent without --otlp",
				   o.nrates ? "--sample" : "--slow");
	if (!o.nglobs)
		o.globs[o.nglobs++] = "*";
	return agent_run(&o);
}

const struct cli_command cmd_agent = {
	.name = "agent",
	.summary = "follow lowkey processes and serve their metrics to Prometheus",
	.usage = agent_usage,
	.run = agent_main,
};
