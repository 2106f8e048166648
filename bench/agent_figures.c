// SPDX-License-Identifier: MIT
/*
 * lowkey bench agent-figures: what `lowkey agent`'s lock and counter requests cost a process.
 *
 * The bench makes N named mutexes (each locked once, so each is in the lock registry) and a counter
 * set of two software events, opens its own control socket and, as the agent does at each scan,
 * asks itself over it for its locks (LK_CTL_LOCKS) and its counter sets (LK_CTL_COUNTERS): a
 * request answered by the control thread, a message per lock or event, then a RESULT. Each is
 * timed from the send to the RESULT (wall time, the client's decoding included), with the CPU time
 * the process's control thread spent on it (its thread CPU clock: what the request costs the
 * process), against the baseline of a STATUS request on the same connection, which reads no
 * registry. Medians of RUNS.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"
#include "internal/control.h"

struct figures {
	unsigned long locks;
	int runs;
	bool json;
	clockid_t server; /* the control thread's CPU clock */
};

/* A thread's CPU clock from its id, as the kernel encodes it (posix-cpu-timers: ~tid << 3 | 6). */
static clockid_t thread_clock(pid_t tid)
{
	return (clockid_t)((~(unsigned int)tid << 3) | 6);
}

/* The CPU clock of this process's control thread ("lowkey-control"), or -1. */
static clockid_t control_thread_clock(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	clockid_t clock = -1;

	while (d && clock == -1 && (e = readdir(d))) {
		char path[64], comm[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%.20s/comm", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strcmp(comm, "lowkey-control\n") == 0)
			clock = thread_clock((pid_t)atoi(e->d_name));
		fclose(f);
	}
	if (d)
		closedir(d);
	return clock;
}

static uint64_t cpu_ns(clockid_t clock)
{
	struct timespec ts;

	if (clock == -1 || clock_gettime(clock, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Send a request of type and read until its RESULT; the messages before it into *items. */
static int ask(struct lk__ctl_client *c, uint16_t type, uint16_t reply, long *items)
{
	struct lk__ctl_msg req = { .type = type }, m;
	char err[256];
	int rc = lk__ctl_send(c, &req);

	*items = 0;
	while (!rc) {
		rc = lk__ctl_recv(c, &m, 30000, err, sizeof(err));
		if (rc)
			break;
		if (m.seq != req.seq)
			continue;
		if (m.type == reply && reply != LK_CTL_RESULT)
			return 0;
		if (m.type == LK_CTL_RESULT)
			return m.result.err;
		(*items)++;
	}
	return rc;
}

/* The median of runs requests, in microseconds of wall time (*cpu_us: of the control thread's CPU). */
static double time_request(struct lk__ctl_client *c, const struct figures *f, uint16_t type,
			   uint16_t reply, long *items, double *cpu_us)
{
	double *us = calloc(2 * (size_t)f->runs, sizeof(*us)), *cpu, median;

	if (!us)
		return -1;
	cpu = us + f->runs;
	for (int i = 0; i < f->runs; i++) {
		uint64_t t0 = lkb_now_ns(), c0 = cpu_ns(f->server);

		if (ask(c, type, reply, items) != 0) {
			free(us);
			return -1;
		}
		us[i] = (double)(lkb_now_ns() - t0) / 1e3;
		cpu[i] = (double)(cpu_ns(f->server) - c0) / 1e3;
	}
	median = lkb_median(us, (size_t)f->runs);
	*cpu_us = lkb_median(cpu, (size_t)f->runs);
	free(us);
	return median;
}

/* n mutexes named lock-00000, ..., each locked once: in the registry. */
static lk_mutex_t *make_locks(unsigned long n, char **names)
{
	lk_mutex_t *m = aligned_alloc(64, n * sizeof(*m));

	*names = malloc(n * 32);
	if (!m || !*names) {
		free(m);
		free(*names);
		return NULL;
	}
	for (unsigned long i = 0; i < n; i++) {
		snprintf(*names + 32 * i, 32, "lock-%05lu", i);
		lk_mutex_init(&m[i], *names + 32 * i);
		lk_mutex_lock(&m[i]);
		lk_mutex_unlock(&m[i]);
	}
	return m;
}

static void free_locks(lk_mutex_t *m, unsigned long n, char *names)
{
	for (unsigned long i = 0; i < n; i++)
		lk_mutex_destroy(&m[i]);
	free(m);
	free(names);
}

struct result {
	const char *what;
	long items;
	double us, cpu_us;
};

static void row(struct lk__json *j, const struct result *r, const struct result *base)
{
	if (j) {
		lk__json_object_line(j, NULL);
		lk__json_str(j, "request", r->what);
		lk__json_int(j, "messages", r->items);
		lk__json_num(j, "us", r->us);
		lk__json_num(j, "control_thread_cpu_us", r->cpu_us);
		lk__json_num(j, "vs_status", r->us / base->us);
		lk__json_close(j);
		return;
	}
	lkb_row("  %-34s %8ld %10.1f %7.1fx %12.1f\n", r->what, r->items, r->us, r->us / base->us,
		r->cpu_us);
}

static int measure(struct figures *f, struct lk__ctl_client *c)
{
	struct result r[3] = { { "STATUS (baseline: no registry)", 0, 0, 0 },
			       { "LOCKS", 0, 0, 0 },
			       { "COUNTERS (one set of 2 events)", 0, 0, 0 } };
	static const uint16_t types[3][2] = { { LK_CTL_STATUS, LK_CTL_STATUS_REPLY },
					      { LK_CTL_LOCKS, LK_CTL_RESULT },
					      { LK_CTL_COUNTERS, LK_CTL_RESULT } };
	struct lk__json j;

	/* the service thread names itself as it starts: it may not have yet */
	for (int i = 0; i < 1000 && (f->server = control_thread_clock()) == -1; i++)
		usleep(1000);
	for (int i = 0; i < 3; i++) {
		r[i].us = time_request(c, f, types[i][0], types[i][1], &r[i].items, &r[i].cpu_us);
		if (r[i].us < 0)
			return lkb_fail("a request over the control socket", -EIO);
	}
	if (f->json) {
		lk__json_begin(&j, stdout, false);
		lk__json_str(&j, "machine", lkb_machine());
		lk__json_int(&j, "runs", f->runs);
		lk__json_uint(&j, "locks", f->locks);
		lk__json_array(&j, "rows");
		for (int i = 0; i < 3; i++)
			row(&j, &r[i], &r[0]);
		lk__json_close(&j);
		lk__json_end(&j);
		return 0;
	}
	lkb_row("%s\nrequest over the control socket with %lu named mutexes, send to RESULT, median "
		"of %d\n",
		lkb_machine(), f->locks, f->runs);
	lkb_row("  %-34s %8s %10s %8s %12s\n", "request", "messages", "wall us", "ratio",
		"control cpu us");
	for (int i = 0; i < 3; i++)
		row(NULL, &r[i], &r[0]);
	return 0;
}

static int run(struct figures *f)
{
	struct lk_counters *set = NULL;
	struct lk__ctl_client c;
	char err[512], *names;
	lk_mutex_t *m = make_locks(f->locks, &names);
	int rc;

	if (!m)
		return lkb_fail("allocating the locks", -ENOMEM);
	if (lk_counters_open(&set, "task-clock,context-switches", 0, 0) < 0)
		set = NULL; /* the COUNTERS row then lists no set */
	rc = lk_control_open();
	if (rc < 0) {
		free_locks(m, f->locks, names);
		lk_counters_close(set);
		return lkb_fail("lk_control_open", rc);
	}
	rc = lk__ctl_connect(&c, getpid(), err, sizeof(err));
	if (rc == 0) {
		rc = measure(f, &c);
		lk__ctl_disconnect(&c);
	} else {
		fprintf(stderr, "lowkey bench: connecting to this process: %s\n", err);
	}
	lk_control_close();
	lk_counters_close(set);
	free_locks(m, f->locks, names);
	return rc ? 1 : 0;
}

static const char usage[] =
	"usage: lowkey bench agent-figures [--locks N] [--runs N] [--json]\n"
	"\n"
	"What lowkey agent's requests for a process's lock and counter figures cost: the bench\n"
	"makes N named mutexes and a counter set of two software events, opens its control socket,\n"
	"and times the LOCKS and COUNTERS requests, as the agent sends them, against a STATUS\n"
	"request on the same connection: send to RESULT (wall time), and the CPU time of the\n"
	"process's control thread (what a request costs the process); medians.\n"
	"\n"
	"  --locks N   named mutexes in the process (default 10000)\n"
	"  --runs N    requests of each kind (default 21)\n"
	"  -j, --json  the rows as JSON\n";

static int agent_figures_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "locks", required_argument, NULL, 'l' },
		{ "runs", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct figures f = { .locks = 10000, .runs = 21 };
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jh", options, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'l':
			f.locks = strtoul(optarg, &end, 10);
			if (*end || !f.locks || f.locks > 10000000) {
				fputs(usage, stderr);
				return 2;
			}
			break;
		case 'r':
			f.runs = (int)strtol(optarg, &end, 10);
			if (*end || f.runs < 1 || f.runs > 100000) {
				fputs(usage, stderr);
				return 2;
			}
			break;
		case 'j':
			f.json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	return run(&f);
}

LK_BENCH(agent_figures_bench, "agent-figures",
	 "what lowkey agent's lock and counter requests cost the process asked", usage,
	 agent_figures_main);
