// SPDX-License-Identifier: MIT
/*
 * lowkey report TRACE: what a lowkey trace holds, summarized, from any of its formats: a CTF
 * directory, lowkey's Chrome JSON or its Perfetto protobuf (lowkey/trace_reader.h reads them alike).
 *
 * Events by name with counts and rates; spans paired per thread (nested spans with a stack; an
 * end closes the latest open begin of its name) with their durations by wall time and, where the
 * trace recorded it, by thread CPU time; counter tracks; threads; lost events. With the threads'
 * context switches in the trace (lowkey trace --sched), each span's wall time split into on-CPU,
 * runnable (preempted, waiting for a CPU) and blocked (sleeping, waiting for I/O or a lock).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lowkey/lowkey.h>

#include "builtin.h"
#include "internal/json.h"
#include "internal/utf8.h"
#include "internal/probe.h"
#include "util/report_html.h"
#include "util/samples.h"
#include "util/span_split.h"
#include "util/status.h"

struct per_class {
	uint64_t count;
	struct samples wall, cpu; /* span classes: durations in ns */
	double min, max, last;	  /* counter classes */
};

struct per_thread {
	int tid;
	char name[64];
	uint64_t events, lost, first_tick, last_tick;
	uint64_t truncated;		  /* bytes after the stream's last whole packet */
	double span_wall_ns, span_cpu_ns; /* time in outermost spans */
	uint64_t switches;		  /* switches out */
};

struct report {
	struct lk_trace_file *tf;
	const struct lk_trace_file_info *in;
	struct per_class *classes;  /* by class id: the order rows print in */
	struct lk_trace_class *cls; /* by class id */
	struct per_thread *threads; /* in the trace's order; printed the latest first */
	size_t nthreads;
	uint64_t events, first_tick, last_tick, unmatched_ends, open_at_end;
	uint64_t switches, switch_records; /* switch records are not counted as events */
	struct span_split split;	   /* with context switches only */
};

/* b - a in ns; the difference taken in ticks, where no digit of either is lost. */
static double tsc_ns(const struct report *rep, uint64_t a, uint64_t b)
{
	double ticks = b >= a ? (double)(b - a) : -(double)(a - b);

	return ticks * 1e9 / (double)rep->in->tick_hz;
}

/* An end the reader paired with its begin (lowkey/trace_reader.h): the span's figures. */
static int close_span(struct report *rep, struct per_thread *t, const struct lk_trace_event *ev)
{
	struct per_class *c;
	double wall, cpu;

	if (!ev->paired) {
		rep->unmatched_ends++;
		return 0;
	}
	c = &rep->classes[ev->begin_class_id];
	wall = tsc_ns(rep, ev->begin_ticks, ev->ticks);
	cpu = (double)ev->cpu_ns - (double)ev->begin_cpu_ns;
	if (samples_push(&c->wall, wall) || (rep->in->cputime && samples_push(&c->cpu, cpu)))
		return -ENOMEM;
	if (ev->depth == 0) {
		t->span_wall_ns += wall;
		t->span_cpu_ns += cpu;
	}
	return rep->in->sched ? span_split_event(&rep->split, ev) : 0;
}

/* A context switch: counted, and into the split (span_split.c). */
static int on_switch(struct report *rep, struct per_thread *t, const struct lk_trace_event *ev)
{
	rep->switch_records++;
	if (ev->type == LK_TRACE_EV_SWITCH_OUT) {
		t->switches++;
		rep->switches++;
	}
	return span_split_event(&rep->split, ev);
}

static void on_counter(struct per_class *c, double d)
{
	if (c->count == 1 || d < c->min)
		c->min = d;
	if (c->count == 1 || d > c->max)
		c->max = d;
	c->last = d;
}

static int on_event(struct report *rep, const struct lk_trace_event *ev)
{
	struct per_thread *t = &rep->threads[ev->thread];
	struct per_class *c = &rep->classes[ev->class_id];

	if (ev->type != LK_TRACE_EV_PROBE)
		return on_switch(rep, t, ev);
	rep->events++;
	t->events++;
	if (!t->first_tick || ev->ticks < t->first_tick)
		t->first_tick = ev->ticks;
	if (ev->ticks > t->last_tick)
		t->last_tick = ev->ticks;
	c->count++;
	switch (ev->kind) {
	case LK_PROBE_SPAN_BEGIN:
		return 0; /* its end carries its class */
	case LK_PROBE_SPAN_END:
		return close_span(rep, t, ev);
	case LK_PROBE_COUNTER:
		on_counter(c, ev->value);
		return 0;
	default:
		return 0;
	}
}

/* The threads and classes the trace names, before its events (the threads' names after them). */
static int prepare(struct report *rep)
{
	unsigned int n = rep->in->classes;

	rep->nthreads = rep->in->threads;
	rep->threads = calloc(rep->nthreads + 1, sizeof(*rep->threads));
	rep->classes = calloc(n + 1, sizeof(*rep->classes));
	rep->cls = calloc(n + 1, sizeof(*rep->cls));
	if (!rep->threads || !rep->classes || !rep->cls ||
	    span_split_init(&rep->split, rep->in->tick_hz, rep->in->threads, n))
		return -ENOMEM;
	for (unsigned int i = 0; i < n; i++)
		lk_trace_file_class(rep->tf, i, &rep->cls[i]);
	for (size_t i = 0; i < rep->nthreads; i++) {
		struct per_thread *t = &rep->threads[i];
		struct lk_trace_thread th;

		lk_trace_file_thread(rep->tf, (unsigned int)i, &th);
		t->tid = th.tid;
	}
	return 0;
}

/*
 * What is known once every event is read: the threads' names and losses, spans left open, the
 * trace's first and last events.
 */
static void finish(struct report *rep)
{
	for (size_t i = 0; i < rep->nthreads; i++) {
		struct per_thread *t = &rep->threads[i];
		struct lk_trace_thread th;

		lk_trace_file_thread(rep->tf, (unsigned int)i, &th);
		snprintf(t->name, sizeof(t->name), "%s", th.name[0] ? th.name : "?");
		t->lost = th.lost;
		t->truncated = th.truncated;
		rep->open_at_end += th.open_spans;
		if (t->first_tick && (!rep->first_tick || t->first_tick < rep->first_tick))
			rep->first_tick = t->first_tick;
		if (t->last_tick > rep->last_tick)
			rep->last_tick = t->last_tick;
	}
}

static int read_events(struct report *rep)
{
	struct lk_trace_event ev;
	int rc = prepare(rep);

	while (!rc && (rc = lk_trace_file_next(rep->tf, &ev)) == 1)
		rc = on_event(rep, &ev);
	if (!rc)
		finish(rep);
	return rc;
}

/* ---- printing ---- */

/* provider:event, fit for a terminal: the trace's text, escaped (lk__text_escape). */
static const char *class_name(const struct lk_trace_class *c, char *buf, size_t len)
{
	char raw[512];

	snprintf(raw, sizeof(raw), "%s:%s", c->provider, c->name);
	return lk__text_escape(raw, buf, len);
}

/* Where the spans' wall time went, by the context switches (lowkey trace --sched). */
static void print_split(const struct report *rep)
{
	const struct lk_trace_file_info *r = rep->in;
	char name[200], a[32], b[32], c[32], d[32];

	printf("\n%-32s %8s %12s %17s %12s %12s\n", "spans (time, --sched)", "count", "wall",
	       "on-CPU (switches)", "runnable", "blocked");
	for (size_t i = 0; i < r->classes; i++) { /* by name: the same order in every format */
		const struct per_class *pc = &rep->classes[i];

		if (!pc->wall.n)
			continue;
		span_split_fmt_ns(a, sizeof(a), rep->split.by_class[i].wall);
		span_split_fmt_ns(b, sizeof(b), rep->split.by_class[i].on_cpu);
		span_split_fmt_ns(c, sizeof(c), rep->split.by_class[i].runnable);
		span_split_fmt_ns(d, sizeof(d), rep->split.by_class[i].blocked);
		printf("  %-30s %8zu %12s %17s %12s %12s\n",
		       class_name(&rep->cls[i], name, sizeof(name)), pc->wall.n, a, b, c, d);
	}
	printf("  (%" PRIu64
	       " context switches; runnable: preempted, waiting for a CPU; blocked: sleeping or "
	       "waiting)\n",
	       rep->switches);
	printf("  (on-CPU (switches): wall time between the thread's switch-in and switch-out records, "
	       "not its CPU time:\n   the kernel charges a thread for the scheduler's switch into it, "
	       "before that record, and not for\n   time its virtual CPU was stolen; cputime is the "
	       "kernel's: docs/trace.md, \"Two CPU times\")\n");
	if (r->sched_lost)
		printf("  %" PRIu64
		       " context switches were lost (the kernel's ring was full): the split is "
		       "approximate\n",
		       r->sched_lost);
}

/* Whole nanoseconds, not lk__json_num's 6 digits: the parts add up to the wall time. */
static void json_split(struct lk__json *j, const char *key, const struct split *x)
{
	lk__json_object(j, key);
	lk__json_fixed(j, "wall_ns", x->wall, 0);
	lk__json_fixed(j, "on_cpu_ns", x->on_cpu, 0);
	lk__json_fixed(j, "runnable_ns", x->runnable, 0);
	lk__json_fixed(j, "blocked_ns", x->blocked, 0);
	lk__json_close(j);
}

/*
 * Which format a JSON or Perfetto trace is, and what it left out of this trace. Counts these
 * formats cannot carry at all (bytes of streams cut short, switches the kernel lost) are not
 * mentioned: --json gives them as null, and docs/trace.md tabulates them.
 */
static void print_format_notes(const struct report *rep)
{
	const struct lk_trace_file_info *t = rep->in;

	printf("  read from lowkey's %s output\n", t->format_name);
	if (t->format == LK_TRACE_JSON && t->sched)
		printf("  JSON has the intervals off the CPU, not the switches: a switch out with no switch in after "
		       "it (the trace or the thread ended) is not in it\n");
	if (t->nonfinite_counters)
		printf("  %" PRIu64 " counter values were NaN or infinite and are not in the JSON "
		       "(otherData.nonfinite_counter_values)\n",
		       t->nonfinite_counters);
}

/* The threads that recorded events (or lost some), as lowkey trace counts them. */
static size_t threads_recording(const struct report *rep)
{
	size_t n = 0;

	for (size_t k = 0; k < rep->nthreads; k++)
		n += rep->threads[k].events || rep->threads[k].lost;
	return n;
}

static double trace_seconds(const struct report *rep)
{
	return rep->last_tick > rep->first_tick ?
		       tsc_ns(rep, rep->first_tick, rep->last_tick) / 1e9 :
		       0;
}

/* The trace's line, what it holds besides events, and what it lost. */
static void print_header(const struct report *rep, const char *path)
{
	const struct lk_trace_file_info *r = rep->in;
	size_t recording = threads_recording(rep);
	char shown[256];

	printf("trace %s: %s (pid %d), %" PRIu64 " events over %.3f s, %zu thread%s", path,
	       lk__text_escape(r->process_name, shown, sizeof(shown)), r->pid, rep->events,
	       trace_seconds(rep), recording, recording == 1 ? "" : "s");
	if (recording < rep->nthreads)
		printf(" (and %zu with context switches only)", rep->nthreads - recording);
	printf(", %" PRIu64 " lost\n", r->lost);
	if (r->thread_names || rep->switch_records)
		printf("  not counted as events: %" PRIu64 " thread-name records, %" PRIu64
		       " context-switch "
		       "records (a CTF reader such as babeltrace2 counts them as events)\n",
		       r->thread_names, rep->switch_records);
}

static void print_losses(const struct report *rep)
{
	const struct lk_trace_file_info *r = rep->in;

	if (r->lost && r->overwrite) {
		uint64_t dropped = r->dropped < r->lost ? r->dropped : r->lost;

		if (r->lost > dropped)
			printf("  %" PRIu64
			       " older events overwritten: the flight recorder keeps the newest\n",
			       r->lost - dropped);
		if (dropped)
			printf("  %" PRIu64
			       " events were dropped besides those (a signal handler's over an event in "
			       "progress, an event larger than --buffer / 8)\n",
			       dropped);
	} else if (r->lost) {
		printf("  %" PRIu64
		       " events were dropped because a thread's buffer was full: see --buffer\n",
		       r->lost);
	}
	for (size_t k = rep->nthreads; k-- > 0;)
		if (rep->threads[k].truncated)
			printf("  thread %d's stream ends inside a packet (%" PRIu64
			       " bytes, left out): its program "
			       "stopped mid-write; the events before are all here\n",
			       rep->threads[k].tid, rep->threads[k].truncated);
}

/* Each table's rows are by class name: the same order in every format. */
static void print_events(const struct report *rep)
{
	double seconds = trace_seconds(rep);
	char name[200];

	printf("\n%-40s %12s %12s\n", "events", "count", "per second");
	for (size_t i = 0; i < rep->in->classes; i++) {
		const struct per_class *pc = &rep->classes[i];

		if (!pc->count || rep->cls[i].kind == LK_PROBE_SPAN_END)
			continue;
		printf("  %-38s %12" PRIu64 " %12.1f\n",
		       class_name(&rep->cls[i], name, sizeof(name)), pc->count,
		       seconds > 0 ? (double)pc->count / seconds : 0.0);
	}
}

/* p50, p99 and max of samples, each formatted, in columns width wide. */
static void print_percentiles(struct samples *v, int width)
{
	char a[32], b[32], c[32];

	samples_sort(v);
	span_split_fmt_ns(a, sizeof(a), samples_pct(v, 50));
	span_split_fmt_ns(b, sizeof(b), samples_pct(v, 99));
	span_split_fmt_ns(c, sizeof(c), samples_pct(v, 100));
	printf(" %*s %*s %*s", width, a, width, b, width, c);
}

static void print_spans(struct report *rep)
{
	bool cputime = rep->in->cputime;
	char name[200];

	printf("\n%-32s %8s %10s %10s %10s", "spans (wall)", "count", "p50", "p99", "max");
	if (cputime) /* the kernel's thread CPU time, not the --sched split's on-CPU */
		printf("   %11s %11s %11s", "p50 cputime", "p99 cputime", "max cputime");
	putchar('\n');
	for (size_t i = 0; i < rep->in->classes; i++) {
		struct per_class *pc = &rep->classes[i];

		if (!pc->wall.n)
			continue;
		printf("  %-30s %8zu", class_name(&rep->cls[i], name, sizeof(name)), pc->wall.n);
		print_percentiles(&pc->wall, 10);
		if (cputime) {
			printf("  ");
			print_percentiles(&pc->cpu, 11);
		}
		putchar('\n');
	}
	if (rep->open_at_end || rep->unmatched_ends)
		printf("  (%" PRIu64 " spans still open at the end of the trace, %" PRIu64
		       " ends without a begin)\n",
		       rep->open_at_end, rep->unmatched_ends);
	if (rep->in->sched)
		print_split(rep);
}

static void print_counters(const struct report *rep)
{
	char name[200];

	printf("\n%-32s %8s %14s %14s %14s\n", "counters", "count", "min", "max", "last");
	for (size_t i = 0; i < rep->in->classes; i++) {
		const struct per_class *pc = &rep->classes[i];

		if (!pc->count || rep->cls[i].kind != LK_PROBE_COUNTER)
			continue;
		printf("  %-30s %8" PRIu64 " %14.6g %14.6g %14.6g\n",
		       class_name(&rep->cls[i], name, sizeof(name)), pc->count, pc->min, pc->max,
		       pc->last);
	}
}

/* With --sched: where each thread's outermost spans' wall time went. */
static void print_thread_split(const struct split *x)
{
	char a[32], b[32], c[32];

	span_split_fmt_ns(a, sizeof(a), x->on_cpu);
	span_split_fmt_ns(b, sizeof(b), x->runnable);
	span_split_fmt_ns(c, sizeof(c), x->blocked);
	printf(" %17s %12s %12s", a, b, c);
}

static void print_threads(const struct report *rep)
{
	char a[32], b[32], shown[256];

	printf("\n%-10s %-16s %10s %10s %12s", "threads", "name", "events", "lost", "in spans");
	if (rep->in->cputime)
		printf(" %14s", "spans cputime");
	if (rep->in->sched)
		printf(" %17s %12s %12s", "on-CPU (switches)", "runnable", "blocked");
	putchar('\n');
	for (size_t k = rep->nthreads; k-- > 0;) {
		const struct per_thread *t = &rep->threads[k];

		span_split_fmt_ns(a, sizeof(a), t->span_wall_ns);
		printf("  %-8d %-16s %10" PRIu64 " %10" PRIu64 " %12s", t->tid,
		       lk__text_escape(t->name, shown, sizeof(shown)), t->events, t->lost, a);
		if (rep->in->cputime) {
			span_split_fmt_ns(b, sizeof(b), t->span_cpu_ns);
			printf(" %14s", b);
		}
		if (rep->in->sched)
			print_thread_split(&rep->split.by_thread[k]);
		putchar('\n');
	}
	if (rep->in->sched)
		printf("  (on-CPU (switches), runnable, blocked: the thread's outermost spans' wall time, "
		       "split by its context switches)\n");
}

static void print_text(struct report *rep, const char *path)
{
	print_header(rep, path);
	if (rep->in->format != LK_TRACE_CTF)
		print_format_notes(rep);
	print_losses(rep);
	print_events(rep);
	print_spans(rep);
	print_counters(rep);
	print_threads(rep);
}

/* null: the format does not carry it */
static void json_count(struct lk__json *j, const char *key, bool known, uint64_t n)
{
	if (known)
		lk__json_uint(j, key, n);
	else
		lk__json_null(j, key);
}

static void json_percentiles(struct lk__json *j, const char *key, const struct samples *s)
{
	lk__json_object(j, key);
	lk__json_num(j, "p50", samples_pct(s, 50));
	lk__json_num(j, "p99", samples_pct(s, 99));
	lk__json_num(j, "max", samples_pct(s, 100));
	lk__json_close(j);
}

static void class_json(struct lk__json *j, const struct report *rep, size_t i)
{
	const struct lk_trace_class *c = &rep->cls[i];
	struct per_class *pc = &rep->classes[i];

	samples_sort(&pc->wall);
	samples_sort(&pc->cpu);
	lk__json_object_line(j, NULL);
	lk__json_str_or_null(j, "provider", c->provider);
	lk__json_str_or_null(j, "event", c->name);
	lk__json_str(j, "kind", lk__probe_kind_name(c->kind));
	lk__json_uint(j, "count", pc->count);
	if (pc->wall.n) {
		lk__json_uint(j, "spans", pc->wall.n);
		json_percentiles(j, "wall_ns", &pc->wall);
		if (rep->in->cputime)
			json_percentiles(j, "cpu_ns", &pc->cpu);
		if (rep->in->sched)
			json_split(j, "split", &rep->split.by_class[i]);
	}
	if (c->kind == LK_PROBE_COUNTER) {
		lk__json_num(j, "min", pc->min);
		lk__json_num(j, "max", pc->max);
		lk__json_num(j, "last", pc->last);
	}
	lk__json_close(j);
}

static void thread_json(struct lk__json *j, const struct report *rep, const struct per_thread *t)
{
	lk__json_object_line(j, NULL);
	lk__json_int(j, "tid", t->tid);
	lk__json_str_or_null(j, "name", t->name);
	lk__json_uint(j, "events", t->events);
	lk__json_uint(j, "lost", t->lost);
	json_count(j, "truncated_bytes", rep->in->format == LK_TRACE_CTF, t->truncated);
	lk__json_num(j, "span_wall_ns", t->span_wall_ns);
	if (rep->in->cputime)
		lk__json_num(j, "span_cpu_ns", t->span_cpu_ns);
	if (rep->in->sched) {
		lk__json_uint(j, "switches", t->switches);
		json_split(j, "span_split", &rep->split.by_thread[t - rep->threads]);
	}
	lk__json_close(j);
}

/*
 * What the two CPU figures are: they differ by design (docs/trace.md, "Two CPU times"), so a
 * script that reads one for the other is told which is which.
 */
static void json_measures(struct lk__json *j, const struct lk_trace_file_info *r)
{
	if (!r->cputime && !r->sched)
		return;
	lk__json_object(j, "measures");
	if (r->cputime) {
		lk__json_str(j, "cpu_ns",
			     "thread CPU time (CLOCK_THREAD_CPUTIME_ID) at the span's ends");
		lk__json_str(j, "span_cpu_ns", "the same, over the thread's outermost spans");
	}
	if (r->sched)
		lk__json_str(
			j, "on_cpu_ns",
			"wall time between the thread's switch-in and switch-out records; not "
			"CPU time: without the scheduler's switches into the thread, with time "
			"its virtual CPU was stolen");
	lk__json_close(j);
}

static void print_json(struct report *rep, const char *path)
{
	const struct lk_trace_file_info *r = rep->in;
	bool ctf = r->format == LK_TRACE_CTF;
	struct lk__json j;

	lk__json_begin(&j, stdout, false);
	lk__json_str_or_null(&j, "trace", path);
	lk__json_str_or_null(&j, "procname", r->process_name);
	lk__json_str(&j, "format", ctf ? "ctf" : r->format == LK_TRACE_JSON ? "json" : "perfetto");
	lk__json_int(&j, "pid", r->pid);
	lk__json_uint(&j, "events", rep->events);
	lk__json_uint(&j, "lost", r->lost);
	json_count(&j, "truncated_streams", ctf, r->truncated_streams);
	lk__json_bool(&j, "cputime", r->cputime);
	lk__json_bool(&j, "sched", r->sched);
	if (r->sched) {
		lk__json_uint(&j, "switches", rep->switches);
		json_count(&j, "switches_lost", ctf, r->sched_lost);
	}
	json_measures(&j, r);
	lk__json_array(&j, "classes");
	for (size_t i = 0; i < r->classes; i++) { /* by name: the same order in every format */

		if (rep->classes[i].count)
			class_json(&j, rep, i);
	}
	lk__json_close(&j);
	lk__json_array(&j, "threads");
	for (size_t k = rep->nthreads; k-- > 0;)
		thread_json(&j, rep, &rep->threads[k]);
	lk__json_close(&j);
	lk__json_end(&j);
}

static void free_report(struct report *rep)
{
	for (size_t i = 0; rep->classes && i < rep->in->classes; i++) {
		free(rep->classes[i].wall.v);
		free(rep->classes[i].cpu.v);
	}
	free(rep->threads);
	free(rep->classes);
	free(rep->cls);
	span_split_free(&rep->split);
	lk_trace_file_close(rep->tf);
}

static const char report_usage[] =
	"usage: lowkey report [-j|--json | --html OUT] [-q|--quiet] TRACE\n"
	"\n"
	"Summarize a lowkey trace: events by name (count, rate), spans (durations p50/p99/max by wall\n"
	"time and, when the trace recorded it with --cputime, by thread CPU time), counter tracks,\n"
	"threads, and events lost to full buffers. When it recorded context switches (--sched), each\n"
	"span name's and each thread's wall time in spans split into on-CPU, runnable (preempted)\n"
	"and blocked. TRACE is a CTF directory, or a JSON or Perfetto file lowkey wrote\n"
	"(--format json|perfetto), told by content.\n"
	"\n"
	"  -j, --json  print the summary as JSON\n"
	"  --html OUT  write one self-contained HTML page to OUT ('-': standard output): latency\n"
	"              histograms, a per-thread timeline of spans, the --sched split by thread,\n"
	"              counters as line charts (a line per thread), the tables\n"
	"  -q, --quiet no status line while the trace is read (shown on a terminal only)\n";

static int report_run(int argc, char **argv)
{
	static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
					      { "html", required_argument, NULL, 'H' },
					      { "quiet", no_argument, NULL, 'q' },
					      { NULL, 0, NULL, 0 } };
	struct report rep = { 0 };
	bool json = false, quiet = false;
	const char *html = NULL;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jq", opts, NULL)) != -1) {
		if (c != 'j' && c != 'H' && c != 'q') {
			fputs(report_usage, stderr);
			return CLI_EXIT_USAGE;
		}
		json |= c == 'j';
		quiet |= c == 'q';
		html = c == 'H' ? optarg : html;
	}
	if (optind != argc - 1 || (json && html)) {
		fputs(report_usage, stderr);
		return CLI_EXIT_USAGE;
	}
	status_begin("report", !json && !quiet);
	if (html) {
		/* the page reads the events twice: to measure, then to draw */
		status_reading_begin(argv[optind], 2);
		rc = report_html(argv[optind], html);
		status_reading_end();
		return rc;
	}
	status_reading_begin(argv[optind], 1);
	rc = lk_trace_file_open(argv[optind], &rep.tf);
	if (rc) {
		status_reading_end();
		cli_error("report", "record a trace with `lowkey trace` (any --format)", "%s",
			  lk_last_error());
		return CLI_EXIT_FAIL;
	}
	rep.in = lk_trace_file_get_info(rep.tf);
	rc = read_events(&rep);
	if (rc == 0)
		span_split_compute(&rep.split);
	status_reading_end();
	if (rc == 0) {
		if (json)
			print_json(&rep, argv[optind]);
		else
			print_text(&rep, argv[optind]);
	} else {
		cli_error("report", NULL, "%s", rc == -ENOMEM ? "out of memory" : lk_last_error());
	}
	free_report(&rep);
	return rc ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

const struct cli_command cmd_report = {
	.name = "report",
	.summary = "summarize a trace: events, spans, counters, threads, losses",
	.usage = report_usage,
	.run = report_run,
};
