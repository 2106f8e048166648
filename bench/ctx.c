// SPDX-License-Identifier: MIT
/*
 * lowkey bench ctx: the experiment of Paul Mackerras's patch "perf_counter: optimize context
 * switch between identical inherited contexts" on this machine.
 *
 * 1. lmbench's lat_ctx: a token passed around a ring of 2, 8 and 32 processes through pipes, all on
 *    one CPU so that every pass is a context switch. Microseconds per switch, mean and standard
 *    deviation over 20 runs, with no counters, with counters inherited from one parent (equivalent
 *    contexts the kernel can swap instead of reprogramming) and with separate counters opened by
 *    each process (no swap possible), for 2 events and for 4 hardware + 4 software events (software
 *    only where the machine has no PMU).
 * 2. What a self-read of a 2-counter group costs: read() against rdpmc where the page allows it.
 * 3. How much `lowkey stat` and `perf stat` add to a command's wall time, same events, same run.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lowkey/lowkey.h>

#include "bench.h"

/* ---- configuration ---- */

enum column { NONE, TWO_INHERITED, TWO_SEPARATE, EIGHT_INHERITED, EIGHT_SEPARATE, NCOLUMNS };

static const int ring_sizes[] = { 2, 8, 32 };
#define NSIZES (sizeof(ring_sizes) / sizeof(ring_sizes[0]))

struct setup {
	bool pmu;
	const char *two;   /* the 2-counter column's events */
	const char *eight; /* the 4H+4S column's events */
	const char *two_label, *eight_label;
	int cpu; /* every ring process runs here */
	int runs;
	long hops; /* token passes per ring run */
};

/* The patch's table: lat_ctx, mean and stddev of 20 runs, µs; before and after the patch. */
static const struct {
	double mean[2][3], sd[2][3]; /* [unmodified, patched][none, 2 HW, 4H+4S] */
} published[NSIZES] = {
	{ { { 3.44, 6.45, 11.24 }, { 3.12, 3.39, 3.60 } },
	  { { 0.04, 0.04, 0.13 }, { 0.05, 0.17, 0.19 } } },
	{ { { 6.45, 8.79, 14.00 }, { 5.57, 6.23, 7.57 } },
	  { { 1.27, 1.04, 0.88 }, { 1.42, 1.46, 1.42 } } },
	{ { { 5.56, 8.43, 13.78 }, { 5.28, 5.55, 7.15 } },
	  { { 0.41, 0.47, 0.53 }, { 0.54, 0.57, 0.81 } } },
};

static const char *column_events(const struct setup *s, enum column col)
{
	switch (col) {
	case TWO_INHERITED:
	case TWO_SEPARATE:
		return s->two;
	case EIGHT_INHERITED:
	case EIGHT_SEPARATE:
		return s->eight;
	default:
		return NULL;
	}
}

static bool inherited(enum column col)
{
	return col == TWO_INHERITED || col == EIGHT_INHERITED;
}

/* ---- 1. the ring ---- */

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

static int open_own_counters(const char *events, bool inherit)
{
	struct lk_counters *c;

	/* Never closed: the process exits with the ring. NO_FASTPATH: no perf page to update at
	 * each switch, so both columns measure the kernel's context work alone. */
	return lk_counters_open(&c, events, 0,
				inherit ? LK_COUNTERS_INHERIT : LK_COUNTERS_NO_FASTPATH);
}

static void ring_member(int in, int out, long rounds, const char *own_events)
{
	char token;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (own_events && open_own_counters(own_events, false))
		_exit(2);
	for (long i = 0; i < rounds; i++)
		if (read(in, &token, 1) != 1 || write(out, &token, 1) != 1)
			_exit(1);
	_exit(0);
}

/* Time of one write + read on a pipe in one process: what lat_ctx subtracts. */
static double pipe_overhead_ns(long n)
{
	int p[2];
	char token = 't';
	uint64_t t0;

	if (pipe(p))
		return NAN;
	t0 = lkb_now_ns();
	for (long i = 0; i < n; i++)
		if (write(p[1], &token, 1) != 1 || read(p[0], &token, 1) != 1)
			break;
	t0 = lkb_now_ns() - t0;
	close(p[0]);
	close(p[1]);
	return (double)t0 / (double)n;
}

/*
 * The ring's first process: opens the counters (inherited ones before forking the others), starts
 * the others, passes the token around, and returns ns per pass.
 */
static double ring_leader(const struct setup *s, int size, enum column col)
{
	const char *events = column_events(s, col);
	long rounds = s->hops / size, warm = rounds / 10 + 1;
	int pipes[32][2], status;
	pid_t members[32];
	char token = 't';
	uint64_t t0 = 0;

	if (pin(s->cpu))
		return NAN;
	if (events && inherited(col) && open_own_counters(events, true))
		return NAN;
	for (int i = 0; i < size; i++)
		if (pipe(pipes[i]))
			return NAN;
	for (int i = 1; i < size; i++) {
		members[i] = fork();
		if (members[i] < 0)
			return NAN;
		if (members[i] == 0)
			ring_member(pipes[i][0], pipes[(i + 1) % size][1], warm + rounds,
				    events && !inherited(col) ? events : NULL);
	}
	if (events && !inherited(col) && open_own_counters(events, false))
		return NAN;
	/* The first rounds also wait for every member to be ready. */
	for (long i = 0; i < warm + rounds; i++) {
		if (i == warm)
			t0 = lkb_now_ns();
		if (write(pipes[1 % size][1], &token, 1) != 1 || read(pipes[0][0], &token, 1) != 1)
			return NAN;
	}
	t0 = lkb_now_ns() - t0;
	for (int i = 1; i < size; i++)
		waitpid(members[i], &status, 0);
	return (double)t0 / (double)(rounds * size);
}

/* One ring run in a fresh process (so inherited counters start from a clean context). */
static double ring_run(const struct setup *s, int size, enum column col)
{
	int result[2], status;
	double ns = NAN;
	pid_t leader;

	if (pipe(result))
		return NAN;
	fflush(NULL);
	leader = fork();
	if (leader == 0) {
		close(result[0]);
		ns = ring_leader(s, size, col);
		_exit(write(result[1], &ns, sizeof(ns)) == sizeof(ns) ? 0 : 1);
	}
	close(result[1]);
	if (leader < 0 || read(result[0], &ns, sizeof(ns)) != sizeof(ns))
		ns = NAN;
	close(result[0]);
	if (leader > 0)
		waitpid(leader, &status, 0);
	return ns;
}

struct ring_figures {
	double mean[NSIZES][NCOLUMNS], sd[NSIZES][NCOLUMNS]; /* µs per switch, overhead removed */
	double overhead_us;
};

static int measure_rings(const struct setup *s, struct ring_figures *f)
{
	double *samples = calloc((size_t)s->runs * NSIZES * NCOLUMNS, sizeof(double));
	double overhead[21];

	if (!samples)
		return -ENOMEM;
	pin(s->cpu);
	for (int i = 0; i < 21; i++)
		overhead[i] = pipe_overhead_ns(20000);
	f->overhead_us = lkb_median(overhead, 21) / 1000.0;
	/* Columns and sizes interleaved within each run, so drift hits them alike. */
	for (int run = 0; run < s->runs; run++)
		for (size_t z = 0; z < NSIZES; z++)
			for (int col = 0; col < NCOLUMNS; col++) {
				double ns = ring_run(s, ring_sizes[z], (enum column)col);

				if (isnan(ns)) {
					free(samples);
					return -EIO;
				}
				samples[(z * NCOLUMNS + (size_t)col) * (size_t)s->runs +
					(size_t)run] = ns / 1000.0 - f->overhead_us;
			}
	for (size_t z = 0; z < NSIZES; z++)
		for (int col = 0; col < NCOLUMNS; col++)
			lkb_mean_stddev(&samples[(z * NCOLUMNS + (size_t)col) * (size_t)s->runs],
					(size_t)s->runs, &f->mean[z][col], &f->sd[z][col]);
	free(samples);
	return 0;
}

/* ---- 2. self-reads ---- */

struct read_row {
	const char *name;
	double ns;	 /* median per read; NAN: not available */
	const char *why; /* when not */
};

enum { READ_SYSCALL, READ_RAW, READ_GROUP, READ_TWO, READ_HW_FAST, READ_HW_SLOW, NREADS };

#define READ_BATCH 10000
#define READ_BATCHES 21

static double median_read_ns(struct lk_counters *c, int raw_fd)
{
	double v[READ_BATCHES];
	struct lk_counter_value val[2];
	uint64_t buf[8];

	for (int b = 0; b < READ_BATCHES; b++) {
		uint64_t t0 = lkb_now_ns();

		for (int i = 0; i < READ_BATCH; i++) {
			if (raw_fd >= 0) {
				if (read(raw_fd, buf, sizeof(buf)) <= 0)
					return NAN;
			} else if (c) {
				if (lk_counters_read(c, val, 2) != 2)
					return NAN;
			} else {
				syscall(SYS_getppid);
			}
		}
		v[b] = (double)(lkb_now_ns() - t0) / READ_BATCH;
	}
	return lkb_median(v, READ_BATCHES);
}

/* A perf group fd opened directly, for the bare read() row. */
static int raw_group_fd(void)
{
	struct perf_event_attr a;
	int leader, member;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
	a.exclude_kernel = 1;
	a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED |
			PERF_FORMAT_TOTAL_TIME_RUNNING;
	leader = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (leader < 0)
		return -1;
	a.config = PERF_COUNT_SW_PAGE_FAULTS;
	member = (int)syscall(SYS_perf_event_open, &a, 0, -1, leader, PERF_FLAG_FD_CLOEXEC);
	if (member < 0) {
		close(leader);
		return -1;
	}
	return leader; /* the member stays open for the process's life */
}

static void measure_reads(const struct setup *s, struct read_row *rows)
{
	static const char *const names[NREADS] = {
		"getppid() (a system call, for scale)",
		"read() of a 2-event group fd",
		"lk_counters_read {context-switches,page-faults}",
		"lk_counters_read context-switches,page-faults (2 groups)",
		"lk_counters_read {cycles,instructions}, rdpmc",
		"lk_counters_read {cycles,instructions}, read()",
	};
	struct lk_counters *c;
	int fd;

	for (int i = 0; i < NREADS; i++) {
		rows[i].name = names[i];
		rows[i].ns = NAN;
		rows[i].why = NULL;
	}
	pin(s->cpu);
	rows[READ_SYSCALL].ns = median_read_ns(NULL, -1);
	fd = raw_group_fd();
	if (fd >= 0) {
		rows[READ_RAW].ns = median_read_ns(NULL, fd);
		close(fd);
	}
	if (lk_counters_open(&c, "{context-switches,page-faults}:u", 0, 0) == 0) {
		rows[READ_GROUP].ns = median_read_ns(c, -1);
		lk_counters_close(c);
	}
	if (lk_counters_open(&c, "context-switches:u,page-faults:u", 0, 0) == 0) {
		rows[READ_TWO].ns = median_read_ns(c, -1);
		lk_counters_close(c);
	}
	if (!s->pmu) {
		rows[READ_HW_FAST].why = rows[READ_HW_SLOW].why = "no hardware PMU on this machine";
		return;
	}
	if (lk_counters_open(&c, "{cycles:u,instructions:u}", 0, 0) == 0) {
		struct lk_counter_value v[2];
		struct lk_counters *slow;

		/* Whether rdpmc is really taken shows in the cost; say when the page refuses. */
		rows[READ_HW_FAST].ns = median_read_ns(c, -1);
		lk_counters_read(c, v, 2);
		lk_counters_close(c);
		if (lk_counters_open(&slow, "{cycles:u,instructions:u}", 0,
				     LK_COUNTERS_NO_FASTPATH) == 0) {
			rows[READ_HW_SLOW].ns = median_read_ns(slow, -1);
			lk_counters_close(slow);
		}
		if (rows[READ_HW_FAST].ns > 0.5 * rows[READ_HW_SLOW].ns)
			rows[READ_HW_FAST].why =
				"the perf page refuses rdpmc here (cap_user_rdpmc 0, or "
				"/sys/bus/event_source/devices/cpu/rdpmc is 0): read() "
				"was used";
	}
}

/* ---- 3. lowkey stat and perf stat on a command ---- */

struct tool_row {
	const char *name;
	double wall_ms;	    /* median wall time of the whole invocation */
	double reported_ms; /* median elapsed the tool reports for the command */
	bool ok;
};

enum { TOOL_BARE, TOOL_PERF, TOOL_LOWKEY, NTOOLS };

#define STAT_EVENTS "task-clock,context-switches,cpu-migrations,page-faults"
#define STAT_COMMAND "true"

/* Run argv with stdout and stderr into a pipe; wall ms, and the CSV's "seconds time elapsed"
 * is not printed with -x, so the reported elapsed comes from task-clock's run time column. */
static double run_tool(char *const argv[], double *reported_ms)
{
	int out[2], status;
	char buf[4096];
	size_t used = 0;
	ssize_t n;
	uint64_t t0;
	pid_t pid;

	if (pipe2(out, O_CLOEXEC))
		return NAN;
	t0 = lkb_now_ns();
	pid = fork();
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(out[1], 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	while ((n = read(out[0], buf + used, sizeof(buf) - 1 - used)) > 0)
		used += (size_t)n;
	buf[used] = '\0';
	close(out[0]);
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return NAN;
	t0 = lkb_now_ns() - t0;
	if (reported_ms) {
		/* "value,msec,task-clock,run time ns,..." : the run time of task-clock is the
		 * time the command was counted. */
		char *line = strstr(buf, ",task-clock,");
		char *run = line ? line + strlen(",task-clock,") : NULL;

		*reported_ms = run ? strtod(run, NULL) / 1e6 : NAN;
	}
	return (double)t0 / 1e6;
}

static void measure_stat(const struct setup *s, struct tool_row *rows)
{
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *bare[] = { STAT_COMMAND, NULL };
	char *perf[] = { "perf", "stat", "-x", ",", "-e", STAT_EVENTS, "--", STAT_COMMAND, NULL };
	char *lowkey[] = { self, "stat", "-x", ",", "-e", STAT_EVENTS, "--", STAT_COMMAND, NULL };
	char *const *argv[NTOOLS] = { bare, perf, lowkey };
	double wall[NTOOLS][64], reported[NTOOLS][64];
	int runs = s->runs < 64 ? s->runs : 64;

	rows[TOOL_BARE].name = "`" STAT_COMMAND "` alone";
	rows[TOOL_PERF].name = "perf stat -x, -e EVENTS -- " STAT_COMMAND;
	rows[TOOL_LOWKEY].name = "lowkey stat -x, -e EVENTS -- " STAT_COMMAND;
	self[n > 0 ? n : 0] = '\0';
	for (int t = 0; t < NTOOLS; t++)
		rows[t].ok = true;
	for (int i = 0; i < runs; i++)
		for (int t = 0; t < NTOOLS; t++) {
			wall[t][i] = run_tool(argv[t], t == TOOL_BARE ? NULL : &reported[t][i]);
			if (t == TOOL_BARE)
				reported[t][i] = NAN;
			if (isnan(wall[t][i]))
				rows[t].ok = false;
		}
	for (int t = 0; t < NTOOLS; t++) {
		rows[t].wall_ms = rows[t].ok ? lkb_median(wall[t], (size_t)runs) : NAN;
		rows[t].reported_ms =
			rows[t].ok && t != TOOL_BARE ? lkb_median(reported[t], (size_t)runs) : NAN;
	}
}

/* ---- output ---- */

static const char *column_name(const struct setup *s, enum column col, char *buf, size_t size)
{
	switch (col) {
	case NONE:
		return "none";
	case TWO_INHERITED:
		snprintf(buf, size, "%s inh", s->two_label);
		break;
	case TWO_SEPARATE:
		snprintf(buf, size, "%s sep", s->two_label);
		break;
	case EIGHT_INHERITED:
		snprintf(buf, size, "%s inh", s->eight_label);
		break;
	default:
		snprintf(buf, size, "%s sep", s->eight_label);
		break;
	}
	return buf;
}

/* The text, a section as soon as it is measured: the rings, the reads, the tools. */
static void print_rings(const struct setup *s, const struct ring_figures *f)
{
	FILE *out = lkb_section_begin();
	char name[32];

	fprintf(out,
		"lowkey bench ctx: the perf_counter context-swap patch's experiment (inherited "
		"counters, swapped contexts) on this machine\n");
	fprintf(out, "machine: %s\n", lkb_machine());
	if (s->pmu)
		fprintf(out, "PMU:     yes; 2 = cycles,instructions; 4H+4S = cycles,instructions,"
			     "cache-references,cache-misses + 4 software\n");
	else
		fprintf(out,
			"PMU:     NONE. Hardware events are not supported on this machine, so the counter\n"
			"         columns count software events only: 2 = %s; 4S = %s\n"
			"         (the patch had 2 hardware and 4 hardware + 4 software)\n",
			s->two, s->eight);
	fprintf(out,
		"method:  lmbench lat_ctx: a token around a ring of N processes through pipes, all on "
		"CPU %d;\n         µs per switch = ring time / passes - one pipe write+read (%.2f µs), "
		"mean and stddev of %d runs;\n         inh = counters inherited from the ring's first "
		"process, sep = each process opens its own\n\n",
		s->cpu, f->overhead_us, s->runs);

	fprintf(out, "%-14s %-7s", "", "");
	for (int col = 0; col < NCOLUMNS; col++)
		fprintf(out, " %10s", column_name(s, (enum column)col, name, sizeof(name)));
	fprintf(out, "   %s\n", "inh vs sep");
	for (size_t z = 0; z < NSIZES; z++) {
		fprintf(out, "%2d processes   %-7s", ring_sizes[z], "mean");
		for (int col = 0; col < NCOLUMNS; col++)
			fprintf(out, " %10.2f", f->mean[z][col]);
		fprintf(out, "   %+.0f%% / %+.0f%%\n",
			100.0 * (f->mean[z][TWO_INHERITED] / f->mean[z][TWO_SEPARATE] - 1),
			100.0 * (f->mean[z][EIGHT_INHERITED] / f->mean[z][EIGHT_SEPARATE] - 1));
		fprintf(out, "%-14s %-7s", "", "stddev");
		for (int col = 0; col < NCOLUMNS; col++)
			fprintf(out, " %10.2f", f->sd[z][col]);
		fputc('\n', out);
	}

	fprintf(out,
		"\n\"perf_counter: optimize context switch between identical inherited "
		"contexts\",\nlat_ctx µs (20 runs): before the patch | with it (inherited contexts "
		"swapped)\n");
	fprintf(out, "%-14s %-7s %6s %6s %6s | %6s %6s %6s\n", "", "", "none", "2 HW", "4H+4S",
		"none", "2 HW", "4H+4S");
	for (size_t z = 0; z < NSIZES; z++) {
		fprintf(out, "%2d processes   %-7s", ring_sizes[z], "mean");
		for (int p = 0; p < 2; p++)
			for (int c = 0; c < 3; c++)
				fprintf(out, " %6.2f%s", published[z].mean[p][c],
					p == 0 && c == 2 ? " |" : "");
		fprintf(out, "\n%-14s %-7s", "", "stddev");
		for (int p = 0; p < 2; p++)
			for (int c = 0; c < 3; c++)
				fprintf(out, " %6.2f%s", published[z].sd[p][c],
					p == 0 && c == 2 ? " |" : "");
		fputc('\n', out);
	}
	lkb_section_end(out);
}

static void print_reads(const struct read_row *reads)
{
	FILE *out = lkb_section_begin();

	fprintf(out, "\nself-read of a 2-counter group (median ns per call, %d x %d calls)\n",
		READ_BATCHES, READ_BATCH);
	for (int i = 0; i < NREADS; i++) {
		if (isnan(reads[i].ns))
			fprintf(out, "  %-58s %9s  (%s)\n", reads[i].name, "n/a",
				reads[i].why ? reads[i].why : "failed");
		else if (reads[i].why)
			fprintf(out, "  %-58s %9.1f  (%s)\n", reads[i].name, reads[i].ns,
				reads[i].why);
		else
			fprintf(out, "  %-58s %9.1f\n", reads[i].name, reads[i].ns);
	}
	lkb_section_end(out);
}

static void print_tools(const struct setup *s, const struct tool_row *tools)
{
	FILE *out = lkb_section_begin();

	fprintf(out, "\ncounting `%s` (median of %d runs, ms; EVENTS = %s)\n", STAT_COMMAND,
		s->runs, STAT_EVENTS);
	fprintf(out, "  %-40s %9s %9s %12s\n", "", "wall", "added", "cmd counted");
	for (int t = 0; t < NTOOLS; t++) {
		if (!tools[t].ok) {
			fprintf(out, "  %-40s %9s\n", tools[t].name, "n/a");
			continue;
		}
		fprintf(out, "  %-40s %9.2f", tools[t].name, tools[t].wall_ms);
		if (t == TOOL_BARE)
			fprintf(out, "\n");
		else
			fprintf(out, " %+9.2f %12.2f\n",
				tools[t].wall_ms - tools[TOOL_BARE].wall_ms, tools[t].reported_ms);
	}
	lkb_section_end(out);
}

static void print_json(const struct setup *s, const struct ring_figures *f,
		       const struct read_row *reads, const struct tool_row *tools)
{
	static const char *const keys[NCOLUMNS] = { "none", "two_inherited", "two_separate",
						    "eight_inherited", "eight_separate" };
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str(&j, "bench", "ctx");
	lk__json_str(&j, "machine", lkb_machine());
	lk__json_bool(&j, "pmu", s->pmu);
	lk__json_str(&j, "two_events", s->two);
	lk__json_str(&j, "eight_events", s->eight);
	lk__json_int(&j, "cpu", s->cpu);
	lk__json_int(&j, "runs", s->runs);
	lk__json_int(&j, "hops", s->hops);
	lk__json_num(&j, "pipe_overhead_us", f->overhead_us);
	lk__json_array(&j, "lat_ctx_us");
	for (size_t z = 0; z < NSIZES; z++) {
		lk__json_object(&j, NULL);
		lk__json_int(&j, "processes", ring_sizes[z]);
		for (int col = 0; col < NCOLUMNS; col++) {
			lk__json_object(&j, keys[col]);
			lk__json_num(&j, "mean", f->mean[z][col]);
			lk__json_num(&j, "stddev", f->sd[z][col]);
			lk__json_close(&j);
		}
		lk__json_object(&j, "published");
		lk__json_num(&j, "unmodified_none", published[z].mean[0][0]);
		lk__json_num(&j, "unmodified_2hw", published[z].mean[0][1]);
		lk__json_num(&j, "unmodified_4h4s", published[z].mean[0][2]);
		lk__json_num(&j, "patched_none", published[z].mean[1][0]);
		lk__json_num(&j, "patched_2hw", published[z].mean[1][1]);
		lk__json_num(&j, "patched_4h4s", published[z].mean[1][2]);
		lk__json_close(&j);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_array(&j, "self_read_ns");
	for (int i = 0; i < NREADS; i++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "row", reads[i].name);
		lk__json_num(&j, "ns", reads[i].ns);
		if (reads[i].why)
			lk__json_str(&j, "note", reads[i].why);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_array(&j, "stat_wall_ms");
	for (int t = 0; t < NTOOLS; t++) {
		lk__json_object(&j, NULL);
		lk__json_str(&j, "tool", tools[t].name);
		lk__json_num(&j, "wall_ms", tools[t].wall_ms);
		lk__json_num(&j, "command_counted_ms", tools[t].reported_ms);
		lk__json_close(&j);
	}
	lk__json_close(&j);
	lk__json_end(&j);
}

static const char ctx_usage[] =
	"usage: lowkey bench ctx [--runs N] [--hops N] [--cpu N] [-j|--json]\n"
	"\n"
	"Re-runs the table of Paul Mackerras's patch \"perf_counter: optimize context switch between\n"
	"identical inherited contexts\" on this machine: lmbench lat_ctx (a token passed around a\n"
	"ring of 2, 8 and 32 processes through pipes, all on one CPU) with no counters, with counters\n"
	"inherited from one parent (which the kernel swaps at a switch instead of reprogramming) and\n"
	"with separate counters in every process; then the cost of a self-read of a 2-counter group\n"
	"(read() and rdpmc), and the wall time lowkey stat and perf stat add to a command.\n"
	"Run it alone: `flock /tmp/lowkey-bench.lock lowkey bench ctx`.\n"
	"\n"
	"  --runs N   ring runs per cell, and runs of each stat row (default 20, as the patch)\n"
	"  --hops N   token passes per ring run (default 20000)\n"
	"  --cpu N    the CPU the ring runs on (default: the last one this process may use)\n"
	"  -j, --json print the figures as JSON\n";

static int last_allowed_cpu(void)
{
	cpu_set_t set;
	int cpu = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set))
				cpu = i;
	return cpu;
}

static int ctx_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "hops", required_argument, NULL, 'h' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct setup s = { .runs = 20, .hops = 20000, .cpu = last_allowed_cpu() };
	struct read_row reads[NREADS];
	struct tool_row tools[NTOOLS];
	struct ring_figures f;
	struct lk_counters *probe;
	bool json = false;
	int c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "r:h:c:j", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			s.runs = atoi(optarg);
			break;
		case 'h':
			s.hops = atol(optarg);
			break;
		case 'c':
			s.cpu = atoi(optarg);
			break;
		case 'j':
			json = true;
			break;
		default:
			fputs(ctx_usage, stderr);
			return 2;
		}
	}
	if (s.runs < 2 || s.hops < 64 || optind != argc) {
		fputs(ctx_usage, stderr);
		return 2;
	}
	s.pmu = lk_counters_open(&probe, "cycles,instructions", 0, 0) == 0;
	if (s.pmu)
		lk_counters_close(probe);
	s.two = s.pmu ? "cycles,instructions" : "task-clock,context-switches";
	s.eight = s.pmu ? "cycles,instructions,cache-references,cache-misses,task-clock,"
			  "context-switches,cpu-migrations,page-faults" :
			  "task-clock,context-switches,cpu-migrations,page-faults";
	s.two_label = s.pmu ? "2 HW" : "2 SW";
	s.eight_label = s.pmu ? "4H+4S" : "4 SW";
	/* Can the counters open at all here (paranoid, seccomp)? Say so before measuring. */
	err = lk_counters_open(&probe, s.eight, 0, LK_COUNTERS_INHERIT);
	if (err) {
		fprintf(stderr, "lowkey bench ctx: cannot open the counters: %s\n",
			lk_last_error());
		return 1;
	}
	lk_counters_close(probe);

	lkb_progress("rings of processes, %d runs", s.runs);
	err = measure_rings(&s, &f);
	if (err) {
		fprintf(stderr, "lowkey bench ctx: a ring run failed (%s)\n", lk_strerror(err));
		return 1;
	}
	if (!json)
		print_rings(&s, &f);
	lkb_progress("self-reads");
	measure_reads(&s, reads);
	if (!json)
		print_reads(reads);
	lkb_progress("lowkey stat and perf stat, %d runs", s.runs);
	measure_stat(&s, tools);
	if (json)
		print_json(&s, &f, reads, tools);
	else
		print_tools(&s, tools);
	return 0;
}

LK_BENCH(ctx_bench, "ctx",
	 "perf_counter context-swap patch: a switch's cost with inherited vs separate counters",
	 ctx_usage, ctx_run);
