// SPDX-License-Identifier: MIT
/*
 * lowkey agent against a running program (agent_prog.c) started with LOWKEY_CONTROL=1: its
 * /metrics hold exactly what the program recorded, read directly and through a real Prometheus
 * scraping the agent (its HTTP API asked with curl); the program's series go once it exits; an
 * agent killed leaves the program as it was, and a new one follows it again; the figures of its
 * named locks and of its perf counter set are those it reports of itself; an agent that stops
 * reading (SIGSTOP) never holds the program up, and what it then reads plus what was lost is
 * what the program recorded.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent_child.h"
#include "cli/proc_signals.h"
#include "internal/control.h"
#include "internal/lock_file.h"

/*
 * The program's name (its comm, LKT_PROG_NAME), this run's own: the agent follows only it
 * (--process), and the agents of other runs of this test on the machine leave it alone.
 */
static char prog_name[16];
#define PROG_NAME prog_name

static char scratch[] = "/tmp/lkt-agent-XXXXXX";
static char spool[] = "/dev/shm/lkt-agent-XXXXXX";
static char locks_dir[] = "/dev/shm/lkt-aglocks-XXXXXX"; /* the agent's --locks-dir */
static char err[1024];

static struct child prog, agent, prometheus, pprog;
static unsigned int agent_port, prom_port;

/* Tell the program cmd and wait for its "done". */
static void program_does(const char *cmd)
{
	char line[256];

	tell(&prog, "%s\n", cmd);
	assert_true(read_line(&prog, "done", line, sizeof(line)));
}

static void start_program(void)
{
	char *argv[] = { AGENT_PROG, NULL };
	char line[64];

	prog = spawn(argv, false, true);
	assert_true(read_line(&prog, "ready", line, sizeof(line)));
}

/* The agent, following only the test's program, with these --max-sites, --max-locks and --max-counter-sets. */
static void start_agent_bounded(const char *max_sites, const char *max_locks, const char *max_sets)
{
	char *argv[] = { LOWKEY,
			 "agent",
			 "--listen",
			 "127.0.0.1:0",
			 "--process",
			 PROG_NAME,
			 "--scan-interval",
			 "0.2",
			 "--flush-ms",
			 "50",
			 "--spool",
			 spool,
			 "--buckets",
			 "0.5,1,5",
			 "--max-sites",
			 (char *)max_sites,
			 "--max-locks",
			 (char *)max_locks,
			 "--max-counter-sets",
			 (char *)max_sets,
#ifdef PTHREAD_PROG
			 "--locks-dir",
			 locks_dir,
#endif
			 NULL };
	char line[512];
	const char *at;

	agent = spawn(argv, true, false);
	assert_true(read_line(&agent, "lowkey agent: serving", line, sizeof(line)));
	at = strstr(line, "port ");
	assert_non_null(at);
	agent_port = (unsigned int)atoi(at + 5);
	assert_true(agent_port > 0);
}

static void start_agent_sites(const char *max_sites)
{
	start_agent_bounded(max_sites, "100", "10");
}

static void start_agent(void)
{
	start_agent_sites("100");
}

static char *agent_metrics(void)
{
	return capture("curl -sf -H 'Accept: application/openmetrics-text; version=1.0.0' "
		       "http://127.0.0.1:%u/metrics",
		       agent_port);
}

/* A series of the program's: name{pid="PID",process="lkt_agent_prog"[,site="SITE"][,extra]}. */
static const char *series(const char *name, const char *site, const char *extra)
{
	static char s[512];
	int n = snprintf(s, sizeof(s), "%s{pid=\"%d\",process=\"%s\"", name, (int)prog.pid,
			 PROG_NAME);

	if (site)
		n += snprintf(s + n, sizeof(s) - (size_t)n, ",site=\"%s\"", site);
	snprintf(s + n, sizeof(s) - (size_t)n, "%s%s}", extra ? "," : "", extra ? extra : "");
	return s;
}

/* The start of any series of the program's with more labels: name{pid="PID",process="NAME", */
static const char *labelled(const char *name)
{
	static char s[512];

	snprintf(s, sizeof(s), "%s{pid=\"%d\",process=\"%s\",", name, (int)prog.pid, PROG_NAME);
	return s;
}

/* Scrape the agent until series has value (up to WAIT_S); the last scrape's text. */
static char *agent_until(const char *want, double value)
{
	double end = now_s() + WAIT_S;
	char *text = NULL;

	while (now_s() < end) {
		free(text);
		text = agent_metrics();
		if (text && sample(text, want) == value)
			return text;
		sleep_ms(100);
	}
	fprintf(stderr, "the agent's last /metrics:\n%s\n", text ? text : "(none)");
	fail_msg("%s never reached %g", want, value);
	return text;
}

static struct lk__ctl_status program_status(void)
{
	struct lk__ctl_msg req = { .type = LK_CTL_STATUS }, reply;
	struct lk__ctl_client c;

	assert_int_equal(lk__ctl_connect(&c, prog.pid, err, sizeof(err)), 0);
	assert_int_equal(
		lk__ctl_call(&c, &req, LK_CTL_STATUS_REPLY, &reply, 30000, err, sizeof(err)), 0);
	lk__ctl_disconnect(&c);
	return reply.status; /* numbers only: the strings went with the client */
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(scratch) && mkdtemp(spool) && mkdtemp(locks_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGKILL);
	stop_child(&prometheus, SIGTERM);
	stop_child(&pprog, SIGKILL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s' '%s'", scratch, spool, locks_dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* After each case, whatever it left running (a failed case): the next one starts alone. */
static int stop_all(void **state)
{
	(void)state;
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGKILL);
	stop_child(&prometheus, SIGTERM);
	stop_child(&pprog, SIGKILL);
	return 0;
}

static bool spool_empty(void)
{
	char *ls = capture("ls -A '%s'", spool);
	bool empty = ls && !ls[0];

	free(ls);
	return empty;
}

/*
 * The stream files of the spool hold no more than the pages not read yet: holes behind what the
 * agent read (tmpfs allocates by the page: the last one, partly read, and the one after it).
 */
static void spool_emptied(void)
{
	char *found = capture("find '%s' -name 'stream-*' -size +16k -printf '%%s %%b\\n'", spool);
	unsigned long long size, blocks;
	int files = 0, n = 0;

	assert_non_null(found);
	for (const char *at = found; sscanf(at, "%llu %llu\n%n", &size, &blocks, &n) == 2;
	     at += n) {
		print_message("stream file of %llu bytes, %llu allocated\n", size, blocks * 512);
		assert_true(blocks * 512 <= 8192);
		files++;
	}
	assert_true(files > 0);
	free(found);
}

/* What the program recorded, read from the agent directly; its series gone after it exits. */
static void test_metrics(void **state)
{
	char *text;

	(void)state;
	start_program();
	start_agent();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	program_does("go 1000");
	text = agent_until(series("lowkey_events_total", "agt:tick", NULL), 1000);
	assert_true(sample(text, series("lowkey_events_total", "agt:work", NULL)) == 2000);
	assert_true(sample(text, series("lowkey_events_total", "agt:level", NULL)) == 1000);
	assert_true(sample(text, series("lowkey_counter", "agt:level", NULL)) == 999);
	assert_true(sample(text, series("lowkey_span_duration_seconds_count", "agt:work", NULL)) ==
		    1000);
	assert_true(sample(text, series("lowkey_span_duration_seconds_bucket", "agt:work",
					"le=\"+Inf\"")) == 1000);
	assert_true(sample(text, series("lowkey_events_lost_total", NULL, NULL)) == 0);
	assert_non_null(strstr(text, "# TYPE lowkey_events counter\n"));
	assert_non_null(strstr(text, "# UNIT lowkey_span_duration_seconds seconds\n"));
	assert_non_null(strstr(text, "\n# EOF\n"));
	/* it has no named lock and no counter set: no such series, not even zeros */
	assert_null(strstr(text, labelled("lowkey_lock_acquisitions_total")));
	assert_null(strstr(text, labelled("lowkey_perf_event_count_total")));
	assert_null(strstr(text, series("lowkey_agent_locks_folded", NULL, NULL)));
	assert_null(strstr(text, series("lowkey_agent_perf_sets_folded", NULL, NULL)));
	free(text);
	spool_emptied();

	/* it exits: one scrape shows it detached, the next has none of its series */
	program_does("go 10");
	tell(&prog, "quit\n");
	text = agent_until(series("lowkey_process_attached", NULL, NULL), 0);
	assert_true(sample(text, series("lowkey_events_total", "agt:tick", NULL)) == 1010);
	free(text);
	text = agent_metrics();
	assert_non_null(text);
	assert_null(strstr(text, series("lowkey_events_total", "agt:tick", NULL)));
	free(text);
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGTERM);
	assert_true(spool_empty());
}

/* Past --max-sites, a process's sites are counted under site="other", and the folding counted. */
static void test_max_sites(void **state)
{
	char *text;

	(void)state;
	start_program();
	start_agent_sites("2");
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	program_does("go 10");
	/* met in this order: agt:work's begin, agt:tick, then agt:level, folded */
	text = agent_until(series("lowkey_counter", "other", NULL), 9);
	assert_true(sample(text, series("lowkey_events_total", "other", NULL)) == 10);
	assert_true(sample(text, series("lowkey_events_total", "agt:work", NULL)) == 20);
	assert_true(sample(text, series("lowkey_events_total", "agt:tick", NULL)) == 10);
	assert_null(strstr(text, "site=\"agt:level\""));
	assert_true(sample(text, series("lowkey_agent_sites_folded", NULL, NULL)) == 1);
	free(text);
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGTERM);
}

/*
 * Sites loaded after the trace started (dlopen): the trace's description grows, and the agent,
 * meeting an event of a class it did not know, reads it again and counts them.
 */
static void test_dlopen(void **state)
{
	char *text;

	(void)state;
	start_program();
	start_agent();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	program_does("go 10");
	free(agent_until(series("lowkey_events_total", "agt:tick", NULL), 10));
	program_does("lib 50 " SITES_LIB);
	program_does("go 5");
	text = agent_until(series("lowkey_events_total", "lib:work", NULL), 50);
	free(text);
	text = agent_until(series("lowkey_events_total", "agt:tick", NULL), 15);
	assert_true(sample(text, series("lowkey_span_duration_seconds_count", "agt:work", NULL)) ==
		    15);
	free(text);
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGTERM);
}

/* A lock's figures as the program printed them: "lock NAME ACQ READ_ACQ CONTENDED WAIT HOLD READ_HOLD". */
struct lock_figures {
	char name[64];
	unsigned long long acq, read_acq, contended, wait_ns, hold_ns, read_hold_ns;
};

/* Tell the program "locks N" and read its four locks' figures: queue, table, and the two pairs. */
static void program_locks(long n, struct lock_figures f[4])
{
	char line[512];

	tell(&prog, "locks %ld\n", n);
	for (int i = 0; i < 4; i++) {
		assert_true(read_line(&prog, "lock ", line, sizeof(line)));
		assert_int_equal(sscanf(line, "lock %63s %llu %llu %llu %llu %llu %llu", f[i].name,
					&f[i].acq, &f[i].read_acq, &f[i].contended, &f[i].wait_ns,
					&f[i].hold_ns, &f[i].read_hold_ns),
				 7);
	}
	assert_true(read_line(&prog, "done", line, sizeof(line)));
	assert_string_equal(f[0].name, "agt-queue");
	assert_string_equal(f[1].name, "agt-table");
	assert_string_equal(f[2].name, "agt-pair");
}

static const char *lock_series(const char *name, const char *lock, const char *mode)
{
	char extra[128];

	snprintf(extra, sizeof(extra), "lock=\"%s\"%s%s%s", lock, mode ? ",mode=\"" : "",
		 mode ? mode : "", mode ? "\"" : "");
	return series(name, NULL, extra);
}

/* One sample the agent must show, and its value. */
struct want {
	char series[512];
	double value;
};

static void want(struct want *w, const char *series, double value)
{
	snprintf(w->series, sizeof(w->series), "%s", series);
	w->value = value;
}

/*
 * Scrape the agent until every sample has its value (up to WAIT_S): figures the program's threads
 * were still changing when a scan read them come right at a later one. The last scrape's text.
 */
static char *agent_until_all(const struct want *w, size_t n)
{
	double end = now_s() + WAIT_S;
	char *text = NULL;
	size_t k = 0;

	while (now_s() < end) {
		free(text);
		text = agent_metrics();
		for (k = 0; text && k < n && sample(text, w[k].series) == w[k].value; k++)
			;
		if (text && k == n)
			return text;
		sleep_ms(100);
	}
	fprintf(stderr, "the agent's last /metrics:\n%s\n", text ? text : "(none)");
	fail_msg("%s never reached %.17g", k < n ? w[k].series : "?", k < n ? w[k].value : 0);
	return text;
}

/* The program's named locks, summed by name, exactly as lk_*_stat gives them after the threads ended. */
static void test_locks(void **state)
{
	struct lock_figures f[4];
	struct want w[11];
	size_t n = 0;
	char *text;

	(void)state;
	start_program();
	start_agent();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	program_locks(2000, f);
	assert_int_equal(f[0].acq, 8000);
	want(&w[n++], lock_series("lowkey_lock_acquisitions_total", "agt-queue", "exclusive"),
	     (double)f[0].acq);
	want(&w[n++], lock_series("lowkey_lock_contended_total", "agt-queue", NULL),
	     (double)f[0].contended);
	/* seconds: the same double the agent computes from the nanoseconds, written and read back */
	want(&w[n++], lock_series("lowkey_lock_wait_seconds_total", "agt-queue", NULL),
	     (double)f[0].wait_ns / 1e9);
	want(&w[n++], lock_series("lowkey_lock_hold_seconds_total", "agt-queue", "exclusive"),
	     (double)f[0].hold_ns / 1e9);
	want(&w[n++], lock_series("lowkey_lock_acquisitions_total", "agt-table", "exclusive"),
	     (double)f[1].acq);
	want(&w[n++], lock_series("lowkey_lock_acquisitions_total", "agt-table", "shared"),
	     (double)f[1].read_acq);
	want(&w[n++], lock_series("lowkey_lock_hold_seconds_total", "agt-table", "shared"),
	     (double)f[1].read_hold_ns / 1e9);
	want(&w[n++], lock_series("lowkey_lock_wait_seconds_total", "agt-table", NULL),
	     (double)f[1].wait_ns / 1e9);
	/* two mutexes of one name: one series, their sum */
	want(&w[n++], lock_series("lowkey_lock_acquisitions_total", "agt-pair", "exclusive"),
	     (double)(f[2].acq + f[3].acq));
	want(&w[n++], lock_series("lowkey_lock_contended_total", "agt-pair", NULL),
	     (double)(f[2].contended + f[3].contended));
	want(&w[n++], series("lowkey_agent_locks_folded", NULL, NULL), 0);
	text = agent_until_all(w, n);
	/* a mutex has no shared side */
	assert_null(
		strstr(text, lock_series("lowkey_lock_acquisitions_total", "agt-queue", "shared")));
	assert_non_null(strstr(text, "# TYPE lowkey_lock_wait_seconds counter\n"));
	assert_non_null(strstr(text, "# UNIT lowkey_lock_wait_seconds seconds\n"));
	free(text);
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGTERM);
}

/* The program's readings of its counter set: task-clock, its times, context-switches. */
struct perf_reading {
	unsigned long long clock, enabled, running, switches;
};

/* Tell the program "perf": false when the machine cannot count (the test then skips). */
static bool program_perf(struct perf_reading *r)
{
	char line[1024];

	tell(&prog, "perf\n");
	assert_true(read_line(&prog, "perf ", line, sizeof(line)));
	if (strncmp(line, "perf error", 10) == 0) {
		print_message("skipped: %s", line);
		return false;
	}
	assert_int_equal(sscanf(line, "perf %llu %llu %llu %llu", &r->clock, &r->enabled,
				&r->running, &r->switches),
			 4);
	assert_true(read_line(&prog, "done", line, sizeof(line)));
	return true;
}

static const char *perf_series(const char *name, const char *set, const char *event)
{
	char extra[128];

	snprintf(extra, sizeof(extra), "set=\"%s\",event=\"%s\"", set, event);
	return series(name, NULL, extra);
}

/* Scrape the agent until series is at least min; the last scrape's text. */
static char *agent_until_least(const char *want, double min)
{
	double end = now_s() + WAIT_S;
	char *text = NULL;

	while (now_s() < end) {
		free(text);
		text = agent_metrics();
		if (text && sample(text, want) >= min)
			return text;
		sleep_ms(100);
	}
	fail_msg("%s never reached %g", want, min);
	return text;
}

/*
 * The counter set the program opened: its values run, so each the agent shows lies between what
 * the program read before and after.
 */
static void test_perf(void **state)
{
	struct perf_reading before, after;
	double clock, switches, enabled, running;
	char *text;

	(void)state;
	start_program();
	start_agent();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	if (!program_perf(&before)) {
		stop_child(&prog, SIGKILL);
		stop_child(&agent, SIGTERM);
		skip();
	}
	text = agent_until_least(perf_series("lowkey_perf_event_count_total", "1", "task-clock"),
				 (double)before.clock);
	assert_true(program_perf(&after));
	clock = sample(text, perf_series("lowkey_perf_event_count_total", "1", "task-clock"));
	switches =
		sample(text, perf_series("lowkey_perf_event_count_total", "1", "context-switches"));
	enabled = sample(text,
			 perf_series("lowkey_perf_event_enabled_seconds_total", "1", "task-clock"));
	running = sample(text,
			 perf_series("lowkey_perf_event_running_seconds_total", "1", "task-clock"));
	print_message("task-clock %g ns in [%llu, %llu], context-switches %g in [%llu, %llu]\n",
		      clock, before.clock, after.clock, switches, before.switches, after.switches);
	assert_true(clock >= (double)before.clock && clock <= (double)after.clock);
	assert_true(switches >= (double)before.switches && switches <= (double)after.switches);
	assert_true(enabled >= (double)before.enabled / 1e9 &&
		    enabled <= (double)after.enabled / 1e9);
	assert_true(running >= (double)before.running / 1e9 && running <= enabled);
	assert_true(sample(text, series("lowkey_agent_perf_sets_folded", NULL, NULL)) == 0);
	free(text);
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGTERM);
}

/* Past --max-locks and --max-counter-sets, the rest are summed under "other", and counted. */
static void test_max_locks_sets(void **state)
{
	struct lock_figures f[4];
	struct perf_reading r;
	struct want w[4];
	char *text;

	(void)state;
	start_program();
	start_agent_bounded("100", "1", "1");
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	/* the pair's mutexes are registered at their init, before the threads take the others */
	program_locks(100, f);
	want(&w[0], lock_series("lowkey_lock_acquisitions_total", "other", "exclusive"),
	     (double)(f[0].acq + f[1].acq));
	want(&w[1], lock_series("lowkey_lock_acquisitions_total", "agt-pair", "exclusive"),
	     (double)(f[2].acq + f[3].acq));
	want(&w[2], lock_series("lowkey_lock_acquisitions_total", "other", "shared"),
	     (double)f[1].read_acq);
	want(&w[3], series("lowkey_agent_locks_folded", NULL, NULL), 2);
	text = agent_until_all(w, 4);
	assert_null(strstr(text, "lock=\"agt-queue\""));
	free(text);
	if (program_perf(&r)) {
		program_does("perf2");
		text = agent_until(series("lowkey_agent_perf_sets_folded", NULL, NULL), 1);
		assert_false(isnan(sample(text, perf_series("lowkey_perf_event_count_total",
							    "other", "page-faults"))));
		assert_false(isnan(sample(text, perf_series("lowkey_perf_event_count_total", "1",
							    "task-clock"))));
		free(text);
	}
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGTERM);
}

#ifdef PTHREAD_PROG
static pid_t pthread_pid; /* the pthread program's, still after it was reaped */

/*
 * The program of plain pthread mutexes (agent_pthread.c), run with liblowkey-locks.so preloaded
 * into the agent's --locks-dir, every hold timed.
 */
static void start_pthread_program(void)
{
	char lib[1200], dir[1200];
	char *argv[] = {
		"/usr/bin/env", lib, dir, "LOWKEY_LOCK_HOLD_SAMPLING=1", PTHREAD_PROG, NULL
	};
	char line[64];

	snprintf(lib, sizeof(lib), "LD_PRELOAD=%s", PRELOAD);
	snprintf(dir, sizeof(dir), "LOWKEY_LOCKS_DIR=%s", locks_dir);
	pprog = spawn(argv, false, false); /* env execs: the pid is the program's */
	pthread_pid = pprog.pid;
	assert_true(read_line(&pprog, "ready", line, sizeof(line)));
}

static void pthread_does(const char *cmd)
{
	char line[256];

	tell(&pprog, "%s\n", cmd);
	assert_true(read_line(&pprog, "done", line, sizeof(line)));
}

/* A series of a lock of the preloaded program: name{pid,process,source="preload",lock[,mode]}. */
static const char *preload_series(const char *name, const char *lock, const char *mode)
{
	static char s[512];

	snprintf(s, sizeof(s), "%s{pid=\"%d\",process=\"%s\",source=\"preload\",lock=\"%s\"%s%s%s}",
		 name, (int)pthread_pid, PROG_NAME, lock, mode ? ",mode=\"" : "", mode ? mode : "",
		 mode ? "\"" : "");
	return s;
}

static const char *preload_folded(void)
{
	static char s[256];

	snprintf(s, sizeof(s),
		 "lowkey_agent_locks_folded{pid=\"%d\",process=\"%s\",source=\"preload\"}",
		 (int)pthread_pid, PROG_NAME);
	return s;
}

/* The value of the first sample whose name and labels begin with prefix; NAN if none. */
static double sample_prefix(const char *text, const char *prefix)
{
	const char *at = strstr(text, prefix), *end = at ? strstr(at, "} ") : NULL;

	return end ? strtod(end + 2, NULL) : NAN;
}

/* The heap mutex's acquisitions: named by where it was first taken, the file:line as built. */
static double heap_acquisitions(const char *text)
{
	char prefix[512];

	snprintf(prefix, sizeof(prefix),
		 "lowkey_lock_acquisitions_total{pid=\"%d\",process=\"%s\",source=\"preload\","
		 "lock=\"mutex at pthread_worker (",
		 (int)pthread_pid, PROG_NAME);
	return sample_prefix(text, prefix);
}

/* Scrape the agent until series is gone; the last scrape's text. */
static void agent_until_gone(const char *series)
{
	double end = now_s() + WAIT_S;
	char *text = NULL;

	while (now_s() < end) {
		free(text);
		text = agent_metrics();
		if (text && !strstr(text, series))
			break;
		sleep_ms(100);
	}
	assert_non_null(text);
	assert_null(strstr(text, series));
	free(text);
}

/*
 * The pthread mutexes of a program run with the preload: the global one named by its variable,
 * the heap one by its first call site; counts exact, times plausible (one contention of 20 ms at
 * least made certain, every hold timed); its series go after one more scrape once it exits.
 */
static void test_preload(void **state)
{
	struct want w[2];
	double contended, wait, hold;
	int status;
	char *text;

	(void)state;
	start_agent();
	start_pthread_program();
	pthread_does("locks 1000");
	want(&w[0], preload_series("lowkey_lock_acquisitions_total", "agt_pmutex", "exclusive"),
	     4002);
	want(&w[1], "lowkey_agent_lock_tables", 1);
	text = agent_until_all(w, 2);
	contended = sample(text, preload_series("lowkey_lock_contended_total", "agt_pmutex", NULL));
	wait = sample(text, preload_series("lowkey_lock_wait_seconds_total", "agt_pmutex", NULL));
	hold = sample(text,
		      preload_series("lowkey_lock_hold_seconds_total", "agt_pmutex", "exclusive"));
	print_message("agt_pmutex: %g contended, %g s waited, %g s held\n", contended, wait, hold);
	assert_true(contended >= 1 && contended <= 4002);
	assert_true(wait >= 0.02 && wait < WAIT_S * 4.0);
	assert_true(hold >= 0.02 && hold < WAIT_S * 4.0);
	assert_true(heap_acquisitions(text) == 4000);
	assert_null(strstr(text, "source=\"preload\",lock=\"agt_pmutex\",mode=\"shared\""));
	assert_true(sample(text, preload_folded()) == 0);
	free(text);

	pthread_does("locks 10");
	free(agent_until(
		preload_series("lowkey_lock_acquisitions_total", "agt_pmutex", "exclusive"), 4044));
	/* it exits: the scan that finds it gone shows its last figures once, then none */
	tell(&pprog, "quit\n");
	assert_true(ended(&pprog, &status));
	close(pprog.in);
	fclose(pprog.out);
	pprog.pid = 0; /* reaped: pthread_pid labels its series */
	text = agent_until("lowkey_agent_lock_tables", 0);
	assert_true(sample(text, preload_series("lowkey_lock_acquisitions_total", "agt_pmutex",
						"exclusive")) == 4044);
	free(text);
	agent_until_gone("source=\"preload\"");
	stop_child(&agent, SIGTERM);
}

/*
 * Root's agent reads the table of another user's program (the file and the process that user's),
 * in a directory every user may write to, as a machine's agent does.
 */
static void test_preload_other_user(void **state)
{
	char lib[1200], dir[1200], line[64], *text;
	char *argv[] = { "/usr/bin/env",
			 "setpriv",
			 "--reuid=65534",
			 "--regid=65534",
			 "--clear-groups",
			 "env",
			 lib,
			 dir,
			 PTHREAD_PROG,
			 NULL };

	(void)state;
	if (geteuid() != 0 || system("command -v setpriv >/dev/null 2>&1") != 0) {
		print_message("skipped: needs root and util-linux's setpriv\n");
		skip();
	}
	snprintf(lib, sizeof(lib), "LD_PRELOAD=%s", PRELOAD);
	snprintf(dir, sizeof(dir), "LOWKEY_LOCKS_DIR=%s", locks_dir);
	assert_int_equal(chmod(locks_dir, 01777), 0);
	start_agent();
	pprog = spawn(argv, false, false); /* setpriv and env exec: the pid is the program's */
	pthread_pid = pprog.pid;
	assert_true(read_line(&pprog, "ready", line, sizeof(line)));
	pthread_does("locks 100");
	text = agent_until(
		preload_series("lowkey_lock_acquisitions_total", "agt_pmutex", "exclusive"), 402);
	assert_true(heap_acquisitions(text) == 400);
	free(text);
	stop_child(&pprog, SIGKILL);
	stop_child(&agent, SIGTERM);
	assert_int_equal(chmod(locks_dir, 0700), 0);
}

/* File name of the locks directory (or a path, with a '/'): buf, then a size (holes). */
static void put_file(const char *name, const void *buf, size_t len, off_t size)
{
	char path[1200];
	int fd;

	if (strchr(name, '/'))
		snprintf(path, sizeof(path), "%s", name);
	else
		snprintf(path, sizeof(path), "%s/%s", locks_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	if (size)
		assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
}

static const char *file_of(int n)
{
	static char name[64];

	snprintf(name, sizeof(name), "%d-%d.lkl", (int)pthread_pid, n);
	return name;
}

/*
 * Files in the locks directory that claim the program's pid and are not its table: short, with
 * sizes that lie, another pid inside, a link (to a table that would replace the program's), a
 * FIFO, a directory, another user's (as root). The agent reads none of them and goes on showing
 * the program's own; a valid later table of the program's (an exec()) is taken, as the control.
 */
static void test_preload_hostile(void **state)
{
	struct lkl_header h, later, lie;
	char real[1200], outside[1200], link_path[1200];
	uint64_t size;
	int fd;

	(void)state;
	start_agent();
	start_pthread_program();
	pthread_does("locks 100");
	free(agent_until(
		preload_series("lowkey_lock_acquisitions_total", "agt_pmutex", "exclusive"), 402));
	snprintf(real, sizeof(real), "%s/%s", locks_dir, file_of(0));
	fd = open(real, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	assert_int_equal(h.pid, (uint32_t)pthread_pid);
	size = lkl_file_size(h.capacity);
	later = h;
	later.start_ns++; /* a later image of the process: it would be read instead */

	put_file(file_of(90), "garbage", 7, 0);
	lie = h;
	lie.capacity = 1u << 20;
	put_file(file_of(91), &lie, sizeof(lie), 4096);
	lie = later;
	lie.entry_size = 64;
	put_file(file_of(92), &lie, sizeof(lie), (off_t)size);
	lie = later;
	lie.pid++;
	put_file(file_of(93), &lie, sizeof(lie), (off_t)size);
	snprintf(outside, sizeof(outside), "%s/later.lkl", scratch);
	put_file(outside, &later, sizeof(later), (off_t)size);
	snprintf(link_path, sizeof(link_path), "%s/%s", locks_dir, file_of(94));
	assert_int_equal(symlink(outside, link_path), 0);
	snprintf(link_path, sizeof(link_path), "%s/%s", locks_dir, file_of(95));
	assert_int_equal(mkfifo(link_path, 0600), 0);
	snprintf(link_path, sizeof(link_path), "%s/%s", locks_dir, file_of(96));
	assert_int_equal(mkdir(link_path, 0700), 0);
	if (geteuid() == 0) {
		put_file(file_of(97), &later, sizeof(later), (off_t)size);
		snprintf(link_path, sizeof(link_path), "%s/%s", locks_dir, file_of(97));
		assert_int_equal(chown(link_path, 65534, 65534), 0);
	}
	/* scans meet them all while the program's figures move on */
	pthread_does("locks 10");
	free(agent_until(
		preload_series("lowkey_lock_acquisitions_total", "agt_pmutex", "exclusive"), 444));
	sleep_ms(1000);
	free(agent_until(
		preload_series("lowkey_lock_acquisitions_total", "agt_pmutex", "exclusive"), 444));
	free(agent_until("lowkey_agent_lock_tables", 1));

	/* the control: the same later table, the program's user's, in the directory, is taken */
	put_file(file_of(98), &later, sizeof(later), (off_t)size);
	agent_until_gone("lock=\"agt_pmutex\"");
	free(agent_until("lowkey_agent_lock_tables", 1));
	stop_child(&pprog, SIGKILL);
	stop_child(&agent, SIGTERM);
}
#endif

/* A free TCP port on 127.0.0.1 (Prometheus cannot be told to pick one). */
static unsigned int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

static bool have_prometheus(void)
{
	return system("command -v prometheus >/dev/null 2>&1 && command -v curl >/dev/null 2>&1") ==
	       0;
}

static void start_prometheus(void)
{
	char config[1100], data[1100], listen[64], flag_config[1200], flag_data[1200];
	char *argv[] = { "/bin/sh", "-c", NULL, NULL };
	char cmd[4096], *ready = NULL;
	double end;
	FILE *f;

	snprintf(config, sizeof(config), "%s/prometheus.yml", scratch);
	snprintf(data, sizeof(data), "%s/prometheus-data", scratch);
	f = fopen(config, "w");
	assert_non_null(f);
	fprintf(f,
		"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
		"scrape_configs:\n  - job_name: lowkey\n    static_configs:\n"
		"      - targets: ['127.0.0.1:%u']\n",
		agent_port);
	fclose(f);
	prom_port = free_port();
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", prom_port);
	snprintf(flag_config, sizeof(flag_config), "--config.file=%s", config);
	snprintf(flag_data, sizeof(flag_data), "--storage.tsdb.path=%s", data);
	snprintf(cmd, sizeof(cmd),
		 "exec prometheus %s %s --web.listen-address=%s >%s/prometheus.log 2>&1",
		 flag_config, flag_data, listen, scratch);
	argv[2] = cmd;
	prometheus = spawn(argv, false, false);
	for (end = now_s() + WAIT_S; now_s() < end && !ready; sleep_ms(200))
		ready = capture("curl -sf http://%s/-/ready", listen);
	free(ready);
	assert_non_null(ready);
}

/* Prometheus' answer to query (instant), or NULL. */
static char *prom_query(const char *query)
{
	return capture("curl -sf -G --data-urlencode 'query=%s' http://127.0.0.1:%u/api/v1/query",
		       query, prom_port);
}

/* The value of the one series query gives: NAN if none; the answer's text into *answer. */
static double prom_value(const char *query, char **answer)
{
	char *text = prom_query(query);
	const char *v = text ? strstr(text, "\"value\":[") : NULL;

	v = v ? strstr(v, ",\"") : NULL;
	*answer = text;
	return v ? strtod(v + 2, NULL) : NAN;
}

static void prom_until(const char *query, double value)
{
	double end = now_s() + WAIT_S, got = NAN;
	char *answer = NULL, label[64];

	while (now_s() < end) {
		free(answer);
		got = prom_value(query, &answer);
		if (got == value)
			break;
		sleep_ms(250);
	}
	if (got != value)
		fail_msg("Prometheus: %s: %s, not %g", query, answer ? answer : "no answer", value);
	/* the labels, as Prometheus stored them */
	snprintf(label, sizeof(label), "\"process\":\"%s\"", PROG_NAME);
	assert_non_null(strstr(answer, label));
	free(answer);
}

/* Prometheus holds the program's lock figures as the program gave them, and its counter set's. */
static void prom_locks_perf(void)
{
	struct lock_figures f[4];
	struct perf_reading before, after;
	char q[256], *answer;
	double v = NAN;

	program_locks(500, f);
	snprintf(q, sizeof(q),
		 "lowkey_lock_acquisitions_total{pid=\"%d\",lock=\"agt-queue\",mode=\"exclusive\"}",
		 (int)prog.pid);
	prom_until(q, (double)f[0].acq);
	snprintf(q, sizeof(q), "lowkey_lock_contended_total{pid=\"%d\",lock=\"agt-queue\"}",
		 (int)prog.pid);
	prom_until(q, (double)f[0].contended);
	snprintf(q, sizeof(q), "lowkey_lock_wait_seconds_total{pid=\"%d\",lock=\"agt-queue\"}",
		 (int)prog.pid);
	prom_until(q, (double)f[0].wait_ns / 1e9);
	snprintf(q, sizeof(q),
		 "lowkey_lock_hold_seconds_total{pid=\"%d\",lock=\"agt-table\",mode=\"shared\"}",
		 (int)prog.pid);
	prom_until(q, (double)f[1].read_hold_ns / 1e9);
	if (!program_perf(&before))
		return;
	snprintf(q, sizeof(q),
		 "lowkey_perf_event_count_total{pid=\"%d\",set=\"1\",event=\"task-clock\"} >= %llu",
		 (int)prog.pid, before.clock);
	for (double end = now_s() + WAIT_S; now_s() < end; sleep_ms(250)) {
		v = prom_value(q, &answer);
		free(answer);
		if (!isnan(v))
			break;
	}
	assert_true(program_perf(&after));
	print_message("Prometheus: task-clock %g ns in [%llu, %llu]\n", v, before.clock,
		      after.clock);
	assert_true(v >= (double)before.clock && v <= (double)after.clock);
}

#ifdef PTHREAD_PROG
/* Prometheus holds the figures of the program run with the preload: counts exact, times plausible. */
static void prom_preload(void)
{
	char q[512], *answer = NULL;
	double v = NAN;

	start_pthread_program();
	pthread_does("locks 200");
	snprintf(q, sizeof(q),
		 "lowkey_lock_acquisitions_total{pid=\"%d\",source=\"preload\",lock=\"agt_pmutex\","
		 "mode=\"exclusive\"}",
		 (int)pthread_pid);
	prom_until(q, 802);
	/* one wait of 20 ms at least was made certain, and every hold was timed */
	snprintf(q, sizeof(q),
		 "lowkey_lock_wait_seconds_total{pid=\"%d\",source=\"preload\",lock=\"agt_pmutex\"}"
		 " >= 0.02",
		 (int)pthread_pid);
	for (double end = now_s() + WAIT_S; now_s() < end && isnan(v); sleep_ms(250)) {
		free(answer);
		v = prom_value(q, &answer);
	}
	print_message("Prometheus: agt_pmutex waited %g s\n", v);
	assert_false(isnan(v));
	free(answer);
	snprintf(q, sizeof(q),
		 "lowkey_lock_hold_seconds_total{pid=\"%d\",source=\"preload\",lock=\"agt_pmutex\","
		 "mode=\"exclusive\"} >= 0.02",
		 (int)pthread_pid);
	v = prom_value(q, &answer);
	assert_false(isnan(v));
	free(answer);
	stop_child(&pprog, SIGKILL);
}
#endif

/* A real Prometheus scraping the agent holds the program's series, then drops them. */
static void test_prometheus(void **state)
{
	char q[256], *answer = NULL;
	double end;

	(void)state;
	if (!have_prometheus()) {
		print_message("skipped: Debian's prometheus or curl is not installed "
			      "(deps/agent.deps)\n");
		skip();
	}
	start_program();
	start_agent();
	start_prometheus();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	program_does("go 500");
	snprintf(q, sizeof(q), "lowkey_events_total{pid=\"%d\",site=\"agt:tick\"}", (int)prog.pid);
	prom_until(q, 500);
	snprintf(q, sizeof(q), "lowkey_counter{pid=\"%d\",site=\"agt:level\"}", (int)prog.pid);
	prom_until(q, 499);
	snprintf(q, sizeof(q), "lowkey_span_duration_seconds_count{pid=\"%d\",site=\"agt:work\"}",
		 (int)prog.pid);
	prom_until(q, 500);
	snprintf(q, sizeof(q),
		 "lowkey_span_duration_seconds_bucket{pid=\"%d\",site=\"agt:work\",le=\"+Inf\"}",
		 (int)prog.pid);
	prom_until(q, 500);
	snprintf(q, sizeof(q), "lowkey_events_lost_total{pid=\"%d\"}", (int)prog.pid);
	prom_until(q, 0);
	prom_locks_perf();
#ifdef PTHREAD_PROG
	prom_preload();
#endif

	/* the program exits: its series go stale in Prometheus, since the agent drops them */
	tell(&prog, "quit\n");
	snprintf(q, sizeof(q), "lowkey_events_total{pid=\"%d\"}", (int)prog.pid);
	for (end = now_s() + WAIT_S; now_s() < end; sleep_ms(250)) {
		free(answer);
		answer = prom_query(q);
		if (answer && strstr(answer, "\"result\":[]"))
			break;
	}
	assert_non_null(answer);
	assert_non_null(strstr(answer, "\"result\":[]"));
	free(answer);
	stop_child(&prometheus, SIGTERM);
	stop_child(&prog, SIGKILL);
	stop_child(&agent, SIGTERM);
}

static bool program_untouched(void)
{
	struct lk__ctl_status st = program_status();

	return !st.running && st.sites_enabled == 0;
}

/* The program's server ends the agent's session as it sees the connection close: soon after. */
static void wait_untouched(void)
{
	double end = now_s() + WAIT_S;

	while (now_s() < end && !program_untouched())
		sleep_ms(50);
	assert_true(program_untouched());
}

/* An agent killed leaves the program as it was and running; a new agent follows it afresh. */
static void test_agent_killed(void **state)
{
	char *text;

	(void)state;
	start_program();
	assert_true(program_untouched());
	start_agent();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	assert_true(program_status().sites_enabled > 0);
	program_does("go 100");
	free(agent_until(series("lowkey_events_total", "agt:tick", NULL), 100));

	stop_child(&agent, SIGKILL);
	wait_untouched();
	program_does("go 100"); /* it runs on, its sites off */

	start_agent();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	program_does("go 7");
	text = agent_until(series("lowkey_events_total", "agt:tick", NULL), 7);
	assert_true(sample(text, series("lowkey_counter", "agt:level", NULL)) == 6);
	free(text);
	stop_child(&agent, SIGTERM); /* stopped properly: the program's trace and rules end too */
	wait_untouched();
	stop_child(&prog, SIGKILL);
	assert_true(spool_empty());
}

/* An agent that reads nothing (stopped) holds nothing up; read later, nothing is unaccounted. */
static void test_agent_stopped(void **state)
{
	const long n = 200000;
	int status;
	char *text;
	double lost;

	(void)state;
	start_program();
	start_agent();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	assert_int_equal(kill(agent.pid, SIGSTOP), 0);
	tell(&prog, "ticks %ld\nquit\n", n);
	assert_true(ended(&prog, &status));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(kill(agent.pid, SIGCONT), 0);

	text = agent_until(series("lowkey_process_attached", NULL, NULL), 0);
	lost = sample(text, series("lowkey_events_lost_total", NULL, NULL));
	print_message("%g events read, %g lost\n",
		      sample(text, series("lowkey_events_total", "agt:tick", NULL)), lost);
	assert_true(sample(text, series("lowkey_events_total", "agt:tick", NULL)) + lost ==
		    (double)n);
	free(text);
	close(prog.in);
	fclose(prog.out);
	prog.pid = 0;
	stop_child(&agent, SIGTERM);
	assert_true(spool_empty());
}

/* Started under nohup, the agent stays on when its terminal hangs up; SIGTERM still stops it. */
static void test_hangup_ignored(void **state)
{
	int status;
	char *text;

	(void)state;
	signal(SIGHUP, SIG_IGN); /* inherited by the agent */
	start_agent();
	signal(SIGHUP, SIG_DFL);
	assert_true(lkt_process_has_signal(agent.pid, "SigIgn:", SIGHUP));
	assert_true(lkt_process_has_signal(agent.pid, "SigCgt:", SIGTERM));
	assert_true(lkt_process_has_signal(agent.pid, "SigCgt:", SIGINT));
	assert_int_equal(kill(agent.pid, SIGHUP), 0);
	text = agent_metrics(); /* answered after the hang-up */
	assert_non_null(text);
	free(text);
	assert_int_equal(kill(agent.pid, SIGTERM), 0);
	assert_true(ended(&agent, &status));
	close(agent.in);
	fclose(agent.out);
	agent.pid = 0;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(spool_empty());
}

/*
 * Root follows another user's process, acting as that user: the process writes its trace into a
 * directory given to it, and its events are counted.
 */
static void test_other_user(void **state)
{
	char *argv[] = {
		"/usr/bin/env", "setpriv", "--reuid=65534",   "--regid=65534", "--clear-groups",
		"env",		"-u",	   "XDG_RUNTIME_DIR", AGENT_PROG,      NULL
	};
	char line[64], *text;

	(void)state;
	if (geteuid() != 0 || system("command -v setpriv >/dev/null 2>&1") != 0) {
		print_message("skipped: needs root and util-linux's setpriv\n");
		skip();
	}
	prog = spawn(argv, false, true); /* setpriv and env exec: the pid is the program's */
	assert_true(read_line(&prog, "ready", line, sizeof(line)));
	start_agent();
	free(agent_until(series("lowkey_process_attached", NULL, NULL), 1));
	program_does("go 100");
	text = agent_until(series("lowkey_events_total", "agt:tick", NULL), 100);
	assert_true(sample(text, series("lowkey_counter", "agt:level", NULL)) == 99);
	free(text);
	stop_child(&agent, SIGTERM);
	wait_untouched();
	stop_child(&prog, SIGKILL);
	assert_true(spool_empty());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* clang-format off */
		cmocka_unit_test_teardown(test_metrics, stop_all),
		cmocka_unit_test_teardown(test_max_sites, stop_all),
		cmocka_unit_test_teardown(test_dlopen, stop_all),
		cmocka_unit_test_teardown(test_locks, stop_all),
		cmocka_unit_test_teardown(test_perf, stop_all),
		cmocka_unit_test_teardown(test_max_locks_sets, stop_all),
		cmocka_unit_test_teardown(test_prometheus, stop_all),
		cmocka_unit_test_teardown(test_agent_killed, stop_all),
		cmocka_unit_test_teardown(test_agent_stopped, stop_all),
		cmocka_unit_test_teardown(test_hangup_ignored, stop_all),
		cmocka_unit_test_teardown(test_other_user, stop_all),
#ifdef PTHREAD_PROG
		cmocka_unit_test_teardown(test_preload, stop_all),
		cmocka_unit_test_teardown(test_preload_hostile, stop_all),
		cmocka_unit_test_teardown(test_preload_other_user, stop_all),
#endif
		/* clang-format on */
	};

	snprintf(prog_name, sizeof(prog_name), "lkt_ag_%d", (int)(getpid() % 100000));
	setenv("LKT_PROG_NAME", prog_name, 1); /* its children's: the program's, the agent's */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
